-- core/ops/rnn.lua — MXNet's fused recurrent op (rnn_relu, rnn_tanh, lstm, gru over a
-- packed parameter vector) and its backward: the op table's rnn family
-- (kernels/*/rnn.c and spec/rnn_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field. docs/rnn.md: the layout,
-- the calling convention and the gradient.
local ops = {}
local function op(t) ops[#ops + 1] = t end

-- The params rnn and rnn_backward share (MXNet's RNN attributes).
local function shared_params()
  return {
    { "state_size", "int", nil, doc = "hidden units H (required)" },
    { "num_layers", "int", nil, doc = "stacked layers L (required)" },
    { "bidirectional", "bool", false, doc = "a second, time-reversed direction per layer "
      .. "(D = 2): outputs concatenated along the last axis" },
    { "mode", "enum", nil, values = { "rnn_relu", "rnn_tanh", "lstm", "gru" },
      doc = "the cell (required)" },
    { "p", "float", 0, doc = "dropout on the outputs of every layer but the last, in "
      .. "training only" },
    { "state_outputs", "bool", false, doc = "also return the final states hy (and cy)" },
    { "projection_size", "int", nil, doc = "lstm: LSTMP's projection size R (1..state_size): "
      .. "the state and the output are r = W_hr h (docs/rnn.md)" },
    { "lstm_state_clip_min", "float", nil, doc = "lstm: clip the cell state from below" },
    { "lstm_state_clip_max", "float", nil, doc = "lstm: clip the cell state from above" },
    { "lstm_state_clip_nan", "bool", false, doc = "lstm: a NaN cell state becomes "
      .. "lstm_state_clip_min (with clipping on)" },
    { "use_sequence_length", "bool", false, doc = "read per-sample lengths from the "
      .. "sequence_length input" },
  }
end

-- The gradient: rnn_backward recomputes the forward (docs/rnn.md) from the same inputs
-- and, with dropout, the masks the forward returned as its last output. Inputs after
-- `state` are MXNet's: state_cell only for lstm, then sequence_length only with
-- use_sequence_length; rnn_backward takes them all at fixed positions (stand-ins when
-- absent: the kernels ignore them).
local BW_KEYS = { "state_size", "num_layers", "bidirectional", "mode", "p",
  "projection_size", "lstm_state_clip_min", "lstm_state_clip_max", "lstm_state_clip_nan",
  "use_sequence_length" }
local function rnn_grad(F, x, y, g, p, need)
  local lstm = p.mode == "lstm"
  local k = 4
  local cell = x[3]
  if lstm then cell = x[4]; k = 5 end
  local seqlen = p.use_sequence_length and x[k] or x[3]
  local nst = p.state_outputs and (lstm and 3 or 2) or 1
  local dropout = (p.training and (p.p or 0) > 0 and (p.num_layers or 1) > 1) and true or false
  local mask = dropout and y[nst + 1] or x[3]
  local reserve = p.training and y[nst + (dropout and 2 or 1)] or nil
  local dy = g[1] or F.zeros_like(y[1])
  local dhy = (p.state_outputs and g[2]) or F.zeros_like(x[3])
  local dcy = (p.state_outputs and lstm and g[3]) or F.zeros_like(x[3])
  local q = { use_mask = dropout, use_reserve = reserve ~= nil,
    data_grad = not need or need[1] ~= false }
  for i = 1, #BW_KEYS do q[BW_KEYS[i]] = p[BW_KEYS[i]] end
  local dx, dw, dh, dc = F.rnn_backward(x[1], x[2], x[3], cell, seqlen, mask, dy, dhy, dcy,
    reserve or x[3], q)
  local r = { dx, dw, dh }
  if lstm then r[4] = dc end
  if need then
    for i = 1, 4 do if need[i] == false then r[i] = nil end end
  end
  return r
end

local fwd_params = shared_params()
fwd_params[#fwd_params + 1] = { "training", "bool", false,
  doc = "train mode (filled from mx.autograd's flag): dropout only then" }
op { name = "rnn", family = "rnn", cpu = { supports = true }, infer = "rnn", partial = true,
  inputs = { "data", "parameters", "state", "state_cell?", "sequence_length?" },
  outputs = { "out", "hy", "cy", "mask" }, nout = "rnn", nout_by = "state_outputs",
  dtypes = "numeric", promote = { 1, 2, 3 }, amp = "fp32", train_flag = "training",
  random = true, params = fwd_params, grad = rnn_grad,
  doc = "MXNet's fused RNN: data (T, N, I) time-major, parameters the packed 1-D vector "
    .. "(all i2h/h2h(/h2r) weights per layer and direction, then all biases, MXNet's order; gates "
    .. "lstm i,f,g,o, gru r,z,n), state (L*D, N, H), then state_cell (lstm only) and "
    .. "sequence_length (N) (with use_sequence_length only), MXNet's input order. Outputs: "
    .. "out (T, N, D*H); with state_outputs hy (L*D, N, H) and, for lstm, cy; in training "
    .. "with p > 0 and L > 1 one more holds the dropout masks (L-1, T, N, D*H), and in "
    .. "training a last one the reserve (1-D: every step's gates) the gradient reads. See "
    .. "docs/rnn.md." }

local bw_params = shared_params()
table.remove(bw_params, 6) -- state_outputs: the backward always takes dhy/dcy
bw_params[#bw_params + 1] = { "use_mask", "bool", false,
  doc = "mask holds the forward's dropout masks (else it is ignored)" }
bw_params[#bw_params + 1] = { "data_grad", "bool", true,
  doc = "false: ddata is not needed (zeros; the fast kernel skips its GEMM)" }
bw_params[#bw_params + 1] = { "use_reserve", "bool", false,
  doc = "reserve holds the forward's training reserve (else the forward is recomputed)" }
op { name = "rnn_backward", family = "rnn", cpu = { supports = true }, infer = "rnn_backward",
  inputs = { "data", "parameters", "state", "state_cell", "sequence_length", "mask",
    "dout", "dhy", "dcy", "reserve" },
  outputs = { "ddata", "dparameters", "dstate", "dstate_cell" },
  dtypes = "numeric", promote = { 1, 2, 3, 4, 6, 7, 8, 9, 10 }, amp = "fp32", nondiff = true,
  params = bw_params,
  doc = "The gradients of rnn (BPTT) for data, parameters, state and state_cell from dout "
    .. "(T, N, D*H), dhy and dcy (L*D, N, H), reading the forward's training reserve (or "
    .. "recomputing the forward without use_reserve). state_cell, sequence_length, mask and "
    .. "reserve are read only for lstm, use_sequence_length, use_mask and use_reserve; pass "
    .. "any tensor otherwise. dstate_cell is zeros unless lstm." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = { rnn = { "RNN" } }

return ops, MXNET
