-- mx.gluon.Parameter — a named tensor a Block owns, with its gradient, multipliers
-- for the optimizer and (possibly deferred) initialization. MXNet 2.0's semantics:
-- a 0 in `shape` is unknown until the first forward infers it.
--
--   local p = gluon.Parameter("weight", {shape={10, 0}, init=mx.init.Xavier()})
--   p:initialize()            -- deferred: the shape has a 0
--   ... first forward sets p.shape = {10, 784} and calls p:_finish_deferred_init()
--   p:data(), p:grad(), p:set_data(t), p:zero_grad()
local nd = require("mx.nd")
local initializer = require("mx.initializer")
local context = require("mx.context")
local autograd = require("mx.autograd") -- attach_grad (loaded before any forward records)
local class = require("mx.core.class")
local caller = require("mx.core.caller")

local type, error, tostring, setmetatable, ipairs = type, error, tostring, setmetatable, ipairs

local Parameter = class.base("Parameter")
-- grad_req is a property (MXNet): reading gives the stored mode, assigning calls
-- set_grad_req (validation, re-attaching the gradient buffer). It lives in _grad_req.
local rawget, rawset = rawget, rawset
-- On several devices (initialize with a ctx list) the raw field _data is absent and
-- reading p._data (what layers do on their hot path) gives the copy on the device the
-- current forward runs on (DEV.key, set by Block calls from their first input; see
-- _set_current), so one network runs data-parallel on inputs from split_and_load.
-- multi: multi-device parameters made; key: the forward's device (cpu(0) outside);
-- depth: Block calls running with multi > 0 (0: outside any forward)
local DEV = { multi = 0, key = 65536, depth = 0 }
local function dev_key(ctx) return ctx.dev_type * 65536 + ctx.device_id end
-- the user's line, however deep the blocks nest (error paths only)
local user_level = caller.level

local function current_copy(self)
  local by = rawget(self, "_by_dev")
  if by == nil then return nil end
  local d = by[DEV.key]
  if d == nil then
    if DEV.depth == 0 then return rawget(self, "_copies")[1] end -- outside a forward
    local names = {}
    for i, c in ipairs(self._ctx_list) do names[i] = tostring(c) end
    local k = DEV.key
    error(string.format("Parameter '%s' was not initialized on context %s(%d); it is on %s "
      .. "(move the input there, or initialize/reset_ctx the parameter on it)", self:_fullname(),
      k >= 131072 and "gpu" or "cpu", k % 65536, table.concat(names, ", ")), user_level())
  end
  return d
end
Parameter.__index = function(self, k)
  if k == "_data" then return current_copy(self) end
  if k == "grad_req" then return rawget(self, "_grad_req") end
  return Parameter[k]
end
Parameter._DEV = DEV
Parameter._dev_key = dev_key
Parameter.__newindex = function(self, k, v)
  if k == "grad_req" then
    local ok, err = pcall(Parameter.set_grad_req, self, v, 1)
    if not ok then error(err, 2) end
    return
  end
  rawset(self, k, v)
end

-- MXNet's parameters in its order (positionally or by name)
local SIG = class.signature("Parameter", { "name", "grad_req", "shape", "dtype", "lr_mult",
  "wd_mult", "init", "allow_deferred_init", "differentiable", "stype", "grad_stype" })
local REQS = { write = true, add = true, null = true }

