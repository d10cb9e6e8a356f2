-- gluon/nn/pool_layers.lua — MXNet's Gluon pooling layers: MaxPool1D/2D/3D,
-- AvgPool1D/2D/3D, GlobalMaxPool1D/2D/3D and GlobalAvgPool1D/2D/3D over the pooling op.
-- Constructors take MXNet 1.9's arguments positionally in its order or by name:
-- MaxPool2D(pool_size=2, strides=pool_size, padding=0, layout="NCHW", ceil_mode=false)
-- (MaxPool3D and the AvgPools: ceil_mode before layout; AvgPool*D add
-- count_include_pad=true); ceil_mode selects pooling_convention "full"; Global*Pool*D take
-- only layout. gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local block = require("mx.gluon.block")

local HybridBlock = block.HybridBlock
local type, error, tostring = type, error, tostring
local pooling = nd.pooling

local M = {}

local LAYOUTS = { { NCW = true, NWC = true }, { NCHW = true, NHWC = true },
  { NCDHW = true, NDHWC = true } }
local DEFAULT_LAYOUT = { "NCW", "NCHW", "NCDHW" }

-- a number or a list of n positive integers as a list of n
local function tuple(cls, what, v, n, min, level)
  local t = v
  if type(v) == "number" then
    t = {}
    for i = 1, n do t[i] = v end
  end
  if type(t) ~= "table" or #t ~= n then
    error(("%s: %s must be a number or a list of %d numbers, got %s"):format(cls, what, n,
      type(v) == "table" and ("a list of " .. #v) or tostring(v)), level + 1)
  end
  local out = {}
  for i = 1, n do
    local x = t[i]
    if type(x) ~= "number" or x % 1 ~= 0 or x < min then
      error(("%s: %s values must be integers >= %d, got %s"):format(cls, what, min, tostring(x)),
        level + 1)
    end
    out[i] = x
  end
  return out
end

local function tstr(t)
  if #t == 1 then return "(" .. t[1] .. ",)" end
  return "(" .. table.concat(t, ", ") .. ")"
end

-- MXNet 1.9's parameter orders (they differ: MaxPool1D/2D put layout before ceil_mode,
-- MaxPool3D and the AvgPools after it)
local MAX_LC = { "pool_size", "strides", "padding", "layout", "ceil_mode" }
local MAX_CL = { "pool_size", "strides", "padding", "ceil_mode", "layout" }
local AVG_LC = { "pool_size", "strides", "padding", "layout", "ceil_mode", "count_include_pad" }
local AVG_CL = { "pool_size", "strides", "padding", "ceil_mode", "layout", "count_include_pad" }
local GLOBAL = { "layout" }
local function params_of(n, pool_type, global)
  if global then return GLOBAL end
  if pool_type == "avg" then return n == 1 and AVG_LC or AVG_CL end
  return n == 3 and MAX_CL or MAX_LC
end

-- the shared constructor: n spatial dims, pool_type, global or not; o: the arguments
local function init(self, cls, n, pool_type, global, o)
  HybridBlock.__init(self)
  local size = o.pool_size
  local layout = o.layout or DEFAULT_LAYOUT[n]
  if not LAYOUTS[n][layout] then
    error(("%s: layout must be %s, got %s"):format(cls, n == 1 and "NCW or NWC" or
      n == 2 and "NCHW or NHWC" or "NCDHW or NDHWC", tostring(layout)), 4)
  end
  local k = global and tuple(cls, "pool_size", 1, n, 1, 4)
    or tuple(cls, "pool_size", size or 2, n, 1, 4)
  local s = (global or o.strides == nil) and k or tuple(cls, "strides", o.strides, n, 1, 4)
  local p = global and tuple(cls, "padding", 0, n, 0, 4)
    or tuple(cls, "padding", o.padding or 0, n, 0, 4)
  local ceil = o.ceil_mode == true
  self._kwargs = { kernel = k, stride = s, pad = p, global_pool = global, pool_type = pool_type,
    pooling_convention = ceil and "full" or "valid", layout = layout }
  if pool_type == "avg" then
    self._kwargs.count_include_pad = o.count_include_pad ~= false
  end
  self._ceil, self._cls, self._ndim = ceil, cls, n + 2
end

local FLOAT = { float16 = true, float32 = true, float64 = true, bfloat16 = true }
local function forward(self, x)
  if not nd.is_tensor(x) then
    error(self._cls .. ": input must be a tensor, got " .. type(x), 2)
  end
  if x:ndim() ~= self._ndim then
    error(("%s: expected a %d-d input (%s), got shape (%s)"):format(self._cls, self._ndim,
      self._kwargs.layout, table.concat(x:shape(), ", ")), 2)
  end
  if not FLOAT[x:dtype()] then
    error(self._cls .. ": input must be a floating-point tensor, got " .. x:dtype(), 2)
  end
  return pooling(x, self._kwargs) -- a tail call: the op's errors blame the user's line
end

-- MXNet's repr: MaxPool2D(size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False,
-- global_pool=False, pool_type=max, layout=NCHW)
local function repr_args(self)
  local k = self._kwargs
  return ("size=%s, stride=%s, padding=%s, ceil_mode=%s, global_pool=%s, pool_type=%s, "
    .. "layout=%s"):format(tstr(k.kernel), tstr(k.stride), tstr(k.pad),
    self._ceil and "True" or "False", k.global_pool and "True" or "False", k.pool_type,
    k.layout)
end

local function define(cls, n, pool_type, global)
  local C = HybridBlock:extend(cls)
  local SIG = block.sig(C, params_of(n, pool_type, global))
  function C:__init(...) init(self, cls, n, pool_type, global, SIG(3, ...)) end
  C.forward = forward
  C._repr_args = repr_args
  M[cls] = C
end

for n = 1, 3 do
  define("MaxPool" .. n .. "D", n, "max", false)
  define("AvgPool" .. n .. "D", n, "avg", false)
  define("GlobalMaxPool" .. n .. "D", n, "max", true)
  define("GlobalAvgPool" .. n .. "D", n, "avg", true)
end

return M
