-- mx.gluon.metric (also mx.metric) — evaluation metrics (MXNet 2.0 semantics).
--
--   local acc = mx.gluon.metric.Accuracy()
--   acc:update(labels, preds)     -- tensors or lists of tensors
--   local name, value = acc:get() -- "accuracy", 0.87
--   acc:reset()
--
-- Values are computed on the host in double precision (a tensor is read once per
-- update). Class labels are MXNet's 0-based class ids.
local nd = require("mx.nd")
local class = require("mx._class")

local type, error, tostring, ipairs, setmetatable, getmetatable, sqrt, log, huge =
  type, error, tostring, ipairs, setmetatable, getmetatable, math.sqrt, math.log, math.huge
local nan = 0 / 0
-- Host copies read through raw pointers stay referenced here (the GC does not follow
-- pointers) until the update that made them is done with them.
local anchor = {}
local function release() for k = #anchor, 1, -1 do anchor[k] = nil end end

local M = {}

local EvalMetric = class.base("EvalMetric")
M.EvalMetric = EvalMetric

local registry = {}
-- metric_class(cname, aliases): a subclass, found by create() under its lower-case
-- name and the aliases (create calls the constructor M[cname]).
local function metric_class(cname, aliases)
  local c = class.extend(EvalMetric, cname)
  c.__tostring = function(s)
    local n, v = s:get()
    if type(n) == "table" then return cname end
    return string.format("%s: %s=%s", cname, n, tostring(v))
  end
  for _, a in ipairs(aliases) do registry[a] = c end
  registry[cname:lower()] = c
  return c
end

function EvalMetric:reset()
  self.num_inst = 0
  self.sum_metric = 0
end

-- get() -> name, value (nan before any update).
function EvalMetric:get()
  if self.num_inst == 0 then return self.name, nan end
  return self.name, self.sum_metric / self.num_inst
end

-- get_name_value() -> { {name, value}, ... }
function EvalMetric:get_name_value()
  local n, v = self:get()
  if type(n) == "table" then
    local r = {}
    for i = 1, #n do r[i] = { n[i], v[i] } end
    return r
  end
  return { { n, v } }
end

