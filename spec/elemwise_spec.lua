-- spec/elemwise_spec.lua — elementwise ops: the optimised cpu kernels against the
-- reference kernels (mx.nd._ref) over shapes (0-d, 0-size, broadcasting, views, sizes
-- that take the parallel path) and dtypes, values computed independently in Lua, and
-- error messages that name op/argument/shapes at the caller's line.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("elemwise_spec.lua")

local rand, check = oracle.rand, oracle.check
local function vals(t) return t:tolist() end
local function arr(t, dtype) return mx.nd.array(t, { dtype = dtype }) end


local UNARY = {
  -- name, domain, dtypes (beyond f32/f64 that every op is checked at)
  { "neg" }, { "abs" }, { "sign" }, { "square" }, { "relu" },
  { "exp" }, { "log", { 0.01, 5 } }, { "sqrt", { 0, 5 } }, { "tanh" }, { "sigmoid" },
  { "sin", { -10, 10 } }, { "cos", { -10, 10 } }, { "log1p", { -0.99, 5 } }, { "expm1" },
  { "reciprocal", { 0.1, 3 } }, { "rsqrt", { 0.01, 5 } }, { "softrelu", { -30, 30 } },
  { "softsign" }, { "erf", { -3, 3 } }, { "floor", { -5, 5 } }, { "ceil", { -5, 5 } },
  { "round", { -5, 5 } }, { "trunc", { -5, 5 } }, { "logical_not", { -1, 1 } },
}
local SHAPES = { {}, { 1 }, { 7 }, { 3, 4 }, { 2, 0, 3 }, { 2, 3, 5 }, { 140001 } }
local FLOATS = { "float32", "float64", "float16", "bfloat16" }
local INTS = { "int32", "int64", "int8", "uint8" }

