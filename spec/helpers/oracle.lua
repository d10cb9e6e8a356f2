-- spec/helpers/oracle.lua — compare an op's dispatched (optimised) kernel with its
-- reference kernel (mx.nd._ref.<op>, the test oracle) on the same inputs.
--
--   local oracle = require("helpers.oracle")
--   local x = oracle.rand(mx, {3, 4}, "float32", {-2, 2})      -- deterministic values
--   oracle.check(mx, "add", { x, y }, opts)                     -- asserts; returns result
--   oracle.close(got, want, rtol, atol)                         -- ok, message
--
-- Tolerances follow the dtype (exact for integers; one or two units in the last place
-- for floats; transcendental functions get a few ulps). NaN equals NaN here.
local ffi = require("ffi")

local M = {}

local RTOL = { float64 = 1e-12, float32 = 2e-6, float16 = 2e-3, bfloat16 = 1.6e-2 }

-- Deterministic pseudo-random values (xorshift32, independent of math.random's state).
local bit = require("bit")
local state = 12345
function M.seed(s) state = s ~= 0 and s or 1 end
local function unit()
  local x = state
  x = bit.bxor(x, bit.lshift(x, 13))
  x = bit.bxor(x, bit.rshift(x, 17))
  x = bit.bxor(x, bit.lshift(x, 5))
  state = x
  return (x % 4294967296) / 4294967296
end
M.unit = unit

local INT = { uint8 = true, int8 = true, int32 = true, int64 = true, bool = true }
M.is_int = function(dtype) return INT[dtype] == true end

-- A tensor of `shape` with values uniform in domain (default {-2, 2}); integer dtypes
-- get integers in [lo, hi] (default {-9, 9}, {0, 9} for uint8, {0, 1} for bool).
function M.rand(mx, shape, dtype, domain)
  dtype = dtype or "float32"
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  local lo, hi
  if INT[dtype] then
    lo, hi = -9, 9
    if dtype == "uint8" then lo = 0 end
    if dtype == "bool" then lo, hi = 0, 1 end
    if domain then lo, hi = domain[1], domain[2] end
  else
    lo, hi = -2, 2
    if domain then lo, hi = domain[1], domain[2] end
  end
  -- values go through a float64 buffer (no Lua tables: large inputs stay cheap)
  local buf = ffi.new("double[?]", n > 0 and n or 1)
  for i = 0, n - 1 do
    local u = unit()
    buf[i] = INT[dtype] and math.floor(lo + u * (hi - lo + 1)) or lo + u * (hi - lo)
  end
  local t = mx.nd.array(buf, { shape = shape, dtype = "float64" })
  if dtype == "float64" then return t end
  return mx.nd.array(t, { dtype = dtype })
end

-- The same values as a leading-axis view: base (3, ...shape) and its row 2.
function M.view_of(mx, t)
  local shape = t:shape()
  local bshape = { 3 }
  for i = 1, #shape do bshape[i + 1] = shape[i] end
  local base = mx.nd.zeros(bshape, { dtype = t:dtype() })
  base[2] = t
  return base[2], base
end

local function eq_nan(a, b) return (a ~= a and b ~= b) or a == b end

-- Compare two tensors elementwise: same shape and dtype, values within tolerance.
function M.close(got, want, rtol, atol)
  local gs, ws = table.concat(got:shape(), "x"), table.concat(want:shape(), "x")
  if gs ~= ws then return false, "shape " .. gs .. " vs " .. ws end
  if got:dtype() ~= want:dtype() then
    return false, "dtype " .. got:dtype() .. " vs " .. want:dtype()
  end
  local dt = got:dtype()
  rtol = rtol or RTOL[dt] or 0
  atol = atol or (INT[dt] and 0 or rtol)
  local n = got:size()
  -- values copied into buffers this function owns (no Lua tables: large tensors are cheap)
  local C = require("mx.core.lib").C
  local g, w = ffi.new("double[?]", n + 1), ffi.new("double[?]", n + 1)
  assert(C.mx_tensor_get_all_f64(got.h, g, n) == 0 and C.mx_tensor_get_all_f64(want.h, w, n) == 0)
  for i = 0, n - 1 do
    local a, b = g[i], w[i]
    if not eq_nan(a, b) then
      local bad = a ~= a or b ~= b or math.abs(a - b) > atol + rtol * math.abs(b)
      -- infinities must match exactly
      if math.abs(b) == math.huge or math.abs(a) == math.huge then bad = a ~= b end
      if bad then
        return false, string.format("element %d (of %d, shape %s, %s): got %.17g, want %.17g",
          i + 1, n, gs, dt, a, b)
      end
    end
  end
  return true
end

-- Run op through the dispatcher and through the reference kernel; assert they agree.
-- inputs: list of tensors (and/or numbers for binary ops); opts: the options table.
-- tol: {rtol=, atol=} overrides. Returns the dispatched result.
function M.check(mx, op, inputs, opts, tol)
  tol = tol or {}
  local args, n = {}, #inputs
  for i = 1, n do args[i] = inputs[i] end
  if opts then args[n + 1] = opts end
  local got = mx.nd[op](unpack(args, 1, n + 1))
  local want = mx.nd._ref[op](unpack(args, 1, n + 1))
  local ok, msg = M.close(got, want, tol.rtol, tol.atol)
  if not ok then
    local shapes = {}
    for i = 1, n do
      local v = inputs[i]
      shapes[i] = type(v) == "number" and tostring(v)
        or ("(" .. table.concat(v:shape(), ",") .. ") " .. v:dtype())
    end
    error(op .. " on " .. table.concat(shapes, ", ") .. ": " .. msg, 2)
  end
  return got
end

return M
