-- mx.init — parameter initializers (MXNet's semantics and defaults).
--
--   net:initialize(mx.init.Xavier())            -- the default for every parameter
--   nn.Dense(10, {weight_initializer=mx.init.Normal(0.02)})
--
-- An initializer is callable: init(name, arr) fills the tensor arr in place (name is
-- the parameter's name, used in messages). A parameter's own init wins over the one
-- given to Block:initialize, as in Gluon. Random draws come from mx.nd's random ops,
-- so mx.random.seed makes them reproducible. Constructors take MXNet's arguments
-- positionally in its order or by name (mx.core.class signature); init:dumps() is MXNet's
-- JSON form ('["xavier", {"rnd_type": "uniform", ...}]'), which create() reads back.
local nd = require("mx.nd")
local class = require("mx.core.class")

local type, error, tostring, sqrt = type, error, tostring, math.sqrt

local M = {}

local Initializer = class.base("Initializer")
Initializer.__call = function(self, name, arr) return self:_init_weight(name, arr) end
M.Initializer = Initializer

local registry = {}
-- init_class(name, aliases): a subclass, found by create() under its lower-case name
-- and the aliases.
local function init_class(name, aliases)
  local c = class.extend(Initializer, name)
  c.__tostring = function() return name end
  registry[name:lower()] = c
  for _, a in ipairs(aliases or {}) do registry[a] = c end
  return c
end

-- ctor(name, params, make): M[name](...) with MXNet's calling convention; make(o) builds
-- the instance from the parsed arguments (errors at level 2: it is tail-called); the
-- instance keeps its arguments in MXNet's order for dumps().
local function ctor(name, params, make)
  local sig = class.signature(name, params)
  M[name] = function(...)
    return make(sig(2, ...))
  end
  class.declare(M[name], sig)
end
local function kwargs(self, list)
  rawset(self, "_kwargs", list)
  return self
end

local function ctx_dtype(arr) return { dtype = arr:dtype(), ctx = arr:context() } end

-- Fill arr with U(low, high) / N(mean, sigma) through the op table's random ops.
local function uniform(arr, low, high)
  local o = ctx_dtype(arr)
  o.low, o.high, o.shape, o.out = low, high, arr:shape(), arr
  nd.random_uniform(o)
end
local function normal(arr, mean, sigma)
  local o = ctx_dtype(arr)
  o.loc, o.scale, o.shape, o.out = mean, sigma, arr:shape(), arr
  nd.random_normal(o)
end
local function fill(arr, v)
  nd.full(arr:shape(), v, { dtype = arr:dtype(), ctx = arr:context(), out = arr })
end
M._uniform, M._normal, M._fill = uniform, normal, fill

-- dumps(): MXNet's '["<lower-case class name>", {<the constructor's arguments>}]'
function Initializer:dumps()
  local cjson = require("cjson")
  local parts = {}
  for _, kv in ipairs(rawget(self, "_kwargs") or {}) do
    local v = kv[2]
    -- a tensor or a nested table as a (nested) list, as MXNet's Constant.dumps
    if nd.is_tensor(v) then v = v:ndim() == 0 and v:item() or v:totable() end
    if type(v) ~= "number" and type(v) ~= "string" and type(v) ~= "boolean"
        and not (type(v) == "table" and getmetatable(v) == nil) then
      error(getmetatable(self).__name .. ":dumps: argument " .. kv[1] .. " is a " .. type(v)
        .. " (only numbers, strings, booleans and lists have a JSON form)", 2)
    end
    parts[#parts + 1] = cjson.encode(kv[1]) .. ": " .. cjson.encode(v)
  end
  return "[" .. cjson.encode(getmetatable(self).__name:lower()) .. ", {"
    .. table.concat(parts, ", ") .. "}]"
end

---------------------------------------------------------------- constants
local Zero = init_class("Zero", { "zeros" })
function Zero._init_weight(_, _, arr) fill(arr, 0) end
ctor("Zero", {}, function() return kwargs(setmetatable({}, Zero), {}) end)

local One = init_class("One", { "ones" })
function One._init_weight(_, _, arr) fill(arr, 1) end
ctor("One", {}, function() return kwargs(setmetatable({}, One), {}) end)

-- Constant(value): a number (or a tensor or nested table broadcast to the parameter's
-- shape).
local Constant = init_class("Constant")
function Constant:_init_weight(_, arr)
  if type(self.value) == "number" then
    fill(arr, self.value)
  else
    nd.broadcast_to(self.value, { shape = arr:shape(), out = arr })
  end
end
ctor("Constant", { "value" }, function(o)
  local value = o.value
  if type(value) == "table" and not nd.is_tensor(value) then
    -- a nested Lua table of numbers (MXNet's numpy value; dumps writes it back as a list)
    local ok, a = pcall(nd.array, value)
    if not ok then error("mx.init.Constant: value: " .. tostring(a):gsub("^[^\n]-:%d+: ", ""), 2) end
    return kwargs(setmetatable({ value = a }, Constant), { { "value", value } })
  end
  if type(value) ~= "number" and not nd.is_tensor(value) then
    error("mx.init.Constant: value must be a number, a tensor or a nested table, got " .. type(value), 2)
  end
  return kwargs(setmetatable({ value = value }, Constant), { { "value", value } })
end)

---------------------------------------------------------------- random
-- Uniform(scale=0.07): U(-scale, scale).
local Uniform = init_class("Uniform")
function Uniform:_init_weight(_, arr) uniform(arr, -self.scale, self.scale) end
ctor("Uniform", { "scale" }, function(o)
  local scale = o.scale or 0.07
  return kwargs(setmetatable({ scale = scale }, Uniform), { { "scale", scale } })
end)

-- Normal(sigma=0.01): N(0, sigma^2).
local Normal = init_class("Normal")
function Normal:_init_weight(_, arr) normal(arr, 0, self.sigma) end
ctor("Normal", { "sigma" }, function(o)
  local sigma = o.sigma or 0.01
  return kwargs(setmetatable({ sigma = sigma }, Normal), { { "sigma", sigma } })
end)

local function fans(name, arr, who)
  local shape = arr:shape()
  if #shape < 2 then
    error(string.format("%s initializer cannot be applied to vector %s (shape (%s)): it "
      .. "requires at least 2D", who, tostring(name), table.concat(shape, ", ")), 0)
  end
  local hw = 1
  for i = 3, #shape do hw = hw * shape[i] end
  return shape[2] * hw, shape[1] * hw
end

-- Xavier(rnd_type="uniform", factor_type="avg", magnitude=3): scale =
-- sqrt(magnitude / factor) with factor fan_in, fan_out or their mean; "uniform" draws
-- U(-scale, scale), "gaussian" N(0, scale^2). fan_in = shape[2]*prod(shape[3..]),
-- fan_out = shape[1]*prod(shape[3..]).
local Xavier = init_class("Xavier")
function Xavier:_init_weight(name, arr)
  local fan_in, fan_out = fans(name, arr, "Xavier")
  local factor
  if self.factor_type == "avg" then factor = (fan_in + fan_out) / 2
  elseif self.factor_type == "in" then factor = fan_in
  else factor = fan_out end
  local scale = sqrt(self.magnitude / factor)
  if self.rnd_type == "uniform" then uniform(arr, -scale, scale) else normal(arr, 0, scale) end
end
local function xavier(rnd_type, factor_type, magnitude, level)
  rnd_type = rnd_type or "uniform"
  factor_type = factor_type or "avg"
  if rnd_type ~= "uniform" and rnd_type ~= "gaussian" then
    error("mx.init.Xavier: rnd_type must be 'uniform' or 'gaussian', got " .. tostring(rnd_type),
      level + 1)
  end
  if factor_type ~= "avg" and factor_type ~= "in" and factor_type ~= "out" then
    error("mx.init.Xavier: factor_type must be 'avg', 'in' or 'out', got "
      .. tostring(factor_type), level + 1)
  end
  magnitude = magnitude or 3
  return kwargs(setmetatable({ rnd_type = rnd_type, factor_type = factor_type,
    magnitude = magnitude }, Xavier), { { "rnd_type", rnd_type },
    { "factor_type", factor_type }, { "magnitude", magnitude } })
end
-- Xavier(rnd_type, factor_type, magnitude)
ctor("Xavier", { "rnd_type", "factor_type", "magnitude" }, function(o)
  local r = xavier(o.rnd_type, o.factor_type, o.magnitude, 2)
  return r
end)

-- MSRAPrelu(factor_type="avg", slope=0.25): Xavier("gaussian", factor_type,
-- 2 / (1 + slope^2)) (He et al.); dumps() names it msraprelu, as MXNet's.
local MSRAPrelu = init_class("MSRAPrelu")
MSRAPrelu._init_weight = Xavier._init_weight
ctor("MSRAPrelu", { "factor_type", "slope" }, function(o)
  local slope = o.slope or 0.25
  if type(slope) ~= "number" or slope ~= slope then
    error("MSRAPrelu: slope must be a number, got " .. tostring(slope), 2)
  end
  local factor_type = o.factor_type or "avg"
  local r = xavier("gaussian", factor_type, 2 / (1 + slope * slope), 2)
  r.slope = slope
  setmetatable(r, MSRAPrelu)
  return kwargs(r, { { "factor_type", factor_type }, { "slope", slope } })
end)

-- Orthogonal(scale=1.414, rand_type="uniform"): a random (nout, nin) matrix
-- (nin = prod(shape[2..])) made orthonormal (rows if nout <= nin, else columns) by
-- modified Gram-Schmidt in double precision, times scale.
local Orthogonal = init_class("Orthogonal")
function Orthogonal:_init_weight(name, arr)
  local shape = arr:shape()
  if #shape < 2 then
    error("Orthogonal initializer cannot be applied to vector " .. tostring(name), 0)
  end
  local nout, nin = shape[1], 1
  for i = 2, #shape do nin = nin * shape[i] end
  local tmp = nd.zeros({ nout, nin }, { dtype = "float64" })
  if self.rand_type == "uniform" then uniform(tmp, -1, 1) else normal(tmp, 0, 1) end
  local v = tmp:tolist()
  -- vectors to orthonormalise: rows (nout <= nin) or columns
  local rows = nout <= nin
  local nv, len = rows and nout or nin, rows and nin or nout
  local function get(k, i) if rows then return v[(k - 1) * nin + i] end return v[(i - 1) * nin + k] end
  local function set(k, i, x) if rows then v[(k - 1) * nin + i] = x else v[(i - 1) * nin + k] = x end end
  for k = 1, nv do
    for j = 1, k - 1 do
      local d = 0
      for i = 1, len do d = d + get(k, i) * get(j, i) end
      for i = 1, len do set(k, i, get(k, i) - d * get(j, i)) end
    end
    local n = 0
    for i = 1, len do n = n + get(k, i) ^ 2 end
    n = sqrt(n)
    if n < 1e-12 then n = 1 end
    for i = 1, len do set(k, i, get(k, i) / n) end
  end
  for i = 1, #v do v[i] = v[i] * self.scale end
  local res = nd.array(v, { dtype = "float64" }):reshape(shape)
  res:copyto(arr)
end
ctor("Orthogonal", { "scale", "rand_type" }, function(o)
  local scale, rand_type = o.scale or 1.414, o.rand_type or "uniform"
  if rand_type ~= "uniform" and rand_type ~= "normal" then
    error("mx.init.Orthogonal: rand_type must be 'uniform' or 'normal'", 2)
  end
  return kwargs(setmetatable({ scale = scale, rand_type = rand_type }, Orthogonal),
    { { "scale", scale }, { "rand_type", rand_type } })
end)

---------------------------------------------------------------- Bilinear, LSTMBias
-- Bilinear(): the weights of a bilinear upsampling (a Deconvolution of stride f),
-- MXNet's: w[i] = (1 - |x/f - c|) * (1 - |y/f - c|) with x, y the position of element i
-- in the last two axes, f = ceil(width / 2), c = (2f - 1 - f % 2) / (2f).
local Bilinear = init_class("Bilinear")
function Bilinear._init_weight(_, name, arr)
  local shape = arr:shape()
  if #shape ~= 4 then
    error("Bilinear initializer needs a 4-d weight, got " .. tostring(name) .. " of shape ("
      .. table.concat(shape, ", ") .. ")", 0)
  end
  local n = arr:size()
  local w3, w2 = shape[4], shape[3]
  local f = math.ceil(w3 / 2)
  local c = (2 * f - 1 - f % 2) / (2 * f)
  local v = {}
  for i = 0, n - 1 do
    local x, y = i % w3, math.floor(i / w3) % w2
    v[i + 1] = (1 - math.abs(x / f - c)) * (1 - math.abs(y / f - c))
  end
  nd.array(v, { dtype = arr:dtype(), ctx = arr:context() }):reshape(shape):copyto(arr)
end
ctor("Bilinear", {}, function() return kwargs(setmetatable({}, Bilinear), {}) end)

-- LSTMBias(forget_bias=1): zeros, with forget_bias in the second quarter (the forget
-- gate's biases: the gates are i, f, c, o).
local LSTMBias = init_class("LSTMBias")
function LSTMBias:_init_weight(name, arr)
  local n = arr:shape()[1]
  if arr:ndim() ~= 1 or n % 4 ~= 0 then
    error("LSTMBias initializer needs a 1-d bias of 4 * hidden values, got " .. tostring(name)
      .. " of shape (" .. table.concat(arr:shape(), ", ") .. ")", 0)
  end
  fill(arr, 0)
  arr[{ { n / 4 + 1, n / 2 } }] = self.forget_bias
end
ctor("LSTMBias", { "forget_bias" }, function(o)
  local fb = o.forget_bias or 1.0
  if type(fb) ~= "number" then error("mx.init.LSTMBias: forget_bias must be a number", 2) end
  return kwargs(setmetatable({ forget_bias = fb }, LSTMBias), { { "forget_bias", fb } })
end)

---------------------------------------------------------------- Mixed, Load
-- Mixed(patterns, initializers): the first initializer whose pattern matches the
-- parameter's name (a Lua pattern anchored at the start, as MXNet's re.match; ".*" is the
-- usual catch-all) fills it; no match is an error naming the parameter.
local Mixed = init_class("Mixed")
function Mixed:_init_weight(name, arr)
  local n = tostring(name)
  for i, p in ipairs(self.patterns) do
    if n:find("^" .. p) then return self.initializers[i](name, arr) end
  end
  error("Mixed initializer: parameter " .. n .. " did not match any pattern (add \".*\" as "
    .. "the last one for a default)", 0)
end
ctor("Mixed", { { "patterns", list = true }, { "initializers", list = true } }, function(o)
  local pats, inits = o.patterns, o.initializers
  if type(pats) ~= "table" or type(inits) ~= "table" or #pats ~= #inits then
    error("mx.init.Mixed: patterns and initializers must be two lists of the same length", 2)
  end
  local list = {}
  for i = 1, #inits do
    if type(pats[i]) ~= "string" then error("mx.init.Mixed: patterns[" .. i .. "] is not a string", 2) end
    list[i] = M.create(inits[i])
  end
  return setmetatable({ patterns = pats, initializers = list }, Mixed)
end)

-- Load(param, default_init, verbose): the parameter's values from param (a table name
-- -> tensor, or a file mx.nd.load reads; MXNet's "arg:"/"aux:" prefixes are dropped);
-- names it lacks use default_init (an error without one); a shape mismatch is an error.
local Load = init_class("Load")
function Load:_init_weight(name, arr)
  local v = self.param[tostring(name)]
  if v ~= nil then
    local a, b = table.concat(v:shape(), ", "), table.concat(arr:shape(), ", ")
    if a ~= b then
      error(string.format("Load initializer: parameter %s has shape (%s), the loaded value (%s)",
        tostring(name), b, a), 0)
    end
    v:copyto(arr)
    if self.verbose then io.stderr:write("Initialized ", tostring(name), " by loading\n") end
    return
  end
  if self.default_init == nil then
    error("Load initializer: " .. tostring(name) .. " is not in the loaded parameters and no "
      .. "default_init was given", 0)
  end
  self.default_init(name, arr)
  if self.verbose then io.stderr:write("Initialized ", tostring(name), " by default\n") end
end
ctor("Load", { "param", "default_init", "verbose" }, function(o)
  local param = o.param
  if type(param) == "string" then
    local ok, r = pcall(nd.load, param)
    if not ok then error("mx.init.Load: " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), 2) end
    param = r
  end
  if type(param) ~= "table" then
    error("mx.init.Load: param must be a table of tensors or a file name", 2)
  end
  local p = {}
  for k, v in pairs(param) do
    if type(k) == "string" then p[(k:gsub("^arg:", ""):gsub("^aux:", ""))] = v end
  end
  return setmetatable({ param = p, default_init = o.default_init and M.create(o.default_init),
    verbose = o.verbose == true }, Load)
end)

---------------------------------------------------------------- FusedRNN
-- FusedRNN(init, num_hidden, num_layers, mode, bidirectional=false, forget_bias=1): the packed
-- parameters of an RNN op (mx.rnn.FusedRNNCell) as MXNet's: each layer's and direction's
-- i2h/h2h weights by `init` (nil: the global initializer Module gives), the biases 0, an
-- LSTM's forget-gate biases forget_bias; the input size from the vector's length.
local FusedRNN = init_class("FusedRNN")
local GATES = { rnn_relu = 1, rnn_tanh = 1, lstm = 4, gru = 3 }
function FusedRNN:_init_weight(name, arr)
  local h, L, m = self.num_hidden, self.num_layers, GATES[self.mode]
  local b = self.bidirectional and 2 or 1
  local n = arr:size()
  local I = math.floor(n / b / h / m) - (L - 1) * (h + b * h + 2) - h - 2
  if I < 1 or (I + h + 2) * h * m * b + (L - 1) * m * h * (h + b * h + 2) * b ~= n then
    error(string.format("FusedRNN: %s holds %d values, not the packed parameters of %d %s layers "
      .. "of %d", tostring(name), n, L, self.mode, h), 3)
  end
  local winit = self.init or rawget(self, "_global") or M.Uniform()
  local parts = {}
  local opts = { dtype = arr:dtype(), ctx = arr:context() }
  for layer = 0, L - 1 do
    local inp = layer == 0 and I or b * h
    for _ = 1, b do
      for _, s in ipairs { { m * h, inp }, { m * h, h } } do
        local w = nd.zeros(s, opts)
        winit(name .. "_weight", w)
        parts[#parts + 1] = w:reshape(-1)
      end
    end
  end
  for _ = 0, L - 1 do
    for _ = 1, b do
      for k = 1, 2 do
        local bias = nd.zeros({ m * h }, opts)
        if self.mode == "lstm" and k == 1 then bias[{ { h + 1, 2 * h } }] = self.forget_bias end
        parts[#parts + 1] = bias
      end
    end
  end
  nd.copy(nd.concat(parts, { dim = 1 }), { out = arr:reshape(-1) })
end
ctor("FusedRNN", { "init", "num_hidden", "num_layers", "mode", "bidirectional", "forget_bias" },
  function(o)
    if not GATES[o.mode] then
      error("mx.init.FusedRNN: mode must be rnn_relu, rnn_tanh, lstm or gru, got " .. tostring(o.mode), 2)
    end
    local init = o.init ~= nil and M.create(o.init) or nil
    local list = { { "num_hidden", o.num_hidden }, { "num_layers", o.num_layers }, { "mode", o.mode },
      { "bidirectional", o.bidirectional == true }, { "forget_bias", o.forget_bias or 1 } }
    if o.init ~= nil then table.insert(list, 1, { "init", init:dumps() }) end
    return kwargs(setmetatable({ init = init, num_hidden = o.num_hidden, num_layers = o.num_layers,
      mode = o.mode, bidirectional = o.bidirectional == true, forget_bias = o.forget_bias or 1 },
      FusedRNN), list)
  end)

-- _init_by_name(init, name, arr, attrs): MXNet's InitDesc rules (Initializer.__call__ of a
-- symbol's variable, what Module.init_params runs): the variable's __init__ attribute
-- (an initializer's dumps() JSON) wins; else by the name's end: weight -> init, bias /
-- beta -> 0, gamma -> 1, min -> 0, max -> 1, moving_mean / moving_inv_var / moving_avg ->
-- 0, moving_var -> 1; any other name is an error naming it (MXNet's _init_default).
local SUFFIX = { { "weight" }, { "bias", 0 }, { "gamma", 1 }, { "beta", 0 }, { "min", 0 },
  { "max", 1 }, { "moving_mean", 0 }, { "moving_var", 1 }, { "moving_inv_var", 0 },
  { "moving_avg", 0 } }
function M._init_by_name(init, name, arr, attrs)
  local spec = attrs and attrs.__init__
  if spec and spec ~= "" then
    local ok, i2 = pcall(M.create, spec)
    if not ok then error("mx.init: " .. tostring(name) .. "'s __init__: " .. tostring(i2), 2) end
    rawset(i2, "_global", init) -- (FusedRNN's weights: MXNet's desc.global_init)
    return i2(name, arr)
  end
  for _, s in ipairs(SUFFIX) do
    if name:sub(-#s[1]) == s[1] then
      if s[2] == nil then return init(name, arr) end
      fill(arr, s[2])
      return
    end
  end
  error("mx.init: unknown initialization pattern for " .. tostring(name) .. " (MXNet's rule: "
    .. "the names end with weight, bias, gamma, beta, min, max, moving_mean, moving_var, "
    .. "moving_inv_var or moving_avg; or give the variable an init)", 2)
end

-- create(x[, opts]): an initializer from an initializer, a name ("zeros", "xavier", ...)
-- with its arguments in opts, a dumps() string ('["xavier", {"magnitude": 2}]') or nil.
function M.create(x, opts)
  if x == nil then return nil end
  if type(x) == "table" and getmetatable(x) and getmetatable(x)._init_weight then return x end
  if type(x) == "string" and x:sub(1, 1) == "[" then
    local ok, t = pcall(require("cjson").decode, x)
    if not ok or type(t) ~= "table" or type(t[1]) ~= "string" then
      error("mx.init: not an initializer's JSON ('[\"name\", {...}]'): " .. x, 2)
    end
    x, opts = t[1], t[2]
  end
  if type(x) == "string" then
    local c = registry[x:lower()]
    if c then
      local r = M[c.__name](opts)
      return r
    end
  end
  error("mx.init: unknown initializer " .. tostring(x), 2)
end

-- the classes' `*_initializer` options (mx.core.class.check_opts): what create takes
require("mx.core.class").register_option_check(
  function(k) return type(k) == "string" and k:find("_initializer$") ~= nil end,
  function(k, v)
    local ok, err = pcall(M.create, v)
    if not ok then return k .. ": " .. tostring(err):gsub("^[^\n]-:%d+: ", "") end
  end)

return M
