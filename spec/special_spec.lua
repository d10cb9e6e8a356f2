-- spec/special_spec.lua — the special family (core/ops/special.lua): gammainc, gammaincc
-- and betainc against scipy.special (spec/fixtures/special_scipy.lua, made by
-- tools/fixtures/make_special_scipy.py), identities, broadcasting, the domain, dtypes.
-- Their gradients (x only) are checked in float64 finite differences by
-- spec/gradcheck_spec.lua (spec/helpers/gradcases.lua).
local mx = require("mx")
local nd = mx.nd
local FIX = dofile("spec/fixtures/special_scipy.lua")

local function vals(t) return t:tolist() end
local function arr(v, dt) return nd.array(v, { dtype = dt or "float64" }) end
local function near(got, want, rtol, what)
  for i = 1, #want do
    local ok = math.abs(got[i] - want[i]) <= rtol * math.max(math.abs(want[i]), 1e-300)
      + 1e-300
    assert.is_true(ok, string.format("%s %d: %.17g vs scipy %.17g", what, i, got[i], want[i]))
  end
end

describe("special functions (gammainc, gammaincc, betainc)", function()
  it("gammainc and gammaincc match scipy.special over their domain", function()
    local a, x = arr(FIX.gamma_a), arr(FIX.gamma_x)
    near(vals(nd.gammainc(a, x)), FIX.gammainc, 1e-12, "gammainc")
    near(vals(nd.gammaincc(a, x)), FIX.gammaincc, 1e-11, "gammaincc")
  end)

  it("betainc matches scipy.special over its domain", function()
    near(vals(nd.betainc(arr(FIX.beta_a), arr(FIX.beta_b), arr(FIX.beta_x))), FIX.betainc,
      1e-11, "betainc")
  end)

  it("gives the closed forms: P(1, x) = 1 - e^-x, I_x(1, 1) = x, I_x(a, 1) = x^a", function()
    local xs = { 0.1, 0.7, 2, 9 }
    local p = vals(nd.gammainc(arr { 1, 1, 1, 1 }, arr(xs)))
    for i, v in ipairs(xs) do assert.near(1 - math.exp(-v), p[i], 1e-14) end
    local bx = { 0.05, 0.3, 0.5, 0.95 }
    local b = vals(nd.betainc(arr { 1, 1, 1, 1 }, arr { 1, 1, 1, 1 }, arr(bx)))
    for i, v in ipairs(bx) do assert.near(v, b[i], 1e-14) end
    b = vals(nd.betainc(arr { 2.5, 2.5, 2.5, 2.5 }, arr { 1, 1, 1, 1 }, arr(bx)))
    for i, v in ipairs(bx) do assert.near(v ^ 2.5, b[i], 1e-13) end
    -- symmetry I_x(a, b) = 1 - I_(1-x)(b, a)
    local l = vals(nd.betainc(arr { 3, 0.4 }, arr { 7, 2 }, arr { 0.2, 0.9 }))
    local r = vals(nd.betainc(arr { 7, 2 }, arr { 3, 0.4 }, arr { 0.8, 0.1 }))
    for i = 1, 2 do assert.near(1, l[i] + r[i], 1e-13) end
  end)

  it("broadcasts its inputs (NumPy rules) and promotes integers to float32", function()
    local g = nd.gammainc(arr({ { 1 }, { 2 } }), arr { 0.5, 1, 3 })
    assert.same({ 2, 3 }, g:shape())
    assert.near(vals(nd.gammainc(arr { 2 }, arr { 3 }))[1], g:totable()[2][3], 1e-15)
    local b = nd.betainc(arr({ 2 }), arr({ { 1 }, { 3 } }), arr({ 0.25, 0.5, 0.75 }))
    assert.same({ 2, 3 }, b:shape())
    assert.near(vals(nd.betainc(arr { 2 }, arr { 3 }, arr { 0.75 }))[1], b:totable()[2][3], 1e-15)
    local i = nd.gammainc(nd.array({ 1, 2 }, { dtype = "int32" }), nd.array({ 1, 2 }, { dtype = "int32" }))
    assert.equal("float32", i:dtype())
    local f = nd.betainc(arr({ 2 }, "float32"), arr({ 3 }, "float32"), arr({ 0.5 }, "float32"))
    assert.equal("float32", f:dtype())
    assert.near(0.6875, f:item(), 1e-6) -- I_0.5(2, 3) = 11/16
    assert.has_error(function() nd.betainc(arr { 1, 2 }, arr { 1, 2, 3 }, arr { 0.5 }) end,
      "betainc: shapes (2,) and (3,) cannot be broadcast together (axis 1: 2 vs 3)")
  end)

  it("gives NaN outside the domain and the limits at its edges", function()
    local g = vals(nd.gammainc(arr { -1, 0, 2, 2, 2, 2 }, arr { 1, 1, -0.5, 0, math.huge, 0 / 0 }))
    assert.is_true(g[1] ~= g[1] and g[2] ~= g[2] and g[3] ~= g[3] and g[6] ~= g[6])
    assert.same({ 0, 1 }, { g[4], g[5] })
    local q = vals(nd.gammaincc(arr { 2, 2 }, arr { 0, math.huge }))
    assert.same({ 1, 0 }, q)
    local b = vals(nd.betainc(arr { 1, 0, 1, 1, 1 }, arr { 1, 1, 1, 1, 1 }, arr { 1.5, 0.5, -0.1, 0, 1 }))
    assert.is_true(b[1] ~= b[1] and b[2] ~= b[2] and b[3] ~= b[3])
    assert.same({ 0, 1 }, { b[4], b[5] })
  end)

  it("takes the gradient in x (the densities) and none in the parameters", function()
    local a, x = arr { 2.5 }, arr { 1.5 }
    x:attach_grad()
    a:attach_grad()
    mx.autograd.record(function() return nd.gammainc(a, x) end):backward()
    -- Gamma(2.5, 1) density at 1.5
    local want = 1.5 ^ 1.5 * math.exp(-1.5) / (0.75 * math.sqrt(math.pi))
    assert.near(want, x:grad():item(), 1e-12)
    assert.equal(0, a:grad():item())
  end)
end)