describe("elementwise unary ops", function()
  for _, u in ipairs(UNARY) do
    local name, dom = u[1], u[2]
    it(name .. " matches the reference over shapes and dtypes", function()
      for _, shape in ipairs(SHAPES) do
        for _, dt in ipairs(FLOATS) do
          -- the big size (parallel paths) at float32 and float16 (converting path)
          if #shape < 1 or shape[1] ~= 140001 or dt == "float32" or dt == "float16" then
            check(mx, name, { rand(mx, shape, dt, dom) })
          end
        end
      end
      for _, dt in ipairs(INTS) do
        local d = dom and { math.ceil(dom[1]), math.floor(dom[2]) } or nil
        if dt == "uint8" and d and d[1] < 0 then d[1] = 0 end
        check(mx, name, { rand(mx, { 5, 3 }, dt, d) })
      end
      -- a leading-axis view (row 2 of a (3, 4, 5) base)
      local v = oracle.view_of(mx, rand(mx, { 4, 5 }, "float32", dom))
      check(mx, name, { v })
    end)
  end

  it("computes values independently of the kernels", function()
    local x = { -2.5, -1, -0.5, 0, 0.5, 1, 2.5 }
    local t = arr(x, "float64")
    local function each(f) local r = {} for i = 1, #x do r[i] = f(x[i]) end return r end
    local function near(a, b)
      for i = 1, #a do assert.is_true(math.abs(a[i] - b[i]) <= 1e-12 * (1 + math.abs(b[i])), i) end
    end
    near(vals(mx.nd.sin(t)), each(math.sin))
    near(vals(mx.nd.cos(t)), each(math.cos))
    near(vals(mx.nd.exp(t)), each(math.exp))
    near(vals(mx.nd.tanh(t)), each(function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end))
    near(vals(mx.nd.sigmoid(t)), each(function(v) return 1 / (1 + math.exp(-v)) end))
    near(vals(mx.nd.softsign(t)), each(function(v) return v / (1 + math.abs(v)) end))
    near(vals(mx.nd.softrelu(t)), each(function(v) return math.log(1 + math.exp(v)) end))
    assert.same({ -3, -1, -1, 0, 0, 1, 2 }, vals(mx.nd.floor(t)))
    assert.same({ -2, -1, -0, 0, 1, 1, 3 }, vals(mx.nd.ceil(t)))
    assert.same({ -3, -1, -1, 0, 1, 1, 3 }, vals(mx.nd.round(t))) -- halves away from zero
    assert.same({ -2, -1, 0, 0, 0, 1, 2 }, vals(mx.nd.trunc(t)))
    assert.same({ 0, 0, 0, 1, 0, 0, 0 }, vals(mx.nd.logical_not(t)))
    -- stable softrelu and accurate log1p / expm1 at the extremes
    local e = vals(mx.nd.softrelu(arr({ -1000, 1000, 80 }, "float32")))
    assert.same({ 0, 1000, 80 }, e)
    -- log1p(x) = x - x^2/2 + ..., expm1(x) = x + x^2/2 + ...: log(1 + x) would lose digits
    local small = vals(mx.nd.log1p(arr({ 1e-10 }, "float64")))[1]
    assert.is_true(math.abs(small - (1e-10 - 5e-21)) < 1e-25)
    small = vals(mx.nd.expm1(arr({ 1e-10 }, "float64")))[1]
    assert.is_true(math.abs(small - (1e-10 + 5e-21)) < 1e-25)
    near(vals(mx.nd.erf(arr({ 0, 0.5, -1 }, "float64"))), { 0, 0.5204998778130465, -0.8427007929497149 })
    near(vals(mx.nd.rsqrt(arr({ 4, 0.25 }, "float64"))), { 0.5, 2 })
    near(vals(mx.nd.reciprocal(arr({ 4, -0.25 }, "float64"))), { 0.25, -4 })
  end)

  it("keeps integer dtypes for integer ops and gives float32 for float ops", function()
    local i = arr({ -3, 0, 4 }, "int32")
    assert.equal("int32", mx.nd.abs(i):dtype())
    assert.same({ 3, 0, 4 }, vals(mx.nd.abs(i)))
    assert.same({ -1, 0, 1 }, vals(mx.nd.sign(i)))
    assert.same({ 9, 0, 16 }, vals(mx.nd.square(i)))
    assert.same({ 0, 0, 4 }, vals(mx.nd.relu(i)))
    assert.equal("float32", mx.nd.exp(i):dtype())
    assert.equal("float32", mx.nd.sin(i):dtype())
    assert.same({ -3, 0, 4 }, vals(mx.nd.floor(i)))
    assert.equal("bool", mx.nd.logical_not(arr({ 1, 0 }, "bool")):dtype())
    assert.same({ 0, 1 }, vals(mx.nd.logical_not(arr({ 1, 0 }, "bool"))))
  end)

  it("keeps NaN and infinities where IEEE says", function()
    local t = arr({ 0 / 0, math.huge, -math.huge }, "float32")
    local r = vals(mx.nd.exp(t))
    assert.is_true(r[1] ~= r[1])
    assert.same({ math.huge, 0 }, { r[2], r[3] })
    r = vals(mx.nd.relu(t))
    assert.is_true(r[1] ~= r[1]) -- NaN stays NaN (MXNet)
    assert.same({ math.huge, 0 }, { r[2], r[3] })
    -- relu_backward is ograd * (data > 0), the product relu's gradient was before it
    -- existed: a NaN or infinite ograd where data <= 0 still gives NaN
    local g = arr({ 2, 0 / 0, math.huge, -1 }, "float32")
    r = vals(mx.nd.relu_backward(g, arr({ 1, -1, 0, 3 }, "float32")))
    assert.same({ 2, -1 }, { r[1], r[4] })
    assert.is_true(r[2] ~= r[2] and r[3] ~= r[3])
    assert.same({ 0, 5 }, vals(mx.nd.relu_backward(arr({ 7, 5 }, "int32"), arr({ -2, 1 }, "int32"))))
    check(mx, "tanh", { t })
    check(mx, "sigmoid", { t })
  end)
end)

local BINARY = { "add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "not_equal",
  "greater", "greater_equal", "lesser", "lesser_equal", "relu_backward" }
local PAIRS = {
  { { 3, 4 }, { 3, 4 } }, { { 3, 4 }, { 4 } }, { { 3, 4 }, { 3, 1 } }, { { 2, 1, 4 }, { 3, 1 } },
  { {}, { 3, 4 } }, { { 3, 4 }, {} }, { { 1 }, { 1 } }, { {}, {} }, { { 2, 0, 3 }, { 3 } },
  { { 2, 3, 4, 5 }, { 3, 1, 5 } }, { { 4, 1, 6 }, { 1, 5, 1 } },
  { { 400, 400 }, { 400 } }, { { 400, 400 }, { 400, 1 } }, { { 140001 }, { 140001 } },
  { { 140001 }, {} }, { { 7, 1, 11000 }, { 1, 3, 1 } },
}

