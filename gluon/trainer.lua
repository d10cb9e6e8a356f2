-- mx.gluon.Trainer — applies an optimizer to a set of Parameters.
--
--   local trainer = gluon.Trainer(net:collect_params(), "adam", {learning_rate=1e-3})
--   mx.autograd.record(function() loss = loss_fn(net(x), y) end)
--   loss:backward()
--   trainer:step(batch_size)          -- rescale_grad = 1/batch_size, then update
--
-- trainer.learning_rate is the current rate; trainer:set_learning_rate(lr) changes it.
-- save_states/load_states keep the optimizer's state tensors in MXNet's .params
-- format plus a plain-text header array (no code is ever read back).
--
-- Several devices (parameters initialized with a ctx list, inputs from split_and_load):
-- the gradients of every copy are reduced through a kvstore (kvstore= 'device' by
-- default, 'local', a dist type or an mx.kv object) and every copy gets the same update:
-- on the store (update_on_kvstore=true, MXNet's default; weights pulled back into every
-- copy) or on each device after allreduce_grads (update_on_kvstore=false). Parameters on
-- one device each (model parallelism) need no store and are updated where they live.
local nd = require("mx.nd")
local optimizer = require("mx.optimizer")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local class = require("mx.core.class")
local kvstore = require("mx.kvstore")
local copies_of = Parameter._copies_of

local type, error, tostring, pairs, ipairs, getmetatable, tonumber, rawget =
  type, error, tostring, pairs, ipairs, getmetatable, tonumber, rawget

local Trainer = {}
Trainer.__name = "Trainer"
local methods = {}
Trainer.__index = function(self, k)
  if k == "learning_rate" then return self._optimizer:learning_rate() end
  if k == "optimizer" then return rawget(self, "_optimizer") end
  return methods[k]
end

-- MXNet's parameters in its order (positionally or by name)
local SIG = class.signature("Trainer", { "params", "optimizer",
  { "optimizer_params", map = true }, "kvstore", { "compression_params", map = true },
  "update_on_kvstore" })

