-- mx.callback — MXNet 1.x's training callbacks (python/mxnet/callback.py) for
-- Module.fit: Speedometer, do_checkpoint, module_checkpoint, log_train_metric,
-- ProgressBar, LogValidationMetricsCallback. Batch callbacks take a BatchEndParam
-- {epoch=, nbatch=, eval_metric=, locals=}; epoch callbacks (epoch, symbol, arg_params,
-- aux_params). Their lines are MXNet's, written through the fitting module's logger
-- (param.locals.self) or M.log (default: stderr).
local class = require("mx.core.class")
local now = require("mx.progress").now

local type, error, tostring, ipairs, select = type, error, tostring, ipairs, select

local M = {}

function M.log(line) io.stderr:write(line, "\n") end

local function emit(param, fmt, ...)
  local line = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  local mod = param and param.locals and param.locals.self
  if mod and mod._log then mod:_log(line) else M.log(line) end
end

local function pos_int(who, what, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(who .. ": " .. what .. " must be a positive integer, got " .. tostring(v), level + 1)
  end
end

local function reset_local(m)
  if m.reset_local then m:reset_local() else m:reset() end
end

-- metric name/value pairs as "\tname=value" (MXNet's %f)
local function pairs_text(name_value)
  local t = {}
  for _, nv in ipairs(name_value) do t[#t + 1] = string.format("\t%s=%f", nv[1], nv[2]) end
  return table.concat(t)
end

---------------------------------------------------------------- Speedometer
-- Speedometer(batch_size, frequent=50, auto_reset=true): every `frequent` batches the
-- speed and the training metric ("Epoch[0] Batch [50-100]\tSpeed: 1910.41 samples/sec\t
-- accuracy=0.92"), the metric reset after each line with auto_reset.
local Speedometer = class.base("Speedometer")
M.Speedometer = Speedometer
local SPEED = class.signature("Speedometer", { "batch_size", "frequent", "auto_reset" })
class.declare(Speedometer, SPEED)
setmetatable(Speedometer, { __call = function(_, ...)
  local o = SPEED(2, ...)
  pos_int("Speedometer", "batch_size", o.batch_size, 2)
  local f = o.frequent or 50
  pos_int("Speedometer", "frequent", f, 2)
  return setmetatable({ batch_size = o.batch_size, frequent = f, init = false, tic = 0,
    last_count = 0, auto_reset = o.auto_reset ~= false }, Speedometer)
end })
Speedometer.__call = function(self, param)
  local count = param.nbatch
  if self.last_count > count then self.init = false end
  self.last_count = count
  if not self.init then
    self.init = true
    self.tic = now()
    return
  end
  if count % self.frequent ~= 0 then return end
  local dt = now() - self.tic
  local speed = dt > 0 and self.frequent * self.batch_size / dt or math.huge
  local m = param.eval_metric
  if m ~= nil then
    local nv = m:get_name_value()
    if self.auto_reset then
      reset_local(m)
      emit(param, "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec%s", param.epoch,
        count - self.frequent, count, speed, pairs_text(nv))
    else
      emit(param, "Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec%s", param.epoch, count, speed,
        pairs_text(nv))
    end
  else
    emit(param, "Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
  end
  self.tic = now()
end

---------------------------------------------------------------- checkpoints
-- do_checkpoint(prefix, period=1): an epoch callback saving prefix-symbol.json and
-- prefix-EPOCH.params every `period` epochs (EPOCH = epoch + 1, as MXNet).
local DO = class.signature("do_checkpoint", { "prefix", "period" })
function M.do_checkpoint(...)
  local o = DO(2, ...)
  if type(o.prefix) ~= "string" then error("do_checkpoint: prefix must be a string", 2) end
  local period = math.max(1, math.floor(o.period or 1))
  return function(iter_no, sym, arg, aux)
    if (iter_no + 1) % period == 0 then
      local path = require("mx.model").save_checkpoint(o.prefix, iter_no + 1, sym, arg, aux)
      M.log(string.format("Saved checkpoint to \"%s\"", path))
    end
  end
end
class.declare(M.do_checkpoint, DO)

-- module_checkpoint(mod, prefix, period=1, save_optimizer_states=false): mod's own
-- save_checkpoint every `period` epochs.
local MODC = class.signature("module_checkpoint", { "mod", "prefix", "period",
  "save_optimizer_states" })
function M.module_checkpoint(...)
  local o = MODC(2, ...)
  local period = math.max(1, math.floor(o.period or 1))
  return function(iter_no)
    if (iter_no + 1) % period == 0 then
      o.mod:save_checkpoint(o.prefix, iter_no + 1, o.save_optimizer_states)
    end
  end
end
class.declare(M.module_checkpoint, MODC)

---------------------------------------------------------------- metric logs
-- log_train_metric(period, auto_reset=false): every `period` batches
-- "Iter[0] Batch[100] Train-accuracy=0.91".
local LOGM = class.signature("log_train_metric", { "period", "auto_reset" })
function M.log_train_metric(...)
  local o = LOGM(2, ...)
  pos_int("log_train_metric", "period", o.period, 2)
  return function(param)
    if param.nbatch % o.period == 0 and param.eval_metric ~= nil then
      for _, nv in ipairs(param.eval_metric:get_name_value()) do
        emit(param, "Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, nv[1], nv[2])
      end
      if o.auto_reset then reset_local(param.eval_metric) end
    end
  end
end
class.declare(M.log_train_metric, LOGM)

-- ProgressBar(total, length=80): "[========--------] 50.0%" per batch.
local ProgressBar = class.base("ProgressBar")
M.ProgressBar = ProgressBar
local PB = class.signature("ProgressBar", { "total", "length" })
class.declare(ProgressBar, PB)
setmetatable(ProgressBar, { __call = function(_, ...)
  local o = PB(2, ...)
  pos_int("ProgressBar", "total", o.total, 2)
  return setmetatable({ total = o.total, bar_len = o.length or 80 }, ProgressBar)
end })
ProgressBar.__call = function(self, param)
  local count = param.nbatch
  local filled = math.floor(self.bar_len * count / self.total + 0.5)
  local pct = math.ceil(100 * count / self.total)
  emit(param, "[%s] %s%%\r", string.rep("=", filled) .. string.rep("-", self.bar_len - filled),
    tostring(pct))
end

-- LogValidationMetricsCallback(): an eval_end_callback logging
-- "Epoch[0] Validation-accuracy=0.92".
local LogVal = class.base("LogValidationMetricsCallback")
M.LogValidationMetricsCallback = LogVal
local LV = class.signature("LogValidationMetricsCallback", {})
class.declare(LogVal, LV)
setmetatable(LogVal, { __call = function(_, ...)
  LV(2, ...)
  return setmetatable({}, LogVal)
end })
LogVal.__call = function(_, param)
  if not param.eval_metric then return end
  for _, nv in ipairs(param.eval_metric:get_name_value()) do
    emit(param, "Epoch[%d] Validation-%s=%f", param.epoch, nv[1], nv[2])
  end
end

return M