describe("elementwise binary ops", function()
  for _, name in ipairs(BINARY) do
    it(name .. " matches the reference with broadcasting, dtypes and views", function()
      local dom = (name == "pow") and { 0.1, 3 } or nil
      for _, pr in ipairs(PAIRS) do
        local big = #pr[1] > 0 and pr[1][1] >= 400 or #pr[1] == 3 and pr[1][3] == 11000
        for _, dt in ipairs(big and { "float32" } or FLOATS) do
          check(mx, name, { rand(mx, pr[1], dt, dom), rand(mx, pr[2], dt, dom) })
        end
      end
      if name ~= "pow" then
        for _, dt in ipairs(INTS) do
          -- domains include 0 so integer division by zero is exercised
          check(mx, name, { rand(mx, { 3, 4 }, dt), rand(mx, { 4 }, dt) })
          check(mx, name, { rand(mx, { 3, 4 }, dt), rand(mx, { 3, 4 }, dt) })
        end
      end
      -- the converting path in parallel blocks: bf16 pairs and bf16 with float32 (mx.amp's)
      check(mx, name, { rand(mx, { 140001 }, "bfloat16", dom), rand(mx, { 140001 }, "bfloat16", dom) })
      check(mx, name, { rand(mx, { 140001 }, "float32", dom), rand(mx, { 140001 }, "bfloat16", dom) })
      check(mx, name, { rand(mx, { 140001 }, "bfloat16", dom), rand(mx, {}, "bfloat16", dom) })
      -- mixed dtypes promote
      check(mx, name, { rand(mx, { 3, 4 }, "int32", { 1, 5 }), rand(mx, { 4 }, "float32", dom) })
      check(mx, name, { rand(mx, { 3, 4 }, "float16", dom), rand(mx, { 3, 1 }, "float32", dom) })
      -- views of the same base on both sides
      local base = rand(mx, { 3, 4, 5 }, "float32", dom)
      check(mx, name, { base[2], base[3] })
      check(mx, name, { base[1], rand(mx, { 5 }, "float32", dom) })
    end)
  end

  it("computes spot values and integer division like C (by zero: 0)", function()
    local a, b = arr({ 7, -7, 7, 0, 5 }, "int32"), arr({ 2, 2, 0, 0, -1 }, "int32")
    assert.same({ 3, -3, 0, 0, -5 }, vals(mx.nd.div(a, b)))
    assert.same({ 3.5, -3.5 }, { vals(mx.nd.div(arr({ 7, -7 }), arr({ 2, 2 })))[1],
      vals(mx.nd.div(arr({ 7, -7 }), arr({ 2, 2 })))[2] })
    local x = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.same({ 11, 22, 33, 14, 25, 36 }, vals(x + arr({ 10, 20, 30 })))
    assert.same({ 11, 12, 13, 24, 25, 26 }, vals(x + arr({ { 10 }, { 20 } })))
    assert.same({ 0, 0, 1, 1, 1, 1 }, vals(mx.nd.greater(x, arr(2.5))))
    assert.equal("float32", mx.nd.greater(x, arr(2.5)):dtype())
    local m = vals(mx.nd.maximum(arr({ 0 / 0, 1, 3 }), arr({ 1, 0 / 0, 2 })))
    assert.is_true(m[1] ~= m[1] and m[2] ~= m[2])
    assert.equal(3, m[3])
    assert.same({ 8, 0.25 }, vals(mx.nd.pow(arr({ 2, 4 }), arr({ 3, -1 }))))
  end)

  it("writes into out= and in place, and handles a 1-element add", function()
    local a, b, c = arr({ 1.5 }), arr({ 2.25 }), arr({ 0 })
    local r = mx.nd.add(a, b, { out = c })
    assert.equal(3.75, c:item())
    assert.is_true(rawequal(r, c) or r == c)
    local x = rand(mx, { 100000 }, "float32")
    local want = mx.nd._ref.mul(x, x)
    mx.nd.mul(x, x, { out = x })
    assert.is_true(oracle.close(x, want))
  end)

  it("reports shape errors naming the op and both shapes at the caller's line", function()
    local a, b = mx.nd.zeros({ 2, 3 }), mx.nd.zeros({ 4 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = mx.nd.add(a, b) return r end, line)
    assert.is_truthy(msg:find("add", 1, true) and msg:find("(2, 3)", 1, true)
      and msg:find("(4,)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = a * mx.nd.zeros({ 3, 2 }) return r end, line)
    assert.is_truthy(msg:find("mul", 1, true) and msg:find("(3, 2)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = mx.nd.add(a, b, { out = mx.nd.zeros({ 2 }) }) return r end, line)
    assert.is_truthy(msg:find("add", 1, true), msg)
  end)
end)

local SCALAR = { "add_scalar", "sub_scalar", "rsub_scalar", "mul_scalar", "div_scalar",
  "rdiv_scalar", "pow_scalar", "rpow_scalar", "maximum_scalar", "minimum_scalar", "equal_scalar",
  "not_equal_scalar", "greater_scalar", "greater_equal_scalar", "lesser_scalar",
  "lesser_equal_scalar" }

describe("elementwise scalar ops", function()
  for _, name in ipairs(SCALAR) do
    it(name .. " matches the reference", function()
      local pos = name:find("pow") or name == "rdiv_scalar"
      local dom = pos and { 0.1, 3 } or nil
      for _, s in ipairs({ 0.1, 2, -1.5, 0 }) do
        if not (pos and s <= 0) then
          for _, shape in ipairs({ {}, { 5 }, { 3, 4 }, { 0, 2 } }) do
            for _, dt in ipairs(FLOATS) do
              check(mx, name, { rand(mx, shape, dt, dom) }, { scalar = s })
            end
          end
          for _, dt in ipairs(INTS) do
            check(mx, name, { rand(mx, { 4, 3 }, dt, pos and { 1, 5 } or nil) }, { scalar = s })
          end
          check(mx, name, { rand(mx, { 140001 }, "float32", dom) }, { scalar = s })
          check(mx, name, { rand(mx, { 140001 }, "bfloat16", dom) }, { scalar = s })
        end
      end
    end)
  end

  it("compares with the scalar exactly (0.1 is the double 0.1; 2.5 against integers)", function()
    assert.same({ 1 }, vals(mx.nd.greater_scalar(arr({ 0.1 }, "float32"), { scalar = 0.1 })))
    assert.same({ 0, 0, 1 }, vals(mx.nd.greater_scalar(arr({ 1, 2, 3 }, "int32"), { scalar = 2.5 })))
    assert.same({ 2, 3, 3 }, vals(arr({ 7, 9, 10 }, "int32") / 3))
    assert.same({ 0, 0 }, vals(arr({ 7, -9 }, "int64") / 0))
    assert.same({ 1.5, 3 }, vals(3 / arr({ 2, 1 })))
    assert.same({ 4, 0.5 }, vals(2 ^ arr({ 2, -1 })))
  end)
end)

describe("clip, where, broadcast_to, broadcast_like", function()
  it("clip matches the reference and clips with one or both bounds", function()
    for _, dt in ipairs({ "float32", "float64", "float16", "int32", "int8", "uint8" }) do
      local x = rand(mx, { 4, 5 }, dt, oracle.is_int(dt) and { 0, 9 } or { -3, 3 })
      check(mx, "clip", { x }, { a_min = 1, a_max = 2.5 })
      check(mx, "clip", { x }, { a_min = 1 })
      check(mx, "clip", { x }, { a_max = 2 })
      check(mx, "clip", { x }, {})
    end
    check(mx, "clip", { rand(mx, { 140001 }, "float32") }, { a_min = -1, a_max = 1 })
    assert.same({ -1, -0.5, 1 }, vals(mx.nd.clip(arr({ -3, -0.5, 7 }), { a_min = -1, a_max = 1 })))
    local n = vals(mx.nd.clip(arr({ 0 / 0 }), { a_min = 0, a_max = 1 }))[1]
    assert.is_true(n ~= n)
  end)

  it("where selects elementwise (condition of x's shape) and promotes x/y", function()
    local c = arr({ { 1, 0, 1 }, { 0, 0, 1 } })
    local x, y = arr({ { 1, 2, 3 }, { 4, 5, 6 } }), arr({ { 10, 20, 30 }, { 40, 50, 60 } }, "float64")
    local r = mx.nd.where(c, x, y)
    assert.equal("float64", r:dtype())
    assert.same({ 1, 20, 3, 40, 50, 6 }, vals(r))
    check(mx, "where", { rand(mx, { 3, 4 }, "int32", { 0, 1 }), rand(mx, { 3, 4 }), rand(mx, { 3, 4 }) })
    check(mx, "where", { arr({ 1, 0 }, "bool"), rand(mx, { 2 }, "int32"), rand(mx, { 2 }, "int32") })
    check(mx, "where", { arr({ 0.5, 0, -0.25 }), rand(mx, { 3 }, "int8"), rand(mx, { 3 }, "int32") })
    check(mx, "where", { rand(mx, { 400, 400 }, "float64", { -1, 1 }), rand(mx, { 400, 400 }),
      rand(mx, { 400, 400 }, "float16") })
    check(mx, "where", { arr({ 1, 0 }, "uint8"), rand(mx, { 2 }, "bfloat16"), rand(mx, { 2 }, "float16") })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local q = mx.nd.where(arr({ 1, 0, 1 }), x, y) return q end, line)
    assert.is_truthy(msg:find("where", 1, true) and msg:find("(3,)", 1, true), msg)
  end)

  it("broadcast_to and broadcast_like copy along broadcast axes for every dtype", function()
    for _, dt in ipairs({ "float32", "float64", "float16", "int64", "int8", "bool" }) do
      local x = rand(mx, { 3, 1 }, dt)
      check(mx, "broadcast_to", { x }, { shape = { 2, 3, 4 } })
      check(mx, "broadcast_like", { x, mx.nd.zeros({ 3, 4 }) })
    end
    check(mx, "broadcast_to", { rand(mx, { 1, 1000 }) }, { shape = { 100, 1000 } })
    check(mx, "broadcast_to", { rand(mx, { 5 }) }, { shape = { 0, 5 } })
    check(mx, "broadcast_to", { rand(mx, {}) }, { shape = { 2, 0 } })
    local r = mx.nd.broadcast_to(arr({ { 1 }, { 2 } }), { shape = { 0, 3 } })
    assert.same({ 2, 3 }, r:shape())
    -- a 0 keeps data's dim, as MXNet 1.9.1 gives (1, 3) for broadcast_to(ones((1, 3)),
    -- shape=(0, 3)) and (2, 3) for shape=(2, 0); a new leading 0 dim is empty
    assert.same({ 1, 3 }, mx.nd.broadcast_to(mx.nd.ones({ 1, 3 }), { shape = { 0, 3 } }):shape())
    assert.same({ 2, 3 }, mx.nd.broadcast_to(mx.nd.ones({ 1, 3 }), { shape = { 2, 0 } }):shape())
    assert.same({ 0, 5 }, mx.nd.broadcast_to(mx.nd.ones({ 5 }), { shape = { 0, 5 } }):shape())
    assert.same({ 0, 3 }, mx.nd.broadcast_to(mx.nd.ones({ 0, 3 }), { shape = { 0, 3 } }):shape())
    assert.same({ 1, 1, 1, 2, 2, 2 }, vals(r))
    -- axis: the reduced axes of a reduction without keepdims
    r = mx.nd.broadcast_like(arr({ 1, 2 }), mx.nd.zeros({ 2, 3 }), { axis = 2 })
    assert.same({ 1, 1, 1, 2, 2, 2 }, vals(r))
    r = mx.nd.broadcast_like(arr({ 1, 2, 3 }), mx.nd.zeros({ 2, 3 }), { axis = 1 })
    assert.same({ 1, 2, 3, 1, 2, 3 }, vals(r))
    check(mx, "broadcast_like", { rand(mx, { 4 }), mx.nd.zeros({ 2, 4, 3 }) }, { axis = { 1, -1 } })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function()
      local q = mx.nd.broadcast_to(arr({ 1, 2 }), { shape = { 3 } }) return q end, line + 1)
    assert.is_truthy(msg:find("broadcast_to", 1, true) and msg:find("(3,)", 1, true), msg)
    local z = mx.nd.zeros({ 2, 3 })
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local q = mx.nd.broadcast_like(arr({ 1, 2 }), z, { axis = 4 }) return q end, line)
    assert.is_truthy(msg:find("broadcast_like", 1, true) and msg:find("axis=4", 1, true), msg)
  end)
end)

describe("second-order gradients through the op-table formulas", function()
  -- d/dx sum(w * f'(x)) by autograd (create_graph) against central differences of the
  -- first derivative, in float64: the grad formulas must themselves be differentiable
  local function second(f, xs, opts)
    local function first(v)
      local x = mx.nd.array(v, { dtype = "float64" })
      x:attach_grad()
      local gx
      mx.autograd.record(function()
        local y = f(x, opts)
        gx = mx.autograd.grad({ y:sum() }, { x }, { create_graph = true })[1]
      end)
      return x, gx
    end
    local x, gx = first(xs)
    local w = {}
    for i = 1, #xs do w[i] = 0.5 + 0.25 * i end
    local wt = mx.nd.array(w, { dtype = "float64" })
    local loss
    mx.autograd.record(function() loss = (gx * wt):sum() end)
    loss:backward()
    local analytic = x:grad():tolist()
    local eps = 1e-6
    for i = 1, #xs do
      local p, m = {}, {}
      for j = 1, #xs do p[j], m[j] = xs[j], xs[j] end
      p[i], m[i] = xs[i] + eps, xs[i] - eps
      local _, gp = first(p)
      local _, gm = first(m)
      local gpl, gml = gp:tolist(), gm:tolist()
      local num = 0
      for j = 1, #xs do num = num + w[j] * (gpl[j] - gml[j]) / (2 * eps) end
      assert.is_true(math.abs(analytic[i] - num) <= 1e-5 + 1e-3 * math.abs(num),
        string.format("element %d: autograd %.10g, numeric %.10g", i, analytic[i], num))
    end
  end

  it("holds for the new unary ops", function()
    local xs = { -0.7, 0.3, 1.1 }
    for _, name in ipairs({ "sin", "cos", "expm1", "softrelu", "erf", "softsign", "sigmoid" }) do
      second(mx.nd[name], xs)
    end
    second(mx.nd.log1p, { 0.2, 0.9, 1.7 })
    second(mx.nd.reciprocal, { 0.6, 0.9, 1.7 })
    second(mx.nd.rsqrt, { 0.6, 0.9, 1.7 })
  end)

  it("holds through reductions, broadcasting and softmax", function()
    local xs = { -0.7, 0.3, 1.1, 0.5 }
    second(function(x) return mx.nd.square(x):sum() * x end, xs)
    second(function(x) return mx.nd.norm(x) * x end, xs)
    second(function(x) return mx.nd.softmax(x:reshape({ 2, 2 })) end, xs)
    second(function(x) return mx.nd.log_softmax(x:reshape({ 2, 2 }), { axis = 1 }) end, xs)
    second(function(x) return mx.nd.mean(mx.nd.exp(x):reshape({ 2, 2 }), { axis = 2 }) end, xs)
  end)
end)

-- int64 beyond 2^53: doubles hold integers exactly only to 2^53, so every int64
-- path must stay in int64. Values are written and read through the data pointer as
-- int64_t (tolist goes through double); the expected integers are worked out by hand.
describe("int64 exactness above 2^53", function()
  local nd = mx.nd
  local P53, P62, MIN = 9007199254740993LL, 4611686018427387907LL, -9223372036854775807LL - 1
  local MAX = 9223372036854775807LL
  local I64 = require("helpers.i64")
  local mk, rd, same = I64.mk, I64.rd, I64.same
  -- op name, scalar, expected for X = {2^53+1, 2^62+3, -2^63, 5}
  local X = { P53, P62, MIN, 5LL }
  local CASES = {
    { "add_scalar", 0, X },
    { "mul_scalar", 1, X },
    { "sub_scalar", 3, { P53 - 3, P62 - 3, MAX - 2, 2LL } }, -- -2^63 - 3 wraps
    { "add_scalar", -1, { P53 - 1, P62 - 1, MAX, 4LL } },
    { "rsub_scalar", 0, { -P53, -P62, MIN, -5LL } },
    { "mul_scalar", 2, { 2 * P53, 2 * P62, 0LL, 10LL } },
    { "div_scalar", -1, { -P53, -P62, MIN, -5LL } }, -- INT64_MIN / -1 wraps, no trap
    { "div_scalar", 2, { 4503599627370496LL, 2305843009213693953LL, MIN / 2, 2LL } },
    { "maximum_scalar", 2 ^ 53, { P53, P62, 9007199254740992LL, 9007199254740992LL } },
    { "minimum_scalar", 2 ^ 53, { 9007199254740992LL, 9007199254740992LL, MIN, 5LL } },
    { "maximum_scalar", 2.5, { P53, P62, 2LL, 5LL } },
    { "equal_scalar", 2 ^ 53, { 0LL, 0LL, 0LL, 0LL } },
    { "not_equal_scalar", 2 ^ 53, { 1LL, 1LL, 1LL, 1LL } },
    { "greater_scalar", 2 ^ 53, { 1LL, 1LL, 0LL, 0LL } },
    { "greater_equal_scalar", 2 ^ 62, { 0LL, 1LL, 0LL, 0LL } },
    { "lesser_scalar", 4.5, { 0LL, 0LL, 1LL, 0LL } },
    { "lesser_equal_scalar", -2 ^ 63, { 0LL, 0LL, 1LL, 0LL } },
    { "greater_scalar", 2 ^ 63, { 0LL, 0LL, 0LL, 0LL } },
    { "equal_scalar", 0 / 0, { 0LL, 0LL, 0LL, 0LL } },
  }
  for _, c in ipairs(CASES) do
    it(c[1] .. " " .. tostring(c[2]) .. ": cpu and ref exact", function()
      local x = mk(X)
      same(c[3], rd(nd[c[1]](x, { scalar = c[2] })), "cpu " .. c[1])
      same(c[3], rd(nd._ref[c[1]](x, { scalar = c[2] })), "ref " .. c[1])
    end)
  end
  it("x + 0, x * 1, x - 3 and comparisons through the operators", function()
    local x = mk(X)
    same(X, rd(x + 0), "x + 0")
    same(X, rd(x * 1), "x * 1")
    same({ P53 - 3, P62 - 3, MAX - 2, 2LL }, rd(x - 3), "x - 3")
  end)
  it("clip compares exactly and never rounds", function()
    local x = mk(X)
    local want = { P53, 4611686018427387904LL, 0LL, 5LL }
    same(want, rd(nd.clip(x, { a_min = 0, a_max = 2 ^ 62 })), "cpu clip")
    same(want, rd(nd._ref.clip(x, { a_min = 0, a_max = 2 ^ 62 })), "ref clip")
    same(X, rd(nd.clip(x, { a_min = -2 ^ 63, a_max = 2 ^ 63 })), "cpu clip wide")
    same(X, rd(nd._ref.clip(x, { a_min = -2 ^ 63, a_max = 2 ^ 63 })), "ref clip wide")
  end)
  it("binary int64 ops agree between cpu and ref", function()
    local a, b = mk(X), mk({ 1LL, -3LL, -1LL, MAX })
    local W = {
      add = { P53 + 1, P62 - 3, MAX, MIN + 4 },
      sub = { P53 - 1, P62 + 3, MIN + 1, MIN + 6 },
      maximum = { P53, P62, -1LL, MAX },
      greater = { 1LL, 1LL, 0LL, 0LL },
    }
    for name, want in pairs(W) do
      same(want, rd(nd[name](a, b)), "cpu " .. name)
      same(want, rd(nd._ref[name](a, b)), "ref " .. name)
    end
  end)
  it("int32 and uint8 scalar paths stay exact at their extremes", function()
    local i32 = mx.nd.array({ 2147483647, -2147483648, 7 }, { dtype = "int32" })
    assert.are.same({ 2147483647, -2147483648, 7 }, (i32 + 0):tolist())
    assert.are.same({ 2147483646, 2147483647, 6 }, (i32 - 1):tolist()) -- wraps (MXNet)
    assert.are.same({ 1, 0, 0 }, mx.nd.greater_scalar(i32, { scalar = 2147483646.5 }):tolist())
    local u8 = mx.nd.array({ 255, 0, 3 }, { dtype = "uint8" })
    assert.are.same({ 255, 0, 3 }, (u8 * 1):tolist())
    assert.are.same({ 255, 0, 3 }, mx.nd._ref.mul_scalar(u8, { scalar = 1 }):tolist())
  end)
end)

-- the sweep's int64big cases: the reference (the oracle) is exact on int64 too
-- (integer-valued unary ops, relu_backward, where), and pow_scalar / rpow_scalar with an
-- integral exponent are integer powers in both kernels (wrapping mod 2^64; a negative
-- exponent gives 0 but for |x| == 1). Expected values worked out by hand.
describe("int64 exactness: unary ops, pow, where, relu_backward", function()
  local nd = mx.nd
  local I64 = require("helpers.i64")
  local mk, rd, same = I64.mk, I64.rd, I64.same
  local P53, MIN = 9007199254740993LL, -9223372036854775807LL - 1
  local X = { P53, -P53, MIN, 0LL, 3LL }
  local UN = {
    neg = { -P53, P53, MIN, 0LL, -3LL }, -- -INT64_MIN wraps to itself
    abs = { P53, P53, MIN, 0LL, 3LL },
    sign = { 1LL, -1LL, -1LL, 0LL, 1LL },
    square = { 18014398509481985LL, 18014398509481985LL, 0LL, 0LL, 9LL }, -- mod 2^64
    relu = { P53, 0LL, 0LL, 0LL, 3LL },
    floor = X, ceil = X, round = X, trunc = X,
  }
  for name, want in pairs(UN) do
    it(name .. ": cpu and ref exact", function()
      same(want, rd(nd[name](mk(X))), "cpu " .. name)
      same(want, rd(nd._ref[name](mk(X))), "ref " .. name)
    end)
  end
  local POW = {
    { "pow_scalar", 2, { 18014398509481985LL, 18014398509481985LL, 0LL, 0LL, 9LL } },
    { "pow_scalar", 3, { 27021597764222977LL, -27021597764222977LL, 0LL, 0LL, 27LL } },
    { "pow_scalar", 0, { 1LL, 1LL, 1LL, 1LL, 1LL } },
    { "pow_scalar", -1, { 0LL, 0LL, 0LL, 0LL, 0LL } },
    { "rpow_scalar", 2, { 0LL, 0LL, 0LL, 1LL, 8LL } }, -- 2^(2^53+1) wraps to 0; 2^-x is 0
    { "rpow_scalar", -1, { -1LL, -1LL, 1LL, 1LL, -1LL } }, -- (-1)^x by parity, any sign
    { "rpow_scalar", 1, { 1LL, 1LL, 1LL, 1LL, 1LL } },
    { "pow_scalar", 1.5, { 9223372036854775807LL, 0LL, 0LL, 0LL, 5LL } }, -- double, saturated
  }
  for _, c in ipairs(POW) do
    it(c[1] .. " " .. c[2] .. ": cpu and ref agree", function()
      same(c[3], rd(nd[c[1]](mk(X), { scalar = c[2] })), "cpu " .. c[1])
      same(c[3], rd(nd._ref[c[1]](mk(X), { scalar = c[2] })), "ref " .. c[1])
    end)
  end
  it("(-1)^x and 1^x with negative x, and where / relu_backward", function()
    local m1 = mk({ -1LL, 1LL, 2LL }, { 3 })
    same({ -1LL, 1LL, 0LL }, rd(nd.pow_scalar(m1, { scalar = -3 })), "cpu")
    same({ -1LL, 1LL, 0LL }, rd(nd._ref.pow_scalar(m1, { scalar = -3 })), "ref")
    same({ 1LL, 1LL, 0LL }, rd(nd.pow_scalar(m1, { scalar = -2 })), "cpu even")
    same({ 1LL, 1LL, 0LL }, rd(nd._ref.pow_scalar(m1, { scalar = -2 })), "ref even")
    local c = nd.array({ 1, 0, 1, 0, 1 }, { dtype = "int64" })
    local y = mk({ 1LL, 2LL, 3LL, 4LL, 5LL })
    local want = { P53, 2LL, MIN, 4LL, 3LL }
    same(want, rd(nd.where(c, mk(X), y)), "cpu where")
    same(want, rd(nd._ref.where(c, mk(X), y)), "ref where")
    local d = mk({ 1LL, -1LL, 1LL, 0LL, 7LL })
    same({ P53, 0LL, MIN, 0LL, 3LL }, rd(nd.relu_backward(mk(X), d)), "cpu relu_backward")
    same({ P53, 0LL, MIN, 0LL, 3LL }, rd(nd._ref.relu_backward(mk(X), d)), "ref relu_backward")
  end)
end)
