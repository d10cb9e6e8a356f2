-- spec/softmax_spec.lua — softmax / log_softmax: the optimised cpu kernels against the
-- reference kernels over axes, temperatures, dtypes and sizes, values computed in Lua,
-- numerical stability, and errors at the caller's line.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("softmax_spec.lua")

local rand, check = oracle.rand, oracle.check
local function vals(t) return t:tolist() end
local function arr(t, dtype) return mx.nd.array(t, { dtype = dtype }) end

for _, name in ipairs({ "softmax", "log_softmax" }) do
  describe(name, function()
    it("matches the reference over axes, temperatures, dtypes and sizes", function()
      local cases = {
        { { 7 }, { -1, 1 } }, { { 3, 4 }, { 1, 2, -1 } }, { { 2, 3, 4 }, { 1, 2, 3 } },
        { { 2, 0, 3 }, { 1, 3 } }, { { 1, 1 }, { 1, 2 } }, { { 64, 1000 }, { -1 } },
        { { 1000, 70 }, { 1 } }, { { 4, 300, 9 }, { 2 } },
      }
      for _, c in ipairs(cases) do
        for _, ax in ipairs(c[2]) do
          for _, t in ipairs({ 1, 0.5, 3 }) do
            local opts = { axis = ax, temperature = t }
            for _, dt in ipairs({ "float32", "float64" }) do
              local tol = dt == "float32" and { rtol = 1e-5, atol = 1e-6 }
                or { rtol = 1e-12, atol = 1e-14 }
              check(mx, name, { rand(mx, c[1], dt, { -5, 5 }) }, opts, tol)
            end
          end
        end
      end
      for _, dt in ipairs({ "float16", "bfloat16", "int32", "uint8" }) do
        check(mx, name, { rand(mx, { 3, 5 }, dt) }, { axis = 2 })
        check(mx, name, { rand(mx, { 4, 3, 70 }, dt) }, { axis = 2 })
      end
      local base = rand(mx, { 3, 4, 5 }, "float32")
      check(mx, name, { base[2] }, nil, { rtol = 1e-5, atol = 1e-6 })
    end)
  end)
end

