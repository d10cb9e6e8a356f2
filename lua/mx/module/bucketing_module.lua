-- mx.mod.BucketingModule: MXNet 1.x's module for inputs of several shapes (sequence
-- lengths): one Module per bucket key, made on first use from sym_gen(key) -> symbol,
-- data_names, label_names, all sharing the default bucket's parameters, gradients and
-- optimizer (python/mxnet/module/bucketing_module.py).
--
--   BucketingModule(sym_gen, default_bucket_key, logger, context=cpu(), work_load_list,
--                   fixed_param_names, state_names, group2ctxs, compression_params)
-- A batch's bucket_key (mx.rnn.BucketSentenceIter sets it) picks the module forward runs;
-- batch.provide_data / provide_label give its shapes (else its arrays').
local class = require("mx.core.class")
local io_ = require("mx.io")
local B = require("mx.module.base_module")
local Mod = require("mx.module.module")

local type, error, tostring, ipairs, pairs, setmetatable = type, error, tostring, ipairs,
  pairs, setmetatable

local M = {}

local BucketingModule = class.extend(B.BaseModule, "BucketingModule")
M.BucketingModule = BucketingModule

local SIG = class.declare(BucketingModule, class.signature("BucketingModule", { "sym_gen",
  "default_bucket_key", "logger", { "context", list = true }, { "work_load_list", list = true },
  { "fixed_param_names", list = true }, { "state_names", list = true },
  { "group2ctxs", unsupported = "one device group per context" },
  { "compression_params", map = true } }))

function M.new(...)
  local o = SIG(3, ...)
  if type(o.sym_gen) ~= "function" then
    error("BucketingModule: sym_gen must be a function(bucket_key) -> symbol, data_names, "
      .. "label_names, got " .. type(o.sym_gen), 3)
  end
  if o.default_bucket_key == nil then error("BucketingModule: default_bucket_key must be given", 3) end
  local self = setmetatable({ _sym_gen = o.sym_gen, _default_bucket_key = o.default_bucket_key,
    logger = o.logger, _opts = { logger = o.logger, context = o.context,
      work_load_list = o.work_load_list, fixed_param_names = o.fixed_param_names,
      state_names = o.state_names, compression_params = o.compression_params },
    _buckets = {}, binded = false, params_initialized = false, optimizer_initialized = false },
    BucketingModule)
  local sym, dn, ln = self:_gen(o.default_bucket_key, 3)
  self.symbol, self.data_names, self.label_names = sym, dn, ln
  self.output_names = sym:list_outputs()
  return self
end
setmetatable(BucketingModule, { __index = B.BaseModule,
  __call = function(_, ...) return M.new(...) end })

function BucketingModule:_gen(key, level)
  local ok, sym, dn, ln = pcall(self._sym_gen, key)
  if not ok then error("BucketingModule: sym_gen(" .. tostring(key) .. "): " .. tostring(sym), level + 1) end
  if not require("mx.symbol").is_symbol(sym) then
    error("BucketingModule: sym_gen(" .. tostring(key) .. ") must return a Symbol first", level + 1)
  end
  return sym, dn or { "data" }, ln or { "softmax_label" }
end

function BucketingModule:_module(key, level)
  local sym, dn, ln = self:_gen(key, level + 1)
  local o = {}
  for k, v in pairs(self._opts) do o[k] = v end
  o.symbol, o.data_names, o.label_names = sym, dn, ln
  return Mod.new(o)
end

-- bind(data_shapes, label_shapes, for_training=true, inputs_need_grad=false,
-- force_rebind=false, shared_module, grad_req="write"): the default bucket's module
function BucketingModule:bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                              force_rebind, shared_module, grad_req)
  if type(data_shapes) == "table" and data_shapes.data_shapes then
    local t = data_shapes
    data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind, shared_module,
      grad_req = t.data_shapes, t.label_shapes, t.for_training, t.inputs_need_grad,
      t.force_rebind, t.shared_module, t.grad_req
  end
  if self.binded and not force_rebind then return end
  if shared_module ~= nil then error("BucketingModule.bind: shared_module is not supported", 2) end
  self.for_training = for_training ~= false
  self.inputs_need_grad = inputs_need_grad == true
  self._grad_req = grad_req
  local mod = self:_module(self._default_bucket_key, 2)
  mod:bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind, nil, grad_req)
  self._buckets = { [self._default_bucket_key] = mod }
  self._curr_module = mod
  self._curr_bucket_key = self._default_bucket_key
  self.binded = true
  self.data_shapes, self.label_shapes = mod.data_shapes, mod.label_shapes
  if self.params_initialized and self._arg_params then
    mod:set_params(self._arg_params, self._aux_params)
  end
end

