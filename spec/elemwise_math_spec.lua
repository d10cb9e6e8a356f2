-- spec/elemwise_math_spec.lua — the elementwise math library beyond the basic ops: the
-- special, trigonometric and hyperbolic unary functions, rounding (rint, fix), erfinv,
-- gamma/gammaln/digamma/trigamma, nan_to_num; mod, hypot, arctan2, ldexp, the logical ops,
-- add_n, smooth_l1 and broadcast_like's axes; and MXNet's semantics where they differ
-- from NumPy (integer wrap-around, NaN through relu, where's row rule). The cpu kernels
-- against the reference kernels over shapes and dtypes, values computed in Lua.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("elemwise_math_spec.lua")

local rand, check = oracle.rand, oracle.check
local function vals(t) return t:tolist() end
local function arr(t, dtype) return mx.nd.array(t, { dtype = dtype }) end

local SHAPES = { {}, { 1 }, { 7 }, { 3, 4 }, { 2, 0, 3 }, { 2, 3, 5 }, { 140001 } }
local FLOATS = { "float32", "float64", "float16", "bfloat16" }
local INTS = { "int32", "int64", "int8", "uint8" }

-- cpu against the reference for a unary op over SHAPES x FLOATS (the big shape in float32
-- only), the integer dtypes (dom clipped to integers, uint8 from 0) and a view: the one
-- sweep the special and hyperbolic unary ops share
local function unary_vs_ref(name, dom)
  for _, shape in ipairs(SHAPES) do
    for _, dt in ipairs(FLOATS) do
      if #shape < 1 or shape[1] ~= 140001 or dt == "float32" then
        check(mx, name, { rand(mx, shape, dt, dom) })
      end
    end
  end
  for _, dt in ipairs(INTS) do
    local d = dom and { math.ceil(dom[1]), math.floor(dom[2]) } or nil
    if dt == "uint8" and d and d[1] < 0 then d[1] = 0 end
    check(mx, name, { rand(mx, { 5, 3 }, dt, d) })
  end
  check(mx, name, { (oracle.view_of(mx, rand(mx, { 4, 5 }, "float32", dom))) })
end

-- the special and hyperbolic unary ops: cpu against the reference over shapes and
-- dtypes, values from Lua's own math (independent of the kernels), MXNet's 0/1 predicates
local SPECIAL_UNARY = {
  { "tan", { -1.5, 1.5 } }, { "arcsin", { -1, 1 } }, { "arccos", { -1, 1 } },
  { "arctan", { -10, 10 } }, { "sinh", { -5, 5 } }, { "cosh", { -5, 5 } },
  { "arcsinh", { -10, 10 } }, { "arccosh", { 1, 10 } }, { "arctanh", { -0.99, 0.99 } },
  { "degrees", { -7, 7 } }, { "radians", { -400, 400 } }, { "log2", { 0.01, 100 } },
  { "log10", { 0.01, 100 } }, { "cbrt", { -30, 30 } }, { "rcbrt", { 0.1, 30 } },
  { "isnan" }, { "isinf" }, { "isfinite" },
}
describe("elementwise unary ops: special functions and hyperbolics", function()
  for _, u in ipairs(SPECIAL_UNARY) do
    local name, dom = u[1], u[2]
    it(name .. " matches the reference over shapes and dtypes", function()
      unary_vs_ref(name, dom)
    end)
  end

  it("computes the values of the math library", function()
    local x = { -0.9, -0.5, 0.25, 0.75 }
    local t = arr(x, "float64")
    local function near(got, f, xs)
      local g = vals(got)
      for i = 1, #xs do
        local w = f(xs[i])
        assert.is_true(math.abs(g[i] - w) <= 1e-12 * (1 + math.abs(w)), i)
      end
    end
    local function atanh(v) return 0.5 * math.log((1 + v) / (1 - v)) end
    near(mx.nd.tan(t), math.tan, x)
    near(mx.nd.arcsin(t), math.asin, x)
    near(mx.nd.arccos(t), math.acos, x)
    near(mx.nd.arctan(t), math.atan, x)
    near(mx.nd.sinh(t), math.sinh, x)
    near(mx.nd.cosh(t), math.cosh, x)
    near(mx.nd.arcsinh(t), function(v) return math.log(v + math.sqrt(v * v + 1)) end, x)
    near(mx.nd.arctanh(t), atanh, x)
    near(mx.nd.degrees(t), function(v) return v * 180 / math.pi end, x)
    near(mx.nd.radians(t), function(v) return v * math.pi / 180 end, x)
    local p = { 1.5, 2, 8, 1000 }
    local tp = arr(p, "float64")
    near(mx.nd.arccosh(tp), function(v) return math.log(v + math.sqrt(v * v - 1)) end, p)
    near(mx.nd.log2(tp), function(v) return math.log(v) / math.log(2) end, p)
    near(mx.nd.log10(tp), math.log10, p)
    local c = { -8, 0, 27 }
    near(mx.nd.cbrt(arr(c, "float64")), function(v) return v < 0 and -(-v) ^ (1 / 3) or v ^ (1 / 3) end, c)
    near(mx.nd.rcbrt(arr({ 8, -27 }, "float64")), function(v)
      return v < 0 and -1 / (-v) ^ (1 / 3) or 1 / v ^ (1 / 3)
    end, { 8, -27 })
    -- outside the domain: NaN, as libm (MXNet)
    local bad = vals(mx.nd.arcsin(arr({ 2 }, "float64")))[1]
    assert.is_true(bad ~= bad)
  end)

  it("isnan / isinf / isfinite give 1 or 0 in the input dtype, integers never NaN or inf", function()
    local inf, nan = math.huge, 0 / 0
    for _, dt in ipairs(FLOATS) do
      local t = arr({ 1, nan, inf, -inf, 0 }, dt)
      local r = mx.nd.isnan(t)
      assert.equal(dt, r:dtype())
      assert.same({ 0, 1, 0, 0, 0 }, vals(r))
      assert.same({ 0, 0, 1, 1, 0 }, vals(mx.nd.isinf(t)))
      assert.same({ 1, 0, 0, 0, 1 }, vals(mx.nd.isfinite(t)))
    end
    local i = arr({ 3, -1 }, "int32")
    assert.equal("int32", mx.nd.isfinite(i):dtype())
    assert.same({ 0, 0 }, vals(mx.nd.isnan(i)))
    assert.same({ 1, 1 }, vals(mx.nd.isfinite(i)))
  end)

  it("the predicates have no gradient: backward through them gives zeros", function()
    local x = arr({ 1, 2 }, "float64")
    x:attach_grad()
    local y = mx.autograd.record(function() return mx.nd.isfinite(x) * x end)
    y:backward()
    assert.same({ 1, 1 }, vals(x:grad()))
  end)

  it("MXNet's names reach the ops", function()
    local C = require("mx.core.lib").C
    for _, n in ipairs { "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh",
      "arctanh", "degrees", "radians", "log2", "log10", "cbrt", "rcbrt" } do
      assert.is_true(C.mx_op_find(n) >= 0, n)
    end
  end)
end)


-- MXNet's semantics where luamx used to differ
describe("MXNet semantics: integer wrap-around, NaN through relu, where's row rule", function()
  local nd = mx.nd
  local KERNELS = { { "cpu", nd }, { "ref", nd._ref } }
  -- the expected wrapped value, computed in Lua (not by the kernels): v (an exact int64
  -- cdata, or a number) mod 2^bits, signed for int8/int32
  local BITS = { uint8 = { 8, false }, int8 = { 8, true }, int32 = { 32, true } }
  local function wrap(v, dt)
    local b, signed = BITS[dt][1], BITS[dt][2]
    local m = 2LL ^ b
    v = (0LL + v) % m
    if v < 0 then v = v + m end
    if signed and v >= m / 2 then v = v - m end
    return tonumber(v)
  end

  it("uint8 250 + 6 is 0 and 3 - 5 is 254 (wrap, as MXNet and NumPy)", function()
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      local a, b = arr({ 250, 3, 200 }, "uint8"), arr({ 6, 5, 100 }, "uint8")
      assert.same({ 0, 8, 44 }, vals(ns.add(a, b)), k[1])
      assert.same({ 244, 254, 100 }, vals(ns.sub(a, b)), k[1])
      assert.same({ 220, 15, 32 }, vals(ns.mul(a, b)), k[1])
      assert.same({ 0, 9, 206 }, vals(ns.add_scalar(a, { scalar = 6 })), k[1])
      assert.same({ 254, 7, 204 }, vals(ns.sub_scalar(a, { scalar = 252 })), k[1])
      assert.same({ 6, 253, 56 }, vals(ns.rsub_scalar(a, { scalar = 0 })), k[1])
      assert.same({ 244, 6, 144 }, vals(ns.mul_scalar(a, { scalar = 2 })), k[1])
      -- a scalar beyond the dtype's range wraps the same way (250 + 300 = 550 mod 256)
      assert.same({ 38, 47, 244 }, vals(ns.add_scalar(a, { scalar = 300 })), k[1])
    end
  end)

  it("int8 / int32 / uint8 add, sub, mul wrap modulo 2^bits over shapes and broadcasting", function()
    local cases = { int8 = { -128, -100, -1, 0, 1, 77, 127 }, uint8 = { 0, 1, 17, 128, 200, 255 },
      int32 = { -2147483648, -65536, -1, 0, 1, 65537, 2147483647 } }
    for dt, xs in pairs(cases) do
      local n = #xs
      -- every pair, as a (n, 1) against (1, n) broadcast and as flat operands
      local col, row, flat_a, flat_b = {}, {}, {}, {}
      for i = 1, n do col[i] = { xs[i] } end
      row[1] = xs
      for i = 1, n do for j = 1, n do flat_a[#flat_a + 1] = xs[i]; flat_b[#flat_b + 1] = xs[j] end end
      local ops = { add = function(p, q) return p + q end, sub = function(p, q) return p - q end,
        mul = function(p, q) return (0LL + p) * q end }
      for name, f in pairs(ops) do
        local want = {}
        for i = 1, #flat_a do want[i] = wrap(f(flat_a[i], flat_b[i]), dt) end
        for _, k in ipairs(KERNELS) do
          local ns = k[2]
          local tag = k[1] .. " " .. dt .. " " .. name
          assert.same(want, vals(ns[name](arr(flat_a, dt), arr(flat_b, dt))), tag)
          local r = ns[name](arr(col, dt), arr(row, dt))
          assert.same(want, vals(r:reshape({ n * n })), k[1] .. " bcast " .. dt .. " " .. name)
          local sc = {}
          for i = 1, n do sc[i] = wrap(f(xs[i], 3), dt) end
          assert.same(sc, vals(ns[name .. "_scalar"](arr(xs, dt), { scalar = 3 })), k[1] .. " scalar " .. dt)
        end
      end
      -- the parallel path (large), cpu against the ref
      check(mx, "add", { rand(mx, { 140001 }, dt), rand(mx, { 140001 }, dt) })
      check(mx, "mul", { rand(mx, { 140001 }, dt), rand(mx, { 140001 }, dt) })
      check(mx, "sub_scalar", { rand(mx, { 140001 }, dt) }, { scalar = 100 })
    end
  end)

  it("integer division by zero stays 0, a non-integral scalar and cast still saturate", function()
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      local a = arr({ 7, 250 }, "uint8")
      assert.same({ 0, 0 }, vals(ns.div(a, arr({ 0, 0 }, "uint8"))), k[1])
      assert.same({ 0, 0 }, vals(ns.div_scalar(a, { scalar = 0 })), k[1])
      assert.same({ 13, 255 }, vals(ns.add_scalar(a, { scalar = 6.5 })), k[1]) -- double, truncated
    end
    assert.same({ 255, 0, 127, -128 }, { vals(arr({ 300, -5 }):astype("uint8"))[1],
      vals(arr({ 300, -5 }):astype("uint8"))[2], vals(arr({ 300 }):astype("int8"))[1],
      vals(arr({ -300 }):astype("int8"))[1] })
  end)

  it("relu and relu_backward propagate NaN (both kernels, vector and broadcast paths)", function()
    local nan, inf = 0 / 0, math.huge
    local function isnan(v) return v ~= v end
    for _, dt in ipairs({ "float32", "float64" }) do
      -- 19 elements: the 8-wide AVX loop and its tail both see NaNs
      local xs, gs = {}, {}
      for i = 1, 19 do
        xs[i] = ({ nan, -1, 0, 2, inf, -inf })[(i - 1) % 6 + 1]
        gs[i] = 0.5 * i
      end
      for _, k in ipairs(KERNELS) do
        local ns = k[2]
        local r = vals(ns.relu(arr(xs, dt)))
        local g = vals(ns.relu_backward(arr(gs, dt), arr(xs, dt)))
        for i = 1, 19 do
          local x = xs[i]
          if isnan(x) then
            assert.is_true(isnan(r[i]) and isnan(g[i]), k[1] .. " " .. dt .. " at " .. i)
          else
            assert.equal(x > 0 and x or 0, r[i], k[1] .. " relu " .. i)
            assert.equal(x > 0 and gs[i] or 0, g[i], k[1] .. " relu_backward " .. i)
          end
        end
        -- one-element operands (the broadcast loops)
        local g1 = vals(ns.relu_backward(arr({ 2 }, dt), arr(xs, dt)))
        assert.is_true(isnan(g1[1]) and g1[2] == 0 and g1[4] == 2, k[1])
        local g2 = vals(ns.relu_backward(arr(gs, dt), arr({ nan }, dt)))
        assert.is_true(isnan(g2[1]) and isnan(g2[19]), k[1])
        -- maximum / minimum: NaN on either side
        for _, op in ipairs({ "maximum", "minimum" }) do
          local m = vals(ns[op](arr({ nan, 1, nan, inf }, dt), arr({ 1, nan, nan, -inf }, dt)))
          assert.is_true(isnan(m[1]) and isnan(m[2]) and isnan(m[3]), k[1] .. " " .. op)
          assert.equal(op == "maximum" and inf or -inf, m[4])
        end
      end
      local big = {}
      for i = 1, 140001 do big[i] = xs[(i - 1) % 19 + 1] end
      check(mx, "relu_backward", { rand(mx, { 140001 }, dt), arr(big, dt) })
      check(mx, "relu", { arr(big, dt) })
    end
    -- through autograd: the gradient of relu at NaN is NaN
    local x = arr({ nan, 1, -1 })
    x:attach_grad()
    mx.autograd.record(function() local y = nd.relu(x) y:backward() end)
    local gx = vals(x:grad())
    assert.is_true(isnan(gx[1]))
    assert.same({ 1, 0 }, { gx[2], gx[3] })
  end)

  it("where with a 1-D condition of x's first dim picks rows (MXNet)", function()
    local x = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
    local y = arr({ { 10, 20, 30 }, { 40, 50, 60 } })
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      assert.same({ { 1, 2, 3 }, { 40, 50, 60 } }, ns.where(arr({ 1, 0 }), x, y):totable(), k[1])
      assert.same({ { 10, 20, 30 }, { 4, 5, 6 } }, ns.where(arr({ 0, 1 }, "bool"), x, y):totable(), k[1])
      -- 3-D: whole (3, 2) slabs
      local x3, y3 = nd.ones({ 3, 3, 2 }), nd.zeros({ 3, 3, 2 })
      local r = ns.where(arr({ 0, 5, 0 }, "int32"), x3, y3):totable()
      for i = 1, 3 do
        for j = 1, 3 do
          assert.same(i == 2 and { 1, 1 } or { 0, 0 }, r[i][j], k[1])
        end
      end
    end
    check(mx, "where", { rand(mx, { 400 }, "int32", { 0, 1 }), rand(mx, { 400, 401 }),
      rand(mx, { 400, 401 }) })
    -- the gradient follows the rows
    local a, b = arr({ { 1, 2 }, { 3, 4 } }), arr({ { 5, 6 }, { 7, 8 } })
    a:attach_grad()
    b:attach_grad()
    mx.autograd.record(function() local q = nd.where(arr({ 1, 0 }), a, b):sum() q:backward() end)
    assert.same({ { 1, 1 }, { 0, 0 } }, a:grad():totable())
    assert.same({ { 0, 0 }, { 1, 1 } }, b:grad():totable())
  end)

  it("where rejects the shapes MXNet rejects, naming them at the caller's line", function()
    local x, y = arr({ { 1, 2, 3 }, { 4, 5, 6 } }), arr({ { 0, 0, 0 }, { 0, 0, 0 } })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local q = nd.where(arr({ 1, 0, 1 }), x, y) return q end, line)
    assert.is_truthy(msg:find("condition of shape (3,)", 1, true) and msg:find("(2, 3)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local q = nd.where(arr({ { 1, 0, 1 } }), x, y) return q end, line)
    assert.is_truthy(msg:find("condition of shape (1, 3)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local q = nd.where(arr({ 1, 0 }), x, arr({ 1, 2, 3 })) return q end, line)
    assert.is_truthy(msg:find("same shape", 1, true) and msg:find("(3,)", 1, true), msg)
    for _, ns in ipairs({ nd, nd._ref }) do
      assert.is_false(pcall(ns.where, arr({ 1, 0 }), arr({ 1, 2 }), arr({ 1 })))
    end
  end)
end)

describe("binary and n-ary ops: mod, hypot, arctan2, ldexp, logical_*, add_n, smooth_l1", function()
  local nd = mx.nd
  local KERNELS = { { "cpu", nd }, { "ref", nd._ref } }
  local I64 = require("helpers.i64")
  local BIN = { { "mod" }, { "hypot" }, { "arctan2" }, { "ldexp", nil, { -4, 4 } },
    { "logical_and", { -1, 1 }, { -1, 1 } }, { "logical_or", { -1, 1 }, { -1, 1 } },
    { "logical_xor", { -1, 1 }, { -1, 1 } } }
  local BPAIRS = { { { 3, 4 }, { 3, 4 } }, { { 3, 4 }, { 4 } }, { { 2, 1, 3 }, { 4, 1 } },
    { {}, { 2, 2 } }, { { 2, 0 }, { 2, 1 } }, { { 400, 401 }, { 401 } } }
  -- Lua's % takes the divisor's sign (Python's rule, MXNet's mod); MXNet gives 0 for b == 0
  local function lmod(a, b) if b == 0 then return 0 end return a % b end

  for _, c in ipairs(BIN) do
    local name, da, db = c[1], c[2], c[3]
    it(name .. " matches the reference over shapes, broadcasting and dtypes", function()
      for _, pr in ipairs(BPAIRS) do
        for _, dt in ipairs(FLOATS) do
          if pr[1][1] ~= 400 or dt == "float32" then
            check(mx, name, { rand(mx, pr[1], dt, da), rand(mx, pr[2], dt, db) })
          end
        end
      end
      for _, dt in ipairs(INTS) do
        check(mx, name, { rand(mx, { 5, 3 }, dt, da), rand(mx, { 3 }, dt, db) })
      end
      local v = oracle.view_of(mx, rand(mx, { 4, 5 }, "float32", da))
      check(mx, name, { v, rand(mx, { 5 }, "float32", db) })
    end)
  end

  it("computes values independently of the kernels (mod takes the divisor's sign)", function()
    local A = { -7, -3.5, 3, 7, 5, 0, 2.5, -1 }
    local B = { 3, -2, -2, -2.5, 0, 4, 1.5, 0.5 }
    local function each(f) local r = {} for i = 1, #A do r[i] = f(A[i], B[i]) end return r end
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      for _, dt in ipairs({ "float64", "float32" }) do
        local a, b = arr(A, dt), arr(B, dt)
        local tol = dt == "float32" and 1e-6 or 1e-12
        local function near(got, want)
          for i = 1, #want do
            assert.is_true(math.abs(got[i] - want[i]) <= tol * (1 + math.abs(want[i])),
              k[1] .. " " .. dt .. " " .. i .. ": " .. got[i] .. " vs " .. want[i])
          end
        end
        near(vals(ns.mod(a, b)), each(lmod))
        near(vals(ns.hypot(a, b)), each(function(x, y) return math.sqrt(x * x + y * y) end))
        near(vals(ns.arctan2(a, b)), each(math.atan2))
        near(vals(ns.ldexp(a, b)), each(function(x, y) return x * 2 ^ y end))
        near(vals(ns.logical_and(a, b)), each(function(x, y) return (x ~= 0 and y ~= 0) and 1 or 0 end))
        near(vals(ns.logical_or(a, b)), each(function(x, y) return (x ~= 0 or y ~= 0) and 1 or 0 end))
        near(vals(ns.logical_xor(a, b)), each(function(x, y) return ((x ~= 0) ~= (y ~= 0)) and 1 or 0 end))
        -- the scalar forms, through the Lua-number operand
        near(vals(ns.mod(a, 2.5)), each(function(x) return lmod(x, 2.5) end))
        near(vals(ns.mod(a, -2.5)), each(function(x) return lmod(x, -2.5) end))
        near(vals(ns.mod(4, b)), each(function(_, y) return lmod(4, y) end))
        near(vals(ns.hypot(a, 1.5)), each(function(x) return math.sqrt(x * x + 2.25) end))
        near(vals(ns.hypot(1.5, a)), each(function(x) return math.sqrt(x * x + 2.25) end))
        for _, sv in ipairs({ 0, -2 }) do
          near(vals(ns.logical_and(a, sv)), each(function(x) return (x ~= 0 and sv ~= 0) and 1 or 0 end))
          near(vals(ns.logical_or(sv, a)), each(function(x) return (x ~= 0 or sv ~= 0) and 1 or 0 end))
          near(vals(ns.logical_xor(a, sv)), each(function(x) return ((x ~= 0) ~= (sv ~= 0)) and 1 or 0 end))
        end
      end
      -- integers: the divisor's sign; by zero gives 0 (no trap), int64 exact beyond 2^53
      local ia, ib = arr({ -7, 7, -7, 7, 5, -128 }, "int32"), arr({ 3, -3, -3, 3, 0, -1 }, "int32")
      assert.same({ 2, -2, -1, 1, 0, 0 }, vals(ns.mod(ia, ib)), k[1])
      assert.same({ 2, -2, -1, 1, 0, 0 }, vals(ns.mod(arr(vals(ia), "int8"), arr(vals(ib), "int8"))), k[1])
      -- 2^62 + 1 mod 7 is 5 (2^3 = 8 is 1 mod 7, so 2^62 = 2^2 mod 7); through a double
      -- (2^62) it would be 4
      local big = 4611686018427387905LL
      local x, y = I64.mk({ big, -big, big }), I64.mk({ 7LL, 7LL, -1LL })
      I64.same({ 5LL, 2LL, 0LL }, I64.rd(ns.mod(x, y)), k[1] .. " int64 mod")
      I64.same({ 5LL, 2LL, 5LL }, I64.rd(ns.mod_scalar(x, { scalar = 7 })), k[1] .. " int64 mod_scalar")
      I64.same({ -2LL, -5LL, -2LL }, I64.rd(ns.mod_scalar(x, { scalar = -7 })), k[1] .. " int64 mod -7")
    end
  end)

  it("keeps MXNet's dtypes: logical ops in the promoted dtype, arctan2/ldexp of ints float32", function()
    local i32, f64 = arr({ 1, 0, 2 }, "int32"), arr({ 0, 0, 3 }, "float64")
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      assert.equal("float64", ns.logical_and(i32, f64):dtype())
      assert.same({ 0, 0, 1 }, vals(ns.logical_and(i32, f64)))
      assert.equal("int32", ns.logical_xor(i32, i32):dtype())
      assert.equal("float32", ns.arctan2(i32, i32):dtype())
      assert.equal("float32", ns.ldexp(i32, i32):dtype())
      assert.same({ 2, 0, 8 }, vals(ns.ldexp(i32, i32)))
      assert.equal("int32", ns.mod(i32, i32):dtype())
    end
  end)

  it("smooth_l1 is MXNet's formula with sigma = scalar, and matches the reference", function()
    local X = { -7, -3, -0.1, 0, 0.2, 1, 4.5 }
    for _, k in ipairs(KERNELS) do
      for _, sigma in ipairs({ 0.5, 1, 2 }) do
        local s2 = sigma * sigma
        local got = vals(k[2].smooth_l1(arr(X, "float64"), { scalar = sigma }))
        for i, v in ipairs(X) do
          local want = math.abs(v) < 1 / s2 and 0.5 * s2 * v * v or math.abs(v) - 0.5 / s2
          assert.is_true(math.abs(got[i] - want) < 1e-12, k[1] .. " sigma " .. sigma .. " " .. v)
        end
      end
    end
    for _, dt in ipairs(FLOATS) do
      check(mx, "smooth_l1", { rand(mx, { 3, 4 }, dt, { -3, 3 }) }, { scalar = 1.5 })
    end
    check(mx, "smooth_l1", { rand(mx, { 140001 }, "float32", { -3, 3 }) }, { scalar = 0.7 })
    check(mx, "mod_scalar", { rand(mx, { 140001 }, "float32", { -9, 9 }) }, { scalar = -1.5 })
    check(mx, "rmod_scalar", { rand(mx, { 3, 4 }, "float16", { 0.5, 3 }) }, { scalar = 2 })
    check(mx, "hypot_scalar", { rand(mx, { 3, 4 }, "int32") }, { scalar = 2 })
    check(mx, "logical_xor_scalar", { rand(mx, { 140001 }, "float32", { -1, 1 }) }, { scalar = 3 })
    check(mx, "logical_or_scalar", { rand(mx, { 3, 4 }, "uint8", { 0, 1 }) }, { scalar = 0 })
    check(mx, "logical_and_scalar", { rand(mx, { 3, 4 }, "float64", { -1, 1 }) }, { scalar = -0.5 })
  end)

  it("add_n sums same-shaped tensors, promotes dtypes, wraps integers, names a bad shape", function()
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      local a, b = arr({ 1, 2, 3 }, "float64"), arr({ 10, 20, 30 }, "float64")
      local c = arr({ 0.5, 0, -1 }, "float64")
      assert.same({ 11.5, 22, 32 }, vals(ns.add_n({ a, b, c })), k[1])
      assert.same({ 1, 2, 3 }, vals(ns.add_n({ a })), k[1])
      local r = ns.add_n({ arr({ 1, 2, 3 }, "int32"), arr({ 0.5, 0.5, 0.5 }, "float32") })
      assert.equal("float32", r:dtype())
      assert.same({ 1.5, 2.5, 3.5 }, vals(r), k[1])
      assert.same({ 4, 0 }, vals(ns.add_n({ arr({ 250, 128 }, "uint8"), arr({ 6, 64 }, "uint8"),
        arr({ 4, 64 }, "uint8") })), k[1])
    end
    local xs = {}
    for i = 1, 5 do xs[i] = rand(mx, { 300, 300 }, "float32") end
    check(mx, "add_n", { xs })
    check(mx, "add_n", { { rand(mx, { 3, 4 }, "float64"), rand(mx, { 3, 4 }, "float64") } })
    check(mx, "add_n", { { rand(mx, { 3, 4 }, "float16"), rand(mx, { 3, 4 }, "bfloat16") } })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local q = nd.add_n({ arr({ 1, 2 }), arr({ 1, 2, 3 }) }) return q end, line)
    assert.is_truthy(msg:find("add_n", 1, true) and msg:find("(3,)", 1, true)
      and msg:find("(2,)", 1, true), msg)
  end)

  it("gives gradients: mod (1, -floor(a/b)), add_n, and logical ops stop the gradient", function()
    local a, b = arr({ 7, -7, 5.5 }, "float64"), arr({ 2, 2, -2 }, "float64")
    a:attach_grad()
    b:attach_grad()
    mx.autograd.record(function() local q = nd.mod(a, b):sum() q:backward() end)
    assert.same({ 1, 1, 1 }, vals(a:grad()))
    assert.same({ -3, 4, 3 }, vals(b:grad())) -- -floor(7/2), -floor(-7/2), -floor(5.5/-2)
    local x = arr({ 1, 2 }, "float64")
    x:attach_grad()
    mx.autograd.record(function() local q = nd.add_n({ x, x, x }):sum() q:backward() end)
    assert.same({ 3, 3 }, vals(x:grad()))
    mx.autograd.record(function()
      local q = nd.add(nd.logical_or(x, x), x):sum()
      q:backward()
    end)
    assert.same({ 1, 1 }, vals(x:grad()))
  end)

  it("neg, abs and square wrap on int8/uint8/int32 in both kernels (MXNet, NumPy)", function()
    for _, k in ipairs(KERNELS) do
      local ns = k[2]
      assert.same({ -128, 127, -5, 0 }, vals(ns.neg(arr({ -128, -127, 5, 0 }, "int8"))), k[1])
      assert.same({ 0, 255, 56, 1 }, vals(ns.neg(arr({ 0, 1, 200, 255 }, "uint8"))), k[1])
      assert.same({ -2147483648, -2147483647 }, vals(ns.neg(arr({ -2147483648, 2147483647 }, "int32"))), k[1])
      assert.same({ -128, 127 }, vals(ns.abs(arr({ -128, -127 }, "int8"))), k[1])
      assert.same({ 0, -112, 64, 1 }, vals(ns.square(arr({ -128, 12, 200 - 256, -1 }, "int8"))), k[1])
      assert.same({ 64, 0, 1 }, vals(ns.square(arr({ 200, 16, 255 }, "uint8"))), k[1])
      assert.same({ 0, 1 }, vals(ns.square(arr({ 65536, -2147483647 }, "int32"))), k[1])
    end
    -- and over the parallel path: the kernels agree
    for _, op in ipairs({ "neg", "abs", "square" }) do
      for _, dt in ipairs({ "int8", "uint8", "int32" }) do
        check(mx, op, { rand(mx, { 140001 }, dt, dt == "uint8" and { 0, 255 } or { -128, 127 }) })
      end
    end
  end)
end)

-- rint, fix, erfinv, gamma, gammaln, digamma, nan_to_num
describe("unary ops: rint, fix, erfinv, gamma, gammaln, digamma, nan_to_num", function()
  local nd = mx.nd
  local KERNELS = { { "cpu", nd }, { "ref", nd._ref } }
  local SET = { { "rint", { -5, 5 } }, { "fix", { -5, 5 } }, { "erfinv", { -0.999, 0.999 } },
    { "gamma", { 0.1, 8 } }, { "gammaln", { 0.1, 30 } }, { "digamma", { 0.1, 30 } },
    { "nan_to_num" } }
  for _, u in ipairs(SET) do
    local name, dom = u[1], u[2]
    it(name .. " matches the reference over shapes and dtypes", function()
      unary_vs_ref(name, dom)
    end)
  end

  it("rint sends halves toward -inf (MXNet's rule) and fix rounds toward zero", function()
    local x = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.7, -1.7, -2.1 }
    for _, k in ipairs(KERNELS) do
      for _, dt in ipairs({ "float32", "float64" }) do
        assert.same({ -3, -2, -1, 0, 1, 2, 2, -2, -2 }, vals(k[2].rint(arr(x, dt))), k[1])
        assert.same({ -2, -1, 0, 0, 1, 2, 1, -1, -2 }, vals(k[2].fix(arr(x, dt))), k[1])
      end
      -- integers unchanged, int64 exactly
      local I64 = require("helpers.i64")
      local X = { 9007199254740993LL, -9223372036854775807LL - 1, 5LL }
      assert.same({ -3, 7 }, vals(k[2].rint(arr({ -3, 7 }, "int32"))), k[1])
      I64.same(X, I64.rd(k[2].rint(I64.mk(X))), k[1] .. " rint int64")
      I64.same(X, I64.rd(k[2].fix(I64.mk(X))), k[1] .. " fix int64")
    end
  end)

  it("gamma, gammaln and digamma give the known constants", function()
    local function near(got, want, tol, what)
      for i = 1, #want do
        assert.is_true(math.abs(got[i] - want[i]) <= tol * (1 + math.abs(want[i])),
          what .. " " .. i .. ": " .. tostring(got[i]) .. " vs " .. want[i])
      end
    end
    local sp = math.sqrt(math.pi)
    for _, k in ipairs(KERNELS) do
      local g = k[2]
      near(vals(g.gamma(arr({ 5, 1, 0.5, -0.5, 3.5 }, "float64"))),
        { 24, 1, sp, -2 * sp, 15 / 8 * sp }, 1e-14, k[1] .. " gamma")
      near(vals(g.gammaln(arr({ 0.5, 1, 2, 5, -0.5 }, "float64"))),
        { math.log(sp), 0, 0, math.log(24), math.log(2 * sp) }, 1e-14, k[1] .. " gammaln")
      -- psi(1) = -gamma_E, psi(1/2) = -gamma_E - 2 log 2, psi(n+1) = psi(n) + 1/n,
      -- psi(-1/2) = psi(1/2) + 2 (the recurrence backwards)
      local eg = 0.57721566490153286
      near(vals(g.digamma(arr({ 1, 0.5, 4, -0.5, 100 }, "float64"))),
        { -eg, -eg - 2 * math.log(2), -eg + 1 + 1 / 2 + 1 / 3, -eg - 2 * math.log(2) + 2,
          -- psi(100) = H_99 - gamma_E
          (function() local h = 0 for n = 1, 99 do h = h + 1 / n end return h - eg end)() },
        1e-13, k[1] .. " digamma")
      near(vals(g.digamma(arr({ 1, 0.5 }, "float32"))), { -eg, -eg - 2 * math.log(2) }, 1e-6,
        k[1] .. " digamma f32")
      -- poles: gamma inf or NaN (C tgamma), gammaln inf, digamma NaN
      local p = vals(g.digamma(arr({ 0, -2 }, "float64")))
      assert.is_true(p[1] ~= p[1] and p[2] ~= p[2], k[1])
      assert.same({ math.huge, math.huge }, vals(g.gammaln(arr({ 0, -3 }, "float64"))), k[1])
    end
  end)

  it("erfinv inverts erf, with +-inf at +-1 and NaN outside", function()
    local x = { -3, -1.2, -0.3, 0, 1e-5, 0.5, 1.9, 4 }
    for _, k in ipairs(KERNELS) do
      local got = vals(k[2].erfinv(nd.erf(arr(x, "float64"))))
      for i = 1, #x do
        assert.is_true(math.abs(got[i] - x[i]) <= 1e-9 * (1 + math.abs(x[i])),
          k[1] .. " " .. x[i] .. " -> " .. got[i])
      end
      local e = vals(k[2].erfinv(arr({ 1, -1, 1.5, -2 }, "float32")))
      assert.are.equal(math.huge, e[1], k[1])
      assert.are.equal(-math.huge, e[2], k[1])
      assert.is_true(e[3] ~= e[3] and e[4] ~= e[4], k[1])
      -- erfinv(0.5) = 0.4769362762044699 (the probit relation: Phi^-1(0.75) / sqrt(2))
      assert.is_true(math.abs(vals(k[2].erfinv(arr({ 0.5 }, "float64")))[1] -
        0.4769362762044699) < 1e-15, k[1])
    end
  end)

  it("nan_to_num replaces NaN and +-inf, by default with 0 and the dtype's extremes", function()
    local x = { 0 / 0, math.huge, -math.huge, 3, -2 }
    for _, k in ipairs(KERNELS) do
      assert.same({ 0, 1.7976931348623157e308, -1.7976931348623157e308, 3, -2 },
        vals(k[2].nan_to_num(arr(x, "float64"))), k[1])
      local m32 = (2 - 2 ^ -23) * 2 ^ 127
      assert.same({ 0, m32, -m32, 3, -2 }, vals(k[2].nan_to_num(arr(x, "float32"))), k[1])
      assert.same({ 0, 65504, -65504, 3, -2 }, vals(k[2].nan_to_num(arr(x, "float16"))), k[1])
      assert.same({ 9, 1, -1, 3, -2 },
        vals(k[2].nan_to_num(arr(x, "float32"), { nan = 9, posinf = 1, neginf = -1 })), k[1])
      assert.same({ 5, -7 }, vals(k[2].nan_to_num(arr({ 5, -7 }, "int32"))), k[1])
    end
  end)

  it("gives the gradients: erfinv, gamma, gammaln; nan_to_num only where x was finite", function()
    local x = arr({ 0.5, 1.5, 3 }, "float64")
    x:attach_grad()
    mx.autograd.record(function() local q = nd.gammaln(x):sum() q:backward() end)
    local eg = 0.57721566490153286
    local psi = { -eg - 2 * math.log(2), -eg - 2 * math.log(2) + 2, -eg + 1.5 }
    local g = vals(x:grad())
    for i = 1, 3 do assert.is_true(math.abs(g[i] - psi[i]) < 1e-12, i) end
    mx.autograd.record(function() local q = nd.gamma(x):sum() q:backward() end)
    g = vals(x:grad())
    local gam = { math.sqrt(math.pi), math.sqrt(math.pi) / 2, 2 }
    for i = 1, 3 do assert.is_true(math.abs(g[i] - gam[i] * psi[i]) < 1e-12, i) end
    local y = arr({ -0.5, 0, 0.7 }, "float64")
    y:attach_grad()
    mx.autograd.record(function() local q = nd.erfinv(y):sum() q:backward() end)
    g = vals(y:grad())
    local inv = vals(nd.erfinv(y))
    for i = 1, 3 do
      assert.is_true(math.abs(g[i] - math.sqrt(math.pi) / 2 * math.exp(inv[i] ^ 2)) < 1e-12, i)
    end
    local z = arr({ 0 / 0, 2, math.huge, -math.huge }, "float32")
    z:attach_grad()
    mx.autograd.record(function()
      local q = nd.nan_to_num(z)
      q:backward(arr({ 0 / 0, 3, 1 / 0, 4 }, "float32"))
    end)
    assert.same({ 0, 3, 0, 0 }, vals(z:grad()))
    -- rint and fix have zero gradients (as round); digamma's is trigamma (its own spec below)
    for _, op in ipairs({ "rint", "fix" }) do
      mx.autograd.record(function() local q = nd.add(nd[op](x), x):sum() q:backward() end)
      assert.same({ 1, 1, 1 }, vals(x:grad()), op)
    end
  end)
end)

-- trigamma, digamma's gradient
describe("trigamma", function()
  local nd = mx.nd
  it("gives the known constants, NaN at the poles, 0 at +inf, and is digamma's gradient", function()
    local pi2 = math.pi ^ 2
    local want = { pi2 / 6, pi2 / 2, pi2 / 6 - 1, pi2 / 2 + 4, 0.010050166663333571, 0 }
    for _, ns in ipairs { nd, nd._ref } do
      local got = vals(ns.trigamma(arr({ 1, 0.5, 2, -0.5, 100, math.huge }, "float64")))
      for i = 1, #want do
        assert.is_true(math.abs(got[i] - want[i]) <= 1e-13 * (1 + want[i]), i .. ": " .. got[i])
      end
      local p = vals(ns.trigamma(arr({ 0, -3, 0 / 0, -math.huge }, "float32")))
      for i = 1, 4 do assert.is_true(p[i] ~= p[i], "pole " .. i) end
    end
    local x = arr({ 0.3, 1.7, -2.5, 12 }, "float64")
    x:attach_grad()
    mx.autograd.record(function() nd.digamma(x):sum():backward() end)
    assert.same(vals(nd.trigamma(x)), vals(x:grad()))
  end)
end)

-- broadcast_like with MXNet's lhs_axes/rhs_axes
describe("broadcast_like lhs_axes/rhs_axes", function()
  local nd = mx.nd
  local H = require("helpers.la")
  local FILE = "elemwise_math_spec.lua"
  it("grows only data's lhs_axes (size 1) to like's sizes on rhs_axes, on cpu and ref", function()
    for _, ns in ipairs { nd, nd._ref } do
      local x = nd.array({ { 1 }, { 2 } })
      local y = ns.broadcast_like(x, nd.ones { 3, 4, 5 }, { lhs_axes = { 2 }, rhs_axes = { 3 } })
      assert.same({ 2, 5 }, y:shape())
      assert.same({ 1, 1, 1, 1, 1, 2, 2, 2, 2, 2 }, y:tolist())
      local z = ns.broadcast_like(nd.array({ { { 7, 8, 9 } } }, { dtype = "int64" }), nd.ones { 4, 2 },
        { lhs_axes = { 1, -2 }, rhs_axes = { -1, 1 } })
      assert.same({ 2, 4, 3 }, z:shape())
      assert.are.equal("int64", z:dtype())
      local zl = z:tolist()
      for i = 0, 7 do
        local row = { tonumber(zl[3 * i + 1]), tonumber(zl[3 * i + 2]), tonumber(zl[3 * i + 3]) }
        assert.same({ 7, 8, 9 }, row)
      end
    end
    assert.is_true(require("mx.core.lib").C.mx_op_find("broadcast_like") >= 0)
  end)
  it("rejects what MXNet rejects, naming the op and the axes", function()
    local x, l = nd.ones { 2, 1 }, nd.ones { 3, 4, 5 }
    H.assert_error(function(mark) mark() nd.broadcast_like(x, l, { lhs_axes = { 1 }, rhs_axes = { 3 } }) end,
      FILE, "broadcast_like", "not 1")
    H.assert_error(function(mark) mark() nd.broadcast_like(x, l, { lhs_axes = { 2 } }) end,
      FILE, "broadcast_like", "lhs_axes and rhs_axes go together")
    local twice = { lhs_axes = { 2, 2 }, rhs_axes = { 1, 2 } }
    H.assert_error(function(mark) mark() nd.broadcast_like(x, l, twice) end, FILE, "broadcast_like",
      "twice")
    H.assert_error(function(mark) mark() nd.broadcast_like(x, l, { lhs_axes = { 3 }, rhs_axes = { 1 } }) end,
      FILE, "broadcast_like", "lhs_axes")
    H.assert_error(function(mark) mark() nd.broadcast_like(x, l, { lhs_axes = { 2 }, rhs_axes = { 4 } }) end,
      FILE, "broadcast_like", "rhs_axes")
    local both = { axis = { 1 }, lhs_axes = { 2 }, rhs_axes = { 1 } }
    H.assert_error(function(mark) mark() nd.broadcast_like(x, l, both) end, FILE, "broadcast_like",
      "not both")
  end)
end)