local function shape_s(s) return "(" .. table.concat(s, ", ") .. (#s == 1 and ",)" or ")") end

-- The arguments as lists of tensors (a tensor is a list of one). what: "labels" or
-- "preds", named in errors.
local function as_list(cname, what, x, level)
  if nd.is_tensor(x) then return { x } end
  if type(x) == "table" and getmetatable(x) == nil then
    for i = 1, #x do
      if not nd.is_tensor(x[i]) then
        error(string.format("%s.update: %s[%d] must be a tensor, got %s", cname, what, i,
          type(x[i])), level + 1)
      end
    end
    return x
  end
  error(string.format("%s.update: %s must be a tensor or a list of tensors, got %s", cname,
    what, type(x)), level + 1)
end

-- A tensor's values as (double*, shape, size) on the host; keeps the copy alive in
-- the returned holder.
local function host(x)
  local h = x
  if x:dtype() ~= "float64" or x:context().dev_type ~= 1 then h = x:to(nil, "float64") end
  if h:context().dev_type ~= 1 then h = h:to(require("mx.context").cpu()) end
  anchor[#anchor + 1] = h
  return h:data_ptr(), x:shape(), x:size()
end

local function pairs_of(cname, labels, preds, level)
  labels, preds = as_list(cname, "labels", labels, level + 1), as_list(cname, "preds", preds, level + 1)
  if #labels ~= #preds then
    error(string.format("%s.update: %d labels but %d predictions", cname, #labels, #preds),
      level + 1)
  end
  return labels, preds
end

-- The context errors about pair i carry: both shapes.
local function where(i, ls, ps)
  return string.format(" (labels[%d] has shape %s, preds[%d] has shape %s)", i, shape_s(ls), i,
    shape_s(ps))
end

-- Raise unless every label is an integer in [0, hi) (hi nil: no upper bound; only 0
-- and 1 when binary).
local function check_ids(cname, i, lp, ln, hi, ls, ps, binary)
  for j = 0, ln - 1 do
    local v = lp[j]
    if v % 1 ~= 0 or v < 0 or (hi and v >= hi) or (binary and v > 1) then
      local want = binary and "a binary label (0 or 1)"
        or hi and string.format("a class id in [0, %d)", hi) or "a non-negative integer class id"
      error(string.format("%s.update: labels[%d] element %d is %s, not %s%s", cname, i, j + 1,
        tostring(v), want, where(i, ls, ps)), 0)
    end
  end
end

local function init(self, name, o)
  self.name = (o and o.name) or name
  self:reset()
  return self
end

-- per_pair(cls, cname, fn): cls.update(labels, preds) (and cls._update(labels, preds,
-- level): the same, raising its errors with error(msg, level)) that, for each (label,
-- pred) pair i, adds fn(self, i, lp, ls, ln, pp, ps, pn) -> sum, count to sum_metric
-- and num_inst (lp/pp: the host values as double*, ls/ps: shapes, ln/pn: sizes). fn
-- raises plain messages (fail); they reach the user's line from here.
local function per_pair(cls, cname, fn)
  local function _update(self, labels, preds, level)
    labels, preds = pairs_of(cname, labels, preds, level)
    for i = 1, #labels do
      local lp, ls, ln = host(labels[i])
      local pp, ps, pn = host(preds[i])
      local ok, sum, count = pcall(fn, self, i, lp, ls, ln, pp, ps, pn)
      release()
      if not ok then error(sum, level) end
      self.sum_metric = self.sum_metric + sum
      self.num_inst = self.num_inst + count
    end
  end
  cls._update = _update
  cls.update = function(self, labels, preds) _update(self, labels, preds, 3) end
end

-- fn's errors: plain messages (no position); per_pair raises them at the user's line.
local function fail(fmt, ...) error(string.format(fmt, ...), 0) end

-- Raise unless label and pred have the same number of samples (first dims).
local function check_rows(cname, i, ls, ps, n_l, n_p)
  if n_l ~= n_p then
    fail("%s.update: labels[%d] has %d samples but preds[%d] has %d%s", cname, i, n_l, i, n_p,
      where(i, ls, ps))
  end
end

---------------------------------------------------------------- Accuracy
-- Accuracy({axis=2}): with pred of one more axis than label (scores), the argmax of
-- pred along axis; with pred of label's shape, pred holds class ids. The fraction
-- equal to label (class ids: non-negative integers, below the class count).
local Accuracy = metric_class("Accuracy", { "acc", "accuracy" })
M.Accuracy = function(o)
  local axis = o and o.axis or 2
  if type(axis) ~= "number" or axis % 1 ~= 0 or axis == 0 then
    error("Accuracy: axis must be a non-zero integer (1-based), got " .. tostring(axis), 2)
  end
  local r = init(setmetatable({ axis = axis }, Accuracy), "accuracy", o)
  return r
end
per_pair(Accuracy, "Accuracy", function(self, i, lp, ls, ln, pp, ps, pn)
  local correct = 0
  if #ps ~= #ls or pn ~= ln then
    -- scores: argmax along axis (the last axis in the common case)
    local axis = self.axis
    if axis < 0 then axis = #ps + axis + 1 end
    if axis < 1 or axis > #ps then
      fail("Accuracy.update: axis %d is out of range for preds[%d] with %d dims%s", self.axis, i,
        #ps, where(i, ls, ps))
    end
    local inner = 1
    for d = axis + 1, #ps do inner = inner * ps[d] end
    local k = ps[axis]
    local outer = k > 0 and pn / (k * inner) or 0
    if k == 0 or outer * inner ~= ln then
      fail("Accuracy.update: labels[%d] has %d elements but preds[%d] gives %d predictions "
        .. "(argmax along axis %d)%s", i, ln, i, k > 0 and outer * inner or 0, self.axis,
        where(i, ls, ps))
    end
    check_rows("Accuracy", i, ls, ps, ls[1] or 1, axis == 1 and (ps[2] or 1) or ps[1])
    check_ids("Accuracy", i, lp, ln, k, ls, ps)
    local idx = 0
    for o = 0, outer - 1 do
      for j = 0, inner - 1 do
        local base = o * k * inner + j
        local best, bi = -huge, 0
        for c = 0, k - 1 do
          local v = pp[base + c * inner]
          if v > best then best, bi = v, c end
        end
        if bi == lp[idx] then correct = correct + 1 end
        idx = idx + 1
      end
    end
  else
    check_ids("Accuracy", i, lp, ln, nil, ls, ps)
    for j = 0, ln - 1 do
      if math.floor(pp[j]) == lp[j] then correct = correct + 1 end
    end
  end
  return correct, ln
end)

---------------------------------------------------------------- TopKAccuracy
-- TopKAccuracy({top_k=1}): label among the top_k scores of its row (pred (N, C),
-- label N class ids in [0, C)).
local TopK = metric_class("TopKAccuracy", { "top_k_accuracy", "top_k_acc" })
M.TopKAccuracy = function(o)
  local k = o and o.top_k or 1
  if type(k) ~= "number" or k < 1 or k % 1 ~= 0 then
    error("TopKAccuracy: top_k must be a positive integer, got " .. tostring(k), 2)
  end
  local s = init(setmetatable({ top_k = k }, TopK), "top_k_accuracy_" .. k, o)
  return s
end
per_pair(TopK, "TopKAccuracy", function(self, i, lp, ls, ln, pp, ps)
  if #ps ~= 2 or ps[1] ~= ln then
    fail("TopKAccuracy.update: preds[%d] must be (N, classes) with N = the %d elements of "
      .. "labels[%d]%s", i, ln, i, where(i, ls, ps))
  end
  local c = ps[2]
  check_ids("TopKAccuracy", i, lp, ln, c, ls, ps)
  local k = math.min(self.top_k, c)
  local correct = 0
  for r = 0, ln - 1 do
    local v = pp[r * c + lp[r]]
    -- rank: how many scores beat the label's (ties count for the label)
    local better = 0
    for j = 0, c - 1 do if pp[r * c + j] > v then better = better + 1 end end
    if better < k then correct = correct + 1 end
  end
  return correct, ln
end)

---------------------------------------------------------------- F1
-- F1({threshold=0.5, average="micro"}): binary F1 over all updates; label 0/1, pred
-- (N, 2) scores (argmax) or (N,) probabilities (> threshold is positive).
local F1 = metric_class("F1", { "f1" })
M.F1 = function(o)
  o = o or {}
  local th, avg = o.threshold or 0.5, o.average or "micro"
  if type(th) ~= "number" then error("F1: threshold must be a number, got " .. type(th), 2) end
  if avg ~= "micro" and avg ~= "macro" then
    error("F1: average must be 'micro' or 'macro', got " .. tostring(avg), 2)
  end
  local s = setmetatable({ threshold = th, average = avg }, F1)
  return init(s, "f1", o)
end
function F1:reset()
  self.tp, self.fp, self.fn, self.tn = 0, 0, 0, 0
  self.num_inst, self.sum_metric = 0, 0
  self._batches, self._f1sum = 0, 0
end
local function fscore(tp, fp, fn)
  local p = tp + fp > 0 and tp / (tp + fp) or 0
  local r = tp + fn > 0 and tp / (tp + fn) or 0
  return p + r > 0 and 2 * p * r / (p + r) or 0
end
-- sum_metric stays 0: get() reads the confusion counts
per_pair(F1, "F1", function(self, i, lp, ls, ln, pp, ps, pn)
  local scores = pn == 2 * ln and ps[#ps] == 2 and ln > 0
  if not scores and pn ~= ln then
    fail("F1.update: preds[%d] must be (N, 2) scores or N probabilities for the %d elements "
      .. "of labels[%d]%s", i, ln, i, where(i, ls, ps))
  end
  check_ids("F1", i, lp, ln, 2, ls, ps, true)
  local tp, fp, fn, tn = 0, 0, 0, 0
  for r = 0, ln - 1 do
    local pos
    if scores then pos = pp[2 * r + 1] > pp[2 * r]
    else pos = pp[r] > self.threshold end
    local lab = lp[r] == 1
    if pos and lab then tp = tp + 1 elseif pos then fp = fp + 1
    elseif lab then fn = fn + 1 else tn = tn + 1 end
  end
  self.tp, self.fp, self.fn, self.tn = self.tp + tp, self.fp + fp, self.fn + fn, self.tn + tn
  self._batches = self._batches + 1
  self._f1sum = self._f1sum + fscore(tp, fp, fn)
  return 0, ln
end)
function F1:get()
  if self.num_inst == 0 then return self.name, nan end
  if self.average == "macro" then return self.name, self._f1sum / self._batches end
  return self.name, fscore(self.tp, self.fp, self.fn)
end

---------------------------------------------------------------- regression
-- MAE / MSE / RMSE: per-sample mean over the non-batch axes, averaged over samples.
-- label and pred: the same number of elements and of samples (first dims).
local function regression(cname, aliases, f, finish)
  local c = metric_class(cname, aliases)
  M[cname] = function(o) return init(setmetatable({}, c), cname:lower(), o) end
  per_pair(c, cname, function(_, i, lp, ls, ln, pp, ps, pn)
    if ln ~= pn then
      fail("%s.update: labels[%d] has %d elements but preds[%d] has %d%s", cname, i, ln, i, pn,
        where(i, ls, ps))
    end
    local n = ls[1] or 1
    check_rows(cname, i, ls, ps, n, ps[1] or 1)
    if ln == 0 then return 0, 0 end
    local per = ln / n
    local s = 0
    for j = 0, ln - 1 do s = s + f(lp[j] - pp[j]) end
    return s / per, n
  end)
  if finish then c.get = finish end
  return c
end
regression("MAE", { "mae" }, math.abs)
regression("MSE", { "mse" }, function(d) return d * d end)
regression("RMSE", { "rmse" }, function(d) return d * d end, function(self)
  if self.num_inst == 0 then return self.name, nan end
  return self.name, sqrt(self.sum_metric / self.num_inst)
end)

---------------------------------------------------------------- CrossEntropy
-- CrossEntropy({eps=1e-12}): -log(pred[label] + eps) averaged over samples; pred
-- (N, C) probabilities, label N class ids in [0, C).
local CE = metric_class("CrossEntropy", { "ce", "cross-entropy" })
M.CrossEntropy = function(o)
  local eps = o and o.eps or 1e-12
  if type(eps) ~= "number" then error("CrossEntropy: eps must be a number, got " .. type(eps), 2) end
  local r = init(setmetatable({ eps = eps }, CE), "cross-entropy", o)
  return r
end
per_pair(CE, "CrossEntropy", function(self, i, lp, ls, ln, pp, ps)
  if #ps ~= 2 or ps[1] ~= ln then
    fail("CrossEntropy.update: preds[%d] must be (N, classes) with N = the %d elements of "
      .. "labels[%d]%s", i, ln, i, where(i, ls, ps))
  end
  local c = ps[2]
  check_ids("CrossEntropy", i, lp, ln, c, ls, ps)
  local s = 0
  for r = 0, ln - 1 do s = s - log(pp[r * c + lp[r]] + self.eps) end
  return s, ln
end)

---------------------------------------------------------------- Loss
-- Loss(): the mean of the loss values passed as preds (labels ignored).
local LossM = metric_class("Loss", { "loss" })
M.Loss = function(o) return init(setmetatable({}, LossM), "loss", o) end
function LossM:_update(_, preds, level)
  preds = as_list("Loss", "preds", preds, level)
  for i = 1, #preds do
    local pp, _, pn = host(preds[i])
    local s = 0
    for j = 0, pn - 1 do s = s + pp[j] end
    self.sum_metric = self.sum_metric + s
    self.num_inst = self.num_inst + pn
    release()
  end
end
function LossM:update(labels, preds) self:_update(labels, preds, 3) end

---------------------------------------------------------------- Composite
-- CompositeEvalMetric({m1, m2, ...}): get() -> {names}, {values}.
local Composite = metric_class("CompositeEvalMetric", { "composite" })
M.CompositeEvalMetric = function(metrics, o)
  local s = setmetatable({ metrics = {} }, Composite)
  s.name = o and o.name or "composite"
  for _, m in ipairs(metrics or {}) do s.metrics[#s.metrics + 1] = M.create(m) end
  return s
end
function Composite:add(m) self.metrics[#self.metrics + 1] = M.create(m) end
function Composite:get_metric(i) return self.metrics[i] end
function Composite:_update(labels, preds, level)
  for _, m in ipairs(self.metrics) do
    if m._update then m:_update(labels, preds, level + 1) else m:update(labels, preds) end
  end
end
function Composite:update(labels, preds) self:_update(labels, preds, 3) end
function Composite:reset()
  for _, m in ipairs(self.metrics or {}) do m:reset() end
end
function Composite:get()
  local names, values = {}, {}
  for _, m in ipairs(self.metrics) do
    local n, v = m:get()
    if type(n) == "table" then
      for i = 1, #n do names[#names + 1], values[#values + 1] = n[i], v[i] end
    else
      names[#names + 1], values[#values + 1] = n, v
    end
  end
  return names, values
end

-- create(name | metric | {names...}): a metric from its name ("acc", "ce", ...).
function M.create(m, o)
  if type(m) == "table" and getmetatable(m) and getmetatable(m).update then return m end
  if type(m) == "table" then
    local r = M.CompositeEvalMetric(m)
    return r
  end
  local c = type(m) == "string" and registry[m:lower()]
  if not c then error("metric.create: unknown metric " .. tostring(m), 2) end
  local r = M[c.__name](o)
  return r
end

return M
