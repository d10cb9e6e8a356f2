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
local class = require("mx.core.class")
local context = require("mx.context")

local type, error, tostring, ipairs, pairs, setmetatable, getmetatable, sqrt, log, exp, huge =
  type, error, tostring, ipairs, pairs, setmetatable, getmetatable, math.sqrt, math.log, math.exp,
  math.huge
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
  if h:context().dev_type ~= 1 then h = h:to(context.cpu()) end
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

-- define(cname, aliases, default_name, valid, setup): a metric class whose constructor
-- M[cname](o) takes the options named in valid (a list; `name` is always valid) and
-- raises on any other at the user's line. setup(self, o) checks the values and keeps
-- the resolved options with cfg(); it returns an error message or nil.
local function cfg(self, k, v) self[k] = v; self._config[k] = v end
local function define(cname, aliases, default_name, valid, setup)
  local c = metric_class(cname, aliases)
  local set = { name = true }
  for _, k in ipairs(valid) do set[k] = true end
  -- new(o, level): level is the user's line as new counts it
  c._new = function(o, level)
    o = class.check_opts(cname, o, set, level)
    if o.name ~= nil and type(o.name) ~= "string" then
      error(cname .. ": name must be a string, got " .. type(o.name), level)
    end
    local self = setmetatable({ name = o.name or default_name, _config = {} }, c)
    local msg = setup and setup(self, o)
    if msg then error(cname .. ": " .. msg, level) end
    self:reset()
    return self
  end
  M[cname] = function(o) local r = c._new(o, 3) return r end
  return c
end

-- get_config() -> {metric = class name, name = display name, <options>}: create(config)
-- makes an equal metric.
function EvalMetric:get_config()
  local r = { metric = getmetatable(self).__name, name = self._cfg_name or self.name }
  for k, v in pairs(self._config or {}) do r[k] = v end
  return r
end

local function is_int(v) return type(v) == "number" and v % 1 == 0 and v == v and v ~= huge and v ~= -huge end

-- per_pair(cls, cname, fn): cls.update(labels, preds) (and cls._update(labels, preds,
-- level): the same, raising its errors with error(msg, level)) that, for each (label,
-- pred) pair i, adds fn(self, i, lp, ls, ln, pp, ps, pn) -> sum, count to sum_metric
-- and num_inst (lp/pp: the host values as double*, ls/ps: shapes, ln/pn: sizes). fn
-- raises plain messages (fail); they reach the user's line from here. after(self), when
-- given, runs once the pairs are added (metrics whose value is not a running sum).
local function per_pair(cls, cname, fn, after)
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
    if after then after(self) end
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
-- Accuracy{axis=2}: with pred of one more axis than label (scores), the argmax of
-- pred along axis; with pred of label's shape, pred holds class ids. The fraction
-- equal to label (class ids: non-negative integers, below the class count).
local Accuracy = define("Accuracy", { "acc", "accuracy" }, "accuracy", { "axis" }, function(s, o)
  local axis = o.axis or 2
  if not is_int(axis) or axis == 0 then
    return "axis must be a non-zero integer (1-based), got " .. tostring(axis)
  end
  cfg(s, "axis", axis)
end)
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
-- TopKAccuracy{top_k=1}: label among the top_k scores of its row (pred (N, C),
-- label N class ids in [0, C)).
local TopK = define("TopKAccuracy", { "top_k_accuracy", "top_k_acc" }, nil, { "top_k" },
  function(s, o)
    local k = o.top_k or 1
    if not is_int(k) or k < 1 then return "top_k must be a positive integer, got " .. tostring(k) end
    cfg(s, "top_k", k)
    -- the display name carries k; get_config keeps the name given (create adds k again)
    s._cfg_name = o.name or "top_k_accuracy"
    s.name = s._cfg_name .. "_" .. k
  end)
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

