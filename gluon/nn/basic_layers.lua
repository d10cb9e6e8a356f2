-- mx.gluon.nn basic layers: Sequential, Dense, Dropout, Activation, Flatten, Lambda
-- (MXNet's semantics and defaults; options tables instead of keyword arguments).
local nd = require("mx.nd")
local S = require("mx._state")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local fast = require("mx.gluon._fast")
local check_opts = require("mx._class").check_opts
local infer = require("mx._infer").infer

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget, select = type, error, tostring, rawget, select

local M = {}

---------------------------------------------------------------- Sequential
-- Sequential(): stacks blocks; net:add(a, b, ...); net(x) feeds x through them in
-- order. net:get(i) (or net[i]) is the i-th child (1-based; its name is i-1);
-- net[{a, b}] a new Sequential of children a..b.
local Sequential = Block:extend("Sequential")
M.Sequential = Sequential
function Sequential:__init()
  Block.__init(self)
  rawset(self, "_list", {})
end
function Sequential:add(...)
  local list = rawget(self, "_list")
  for i = 1, select("#", ...) do
    local b = select(i, ...)
    if not (type(b) == "table" and getmetatable(b) and getmetatable(b).__is_block) then
      error("Sequential:add: argument " .. i .. " is not a Block (got " .. type(b) .. ")", 2)
    end
    self:register_child(b, tostring(#list))
    list[#list + 1] = b
  end
  return self
end
-- The children run under pcall: an error inside one (an op's, raised at the
-- child's caller, this file) is re-raised naming the child and blaming the line that
-- called the Sequential (block._rethrow).
local current -- the index of the child running (for the error message)
local function run_list(list, x)
  for i = 1, #list do
    current = i
    x = list[i](x)
  end
  return x
end
local function seq_fail(self, err)
  local list = rawget(self, "_list")
  local c = list[current]
  local cname = c and tostring(getmetatable(c).__name) or "?"
  block._rethrow("Sequential: layer " .. tostring(current) .. " (" .. cname .. ")", err, 3)
end
function Sequential:forward(x, ...)
  local list = rawget(self, "_list")
  if select("#", ...) == 0 then
    local ok, y = pcall(run_list, list, x)
    if not ok then seq_fail(self, y) end
    return y
  end
  local r = { x, ... }
  for i = 1, #list do r = { list[i](unpack(r)) } end
  return unpack(r)
end
function Sequential:len() return #rawget(self, "_list") end
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
  local list = rawget(self, "_list")
  local n = #list
  if type(i) ~= "table" then return list[seq_pos(i, n, "index", level + 1)] end
  if i[3] ~= nil or i[1] == nil then
    error("Sequential: a range is {first, last} (1-based, inclusive)", level + 1)
  end
  local a = seq_pos(i[1], n, "range start", level + 1)
  local b = i[2] == nil and n or seq_pos(i[2], n, "range end", level + 1)
  local net = getmetatable(self)()
  for j = a, b do net:add(list[j]) end
  return net
end
function Sequential:get(i)
  local r = seq_get(self, i, 2) -- not a tail call: the error level counts this frame
  return r
end
-- net[i] with a number, net[{a, b}] with a range (a plain table key is a range: a
-- Sequential's own fields are strings)
local seq_index = Sequential.__index
Sequential.__index = function(self, k)
  local tk = type(k)
  if tk == "number" or tk == "table" then
    local r = seq_get(self, k, 2)
    return r
  end
  return seq_index(self, k)
end
M.HybridSequential = Sequential

---------------------------------------------------------------- activations
local ACT = { relu = nd.relu, sigmoid = nd.sigmoid, tanh = nd.tanh, softrelu = nd.softrelu,
  softsign = nd.softsign }
local function act_fn(name, level)
  if name == nil then return nil end
  local f = ACT[name]
  if f == nil then
    error("unknown activation '" .. tostring(name) .. "' (relu, sigmoid, tanh, softrelu, "
      .. "softsign)", level + 1)
  end
  return f
end

-- Activation(act_type): relu, sigmoid, tanh, softrelu, softsign.
local Activation = HybridBlock:extend("Activation")
M.Activation = Activation
function Activation:__init(act_type)
  Block.__init(self)
  self._act_type = act_type
  self._fn = act_fn(act_type, 3)
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
local DENSE_OPTS = { activation = true, use_bias = true, flatten = true, dtype = true,
  weight_initializer = true, bias_initializer = true, in_units = true }
function Dense:__init(units, opts)
  Block.__init(self)
  local o = check_opts("Dense", opts, DENSE_OPTS, 3)
  if type(units) ~= "number" or units < 1 or units % 1 ~= 0 then
    error("Dense: units must be a positive integer, got " .. tostring(units), 3)
  end
  self._units = units
  self._in_units = o.in_units or 0
  self._flatten = o.flatten ~= false
  self._use_bias = o.use_bias ~= false
  self._act_type = o.activation
  self._act = act_fn(o.activation, 3)
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

-- Fill the unknown in_units from x and finish the deferred initialization: the core's
-- inference of fully_connected (mx._infer) says what the weight's and the bias's shapes
-- must be for this input; no per-layer shape arithmetic here.
function Dense:_infer(x)
  local w = self.weight
  if w._data ~= nil then return end
  local b = self.bias
  local ins = { x, { shape = w.shape, dtype = w.dtype } }
  if b then ins[3] = { shape = b.shape, dtype = b.dtype } end
  local rec = rawget(self, "_fc")
  local r = infer(rec.op, rec.opts, ins, 3)
  w:set_shape(r.inputs[2].shape, 3)
  w:_finish_deferred_init(3)
  if b then
    b:set_shape(r.inputs[3].shape, 3)
    b:_finish_deferred_init(3)
  end
end

local fc_call = fast.call
function Dense:forward(x)
  local reg = rawget(self, "_reg")
  local w = reg.weight._data
  if w == nil then
    if not nd.is_tensor(x) then error("Dense: input must be a tensor, got " .. type(x), 2) end
    self:_infer(x)
    w = reg.weight:data()
  end
  local b = reg.bias
  local y
  if b then
    y = fc_call(rawget(self, "_fc"), 2, x, w, b._data or b:data())
  else
    y = fc_call(rawget(self, "_fc"), 2, x, w)
  end
  local act = rawget(self, "_act")
  if act then y = act(y) end
  return y
end
function Dense:_repr_args()
  local s = self.weight.shape
  local i = s and s[2] or 0
  return string.format("%s -> %d, %s", i > 0 and tostring(i) or "None", self._units,
    self._act_type or "linear")
end

---------------------------------------------------------------- Dropout
-- Dropout(rate, {axes=}): in train mode (mx.autograd.record, train_mode) zeroes each
-- element with probability rate and scales the rest by 1/(1-rate); otherwise the
-- identity (no op runs).
local Dropout = HybridBlock:extend("Dropout")
M.Dropout = Dropout
function Dropout:__init(rate, opts)
  Block.__init(self)
  local o = check_opts("Dropout", opts, { axes = true }, 3)
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
function Flatten:__init() Block.__init(self) end
function Flatten.forward(_, x)
  if not nd.is_tensor(x) then error("Flatten: input must be a tensor, got " .. type(x), 2) end
  local n = x:ndim()
  if n == 2 then return x end
  if n < 1 then error("Flatten: expected at least a 1-d input", 2) end
  return x:reshape(x:shape()[1], -1)
end

---------------------------------------------------------------- Lambda
-- Lambda(fn): wraps a function (or the name of an mx.nd op, "tanh") as a block.
local Lambda = Block:extend("Lambda")
M.Lambda = Lambda
function Lambda:__init(fn)
  Block.__init(self)
  if type(fn) == "string" then
    local f = nd[fn]
    if type(f) ~= "function" then error("Lambda: mx.nd has no function '" .. fn .. "'", 3) end
    self._name = fn
    fn = f
  end
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn)
      and getmetatable(fn).__call) then
    error("Lambda: expected a function or an mx.nd op name, got " .. type(fn), 3)
  end
  self._fn = fn
end
function Lambda:forward(...) return self._fn(...) end
function Lambda:_repr_args() return self._name or "function" end
M.HybridLambda = Lambda

return M
