-- mx.mod.Module: MXNet 1.x's module (python/mxnet/module/module.py): a symbol bound to
-- devices, its parameters, an optimizer, and fit/score/predict (base_module.lua).
--
--   local mod = mx.mod.Module(net, {context = mx.cpu()})  -- data_names {"data"},
--   mod:fit(train_iter, val_iter, "acc", nil, nil, "local", "sgd",  --   label_names
--     {learning_rate = 0.1}, ...) or mod:fit{train_data = ..., num_epoch = 10}  -- {"softmax_label"}
--
-- Module(symbol, data_names={"data"}, label_names={"softmax_label"}, logger, context=cpu(),
--        work_load_list, fixed_param_names, state_names, group2ctxs, compression_params):
-- MXNet's arguments in its order, positionally or by name. context may be a list: data
-- parallelism, the batch split over the devices (work_load_list: their shares), the
-- gradients summed and every copy updated through a kvstore ('local' or 'device',
-- update on the store). Parameters: the symbol's arguments other than the data, label
-- and state names; fixed_param_names take no gradient. mx.init's initializers fill them
-- by name (MXNet's InitDesc rules: *_weight by the initializer, *_bias and *_beta 0,
-- *_gamma 1, moving_mean 0, moving_var 1; a variable's __init__ attribute wins).
-- The optimizer's rescale_grad defaults to 1/batch_size (MXNet's); a variable's
-- __lr_mult__ / __wd_mult__ attributes set its multipliers.
local nd = require("mx.nd")
local class = require("mx.core.class")
local context = require("mx.context")
local io_ = require("mx.io")
local B = require("mx.module.base_module")
local G = require("mx.module.executor_group")
local check = require("mx.module.checks")

local type, error, tostring, ipairs, pairs, setmetatable =
  type, error, tostring, ipairs, pairs, setmetatable

local M = {}

local Module = class.extend(B.BaseModule, "Module")
M.Module = Module

local SIG = class.declare(Module, class.signature("Module", { "symbol",
  { "data_names", list = true }, { "label_names", list = true }, "logger",
  { "context", list = true }, { "work_load_list", list = true },
  { "fixed_param_names", list = true }, { "state_names", list = true },
  { "group2ctxs", unsupported = "one device group per context" },
  { "compression_params", map = true } }))

local function list_of(who, what, v, level)
  if v == nil then return {} end
  if type(v) == "string" then return { v } end
  if type(v) ~= "table" then
    error(who .. ": " .. what .. " must be a list of names, got " .. type(v), level + 1)
  end
  local r = {}
  for i, x in ipairs(v) do
    if type(x) ~= "string" then error(who .. ": " .. what .. "[" .. i .. "] is not a string", level + 1) end
    r[i] = x
  end
  return r
end

