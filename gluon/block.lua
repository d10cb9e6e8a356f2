-- mx.gluon.Block — the base of every layer and model (MXNet 2.0 Gluon semantics).
--
--   local Net = gluon.Block:extend("Net")
--   function Net:__init(opts)
--     Net.super.__init(self)
--     self.hidden = nn.Dense(64, {activation="relu"})   -- children register by assignment
--     self.out = nn.Dense(10)
--   end
--   function Net:forward(x) return self.out(self.hidden(x)) end
--   local net = Net()
--   net:initialize(mx.init.Xavier())
--   local y = net(x)                                    -- calls forward
--
-- Children and Parameters assigned to fields are registered in assignment order;
-- collect_params() names parameters structurally: "hidden.weight", "0.bias" (the
-- names Sequential gives its children are 0-based, as in MXNet's files).
local nd = require("mx.nd")
local initializer = require("mx.initializer")
local Pmod = require("mx.gluon.parameter")
local class = require("mx.core.class")
local hybrid = require("mx.gluon._hybrid")
local infer = require("mx.nd.infer").infer

local Parameter = Pmod.Parameter
local type, error, tostring, pairs, ipairs, rawget, rawset, setmetatable, getmetatable =
  type, error, tostring, pairs, ipairs, rawget, rawset, setmetatable, getmetatable
local select_n, unpack = select, unpack

local M = {}

-- sig(cls, params[, named]): cls's constructor arguments as MXNet's calling convention
-- (mx.core.class signature: MXNet's parameters positionally in MXNet's order, or by name in a
-- trailing options table), recorded for spec/calling_convention_spec.lua. A constructor
-- parses its arguments with it: `local o = SIG(3, ...)` (3: the user's line).
function M.sig(cls, params, named)
  return class.declare(cls, class.signature(cls.__name, params, named))
end

---------------------------------------------------------------- ParameterDict
-- An ordered name -> Parameter map (what collect_params returns). d[name] finds a
-- parameter; d:items() iterates in order; d:keys(), d:values(), d:len().
local ParameterDict = {}
local PD_methods = {}
ParameterDict.__index = function(d, k)
  local m = PD_methods[k]
  if m ~= nil then return m end
  return rawget(d, "_map")[k]
end
ParameterDict.__name = "ParameterDict"
M.ParameterDict = ParameterDict

local function new_dict()
  return setmetatable({ _names = {}, _map = {} }, ParameterDict)
end
M.new_dict = new_dict

function PD_methods:_add(name, p)
  if self._map[name] == nil then self._names[#self._names + 1] = name end
  self._map[name] = p
end
function PD_methods:get(name) return self._map[name] end
function PD_methods:len() return #self._names end
function PD_methods:keys()
  local r = {}
  for i, n in ipairs(self._names) do r[i] = n end
  return r
end
function PD_methods:values()
  local r = {}
  for i, n in ipairs(self._names) do r[i] = self._map[n] end
  return r
end
-- for name, param in d:items() do ... end
function PD_methods:items()
  local i, names, map = 0, self._names, self._map
  return function()
    i = i + 1
    local n = names[i]
    if n ~= nil then return n, map[n] end
  end
end
-- initialize(init, ctx, {force_reinit=}) on every parameter.
-- ctx: a Context or a list (a copy of every parameter on each: data parallelism); also
-- as MXNet's keyword, initialize(init, {ctx = {mx.cpu(0), mx.cpu(1)}, force_reinit =}).
local function init_args(ctx, opts)
  if type(ctx) == "table" and getmetatable(ctx) == nil and #ctx == 0 and opts == nil then
    return ctx.ctx, ctx
  end
  return ctx, opts
end
M._init_args = init_args
function PD_methods:initialize(init, ctx, opts)
  ctx, opts = init_args(ctx, opts)
  ctx = Pmod.check_ctx("initialize", ctx, 2)
  local force = type(opts) == "table" and opts.force_reinit or false
  for _, n in ipairs(self._names) do self._map[n]:initialize(nil, ctx, init, force) end
end
function PD_methods:zero_grad()
  for _, n in ipairs(self._names) do self._map[n]:zero_grad() end
end
-- setattr(name, value) on every parameter (grad_req, lr_mult, wd_mult).
function PD_methods:setattr(name, value)
  for _, n in ipairs(self._names) do
    local p = self._map[n]
    if name == "grad_req" then p:set_grad_req(value) else p[name] = value end
  end
end
-- list_ctx(): the devices the parameters are on (each once, first-seen order).
function PD_methods:list_ctx()
  local r, seen = {}, {}
  for _, n in ipairs(self._names) do
    for _, c in ipairs(self._map[n]:list_ctx()) do
      if not seen[c] then seen[c] = true; r[#r + 1] = c end
    end
  end
  return r
end
-- save(filename, strip_prefix) / load(filename, ctx, allow_missing, ignore_extra,
-- restore_prefix, cast_dtype, dtype_source): MXNet 1.x's (gluon/_param_file.lua).
function PD_methods:save(...)
  require("mx.gluon._param_file").save_dict(self, 3, ...)
end
function PD_methods:load(...)
  require("mx.gluon._param_file").load_dict(self, 3, ...)
end
function PD_methods:reset_ctx(ctx)
  ctx = Pmod.check_ctx("reset_ctx", ctx, 2)
  for _, n in ipairs(self._names) do self._map[n]:reset_ctx(ctx) end
end
ParameterDict.__tostring = function(d)
  local lines = { "ParameterDict (" }
  for _, n in ipairs(d._names) do
    local p = d._map[n]
    lines[#lines + 1] = string.format("  %s: shape=%s, dtype=%s", n, Pmod.shape_str(p.shape), p.dtype)
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

---------------------------------------------------------------- errors
-- rethrow(name, err, level): re-raise an error caught around library code so that it
-- names `name` and blames the user's line: a message positioned in mx's own Lua files
-- (or a generated chunk) loses that position and is raised at `level` (counted from
-- rethrow's caller, as error() counts), prefixed "name: " unless it already starts so;
-- one positioned in user code (a custom Block's forward) is re-raised unchanged.
local function rethrow(name, err, level)
  if type(err) ~= "string" then error(err, 0) end
  local file, msg = err:match("^(.-):%d+: (.*)$")
  if file == nil or not (file:find("mx/", 1, true) or file:sub(1, 1) == "[") then
    if file ~= nil then error(err, 0) end
    msg = err
  end
  if msg:sub(1, #name + 1) ~= name .. ":" then msg = name .. ": " .. msg end
  error(msg, level + 1)
end
M._rethrow = rethrow

-- guarded(name, fn): a forward running fn(self, ...) whose errors are re-raised through
-- rethrow, naming `name` (or name(self) when it is a function) at the caller's line; the
-- results pass as they are. Block.__call tail-calls forward and forward tail-calls the
-- check, so level 2 there is the user's frame.
local function reraise(self, name, ok, ...)
  if not ok then rethrow(type(name) == "function" and name(self) or name, (...), 2) end
  return ...
end
function M._guarded(name, fn)
  return function(self, ...) return reraise(self, name, pcall(fn, self, ...)) end
end

---------------------------------------------------------------- classes
local function is_param(v) return getmetatable(v) == Parameter end
M.is_param = is_param

-- Instances keep children and parameters out of their own table (in _reg), so
-- every assignment reaches __newindex, even a re-assignment.
local function instance_index(cls)
  return function(self, k)
    local v = cls[k]
    if v ~= nil then return v end
    local reg = rawget(self, "_reg")
    if reg then return reg[k] end
    return nil
  end
end

-- is_a(v, cls): v's class is cls or a subclass of it (Python's isinstance).
local function is_a(v, cls)
  local mt = getmetatable(v)
  while mt ~= nil do
    if mt == cls then return true end
    mt = rawget(mt, "super")
  end
  return false
end

local function kind_name(v)
  if is_param(v) then return "Parameter" end
  local mt = getmetatable(v)
  if mt and mt.__is_block then return tostring(mt.__name) end
  return type(v)
end

local function block_newindex(self, k, v)
  local reg = rawget(self, "_reg")
  if reg == nil then
    if is_param(v) or (getmetatable(v) and getmetatable(v).__is_block) then
      error(string.format("%s: assigning %s '%s' before the block is set up: call the parent's "
        .. "__init first (e.g. gluon.Block.__init(self))", tostring(getmetatable(self).__name),
        is_param(v) and "Parameter" or "child block", tostring(k)), 2)
    end
    rawset(self, k, v)
    return
  end
  local old = reg[k]
  if old ~= nil or is_param(v) or (getmetatable(v) and getmetatable(v).__is_block) then
    Pmod._changed() -- the structure moved: hybridized ancestors check theirs again
  end
  -- MXNet's __setattr__: a registered child or Parameter may only be replaced by a
  -- value of its own type (TypeError otherwise). nil removes the registration (Lua's
  -- way of deleting an attribute).
  if old ~= nil and v ~= nil and not is_a(v, getmetatable(old)) then
    error(string.format("%s: changing attribute type for '%s' from %s to %s is not allowed "
      .. "(assign nil first to remove it)", tostring(getmetatable(self).__name), tostring(k),
      kind_name(old), kind_name(v)), 2)
  end
  if getmetatable(v) and getmetatable(v).__is_block then
    if old == nil then
      local order = rawget(self, "_child_names")
      order[#order + 1] = k
    end
    reg[k] = v
    rawget(self, "_children")[k] = v
  elseif is_param(v) then
    if old == nil then
      local order = rawget(self, "_param_names")
      order[#order + 1] = k
    end
    reg[k] = v
    rawget(self, "_params")[k] = v
  elseif old ~= nil then
    -- assigning nil over a child or parameter unregisters it
    reg[k] = nil
    rawget(self, "_children")[k] = nil
    rawget(self, "_params")[k] = nil
    local function drop(list)
      for i = #list, 1, -1 do if list[i] == k then table.remove(list, i) end end
    end
    drop(rawget(self, "_child_names"))
    drop(rawget(self, "_param_names"))
  else
    rawset(self, k, v)
  end
end

-- Forward hooks (register_forward_pre_hook / register_forward_hook) live in
-- _hooks, absent while none is registered, so a plain call only pays one rawget.
local function run_hooked(self, hooks, ...)
  local args = { n = select_n("#", ...), ... }
  local pre = hooks.pre
  for i = 1, #pre do pre[i].fn(self, args) end
  local out = { self:forward(...) }
  local post = hooks.post
  if #post > 0 then
    local o = out
    if #out <= 1 then o = out[1] end
    for i = 1, #post do post[i].fn(self, args, o) end
  end
  return unpack(out)
end
M._run_hooked = run_hooked

local hybrid_call = hybrid.call
-- With parameters on several devices (Parameter._DEV.multi > 0) a call notes the device
-- of its first input: those parameters' p._data is the copy on it until the call returns
-- (then the caller's device again: cpu(0) outside any forward).
local DEV, dev_key, is_tensor = Parameter._DEV, Parameter._dev_key, nd.is_tensor
-- (an error inside the forward restores them too: it is re-raised as it was when it has
-- a position; one raised at the forward's caller (error(msg, 2), which the pcall made
-- position-less) gets the caller's line it would have had without the pcall: restore is
-- tail-called through multi_call and block_call, so level 2 is the user's frame)
local function restore(prev, ok, ...)
  DEV.key = prev
  DEV.depth = DEV.depth - 1
  if not ok then
    local err = ...
    if type(err) == "string" and not err:find("^[^\n]-:%d+: ") then error(err, 2) end
    error(err, 0)
  end
  return ...
end
local function run_forward(self, ...)
  local hooks = rawget(self, "_hooks")
  if hooks ~= nil then return run_hooked(self, hooks, ...) end
  if rawget(self, "_active") == true then return hybrid_call(self, ...) end
  return self:forward(...)
end
local function multi_call(self, ...)
  local prev, x = DEV.key, ...
  if is_tensor(x) then DEV.key = dev_key(x:context()) end
  DEV.depth = DEV.depth + 1
  return restore(prev, pcall(run_forward, self, ...))
end
-- a block called on mx.sym Symbols gives Symbols (MXNet 1.x's F=symbol; mx.gluon.symbol_node)
local symbol_mt -- (mx.symbol's metatable, once it is loaded)
local function is_symbol(a)
  if symbol_mt == nil then
    local s = package.loaded["mx.symbol"]
    if s == nil then return false end
    symbol_mt = s._mt
  end
  return getmetatable(a) == symbol_mt
end
local function sym_call(self, ...)
  local r = { require("mx.gluon.symbol_node").call(self, 2, ...) }
  return unpack(r, 1, table.maxn(r))
end
local function block_call(self, ...)
  if type((...)) == "table" and is_symbol((...)) then return sym_call(self, ...) end
  if DEV.multi > 0 then return multi_call(self, ...) end
  local hooks = rawget(self, "_hooks")
  if hooks ~= nil then return run_hooked(self, hooks, ...) end
  if rawget(self, "_active") == true then return hybrid_call(self, ...) end
  return self:forward(...)
end

local Block = { __is_block = true }
Block.__name = "Block"
Block.__index = instance_index(Block)
Block.__newindex = block_newindex
Block.__call = block_call
M.Block = Block

local function new_instance(cls, ...)
  local self = setmetatable({}, cls)
  self:__init(...)
  return self
end

-- Block:extend(name): a subclass. Instances: Class(...) runs Class.__init(self, ...).
function Block:extend(name)
  local parent = self
  local cls = { __is_block = true, __name = name or "Block", super = parent }
  cls.__index = instance_index(cls)
  cls.__newindex = block_newindex
  cls.__call = block_call
  cls.__tostring = parent.__tostring
  setmetatable(cls, { __index = parent, __call = new_instance })
  return cls
end
setmetatable(Block, { __call = new_instance })

function Block:__init()
  rawset(self, "_reg", {})
  rawset(self, "_children", {})
  rawset(self, "_child_names", {})
  rawset(self, "_params", {})
  rawset(self, "_param_names", {})
end

function Block:forward()
  error(tostring(getmetatable(self).__name) .. ": forward is not implemented", 2)
end

-- register_child(block, name): name defaults to the next 0-based position.
function Block:register_child(block, name)
  name = name or tostring(#rawget(self, "_child_names"))
  block_newindex(self, name, block)
  return block
end

-- The children in registration order, with their names.
function Block:children()
  local r, names = {}, {}
  local ch = rawget(self, "_children")
  for i, n in ipairs(rawget(self, "_child_names")) do r[i], names[i] = ch[n], n end
  return r, names
end

-- This block's own parameters, name -> Parameter (not the children's).
function Block:params()
  local d = new_dict()
  local ps = rawget(self, "_params")
  for _, n in ipairs(rawget(self, "_param_names")) do d:_add(n, ps[n]) end
  return d
end

---------------------------------------------------------------- MXNet 1.x names
-- A block given MXNet 1.x's `prefix` (the recurrent cells take it) names its parameters
-- 1.x's way: prefix .. name, its children's under prefix .. <alias><k>_ (alias: the class
-- name in lower case, or its _alias: "lstm" for LSTMCell; k counts the children of that
-- alias in registration order), a child with a prefix of its own under that one alone.
-- collect_params lists such a block's parameters by these names; a block called on
-- Symbols names its parameter variables so (mx.gluon.symbol_node), a block without a
-- prefix there under <alias><k>_ given at its first call (k: mx.sym's name counts, MXNet's
-- NameManager).
local function alias_of(b)
  local mt = getmetatable(b)
  return mt._alias or tostring(mt.__name):lower()
end
local function mx1_walk(b, pfx, fn, prefixes)
  if prefixes then prefixes[b] = pfx end
  local ps = rawget(b, "_params")
  for _, n in ipairs(rawget(b, "_param_names")) do fn(pfx .. n, ps[n]) end
  local counts = {}
  local ch = rawget(b, "_children")
  for _, n in ipairs(rawget(b, "_child_names")) do
    local c = ch[n]
    local cp = rawget(c, "_prefix")
    if cp == nil then
      local h = alias_of(c)
      local k = counts[h] or 0
      counts[h] = k + 1
      cp = pfx .. h .. k .. "_"
    end
    mx1_walk(c, cp, fn, prefixes)
  end
end
-- _set_prefix(block, prefix, who, level): a constructor's `prefix` argument (nil: none)
function M._set_prefix(self, prefix, who, level)
  if prefix == nil then return end
  if type(prefix) ~= "string" then
    error(who .. ": prefix must be a string, got " .. type(prefix), level + 1)
  end
  rawset(self, "_prefix", prefix)
end
-- _mx1_names(block): the MXNet 1.x name of every parameter under block (a list of
-- {name, Parameter}, a shared one once, registration order) and every block's prefix
-- (block -> prefix)
function M._mx1_names(b)
  local pfx = rawget(b, "_prefix") or rawget(b, "_sym_prefix")
  if pfx == nil then -- (MXNet's NameManager gives it: mx.sym's counts)
    pfx = require("mx.symbol")._auto_name(alias_of(b)) .. "_"
    rawset(b, "_sym_prefix", pfx)
  end
  local list, seen, prefixes = {}, {}, {}
  mx1_walk(b, pfx, function(name, p)
    if not seen[p] then
      seen[p] = true
      list[#list + 1] = { name, p }
    end
  end, prefixes)
  return list, prefixes
end

-- MXNet 2.0's _collect_params_with_prefix: a shared parameter is listed under every
-- name it is reachable by (its _path, used in errors, is the first). Under a block with
-- a 1.x prefix, the 1.x names.
local function collect(self, prefix, d)
  local own = rawget(self, "_prefix")
  if own ~= nil then
    mx1_walk(self, own, function(full, p)
      if rawget(p, "_path") == nil then p._path = full end
      d:_add(full, p)
    end)
    return
  end
  local ps = rawget(self, "_params")
  for _, n in ipairs(rawget(self, "_param_names")) do
    local p = ps[n]
    local full = prefix .. n
    if rawget(p, "_path") == nil then p._path = full end
    d:_add(full, p)
  end
  local ch = rawget(self, "_children")
  for _, n in ipairs(rawget(self, "_child_names")) do
    collect(ch[n], prefix .. n .. ".", d)
  end
end

-- "|"-separated alternatives, each a Lua pattern anchored at the start of the name
-- (MXNet's re.match): ".*weight|.*bias", "features%.0%..*".
local function matcher(select)
  if select == nil then return nil end
  local alts = {}
  for alt in (select .. "|"):gmatch("([^|]*)|") do alts[#alts + 1] = "^" .. alt end
  return function(name)
    for _, a in ipairs(alts) do if name:find(a) then return true end end
    return false
  end
end

-- collect_params(select): every parameter of this block and its descendants, by
-- structural name, in registration order (a shared parameter under each of its names).
function Block:collect_params(select)
  local all = new_dict()
  collect(self, "", all)
  local m = matcher(select)
  if not m then return all end
  local d = new_dict()
  for n, p in all:items() do if m(n) then d:_add(n, p) end end
  return d
end

-- initialize(init=Uniform(), ctx=cpu, {force_reinit=false}): parameters with their own
-- init use it; the others use `init`. Unknown shapes wait for the first forward.
function Block:initialize(init, ctx, opts)
  if type(init) == "string" then init = initializer.create(init) end
  ctx, opts = init_args(ctx, opts)
  ctx = Pmod.check_ctx("initialize", ctx, 2)
  self:collect_params():initialize(init, ctx, opts)
  return self
end

function Block:zero_grad() self:collect_params():zero_grad() end
-- setattr(name, value): MXNet's Block.setattr, the attribute set on every parameter
-- (net:setattr("grad_req", "null") freezes the block; "lr_mult", "wd_mult")
function Block:setattr(name, value)
  if type(name) ~= "string" then error("setattr: name must be a string, got " .. type(name), 2) end
  local d = self:collect_params()
  local ok, err = pcall(d.setattr, d, name, value)
  if not ok then error((tostring(err):gsub("^[^\n]-:%d+: ", "")), 2) end
end
-- reset_ctx(ctx): move every parameter to ctx (a Context or a list): model parallelism
-- places blocks on devices this way, data parallelism re-spreads them.
function Block:reset_ctx(ctx)
  ctx = Pmod.check_ctx("reset_ctx", ctx, 2)
  self:collect_params():reset_ctx(ctx)
end
-- cast(dtype): every parameter of the block and its descendants, each child through its
-- own cast (MXNet's: BatchNorm keeps float32 under a float16 cast).
function Block:cast(dtype)
  local code = nd.dtype_code(dtype)
  if not code then error("cast: unknown dtype " .. tostring(dtype), 2) end
  for _, c in ipairs((self:children())) do c:cast(dtype) end
  local ps = rawget(self, "_params")
  for _, n in ipairs(rawget(self, "_param_names")) do
    local p = ps[n]
    if p.dtype ~= nd.dtype_name[code] then p:cast(dtype) end
  end
  return self
end

---------------------------------------------------------------- forward hooks
-- A handle returned by register_forward_(pre_)hook; handle:detach() removes the hook
-- (again: a no-op, as in MXNet).
local HookHandle = {}
HookHandle.__index = HookHandle
HookHandle.__name = "HookHandle"
M.HookHandle = HookHandle
function HookHandle:detach()
  local b, list, entry = self._block, self._list, self._entry
  if b == nil then return end
  self._block = nil
  for i = #list, 1, -1 do if list[i] == entry then table.remove(list, i) end end
  local hooks = rawget(b, "_hooks")
  if hooks ~= nil and #hooks.pre == 0 and #hooks.post == 0 then rawset(b, "_hooks", nil) end
end

local function add_hook(self, which, fn, name)
  if type(fn) ~= "function" and not (getmetatable(fn) and getmetatable(fn).__call) then
    error(string.format("%s: hook must be a function, got %s", name, type(fn)), 3)
  end
  local hooks = rawget(self, "_hooks")
  if hooks == nil then
    hooks = { pre = {}, post = {} }
    rawset(self, "_hooks", hooks)
  end
  local entry = { fn = fn }
  local list = hooks[which]
  list[#list + 1] = entry
  return setmetatable({ _block = self, _list = list, _entry = entry }, HookHandle)
end

-- register_forward_pre_hook(fn): fn(block, inputs) before every forward, inputs being
-- the call's arguments as a list (inputs.n of them); its result is ignored.
function Block:register_forward_pre_hook(fn)
  local h = add_hook(self, "pre", fn, "register_forward_pre_hook") -- not a tail call: level
  return h
end
-- register_forward_hook(fn): fn(block, inputs, output) after every forward (output:
-- the result, or a list of the results when forward returns several).
function Block:register_forward_hook(fn)
  local h = add_hook(self, "post", fn, "register_forward_hook")
  return h
end
-- apply(fn): fn(block) on this block and every descendant (children first).
function Block:apply(fn)
  for _, c in ipairs((self:children())) do c:apply(fn) end
  fn(self)
  return self
end

-- share_parameters(dict): use the given parameters (by structural name) instead of
-- this block's own ones of the same name.
function Block:share_parameters(shared)
  local function walk(b, prefix)
    local ps = rawget(b, "_params")
    for _, n in ipairs(rawget(b, "_param_names")) do
      local p = shared[prefix .. n]
      if p ~= nil then
        ps[n] = p
        rawget(b, "_reg")[n] = p
      end
    end
    local ch = rawget(b, "_children")
    for _, n in ipairs(rawget(b, "_child_names")) do walk(ch[n], prefix .. n .. ".") end
  end
  walk(self, "")
  return self
end

-- hybridize(active=true, {static_alloc=, static_shape=}) or hybridize{active=, ...}:
-- a HybridBlock traces its forward into a graph per input signature and replays it
-- (gluon/_hybrid.lua, docs/hybridize.md); a plain Block passes the call on to its
-- children (MXNet). Changing it drops the cached graphs.
local function hybridize_opts(active, opts)
  if type(active) == "table" then
    opts = active
    active = opts.active
  end
  if active ~= nil and type(active) ~= "boolean" then
    error("hybridize: active must be a boolean, got " .. type(active), 3)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error("hybridize: options must be a table, got " .. type(opts), 3) end
  for k in pairs(opts) do
    if k ~= "active" and k ~= "static_alloc" and k ~= "static_shape" and k ~= "inline_limit"
        and k ~= "forward_bulk_size" and k ~= "backward_bulk_size" then
      error("hybridize: unknown option '" .. tostring(k) .. "' (active, static_alloc, static_shape)", 3)
    end
  end
  return active ~= false, opts
end

function Block:hybridize(active, opts)
  local on, o = hybridize_opts(active, opts)
  for _, c in ipairs((self:children())) do c:hybridize(on, o) end
end

function Block:_hybridize_self(on, o)
  rawset(self, "_active", on)
  rawset(self, "_cached_op", on and hybrid.new(self, o) or nil)
end

-- export is a HybridBlock's (MXNet has no Block.export either): say so, and what to use.
function Block:export()
  local name = tostring(getmetatable(self).__name or "Block")
  error("export: " .. name .. " is a Block, not a HybridBlock: only a hybridized HybridBlock "
    .. "(HybridSequential, Dense, Conv2D, ...) has a graph to export; build it from "
    .. "HybridBlocks, net:hybridize(), call it once, then export (or save_parameters for the "
    .. "weights alone)", 2)
end

---------------------------------------------------------------- save / load
-- save_parameters(path, {deduplicate=false, metadata=}) / load_parameters(path, {ctx=,
-- allow_missing=, ignore_extra=, cast_dtype=, dtype_source=, name_map=}):
-- gluon/_param_file.lua (and ParameterDict's save / load there too).
function Block:save_parameters(path, opts)
  require("mx.gluon._param_file").save_block(self, path, opts, 3)
end
function Block:load_parameters(path, opts)
  require("mx.gluon._param_file").load_block(self, path, opts, 3)
end

-- save(path)/load(path): MXNet 2.0 names for the same.
Block.save = Block.save_parameters
Block.load = Block.load_parameters

---------------------------------------------------------------- printing
local function repr(b, indent)
  local name = getmetatable(b).__name or "Block"
  local extra = b._repr_args and b:_repr_args() or ""
  local kids, names = b:children()
  if #kids == 0 then return name .. "(" .. extra .. ")" end
  local lines = { name .. "(" .. extra }
  for i, c in ipairs(kids) do
    lines[#lines + 1] = indent .. "  (" .. names[i] .. "): " .. repr(c, indent .. "  ")
  end
  lines[#lines + 1] = indent .. ")"
  return table.concat(lines, "\n")
end
Block.__tostring = function(b) return repr(b, "") end

---------------------------------------------------------------- summary
-- MXNet's shape string: a tuple "(2, 3)" ("(5,)" for one axis), a list of outputs as
-- "(2, 3), (2, 4)" (Python's str of the list without its brackets).
local function shape_tuple(s)
  if #s == 1 then return "(" .. s[1] .. ",)" end
  return "(" .. table.concat(s, ", ") .. ")"
end
local function shape_str(v, top)
  if nd.is_tensor(v) then return shape_tuple(v:shape()) end
  if type(v) == "table" and getmetatable(v) == nil then
    local parts = {}
    for i = 1, (v.n or #v) do parts[i] = shape_str(v[i], false) end
    local s = table.concat(parts, ", ")
    if top then return s end
    return "[" .. s .. "]"
  end
  return tostring(v)
end

-- summary(x, ...): runs one forward on the inputs and prints MXNet 1.9's table: a row
-- per layer (every block but the Sequential containers, named Class-k in the order
-- their forwards finish), its output shape and its own parameter count, then the
-- totals (duplicates included), trainable and non-trainable (grad_req 'null') counts,
-- shared and unique counts. The block must be initialized; hooks are removed again
-- even when the forward fails. Writes through io.write (io.output()); returns nothing.
function Block:summary(...)
  local inputs = { n = select_n("#", ...), ... }
  if inputs.n == 0 then error("summary: give the inputs of one forward pass", 2) end
  local rows = { { name = "Input", shape = shape_str(inputs, true), n = 0, trainable = 0,
    shared = 0 } }
  local seen, hooks = {}, {}
  local function hook(b, _, out)
    local row = { name = tostring(getmetatable(b).__name) .. "-" .. #rows,
      shape = shape_str(out, true), n = 0, trainable = 0, shared = 0 }
    for _, p in b:params():items() do
      local size = p._data:size()
      row.n = row.n + size
      if p.grad_req ~= "null" then row.trainable = row.trainable + size end
      if seen[p] then row.shared = row.shared + size else seen[p] = true end
    end
    rows[#rows + 1] = row
  end
  self:apply(function(b)
    if not b.__is_sequential then hooks[#hooks + 1] = b:register_forward_hook(hook) end
  end)
  local ok, err = pcall(self, ...)
  for _, h in ipairs(hooks) do h:detach() end
  if not ok then rethrow("summary", err, 2) end
  local out = {}
  local function line(s) out[#out + 1] = s end
  local fmt = "%20s  %42s %15s"
  line(string.rep("-", 80))
  line(string.format(fmt, "Layer (type)", "Output Shape", "Param #"))
  line(string.rep("=", 80))
  local total, trainable, shared = 0, 0, 0
  for _, r in ipairs(rows) do
    line(string.format(fmt, r.name, r.shape, tostring(r.n)))
    total, trainable, shared = total + r.n, trainable + r.trainable, shared + r.shared
  end
  line(string.rep("=", 80))
  line("Parameters in forward computation graph, duplicate included")
  line("   Total params: " .. total)
  line("   Trainable params: " .. trainable)
  line("   Non-trainable params: " .. (total - trainable))
  line("Shared params in forward computation graph: " .. shared)
  line("Unique parameters in model: " .. (total - shared))
  line(string.rep("-", 80))
  io.write(table.concat(out, "\n"), "\n")
end

-- HybridBlock: a block whose forward can be traced into a graph (hybridize). Both
-- spellings: MXNet 2.0's forward(x, ...), or MXNet 1.x's hybrid_forward(F, x, ...,
-- params) where F is mx.nd and params maps this block's own parameter names to their
-- data (the default forward calls it).
local HybridBlock = Block:extend("HybridBlock")
M.HybridBlock = HybridBlock

function HybridBlock:hybridize(active, opts)
  local on, o = hybridize_opts(active, opts)
  self:_hybridize_self(on, o)
  for _, c in ipairs((self:children())) do c:hybridize(on, o) end
end

-- Gives a class that is not a HybridBlock subclass (HybridSequential, a Sequential)
-- the HybridBlock behaviour.
function HybridBlock._hybrid_methods(cls)
  cls.hybridize = HybridBlock.hybridize
  cls.export = function(...) return HybridBlock.export(...) end
  cls.export_onnx = function(...) return HybridBlock.export_onnx(...) end
  cls.__is_hybrid = true
end
HybridBlock.__is_hybrid = true

-- export(path, epoch=0, {luamx_ops=false}): path-symbol.json and path-%04d.params of the
-- traced graph (gluon/_export.lua, docs/export.md); returns both paths. luamx_ops allows
-- ops MXNet lacks (quantized graphs: the files load in luamx and its C runtime).
function HybridBlock:export(path, epoch, opts)
  -- (required here: mx.gluon._export extends this file's HybridBlock)
  local sym_file, params_file = require("mx.gluon._export").export(self, path, epoch, 2, opts)
  return sym_file, params_file
end

-- Deferred initialisation by the op's partial inference: params are the Parameters
-- the layer passes to `op` after its data input x, in order (Dense: weight, bias); the
-- core's inference of op (mx.nd.infer) on x and their known dims says their shapes, and
-- their initialisation finishes. No per-layer shape arithmetic. level: as error() takes
-- it in the caller.
local FLOAT = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local function takes_bf16(name)
  local o = require("mx.core.lib").ops_by_name[name]
  for _, c in ipairs(o and o.dtype_list or {}) do
    if nd.dtype_name[c] == "bfloat16" then return true end
  end
  return false
end

function HybridBlock._infer_params(_, op, opts, x, params, level)
  local ins = { x }
  -- only shapes are wanted: a float parameter takes a float x's dtype (under mx.amp x may
  -- be bfloat16 while the parameter stays float32, autocast casting it at the call);
  -- float16 data is inferred as float32 (the norm ops compute it so: mx.nd.mxnet_dtypes),
  -- and so is bfloat16 data for an op without bfloat16 kernels (batch_norm under mx.amp:
  -- autocast gives it float32 at the call)
  local xdt = x:dtype()
  if xdt == "float16" or (xdt == "bfloat16" and not takes_bf16(op)) then
    xdt = "float32"
    ins[1] = { shape = x:shape(), dtype = xdt }
  end
  for i, p in ipairs(params) do
    local dt = (FLOAT[xdt] and FLOAT[p.dtype]) and xdt or p.dtype
    ins[i + 1] = { shape = p.shape, dtype = dt }
  end
  local r = infer(op, opts, ins, level + 1)
  for i, p in ipairs(params) do
    p:set_shape(r.inputs[i + 1].shape, level + 1)
    p:_finish_deferred_init(level + 1)
  end
end

-- export_onnx(path, {input_shapes = {shape, ...}, dynamic=false}): the block as an ONNX
-- model (mx.onnx.export_model of its traced graph; traced now, on zeros of input_shapes,
-- when it has no trace yet); returns path.
function HybridBlock:export_onnx(path, opts)
  local p = require("mx.onnx").export_block(self, path, opts, 2)
  return p
end

function HybridBlock:forward(...)
  local hf = self.hybrid_forward
  if not hf then
    error(tostring(getmetatable(self).__name) .. ": define forward(x, ...) or hybrid_forward(F, x, ...)", 2)
  end
  local params = {}
  for name, p in pairs(rawget(self, "_params")) do params[name] = p:data() end
  local n = select_n("#", ...)
  local args = { ... }
  args[n + 1] = params
  return hf(self, nd, unpack(args, 1, n + 1))
end

return M
