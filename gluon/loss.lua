-- mx.gluon.loss — losses (MXNet's semantics). Each returns one value per sample: the
-- loss is averaged over every axis but batch_axis (1-based, default 1).
--
--   local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
--   local l = loss_fn(net(x), label)          -- shape (batch,)
--   local l2 = loss_fn(pred, label, sample_weight)
--
-- Constructor arguments (all losses): weight (a global scale, nil = 1) and batch_axis,
-- with each loss's own in MXNet's order: positionally or by name (MXNet's calling
-- convention, mx.core.class signature).
-- sample_weight (forward's third argument) broadcasts against the elementwise loss.
-- Class labels are MXNet's 0-based class ids (docs/ops-notes.md).
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local fast = require("mx.gluon._fast")

local Block = block.Block
local type, error, rawget = type, error, rawget

local M = {}

local Loss = Block:extend("Loss")
M.Loss = Loss

-- o: the constructor's arguments
local function loss_init(self, name, o, level)
  Block.__init(self)
  self._weight = o.weight
  self._batch_axis = o.batch_axis or 1
  if type(self._batch_axis) ~= "number" or self._batch_axis == 0 then
    error(name .. ": batch_axis must be a non-zero integer (1-based)", level + 1)
  end
  self._axes_cache = {}
  return o
end

-- loss(pred, label, sample_weight, pos_weight): pred and label must be tensors, pred
-- of a floating-point dtype (integer preds are refused: uint8 arithmetic wraps); an
-- error inside forward (an op's, positioned in this file) is re-raised naming the
-- loss, at the caller's line. (Explicit arguments, no varargs: a hot path.)
local is_tensor, rethrow, run_hooked = nd.is_tensor, block._rethrow, block._run_hooked
local FLOAT = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local function loss_call(self, pred, label, sample_weight, pos_weight)
  if type(pred) == "table" and require("mx.symbol").is_symbol(pred) then
    -- called on Symbols (MXNet 1.x's F=symbol): a Symbol (mx.gluon.symbol_node)
    local s = require("mx.gluon.symbol_node").call(self, 2, pred, label, sample_weight, pos_weight)
    return s
  end
  if not is_tensor(pred) or not is_tensor(label) then
    local which = is_tensor(pred) and "label" or "pred"
    error(string.format("%s: %s must be a tensor, got %s", getmetatable(self).__name, which,
      type(which == "pred" and pred or label)), 2)
  end
  if not FLOAT[pred:dtype()] then
    error(string.format("%s: pred must be a floating-point tensor, got dtype %s (integer "
      .. "arithmetic would wrap; cast it with pred:astype('float32'))", getmetatable(self).__name,
      pred:dtype()), 2)
  end
  local hooks = rawget(self, "_hooks")
  local ok, r
  if hooks ~= nil then
    ok, r = pcall(run_hooked, self, hooks, pred, label, sample_weight, pos_weight)
  else
    ok, r = pcall(self.forward, self, pred, label, sample_weight, pos_weight)
  end
  if not ok then rethrow(getmetatable(self).__name, r, 2) end
  return r
end

local WB = { "weight", "batch_axis" }
-- loss_class(name, params, setup[, named]): the Loss subclass M[name]; its constructor
-- takes params (MXNet's, in its order: nil for (weight, batch_axis)), then setup(self, o)
-- reads its own.
local function loss_class(name, params, setup, named)
  local cls = Loss:extend(name)
  cls.__call = loss_call
  M[name] = cls
  local SIG = block.sig(cls, params or WB, named)
  function cls:__init(...)
    local o = loss_init(self, name, SIG(3, ...), 3)
    if setup then setup(self, o) end
  end
  return cls
end
local LOSS_SIG = block.sig(Loss, WB)
function Loss:__init(...)
  loss_init(self, "Loss", LOSS_SIG(3, ...), 3)
end

-- The axes to average over for an ndim-d loss: all but the batch axis (cached).
local function mean_axes(self, ndim)
  local c = self._axes_cache[ndim]
  if c == nil then
    local b = self._batch_axis
    if b < 0 then b = ndim + b + 1 end
    local axes = {}
    for i = 1, ndim do if i ~= b then axes[#axes + 1] = i end end
    c = #axes > 0 and { axis = axes } or false
    self._axes_cache[ndim] = c
  end
  return c
end

-- sample_weight and the global weight, then the mean over the non-batch axes.
local function finish(self, loss, sample_weight, weight)
  if sample_weight ~= nil then loss = nd.mul(loss, sample_weight) end
  if weight ~= nil and weight ~= 1 then loss = nd.mul_scalar(loss, { scalar = weight }) end
  local ax = mean_axes(self, loss:ndim())
  if ax then loss = nd.mean(loss, ax) end
  return loss
end

-- label reshaped to pred's shape when they have the same size (MXNet's reshape_like).
local function like(label, pred)
  if label:ndim() == pred:ndim() then return label end
  return label:reshape(pred:shape())
end

---------------------------------------------------------------- L2 / L1
-- L2Loss({weight=1}): weight/2 * (label - pred)^2.
local L2Loss = loss_class("L2Loss")
function L2Loss:forward(pred, label, sample_weight)
  local l = nd.square(nd.sub(like(label, pred), pred))
  local r = finish(self, l, sample_weight, (self._weight or 1) / 2)
  return r
end

-- L1Loss({weight=}): |label - pred|.
local L1Loss = loss_class("L1Loss")
function L1Loss:forward(pred, label, sample_weight)
  local l = nd.abs(nd.sub(like(label, pred), pred))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

---------------------------------------------------------------- sigmoid BCE
-- SigmoidBinaryCrossEntropyLoss(from_sigmoid=false): binary cross-entropy on logits
-- (stable: relu(x) - x*z + log(1 + e^-|x|)) or on probabilities (from_sigmoid=true,
-- -(z log(p + 1e-12) + (1-z) log(1 - p + 1e-12))). forward(pred, label,
-- sample_weight, pos_weight): pos_weight scales the positive term.
local SBCE = loss_class("SigmoidBinaryCrossEntropyLoss", { "from_sigmoid", "weight", "batch_axis" },
  function(self, o) self._from_sigmoid = o.from_sigmoid or false end)
M.SigmoidBCELoss = SBCE
function SBCE:forward(pred, label, sample_weight, pos_weight)
  label = like(label, pred)
  local l
  if not self._from_sigmoid then
    local soft = nd.softrelu(nd.neg(nd.abs(pred)))
    if pos_weight == nil then
      l = nd.add(nd.sub(nd.relu(pred), nd.mul(pred, label)), soft)
    else
      -- log_weight = 1 + (pos_weight - 1) * label
      local lw = nd.add_scalar(nd.mul(nd.sub_scalar(pos_weight, { scalar = 1 }), label),
        { scalar = 1 })
      l = nd.add(nd.sub(pred, nd.mul(pred, label)),
        nd.mul(lw, nd.add(soft, nd.relu(nd.neg(pred)))))
    end
  else
    local eps = 1e-12
    local lp = nd.log(nd.add_scalar(pred, { scalar = eps }))
    local ln = nd.log(nd.add_scalar(nd.rsub_scalar(pred, { scalar = 1 }), { scalar = eps }))
    local pos = nd.mul(lp, label)
    if pos_weight ~= nil then pos = nd.mul(pos, pos_weight) end
    l = nd.neg(nd.add(pos, nd.mul(ln, nd.rsub_scalar(label, { scalar = 1 }))))
  end
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

---------------------------------------------------------------- softmax CE
-- SoftmaxCrossEntropyLoss(axis=-1, sparse_label=true, from_logits=false):
-- -log_softmax(pred)[label] with 0-based class ids (sparse) or -sum(label *
-- log_softmax(pred)) with label distributions. from_logits: pred already holds
-- log-probabilities.
local SCE = loss_class("SoftmaxCrossEntropyLoss",
  { "axis", "sparse_label", "from_logits", "weight", "batch_axis" }, function(self, o)
  self._axis = o.axis or -1
  self._sparse_label = o.sparse_label ~= false
  self._from_logits = o.from_logits or false
  self._ax = { axis = self._axis }
  self._pick = fast.prepare("pick", { axis = self._axis, keepdims = true }, 4) -- setup, __init
  self._sum = { axis = self._axis, keepdims = true }
  self._one = { scalar = 1 }
end)
M.SoftmaxCELoss = SCE
function SCE:forward(pred, label, sample_weight)
  if not self._from_logits then pred = nd.log_softmax(pred, self._ax) end
  local l
  if self._sparse_label then
    -- a label with a unit class axis ((N, 1) for (N, C)) drops it
    if label:ndim() == pred:ndim() then
      local s, a = pred:shape(), self._axis
      if a < 0 then a = #s + a + 1 end
      table.remove(s, a)
      label = label:reshape(s)
    end
    -- class ids are 0-based, pick reads 1-based positions
    l = nd.neg(fast.call(self._pick, 2, pred, nd.add_scalar(label, self._one)))
  else
    l = nd.neg(nd.sum(nd.mul(pred, like(label, pred)), self._sum))
  end
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

---------------------------------------------------------------- Huber
-- HuberLoss(rho=1): 0.5/rho * d^2 where |d| <= rho, |d| - 0.5*rho elsewhere.
local Huber = loss_class("HuberLoss", { "rho", "weight", "batch_axis" },
  function(self, o) self._rho = o.rho or 1 end)
function Huber:forward(pred, label, sample_weight)
  local rho = self._rho
  local d = nd.abs(nd.sub(like(label, pred), pred))
  local l = nd.where(nd.greater_scalar(d, { scalar = rho }),
    nd.sub_scalar(d, { scalar = 0.5 * rho }),
    nd.mul_scalar(nd.square(d), { scalar = 0.5 / rho }))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

---------------------------------------------------- hinge, logistic, KL, triplet, cosine, Poisson, SDML
-- label (or any second input) in pred's dtype: an integer label would otherwise turn
-- log/arithmetic integer (MXNet promotes to the float dtype).
local function as_pred(v, pred)
  v = like(v, pred)
  if v:dtype() ~= pred:dtype() then v = v:astype(pred:dtype()) end
  return v
end

local function check_tensor(self, what, v)
  if not is_tensor(v) then
    error(string.format("%s: %s must be a tensor, got %s", getmetatable(self).__name, what,
      type(v)), 0)
  end
end

local function margin_setup(default)
  return function(self, o)
    local m = o.margin
    if m == nil then m = default end
    if type(m) ~= "number" then
      error(getmetatable(self).__name .. ": margin must be a number, got " .. type(m), 4)
    end
    self._margin = m
  end
end

-- HingeLoss(margin=1): max(0, margin - pred * label), labels -1/1.
local Hinge = loss_class("HingeLoss", { "margin", "weight", "batch_axis" }, margin_setup(1))
function Hinge:forward(pred, label, sample_weight)
  local l = nd.relu(nd.rsub_scalar(nd.mul(pred, as_pred(label, pred)), { scalar = self._margin }))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

-- SquaredHingeLoss(margin=1): max(0, margin - pred * label)^2.
local SqHinge = loss_class("SquaredHingeLoss", { "margin", "weight", "batch_axis" },
  margin_setup(1))
function SqHinge:forward(pred, label, sample_weight)
  local l = nd.square(nd.relu(nd.rsub_scalar(nd.mul(pred, as_pred(label, pred)),
    { scalar = self._margin })))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

-- LogisticLoss(label_format="signed"): log(1 + exp(-pred * label)) for labels -1/1
-- ("signed") or 0/1 ("binary"), computed stably as relu(x) - x*z + log(1 + e^-|x|)
-- with z = (label + 1) / 2 for signed labels.
local Logistic = loss_class("LogisticLoss", { "weight", "batch_axis", "label_format" },
  function(self, o)
  local f = o.label_format or "signed"
  if f ~= "signed" and f ~= "binary" then
    error("LogisticLoss: label_format can only be 'signed' or 'binary', got " .. tostring(f), 4)
  end
  self._signed = f == "signed"
end)
function Logistic:forward(pred, label, sample_weight)
  local z = as_pred(label, pred)
  if self._signed then z = nd.mul_scalar(nd.add_scalar(z, { scalar = 1 }), { scalar = 0.5 }) end
  local l = nd.add(nd.sub(nd.relu(pred), nd.mul(pred, z)), nd.softrelu(nd.neg(nd.abs(pred))))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

-- KLDivLoss(from_logits=true, axis=-1): label * (log(label + 1e-12) - pred), pred
-- holding log-probabilities (from_logits) or logits (log_softmax along axis first).
local KLDiv = loss_class("KLDivLoss", { "from_logits", "axis", "weight", "batch_axis" },
  function(self, o)
  self._from_logits = o.from_logits ~= false
  self._ax = { axis = o.axis or -1 }
end)
function KLDiv:forward(pred, label, sample_weight)
  if not self._from_logits then pred = nd.log_softmax(pred, self._ax) end
  label = as_pred(label, pred)
  local l = nd.mul(label, nd.sub(nd.log(nd.add_scalar(label, { scalar = 1e-12 })), pred))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

-- TripletLoss(margin=1): forward(pred, positive, negative, sample_weight):
-- max(0, sum(|positive - pred|^2) - sum(|negative - pred|^2) + margin), the sums over
-- every axis but batch_axis.
local Triplet = loss_class("TripletLoss", { "margin", "weight", "batch_axis" }, margin_setup(1))
function Triplet:forward(pred, positive, negative, sample_weight)
  check_tensor(self, "negative", negative)
  local d = nd.sub(nd.square(nd.sub(as_pred(positive, pred), pred)),
    nd.square(nd.sub(as_pred(negative, pred), pred)))
  local ax = mean_axes(self, d:ndim())
  if ax then d = nd.sum(d, ax) end
  local l = nd.relu(nd.add_scalar(d, { scalar = self._margin }))
  if sample_weight ~= nil then l = nd.mul(l, sample_weight) end
  local w = self._weight
  if w ~= nil and w ~= 1 then l = nd.mul_scalar(l, { scalar = w }) end
  return l
end

-- CosineEmbeddingLoss(margin=0): forward(input1, input2, label, sample_weight) with
-- labels 1/-1: 1 - cos_sim where label == 1, clip(cos_sim - margin, 0, 1 - margin)
-- elsewhere; cos_sim along the last axis, the norms' product floored at 1e-12.
local CosEmb = loss_class("CosineEmbeddingLoss", { "weight", "batch_axis", "margin" },
  margin_setup(0))
local LAST = { axis = -1 }
function CosEmb:forward(input1, input2, label, sample_weight)
  check_tensor(self, "label", label)
  local x = as_pred(input2, input1)
  local y = input1
  local xn = nd.norm(x, LAST):reshape({ -1, 1 })
  local yn = nd.norm(y, LAST):reshape({ -1, 1 })
  local dot = nd.sum(nd.mul(x, y), LAST):reshape({ -1, 1 })
  local cos = nd.div(dot, nd.maximum_scalar(nd.mul(xn, yn), { scalar = 1e-12 }))
  local lab = label:reshape(cos:shape())
  local m = self._margin
  local l = nd.where(nd.equal_scalar(lab, { scalar = 1 }), nd.rsub_scalar(cos, { scalar = 1 }),
    nd.clip(nd.sub_scalar(cos, { scalar = m }), { a_min = 0, a_max = 1 - m }))
  local r = finish(self, l, sample_weight, self._weight)
  return r
end

-- PoissonNLLLoss(from_logits=true, compute_full=false): forward(pred, target,
-- sample_weight, epsilon=1e-8): exp(pred) - target * pred (pred = log rate) or
-- pred - target * log(pred + epsilon); compute_full adds Stirling's approximation of
-- log(target!) where target > 1 (0 elsewhere, also where MXNet's product gives NaN); the
-- result is the mean over every element (shape (1)), as MXNet 1.9's F.mean(loss).
local PI2 = 2 * math.pi
local Poisson = loss_class("PoissonNLLLoss", { "weight", "from_logits", "batch_axis", "compute_full" },
  function(self, o)
    self._from_logits = o.from_logits ~= false
    self._compute_full = o.compute_full or false
  end)
function Poisson:forward(pred, target, sample_weight, epsilon)
  if epsilon ~= nil and type(epsilon) ~= "number" then
    error("PoissonNLLLoss: epsilon must be a number, got " .. type(epsilon), 0)
  end
  target = as_pred(target, pred)
  local l
  if self._from_logits then
    l = nd.sub(nd.exp(pred), nd.mul(target, pred))
  else
    l = nd.sub(pred, nd.mul(target, nd.log(nd.add_scalar(pred, { scalar = epsilon or 1e-8 }))))
  end
  if self._compute_full then
    local st = nd.add(nd.sub(nd.mul(target, nd.log(target)), target),
      nd.mul_scalar(nd.log(nd.mul_scalar(target, { scalar = PI2 })), { scalar = 0.5 }))
    l = nd.add(l, nd.where(nd.greater_scalar(target, { scalar = 1 }), st, nd.zeros_like(st)))
  end
  if sample_weight ~= nil then l = nd.mul(l, sample_weight) end
  if self._weight ~= nil and self._weight ~= 1 then l = nd.mul_scalar(l, { scalar = self._weight }) end
  if l:size() == 0 then
    error("PoissonNLLLoss: pred is empty: the loss is the mean over every element", 2)
  end
  local r = nd.mean(l):reshape(1) -- MXNet 1.9's: the mean over every element, shape (1)
  return r
end

-- SDMLLoss(smoothing_parameter=0.3): forward(x1, x2) with x1, x2 of shape (N, D)
-- holding N aligned pairs (row i of x1 matches row i of x2, the other rows act as
-- negatives). Row i's loss is KL(labels_i || softmax(-d_i)) averaged over the N
-- columns (MXNet 2.0's KLDivLoss, no extra factor since PR 18423), where
-- d_ij = |x1_i - x2_j|^2 and labels = (1 - s) on the diagonal, s / (N - 1) off it.
-- The batch axis is the first; N >= 2.
local SDML = loss_class("SDMLLoss", { "smoothing_parameter", "weight", "batch_axis" },
  function(self, o)
  local sp = o.smoothing_parameter
  if sp == nil then sp = 0.3 end
  if type(sp) ~= "number" or sp < 0 or sp > 1 then
    error("SDMLLoss: smoothing_parameter must be a number in [0, 1], got " .. tostring(sp), 4)
  end
  if self._batch_axis ~= 1 then
    error("SDMLLoss: the batch axis is the first (batch_axis=1), got " .. self._batch_axis, 4)
  end
  self._smoothing = sp
  self._labels = {} -- (N, dtype) -> the smoothed label matrix
end)
local AXIS2, AXIS3 = { axis = 2 }, { axis = 3 }
function SDML:forward(x1, x2, extra)
  check_tensor(self, "x2", x2)
  if extra ~= nil then -- MXNet's forward has no sample_weight: never ignore an argument
    error("SDMLLoss: forward takes (x1, x2) only, got a third argument (" .. type(extra)
      .. "); SDMLLoss has no sample_weight", 0)
  end
  local s1, s2 = x1:shape(), x2:shape()
  if #s1 ~= 2 or #s2 ~= 2 or s1[1] ~= s2[1] or s1[2] ~= s2[2] then
    error(string.format("SDMLLoss: x1 and x2 must both have shape (N, D), got (%s) and (%s)",
      table.concat(s1, ", "), table.concat(s2, ", ")), 0)
  end
  local n, dim = s1[1], s1[2]
  if n < 2 then error("SDMLLoss: needs a batch of at least 2 pairs, got " .. n, 0) end
  x2 = as_pred(x2, x1)
  local key = n .. x1:dtype()
  local lab = self._labels[key]
  if lab == nil then
    local sp, rows = self._smoothing, {}
    for i = 1, n do
      local r = {}
      for j = 1, n do r[j] = i == j and 1 - sp or sp / (n - 1) end
      rows[i] = r
    end
    lab = nd.array(rows, { dtype = x1:dtype(), ctx = x1:context() })
    self._labels[key] = lab
  end
  local d = nd.sum(nd.square(nd.sub(x1:reshape({ n, 1, dim }), x2:reshape({ 1, n, dim }))), AXIS3)
  local logp = nd.log_softmax(nd.mul_scalar(d, { scalar = -1 }), AXIS2)
  local l = nd.mul(lab, nd.sub(nd.log(nd.add_scalar(lab, { scalar = 1e-12 })), logp))
  local r = finish(self, l, nil, self._weight)
  return r
end

---------------------------------------------------------------- sequence losses
-- CTCLoss(layout="NTC", label_layout="NT"): MXNet's gluon.loss.CTCLoss over ctc_loss
-- with blank_label "last" (as MXNet's Gluon: classes 0..C-2, the blank C-1, labels padded
-- with -1). forward(pred, label, pred_lengths, label_lengths): pred (N, T, C) ("NTC") or
-- (T, N, C) ("TNC") of unnormalised scores, label (N, L) ("NT") or (L, N) ("TN"); the
-- optional lengths (N). Returns (N): -log p(label | pred) (times weight). A label that
-- cannot fit its sequence gives +inf (MXNet: 0). MXNet's fifth argument, sample_weight,
-- is not taken.
local CTC_NIL = { blank_label = "last" }
local CTC_D = { blank_label = "last", use_data_lengths = true }
local CTC_L = { blank_label = "last", use_label_lengths = true }
local CTC_DL = { blank_label = "last", use_data_lengths = true, use_label_lengths = true }
local SWAP12 = { dim1 = 1, dim2 = 2 }
local CTC = loss_class("CTCLoss", { "layout", "label_layout", "weight" }, function(self, o)
  local layout, ll = o.layout or "NTC", o.label_layout or "NT"
  if layout ~= "NTC" and layout ~= "TNC" then
    error("CTCLoss: layout must be 'NTC' or 'TNC', got " .. tostring(layout), 4)
  end
  if ll ~= "NT" and ll ~= "TN" then
    error("CTCLoss: label_layout must be 'NT' or 'TN', got " .. tostring(ll), 4)
  end
  self._layout, self._label_layout = layout, ll
  self._batch_axis = ll == "NT" and 1 or 2
end, { "batch_axis" })
function CTC:forward(pred, label, pred_lengths, label_lengths)
  if pred:ndim() ~= 3 then
    error(string.format("CTCLoss: pred must be 3-D (%s), got shape (%s)", self._layout,
      table.concat(pred:shape(), ", ")), 0)
  end
  if pred_lengths ~= nil then check_tensor(self, "pred_lengths", pred_lengths) end
  if label_lengths ~= nil then check_tensor(self, "label_lengths", label_lengths) end
  if self._layout == "NTC" then pred = nd.swapaxes(pred, SWAP12) end
  if self._label_layout == "TN" then label = nd.swapaxes(label, SWAP12) end
  local l
  if pred_lengths ~= nil and label_lengths ~= nil then
    l = nd.ctc_loss(pred, label, pred_lengths, label_lengths, CTC_DL)
  elseif pred_lengths ~= nil then
    l = nd.ctc_loss(pred, label, pred_lengths, CTC_D)
  elseif label_lengths ~= nil then
    l = nd.ctc_loss(pred, label, label_lengths, CTC_L)
  else
    l = nd.ctc_loss(pred, label, CTC_NIL)
  end
  local w = self._weight
  if w ~= nil and w ~= 1 then l = nd.mul_scalar(l, { scalar = w }) end
  return l
end

-- MaskedSoftmaxCELoss(sparse_label=true, from_logits=false, average="all"): GluonNLP's
-- (and d2l's) softmax cross-entropy over padded sequences. forward(pred (N, T, V), label
-- (N, T) of 0-based class ids (or (N, T, V) distributions with sparse_label=false),
-- valid_length (N)) -> (N): the tokens at t >= valid_length count 0, and each sample's
-- token losses are averaged over all T steps (GluonNLP's value, average="all") or over
-- its valid_length steps (average="valid"; 0 for an empty sequence).
local MSCE = loss_class("MaskedSoftmaxCELoss",
  { "sparse_label", "from_logits", "weight", "batch_axis" }, function(self, o)
  self._sparse_label = o.sparse_label ~= false
  self._from_logits = o.from_logits or false
  local avg = o.average or "all"
  if avg ~= "all" and avg ~= "valid" then
    error("MaskedSoftmaxCELoss: average must be 'all' or 'valid', got " .. tostring(avg), 4)
  end
  self._average = avg
  self._last = { axis = -1 }
  self._mask = { use_sequence_length = true, axis = 2 }
  self._t = { axis = 2 }
  self._one = { scalar = 1 }
end, { "average" })
M.MaskedSoftmaxCrossEntropyLoss = MSCE
function MSCE:forward(pred, label, valid_length, extra)
  if extra ~= nil then
    error("MaskedSoftmaxCELoss: forward takes (pred, label, valid_length), got a fourth "
      .. "argument (" .. type(extra) .. ")", 0)
  end
  if pred:ndim() ~= 3 then
    error(string.format("MaskedSoftmaxCELoss: pred must be (N, T, V), got shape (%s)",
      table.concat(pred:shape(), ", ")), 0)
  end
  if valid_length == nil then
    error("MaskedSoftmaxCELoss: valid_length (N) is required (forward(pred, label, "
      .. "valid_length))", 0)
  end
  check_tensor(self, "valid_length", valid_length)
  local s = pred:shape()
  if not self._from_logits then pred = nd.log_softmax(pred, self._last) end
  local l
  if self._sparse_label then
    local ls = label:shape()
    if #ls ~= 2 or ls[1] ~= s[1] or ls[2] ~= s[2] then
      error(string.format("MaskedSoftmaxCELoss: label must be (N, T) = (%d, %d), got shape (%s)",
        s[1], s[2], table.concat(ls, ", ")), 0)
    end
    l = nd.neg(nd.pick(pred, nd.add_scalar(label, self._one), self._last))
  else
    l = nd.neg(nd.sum(nd.mul(pred, label), self._last))
  end
  l = nd.sequence_mask(l, valid_length, self._mask) -- (N, T); 0 past each length
  local w = self._weight
  if w ~= nil and w ~= 1 then l = nd.mul_scalar(l, { scalar = w }) end
  if self._average == "all" then return nd.mean(l, self._t) end
  local n = nd.maximum_scalar(nd.cast(valid_length, { dtype = l:dtype() }), self._one)
  return nd.div(nd.sum(l, self._t), n)
end

return M
