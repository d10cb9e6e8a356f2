-- gluon/nn/pool_layers.lua — MXNet's Gluon pooling layers: MaxPool1D/2D/3D,
-- AvgPool1D/2D/3D, GlobalMaxPool1D/2D/3D and GlobalAvgPool1D/2D/3D over the pooling op.
-- Constructors: MaxPool2D(pool_size, {strides=, padding=0, ceil_mode=false, layout="NCHW"})
-- where the first argument may be the pool size (a number or a list) or the options table
-- (pool_size= then among them); strides default to the pool size; ceil_mode selects
-- pooling_convention "full". AvgPool*D add count_include_pad=true; Global*Pool*D take
-- only {layout=}. gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local check_opts = require("mx.core.class").check_opts

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

local function is_size(v)
  return type(v) == "number" or (type(v) == "table" and type(v[1]) == "number")
end

local function tstr(t)
  if #t == 1 then return "(" .. t[1] .. ",)" end
  return "(" .. table.concat(t, ", ") .. ")"
end

local POOL_OPTS = { pool_size = true, strides = true, padding = true, ceil_mode = true,
  layout = true }
local AVG_OPTS = { pool_size = true, strides = true, padding = true, ceil_mode = true,
  layout = true, count_include_pad = true }
local GLOBAL_OPTS = { layout = true }

-- the shared constructor: n spatial dims, pool_type, global or not, average or not
local function init(self, cls, n, pool_type, global, a, b)
  HybridBlock.__init(self)
  local size, opts = a, b
  if not global and a ~= nil and not is_size(a) then size, opts = nil, a end
  if global then opts = a end
  local o = check_opts(cls, opts, global and GLOBAL_OPTS or
    (pool_type == "avg" and AVG_OPTS or POOL_OPTS), 4)
  if size ~= nil and o.pool_size ~= nil then
    error(cls .. ": pool_size given twice (argument and option)", 4)
  end
  local layout = o.layout or DEFAULT_LAYOUT[n]
  if not LAYOUTS[n][layout] then
    error(("%s: layout must be %s, got %s"):format(cls, n == 1 and "NCW or NWC" or
      n == 2 and "NCHW or NHWC" or "NCDHW or NDHWC", tostring(layout)), 4)
  end
  local k = global and tuple(cls, "pool_size", 1, n, 1, 4)
    or tuple(cls, "pool_size", size or o.pool_size or 2, n, 1, 4)
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
  function C:__init(a, b) init(self, cls, n, pool_type, global, a, b) end
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