-- params: a ParameterDict (collect_params()), a list of Parameters, or a table
-- name -> Parameter (taken in name order).
local function param_list(params, level)
  local list = {}
  if getmetatable(params) == block.ParameterDict then
    -- a shared parameter is listed under each of its names (MXNet 2.0): update it once
    local seen = {}
    for _, p in params:items() do
      if not seen[p] then seen[p] = true; list[#list + 1] = p end
    end
  elseif type(params) == "table" and getmetatable(params) == nil then
    if #params > 0 then
      for i, p in ipairs(params) do list[i] = p end
    else
      local names = {}
      for k in pairs(params) do names[#names + 1] = k end
      table.sort(names)
      for i, k in ipairs(names) do list[i] = params[k] end
    end
  else
    error("Trainer: params must be a ParameterDict (net:collect_params()), a list of "
      .. "Parameters or a table of them, got " .. type(params), level + 1)
  end
  local seen = {}
  for i, p in ipairs(list) do
    if getmetatable(p) ~= Parameter then
      error("Trainer: element " .. i .. " of params is not a Parameter", level + 1)
    end
    if seen[p] then error("Trainer: Parameter '" .. p:_fullname() .. "' appears twice", level + 1) end
    seen[p] = true
  end
  return list
end

-- Trainer(params, optimizer, optimizer_params, kvstore="device", compression_params,
-- update_on_kvstore).
local function new(_, ...)
  local opts = SIG(2, ...)
  local params, opt, optimizer_params = opts.params, opts.optimizer, opts.optimizer_params
  local list = param_list(params, 2)
  local param_dict = {}
  for i, p in ipairs(list) do param_dict[i] = p end
  local o
  if type(opt) == "string" then
    local po = {}
    for k, v in pairs(optimizer_params or {}) do po[k] = v end
    po.param_dict = param_dict
    local ok, r = pcall(optimizer.create, opt, po)
    if not ok then error("Trainer: " .. tostring(r), 2) end
    o = r
  elseif type(opt) == "table" and opt.update then
    if optimizer_params ~= nil then
      error("Trainer: optimizer_params must be nil when optimizer is an Optimizer object", 2)
    end
    o = opt
    o.param_dict = param_dict
  else
    error("Trainer: optimizer must be a name ('sgd', 'adam', ...) or an Optimizer, got "
      .. type(opt), 2)
  end
  local opts_ = opts
  local kv = opts_.kvstore
  if kv == nil then kv = "device" end
  if not (kv == false or type(kv) == "string" or (type(kv) == "table" and kv.pushpull)) then
    error("Trainer: kvstore must be a type name ('device', 'local', 'dist_sync', ...), an "
      .. "mx.kv store or false, got " .. type(kv), 2)
  end
  local uok = opts_.update_on_kvstore
  if uok ~= nil and type(uok) ~= "boolean" then
    error("Trainer: update_on_kvstore must be a boolean, got " .. type(uok), 2)
  end
  local self = setmetatable({
    _params = list,
    _optimizer = o,
    _states = {},       -- index -> list of state tensors (the first device's)
    _dstates = {},      -- device d >= 2 -> index -> states (update on each device)
    _scale = o.rescale_grad,
    _kv_spec = kv,
    _uok_spec = uok,
    _compression = opts_.compression_params,
    _kv_ready = false,
    _kv = nil,          -- the store once made (nil: none is needed)
    _uok = false,       -- update on the store
  }, Trainer)
  for _, p in ipairs(list) do
    if p.stype ~= "default" then
      local ok, err = pcall(p._set_trainer, p, self, 1)
      if not ok then error("Trainer: " .. tostring(err):gsub("^[^\n]-:%d+: ", ""), 2) end
    end
  end
  return self
end
setmetatable(Trainer, { __call = new })
class.declare(Trainer, SIG)

function methods:set_learning_rate(lr)
  local ok, err = pcall(self._optimizer.set_learning_rate, self._optimizer, lr)
  if not ok then error("Trainer: " .. tostring(err), 2) end
end

local function check_batch(who, batch_size, level)
  if type(batch_size) ~= "number" or not (batch_size > 0 and batch_size < math.huge) then
    error(who .. ": batch_size must be a positive finite number, got " .. tostring(batch_size),
      level + 1)
  end
end

-- The store, made at the first step (parameters are initialized by then): MXNet's
-- _init_kvstore. With every parameter on one device and a local type no store is used.
function methods:_init_kvstore(level)
  if self._kv_ready then
    if self._kv ~= nil then return end
    -- no store yet: still none needed unless a parameter got copies since (reset_ctx)
    local params = self._params
    local multi = false
    for i = 1, #params do
      if rawget(params[i], "_copies") ~= nil then multi = true break end
    end
    if not multi then return end
    self._kv_ready = false
  end
  local spec, multi = self._kv_spec, false
  for _, p in ipairs(self._params) do
    local c = copies_of(p)
    if c == nil and p.grad_req ~= "null" then
      error("Trainer:step: Parameter '" .. p:_fullname() .. "' is not initialized"
        .. (p._deferred and " (deferred: run a forward pass first)" or ""), level + 1)
    end
    if c and #c > 1 then multi = true end
  end
  -- MXNet 1.9: row_sparse weights always live on a store that updates them (pulled row by
  -- row before each forward); dense weights with sparse gradients update on each device
  -- after a push and pull of the sparse gradients, except on a dist store
  local sparse_w, sparse_g = false, false
  for _, p in ipairs(self._params) do
    if p.stype ~= "default" then sparse_w = true end
    if p.grad_stype ~= "default" and p.grad_req ~= "null" then sparse_g = true end
  end
  local kv
  if type(spec) == "table" then
    kv = spec
  elseif type(spec) == "string" and (multi or sparse_w or spec:sub(1, 4) == "dist") then
    local ok, r = pcall(kvstore.create, spec)
    if not ok then error("Trainer: " .. tostring(r), level + 1) end
    kv = r
  elseif sparse_w then
    error("Trainer: Cannot create '" .. tostring(spec) .. "' KVStore with row_sparse parameters. "
      .. "The type must be KVStore or str.", level + 1)
  end
  if kv then
    if self._compression then kv:set_gradient_compression(self._compression) end
    local uok = self._uok_spec
    local dist = tostring(kv.type):sub(1, 4) == "dist"
    if sparse_w then
      if uok == false then
        error("Trainer: Cannot set update_on_kvstore=False when sparse weights are present.",
          level + 1)
      end
      uok = true
    elseif sparse_g then
      if uok == false and dist then
        error("Trainer: Cannot set update_on_kvstore=False on dist kvstore when sparse "
          .. "gradients are present.", level + 1)
      end
      if uok == nil then uok = dist end
    end
    if uok == nil then uok = true end
    if not uok and tostring(kv.type):find("async", 1, true) then
      error("Trainer: update_on_kvstore must be true with an async kvstore (" .. tostring(kv.type)
        .. "): the servers run the optimizer", level + 1)
    end
    for i, p in ipairs(self._params) do
      local d = copies_of(p)
      if d then
        if p.stype ~= "default" then
          kv:init(i, nd.cast_storage(d[1])) -- its rows come with row_sparse_pull
        else
          kv:init(i, d[1])
          kv:pull(i, d) -- dist: every worker starts from rank 0's weights
        end
      end
    end
    if uok then
      kv:set_optimizer(self._optimizer)
      for i, st in pairs(self._states) do -- states loaded before the first step
        local w = kv._store[i]
        local moved = {}
        for k, t in ipairs(st) do moved[k] = nd.keep(t:to(w:context())) end
        kv._states[i] = moved
      end
    end
    self._uok = uok
  end
  self._kv = kv
  self._kv_ready = true
end

-- step(batch_size, ignore_stale_grad=false): rescale gradients by 1/batch_size, reduce
-- them across devices (the kvstore) and update every parameter whose grad_req is not
-- "null". A gradient no backward has written since the last step is an error, or
-- skipped with ignore_stale_grad=true.
function methods:step(batch_size, ignore_stale_grad)
  check_batch("Trainer:step", batch_size, 2)
  local o = self._optimizer
  o.rescale_grad = self._scale / batch_size
  self:_init_kvstore(2)
  if self._kv and not self._uok then self:_allreduce(ignore_stale_grad, 3) end
  self:_update(ignore_stale_grad, 3)
end

-- update(batch_size): the update alone (after allreduce_grads, or with one device).
function methods:update(batch_size, ignore_stale_grad)
  check_batch("Trainer:update", batch_size, 2)
  local o = self._optimizer
  o.rescale_grad = self._scale / batch_size
  self:_init_kvstore(2)
  if self._uok then
    error("Trainer:update: update() when parameters are updated on the kvstore is not "
      .. "supported; create the Trainer with update_on_kvstore=false", 2)
  end
  self:_update(ignore_stale_grad, 3)
end

-- allreduce_grads(): every copy's gradient becomes the sum over all copies (and, with a
-- dist store, all workers); for a custom update between it and update().
function methods:allreduce_grads()
  self:_init_kvstore(2)
  if self._uok then
    error("Trainer:allreduce_grads: allreduce_grads() when parameters are updated on the "
      .. "kvstore is not supported; create the Trainer with update_on_kvstore=false", 2)
  end
  if self._kv then self:_allreduce(true, 3) end
end

-- One pushpull for all the keys: a dist store buckets them into few collectives.
function methods:_allreduce(ignore_stale_grad, level)
  local kv = self._kv
  local keys, lists, skeys, slists = {}, {}, {}, {}
  for i, p in ipairs(self._params) do
    if p.grad_req ~= "null" then
      local g, fresh = p:_grad_state(1)
      if fresh or not ignore_stale_grad then
        if g and g:stype() ~= "default" then -- sparse: a push and a pull of its rows
          skeys[#skeys + 1] = i
          slists[#slists + 1] = p:list_grad()
        else
          keys[#keys + 1] = i
          lists[#lists + 1] = p:list_grad()
        end
      end
    end
  end
  if #keys > 0 then kv:pushpull(keys, lists, lists) end
  if #skeys > 0 then
    kv:push(skeys, slists)
    kv:pull(skeys, slists, nil, false)
  end
  local _ = level
end

-- The store is made again at the next step from the parameters' current values (a
-- row_sparse Parameter's set_data / load_parameters: MXNet's _reset_kvstore).
function methods:_reset_kvstore(level)
  local kv = self._kv
  if kv and tostring(kv.type):sub(1, 4) == "dist" then
    error("Trainer: Cannot reset distributed KVStore.", level + 1)
  end
  if kv and type(self._kv_spec) == "table" then
    -- the store object given to the Trainer is kept: its keys take the new values
    for i, p in ipairs(self._params) do
      local c = copies_of(p)
      local s = kv._store[i]
      if c and s ~= nil then kv._store[i] = nd.keep(nd.cast_storage(c[1]):to(s:context())) end
    end
    return
  end
  self._kv, self._kv_ready, self._uok = nil, false, false
end

-- The rows row_id lists of parameter's stored weight into outs (row_sparse copies):
-- Parameter:row_sparse_data's pull (MXNet's Trainer._row_sparse_pull).
function methods:_row_sparse_pull(parameter, outs, row_id)
  self:_init_kvstore(2)
  for i, p in ipairs(self._params) do
    if p == parameter then return self._kv:row_sparse_pull(i, outs, { row_ids = row_id }) end
  end
end

-- MXNet 1.9: a parameter whose gradient no backward wrote since the last step is an
-- error, or with ignore_stale_grad skipped (not updated). Every parameter is checked
-- before any is updated, so an error leaves the weights and the marks as they were.
function methods:_update(ignore_stale_grad, level)
  local o, params, states = self._optimizer, self._params, self._states
  local grads, skip = {}, nil
  for i = 1, #params do
    local p = params[i]
    if p.grad_req ~= "null" then
      local ws = copies_of(p)
      if ws == nil then
        error("Trainer:step: Parameter '" .. p:_fullname() .. "' is not initialized"
          .. (p._deferred and " (deferred: run a forward pass first)" or ""), level)
      end
      local gl = {}
      for d = 1, #ws do
        local g, fresh = p:_grad_state(d)
        if g == nil then
          error("Trainer:step: Parameter '" .. p:_fullname() .. "' has no gradient buffer (its "
            .. "data was detached from autograd; use set_grad_req to change grad_req)", level)
        end
        if not fresh then
          if not ignore_stale_grad then
            error(string.format("Trainer:step: Gradient of Parameter `%s` on context %s has not "
              .. "been updated by backward since last `step`. This could mean a bug in your model "
              .. "that made it only use a subset of the Parameters (Blocks) for this iteration. If "
              .. "you are intentionally only using a subset, call step with "
              .. "ignore_stale_grad=true to suppress this error and skip updating of Parameters "
              .. "with stale gradient", p:_fullname(), tostring(ws[d]:context())), level)
          end
          skip = skip or {}
          skip[i] = true
        end
        gl[d] = g
      end
      grads[i] = gl
    end
  end
  -- mx.amp.init_trainer's dynamic loss scaling: an overflowed step updates nothing
  local scaler = rawget(self, "_amp_loss_scaler")
  if scaler and scaler:has_overflow(grads) then return end
  local kv = self._uok and self._kv
  if kv then -- one push and one pull of every key (a dist store batches them)
    local keys, gls, pkeys, wls = {}, {}, {}, {}
    for i = 1, #params do
      if grads[i] ~= nil and not (skip and skip[i]) then
        keys[#keys + 1], gls[#gls + 1] = i, grads[i]
        -- a row_sparse weight is pulled row by row before the next forward
        if params[i].stype == "default" then
          pkeys[#pkeys + 1], wls[#wls + 1] = i, copies_of(params[i])
        end
      end
    end
    if #keys > 0 then kv:push(keys, gls) end
    if #pkeys > 0 then kv:pull(pkeys, wls) end
    for k = 1, #keys do params[keys[k]]:_mark_stale() end
    return
  end
  for i = 1, #params do
    local gl = grads[i]
    if gl ~= nil and not (skip and skip[i]) then
      local p = params[i]
      local ws = copies_of(p)
      do
        -- each device updates its own copy with its own states; the update counters are
        -- the same for every copy (MXNet keeps them per device)
        local c0, n0 = o._index_update_count[i], o.num_update
        local c1, n1
        for d = 1, #ws do
          local w = ws[d]
          local st_d = d == 1 and states or self._dstates[d]
          if st_d == nil then st_d = {}; self._dstates[d] = st_d end
          local st = st_d[i]
          if st == nil then -- multi-precision: the optimizer's own methods (MXNet's Trainer)
            st = o.create_state_multi_precision and o:create_state_multi_precision(i, w)
              or o:create_state(i, w)
            st_d[i] = st
          end
          if d > 1 then o._index_update_count[i], o.num_update = c0, n0 end
          if o.update_multi_precision then o:update_multi_precision(i, w, gl[d], st)
          else o:update(i, w, gl[d], st) end
          if d == 1 then c1, n1 = o._index_update_count[i], o.num_update end
        end
        o._index_update_count[i], o.num_update = c1, n1
      end
      p:_mark_stale()
    end
  end
end

---------------------------------------------------------------- states
-- Header: plain "key=value" lines stored as a uint8 array named "__trainer_header__"
-- (mx.kvstore's encoding, shared with KVStore:save_optimizer_states).
local HEADER = "__trainer_header__"

-- The states of the first device's copies (or the store's, when it updates).
function methods:_state_table()
  if self._uok and self._kv then return self._kv._states end
  return self._states
end

-- A store whose servers hold the optimizer states (dist_async) saves and loads them.
local function remote_states(self)
  return self._uok and self._kv and self._kv.type == "dist_async"
end

-- save_states(path): state tensors named "<param index>:<k>" and the header.
function methods:save_states(path)
  if remote_states(self) then return self._kv:save_optimizer_states(path) end
  local o = self._optimizer
  local data = o:get_state_data()
  data.nparams = #self._params
  local arrays = { [HEADER] = kvstore._header_array(data) }
  for i, st in pairs(self:_state_table()) do
    for k, s in ipairs(st) do arrays[tostring(i) .. ":" .. k] = s end
  end
  nd.save(path, arrays)
end

-- load_states(path): restores what save_states wrote for the same parameters.
function methods:load_states(path)
  if remote_states(self) then return self._kv:load_optimizer_states(path) end
  local ok, loaded = pcall(nd.load, path)
  if not ok then error("Trainer:load_states: " .. tostring(loaded), 2) end
  local h = loaded[HEADER]
  if h == nil then error("Trainer:load_states: " .. path .. " is not a trainer state file", 2) end
  local data = kvstore._header_read(h)
  if data.nparams ~= #self._params then
    error(string.format("Trainer:load_states: the file has states for %s parameters, this "
      .. "trainer has %d", tostring(data.nparams), #self._params), 2)
  end
  if data.name ~= (self._optimizer.__name or "") then
    error(string.format("Trainer:load_states: the file was saved by optimizer %s, this trainer "
      .. "uses %s", tostring(data.name), tostring(self._optimizer.__name)), 2)
  end
  self._optimizer:set_state_data(data)
  local states = {}
  for name, t in pairs(loaded) do
    local i, k = name:match("^(%d+):(%d+)$")
    if i then
      i, k = tonumber(i), tonumber(k)
      local p = self._params[i]
      if p == nil then error("Trainer:load_states: state for unknown parameter " .. i, 2) end
      states[i] = states[i] or {}
      local c = copies_of(p)
      states[i][k] = nd.keep(c and t:to(c[1]:context()) or t)
    end
  end
  self._states = states
  -- the other devices' copies start from the same states
  self._dstates = {}
  for i, st in pairs(states) do
    local c = copies_of(self._params[i]) or {}
    for d = 2, #c do
      local sd = self._dstates[d] or {}
      self._dstates[d] = sd
      local moved = {}
      for k, t in ipairs(st) do moved[k] = nd.keep(t:to(c[d]:context())) end
      sd[i] = moved
    end
  end
  if self._uok and self._kv then
    for i, st in pairs(states) do
      local w = self._kv._store[i]
      local moved = {}
      for k, t in ipairs(st) do moved[k] = nd.keep(t:to(w:context())) end
      self._kv._states[i] = moved
    end
  end
end

return { Trainer = Trainer }
