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
local nd = require("mx.nd")
local optimizer = require("mx.optimizer")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local check_opts = require("mx._class").check_opts

local type, error, tostring, pairs, ipairs, getmetatable, tonumber =
  type, error, tostring, pairs, ipairs, getmetatable, tonumber

local Trainer = {}
Trainer.__name = "Trainer"
local methods = {}
Trainer.__index = function(self, k)
  if k == "learning_rate" then return self._optimizer:learning_rate() end
  if k == "optimizer" then return rawget(self, "_optimizer") end
  return methods[k]
end

local VALID = { kvstore = true, compression_params = true, update_on_kvstore = true }

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

-- Trainer(params, optimizer, optimizer_params, {kvstore=, update_on_kvstore=}).
local function new(_, params, opt, optimizer_params, opts)
  check_opts("Trainer", opts, VALID, 2)
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
  local self = setmetatable({
    _params = list,
    _optimizer = o,
    _states = {},       -- index -> list of state tensors
    _scale = o.rescale_grad,
  }, Trainer)
  return self
end
setmetatable(Trainer, { __call = new })

function methods:set_learning_rate(lr)
  local ok, err = pcall(self._optimizer.set_learning_rate, self._optimizer, lr)
  if not ok then error("Trainer: " .. tostring(err), 2) end
end

-- step(batch_size, ignore_stale_grad=false): rescale gradients by 1/batch_size and
-- update every parameter whose grad_req is not "null". A gradient no backward has
-- written since the last step is an error, or skipped with ignore_stale_grad=true.
function methods:step(batch_size, ignore_stale_grad)
  if type(batch_size) ~= "number" or not (batch_size > 0 and batch_size < math.huge) then
    error("Trainer:step: batch_size must be a positive finite number, got " .. tostring(batch_size), 2)
  end
  local o = self._optimizer
  o.rescale_grad = self._scale / batch_size
  self:_update(ignore_stale_grad, 3)
end

-- update(batch_size): the same as step (no gradient reduction is needed on one device).
function methods:update(batch_size, ignore_stale_grad)
  if type(batch_size) ~= "number" or not (batch_size > 0 and batch_size < math.huge) then
    error("Trainer:update: batch_size must be a positive finite number, got " .. tostring(batch_size), 2)
  end
  local o = self._optimizer
  o.rescale_grad = self._scale / batch_size
  self:_update(ignore_stale_grad, 3)
end

-- allreduce_grads(): a no-op with one device (kvstore comes later).
function methods.allreduce_grads() end

-- MXNet 1.9: a parameter whose gradient no backward wrote since the last step is an
-- error, or with ignore_stale_grad skipped (not updated). Every parameter is checked
-- before any is updated, so an error leaves the weights and the marks as they were.
function methods:_update(ignore_stale_grad, level)
  local o, params, states = self._optimizer, self._params, self._states
  local grads, skip = {}, nil
  for i = 1, #params do
    local p = params[i]
    if p.grad_req ~= "null" then
      local w = p._data
      if w == nil then
        error("Trainer:step: Parameter '" .. p:_fullname() .. "' is not initialized"
          .. (p._deferred and " (deferred: run a forward pass first)" or ""), level)
      end
      local g, fresh = p:_grad_state()
      if g == nil then
        error("Trainer:step: Parameter '" .. p:_fullname() .. "' has no gradient buffer (its data "
          .. "was detached from autograd; use set_grad_req to change grad_req)", level)
      end
      if not fresh then
        if not ignore_stale_grad then
          error(string.format("Trainer:step: Gradient of Parameter `%s` on context %s has not "
            .. "been updated by backward since last `step`. This could mean a bug in your model "
            .. "that made it only use a subset of the Parameters (Blocks) for this iteration. If "
            .. "you are intentionally only using a subset, call step with "
            .. "ignore_stale_grad=true to suppress this error and skip updating of Parameters "
            .. "with stale gradient", p:_fullname(), tostring(w:context())), level)
        end
        skip = skip or {}
        skip[i] = true
      end
      grads[i] = g
    end
  end
  for i = 1, #params do
    local g = grads[i]
    if g ~= nil and not (skip and skip[i]) then
      local p = params[i]
      local w = p._data
      local st = states[i]
      if st == nil then -- multi-precision: the optimizer's own methods (MXNet's Trainer)
        st = o.create_state_multi_precision and o:create_state_multi_precision(i, w)
          or o:create_state(i, w)
        states[i] = st
      end
      if o.update_multi_precision then o:update_multi_precision(i, w, g, st) else o:update(i, w, g, st) end
      p:_mark_stale()
    end
  end
end

---------------------------------------------------------------- states
-- Header: plain "key=value" lines stored as a uint8 array named "__trainer_header__".
local HEADER = "__trainer_header__"

local function encode(t, out, prefix)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = t[k]
    local key = prefix .. tostring(k)
    if type(v) == "table" then
      encode(v, out, key .. ".")
    elseif type(v) == "number" then
      out[#out + 1] = key .. "=n:" .. string.format("%.17g", v)
    elseif type(v) == "string" then
      out[#out + 1] = key .. "=s:" .. v:gsub("[\n\\]", { ["\n"] = "\\n", ["\\"] = "\\\\" })
    elseif type(v) == "boolean" then
      out[#out + 1] = key .. "=b:" .. tostring(v)
    end
  end
  return out
end

-- Parse the header lines into a nested table; only numbers, strings and booleans.
local function decode(text)
  local t = {}
  for line in text:gmatch("[^\n]+") do
    local key, kind, val = line:match("^([^=]+)=([nsb]):(.*)$")
    if key then
      local v
      if kind == "n" then v = tonumber(val)
      elseif kind == "b" then v = val == "true"
      else v = val:gsub("\\(.)", { n = "\n", ["\\"] = "\\" }) end
      local node = t
      local parts = {}
      for part in key:gmatch("[^.]+") do parts[#parts + 1] = part end
      for i = 1, #parts - 1 do
        local k = tonumber(parts[i]) or parts[i]
        node[k] = node[k] or {}
        node = node[k]
      end
      local last = parts[#parts]
      node[tonumber(last) or last] = v
    end
  end
  return t
end

-- save_states(path): state tensors named "<param index>:<k>" and the header.
function methods:save_states(path)
  local o = self._optimizer
  local data = o:get_state_data()
  data.nparams = #self._params
  local text = table.concat(encode(data, {}, ""), "\n")
  local bytes = {}
  for i = 1, #text do bytes[i] = text:byte(i) end
  if #bytes == 0 then bytes[1] = 10 end
  local arrays = { [HEADER] = nd.array(bytes, { dtype = "uint8" }) }
  for i, st in pairs(self._states) do
    for k, s in ipairs(st) do arrays[tostring(i) .. ":" .. k] = s end
  end
  nd.save(path, arrays)
end

-- load_states(path): restores what save_states wrote for the same parameters.
function methods:load_states(path)
  local ok, loaded = pcall(nd.load, path)
  if not ok then error("Trainer:load_states: " .. tostring(loaded), 2) end
  local h = loaded[HEADER]
  if h == nil then error("Trainer:load_states: " .. path .. " is not a trainer state file", 2) end
  local chars = {}
  for i, b in ipairs(h:tolist()) do chars[i] = string.char(b) end
  local data = decode(table.concat(chars))
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
      local ctx = p._data and p._data:context() or nil
      states[i][k] = ctx and t:to(ctx) or t
    end
  end
  self._states = states
end

return { Trainer = Trainer }
