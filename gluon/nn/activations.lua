-- mx.gluon.nn activation layers: LeakyReLU, PReLU, ELU, SELU, GELU, Swish, SiLU,
-- HardSigmoid, HardSwish — MXNet's names, constructor arguments, defaults and parameter
-- names (PReLU's `alpha`), over the nn family's ops (leaky_relu, silu, gelu, ...).
-- Positional MXNet arguments first, then one options table with MXNet's keyword names.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local check_opts = require("mx.core.class").check_opts

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring = type, error, tostring
local leaky_relu, silu, gelu = nd.leaky_relu, nd.silu, nd.gelu
local hard_sigmoid, hard_swish = nd.hard_sigmoid, nd.hard_swish

local M = {}

local function need_tensor(name, x, level)
  if not nd.is_tensor(x) then
    error(name .. ": input must be a tensor, got " .. type(x), level + 1)
  end
end

local function number_arg(name, what, v, default, level)
  if v == nil then return default end
  if type(v) ~= "number" or v ~= v then
    error(name .. ": " .. what .. " must be a number, got " .. tostring(v), level + 1)
  end
  return v
end

local FLOAT = { float16 = true, bfloat16 = true, float32 = true, float64 = true }
-- leaky_relu returns (out, mask): the layers keep out, so their call is no tail call and
-- the op's own errors would blame this file; the input checks the op would make are made
-- here first, blaming the user's line (level: theirs, from the caller of this function).
local function check_input(cname, x, level)
  need_tensor(cname, x, level + 1)
  local dt = x:dtype()
  if not FLOAT[dt] then
    error(cname .. ": input has dtype " .. dt .. "; needs a float dtype", level + 1)
  end
  return dt
end

-- A layer running one op with fixed options: y = op(x, opts) (its first output).
local function simple(cname, fn)
  local cls = HybridBlock:extend(cname)
  if fn == leaky_relu then
    function cls:forward(x)
      check_input(cname, x, 2)
      local y = fn(x, self._opts)
      return y
    end
  else
    function cls:forward(x)
      need_tensor(cname, x, 2)
      return fn(x, self._opts) -- a tail call: the op's errors blame the user's line
    end
  end
  function cls:__init() -- no options (the classes that take some define their own)
    Block.__init(self)
    self._opts = nil
  end
  return cls
end

---------------------------------------------------------------- LeakyReLU
-- LeakyReLU(alpha): x > 0 ? x : alpha*x (alpha >= 0; MXNet's required argument).
local LeakyReLU = simple("LeakyReLU", leaky_relu)
M.LeakyReLU = LeakyReLU
function LeakyReLU:__init(alpha)
  Block.__init(self)
  if type(alpha) ~= "number" or alpha ~= alpha or alpha < 0 then
    error("LeakyReLU: alpha must be a number >= 0, got " .. tostring(alpha), 3)
  end
  self._alpha = alpha
  self._opts = { act_type = "leaky", slope = alpha }
end
function LeakyReLU:_repr_args() return tostring(self._alpha) end

---------------------------------------------------------------- PReLU
-- PReLU({alpha_initializer=Constant(0.25), in_channels=1}): a learned negative slope,
-- the parameter `alpha` of shape (in_channels), per channel along axis 2 (MXNet's axis 1)
-- or one for all when in_channels = 1.
local PReLU = HybridBlock:extend("PReLU")
M.PReLU = PReLU
function PReLU:__init(opts)
  Block.__init(self)
  local o = check_opts("PReLU", opts, { alpha_initializer = true, in_channels = true }, 3)
  local c = o.in_channels or 1
  if type(c) ~= "number" or c < 1 or c % 1 ~= 0 then
    error("PReLU: in_channels must be a positive integer, got " .. tostring(c), 3)
  end
  self._in_channels = c
  local init = o.alpha_initializer
  if init == nil then init = initializer.Constant(0.25)
  elseif type(init) == "number" then init = initializer.Constant(init)
  else init = initializer.create(init) end
  self.alpha = Parameter("alpha", { shape = { c }, init = init })
  self._opts = { act_type = "prelu" }
end
function PReLU:forward(x)
  local dt = check_input("PReLU", x, 2)
  local c = self._in_channels
  if c > 1 then
    local s = x:shape()
    if #s < 2 or s[2] ~= c then
      error(string.format("PReLU: input has %s channels (axis 2), the layer in_channels = %d",
        tostring(s[2]), c), 2)
    end
  end
  -- a float64/float16 input: alpha is cast to it (the gradient flows back through the cast)
  local a = self.alpha:data()
  if a:dtype() ~= dt then a = a:astype(dt) end
  local y = leaky_relu(x, a, self._opts)
  return y
end
function PReLU:_repr_args()
  return self._in_channels > 1 and ("in_channels = " .. self._in_channels) or ""
end

---------------------------------------------------------------- ELU, SELU, GELU
-- ELU(alpha=1): x > 0 ? x : alpha*(e^x - 1).
local ELU = simple("ELU", leaky_relu)
M.ELU = ELU
function ELU:__init(alpha)
  Block.__init(self)
  self._alpha = number_arg("ELU", "alpha", alpha, 1.0, 3)
  self._opts = { act_type = "elu", slope = self._alpha }
end
function ELU:_repr_args() return self._alpha ~= 1 and tostring(self._alpha) or "" end

-- SELU(): lambda*(x > 0 ? x : alpha*(e^x - 1)) with SELU's fixed constants.
local SELU = simple("SELU", leaky_relu)
M.SELU = SELU
function SELU:__init()
  Block.__init(self)
  self._opts = { act_type = "selu" }
end

-- GELU({approximation="erf"|"tanh"}) (MXNet 2.0's argument; 1.9's GELU is the erf form).
local GELU = simple("GELU", gelu)
M.GELU = GELU
function GELU:__init(opts)
  Block.__init(self)
  local o = check_opts("GELU", opts, { approximation = true }, 3)
  local a = o.approximation or "erf"
  if a ~= "erf" and a ~= "tanh" then
    error("GELU: approximation must be 'erf' or 'tanh', got " .. tostring(a), 3)
  end
  self._approximation = a
  self._opts = { approximation = a }
end
function GELU:_repr_args() return self._approximation == "tanh" and "approximation = tanh" or "" end

---------------------------------------------------------------- Swish, SiLU
-- Swish(beta=1): x * sigmoid(beta*x). SiLU(): Swish with beta 1.
local Swish = simple("Swish", silu)
M.Swish = Swish
function Swish:__init(beta)
  Block.__init(self)
  self._beta = number_arg("Swish", "beta", beta, 1.0, 3)
  self._opts = { beta = self._beta }
end
function Swish:_repr_args() return self._beta ~= 1 and tostring(self._beta) or "" end

M.SiLU = simple("SiLU", silu)

---------------------------------------------------------------- HardSigmoid, HardSwish
-- HardSigmoid(): max(0, min(1, 0.2x + 0.5)) (MXNet's hard_sigmoid defaults);
-- HardSwish(): x * relu6(x + 3) / 6.
M.HardSigmoid = simple("HardSigmoid", hard_sigmoid)
M.HardSwish = simple("HardSwish", hard_swish)

return M