-- switch_bucket(bucket_key, data_shapes, label_shapes): the bucket's module (made and
-- bound sharing the default's parameters on first use) becomes the current one
function BucketingModule:switch_bucket(key, data_shapes, label_shapes)
  if not self.binded then error("BucketingModule.switch_bucket: call bind first", 2) end
  local mod = self._buckets[key]
  if mod == nil then
    mod = self:_module(key, 2)
    local default = self._buckets[self._default_bucket_key]
    mod:bind(data_shapes, label_shapes, self.for_training, self.inputs_need_grad, false,
      default, self._grad_req)
    if self.optimizer_initialized then mod:borrow_optimizer(default) end
    if self._monitor then mod:install_monitor(self._monitor) end
    self._buckets[key] = mod
  end
  self._curr_module, self._curr_bucket_key = mod, key
end

function BucketingModule:init_params(...)
  if not self.binded then error("BucketingModule.init_params: call bind first", 2) end
  self._curr_module:init_params(...)
  self.params_initialized = true
end

function BucketingModule:get_params()
  return self._curr_module:get_params()
end

function BucketingModule:set_params(arg_params, aux_params, allow_missing, force_init, allow_extra)
  if not self.binded then
    self._arg_params, self._aux_params = arg_params, aux_params
    self.params_initialized = true
    return
  end
  self._curr_module:set_params(arg_params, aux_params, allow_missing, force_init, allow_extra)
  self.params_initialized = true
end

function BucketingModule:init_optimizer(...)
  if not (self.binded and self.params_initialized) then
    error("BucketingModule.init_optimizer: call bind and init_params first", 2)
  end
  local default = self._buckets[self._default_bucket_key]
  if self._preload_opt_states then
    default._preload_opt_states, self._preload_opt_states = self._preload_opt_states, nil
  end
  default:init_optimizer(...)
  for key, mod in pairs(self._buckets) do
    if key ~= self._default_bucket_key then mod:borrow_optimizer(default) end
  end
  self.optimizer_initialized = true
end

local function shapes_of(names, arrays, given)
  if given then return given end
  local r = {}
  for i, x in ipairs(arrays or {}) do r[i] = io_.DataDesc(names[i], x:shape()) end
  return r
end

function BucketingModule.prepare() end

function BucketingModule:forward(batch, is_train)
  if not (self.binded and self.params_initialized) then
    error("BucketingModule.forward: call bind and init_params first", 2)
  end
  local key = batch.bucket_key
  if key == nil then key = self._default_bucket_key end
  if key ~= self._curr_bucket_key or self._buckets[key] == nil then
    local mod = self._buckets[key]
    local dn = mod and mod.data_names or select(2, self:_gen(key, 2))
    local ln = mod and mod.label_names or select(3, self:_gen(key, 2))
    self:switch_bucket(key, shapes_of(dn, batch.data, batch.provide_data),
      shapes_of(ln, batch.label, batch.provide_label))
  end
  self._curr_module:forward(batch, is_train)
end

-- install_monitor(mon): on every bucket's module, those bound later too
function BucketingModule:install_monitor(mon)
  if not self.binded then error("BucketingModule.install_monitor: call bind first", 2) end
  self._monitor = mon
  for _, mod in pairs(self._buckets) do mod:install_monitor(mon) end
end

function BucketingModule:backward(out_grads) self._curr_module:backward(out_grads) end
function BucketingModule:update() self._curr_module:update() end
function BucketingModule:get_outputs(merge) return self._curr_module:get_outputs(merge) end
function BucketingModule:get_input_grads(merge) return self._curr_module:get_input_grads(merge) end
function BucketingModule:update_metric(m, labels, pre_sliced)
  self._curr_module:update_metric(m, labels, pre_sliced)
end

-- save_checkpoint(prefix, epoch, save_optimizer_states): the default bucket's symbol and
-- the shared parameters
function BucketingModule:save_checkpoint(prefix, epoch, save_optimizer_states)
  local default = self._buckets[self._default_bucket_key]
  default:save_checkpoint(prefix, epoch, save_optimizer_states)
end

-- BucketingModule.load(prefix, epoch, sym_gen, default_bucket_key, {module options}) (or
-- every argument by name in one table after epoch): the checkpoint's parameters set on the
-- new module (at bind), MXNet's BucketingModule.load
function M.load(prefix, epoch, sym_gen, default_bucket_key, opts)
  local o = {}
  if type(sym_gen) == "table" then
    for k, v in pairs(sym_gen) do o[k] = v end
  else
    for k, v in pairs(opts or {}) do o[k] = v end
    o.sym_gen, o.default_bucket_key = sym_gen, default_bucket_key
  end
  if type(o.sym_gen) ~= "function" then error("BucketingModule.load: sym_gen must be a function", 2) end
  local load_states = o.load_optimizer_states
  o.load_optimizer_states = nil
  local _, args, auxs = require("mx.model").load_checkpoint(prefix, epoch)
  local mod = M.new(o)
  mod:set_params(args, auxs)
  if load_states then
    mod._preload_opt_states = string.format("%s-%04d.states", prefix, epoch)
  end
  return mod
end
BucketingModule.load = M.load

return M