function M.new(...)
  local o = SIG(3, ...)
  local sym = o.symbol
  if not require("mx.symbol").is_symbol(sym) then
    error("Module: symbol must be an mx.sym Symbol, got " .. type(sym), 3)
  end
  local self = setmetatable({ symbol = sym, _symbol = sym, logger = o.logger }, Module)
  self.data_names = o.data_names and list_of("Module", "data_names", o.data_names, 3) or { "data" }
  self.label_names = o.label_names and list_of("Module", "label_names", o.label_names, 3)
    or { "softmax_label" }
  self.state_names = list_of("Module", "state_names", o.state_names, 3)
  self.fixed_param_names = list_of("Module", "fixed_param_names", o.fixed_param_names, 3)
  local ctx = o.context or context.cpu()
  if context.is_context(ctx) or type(ctx) == "string" then ctx = { ctx } end
  self.context = {}
  for i, c in ipairs(ctx) do
    local ok, dt, di = pcall(context.parse, c)
    if not ok then error("Module: context[" .. i .. "]: " .. tostring(dt), 3) end
    self.context[i] = context.is_context(c) and c or (dt == 1 and context.cpu(di) or context.gpu(di))
  end
  self.work_load_list = o.work_load_list
  if self.work_load_list == nil then
    self.work_load_list = {}
    for i = 1, #self.context do self.work_load_list[i] = 1 end
  end
  if #self.work_load_list ~= #self.context then
    error("Module: work_load_list must have one share per context", 3)
  end
  self._compression = o.compression_params
  local args = sym:list_arguments()
  local known = {}
  for _, a in ipairs(args) do known[a] = true end
  for _, n in ipairs(self.data_names) do
    if not known[n] then
      error(string.format("Module: data name '%s' is not an argument of the symbol (arguments: %s)",
        n, table.concat(args, ", ")), 3)
    end
  end
  local skip = {}
  for _, t in ipairs { self.data_names, self.label_names, self.state_names } do
    for _, n in ipairs(t) do skip[n] = true end
  end
  -- label names the symbol does not take are dropped (MXNet warns)
  local labels = {}
  for _, n in ipairs(self.label_names) do if known[n] then labels[#labels + 1] = n end end
  self.label_names = labels
  self._param_names = {}
  for _, a in ipairs(args) do
    if not skip[a] then self._param_names[#self._param_names + 1] = a end
  end
  self._aux_names = sym:list_auxiliary_states()
  self.output_names = sym:list_outputs()
  self.binded, self.for_training, self.inputs_need_grad = false, false, false
  self.params_initialized, self.optimizer_initialized = false, false
  return self
end
setmetatable(Module, { __index = B.BaseModule, __call = function(_, ...) return M.new(...) end })

---------------------------------------------------------------- shapes and binding
local function descs(who, list, names, level)
  if list ~= nil and (type(list) ~= "table" or nd.is_tensor(list)) then
    error(who .. ": shapes must be a list of DataDesc or {name, shape} pairs (an iterator's "
      .. "provide_data), got " .. check.kind(list), level + 1)
  end
  local r = {}
  for i, d in ipairs(list or {}) do
    local ok, x = pcall(io_._desc, d)
    if not ok then
      error(who .. ": shape " .. i .. ": " .. tostring(x):gsub("^[^\n]-:%d+: ", ""), level + 1)
    end
    r[i] = x
  end
  if names then
    local given = {}
    for _, d in ipairs(r) do given[d.name] = true end
    for _, n in ipairs(names) do
      if not given[n] then
        local gs = {}
        for _, d in ipairs(r) do gs[#gs + 1] = d.name end
        error(string.format("%s: no shape for '%s' (given: %s)", who, n, table.concat(gs, ", ")),
          level + 1)
      end
    end
  end
  return r
end

local BIND = class.signature("bind", { { "data_shapes", list = true },
  { "label_shapes", list = true }, "for_training", "inputs_need_grad", "force_rebind",
  "shared_module", "grad_req" })

-- bind(data_shapes, label_shapes, for_training=true, inputs_need_grad=false,
-- force_rebind=false, shared_module, grad_req="write"): shapes are DataDescs or
-- {name, shape} pairs (an iterator's provide_data / provide_label)
function Module:bind(...)
  local o = BIND(2, ...)
  if o.shared_module ~= nil then check.module("Module.bind", "shared_module", o.shared_module, 2) end
  if self.binded and not o.force_rebind then
    self:_log("Already bound, ignoring bind()")
    return
  end
  self.for_training = o.for_training ~= false
  self.inputs_need_grad = o.inputs_need_grad == true
  self._grad_req = o.grad_req or "write"
  local ds = descs("Module.bind", o.data_shapes, self.data_names, 2)
  local ls = descs("Module.bind", o.label_shapes, nil, 2)
  -- only the labels the symbol takes
  local keep = {}
  for _, n in ipairs(self.label_names) do keep[n] = true end
  local lab = {}
  for _, d in ipairs(ls) do if keep[d.name] then lab[#lab + 1] = d end end
  if not self.for_training and #lab == 0 then
    -- prediction without labels: the loss heads' labels get their inferred shapes
    local shapes = {}
    for _, d in ipairs(ds) do shapes[d.name] = d.shape end
    local a = self.symbol:infer_shape_partial(shapes)
    local args = self.symbol:list_arguments()
    for i, n in ipairs(args) do
      if keep[n] and a[i] and #a[i] > 0 then lab[#lab + 1] = io_.DataDesc(n, a[i]) end
    end
  end
  local shared = o.shared_module and o.shared_module._exec_group
  local ok, g = pcall(G.new, self.symbol, self.context, self.work_load_list, ds, lab,
    self._param_names, self.for_training, self.inputs_need_grad, shared,
    self.fixed_param_names, o.grad_req, self.state_names)
  if not ok then error(tostring(g), 2) end
  self._exec_group = g
  self.data_shapes, self.label_shapes = ds, lab
  self._batch_size = g.batch_size
  self.binded = true
  if o.shared_module then
    self.params_initialized = o.shared_module.params_initialized
    self._arg_params, self._aux_params = o.shared_module._arg_params, o.shared_module._aux_params
  elseif self.params_initialized then
    self:_set_group_params()
  end
end

function Module:_output_shapes()
  local r = {}
  for i, n in ipairs(self.output_names) do
    local out = self._exec_group.execs[1].outputs[i]
    r[i] = { n, out and out:shape() }
  end
  return r
end
function Module:output_shapes()
  if not self.binded then error("Module.output_shapes: call bind first", 2) end
  return self:_output_shapes()
end

local RESHAPE = class.signature("reshape", { { "data_shapes", list = true },
  { "label_shapes", list = true } })
function Module:reshape(...)
  local o = RESHAPE(2, ...)
  if not self.binded then error("Module.reshape: call bind first", 2) end
  local ds = descs("Module.reshape", o.data_shapes, self.data_names, 2)
  local ls = descs("Module.reshape", o.label_shapes, nil, 2)
  self._exec_group:reshape(ds, ls)
  self.data_shapes, self.label_shapes = ds, ls
  self._batch_size = self._exec_group.batch_size
  self:_reinstall_monitor(self._monitored)
end

---------------------------------------------------------------- parameters
local INIT = class.signature("init_params", { "initializer", { "arg_params", map = true },
  { "aux_params", map = true }, "allow_missing", "force_init", "allow_extra" })

-- the values of the named arrays into every device's copies
local function copy_into(v, list)
  for _, w in ipairs(list) do nd.copy(v:to(w:context(), w:dtype()), { out = w }) end
end
function Module:_set_group_params()
  local g = self._exec_group
  for i, n in ipairs(self._param_names) do
    local v = self._arg_params[n]
    if v then copy_into(v, g.param_arrays[i]) end
  end
  for i, n in ipairs(self._aux_names) do
    local v = self._aux_params[n]
    if v then copy_into(v, g.aux_arrays[i]) end
  end
end

-- init_params(initializer=mx.init.Uniform(0.01), arg_params, aux_params,
-- allow_missing=false, force_init=false, allow_extra=false)
-- (level: the caller's, as init_params itself sees it)
local function init_params(self, o, level)
  if self.params_initialized and not o.force_init then return end
  if not self.binded then error("Module.init_params: call bind first", level) end
  check.params("Module.init_params", "arg_params", o.arg_params, level)
  check.params("Module.init_params", "aux_params", o.aux_params, level)
  local init = require("mx.initializer")
  local okc, ini = pcall(init.create, o.initializer or init.Uniform(0.01))
  if not okc then
    error("Module.init_params: initializer: " .. tostring(ini):gsub("^[^\n]-%.lua:%d+: ", ""), level)
  end
  local attrs = self.symbol:attr_dict()
  local g = self._exec_group
  local arg_params, aux_params = {}, {}
  local function fill(name, arr, given, what)
    local v = given and given[name]
    if v ~= nil then
      if table.concat(v:shape(), ",") ~= table.concat(arr:shape(), ",") then
        error(string.format("Module.init_params: %s '%s' is (%s), the module's (%s)", what, name,
          table.concat(v:shape(), ", "), table.concat(arr:shape(), ", ")), level + 1)
      end
      nd.copy(v:to(nil, arr:dtype()), { out = arr })
    elseif given ~= nil and not o.allow_missing then
      error(string.format("Module.init_params: %s '%s' is not in the given params (pass "
        .. "allow_missing=true to initialize it)", what, name), level + 1)
    else
      init._init_by_name(ini, name, arr, attrs[name])
    end
  end
  for i, n in ipairs(self._param_names) do
    local w = g.param_arrays[i][1]
    local a = nd.keep(nd.zeros(w:shape(), { dtype = w:dtype() }))
    fill(n, a, o.arg_params, "argument")
    arg_params[n] = a
  end
  for i, n in ipairs(self._aux_names) do
    local w = g.aux_arrays[i][1]
    local a = nd.keep(nd.zeros(w:shape(), { dtype = w:dtype() }))
    fill(n, a, o.aux_params, "auxiliary state")
    aux_params[n] = a
  end
  if not o.allow_extra then
    for _, pair in ipairs { { o.arg_params, arg_params, "argument" }, { o.aux_params, aux_params,
        "auxiliary state" } } do
      for k in pairs(pair[1] or {}) do
        if pair[2][k] == nil then
          error(string.format("Module.init_params: %s '%s' is not a parameter of the module "
            .. "(pass allow_extra=true to ignore it)", pair[3], tostring(k)), level)
        end
      end
    end
  end
  self._arg_params, self._aux_params = arg_params, aux_params
  self.params_initialized = true
  self._params_dirty = false
  self:_set_group_params()
end
function Module:init_params(...)
  init_params(self, INIT(2, ...), 3)
end

-- set_params(arg_params, aux_params, allow_missing=false, force_init=true, allow_extra=false)
local SET = class.signature("set_params", { { "arg_params", map = true }, { "aux_params", map = true },
  "allow_missing", "force_init", "allow_extra" })
function Module:set_params(...)
  local o = SET(2, ...)
  check.params("Module.set_params", "arg_params", o.arg_params, 2)
  check.params("Module.set_params", "aux_params", o.aux_params, 2)
  if not self.binded then
    -- (MXNet keeps them for the next bind)
    self._arg_params, self._aux_params = o.arg_params or {}, o.aux_params or {}
    self.params_initialized = true
    return
  end
  init_params(self, { arg_params = o.arg_params, aux_params = o.aux_params,
    allow_missing = o.allow_missing, force_init = o.force_init ~= false, allow_extra = o.allow_extra }, 3)
end

-- get_params() -> arg_params, aux_params: name -> NDArray (CPU copies, the first device's
-- values)
function Module:get_params()
  if not (self.binded and self.params_initialized) then
    error("Module.get_params: call bind and init_params first", 2)
  end
  local g = self._exec_group
  local cpu = context.cpu()
  for i, n in ipairs(self._param_names) do
    nd.copy(g.param_arrays[i][1]:to(cpu), { out = self._arg_params[n] })
  end
  for i, n in ipairs(self._aux_names) do
    nd.copy(g.aux_arrays[i][1]:to(cpu), { out = self._aux_params[n] })
  end
  self._params_dirty = false
  local a, x = {}, {}
  for k, v in pairs(self._arg_params) do a[k] = v end
  for k, v in pairs(self._aux_params) do x[k] = v end
  return a, x
end

---------------------------------------------------------------- the optimizer
require("mx.module.module_optim")(Module, B)

---------------------------------------------------------------- running
function Module.prepare() end

function Module:forward(batch, is_train)
  if not (self.binded and self.params_initialized) then
    error("Module.forward: call bind and init_params first", 2)
  end
  if type(batch) ~= "table" or type(batch.data) ~= "table" then
    error("Module.forward: expected a DataBatch, got " .. type(batch), 2)
  end
  if is_train == nil then is_train = self.for_training end
  -- another batch shape: the executors reshaped (MXNet's Module.forward does the same)
  local x = batch.data[1]
  local cur = self.data_shapes[1]
  if nd.is_tensor(x) and table.concat(x:shape(), ",") ~= table.concat(cur.shape, ",") then
    local ds, ls = {}, {}
    for i, d in ipairs(self.data_shapes) do
      ds[i] = io_.DataDesc(d.name, batch.data[i]:shape(), d.dtype, d.layout)
    end
    for i, d in ipairs(self.label_shapes) do
      local l = batch.label and batch.label[i]
      ls[i] = io_.DataDesc(d.name, l and l:shape() or d.shape, d.dtype, d.layout)
    end
    self:reshape(ds, ls)
  end
  local ok, e = pcall(self._exec_group.forward, self._exec_group, batch, is_train)
  if not ok then error(tostring(e), 2) end
end

-- install_monitor(mon): mon (mx.mon.Monitor) watches every device's executor, and the
-- ones a reshape makes
function Module:install_monitor(mon)
  if not self.binded then error("Module.install_monitor: call bind first", 2) end
  if type(mon) ~= "table" or type(mon._replace) ~= "function" then
    error("Module.install_monitor: expected an mx.mon.Monitor, got " .. type(mon), 2)
  end
  self._monitor = mon
  self:_reinstall_monitor(nil)
end
function Module:_reinstall_monitor(old)
  local mon = self._monitor
  if not mon then return end
  local execs = {}
  for k, e in ipairs(self._exec_group.execs) do execs[k] = e end
  mon:_replace(old, execs)
  self._monitored = execs
end

function Module:backward(out_grads)
  if not (self.binded and self.params_initialized) then
    error("Module.backward: call bind and init_params first", 2)
  end
  if not self.for_training then error("Module.backward: bound with for_training=false", 2) end
  check.tensors("Module.backward", "out_grads", out_grads, 2, true)
  if nd.is_tensor(out_grads) then out_grads = { out_grads } end
  local ok, e = pcall(self._exec_group.backward, self._exec_group, out_grads)
  if not ok then error(tostring(e), 2) end
end

-- get_outputs(merge_multi_context=true): a list of NDArrays (per device with false)
function Module:get_outputs(merge)
  if not self.binded then error("Module.get_outputs: call bind first", 2) end
  return self._exec_group:get_outputs(merge)
end

function Module:get_input_grads(merge)
  if not self.inputs_need_grad then
    error("Module.get_input_grads: bind with inputs_need_grad=true", 2)
  end
  local ok, r = pcall(self._exec_group.get_input_grads, self._exec_group, merge)
  if not ok then error(tostring(r), 2) end
  return r
end

-- update_metric(eval_metric, labels, pre_sliced=false)
function Module:update_metric(eval_metric, labels, pre_sliced)
  if not self.binded then error("Module.update_metric: call bind first", 2) end
  check.metric("Module.update_metric", "eval_metric", eval_metric, 2)
  check.tensors("Module.update_metric", "labels", labels, 2)
  if pre_sliced ~= nil and type(pre_sliced) ~= "boolean" then
    error("Module.update_metric: pre_sliced must be a boolean, got " .. check.kind(pre_sliced), 2)
  end
  check.relay("Module.update_metric", 2, self._exec_group.update_metric, self._exec_group, eval_metric,
    labels, pre_sliced)
end

-- get_states / set_states: the state_names arrays (MXNet's RNN states)
function Module:get_states(merge)
  if not self.binded then error("Module.get_states: call bind first", 2) end
  local r = {}
  for i, n in ipairs(self.state_names) do
    local parts = {}
    for k, e in ipairs(self._exec_group.execs) do parts[k] = e.arg_dict[n] end
    r[i] = merge == false and parts or (#parts == 1 and parts[1] or nd.concat(parts, { dim = 1 }))
  end
  return r
end
local SET_STATES = class.signature("set_states", { { "states", list = true }, "value" })
function Module:set_states(...)
  local o = SET_STATES(2, ...)
  if not self.binded then error("Module.set_states: call bind first", 2) end
  local states, value = o.states, o.value
  if (states == nil) == (value == nil) then
    error("Module.set_states: give states or value (only one)", 2)
  end
  for i, n in ipairs(self.state_names) do
    for k, e in ipairs(self._exec_group.execs) do
      local a = e.arg_dict[n]
      if value ~= nil then a[{}] = value
      else
        local s = states[i]
        if type(s) == "table" and not nd.is_tensor(s) then s = s[k] end
        nd.copy(s, { out = a })
      end
    end
  end
end

---------------------------------------------------------------- files
-- save_checkpoint(prefix, epoch, save_optimizer_states=false): prefix-symbol.json,
-- prefix-EPOCH.params (arg:/aux: names, MXNet's %04d) and prefix-EPOCH.states
-- The symbol as files hold it: Gluon block nodes (a gluon.loss called on Symbols) traced
-- on the bound shapes (mx.gluon.symbol_node)
function Module:_checkpoint_symbol()
  local SG = require("mx.graph.symbol_graph")
  local BN = require("mx.gluon.symbol_node")
  local s = self.symbol
  if not BN.has_blocks(s.outputs, SG.topo) then return s end
  if not self.binded then
    error("Module.save_checkpoint: the symbol holds a Gluon block: bind the module first", 3)
  end
  local shapes = {}
  for _, d in ipairs(self.data_shapes) do shapes[d.name] = d.shape end
  for _, d in ipairs(self.label_shapes or {}) do shapes[d.name] = d.shape end
  return require("mx.symbol")._new_symbol(SG.expand_blocks(s.outputs, "save_checkpoint", shapes, 2))
end

function Module:save_checkpoint(prefix, epoch, save_optimizer_states)
  check.string("Module.save_checkpoint", "prefix", prefix, 2)
  check.count("Module.save_checkpoint", "epoch", epoch, 2)
  if not (self.binded and self.params_initialized) then
    error("Module.save_checkpoint: call bind and init_params first", 2)
  end
  local sym = self:_checkpoint_symbol()
  check.relay("Module.save_checkpoint", 2, sym.save, sym, prefix .. "-symbol.json")
  local p = string.format("%s-%04d.params", prefix, epoch)
  check.relay("Module.save_checkpoint", 2, self.save_params, self, p)
  self:_log("Saved checkpoint to \"%s\"", p)
  if save_optimizer_states then
    local s = string.format("%s-%04d.states", prefix, epoch)
    check.relay("Module.save_checkpoint", 2, self.save_optimizer_states, self, s)
    self:_log("Saved optimizer state to \"%s\"", s)
  end
end

function Module:save_params(fname)
  check.string("Module.save_params", "fname", fname, 2)
  if not (self.binded and self.params_initialized) then
    error("Module.save_params: call bind and init_params first", 2)
  end
  local a, x = self:get_params()
  local arrays = {}
  for k, v in pairs(a) do arrays["arg:" .. k] = v end
  for k, v in pairs(x) do arrays["aux:" .. k] = v end
  check.relay("Module.save_params", 2, nd.save, fname, arrays)
end

function Module:load_params(fname)
  check.string("Module.load_params", "fname", fname, 2)
  local ok, loaded = pcall(nd.load, fname)
  if not ok then error("Module.load_params: " .. tostring(loaded), 2) end
  local a, x = {}, {}
  for k, v in pairs(loaded) do
    local kind, name = tostring(k):match("^(%a+):(.*)$")
    if kind == "arg" then a[name] = v
    elseif kind == "aux" then x[name] = v
    else error("Module.load_params: invalid param file " .. fname .. " (key " .. tostring(k) .. ")", 2) end
  end
  check.relay("Module.load_params", 2, self.set_params, self, a, x)
end

-- Module.load(prefix, epoch, load_optimizer_states=false, {module options}): a Module
-- of the checkpoint's symbol with its parameters (set at bind).
function M.load(prefix, epoch, load_optimizer_states, opts)
  check.string("Module.load", "prefix", prefix, 2)
  check.count("Module.load", "epoch", epoch, 2)
  local sym, args, auxs = check.relay("Module.load", 2, require("mx.model").load_checkpoint, prefix, epoch)
  local o = {}
  local given = type(load_optimizer_states) == "table" and load_optimizer_states or opts or {}
  for k, v in pairs(given) do o[k] = v end
  if type(load_optimizer_states) == "table" then
    load_optimizer_states = o.load_optimizer_states
    o.load_optimizer_states = nil
  end
  o.symbol = sym
  local mod = M.new(o)
  mod._arg_params, mod._aux_params = args, auxs
  mod.params_initialized = true
  if load_optimizer_states then
    mod._preload_opt_states = string.format("%s-%04d.states", prefix, epoch)
  end
  return mod
end
Module.load = M.load

return M
