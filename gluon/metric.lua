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

local function as_list(x, level)
  if nd.is_tensor(x) then return { x } end
  if type(x) == "table" then return x end
  error("metric: expected a tensor or a list of tensors, got " .. type(x), level + 1)
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

local function pairs_of(labels, preds, level)
  labels, preds = as_list(labels, level + 1), as_list(preds, level + 1)
  if #labels ~= #preds then
    error(string.format("metric: %d labels but %d predictions", #labels, #preds), level + 1)
  end
  return labels, preds
end

local function init(self, name, o)
  self.name = (o and o.name) or name
  self:reset()
  return self
end

-- per_pair(fn): an update(labels, preds) method that, for each (label, pred) pair,
-- adds fn(self, lp, ls, ln, pp, ps, pn) -> sum, count to sum_metric and num_inst
-- (lp/pp: the host values as double*, ls/ps: shapes, ln/pn: sizes). fn raises its
-- errors at level 3 (the caller of update).
local function per_pair(fn)
  return function(self, labels, preds)
    labels, preds = pairs_of(labels, preds, 2)
    for i = 1, #labels do
      local lp, ls, ln = host(labels[i])
      local pp, ps, pn = host(preds[i])
      local sum, count = fn(self, lp, ls, ln, pp, ps, pn)
      self.sum_metric = self.sum_metric + sum
      self.num_inst = self.num_inst + count
      release()
    end
  end
end

---------------------------------------------------------------- Accuracy
-- Accuracy({axis=2}): argmax of pred along axis when pred has one more axis than
-- label, else pred taken as class ids; fraction equal to label.
local Accuracy = metric_class("Accuracy", { "acc", "accuracy" })
M.Accuracy = function(o) return init(setmetatable({ axis = o and o.axis or 2 }, Accuracy), "accuracy", o) end
Accuracy.update = per_pair(function(self, lp, _, ln, pp, ps, pn)
  local correct = 0
  if pn ~= ln then
    -- argmax along axis (the last axis in the common case)
    local axis = self.axis
    if axis < 0 then axis = #ps + axis + 1 end
    local inner = 1
    for d = axis + 1, #ps do inner = inner * ps[d] end
    local k = ps[axis]
    local outer = pn / (k * inner)
    if outer * inner ~= ln then
      error(string.format("Accuracy: label has %d elements but pred (%s) gives %d predictions",
        ln, table.concat(ps, "x"), outer * inner), 3)
    end
    local idx = 0
    for o = 0, outer - 1 do
      for j = 0, inner - 1 do
        local base = o * k * inner + j
        local best, bi = -huge, 0
        for c = 0, k - 1 do
          local v = pp[base + c * inner]
          if v > best then best, bi = v, c end
        end
        if bi == math.floor(lp[idx]) then correct = correct + 1 end
        idx = idx + 1
      end
    end
  else
    for j = 0, ln - 1 do
      if math.floor(pp[j]) == math.floor(lp[j]) then correct = correct + 1 end
    end
  end
  return correct, ln
end)

---------------------------------------------------------------- TopKAccuracy
-- TopKAccuracy({top_k=1}): label among the top_k scores of its row (pred (N, C)).
local TopK = metric_class("TopKAccuracy", { "top_k_accuracy", "top_k_acc" })
M.TopKAccuracy = function(o)
  local k = o and o.top_k or 1
  local s = init(setmetatable({ top_k = k }, TopK), "top_k_accuracy_" .. k, o)
  return s
end
TopK.update = per_pair(function(self, lp, _, ln, pp, ps)
  if #ps ~= 2 or ps[1] ~= ln then
    error("TopKAccuracy: pred must be (N, classes) with N = #label", 3)
  end
  local c = ps[2]
  local k = math.min(self.top_k, c)
  local correct = 0
  for r = 0, ln - 1 do
    local lab = math.floor(lp[r])
    if lab >= 0 and lab < c then
      local v = pp[r * c + lab]
      -- rank: how many scores beat the label's (ties count for the label)
      local better = 0
      for j = 0, c - 1 do if pp[r * c + j] > v then better = better + 1 end end
      if better < k then correct = correct + 1 end
    end
  end
  return correct, ln
end)

---------------------------------------------------------------- F1
-- F1({threshold=0.5, average="micro"}): binary F1 over all updates; pred (N, 2)
-- scores (argmax) or (N,) probabilities (> threshold is positive).
local F1 = metric_class("F1", { "f1" })
M.F1 = function(o)
  o = o or {}
  local s = setmetatable({ threshold = o.threshold or 0.5, average = o.average or "micro" }, F1)
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
F1.update = per_pair(function(self, lp, _, ln, pp, ps, pn)
  local tp, fp, fn, tn = 0, 0, 0, 0
  for r = 0, ln - 1 do
    local pos
    if pn == 2 * ln and ps[#ps] == 2 then pos = pp[2 * r + 1] > pp[2 * r]
    else pos = pp[r] > self.threshold end
    local lab = lp[r] > 0.5
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
local function regression(cname, aliases, f, finish)
  local c = metric_class(cname, aliases)
  M[cname] = function(o) return init(setmetatable({}, c), cname:lower(), o) end
  c.update = per_pair(function(_, lp, ls, ln, pp, _, pn)
    if ln ~= pn then
      error(string.format("%s: label has %d elements, pred %d", cname, ln, pn), 3)
    end
    local n = ls[1] or 1
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
-- (N, C) probabilities, label (N,) class ids.
local CE = metric_class("CrossEntropy", { "ce", "cross-entropy" })
M.CrossEntropy = function(o)
  return init(setmetatable({ eps = o and o.eps or 1e-12 }, CE), "cross-entropy", o)
end
CE.update = per_pair(function(self, lp, _, ln, pp, ps, pn)
  local c = pn / ln
  if c % 1 ~= 0 or ps[1] ~= ln then
    error("CrossEntropy: pred must be (N, classes) with N = #label", 3)
  end
  local s = 0
  for r = 0, ln - 1 do s = s - log(pp[r * c + math.floor(lp[r])] + self.eps) end
  return s, ln
end)

---------------------------------------------------------------- Loss
-- Loss(): the mean of the loss values passed as preds (labels ignored).
local LossM = metric_class("Loss", { "loss" })
M.Loss = function(o) return init(setmetatable({}, LossM), "loss", o) end
function LossM:update(_, preds)
  preds = as_list(preds, 2)
  for i = 1, #preds do
    local pp, _, pn = host(preds[i])
    local s = 0
    for j = 0, pn - 1 do s = s + pp[j] end
    self.sum_metric = self.sum_metric + s
    self.num_inst = self.num_inst + pn
    release()
  end
end

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
function Composite:update(labels, preds)
  for _, m in ipairs(self.metrics) do m:update(labels, preds) end
end
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
