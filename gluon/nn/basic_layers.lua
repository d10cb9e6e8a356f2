-- mx.gluon.nn basic layers: Sequential, HybridSequential, Dense, Dropout, Activation,
-- Flatten, Lambda, HybridLambda, Identity, ReflectionPad2D, (Hybrid)Concatenate
-- (MXNet's semantics and defaults; options tables instead of keyword arguments).
local nd = require("mx.nd")
local S = require("mx.core.state")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local fast = require("mx.gluon._fast")

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget, select, getmetatable, unpack =
  type, error, tostring, rawget, select, getmetatable, unpack

local M = {}
local sig = block.sig

---------------------------------------------------------------- Sequential
-- Sequential(): stacks blocks; net:add(a, b, ...); net(x) feeds x through them in
-- order. As in MXNet (1.9 and 2.0), forward runs EVERY registered child in
-- registration order: the added ones and children assigned as attributes
-- (net.fc1 = nn.Dense(4)), which also count in len() and indexing. add() names a
-- child by the number of children registered before it ("0", "1", ... as MXNet's
-- str(len(self._children))). net:get(i) (or net[i]) is the i-th child (1-based);
-- net[{a, b}] a new Sequential of children a..b.
local Sequential = Block:extend("Sequential")
M.Sequential = Sequential
Sequential.__is_sequential = true -- summary() lists a container's children, not itself
local SEQ = sig(Sequential, {})
function Sequential:__init(...)
  SEQ(3, ...)
  Block.__init(self)
end
local function is_block(b)
  return type(b) == "table" and getmetatable(b) ~= nil and getmetatable(b).__is_block == true
end
function Sequential:add(...)
  local cname = tostring(getmetatable(self).__name)
  local names = rawget(self, "_child_names")
  for i = 1, select("#", ...) do
    local b = select(i, ...)
    if not is_block(b) then
      error(cname .. ":add: argument " .. i .. " is not a Block (got " .. type(b) .. ")", 2)
    end
    local name = tostring(#names)
    -- MXNet's dict would silently replace the child of that name (possible after a
    -- child was removed by assigning nil): refuse instead of losing a layer
    if rawget(self, "_children")[name] ~= nil then
      error(string.format("%s:add: a child named '%s' exists already (a child was removed); "
        .. "use register_child(block, name) with a free name", cname, name), 2)
    end
    self:register_child(b, name)
  end
  return self
end
-- The children run under pcall: an error inside one (an op's, raised at the
-- child's caller, this file) is re-raised naming the child and blaming the line that
-- called the Sequential (block._rethrow).
local current -- the index of the child running (for the error message)
local function run_list(names, ch, x)
  for i = 1, #names do
    current = i
    x = ch[names[i]](x)
  end
  return x
end
local function seq_fail(self, err)
  local names = rawget(self, "_child_names")
  local c = rawget(self, "_children")[names[current] or ""]
  local cname = c and tostring(getmetatable(c).__name) or "?"
  block._rethrow(tostring(getmetatable(self).__name) .. ": layer " .. tostring(current) .. " ("
    .. cname .. ")", err, 3)
end
function Sequential:forward(x, ...)
  local names, ch = rawget(self, "_child_names"), rawget(self, "_children")
  if select("#", ...) == 0 then
    local ok, y = pcall(run_list, names, ch, x)
    if not ok then seq_fail(self, y) end
    return y
  end
  local r = { x, ... }
  for i = 1, #names do r = { ch[names[i]](unpack(r)) } end
  return unpack(r)
end
function Sequential:len() return #rawget(self, "_child_names") end
-- A 1-based position (negatives from the end) checked against n children.
local function seq_pos(i, n, what, level)
  if type(i) ~= "number" or i ~= math.floor(i) or i == 0 then
    error(string.format("Sequential: %s must be a non-zero integer (1-based), got %s", what,
      tostring(i)), level + 1)
  end
  local j = i < 0 and n + i + 1 or i
  if j < 1 or j > n then
    error(string.format("Sequential: index %d out of range for %d children", i, n), level + 1)
  end
  return j
end
-- get(i): the i-th child (1-based, negatives from the end); get({a, b}): a new
-- Sequential of the same class holding children a..b (inclusive, sharing them, as
-- MXNet's net[a-1:b]); {a} runs to the last child. An empty range gives an empty net.
local function seq_get(self, i, level)
  local names, ch = rawget(self, "_child_names"), rawget(self, "_children")
  local n = #names
  if type(i) ~= "table" then return ch[names[seq_pos(i, n, "index", level + 1)]] end
  if i[3] ~= nil or i[1] == nil then
    error("Sequential: a range is {first, last} (1-based, inclusive)", level + 1)
  end
  local a = seq_pos(i[1], n, "range start", level + 1)
  local b = i[2] == nil and n or seq_pos(i[2], n, "range end", level + 1)
  local net = getmetatable(self)()
  for j = a, b do net:add(ch[names[j]]) end
  return net
end
function Sequential:get(i)
  local r = seq_get(self, i, 2) -- not a tail call: the error level counts this frame
  return r
end
-- net[i] with a number, net[{a, b}] with a range (a plain table key is a range: a
-- Sequential's own fields are strings)
local function seq_index_of(cls)
  local base = cls.__index
  return function(self, k)
    local tk = type(k)
    if tk == "number" or tk == "table" then
      local r = seq_get(self, k, 2)
      return r
    end
    return base(self, k)
  end
end
Sequential.__index = seq_index_of(Sequential)

-- HybridSequential(): MXNet's hybrid container: a Sequential whose hybridize traces the
-- whole chain into one graph (a HybridBlock's hybridize and export).
local HybridSequential = Sequential:extend("HybridSequential")
HybridSequential.__index = seq_index_of(HybridSequential)
local HSEQ = sig(HybridSequential, {})
function HybridSequential:__init(...)
  HSEQ(3, ...)
  Block.__init(self)
end
block.HybridBlock._hybrid_methods(HybridSequential)
M.HybridSequential = HybridSequential

---------------------------------------------------------------- activations
local ACT = { relu = nd.relu, sigmoid = nd.sigmoid, tanh = nd.tanh, softrelu = nd.softrelu,
  softsign = nd.softsign }
local function act_fn(name, level, who)
  if name == nil then return nil end
  local f = ACT[name]
  if f == nil then
    error((who and who .. ": " or "") .. "unknown activation '" .. tostring(name)
      .. "' (relu, sigmoid, tanh, softrelu, softsign)", level + 1)
  end
  return f
end

-- Activation(activation): relu, sigmoid, tanh, softrelu, softsign.
local Activation = HybridBlock:extend("Activation")
M.Activation = Activation
local ACT_SIG = sig(Activation, { "activation" })
function Activation:__init(...)
  Block.__init(self)
  local act_type = ACT_SIG(3, ...).activation
  self._act_type = act_type
  self._fn = act_fn(act_type, 3, "Activation")
end
function Activation:forward(x)
  if not nd.is_tensor(x) then error("Activation: input must be a tensor, got " .. type(x), 2) end
  return self._fn(x) -- a tail call: the op's errors blame this method's caller (the user)
end
function Activation:_repr_args() return self._act_type end

---------------------------------------------------------------- Dense
-- Dense(units, {activation=, use_bias=true, flatten=true, dtype="float32",
-- weight_initializer=, bias_initializer="zeros", in_units=0}): out = act(x . W^T + b)
-- with W (units, in_units). in_units=0 infers it at the first forward.
local Dense = HybridBlock:extend("Dense")
M.Dense = Dense
local DENSE = sig(Dense, { "units", "activation", "use_bias", "flatten", "dtype",
  "weight_initializer", "bias_initializer", "in_units" })
function Dense:__init(...)
  Block.__init(self)
  local o = DENSE(3, ...)
  local units = o.units
  if type(units) ~= "number" or units < 1 or units % 1 ~= 0 then
    error("Dense: units must be a positive integer, got " .. tostring(units), 3)
  end
  self._units = units
  self._in_units = o.in_units or 0
  self._flatten = o.flatten ~= false
  self._use_bias = o.use_bias ~= false
  self._act_type = o.activation
  self._act = act_fn(o.activation, 3, "Dense")
  local dtype = o.dtype or "float32"
  self.weight = Parameter("weight", { shape = { units, self._in_units }, dtype = dtype,
    init = o.weight_initializer and initializer.create(o.weight_initializer) })
  if self._use_bias then
    self.bias = Parameter("bias", { shape = { units }, dtype = dtype,
      init = initializer.create(o.bias_initializer or "zeros") })
  end
  -- the op's options, built once (num_hidden, flatten, no_bias); relu runs inside the
  -- op (act_type, fused into the GEMM's output pass) instead of as an op of its own
  local fo = { num_hidden = units }
  if not self._flatten then fo.flatten = false end
  if not self._use_bias then fo.no_bias = true end
  if o.activation == "relu" then
    fo.act_type = "relu"
    self._act = nil
  end
  self._fc = fast.prepare("fully_connected", fo, 3)
end

local weighted = fast.weighted
function Dense:forward(x) -- (an unknown in_units comes from x at the first call)
  local y = weighted(self, rawget(self, "_fc"), "Dense", x, rawget(self, "_act"), 2)
  return y
end
function Dense:_repr_args()
  local s = self.weight.shape
  local i = s and s[2] or 0
  return string.format("%s -> %d, %s", i > 0 and tostring(i) or "None", self._units,
    self._act_type or "linear")
end

---------------------------------------------------------------- Dropout
-- Dropout(rate, axes): in train mode (mx.autograd.record, train_mode) zeroes each
-- element with probability rate and scales the rest by 1/(1-rate); otherwise the
-- identity (no op runs).
local Dropout = HybridBlock:extend("Dropout")
M.Dropout = Dropout
local DROPOUT = sig(Dropout, { "rate", "axes" })
function Dropout:__init(...)
  Block.__init(self)
  local o = DROPOUT(3, ...)
  local rate = o.rate
  if o.axes ~= nil and type(o.axes) ~= "table" then
    error("Dropout: axes must be a list of axes (1-based), got " .. tostring(o.axes), 3)
  end
  if o.axes ~= nil and #o.axes == 0 then o.axes = nil end -- MXNet's default ()
  if type(rate) ~= "number" or rate < 0 or rate > 1 then
    error("Dropout: rate must be a number in [0, 1], got " .. tostring(rate), 3)
  end
  self._rate = rate
  self._opts = { p = rate, axes = o.axes, training = true }
end
local dropout = nd.dropout
function Dropout:forward(x)
  if not nd.is_tensor(x) then error("Dropout: input must be a tensor, got " .. type(x), 2) end
  if self._rate == 0 or not S.training then return x end
  local y = dropout(x, self._opts)
  return y
end
function Dropout:_repr_args() return "p = " .. tostring(self._rate) end

---------------------------------------------------------------- Flatten
-- Flatten(): (N, d2, d3, ...) -> (N, d2*d3*...), a view.
local Flatten = HybridBlock:extend("Flatten")
M.Flatten = Flatten
local FLATTEN = sig(Flatten, {})
function Flatten:__init(...)
  FLATTEN(3, ...)
  Block.__init(self)
end
function Flatten.forward(_, x)
  if not nd.is_tensor(x) then error("Flatten: input must be a tensor, got " .. type(x), 2) end
  local n = x:ndim()
  if n == 2 then return x end
  if n < 1 then error("Flatten: expected at least a 1-d input", 2) end
  return x:reshape(x:shape()[1], -1)
end

---------------------------------------------------------------- Lambda
-- The function a Lambda wraps: a callable, or the name of an mx.nd function.
local function is_callable(f)
  return type(f) == "function" or (type(f) == "table" and getmetatable(f) ~= nil
    and getmetatable(f).__call ~= nil)
end
local function lambda_fn(cname, fn, level)
  if type(fn) == "string" then
    local f = nd[fn]
    if type(f) ~= "function" then
      error(cname .. ": mx.nd has no function '" .. fn .. "'", level + 1)
    end
    return f, fn
  end
  if not is_callable(fn) then
    error(cname .. ": expected a function or an mx.nd op name, got " .. type(fn), level + 1)
  end
  return fn, nil
end

-- Lambda(fn): wraps fn(...) (or the name of an mx.nd op, "tanh") as a block.
local Lambda = Block:extend("Lambda")
M.Lambda = Lambda
local LAMBDA = sig(Lambda, { "function" })
function Lambda:__init(...)
  Block.__init(self)
  self._fn, self._name = lambda_fn("Lambda", LAMBDA(3, ...)["function"], 3)
end
function Lambda:forward(...) return self._fn(...) end
function Lambda:_repr_args() return self._name or "function" end

-- HybridLambda(fn): MXNet's hybrid form, fn(F, x, ...) with F the op namespace
-- (mx.nd: HybridLambda(function(F, x) return F.leaky_relu(x) end)), or an op
-- name ("tanh"), which is called as F[name](x, ...).
local HybridLambda = HybridBlock:extend("HybridLambda")
M.HybridLambda = HybridLambda
local HLAMBDA = sig(HybridLambda, { "function" })
function HybridLambda:__init(...)
  Block.__init(self)
  local f, name = lambda_fn("HybridLambda", HLAMBDA(3, ...)["function"], 3)
  self._name = name
  if name then
    self._fn = f
  else
    self._hfn = f
  end
end
function HybridLambda:forward(...)
  local f = rawget(self, "_fn")
  if f then return f(...) end
  return self._hfn(nd, ...)
end
function HybridLambda:_repr_args() return self._name or "function" end

---------------------------------------------------------------- Identity
-- Identity(): returns its input (MXNet's contrib.nn.Identity, nn.Identity in 2.0).
local Identity = HybridBlock:extend("Identity")
M.Identity = Identity
local IDENTITY = sig(Identity, {})
function Identity:__init(...)
  IDENTITY(3, ...)
  Block.__init(self)
end
function Identity.forward(_, x)
  if not nd.is_tensor(x) then error("Identity: input must be a tensor, got " .. type(x), 2) end
  return x
end

---------------------------------------------------------------- ReflectionPad2D
-- ReflectionPad2D(padding=0): pads the last two axes of an NCHW input by mirroring
-- (no border repeat): H + 2p, W + 2p. padding may also be MXNet's flat pad_width of
-- 8 numbers ({0, 0, 0, 0, top, bottom, left, right}).
local ReflectionPad2D = HybridBlock:extend("ReflectionPad2D")
M.ReflectionPad2D = ReflectionPad2D
local function nonneg_int(v)
  return type(v) == "number" and v >= 0 and v % 1 == 0
end
local RPAD = sig(ReflectionPad2D, { "padding" })
function ReflectionPad2D:__init(...)
  Block.__init(self)
  local padding = RPAD(3, ...).padding
  if padding == nil then padding = 0 end
  local pw
  if nonneg_int(padding) then
    pw = { 0, 0, 0, 0, padding, padding, padding, padding }
  elseif type(padding) == "table" and #padding == 8 then
    pw = {}
    for i = 1, 8 do
      if not nonneg_int(padding[i]) then
        error("ReflectionPad2D: padding[" .. i .. "] must be a non-negative integer, got "
          .. tostring(padding[i]), 3)
      end
      pw[i] = padding[i]
    end
    if pw[1] + pw[2] + pw[3] + pw[4] ~= 0 then
      error("ReflectionPad2D: the batch and channel axes cannot be padded (padding[1..4] "
        .. "must be 0)", 3)
    end
  else
    error("ReflectionPad2D: padding must be a non-negative integer or a list of 8 (MXNet's "
      .. "pad_width), got " .. (type(padding) == "table" and #padding .. " numbers"
      or tostring(padding)), 3)
  end
  self._padding = pw
  self._opts = { mode = "reflect", pad_width = pw }
end
local pad = nd.pad
function ReflectionPad2D:forward(x)
  if not nd.is_tensor(x) then
    error("ReflectionPad2D: input must be a tensor, got " .. type(x), 2)
  end
  if x:ndim() ~= 4 then
    error("ReflectionPad2D: expected a 4-d (N, C, H, W) input, got " .. x:ndim() .. "-d", 2)
  end
  local y = pad(x, self._opts) -- pad's errors (padding >= size) name the op
  return y
end
function ReflectionPad2D:_repr_args()
  local p = self._padding
  return table.concat(p, ", ")
end

---------------------------------------------------------------- Concatenate
-- Concatenate(axis=-1) / HybridConcatenate(axis=-1): containers that feed the same
-- input to every child and join the outputs along `axis` (1-based, negative from the
-- end; -1 is the last axis as MXNet's default). MXNet 2.0's nn names; MXNet 1.9 has
-- them as contrib.nn.Concurrent / HybridConcurrent.
local function concat_init(self, axis, cname)
  Sequential.__init(self)
  if axis == nil then axis = -1 end
  if type(axis) ~= "number" or axis % 1 ~= 0 or axis == 0 then
    error(cname .. ": axis must be a non-zero integer (1-based, negative from the end), got "
      .. tostring(axis), 4)
  end
  self._axis = axis
  self._copts = { dim = axis }
end
local concat = nd.concat
local function concat_forward(self, x)
  local names, ch = rawget(self, "_child_names"), rawget(self, "_children")
  if #names == 0 then
    error(tostring(getmetatable(self).__name) .. ": no children to concatenate", 2)
  end
  -- the children run under pcall, as Sequential's: an error inside one is re-raised
  -- naming it, at the line that called this block
  local ok, y = pcall(function()
    local outs = {}
    for i = 1, #names do
      current = i
      outs[i] = ch[names[i]](x)
    end
    current = nil
    return concat(outs, self._copts)
  end)
  if not ok then
    if current == nil then block._rethrow(tostring(getmetatable(self).__name), y, 3) end
    seq_fail(self, y)
  end
  return y
end
local Concatenate = Sequential:extend("Concatenate")
M.Concatenate = Concatenate
Concatenate.__index = seq_index_of(Concatenate)
local CONCAT = sig(Concatenate, { "axis" })
function Concatenate:__init(...) concat_init(self, CONCAT(3, ...).axis, "Concatenate") end
Concatenate.forward = concat_forward
function Concatenate:_repr_args() return "axis=" .. tostring(self._axis) end
local HybridConcatenate = Sequential:extend("HybridConcatenate")
M.HybridConcatenate = HybridConcatenate
HybridConcatenate.__index = seq_index_of(HybridConcatenate)
local HCONCAT = sig(HybridConcatenate, { "axis" })
function HybridConcatenate:__init(...)
  concat_init(self, HCONCAT(3, ...).axis, "HybridConcatenate")
end
HybridConcatenate.forward = concat_forward
HybridConcatenate._repr_args = Concatenate._repr_args
block.HybridBlock._hybrid_methods(HybridConcatenate) -- (hybridize traces it whole; export)

return M
