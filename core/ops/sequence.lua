-- core/ops/sequence.lua — sequence ops: masks, last elements and reversal over padded
-- batches, CTC loss: the op table's sequence family (kernels/*/sequence.c and
-- spec/sequence_spec.lua share the base name). core/ops/optable.lua joins the families in
-- op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- SequenceMask/Last/Reverse
-- data is (T, N, ...) with axis 1 or (N, T, ...) with axis 2 (MXNet's axis 0 / 1); the
-- optional sequence_length (N) (any numeric dtype, integral values in 0..T) is read only
-- with use_sequence_length = true, as MXNet lists the input only then.
local USE = { "use_sequence_length", "bool", false, doc = "read sequence_length (N); "
  .. "without it every sequence has length T" }
local AXIS = { "axis", "axis", 1, doc = "the time axis: 1 (data (T, N, ...)) or 2 "
  .. "(data (N, T, ...)); MXNet's 0 / 1" }

-- the options a gradient passes on (no pairs(): the fields by name)
local function seq_opts(p, value)
  return { use_sequence_length = p.use_sequence_length, axis = p.axis, value = value }
end

op { name = "sequence_mask", family = "sequence", cpu = true, infer = "sequence_mask",
  inputs = { "data", "sequence_length?" }, dtypes = "numeric", inplace = { { 1, 1 } },
  params = { USE, { "value", "float", 0, doc = "written at the steps t > length" }, AXIS },
  grad = function(F, x, _, g, p)
    if not x[2] then return { g[1] } end
    return { F.sequence_mask(g[1], x[2], seq_opts(p, 0)) }
  end,
  doc = "MXNet's SequenceMask: out = data, with the time steps at and after each "
    .. "sequence's length set to `value` (data unchanged without use_sequence_length). "
    .. "Lengths must be integral values in 0..T (a clear error otherwise; MXNet does not check)." }

op { name = "sequence_last", family = "sequence", cpu = true, infer = "sequence_last",
  inputs = { "data", "sequence_length?" }, dtypes = "numeric", params = { USE, AXIS },
  grad = function(F, x, _, g, p)
    if x[2] then
      return { F.sequence_last_backward(g[1], x[1], x[2], seq_opts(p)) }
    end
    return { F.sequence_last_backward(g[1], x[1], seq_opts(p)) }
  end,
  doc = "MXNet's SequenceLast: each sequence's last valid step, data[length - 1] along the "
    .. "time axis (T - 1 without use_sequence_length): data's shape without that axis. "
    .. "Lengths must be integral values in 1..T." }
op { name = "sequence_last_backward", family = "sequence", infer = "sequence_last_backward",
  inputs = { "ograd", "data", "sequence_length?" }, dtypes = "numeric", shape_only = { 2 },
  nondiff = true, params = { USE, AXIS },
  doc = "sequence_last's gradient: zeros of data's shape with ograd written at each "
    .. "sequence's last valid step." }

op { name = "sequence_reverse", family = "sequence", cpu = true, infer = "sequence_reverse",
  inputs = { "data", "sequence_length?" }, dtypes = "numeric", params = { USE, AXIS },
  grad = function(F, x, _, g, p)
    if x[2] then return { F.sequence_reverse(g[1], x[2], seq_opts(p)) } end
    return { F.sequence_reverse(g[1], seq_opts(p)) }
  end,
  doc = "MXNet's SequenceReverse: the first length steps of each sequence reversed along "
    .. "the time axis, the padding steps after them left in place (the whole axis without "
    .. "use_sequence_length). Lengths must be integral values in 0..T. MXNet supports only "
    .. "the time axis first (axis 1); axis 2 works here too." }

---------------------------------------------------------------- CTC loss
local CTC_PARAMS = {
  { "use_data_lengths", "bool", false, doc = "read data_lengths (N): the valid steps of "
    .. "each sequence (else T)" },
  { "use_label_lengths", "bool", false, doc = "read label_lengths (N) (else each label "
    .. "ends at its first padding value: 0 with blank_label first, -1 with last)" },
  { "blank_label", "enum", "first", values = { "first", "last" }, doc = "the blank is "
    .. "class 0 (labels 1..C-1) or class C-1 (labels 0..C-2)" } }
op { name = "ctc_loss", family = "sequence", cpu = true, infer = "ctc_loss",
  inputs = { "data", "label", "data_lengths?", "label_lengths?" }, dtypes = "numeric",
  amp = "fp32", params = CTC_PARAMS,
  grad = function(F, x, _, g, p, need)
    if need and not need[1] then return {} end
    local q = { use_data_lengths = p.use_data_lengths, use_label_lengths = p.use_label_lengths,
      blank_label = p.blank_label }
    if x[4] then return { F.ctc_loss_backward(g[1], x[1], x[2], x[3], x[4], q) } end
    if x[3] then return { F.ctc_loss_backward(g[1], x[1], x[2], x[3], q) } end
    return { F.ctc_loss_backward(g[1], x[1], x[2], q) }
  end,
  doc = "MXNet's CTCLoss: the connectionist temporal classification loss -log p(label | "
    .. "data) of each sequence, (N), from data (T, N, C) of unnormalised activations "
    .. "(softmax over C taken inside) and label (N, L) of class indices. The optional inputs "
    .. "follow the flags in MXNet's order: data_lengths (with use_data_lengths) then "
    .. "label_lengths (with use_label_lengths). Labels must be integral classes, not the "
    .. "blank; lengths integral in 0..T and 0..L. A label that cannot fit in its sequence "
    .. "(length + repeats > steps) has loss +inf and a zero gradient (MXNet: 0)." }
op { name = "ctc_loss_backward", family = "sequence", cpu = true, infer = "ctc_loss_backward",
  inputs = { "ograd", "data", "label", "data_lengths?", "label_lengths?" }, dtypes = "numeric",
  amp = "fp32", nondiff = true, params = CTC_PARAMS,
  doc = "ctc_loss's gradient for data: ograd (N) times d loss / d activations = "
    .. "softmax(data) - the posterior of each class at each step (alpha-beta recursion); "
    .. "zero at the steps past a sequence's length." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
  sequence_mask = { "SequenceMask" }, sequence_last = { "SequenceLast" },
  sequence_reverse = { "SequenceReverse" },
  ctc_loss = { "CTCLoss", "ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss" },
}

return ops, MXNET
