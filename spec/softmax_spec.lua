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

-- a denormal temperature makes 1/T infinite; the cpu kernel must divide like the
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

-- softmin = softmax(-x), computed stably
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

---------------------------------------------------------------- lengths and masks
-- softmax / log_softmax with use_length and a length input (MXNet 1.9.1's values from
-- spec/fixtures/sequence_mxnet.lua), log_softmax_length_backward, masked_softmax /
-- masked_log_softmax (+ backward): cpu against the reference, values computed in Lua.
local H = require("helpers.la")
local SFILE = "softmax_spec.lua"
local nd = mx.nd

-- softmax over the kept positions of a Lua row (keep[i] true), pad elsewhere
local function ref_row(x, keep, t, log_, pad)
  local m, s, out = -math.huge, 0, {}
  for i = 1, #x do if keep[i] and x[i] > m then m = x[i] end end
  for i = 1, #x do if keep[i] then s = s + math.exp((x[i] - m) / t) end end
  for i = 1, #x do
    if not keep[i] then out[i] = pad
    elseif log_ then out[i] = (x[i] - m) / t - math.log(s)
    else out[i] = math.exp((x[i] - m) / t) / s end
  end
  return out
end

describe("softmax with length", function()
  local F = dofile("spec/fixtures/sequence_mxnet.lua")
  for _, name in ipairs { "softmax_len", "softmax_len_axis0" } do
    it("matches MXNet 1.9.1 (values and gradient): " .. name, function()
      local c = F[name]
      local opts = assert(loadstring("return " .. c.opts))()
      for _, ns in ipairs { mx.nd, mx.nd._ref } do
        for _, dt in ipairs { "int32", "float32", "int64" } do
          local x = mx.nd.array(c.x.v):reshape(c.x.shape)
          x:attach_grad()
          local y = mx.autograd.record(function()
            return ns.softmax(x, mx.nd.array(c.length, { dtype = dt }), opts)
          end)
          y:backward(mx.nd.array(c.g.v):reshape(c.g.shape))
          local yv, dv = y:reshape { -1 }:tolist(), x:grad():reshape { -1 }:tolist()
          for i = 1, #yv do
            assert(math.abs(yv[i] - c.y.v[i]) < 1e-6, name .. " value " .. i)
            assert(math.abs(dv[i] - c.dx.v[i]) < 1e-6, name .. " grad " .. i)
          end
        end
      end
    end)
  end

  it("cpu agrees with the reference over axes, dtypes and lengths; 0 past the length", function()
    for _, name in ipairs { "softmax", "log_softmax" } do
      for _, shape in ipairs { { 4, 7 }, { 3, 5, 6 }, { 2, 300 } } do
        for ax = 1, #shape do
          local lshape, nl = {}, 1
          for d = 1, #shape do if d ~= ax then lshape[#lshape + 1] = shape[d]; nl = nl * shape[d] end end
          local lv = {}
          for i = 1, nl do lv[i] = (i * 5) % (shape[ax] + 1) end
          local len = mx.nd.array(lv, { dtype = "int32" }):reshape(lshape)
          for _, dt in ipairs { "float32", "float64", "float16", "int32" } do
            local x = rand(mx, shape, dt, { -4, 4 })
            local opts = { axis = ax, use_length = true, temperature = ax == 1 and 2 or 1 }
            local tol = dt == "float64" and { rtol = 1e-12, atol = 1e-14 } or { rtol = 1e-5, atol = 1e-6 }
            if dt == "float16" then tol = nil end
            local y = check(mx, name, { x, len }, opts, tol)
            -- past each row's length: 0 (softmax and log_softmax alike, as MXNet's kernel)
            if ax == #shape and #shape == 2 then
              local yt = y:totable()
              for r = 1, shape[1] do
                for j = lv[r] + 1, shape[2] do assert.equal(0, yt[r][j]) end
              end
            end
          end
        end
      end
    end
  end)

  it("log_softmax's gradient with a length ignores the steps past it", function()
    local x = arr({ { 0.5, -1, 2, 3 }, { 1, 2, 3, 4 } }, "float64")
    local len = arr({ 3, 1 }, "int32")
    x:attach_grad()
    local gv = { { 1, -2, 0.5, 7 }, { 3, 9, 9, 9 } }
    local y = mx.autograd.record(function() return nd.log_softmax(x, len, { use_length = true }) end)
    y:backward(arr(gv, "float64"))
    local want = {}
    local yt = y:totable()
    for r, n in ipairs { 3, 1 } do
      local s = 0
      for j = 1, n do s = s + gv[r][j] end
      want[r] = {}
      for j = 1, 4 do want[r][j] = j <= n and gv[r][j] - math.exp(yt[r][j]) * s or 0 end
    end
    local got = x:grad():totable()
    for r = 1, 2 do
      for j = 1, 4 do assert(math.abs(got[r][j] - want[r][j]) < 1e-13, r .. "," .. j) end
    end
    check(mx, "log_softmax_length_backward", { arr(gv, "float64"), y, len }, { temperature = 1 })
  end)

  it("rejects bad lengths and flags at the caller's line", function()
    local x = nd.ones { 2, 3 }
    local use = { use_length = true }
    H.assert_error(function(mark) mark() nd.softmax(x, arr { 1, 4 }, use) end, SFILE,
      "softmax", "length element 2 is 4", "0..3")
    H.assert_error(function(mark) mark() nd._ref.log_softmax(x, arr { 1.5, 2 }, use) end, SFILE,
      "log_softmax", "is 1.5")
    H.assert_error(function(mark) mark() nd.softmax(x, arr { 1, 2 }) end, SFILE,
      "use_length is false")
    H.assert_error(function(mark) mark() nd.softmax(x, use) end, SFILE, "no length input")
    H.assert_error(function(mark) mark() nd.softmax(x, arr { 1, 2, 3 }, use) end, SFILE,
      "length must have data's shape (2, 3) without axis 2")
  end)
