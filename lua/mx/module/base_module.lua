-- mx.mod.BaseModule: what every module shares (python/mxnet/module/base_module.py): fit,
-- score, predict, iter_predict, forward_backward, built on the subclass's bind /
-- init_params / init_optimizer / forward / backward / update / update_metric /
-- get_outputs / get_params / set_params.
--
--   mod:fit(train_data, eval_data, eval_metric="acc", epoch_end_callback,
--           batch_end_callback, kvstore="local", optimizer="sgd",
--           optimizer_params={learning_rate=0.01}, eval_end_callback,
--           eval_batch_end_callback, initializer=mx.init.Uniform(0.01), arg_params,
--           aux_params, allow_missing=false, force_rebind=false, force_init=false,
--           begin_epoch=0, num_epoch=, validation_metric, monitor, sparse_row_id_fn)
--
-- Arguments in MXNet's order, positionally or by name (mx.core.class signature). Epochs count
-- from begin_epoch (0-based, as MXNet's: callbacks and logs see MXNet's numbers). A
-- callback is a function or a list of them: batch ones get a BatchEndParam {epoch=,
-- nbatch=, eval_metric=, locals=} (nbatch 0-based), epoch ones (epoch, symbol,
-- arg_params, aux_params). The log (MXNet's lines: "Epoch[0] Train-accuracy=0.91",
-- "Epoch[0] Time cost=1.234", "Epoch[0] Validation-accuracy=0.92") goes to the module's
-- logger: a function(line) (default: a line on stderr).
local class = require("mx.core.class")
local nd = require("mx.nd")
local now = require("mx.progress").now
local check = require("mx.module.checks")

local type, error, tostring, ipairs, select = type, error, tostring, ipairs, select

local M = {}

local BaseModule = class.base("BaseModule")
M.BaseModule = BaseModule
BaseModule.__tostring = function(s) return "<" .. tostring(getmetatable(s).__name) .. ">" end
-- BaseModule(logger): an abstract module (MXNet's): a subclass, or an object whose methods
-- the caller sets, gives bind, forward, ... to fit/score/predict
local BASE_SIG = class.declare(BaseModule, class.signature("BaseModule", { "logger" }))
setmetatable(BaseModule, { __call = function(cls, ...)
  local o = BASE_SIG(2, ...)
  return setmetatable({ logger = o.logger, binded = false, for_training = false,
    inputs_need_grad = false, params_initialized = false, optimizer_initialized = false }, cls)
end })

function M.default_logger(line) io.stderr:write(line, "\n") end

-- BatchEndParam(epoch, nbatch, eval_metric, locals) (mx.model.BatchEndParam)
function M.BatchEndParam(epoch, nbatch, eval_metric, locals)
  return { epoch = epoch, nbatch = nbatch, eval_metric = eval_metric, locals = locals }
end

local function callbacks(cb, ...)
  if cb == nil then return end
  if type(cb) == "function" or (type(cb) == "table" and getmetatable(cb)
      and getmetatable(cb).__call) then
    cb(...)
    return
  end
  for _, f in ipairs(cb) do f(...) end
end
M._callbacks = callbacks

local function metric_of(m, who, level)
  local metric = require("mx.gluon.metric")
  local ok, r = pcall(metric.create, m)
  if not ok then error(who .. ": eval_metric: " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), level + 1) end
  return r
end

function BaseModule:_log(fmt, ...)
  local line = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  local lg = self.logger or M.default_logger
  if type(lg) == "table" and lg.info then lg:info(line) else lg(line) end
end

-- set_params(arg_params, aux_params, allow_missing, force_init=true, allow_extra): MXNet's
-- default, through init_params
function BaseModule:set_params(arg_params, aux_params, allow_missing, force_init, allow_extra)
  self:init_params(nil, arg_params, aux_params, allow_missing, force_init ~= false, allow_extra)
end

function BaseModule:forward_backward(batch)
  check.relay("forward_backward", 2, self.forward, self, batch, true)
  check.relay("forward_backward", 2, self.backward, self)
end

-- the state fit's callers need (score, predict: a bound module with parameters)
local function ready(self, who, level)
  if not (self.binded and self.params_initialized) then
    error(who .. ": call bind and init_params first", level + 1)
  end
end