---------------------------------------------------------------- F1, Fbeta, MCC
-- Confusion counts per class (MXNet 2.0's _ClassificationMetrics): self._k classes
-- (fixed by the first update), self._tp/_fp/_fn (lists 1.._k) and self._rows, the
-- samples seen (true negatives are _rows - tp - fp - fn). class_type:
--   binary:     label 0/1; pred of label's size (probabilities) or (..., 2) scores whose
--               column 2 is the positive one; positive when > threshold. One class.
--   multiclass: pred (..., C) scores, argmax over the last axis; label class ids in [0, C).
--   multilabel: pred and label of one shape (..., C); label 0/1, pred > threshold.
local function reset_stats(self)
  self._k, self._tp, self._fp, self._fn, self._rows = nil, nil, nil, nil, 0
  self.num_inst, self.sum_metric = 0, 0
end
local function set_classes(self, cname, i, k, ls, ps)
  if self._k == nil then
    self._k, self._tp, self._fp, self._fn = k, {}, {}, {}
    for c = 1, k do self._tp[c], self._fp[c], self._fn[c] = 0, 0, 0 end
  elseif self._k ~= k then
    fail("%s.update: the number of classes changed from %d to %d%s", cname, self._k, k,
      where(i, ls, ps))
  end
end
local function count(self, c, pos, lab)
  if pos and lab then self._tp[c] = self._tp[c] + 1
  elseif pos then self._fp[c] = self._fp[c] + 1
  elseif lab then self._fn[c] = self._fn[c] + 1 end
end
local function update_stats(self, cname, i, lp, ls, ln, pp, ps, pn)
  local ct, th = self.class_type, self.threshold
  if ct == "binary" then
    local last = ps[#ps] or 1
    local stride, off
    if pn == ln then stride, off = 1, 0
    elseif last == 2 and pn == 2 * ln then stride, off = 2, 1
    elseif last > 2 then
      fail("%s.update: preds[%d] has %d classes, too many for class_type 'binary' (use "
        .. "'multiclass')%s", cname, i, last, where(i, ls, ps))
    else
      fail("%s.update: preds[%d] must be (N, 2) scores or N probabilities for the %d elements "
        .. "of labels[%d]%s", cname, i, ln, i, where(i, ls, ps))
    end
    check_ids(cname, i, lp, ln, 2, ls, ps, true)
    set_classes(self, cname, i, 1, ls, ps)
    for r = 0, ln - 1 do count(self, 1, pp[r * stride + off] > th, lp[r] == 1) end
    self._rows = self._rows + ln
  elseif ct == "multiclass" then
    local k = ps[#ps] or 1
    if k == 0 or pn / k ~= ln then
      fail("%s.update: preds[%d] must be (N, classes) scores with N = the %d elements of "
        .. "labels[%d]%s", cname, i, ln, i, where(i, ls, ps))
    end
    check_ids(cname, i, lp, ln, k, ls, ps)
    set_classes(self, cname, i, k, ls, ps)
    for r = 0, ln - 1 do
      local best, bi = -huge, 0
      for c = 0, k - 1 do
        local v = pp[r * k + c]
        if v > best then best, bi = v, c end
      end
      local l = lp[r]
      if bi == l then self._tp[l + 1] = self._tp[l + 1] + 1
      else
        self._fp[bi + 1] = self._fp[bi + 1] + 1
        self._fn[l + 1] = self._fn[l + 1] + 1
      end
    end
    self._rows = self._rows + ln
  else -- multilabel
    local same = #ls == #ps
    for d = 1, #ls do same = same and ls[d] == ps[d] end
    if not same then
      fail("%s.update: labels[%d] and preds[%d] must have the same shape for class_type "
        .. "'multilabel'%s", cname, i, i, where(i, ls, ps))
    end
    check_ids(cname, i, lp, ln, 2, ls, ps, true)
    local k = ps[#ps] or 1
    if k == 0 then return end
    set_classes(self, cname, i, k, ls, ps)
    for j = 0, ln - 1 do count(self, j % k + 1, pp[j] > th, lp[j] == 1) end
    self._rows = self._rows + ln / k
  end
end

local function fb(p, r, b2)
  local d = b2 * p + r
  return (1 + b2) * p * r / (d > 1e-12 and d or 1e-12)
end
local function ratio(a, b) return a / (b > 1e-12 and b or 1e-12) end
-- The F-beta score of the counts: average "micro" (over the summed counts) or "macro"
-- (the mean of the per-class scores).
local function fscore(self)
  local k, b2 = self._k, self.beta * self.beta
  if k == nil then return 0 end
  if self.average == "macro" then
    local s = 0
    for c = 1, k do
      local tp = self._tp[c]
      s = s + fb(ratio(tp, tp + self._fp[c]), ratio(tp, tp + self._fn[c]), b2)
    end
    return s / k
  end
  local tp, fp, fn = 0, 0, 0
  for c = 1, k do tp, fp, fn = tp + self._tp[c], fp + self._fp[c], fn + self._fn[c] end
  local p, r = ratio(tp, tp + fp), ratio(tp, tp + fn)
  if p + r > 0 then return (1 + b2) * p * r / (b2 * p + r) end
  return 0
end

local CLASS_TYPES = { binary = true, multiclass = true, multilabel = true }
local function f_setup(with_beta)
  return function(s, o)
    local ct, th, avg = o.class_type or "binary", o.threshold or 0.5, o.average or "micro"
    if not CLASS_TYPES[ct] then
      return "class_type must be 'binary', 'multiclass' or 'multilabel', got " .. tostring(ct)
    end
    if type(th) ~= "number" then return "threshold must be a number, got " .. type(th) end
    if avg ~= "micro" and avg ~= "macro" then
      return "average must be 'micro' or 'macro', got " .. tostring(avg)
    end
    local beta
    if with_beta then
      beta = o.beta or 1
      if type(beta) ~= "number" or beta < 0 then return "beta must be a non-negative number" end
      cfg(s, "beta", beta)
    else
      s.beta = 1
    end
    cfg(s, "class_type", ct)
    cfg(s, "threshold", th)
    cfg(s, "average", avg)
  end
end
-- sum_metric = score * samples and num_inst = samples, as MXNet 2.0 keeps them.
local function f_after(self)
  self.num_inst = self._rows
  self.sum_metric = fscore(self) * self._rows
end
local function f_metric(cname, default_name, with_beta)
  local valid = { "class_type", "threshold", "average" }
  if with_beta then valid[#valid + 1] = "beta" end
  local c = define(cname, { default_name }, default_name, valid, f_setup(with_beta))
  c.reset = reset_stats
  per_pair(c, cname, function(self, ...)
    update_stats(self, cname, ...)
    return 0, 0
  end, f_after)
  return c
end
-- F1{class_type="binary", threshold=0.5, average="micro"}
f_metric("F1", "f1", false)
-- Fbeta{class_type="binary", beta=1, threshold=0.5, average="micro"}
f_metric("Fbeta", "fbeta", true)

-- MCC(): Matthews correlation of binary predictions (class_type binary, threshold 0.5);
-- zero factors of the denominator count as 1.
local MCC = define("MCC", { "mcc" }, "mcc", {}, function(s)
  s.class_type, s.threshold = "binary", 0.5
end)
MCC.reset = reset_stats
per_pair(MCC, "MCC", function(self, ...)
  update_stats(self, "MCC", ...)
  return 0, 0
end, function(self)
  local n = self._rows
  local tp, fp, fn = self._tp[1], self._fp[1], self._fn[1]
  local tn = n - tp - fp - fn
  local d = 1
  for _, t in ipairs { tp + fp, tp + fn, tn + fp, tn + fn } do if t ~= 0 then d = d * t end end
  self.num_inst = n
  self.sum_metric = n > 0 and (tp * tn - fp * fn) / sqrt(d) * n or 0
end)

---------------------------------------------------------------- regression
-- MAE / MSE / RMSE: per-sample mean over the non-batch axes, averaged over samples.
-- label and pred: the same number of elements and of samples (first dims).
local function regression(cname, f, finish)
  local c = define(cname, { cname:lower() }, cname:lower(), {})
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
regression("MAE", math.abs)
regression("MSE", function(d) return d * d end)
regression("RMSE", function(d) return d * d end, function(self)
  if self.num_inst == 0 then return self.name, nan end
  return self.name, sqrt(self.sum_metric / self.num_inst)
end)

---------------------------------------------------------------- CrossEntropy & co
-- CrossEntropy{eps=1e-12, ignore_label=nil, axis=-1, from_logits=false}: the mean over
-- labels of -log(max(eps, p)), p the probability pred gives the label along axis
-- (softmax of pred first when from_logits). label: one class id per position of pred
-- without axis; labels equal to ignore_label add nothing and are not counted.
local function ce_setup(s, o)
  local eps, axis, fl = o.eps or 1e-12, o.axis or -1, o.from_logits or false
  if type(eps) ~= "number" then return "eps must be a number, got " .. type(eps) end
  if not is_int(axis) or axis == 0 then
    return "axis must be a non-zero integer (1-based, -1 the last), got " .. tostring(axis)
  end
  if type(fl) ~= "boolean" then return "from_logits must be a boolean, got " .. type(fl) end
  if o.ignore_label ~= nil and type(o.ignore_label) ~= "number" then
    return "ignore_label must be a number or nil, got " .. type(o.ignore_label)
  end
  cfg(s, "eps", eps)
  cfg(s, "axis", axis)
  cfg(s, "from_logits", fl)
  cfg(s, "ignore_label", o.ignore_label)
end
local function ce_pair(cname)
  return function(self, i, lp, ls, ln, pp, ps, pn)
    local axis = self.axis
    if axis < 0 then axis = #ps + axis + 1 end
    local k = (axis >= 1 and axis <= #ps) and ps[axis] or 0
    if k == 0 or pn / k ~= ln then
      fail("%s.update: preds[%d] must be (N, classes) (classes along axis %d) with N = the %d "
        .. "elements of labels[%d]%s", cname, i, self.axis, ln, i, where(i, ls, ps))
    end
    local inner = 1
    for d = axis + 1, #ps do inner = inner * ps[d] end
    local ign, eps, fl = self.ignore_label, self.eps, self.from_logits
    for j = 0, ln - 1 do
      local v = lp[j]
      if v ~= ign and (v % 1 ~= 0 or v < 0 or v >= k) then
        check_ids(cname, i, lp, ln, k, ls, ps)
      end
    end
    local s, n = 0, 0
    for j = 0, ln - 1 do
      local l = lp[j]
      if l ~= ign then
        local base = (j - j % inner) * k + j % inner
        local p = pp[base + l * inner]
        if fl then
          -- softmax along axis, shifted by the row's max (no overflow, no NaN)
          local m = -huge
          for c = 0, k - 1 do local x = pp[base + c * inner]; if x > m then m = x end end
          local z = 0
          for c = 0, k - 1 do z = z + exp(pp[base + c * inner] - m) end
          p = exp(p - m) / z
        end
        s = s - log(p > eps and p or eps)
        n = n + 1
      end
    end
    return s, n
  end
end
local function ce_metric(cname, aliases, default_name)
  local c = define(cname, aliases, default_name, { "eps", "ignore_label", "axis", "from_logits" },
    ce_setup)
  per_pair(c, cname, ce_pair(cname))
  return c
end
ce_metric("CrossEntropy", { "ce", "cross-entropy" }, "cross-entropy")
-- NegativeLogLikelihood (MXNet 1.x; 2.0 has CrossEntropy only): the same value.
ce_metric("NegativeLogLikelihood", { "nll_loss", "nll-loss" }, "nll-loss")
-- Perplexity: exp of the cross-entropy.
local Perp = ce_metric("Perplexity", { "perplexity" }, "perplexity")
function Perp:get()
  if self.num_inst == 0 then return self.name, nan end
  return self.name, exp(self.sum_metric / self.num_inst)
end

---------------------------------------------------------------- correlations
-- PearsonCorrelation(): Pearson's r over every element of every update (label and pred
-- of one shape). num_inst counts (label, pred) pairs, as MXNet 2.0 does.
local Pearson = define("PearsonCorrelation", { "pearsonr" }, "pearsonr", {})
function Pearson:reset()
  self._n, self._ml, self._mp, self._sl, self._sp, self._cov = 0, 0, 0, 0, 0, 0
  self.num_inst, self.sum_metric = 0, 0
end
per_pair(Pearson, "PearsonCorrelation", function(self, i, lp, ls, ln, pp, ps)
  local same = #ls == #ps
  for d = 1, #ls do same = same and ls[d] == ps[d] end
  if not same then
    fail("PearsonCorrelation.update: labels[%d] and preds[%d] must have the same shape%s", i, i,
      where(i, ls, ps))
  end
  if ln == 0 then return 0, 1 end
  -- the batch's means and centred sums, merged into the running ones (Chan et al.)
  local ml, mp = 0, 0
  for j = 0, ln - 1 do ml, mp = ml + lp[j], mp + pp[j] end
  ml, mp = ml / ln, mp / ln
  local sl, sp, cv = 0, 0, 0
  for j = 0, ln - 1 do
    local a, b = lp[j] - ml, pp[j] - mp
    sl, sp, cv = sl + a * a, sp + b * b, cv + a * b
  end
  local n0 = self._n
  local n = n0 + ln
  local dl, dp = ml - self._ml, mp - self._mp
  local w = n0 * ln / n
  self._sl = self._sl + sl + dl * dl * w
  self._sp = self._sp + sp + dp * dp * w
  self._cov = self._cov + cv + dl * dp * w
  self._ml, self._mp, self._n = self._ml + dl * ln / n, self._mp + dp * ln / n, n
  return 0, 1
end)
function Pearson:get()
  if self.num_inst == 0 then return self.name, nan end
  return self.name, self._cov / sqrt(self._sl * self._sp)
end

-- PCC(): the multiclass Matthews correlation of the confusion matrix (grows with the
-- largest class id seen, from 2). pred: (N, C) scores (argmax) or N class ids.
-- num_inst counts update calls, as MXNet 2.0 does.
local PCC = define("PCC", { "pcc" }, "pcc", {})
function PCC:reset()
  self._k, self._cm = 2, { 0, 0, 0, 0 } -- _cm[pred * _k + label + 1]
  self.num_inst, self.sum_metric = 0, 0
end
local function pcc_grow(self, k)
  local old, ok = self._cm, self._k
  local cm = {}
  for a = 0, k - 1 do
    for b = 0, k - 1 do
      cm[a * k + b + 1] = (a < ok and b < ok) and old[a * ok + b + 1] or 0
    end
  end
  self._cm, self._k = cm, k
end
per_pair(PCC, "PCC", function(self, i, lp, ls, ln, pp, ps, pn)
  local ids = pn == ln and #ps == #ls
  if not ids and (#ps ~= 2 or ps[1] ~= ln or ps[2] == 0) then
    fail("PCC.update: preds[%d] must be (N, classes) scores or N class ids for the %d elements "
      .. "of labels[%d]%s", i, ln, i, where(i, ls, ps))
  end
  check_ids("PCC", i, lp, ln, nil, ls, ps)
  local c = ps[2]
  local pred = {}
  for r = 0, ln - 1 do
    local bi
    if ids then
      bi = pp[r]
      if not is_int(bi) or bi < 0 then
        fail("PCC.update: preds[%d] element %d is %s, not a non-negative integer class id%s", i,
          r + 1, tostring(bi), where(i, ls, ps))
      end
    else
      local best = -huge
      bi = 0
      for j = 0, c - 1 do
        local v = pp[r * c + j]
        if v > best then best, bi = v, j end
      end
    end
    pred[r] = bi
    local m = (bi > lp[r] and bi or lp[r]) + 1
    if m > self._k then pcc_grow(self, m) end
  end
  local k, cm = self._k, self._cm
  for r = 0, ln - 1 do
    local at = pred[r] * k + lp[r] + 1
    cm[at] = cm[at] + 1
  end
  return 0, 0
end, function(self) self.num_inst = self.num_inst + 1 end)
function PCC:get()
  if self.num_inst == 0 then return self.name, nan end
  local k, cm = self._k, self._cm
  local n, x, y = 0, {}, {}
  for a = 0, k - 1 do x[a], y[a] = 0, 0 end
  for a = 0, k - 1 do
    for b = 0, k - 1 do
      local v = cm[a * k + b + 1]
      n, x[a], y[b] = n + v, x[a] + v, y[b] + v
    end
  end
  local cxx, cyy, cxy = 0, 0, 0
  for a = 0, k - 1 do
    cxx, cyy = cxx + x[a] * (n - x[a]), cyy + y[a] * (n - y[a])
    cxy = cxy + cm[a * k + a + 1] * n - x[a] * y[a]
  end
  if cxx == 0 or cyy == 0 then return self.name, nan end
  return self.name, cxy / sqrt(cxx * cyy)
end

---------------------------------------------------------------- Loss
-- Loss(): the mean of the loss values passed as preds (labels ignored).
local LossM = define("Loss", { "loss" }, "loss", {})
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
-- CompositeEvalMetric({m1, m2, ...}, {name=}): get() -> {names}, {values}.
local Composite = metric_class("CompositeEvalMetric", { "composite" })
local create
local COMPOSITE_OPTS = { name = true }
local function composite_new(metrics, o, level)
  o = class.check_opts("CompositeEvalMetric", o, COMPOSITE_OPTS, level)
  if metrics ~= nil and (type(metrics) ~= "table" or getmetatable(metrics) ~= nil) then
    error("CompositeEvalMetric: metrics must be a list of metrics or names, got "
      .. type(metrics), level)
  end
  local s = setmetatable({ metrics = {}, name = o.name or "composite", _config = {} }, Composite)
  for _, m in ipairs(metrics or {}) do s.metrics[#s.metrics + 1] = create(m, nil, level + 1) end
  return s
end
M.CompositeEvalMetric = function(metrics, o) local r = composite_new(metrics, o, 3) return r end
function Composite:add(m) self.metrics[#self.metrics + 1] = create(m, nil, 3) end
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
function Composite:get_config()
  local r = { metric = "CompositeEvalMetric", name = self.name, metrics = {} }
  for i, m in ipairs(self.metrics) do r.metrics[i] = m:get_config() end
  return r
end

---------------------------------------------------------------- create
-- create(m[, opts]): m a metric (returned as is), a name ("acc", "f1", "F1", ...) made
-- with opts, a list of those (a CompositeEvalMetric, opts given to each), or a
-- get_config() table.
create = function(m, o, level)
  local mt = type(m) == "table" and getmetatable(m)
  if mt and mt.update then
    if o ~= nil then error("metric.create: options given with a metric instance", level) end
    return m
  end
  if type(m) == "table" and not mt then
    if type(m.metric) == "string" then -- a get_config() table
      local c = registry[m.metric:lower()]
      if not c then error("metric.create: unknown metric " .. m.metric, level) end
      local opts = {}
      for k, v in pairs(m) do if k ~= "metric" and k ~= "metrics" then opts[k] = v end end
      if c == Composite then
        local r = composite_new({}, opts, level + 1)
        for i, child in ipairs(m.metrics or {}) do r.metrics[i] = create(child, nil, level + 1) end
        return r
      end
      local r = c._new(opts, level + 1)
      return r
    end
    local r = composite_new({}, nil, level + 1)
    for i, child in ipairs(m) do r.metrics[i] = create(child, o, level + 1) end
    return r
  end
  local c = type(m) == "string" and registry[m:lower()]
  if not c then
    local names = {}
    for k in pairs(registry) do names[#names + 1] = k end
    table.sort(names)
    error("metric.create: unknown metric " .. tostring(m) .. " (known: "
      .. table.concat(names, ", ") .. ")", level)
  end
  if c == Composite then local r = composite_new(nil, o, level + 1) return r end
  local r = c._new(o, level + 1)
  return r
end
function M.create(m, o) local r = create(m, o, 3) return r end

return M