end)

describe("masked_softmax / masked_log_softmax", function()
  it("match softmax over the kept positions (broadcast masks, all masked rows)", function()
    local xv = { { 0.5, -1, 2, 3 }, { 1, 2, 3, 4 }, { -2, 0, 2, 1 } }
    local mv = { { 1, 0, 1, 1 }, { 0, 0, 0, 0 }, { 1, 1, 1, 0 } }
    local x = arr(xv, "float64")
    for _, ns in ipairs { nd, nd._ref } do
      for _, mdt in ipairs { "bool", "int32", "float32" } do
        local m = arr(mv, mdt)
        for _, log_ in ipairs { false, true } do
          local y = (log_ and ns.masked_log_softmax or ns.masked_softmax)(x, m, { temperature = 2 })
          local yt = y:totable()
          for r = 1, 3 do
            local keep = {}
            for j = 1, 4 do keep[j] = mv[r][j] ~= 0 end
            local want = ref_row(xv[r], keep, 2, log_, log_ and -math.huge or 0)
            for j = 1, 4 do
              if want[j] == -math.huge then assert.equal(want[j], yt[r][j])
              else assert(math.abs(yt[r][j] - want[j]) < 1e-14, r .. "," .. j) end
            end
          end
        end
      end
    end
    -- a (1, 4) mask broadcast over the rows, and a (3, 1) one along axis 1
    local b = nd.masked_softmax(x, arr({ { 1, 1, 0, 1 } }, "bool")):totable()
    for r = 1, 3 do
      local want = ref_row(xv[r], { true, true, false, true }, 1, false, 0)
      for j = 1, 4 do assert(math.abs(b[r][j] - want[j]) < 1e-14) end
    end
    check(mx, "masked_softmax", { x, arr({ { 1 }, { 0 }, { 1 } }, "bool") }, { axis = 1 })
  end)

  it("cpu agrees with the reference over shapes, dtypes and broadcasts", function()
    for _, name in ipairs { "masked_softmax", "masked_log_softmax" } do
      for _, c in ipairs { { { 4, 7 }, { 4, 7 } }, { { 2, 3, 9 }, { 2, 1, 9 } },
        { { 2, 3, 9 }, { 1, 3, 1 } }, { { 8, 300 }, { 8, 300 } } } do
        local m = rand(mx, c[2], "bool")
        for _, dt in ipairs { "float32", "float64", "float16" } do
          local tol = dt == "float64" and { rtol = 1e-12, atol = 1e-14 } or { rtol = 1e-5, atol = 1e-6 }
          if dt == "float16" then tol = nil end
          check(mx, name, { rand(mx, c[1], dt, { -4, 4 }), m }, { temperature = 0.7 }, tol)
          check(mx, name, { rand(mx, c[1], dt, { -4, 4 }), m }, { axis = 1 }, tol)
        end
      end
    end
  end)

  it("masked_log_softmax's gradient is 0 at, and ignores, the masked positions", function()
    local x = arr({ { 0.5, -1, 2, 3 } }, "float64")
    local m = arr({ { 1, 0, 1, 1 } }, "bool")
    x:attach_grad()
    local y = mx.autograd.record(function() return nd.masked_log_softmax(x, m) end)
    y:backward(arr({ { 1, 100, -2, 0.5 } }, "float64"))
    local yt, got = y:totable()[1], x:grad():totable()[1]
    local s = 1 - 2 + 0.5
    local want = { 1 - math.exp(yt[1]) * s, 0, -2 - math.exp(yt[3]) * s, 0.5 - math.exp(yt[4]) * s }
    for j = 1, 4 do assert(math.abs(got[j] - want[j]) < 1e-13, j) end
    local d = nd.masked_log_softmax_backward(arr({ { 1, 100, -2, 0.5 } }, "float64"), y, m)
    assert.equal(0, H.maxdiff(d, x:grad()))
  end)

  it("rejects a mask of another shape at the caller's line", function()
    H.assert_error(function(mark) mark() nd.masked_softmax(nd.ones { 2, 3 }, nd.ones { 3 }) end,
      SFILE, "masked_softmax", "mask (3,) must have data's rank")
    H.assert_error(function(mark) mark() nd.masked_log_softmax(nd.ones { 2, 3 }, nd.ones { 2, 2 }) end,
      SFILE, "masked_log_softmax", "(2, 3)")
  end)
end)