local function shape_str(s)
  if s == nil then return "None" end
  return "(" .. table.concat(s, ", ") .. (#s == 1 and ",)" or ")")
end
Parameter._shape_str = shape_str

local function copy(t)
  if t == nil then return nil end
  local r = {}
  for i = 1, #t do r[i] = t[i] end
  return r
end

local function known(shape)
  if shape == nil then return false end
  for i = 1, #shape do if shape[i] <= 0 then return false end end
  return true
end

-- Parameter(name, grad_req="write", shape=, dtype="float32", lr_mult=1, wd_mult=1,
-- init=nil, allow_deferred_init=true, differentiable=true, stype, grad_stype) (MXNet's
-- order; Parameter("w", {shape = {2, 3}}) by name); name may be omitted. grad_stype
-- "row_sparse": the gradient buffer is row_sparse (Embedding's sparse_grad). stype
-- "row_sparse" (MXNet's row_sparse weights): every copy is a row_sparse array holding the
-- rows a Trainer's row_sparse_pull brought (row_sparse_data(row_ids)); data() refuses it.
function Parameter.new(name, opts, level)
  level = level or 2
  opts = SIG(level, name, opts)
  name = opts.name
  local shape = opts.shape
  if type(shape) == "number" then shape = { shape } end
  local grad_req = opts.grad_req or "write"
  if opts.differentiable == false then grad_req = "null" end
  if not REQS[grad_req] then
    error("Parameter: grad_req must be 'write', 'add' or 'null', got " .. tostring(grad_req),
      level + 1)
  end
  local gst = opts.grad_stype or "default"
  if gst ~= "default" and gst ~= "row_sparse" and gst ~= "csr" then
    error("Parameter: grad_stype must be 'default', 'row_sparse' or 'csr', got " .. tostring(gst),
      level + 1)
  end
  local st = opts.stype or "default"
  if st ~= "default" and st ~= "row_sparse" then
    error("Parameter: stype must be 'default' or 'row_sparse', got " .. tostring(st), level + 1)
  end
  local dt = opts.dtype or "float32"
  if not nd.dtype_code(dt) then error("Parameter: unknown dtype " .. tostring(dt), level + 1) end
  return setmetatable({
    name = name or "param",
    shape = copy(shape),
    dtype = type(dt) == "number" and nd.dtype_name[dt] or nd.dtype_name[nd.dtype_code(dt)],
    _grad_req = grad_req,
    grad_stype = gst,
    stype = st,
    lr_mult = opts.lr_mult or 1,
    wd_mult = opts.wd_mult or 1,
    init = opts.init,
    allow_deferred_init = opts.allow_deferred_init ~= false,
    _differentiable = opts.differentiable ~= false,
    _data = nil,     -- the NDArray once initialized
    _deferred = nil, -- {init=, ctx=} waiting for the shape
  }, Parameter)
end

-- The name errors use: the structural name once a Block collected it ("0.weight").
function Parameter:_fullname() return self._path or self.name end

function Parameter:__tostring()
  return string.format("Parameter %s (shape=%s, dtype=%s)", self:_fullname(), shape_str(self.shape),
    self.dtype)
end

-- Set (or refine) the shape: unknown dims (0) take the given values; known dims must
-- agree. Blocks call it while inferring shapes at the first forward.
function Parameter:set_shape(shape, level)
  level = level or 2
  if self.shape == nil then self.shape = copy(shape) return end
  local ok = #self.shape == #shape
  if ok then
    for i = 1, #shape do
      if self.shape[i] > 0 and self.shape[i] ~= shape[i] then ok = false end
    end
  end
  if not ok then
    error(string.format("Parameter '%s': expected shape %s is incompatible with given shape %s",
      self:_fullname(), shape_str(self.shape), shape_str(shape)), level + 1)
  end
  self.shape = copy(shape)
end

---------------------------------------------------------------- fresh gradients
-- MXNet's _fresh_grad: Trainer:step refuses (or, with ignore_stale_grad, skips) a
-- parameter whose gradient no backward has written since the last step. mx.autograd
-- sets `fresh = true` on a variable's Leaf (autograd._entry[x]) when a backward writes
-- its buffer; attach and the Trainer's step set it false. A Leaf made behind the
-- Parameter's back (x:attach_grad, mark_variables) has no mark yet: it counts as fresh
-- (never a false "stale" error).
local entry = autograd._entry
local function leaf_of_data(d)
  local leaf = d and entry[d]
  return type(leaf) == "table" and leaf or nil
end

-- The copies (a list: one per device, in ctx-list order) without autograd's help.
local function copies(self)
  local c = rawget(self, "_copies")
  if c then return c end
  local d = rawget(self, "_data")
  return d and { d } or nil
end
Parameter._copies_of = copies

local function attach(self)
  if self.grad_req ~= "null" then
    for _, d in ipairs(copies(self)) do
      d:attach_grad(self.grad_req, self.grad_stype)
      local leaf = leaf_of_data(d)
      if leaf then leaf.fresh = false end -- a new buffer: not fresh until a backward writes it
    end
  end
end

-- The gradient buffer of copy i (default 1; nil without one) and whether a backward
-- wrote it since the last _mark_stale.
function Parameter:_grad_state(i)
  local c = copies(self)
  local leaf = c and leaf_of_data(c[i or 1])
  if leaf == nil then return nil, false end
  return leaf.grad, leaf.fresh ~= false
end
function Parameter:_mark_stale()
  local c = copies(self)
  if c == nil then return end
  for _, d in ipairs(c) do
    local leaf = leaf_of_data(d)
    if leaf then leaf.fresh = false end
  end
end

-- ctx for initialize/reset_ctx: a Context, a list of them (a copy on each: data
-- parallelism) or nil (cpu(0)) -> a list of distinct Contexts; one that cannot hold data,
-- an empty list or a device listed twice is an error at `level`.
local function check_ctx(name, ctx, level)
  if ctx == nil then return { context.cpu() } end
  local list = ctx
  if type(ctx) ~= "table" or context.is_context(ctx) then list = { ctx } end
  if #list == 0 then error(name .. ": ctx: the context list is empty", level + 1) end
  local r, seen = {}, {}
  for i = 1, #list do
    local c = list[i]
    local ok, err = pcall(context.parse, c)
    if not ok then error(name .. ": ctx: " .. tostring(err), level + 1) end
    if not context.is_context(c) then c = context.new(context.parse(c)) end
    if seen[dev_key(c)] then
      error(name .. ": ctx: " .. tostring(c) .. " is listed twice", level + 1)
    end
    seen[dev_key(c)] = true
    r[i] = c
  end
  return r
end

-- Drop the copies (the parameter is being re-made or moved).
-- The structure epoch: bumped whenever a parameter's arrays are replaced (initialised,
-- cast, moved) or its grad_req changes, and by gluon.block when a child or parameter is
-- registered, replaced or removed. A hybridized block checks its structure again when
-- it moved (gluon/_hybrid.lua): a cached graph must not outlive what it was traced from.
local epoch = { n = 0 }
local function changed() epoch.n = epoch.n + 1 end

local function clear(self)
  changed()
  if rawget(self, "_by_dev") then DEV.multi = DEV.multi - 1 end
  rawset(self, "_copies", nil)
  rawset(self, "_by_dev", nil)
  rawset(self, "_data", nil)
end

-- Install the copies (list, aligned with ctx list): one raw _data, or the per-device map.
local function install(self, list, ctxs)
  clear(self)
  self._ctx_list = ctxs
  if #list == 1 then
    rawset(self, "_data", list[1])
    return
  end
  local by = {}
  for i = 1, #list do by[dev_key(ctxs[i])] = list[i] end
  rawset(self, "_copies", list)
  rawset(self, "_by_dev", by)
  DEV.multi = DEV.multi + 1
end

-- Allocate and fill the data now (the shape is complete): the first device's copy is
-- initialised, the others are copies of it (the same initial values everywhere).
-- (Parameters outlive any mx.nd.scope their first forward runs in: nd.keep.)
function Parameter:_init_impl(init, ctxs, data)
  if ctxs == nil or context.is_context(ctxs) then ctxs = check_ctx("initialize", ctxs, 2) end
  local first
  if data then
    first = nd.keep(nd.array(data, { dtype = self.dtype, ctx = ctxs[1] }))
  else
    first = nd.keep(nd.zeros(self.shape, { dtype = self.dtype, ctx = ctxs[1] }))
    local ini = initializer.create(init)
    ini(self:_fullname(), first)
  end
  if self.stype == "row_sparse" then first = nd.keep(first:tostype("row_sparse")) end
  local list = { first }
  for i = 2, #ctxs do list[i] = nd.keep(first:to(ctxs[i])) end
  install(self, list, ctxs)
  self._ctx = ctxs[1]
  attach(self)
end

-- initialize(init, ctx, default_init, force_reinit): init (or else the parameter's own
-- init, or else default_init = Uniform()) fills the data. With an unknown shape the
-- work waits for the first forward (allow_deferred_init).
function Parameter:initialize(init, ctx, default_init, force_reinit)
  if copies(self) ~= nil and not force_reinit then return end
  if init == nil then init = self.init or default_init or initializer.Uniform() end
  if type(ctx) == "table" and not context.is_context(ctx) and ctx.ctx ~= nil then
    ctx = ctx.ctx -- initialize(init, {ctx = {...}})
  end
  ctx = check_ctx("initialize", ctx, 2)
  if not known(self.shape) then
    if self.allow_deferred_init then
      self._deferred = { init = init, ctx = ctx }
      return
    end
    error(string.format("Cannot initialize Parameter '%s' because it has invalid shape: %s",
      self:_fullname(), shape_str(self.shape)), 2)
  end
  self._deferred = nil
  self:_init_impl(init, ctx)
end

-- Finish a deferred initialization once the shape is known (Blocks call it).
function Parameter:_finish_deferred_init(level)
  level = level or 2
  local d = self._deferred
  if d == nil then return end
  if not known(self.shape) then
    error(string.format("Parameter '%s' has shape %s after the first forward: its unknown "
      .. "dimensions (0) could not be inferred from the input; give the full shape (e.g. "
      .. "in_units= for Dense)", self:_fullname(), shape_str(self.shape)), level + 1)
  end
  self._deferred = nil
  self:_init_impl(d.init, d.ctx, d.data)
end

local function not_ready(self, level)
  if self._deferred then
    error(string.format("Parameter '%s' has not been initialized yet because initialization "
      .. "was deferred (shape %s). Actual initialization happens during the first forward "
      .. "pass: pass one batch of data through the network before accessing it",
      self:_fullname(), shape_str(self.shape)), level + 1)
  end
  error(string.format("Parameter '%s' has not been initialized: call initialize() on it or "
    .. "on its Block (net:initialize())", self:_fullname()), level + 1)
end

-- The copy on ctx (default: the first device's, or with several devices the one the
-- current forward runs on, cpu(0)'s outside a forward when it has one).
local function data_on(self, ctx, who, level)
  if rawget(self, "_data") == nil and rawget(self, "_copies") == nil then not_ready(self, level + 1) end
  if ctx == nil then
    local d = rawget(self, "_data")
    if d then return d end
    return rawget(self, "_by_dev")[DEV.key] or self._copies[1]
  end
  if not context.is_context(ctx) then
    local ok, err = pcall(context.parse, ctx)
    if not ok then error(who .. ": ctx: " .. tostring(err), level + 1) end
    ctx = context.new(context.parse(ctx))
  end
  local c = copies(self)
  for i, x in ipairs(self._ctx_list) do
    if x == ctx then return c[i], i end
  end
  local names = {}
  for i, x in ipairs(self._ctx_list) do names[i] = tostring(x) end
  error(string.format("%s: Parameter '%s' was not initialized on context %s; it is on %s", who,
    self:_fullname(), tostring(ctx), table.concat(names, ", ")), level + 1)
end

local function not_sparse(self, ctx, who, level)
  if self.stype ~= "default" then
    error(string.format("Cannot return a copy of Parameter '%s'%s via %s() because its storage "
      .. "type is %s. Please use row_sparse_data() instead.", self:_fullname(),
      ctx and (" on ctx " .. tostring(ctx)) or " on all contexts", who, self.stype), level + 1)
  end
end

-- data([ctx]): the tensor on ctx (the same tensor for the parameter's lifetime on it).
function Parameter:data(ctx)
  not_sparse(self, ctx or self._ctx, "data", 2)
  local d = data_on(self, ctx, "data", 2)
  return d
end
function Parameter:list_data()
  not_sparse(self, nil, "list_data", 2)
  if rawget(self, "_data") == nil and rawget(self, "_copies") == nil then not_ready(self, 2) end
  local r = {}
  for i, d in ipairs(copies(self)) do r[i] = d end
  return r
end

-- A Trainer holding a row_sparse Parameter is the one it pulls its rows from (MXNet's
-- _set_trainer: one Trainer per row_sparse Parameter).
function Parameter:_set_trainer(trainer, level)
  local t = rawget(self, "_trainer")
  if self.stype ~= "default" and t ~= nil and trainer ~= nil and t ~= trainer then
    error(string.format("Failed to set the trainer for Parameter '%s' because it was already set. "
      .. "More than one trainers for a %s Parameter is not supported.", self:_fullname(),
      self.stype), level + 1)
  end
  rawset(self, "_trainer", trainer)
end

local function row_ids_arg(self, who, row_id, level)
  if self.stype ~= "row_sparse" then
    error(string.format("Cannot return a copy of Parameter %s via %s() because its storage type "
      .. "is %s. Please use data() instead.", self:_fullname(), who, self.stype), level + 1)
  end
  if not nd.is_tensor(row_id) then
    error(who .. ": row_id must have NDArray type, but " .. type(row_id) .. " is given", level + 1)
  end
  if rawget(self, "_trainer") == nil then
    error(string.format("Cannot get row_sparse data for Parameter '%s' when no Trainer is "
      .. "created with it.", self:_fullname()), level + 1)
  end
  if rawget(self, "_data") == nil and rawget(self, "_copies") == nil then not_ready(self, level + 1) end
end

-- row_sparse_data(row_id): the copy on row_id's device, holding the rows row_id lists
-- (0-based, an NDArray) pulled from the Trainer's kvstore (the same tensor every call).
function Parameter:row_sparse_data(row_id)
  row_ids_arg(self, "row_sparse_data", row_id, 2)
  local d = data_on(self, row_id:context(), "row_sparse_data", 2)
  local ok, err = pcall(self._trainer._row_sparse_pull, self._trainer, self, { d }, row_id)
  if not ok then error("row_sparse_data: " .. tostring(err):gsub("^[^\n]-:%d+: ", ""), 2) end
  return d
end

-- list_row_sparse_data(row_id): every copy, each holding the rows row_id lists.
function Parameter:list_row_sparse_data(row_id)
  row_ids_arg(self, "list_row_sparse_data", row_id, 2)
  local r = {}
  for i, d in ipairs(copies(self)) do r[i] = d end
  local ok, err = pcall(self._trainer._row_sparse_pull, self._trainer, self, r, row_id)
  if not ok then error("list_row_sparse_data: " .. tostring(err):gsub("^[^\n]-:%d+: ", ""), 2) end
  return r
end

-- The whole value (MXNet's _reduce): for a row_sparse Parameter with a Trainer, every row
-- pulled from the Trainer's store into a new row_sparse array (its copies hold only the
-- rows last pulled); otherwise the first copy.
function Parameter:_reduce()
  local c = copies(self)
  if c == nil then return nil end
  local t = rawget(self, "_trainer")
  if self.stype == "default" or t == nil or rawget(t, "_kv") == nil then return c[1] end
  local out = nd.sparse.zeros("row_sparse", self.shape, { dtype = self.dtype, ctx = c[1]:context() })
  t:_row_sparse_pull(self, { out }, nd.arange(0, self.shape[1], { dtype = "int64" }))
  return out
end

function Parameter:grad(ctx)
  local _, i = data_on(self, ctx, "grad", 2)
  if self.grad_req == "null" then
    error("Parameter '" .. self:_fullname() .. "' has grad_req 'null': it has no gradient", 2)
  end
  if i == nil and rawget(self, "_by_dev") then
    local cur = rawget(self, "_by_dev")[DEV.key]
    for j, d in ipairs(self._copies) do if d == cur then i = j end end
  end
  local g = self:_grad_state(i)
  return g
end
function Parameter:list_grad()
  if rawget(self, "_data") == nil and rawget(self, "_copies") == nil then not_ready(self, 2) end
  if self.grad_req == "null" then
    error("Parameter '" .. self:_fullname() .. "' has grad_req 'null': it has no gradient", 2)
  end
  local r = {}
  for i = 1, #copies(self) do r[i] = (self:_grad_state(i)) end
  return r
end
function Parameter:list_ctx()
  if rawget(self, "_data") == nil and rawget(self, "_copies") == nil then
    local d = self._deferred and self._deferred.ctx
    if d == nil then return { context.cpu() } end
    local r = {}
    for i, c in ipairs(d) do r[i] = c end
    return r
  end
  local r = {}
  for i, c in ipairs(self._ctx_list) do r[i] = c end
  return r
end

-- Copy values into the parameter (its shape must match, or fix an unknown shape).
function Parameter:set_data(data)
  if not nd.is_tensor(data) then data = nd.array(data, { dtype = self.dtype }) end
  local s = data:shape()
  self:set_shape(s, 2)
  if copies(self) == nil then
    if self._deferred then
      local ctx = self._deferred.ctx
      self._deferred = nil
      self:_init_impl(nil, ctx, data)
      return
    end
    self:_init_impl(nil, nil, data)
    return
  end
  for _, d in ipairs(copies(self)) do
    if d:stype() ~= data:stype() then data = nd.cast_storage(data, { stype = d:stype() }) end
    data:copyto(d)
  end
  -- a row_sparse Parameter's store holds the weights: it starts again from the new value
  -- (MXNet's _reset_kvstore)
  local t = rawget(self, "_trainer")
  if t ~= nil and rawget(t, "_kv") ~= nil then t:_reset_kvstore(2) end
end

function Parameter:zero_grad()
  local c = copies(self)
  if c == nil or self.grad_req == "null" then return end
  for i = 1, #c do
    local g = self:_grad_state(i)
    if g and g:stype() ~= "default" then nd.zeros_like(g, { out = g }) -- no stored rows
    elseif g then nd.zeros(g:shape(), { dtype = g:dtype(), ctx = g:context(), out = g }) end
  end
end

-- Change grad_req (also what `p.grad_req = req` does); `level` as error() counts it.
function Parameter:set_grad_req(req, level)
  if not REQS[req] then
    error(string.format("set_grad_req: grad_req of Parameter '%s' must be 'write', 'add' or "
      .. "'null', got %s", self:_fullname(), tostring(req)), level == 1 and 0 or 2)
  end
  if not self._differentiable then req = "null" end
  if rawget(self, "_grad_req") ~= req then changed() end
  rawset(self, "_grad_req", req)
  local c = copies(self)
  if c ~= nil then
    if req == "null" then
      for _, d in ipairs(c) do d:attach_grad("null") end
    else
      attach(self)
    end
  end
end

-- Cast data (and reset grad) to another dtype.
function Parameter:cast(dtype)
  local code = nd.dtype_code(dtype)
  if not code then error("cast: unknown dtype " .. tostring(dtype), 2) end
  self.dtype = nd.dtype_name[code]
  local c = copies(self)
  if c ~= nil then
    local list = {}
    for i, d in ipairs(c) do list[i] = nd.keep(d:to(nil, self.dtype)) end
    install(self, list, self._ctx_list)
    attach(self)
  end
end

-- Move to other device(s) (reset_ctx in MXNet): a Context or a list (a copy on each,
-- all of the first current copy's values).
function Parameter:reset_ctx(ctx)
  ctx = check_ctx("reset_ctx", ctx, 2)
  local c = copies(self)
  if c ~= nil then
    local list = {}
    for i = 1, #ctx do list[i] = nd.keep(c[1]:to(ctx[i])) end
    install(self, list, ctx)
    self._ctx = ctx[1]
    attach(self)
  elseif self._deferred then
    self._deferred.ctx = ctx
  end
end

function Parameter:is_initialized() return copies(self) ~= nil end

-- Constant(name, value) (MXNet 1.9's order) or Constant(value) (2.0's): a parameter with
-- grad_req "null" holding a fixed value.
local CONST = class.signature("Constant", { "name", "value" })
local CONST20 = class.signature("Constant", { "value", "name" })
local function Constant(...)
  local a = ...
  local o
  if type(a) == "string" or (type(a) == "table" and getmetatable(a) == nil and a[1] == nil) then
    o = CONST(2, ...)
  else -- MXNet 2.0's Constant(value[, name])
    o = CONST20(2, ...)
  end
  local value, name = o.value, o.name
  if name ~= nil and type(name) ~= "string" then
    error("Constant: name must be a string, got " .. type(name), 2)
  end
  if not nd.is_tensor(value) then value = nd.array(value) end
  local p = Parameter.new(name or "const", { shape = value:shape(), dtype = value:dtype(),
    grad_req = "null", differentiable = false }, 2)
  p.init = initializer.Constant(value)
  p.value = value
  return p
end

local M = {
  Parameter = Parameter,
  _epoch = epoch, _changed = changed,
  Constant = Constant,
  known = known,
  shape_str = shape_str,
  check_ctx = check_ctx,
}
setmetatable(Parameter, { __call = function(_, ...)
  local p = Parameter.new(SIG(2, ...), nil, 2)
  return p -- not a tail call: the error level counts this frame
end })
class.declare(Parameter, SIG)
class.declare(Constant, CONST)
return M