describe("softmax values", function()
  it("computes values independently and stays finite for large inputs", function()
    local x = { 1, 2, 3 }
    local s = math.exp(1) + math.exp(2) + math.exp(3)
    local r = vals(mx.nd.softmax(arr(x, "float64")))
    for i = 1, 3 do assert.is_true(math.abs(r[i] - math.exp(x[i]) / s) < 1e-15) end
    r = vals(mx.nd.log_softmax(arr(x, "float64")))
    for i = 1, 3 do assert.is_true(math.abs(r[i] - (x[i] - math.log(s))) < 1e-14) end
    -- temperature divides first
    local s2 = math.exp(0.5) + math.exp(1) + math.exp(1.5)
    r = vals(mx.nd.softmax(arr(x, "float64"), { temperature = 2 }))
    for i = 1, 3 do assert.is_true(math.abs(r[i] - math.exp(x[i] / 2) / s2) < 1e-15) end
    -- no overflow: exp(1000) would be inf without the max subtracted
    r = vals(mx.nd.softmax(arr({ 1000, 1001 }, "float32")))
    local e = 1 / (1 + math.exp(1))
    assert.is_true(math.abs(r[1] - e) < 1e-6 and math.abs(r[2] - (1 - e)) < 1e-6)
    r = vals(mx.nd.log_softmax(arr({ -1000, 0 }, "float32")))
    assert.is_true(math.abs(r[1] + 1000) < 1e-3 and math.abs(r[2]) < 1e-6)
    -- rows sum to one along the chosen axis
    local m = mx.nd.softmax(rand(mx, { 5, 7 }, "float64"), { axis = 1 })
    for _, v in ipairs(vals(m:sum{ axis = 1 })) do assert.is_true(math.abs(v - 1) < 1e-14) end
    assert.equal("float32", mx.nd.softmax(arr({ 1, 2 }, "int32")):dtype())
    -- in place (out= the input) gives the same values
    for _, name in ipairs({ "softmax", "log_softmax" }) do
      for _, ax in ipairs({ 1, 2 }) do
        local xi = rand(mx, { 6, 9 }, "float32")
        local want = mx.nd._ref[name](xi, { axis = ax })
        mx.nd[name](xi, { axis = ax, out = xi })
        assert.is_true(oracle.close(xi, want, 1e-5, 1e-6))
      end
    end
  end)

  it("reports bad axes and temperatures at the caller's line", function()
    local x = mx.nd.zeros({ 2, 3 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = mx.nd.softmax(x, { axis = 3 }) return r end, line)
    assert.is_truthy(msg:find("softmax", 1, true) and msg:find("axis=3", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = mx.nd.log_softmax(x, { temperature = 0 }) return r end, line)
    assert.is_truthy(msg:find("log_softmax", 1, true) and msg:find("temperature", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = mx.nd.softmax(mx.nd.zeros({})) return r end, line)
    assert.is_truthy(msg:find("softmax", 1, true) and msg:find("()", 1, true), msg)
  end)
end)

-- issue 10: a denormal temperature makes 1/T infinite; the cpu kernel must divide like the
-- reference (0 / T is 0, exp gives 1) instead of multiplying (0 * inf is NaN).
describe("softmax with a denormal or huge temperature", function()
  local DEN = 4.9406564584124654e-324
  for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
    for _, shape in ipairs({ { 2, 3 }, { 3, 2 } }) do
      it(dt .. " " .. table.concat(shape, "x") .. ": cpu equals ref, no NaN", function()
        local x = mx.nd.array({ { 1, 2 }, { 3, 4 }, { 5, 7 } }, { dtype = dt }):reshape(shape)
        for _, axis in ipairs({ -1, 1 }) do
          for _, temp in ipairs({ DEN, 1e-40, 1e300 }) do
            for _, op in ipairs({ "softmax", "log_softmax" }) do
              local o = { axis = axis, temperature = temp }
              local got, want = mx.nd[op](x, o):tolist(), mx.nd._ref[op](x, o):tolist()
              assert.are.same(want, got, op .. " " .. dt .. " T=" .. temp .. " axis " .. axis)
              for _, v in ipairs(mx.nd[op](x, o):reshape({ -1 }):tolist()) do
                assert.is_true(v == v, op .. " gave NaN")
              end
            end
          end
        end
      end)
    end
  end
end)

-- issue 14: softmin = softmax(-x), computed stably (owner: u14)
describe("softmin", function()
  local nd = mx.nd
  local function expect(rows, t)
    local r = {}
    for i, row in ipairs(rows) do
      local mn, s = math.huge, 0
      for _, v in ipairs(row) do mn = math.min(mn, v) end
      for _, v in ipairs(row) do s = s + math.exp((mn - v) / t) end
      r[i] = {}
      for j, v in ipairs(row) do r[i][j] = math.exp((mn - v) / t) / s end
    end
    return r
  end
  local function near(got, want, tol, what)
    for i = 1, #want do
      for j = 1, #want[i] do
        assert.is_true(math.abs(got[i][j] - want[i][j]) <= tol, what .. " " .. i .. "," .. j)
      end
    end
  end
  local X = { { 1, 2, 3 }, { 0, 0, 0 }, { -1000, 5, 1000 } }

  it("gives exp(-x/T) / sum exp(-x/T) along the last axis, without overflow", function()
    for _, k in ipairs({ { "cpu", nd }, { "ref", nd._ref } }) do
      for _, dt in ipairs({ "float32", "float64" }) do
        local x = nd.array(X, { dtype = dt })
        local tol = dt == "float32" and 1e-6 or 1e-14
        near(k[2].softmin(x):totable(), expect(X, 1), tol, k[1] .. " " .. dt)
        near(k[2].softmin(x, { temperature = 2 }):totable(), expect(X, 2), tol, k[1] .. " T=2")
      end
    end
  end)

  it("works along any axis and equals softmax(-x); integers give float32", function()
    local x = nd.array({ { { 1, 5 }, { 2, 3 } }, { { 0, 1 }, { 7, -2 } } })
    for _, axis in ipairs({ 1, 2, 3, -1 }) do
      local got, want = nd.softmin(x, { axis = axis }), nd.softmax(nd.neg(x), { axis = axis })
      near(got:reshape({ 1, -1 }):totable(), want:reshape({ 1, -1 }):totable(), 1e-7, "axis " .. axis)
      near({ nd._ref.softmin(x, { axis = axis }):tolist() }, { got:tolist() }, 1e-7, "ref")
    end
    local i = nd.softmin(nd.array({ 1, 2 }, { dtype = "int32" }))
    assert.are.equal("float32", i:dtype())
    near({ i:tolist() }, expect({ { 1, 2 } }, 1), 1e-7, "int32")
    -- f16 and bf16 through the reference
    local h = nd.softmin(nd.array({ 1, 2, 3 }, { dtype = "float16" }))
    near({ h:tolist() }, expect({ { 1, 2, 3 } }, 1), 1e-3, "float16")
  end)

  it("propagates NaN to its row and rejects a bad axis or temperature at the caller's line", function()
    local r = nd.softmin(nd.array({ { 1, 0 / 0 }, { 1, 2 } })):totable()
    assert.is_true(r[1][1] ~= r[1][1] and r[1][2] ~= r[1][2])
    assert.is_true(r[2][1] == r[2][1])
    local function bad(opts)
      local line = debug.getinfo(1, "l").currentline + 1
      return err_at(function() local y = nd.softmin(nd.zeros({ 2 }), opts) return y end, line)
    end
    local msg = bad({ axis = 3 })
    assert.is_truthy(msg:find("softmin", 1, true) and msg:find("axis", 1, true), msg)
    msg = bad({ temperature = 0 })
    assert.is_truthy(msg:find("softmin", 1, true) and msg:find("temperature", 1, true), msg)
  end)

  it("has the gradient -y (g - sum(g y)) / T", function()
    local x = nd.array({ { 0.3, -1, 2 } }, { dtype = "float64" })
    x:attach_grad()
    local gv = { 1, 2, -1 }
    mx.autograd.record(function()
      local y = nd.softmin(x, { temperature = 2 })
      y:backward(nd.array({ gv }, { dtype = "float64" }))
    end)
    local y = expect({ { 0.3, -1, 2 } }, 2)[1]
    local s = 0
    for j = 1, 3 do s = s + gv[j] * y[j] end
    local want = {}
    for j = 1, 3 do want[j] = -y[j] * (gv[j] - s) / 2 end
    near(x:grad():totable(), { want }, 1e-14, "grad")
  end)
end)