describe("softmax / log_softmax dtype= (MXNet 1.9's output dtype)", function()
  local function near(got, want, tol)
    local g = nd.is_tensor(got) and got:astype("float64"):reshape(-1):tolist() or got
    local w = nd.is_tensor(want) and want:astype("float64"):reshape(-1):tolist() or want
    assert.equal(#w, #g)
    for k = 1, #w do
      assert.is_true(math.abs(g[k] - w[k]) <= tol * (1 + math.abs(w[k])), string.format(
        "element %d: %.7g, want %.7g", k, g[k], w[k]))
    end
  end
  it("gives the dtype asked for, computed in the wider of the two", function()
    local x = nd.array({ { 1, 2, 3 }, { 4, 5, 7 } })
    for _, name in ipairs({ "softmax", "log_softmax" }) do
      local want = nd[name](x, { axis = 1 })
      local y = nd[name](x:astype("float16"), { axis = 1, dtype = "float32" })
      assert.equal("float32", y:dtype())
      near(y, want, 1e-6) -- (these inputs are exact in float16)
      local z = x[name](x, { dtype = "float64" })
      assert.equal("float64", z:dtype())
      near(z, nd[name](x), 1e-6)
      local h = nd[name](x, { dtype = "float16" })
      assert.equal("float16", h:dtype())
      near(h, nd[name](x), 2e-3)
    end
  end)
  it("passes the gradient back to the input's dtype", function()
    local x = nd.array({ { 1, 2, 3 } }):astype("float16")
    x:attach_grad()
    local y = mx.autograd.record(function() return nd.softmax(x, { dtype = "float32" }) end)
    y:backward(nd.array({ { 1, 0, 0 } }))
    assert.equal("float16", x:grad():dtype())
    local s = nd.softmax(nd.array({ { 1, 2, 3 } })):reshape(-1):tolist()
    near(x:grad(), { s[1] * (1 - s[1]), -s[1] * s[2], -s[1] * s[3] }, 2e-3)
  end)
  it("refuses a dtype that is not a float one, at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.softmax(nd.ones { 2 }, { dtype = "int32" }) return r end,
      line)
    assert.is_truthy(msg:find("softmax: dtype must be a float dtype", 1, true), msg)
  end)
  it("in symbols: inferred, bound, written and read as MXNet's dtype attribute", function()
    local S = mx.sym
    local x = S.var("x")
    local net = S.Group { S.softmax(x, { dtype = "float64" }),
      S.log_softmax(x, { axis = 1, dtype = "float16" }), S.softmax(x) }
    local _, o = net:infer_type { x = "float32" }
    assert.same({ "float64", "float16", "float32" }, o)
    local X = nd.array({ { 1, 2, 3 }, { 4, 5, 7 } })
    local ex = net:bind(mx.cpu(), { x = X })
    ex:forward()
    assert.equal("float64", ex.outputs[1]:dtype())
    near(ex.outputs[1], nd.softmax(X, { dtype = "float64" }), 0)
    assert.equal("float16", ex.outputs[2]:dtype())
    near(ex.outputs[2], nd.log_softmax(X, { axis = 1, dtype = "float16" }), 0)
    local js = net:tojson()
    assert.is_truthy(js:find('"op":"softmax","name":"[%w_]+","attrs":{"dtype":"float64"}'), js)
    local back = S.fromjson(js)
    local _, ob = back:infer_type { x = "float32" }
    assert.same(o, ob)
    assert.has_error(function() S.softmax(x, { dtype = "int32" }):bind(mx.cpu(), { x = X }):forward() end)
    -- hybridized: the eager values
    local B = mx.gluon.HybridBlock:extend("SoftmaxDtype")
    function B.forward(_, y) return nd.softmax(y, { dtype = "float64" }) end
    local b = B()
    b:hybridize()
    local y1 = b(X)
    assert.equal("float64", y1:dtype())
    near(y1, nd.softmax(X, { dtype = "float64" }), 0)
    near(b(X), y1, 0)
  end)
  it("the kernels take the data's dtype: the op called without mx.nd's casts is an error", function()
    local W, D = require("mx.nd.wrappers"), require("mx.nd.dispatch")
    local op = require("mx.core.lib").ops_by_name.softmax
    for _, path in ipairs { D.eager, D.ref } do
      local raw = W.make(op, path)
      local ok, err = pcall(raw, nd.ones { 2, 3 }, { dtype = "float64" })
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find("softmax: dtype float64 differs from the data's float32", 1, true),
        tostring(err))
      assert.same({ 2, 3 }, raw(nd.ones { 2, 3 }, { dtype = "float32" }):shape())
    end
  end)
end)
