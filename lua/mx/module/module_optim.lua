-- Module's optimizer (lua/mx/module/module.lua): init_optimizer, update, the optimizer
-- states' files, borrow_optimizer (BucketingModule). One device: the optimizer updates
-- each parameter where it lives; several (or a dist store): a kvstore sums the devices'
-- gradients and updates its copy (update on the store, MXNet's default), every device's
-- weights pulled back.
local nd = require("mx.nd")
local class = require("mx.core.class")
local check = require("mx.module.checks")

local type, error, tostring, ipairs, pairs, tonumber = type, error, tostring, ipairs, pairs, tonumber

local HEADER = "__module_optimizer_header__"

local OPT = class.signature("init_optimizer", { "kvstore", "optimizer",
  { "optimizer_params", map = true }, "force_init" })

return function(Module)
  -- init_optimizer(kvstore="local", optimizer="sgd", optimizer_params={learning_rate=0.01},
  -- force_init=false)
  function Module:init_optimizer(...)
    local o = OPT(2, ...)
    if not (self.binded and self.params_initialized) then
      error("Module.init_optimizer: call bind and init_params first", 2)
    end
    if self.optimizer_initialized and not o.force_init then return end
    local optimizer = require("mx.optimizer")
    local kvstore = require("mx.kvstore")
    local g = self._exec_group
    local kv = o.kvstore
    if kv == nil then kv = "local" end
    if type(kv) ~= "string" and not (type(kv) == "table" and type(kv.push) == "function"
        and type(kv.pull) == "function" and type(kv.init) == "function") then
      error("Module.init_optimizer: kvstore must be a name ('local', 'device', 'dist_sync', ...) or a "
        .. "KVStore, got " .. check.kind(kv), 2)
    end
    check.options("Module.init_optimizer", "optimizer_params", o.optimizer_params, 2)
    local kvs
    if type(kv) == "table" then
      kvs = kv
    elseif type(kv) == "string" and (#self.context > 1 or kv:sub(1, 4) == "dist") then
      local ok, r = pcall(kvstore.create, kv)
      if not ok then error("Module.init_optimizer: " .. tostring(r), 2) end
      kvs = r
    end
    local workers = kvs and kvs.type and kvs.type:find("_sync") and kvs.num_workers or 1
    local batch = g.batch_size * workers
    local attrs = self.symbol:attr_dict()
    local opt = o.optimizer or "sgd"
    if type(opt) == "string" then
      local params = {}
      for k, v in pairs(o.optimizer_params or { learning_rate = 0.01 }) do params[k] = v end
      if params.rescale_grad == nil then params.rescale_grad = 1 / batch end
      local idx2name = {}
      for i, n in ipairs(self._param_names) do idx2name[i] = n end
      params.param_idx2name = idx2name
      local ok, r = pcall(optimizer.create, opt, params)
      if not ok then error("Module.init_optimizer: " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), 2) end
      opt = r
    elseif type(opt) ~= "table" or type(opt.update) ~= "function" then
      error("Module.init_optimizer: optimizer must be a name or an Optimizer, got " .. type(opt), 2)
    else
      if next(opt.idx2name or {}) == nil then
        opt.idx2name = {}
        for i, n in ipairs(self._param_names) do opt.idx2name[i] = n end
      end
      if opt.rescale_grad ~= 1 / batch then
        self:_log("Optimizer created manually outside Module but rescale_grad is not normalized "
          .. "to 1.0/batch_size/num_workers (%s vs. %s). Is this intended?",
          tostring(opt.rescale_grad), tostring(1 / batch))
      end
    end
    -- MXNet's Optimizer with param_idx2name: no weight decay but on *_weight and *_gamma;
    -- the variables' __lr_mult__ / __wd_mult__ win
    local lm, wm = {}, {}
    for i, n in ipairs(self._param_names) do
      local a = attrs[n] or {}
      if not (n:sub(-7) == "_weight" or n:sub(-6) == "_gamma") then wm[i] = 0 end
      if a.__lr_mult__ then lm[i] = tonumber(a.__lr_mult__) end
      if a.__wd_mult__ then wm[i] = tonumber(a.__wd_mult__) end
    end
    opt:set_lr_mult(lm)
    opt:set_wd_mult(wm)
    self._optimizer, self._kvstore = opt, kvs
    self._states = {}
    if kvs then
      if self._compression then kvs:set_gradient_compression(self._compression) end
      for i = 1, #self._param_names do
        kvs:init(i, g.param_arrays[i][1])
        kvs:pull(i, g.param_arrays[i])
      end
      kvs:set_optimizer(opt)
    end
    self.optimizer_initialized = true
    if self._preload_opt_states then
      self:load_optimizer_states(self._preload_opt_states)
      self._preload_opt_states = nil
    end
  end

  -- borrow_optimizer(shared_module): use its optimizer, states and store (BucketingModule)
  function Module:borrow_optimizer(shared)
    check.module("Module.borrow_optimizer", "shared_module", shared, 2)
    if not shared.optimizer_initialized then
      error("Module.borrow_optimizer: the shared module has no optimizer yet", 2)
    end
    self._optimizer, self._kvstore, self._states = shared._optimizer, shared._kvstore, shared._states
    self.optimizer_initialized = true
  end

  -- update(): one optimizer step from the last backward's gradients
  function Module:update()
    if not (self.binded and self.params_initialized and self.optimizer_initialized) then
      error("Module.update: call bind, init_params and init_optimizer first", 2)
    end
    local g, opt, kv = self._exec_group, self._optimizer, self._kvstore
    self._params_dirty = true
    for i = 1, #self._param_names do
      local grads = g.grad_arrays[i]
      if grads[1] ~= nil then
        if kv then
          kv:push(i, grads)
          kv:pull(i, g.param_arrays[i])
        else
          local w, gr = g.param_arrays[i][1], grads[1]
          local st = self._states[i]
          if st == nil then
            st = opt:create_state_multi_precision(i, w)
            self._states[i] = st
          end
          opt:update_multi_precision(i, w, gr, st)
        end
      end
    end
  end

  -- save_optimizer_states(fname) / load_optimizer_states(fname): the states in MXNet's
  -- .params format with a plain-text header (no code is read back)
  function Module:save_optimizer_states(fname)
    check.string("Module.save_optimizer_states", "fname", fname, 2)
    if not self.optimizer_initialized then
      error("Module.save_optimizer_states: call init_optimizer first", 2)
    end
    if self._kvstore then
      return check.relay("Module.save_optimizer_states", 2, self._kvstore.save_optimizer_states,
        self._kvstore, fname, true)
    end
    local kvstore = require("mx.kvstore")
    local data = self._optimizer:get_state_data()
    data.nparams = #self._param_names
    local arrays = { [HEADER] = kvstore._header_array(data) }
    for i, st in pairs(self._states) do
      for k, s in ipairs(st) do arrays[tostring(i) .. ":" .. k] = s end
    end
    check.relay("Module.save_optimizer_states", 2, nd.save, fname, arrays)
  end

  -- Either file kind loads into either kind of module (one device: the module's states;
  -- several: the kvstore's, keyed by parameter index), as MXNet's pickled updater states.
  function Module:load_optimizer_states(fname)
    check.string("Module.load_optimizer_states", "fname", fname, 2)
    if not self.optimizer_initialized then
      error("Module.load_optimizer_states: call init_optimizer first", 2)
    end
    local kvstore = require("mx.kvstore")
    local ok, loaded = pcall(nd.load, fname)
    if not ok then error("Module.load_optimizer_states: " .. tostring(loaded), 2) end
    local h, kvh = loaded[HEADER], loaded.__kvstore_header__
    if self._kvstore and kvh then return self._kvstore:load_optimizer_states(fname) end
    if h == nil and kvh == nil then
      error("Module.load_optimizer_states: " .. fname .. " is not a module or kvstore state file", 2)
    end
    local data, index_of
    if h then
      data = kvstore._header_read(h)
      if data.nparams ~= #self._param_names then
        error(string.format("Module.load_optimizer_states: states for %s parameters, the module has %d",
          tostring(data.nparams), #self._param_names), 2)
      end
      index_of = function(i) return i end
    else
      local kh = kvstore._header_read(kvh)
      data = kh.data
      index_of = function(n) return tonumber(kh.keys and kh.keys[n]) end
    end
    if data then self._optimizer:set_state_data(data) end
    local states = {}
    for name, t in pairs(loaded) do
      local a, k = tostring(name):match("^(%d+):(%d+)$")
      if a then
        local i = index_of(tonumber(a))
        local w = i and self._exec_group.param_arrays[i] and self._exec_group.param_arrays[i][1]
        if w == nil then error("Module.load_optimizer_states: state for unknown parameter " .. a, 2) end
        states[i] = states[i] or {}
        states[i][tonumber(k)] = nd.keep(t:to(w:context()))
      end
    end
    if self._kvstore then
      for i, st in pairs(states) do self._kvstore._states[i] = st end
    else
      self._states = states
    end
  end
end
