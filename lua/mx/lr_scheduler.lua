-- mx.lr_scheduler — learning-rate schedules (MXNet's semantics and defaults).
-- A scheduler is callable: sched(num_update) -> lr, with num_update the number of
-- updates done so far (the optimizer passes its count). Every scheduler takes
-- base_lr, warmup_steps, warmup_begin_lr and warmup_mode ("linear" or "constant");
-- during the first warmup_steps updates the warm-up rule applies. Arguments follow
-- MXNet's calling convention (mx.core.class signature): positionally in MXNet's order or by
-- name. An optimizer given learning_rate= overwrites the scheduler's base_lr.
local class = require("mx.core.class")

local M = {}

local cos, pi = math.cos, math.pi

local WARMUP = { "warmup_steps", "warmup_begin_lr", "warmup_mode" }
-- MXNet's parameter list: head, then the warm-up ones
local function params(head)
  local t = {}
  for _, k in ipairs(head) do t[#t + 1] = k end
  for _, k in ipairs(WARMUP) do t[#t + 1] = k end
  return t
end
local function sig(name, list)
  local s = class.signature(name, list)
  return function(f)
    M[name] = function(...) return f(s(2, ...)) end -- f: tail-called (level 2: the user)
    class.declare(M[name], s)
  end
end

-- The base class: holds base_lr and the warm-up settings.
local LRScheduler = class.base("LRScheduler")
LRScheduler.__call = function(self, num_update) return self:get(num_update) end
M.LRScheduler = LRScheduler

-- a finite number option (nil: its default)
local function num(name, what, v, level)
  if v ~= nil and (type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge) then
    error(string.format("%s: %s must be a finite number, got %s", name, what, tostring(v)), level + 1)
  end
end
M._num = num

local function init(self, name, o, level)
  for _, k in ipairs({ "base_lr", "warmup_begin_lr", "factor", "stop_factor_lr", "final_lr", "pwr" }) do
    num(name, k, o[k], level + 1)
  end
  self.base_lr = o.base_lr or 0.01
  self.warmup_steps = o.warmup_steps or 0
  self.warmup_begin_lr = o.warmup_begin_lr or 0
  self.warmup_final_lr = self.base_lr
  self.warmup_mode = o.warmup_mode or "linear"
  if self.warmup_mode ~= "linear" and self.warmup_mode ~= "constant" then
    error(name .. ": warmup_mode must be 'linear' or 'constant', got "
      .. tostring(self.warmup_mode), level + 1)
  end
  if type(self.warmup_steps) ~= "number" or self.warmup_steps < 0 then
    error(name .. ": warmup_steps must be >= 0", level + 1)
  end
  if self.warmup_begin_lr > self.base_lr then
    error(name .. ": base_lr must be >= warmup_begin_lr", level + 1)
  end
end

function LRScheduler:get_warmup_lr(num_update)
  if self.warmup_mode == "constant" then return self.warmup_begin_lr end
  return self.warmup_begin_lr
    + (self.warmup_final_lr - self.warmup_begin_lr) * num_update / self.warmup_steps
end

local function scheduler_class(name)
  local c = class.extend(LRScheduler, name)
  c.__tostring = function(s) return name .. "(base_lr=" .. tostring(s.base_lr) .. ")" end
  return c
end

-- FactorScheduler(step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warm-up...): lr *=
-- factor every `step` updates, never below stop_factor_lr.
local Factor = scheduler_class("FactorScheduler")
sig("FactorScheduler", params { "step", "factor", "stop_factor_lr", "base_lr" })(function(o)
  local step = o.step
  if type(step) ~= "number" or step < 1 then
    error("FactorScheduler: step must be a number >= 1, got " .. tostring(step), 2)
  end
  num("FactorScheduler", "factor", o.factor, 2)
  local factor = o.factor or 1
  if factor > 1 then error("FactorScheduler: factor must be no more than 1 to make lr reduce", 2) end
  local s = setmetatable({ step = step, factor = factor, stop_factor_lr = o.stop_factor_lr or 1e-8,
    count = 0 }, Factor)
  init(s, "FactorScheduler", o, 2)
  return s
end)
function Factor:get(num_update)
  if num_update < self.warmup_steps then return self:get_warmup_lr(num_update) end
  -- done in a loop: the schedule is stateful like MXNet's (an lr changed by hand persists)
  while num_update > self.count + self.step do
    self.count = self.count + self.step
    self.base_lr = self.base_lr * self.factor
    if self.base_lr < self.stop_factor_lr then self.base_lr = self.stop_factor_lr end
  end
  return self.base_lr
end

-- MultiFactorScheduler({s1, s2, ...}, factor=1, base_lr=0.01, warm-up...): lr *= factor
-- after each listed update count (increasing).
local Multi = scheduler_class("MultiFactorScheduler")
sig("MultiFactorScheduler", params { { "step", list = true }, "factor", "base_lr" })(function(o)
  local steps = o.step
  if type(steps) ~= "table" or #steps < 1 then
    error("MultiFactorScheduler: steps must be a non-empty list of update counts", 2)
  end
  for i, v in ipairs(steps) do
    if type(v) ~= "number" or v < 1 then
      error("MultiFactorScheduler: schedule step must be >= 1, got " .. tostring(v), 2)
    end
    if i > 1 and v <= steps[i - 1] then
      error("MultiFactorScheduler: schedule steps must be increasing", 2)
    end
  end
  local factor = o.factor or 1
  if factor > 1 then
    error("MultiFactorScheduler: factor must be no more than 1 to make lr reduce", 2)
  end
  local st = {}
  for i = 1, #steps do st[i] = steps[i] end
  local s = setmetatable({ step = st, factor = factor, cur_step_ind = 1, count = 0 }, Multi)
  init(s, "MultiFactorScheduler", o, 2)
  return s
end)
function Multi:get(num_update)
  if num_update < self.warmup_steps then return self:get_warmup_lr(num_update) end
  while self.cur_step_ind <= #self.step do
    if num_update > self.step[self.cur_step_ind] then
      self.count = self.step[self.cur_step_ind]
      self.cur_step_ind = self.cur_step_ind + 1
      self.base_lr = self.base_lr * self.factor
    else
      return self.base_lr
    end
  end
  return self.base_lr
end

-- Poly and Cosine anneal from base_lr to final_lr over the updates after the warm-up:
-- lr = final + (base - final) * curve(self, done, total), done = t - warmup,
-- total = max_update - warmup; from max_update on the lr stays at its last value.
local function annealing(name, head, curve, fields)
  local c = scheduler_class(name)
  sig(name, params(head))(function(o)
    local max_update = o.max_update
    if type(max_update) ~= "number" or max_update < 1 then
      error(name .. ": maximum number of updates must be strictly positive", 2)
    end
    local s = setmetatable(fields and fields(o) or {}, c)
    s.max_update, s.final_lr = max_update, o.final_lr or 0
    init(s, name, o, 2)
    s.base_lr_orig = s.base_lr
    s.max_steps = max_update - s.warmup_steps
    if s.max_steps < 1 then error(name .. ": max_update must exceed warmup_steps", 2) end
    return s
  end)
  function c:get(num_update)
    if num_update < self.warmup_steps then return self:get_warmup_lr(num_update) end
    if num_update <= self.max_update then
      self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr)
        * curve(self, num_update - self.warmup_steps, self.max_steps)
    end
    return self.base_lr
  end
  return c
end

-- PolyScheduler(max_update, base_lr=0.01, pwr=2, final_lr=0, warm-up...):
-- lr = final + (base - final) * (1 - (t - warmup)/(max_update - warmup))^pwr.
annealing("PolyScheduler", { "max_update", "base_lr", "pwr", "final_lr" },
  function(self, done, total) return (1 - done / total) ^ self.power end,
  function(o) return { power = o.pwr or 2 } end)

-- CosineScheduler(max_update, base_lr=0.01, final_lr=0, warm-up...):
-- lr = final + (base - final) * (1 + cos(pi * (t - warmup)/(max_update - warmup))) / 2.
annealing("CosineScheduler", { "max_update", "base_lr", "final_lr" },
  function(_, done, total) return (1 + cos(pi * done / total)) / 2 end)

-- The optimizer sets the base lr (learning_rate= given): keeps warm-up consistent.
function LRScheduler:set_base_lr(lr)
  self.base_lr = lr
  self.base_lr_orig = lr
  self.warmup_final_lr = lr
end

-- Plain-data snapshot (Trainer:save_states) and restore.
function LRScheduler:state()
  local t = {}
  for k, v in pairs(self) do
    if type(v) == "number" or type(v) == "string" then t[k] = v end
  end
  return t
end
function LRScheduler:set_state(t)
  for k, v in pairs(t) do
    if type(v) == "number" and type(self[k]) == "number" then self[k] = v end
  end
end

return M
