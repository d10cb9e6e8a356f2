-- mx.init: constant fills exactly, random ones with the right range / spread
-- (MXNet's formulas), Orthogonal gives orthonormal rows or columns.
local mx = require("mx")
local nd = mx.nd

local function stats(x)
  local v = x:tolist()
  local s, s2, mx_ = 0, 0, 0
  for _, a in ipairs(v) do s, s2, mx_ = s + a, s2 + a * a, math.max(mx_, math.abs(a)) end
  local m = s / #v
  return m, math.sqrt(s2 / #v - m * m), mx_
end

describe("mx.init", function()
  it("Zero, One, Constant", function()
    local a = nd.ones { 3, 2 }
    mx.init.Zero()("w", a)
    assert.are.equal(0, a:abs():sum():item())
    mx.init.One()("w", a)
    assert.are.equal(6, a:sum():item())
    mx.init.Constant(2.5)("w", a)
    assert.are.equal(15, a:sum():item())
    assert.are.equal("One", getmetatable(mx.init.create("ones")).__name)
  end)

  it("Uniform and Normal", function()
    mx.random.seed(1)
    local a = nd.zeros { 200, 100 }
    mx.init.Uniform(0.2)("w", a)
    local m, sd, mx_ = stats(a)
    assert.is_true(mx_ <= 0.2 and mx_ > 0.19)
    assert.is_true(math.abs(m) < 0.005)
    assert.is_true(math.abs(sd - 0.2 / math.sqrt(3)) < 0.005)
    mx.init.Normal(0.5)("w", a)
    m, sd = stats(a)
    assert.is_true(math.abs(m) < 0.01 and math.abs(sd - 0.5) < 0.01)
    local d = mx.init.Uniform()
    assert.are.equal(0.07, d.scale)
    assert.are.equal(0.01, mx.init.Normal().sigma)
  end)

  it("Xavier: scale sqrt(magnitude / fan) for each rnd_type and factor_type", function()
    mx.random.seed(2)
    local a = nd.zeros { 64, 32, 3, 3 } -- fan_in 288, fan_out 576
    mx.init.Xavier()("w", a)
    local _, _, mx_ = stats(a)
    local scale = math.sqrt(3 / ((288 + 576) / 2))
    assert.is_true(mx_ <= scale and mx_ > 0.98 * scale)
    mx.init.Xavier("gaussian", "in", 2)("w", a)
    local _, sd = stats(a)
    assert.is_true(math.abs(sd - math.sqrt(2 / 288)) < 0.003)
    mx.init.Xavier { rnd_type = "uniform", factor_type = "out", magnitude = 1 }("w", a)
    _, _, mx_ = stats(a)
    assert.is_true(mx_ <= math.sqrt(1 / 576) + 1e-7)
    assert.has_error(function() mx.init.Xavier()("bias", nd.zeros { 4 }) end)
    assert.has_error(function() mx.init.Xavier("bad") end)
  end)

  it("MSRAPrelu is Xavier gaussian with magnitude 2/(1+slope^2)", function()
    mx.random.seed(3)
    local a = nd.zeros { 300, 200 }
    mx.init.MSRAPrelu()("w", a)
    local _, sd = stats(a)
    assert.is_true(math.abs(sd - math.sqrt(2 / (1 + 0.0625) / 250)) < 0.002)
  end)

  it("Orthogonal rows (nout <= nin) and columns", function()
    mx.random.seed(4)
    for _, shape in ipairs { { 4, 6 }, { 6, 3 }, { 3, 2, 2 } } do
      local a = nd.zeros(shape)
      mx.init.Orthogonal(2)("w", a)
      local m = a:reshape(shape[1], -1)
      local g = (shape[1] <= m:shape()[2]) and nd.dot(m, m, { transpose_b = true })
        or nd.dot(m, m, { transpose_a = true })
      local v, k = g:tolist(), g:shape()[1]
      for i = 1, k do
        for j = 1, k do
          local e = i == j and 4 or 0
          assert.is_true(math.abs(v[(i - 1) * k + j] - e) < 1e-4)
        end
      end
    end
  end)

  it("is reproducible under mx.random.seed", function()
    local a, b = nd.zeros { 10 , 10 }, nd.zeros { 10, 10 }
    mx.random.seed(9)
    mx.init.Xavier()("w", a)
    mx.random.seed(9)
    mx.init.Xavier()("w", b)
    assert.are.equal(0, (a - b):abs():sum():item())
  end)

  -- MXNet 1.9.1's own strings and values (tools/fixtures: printed by /opt/mxvenv's
  -- mx.init.X().dumps() and Bilinear()(desc, zeros((2, 3, 3, 5))))
  it("dumps() writes MXNet's JSON and create() reads it back", function()
    assert.equal('["xavier", {"rnd_type": "uniform", "factor_type": "avg", "magnitude": 3}]',
      mx.init.Xavier():dumps())
    assert.equal('["msraprelu", {"factor_type": "avg", "slope": 0.25}]', mx.init.MSRAPrelu():dumps())
    assert.equal('["uniform", {"scale": 0.1}]', mx.init.Uniform(0.1):dumps())
    assert.equal('["zero", {}]', mx.init.Zero():dumps())
    assert.equal('["lstmbias", {"forget_bias": 2}]', mx.init.LSTMBias(2):dumps())
    assert.equal('["orthogonal", {"scale": 1.414, "rand_type": "uniform"}]',
      mx.init.Orthogonal():dumps())
    assert.equal('["constant", {"value": 0.5}]', mx.init.Constant(0.5):dumps())
    local x = mx.init.create('["xavier", {"rnd_type": "gaussian", "factor_type": "in", "magnitude": 2}]')
    assert.equal("gaussian", x.rnd_type)
    assert.equal("in", x.factor_type)
    assert.equal(2, x.magnitude)
    assert.equal(x:dumps(), mx.init.create(x:dumps()):dumps())
  end)

  it("Bilinear and LSTMBias give MXNet's values", function()
    local a = nd.zeros { 2, 3, 3, 5 }
    mx.init.Bilinear()("x_weight", a)
    local want = { 1 / 9, 2 / 9, 3 / 9, 2 / 9, 1 / 9, 2 / 9, 4 / 9, 6 / 9, 4 / 9, 2 / 9, 3 / 9, 6 / 9,
      1, 6 / 9, 3 / 9, 1 / 9, 2 / 9, 3 / 9, 2 / 9, 1 / 9 }
    local v = a:tolist()
    for i = 1, #want do assert.is_true(math.abs(v[i] - want[i]) < 1e-6) end
    assert.equal(v[1], v[46]) -- every (out, in) slice the same
    local b = nd.ones { 12 }
    mx.init.LSTMBias { forget_bias = 2.5 }("lstm_bias", b)
    assert.same({ 0, 0, 0, 2.5, 2.5, 2.5, 0, 0, 0, 0, 0, 0 }, b:tolist())
    assert.has_error(function() mx.init.LSTMBias()("b", nd.zeros { 6 }) end)
  end)

  it("Mixed picks by pattern (anchored, as re.match); Load copies named values", function()
    local m = mx.init.Mixed({ ".*bias", ".*" }, { mx.init.Zero(), mx.init.Constant(3) })
    local a = nd.ones { 2 }
    m("fc_bias", a)
    assert.same({ 0, 0 }, a:tolist())
    m("fc_weight", a)
    assert.same({ 3, 3 }, a:tolist())
    assert.has_error(function() mx.init.Mixed({ "bias" }, { "zeros" })("fc_weight", a) end)
    local l = mx.init.Load({ ["arg:w"] = nd.array { 1, 2 } }, mx.init.One())
    local w, u = nd.zeros { 2 }, nd.zeros { 3 }
    l("w", w)
    l("u", u)
    assert.same({ 1, 2 }, w:tolist())
    assert.same({ 1, 1, 1 }, u:tolist())
    assert.has_error(function() l("w", u) end,
      "Load initializer: parameter w has shape (3), the loaded value (2)")
  end)
end)