local FIT = class.signature("fit", { "train_data", "eval_data", "eval_metric",
  "epoch_end_callback", "batch_end_callback", "kvstore", "optimizer",
  { "optimizer_params", map = true }, "eval_end_callback", "eval_batch_end_callback",
  "initializer", { "arg_params", map = true }, { "aux_params", map = true }, "allow_missing",
  "force_rebind", "force_init", "begin_epoch", "num_epoch", "validation_metric",
  "monitor",
  { "sparse_row_id_fn", unsupported = "dense parameters only" } })
M.FIT = FIT

function BaseModule:fit(...)
  local o = FIT(2, ...)
  local train = o.train_data
  if type(train) ~= "table" or type(train.next) ~= "function" then
    error("fit: train_data must be a data iterator (mx.io), got " .. type(train), 2)
  end
  if o.num_epoch == nil then error("fit: num_epoch must be given", 2) end
  check.count("fit", "num_epoch", o.num_epoch, 2)
  check.count("fit", "begin_epoch", o.begin_epoch, 2, true)
  if o.eval_data ~= nil then check.iterator("fit", "eval_data", o.eval_data, 2) end
  for _, k in ipairs({ "epoch_end_callback", "batch_end_callback", "eval_end_callback",
    "eval_batch_end_callback" }) do
    check.callbacks("fit", k, o[k], 2)
  end
  check.params("fit", "arg_params", o.arg_params, 2)
  check.params("fit", "aux_params", o.aux_params, 2)
  check.options("fit", "optimizer_params", o.optimizer_params, 2)
  local io_ = require("mx.io")
  check.relay("fit", 2, self.bind, self, io_._provide(train, "provide_data"),
    io_._provide(train, "provide_label"), true, false, o.force_rebind == true)
  check.relay("fit", 2, self.init_params, self, o.initializer or require("mx.initializer").Uniform(0.01),
    o.arg_params, o.aux_params, o.allow_missing == true, o.force_init == true)
  check.relay("fit", 2, self.init_optimizer, self, o.kvstore or "local", o.optimizer or "sgd",
    o.optimizer_params or { learning_rate = 0.01 })
  local eval_metric = metric_of(o.eval_metric or "acc", "fit", 2)
  -- the epoch's own copy (MXNet 1.9's global statistics): callbacks may reset eval_metric
  -- (Speedometer's auto_reset), the Train- line covers the whole epoch
  local whole = metric_of(eval_metric:get_config(), "fit", 2)
  local validation_metric = o.validation_metric or o.eval_metric or "acc"
  local monitor = o.monitor
  if monitor ~= nil then
    if type(monitor) ~= "table" or type(monitor.tic) ~= "function" then
      error("fit: monitor must be an mx.mon.Monitor, got " .. type(monitor), 2)
    end
    check.relay("fit", 2, self.install_monitor, self, monitor)
  end
  for epoch = o.begin_epoch or 0, o.num_epoch - 1 do
    local tic = now()
    eval_metric:reset()
    whole:reset()
    local nbatch = 0
    local next_batch = train:next()
    while next_batch ~= nil do
      local batch = next_batch
      if monitor then monitor:tic() end
      self:forward_backward(batch)
      self:update()
      self:update_metric(eval_metric, batch.label)
      self:update_metric(whole, batch.label)
      if monitor then monitor:toc_print() end
      -- the next batch only now (MXNet's order: an iterator may reuse the batch's memory)
      next_batch = train:next()
      callbacks(o.batch_end_callback, M.BatchEndParam(epoch, nbatch, eval_metric,
        { self = self, data_batch = batch }))
      nbatch = nbatch + 1
    end
    for _, nv in ipairs(whole:get_name_value()) do
      self:_log("Epoch[%d] Train-%s=%f", epoch, nv[1], nv[2])
    end
    self:_log("Epoch[%d] Time cost=%.3f", epoch, now() - tic)
    local arg_params, aux_params = self:get_params()
    self:set_params(arg_params, aux_params)
    if o.epoch_end_callback ~= nil then
      local sym = self._checkpoint_symbol and self:_checkpoint_symbol() or self.symbol
      callbacks(o.epoch_end_callback, epoch, sym, arg_params, aux_params)
    end
    if o.eval_data then
      local res = self:score(o.eval_data, validation_metric, nil, o.eval_batch_end_callback,
        o.eval_end_callback, true, epoch)
      for _, nv in ipairs(res) do
        self:_log("Epoch[%d] Validation-%s=%f", epoch, nv[1], nv[2])
      end
    end
    train:reset()
  end
end

local SCORE = class.signature("score", { "eval_data", "eval_metric", "num_batch",
  "batch_end_callback", "score_end_callback", "reset", "epoch",
  { "sparse_row_id_fn", unsupported = "dense parameters only" } })
M.SCORE = SCORE

-- score(eval_data, eval_metric, num_batch, batch_end_callback, score_end_callback,
-- reset=true, epoch=0) -> { {name, value}, ... }
function BaseModule:score(...)
  local o = SCORE(2, ...)
  local data = o.eval_data
  check.iterator("score", "eval_data", data, 2)
  check.count("score", "num_batch", o.num_batch, 2, true)
  check.callbacks("score", "batch_end_callback", o.batch_end_callback, 2)
  check.callbacks("score", "score_end_callback", o.score_end_callback, 2)
  ready(self, "score", 2)
  if o.reset ~= false then data:reset() end
  local m = metric_of(o.eval_metric, "score", 2)
  m:reset()
  local nbatch = 0
  for batch in data:iter() do
    if o.num_batch ~= nil and nbatch == o.num_batch then break end
    self:forward(batch, false)
    self:update_metric(m, batch.label)
    callbacks(o.batch_end_callback, M.BatchEndParam(o.epoch or 0, nbatch, m,
      { self = self, eval_batch = batch }))
    nbatch = nbatch + 1
  end
  callbacks(o.score_end_callback, M.BatchEndParam(o.epoch or 0, nbatch, m, { self = self }))
  return m:get_name_value()
end

-- the outputs of a batch without its pad rows (copies)
local function unpadded(outs, pad)
  local r = {}
  for i, out in ipairs(outs) do
    local n = out:shape()[1]
    r[i] = (pad and pad > 0) and out[{ { 1, n - pad } }]:copy() or out:copy()
  end
  return r
end

local PREDICT = class.signature("predict", { "eval_data", "num_batch", "merge_batches", "reset",
  "always_output_list", { "sparse_row_id_fn", unsupported = "dense parameters only" } })
M.PREDICT = PREDICT

-- predict(eval_data, num_batch, merge_batches=true, reset=true, always_output_list=false)
-- -> the outputs (batches concatenated, pads dropped): one NDArray, or a list of them
-- (several outputs or always_output_list); merge_batches=false: a list per batch.
function BaseModule:predict(...)
  local o = PREDICT(2, ...)
  local data = o.eval_data
  if type(data) ~= "table" or type(data.next) ~= "function" then
    if nd.is_tensor(data) then
      data = require("mx.io").NDArrayIter(data, nil, self._batch_size or data:shape()[1])
    else
      error("predict: eval_data must be a data iterator or an NDArray, got " .. type(data), 2)
    end
  end
  check.count("predict", "num_batch", o.num_batch, 2, true)
  ready(self, "predict", 2)
  if o.reset ~= false then data:reset() end
  local list = {}
  local nbatch = 0
  for batch in data:iter() do
    if o.num_batch ~= nil and nbatch == o.num_batch then break end
    self:forward(batch, false)
    list[#list + 1] = unpadded(self:get_outputs(), batch.pad)
    nbatch = nbatch + 1
  end
  if #list == 0 or o.merge_batches == false then return list end
  local merged = {}
  for i = 1, #list[1] do
    local parts = {}
    for k, outs in ipairs(list) do parts[k] = outs[i] end
    merged[i] = #parts == 1 and parts[1] or nd.concat(parts, { dim = 1 })
  end
  if #merged == 1 and not o.always_output_list then return merged[1] end
  return merged
end

-- for outputs, nbatch, batch in mod:iter_predict(eval_data, num_batch, reset) do ... end
-- (nbatch 0-based; outputs without the pad rows)
function BaseModule:iter_predict(eval_data, num_batch, reset)
  if type(num_batch) == "table" then num_batch, reset = num_batch.num_batch, num_batch.reset end
  check.iterator("iter_predict", "eval_data", eval_data, 2)
  check.count("iter_predict", "num_batch", num_batch, 2, true)
  ready(self, "iter_predict", 2)
  if reset ~= false then eval_data:reset() end
  local nbatch = -1
  return function()
    nbatch = nbatch + 1
    if num_batch ~= nil and nbatch >= num_batch then return nil end
    local batch = eval_data:next()
    if batch == nil then return nil end
    self:forward(batch, false)
    return unpadded(self:get_outputs(), batch.pad), nbatch, batch
  end
end

return M
