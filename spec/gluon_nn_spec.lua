-- gluon.nn layers against hand-computed results; the dropout op.
local mx = require("mx")
local nn = mx.gluon.nn
local nd = mx.nd

local close = require("helpers.close").within(1e-5)

-- out[i][j] = sum_k x[i][k] * W[j][k] + b[j], by hand
local function dense_ref(x, W, b, n, k, m)
  local r = {}
  for i = 1, n do
    for j = 1, m do
      local s = b and b[j] or 0
      for q = 1, k do s = s + x[(i - 1) * k + q] * W[(j - 1) * k + q] end
      r[#r + 1] = s
    end
  end
  return r
end

describe("nn.Dense", function()
  it("computes x . W^T + b with the inferred in_units", function()
    local d = nn.Dense(3)
    d:initialize(mx.init.Normal(0.5))
    local x = nd.random_uniform { shape = { 4, 5 }, low = -1, high = 1 }
    assert.are.same({ 3, 5 }, d(x):shape() and d.weight:data():shape())
    d.bias:set_data(nd.array { 0.5, -1, 2 })
    local y = d(x)
    close(y, dense_ref(x:tolist(), d.weight:data():tolist(), { 0.5, -1, 2 }, 4, 5, 3))
  end)

  it("flattens trailing axes by default, applies to the last axis with flatten=false", function()
    local d = nn.Dense(2, { use_bias = false })
    d:initialize(mx.init.Uniform(1))
    local x = nd.random_uniform { shape = { 3, 2, 2 } }
    local y = d(x)
    assert.are.same({ 3, 2 }, y:shape())
    assert.are.same({ 2, 4 }, d.weight:data():shape())
    close(y, dense_ref(x:tolist(), d.weight:data():tolist(), nil, 3, 4, 2))
    local e = nn.Dense(2, { flatten = false })
    e:initialize()
    local z = e(x)
    assert.are.same({ 3, 2, 2 }, z:shape())
    close(z, dense_ref(x:tolist(), e.weight:data():tolist(), { 0, 0 }, 6, 2, 2))
  end)

  it("applies its activation, initializes at once with in_units", function()
    local d = nn.Dense(4, { in_units = 3, activation = "relu" })
    d:initialize(mx.init.Normal(1))
    assert.are.same({ 4, 3 }, d.weight:data():shape())
    local x = nd.random_normal { shape = { 5, 3 } }
    local ref = dense_ref(x:tolist(), d.weight:data():tolist(), { 0, 0, 0, 0 }, 5, 3, 4)
    for i = 1, #ref do ref[i] = math.max(0, ref[i]) end
    close(d(x), ref)
  end)

  it("relu fused into the op gives the unfused layer's outputs and gradients", function()
    -- layer-sized (oneDNN's primitive with a relu post-op); the unfused reference is
    -- fully_connected then relu, each with its own gradient formula
    local d = nn.Dense(64, { in_units = 100, activation = "relu" })
    d:initialize(mx.init.Xavier())
    local x = nd.random_normal { shape = { 32, 100 } }
    local y = mx.autograd.record(function() return (d(x) * d(x)):sum() end)
    y:backward()
    local w, b = d.weight:data():copy(), d.bias:data():copy()
    w:attach_grad()
    b:attach_grad()
    local y2 = mx.autograd.record(function()
      local h = nd.relu(nd.fully_connected(x, w, b))
      return (h * h):sum()
    end)
    y2:backward()
    assert.is_true(math.abs(y:item() - y2:item()) <= 1e-4 * math.abs(y2:item()))
    assert.is_true((d.weight:grad() - w:grad()):abs():max():item() < 1e-3)
    assert.is_true((d.bias:grad() - b:grad()):abs():max():item() < 1e-3)
  end)

  it("rejects bad arguments", function()
    assert.has_error(function() nn.Dense(0) end)
    assert.has_error(function() nn.Dense(3, { activaton = "relu" }) end)
    assert.has_error(function() nn.Dense(3, { activation = "swishy" }) end)
  end)
end)

describe("nn.Activation, Flatten, Lambda, Sequential", function()
  it("Activation matches the formulas", function()
    local vals = { -3, -0.5, 0.25, 2 }
    local x = nd.array(vals, { dtype = "float64" })
    local f = {
      relu = function(v) return math.max(v, 0) end,
      sigmoid = function(v) return 1 / (1 + math.exp(-v)) end,
      tanh = function(v) return math.tanh(v) end,
      softrelu = function(v) return math.log(1 + math.exp(v)) end,
      softsign = function(v) return v / (1 + math.abs(v)) end,
    }
    for name, fn in pairs(f) do
      local e = {}
      for i, v in ipairs(vals) do e[i] = fn(v) end
      close(nn.Activation(name)(x), e, 1e-12)
      close(nd.activation(x, { act_type = name }), e, 1e-12)
    end
    assert.has_error(function() nn.Activation("gelu2") end)
  end)

  it("Flatten and Lambda", function()
    local x = nd.ones { 2, 3, 4 }
    assert.are.same({ 2, 12 }, nn.Flatten()(x):shape())
    close(nn.Lambda("tanh")(nd.array { 0.5 }), { math.tanh(0.5) })
    close(nn.Lambda(function(a) return a * 2 end)(nd.array { 1, 2 }), { 2, 4 })
    assert.has_error(function() nn.Lambda("no_such_op") end)
  end)

  it("Sequential chains children and indexes them 1-based", function()
    local net = nn.Sequential()
    local a, b = nn.Dense(4), nn.Dense(2)
    net:add(a, nn.Activation("tanh")):add(b)
    assert.are.equal(3, net:len())
    assert.are.equal(a, net[1])
    assert.are.equal(b, net:get(-1))
    net:initialize()
    local x = nd.ones { 3, 5 }
    local y = net(x)
    close(y, b(nd.tanh(a(x))):tolist())
    assert.has_error(function() net:add(5) end)
  end)
end)

describe("errors", function()
  it("blame the caller's line", function()
    local function where(f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      return tostring(err)
    end
    local here = "gluon_nn_spec.lua:"
    assert.truthy(where(function() local r = nn.Dense(0) return r end):find(here, 1, true))
    assert.truthy(where(function() local r = nn.Dropout(3) return r end):find(here, 1, true))
    assert.truthy(where(function() local r = mx.gluon.loss.L1Loss { bad = 1 } return r end)
      :find(here, 1, true))
    assert.truthy(where(function() local r = mx.optimizer.Adam { beta3 = 1 } return r end)
      :find(here, 1, true))
    assert.truthy(where(function() local r = mx.gluon.Parameter("w", { bad = 1 }) return r end)
      :find(here, 1, true))
    local d = nn.Dense(2, { in_units = 3 })
    d:initialize()
    assert.truthy(where(function() local r = d(nd.ones { 2, 4 }) return r end):find(here, 1, true))
    local tr = mx.gluon.Trainer(d:collect_params(), "sgd")
    assert.truthy(where(function() tr:step(-1) end):find(here, 1, true))
  end)

  it("p.grad_req = req is set_grad_req (MXNet's property), with its validation", function()
    local d = nn.Dense(2, { in_units = 3 })
    d:initialize()
    local p = d.weight
    p.grad_req = "null"
    assert.are.equal("null", p.grad_req)
    assert.has_error(function() p:grad() end)
    p.grad_req = "add"
    assert.are.equal("add", p.grad_req)
    assert.truthy(p:grad())
    local ok, err = pcall(function() p.grad_req = "none" end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("set_grad_req", 1, true), tostring(err))
    assert.truthy(tostring(err):find("gluon_nn_spec.lua:%d+:"), tostring(err))
    assert.are.equal("add", p.grad_req)
  end)
end)

describe("Sequential indexing and ranges", function()
  local H = require("helpers.la")
  local FILE = "gluon_nn_spec.lua"
  local function net4()
    local net = nn.Sequential()
    net:add(nn.Dense(3, { in_units = 2 }), nn.Activation("tanh"), nn.Dense(4, { in_units = 3 }),
      nn.Dense(1, { in_units = 4 }))
    net:initialize()
    return net
  end

  it("net[{a, b}] is a new Sequential sharing children a..b (inclusive)", function()
    local net = net4()
    local s = net[{ 2, 3 }]
    assert.are.equal(getmetatable(net), getmetatable(s))
    assert.are.equal(2, s:len())
    assert.are.equal(net[2], s[1])
    assert.are.equal(net[3], s[2])
    assert.are.same({ "0.weight", "0.bias" }, net[{ 3, 3 }]:collect_params():keys())
    assert.are.equal(net[3].weight, s:collect_params()["1.weight"]) -- shared, not copied
    local x = nd.array { { 0.5, -1 }, { 2, 0.25 } }
    local h = net[1](x)
    close(s(h), net[3](net[2](h)):tolist())
    close(net[{ 1, 4 }](x), net(x):tolist())
    assert.are.equal(3, net[{ 2 }]:len()) -- {a}: to the last child
    assert.are.equal(net[4], net[{ -2, -1 }][2])
    assert.are.equal(0, net[{ 3, 2 }]:len())
    assert.are.equal(net[4], net:get({ 4, 4 })[1])
    assert.are.equal(4, net:len()) -- the original is unchanged
  end)

  it("out-of-range indices and malformed ranges are errors at the caller's line", function()
    local net = net4()
    H.assert_error(function(mark) mark() return net[5] end, FILE,
      "Sequential: index 5 out of range for 4 children")
    H.assert_error(function(mark) mark() return net[-5] end, FILE, "out of range")
    H.assert_error(function(mark) mark() local _ = net:get(0) end, FILE,
      "Sequential: index must be a non-zero integer")
    H.assert_error(function(mark) mark() return net[{ 1, 9 }] end, FILE,
      "Sequential: index 9 out of range for 4 children")
    H.assert_error(function(mark) mark() return net[{ 1.5, 2 }] end, FILE, "range start")
    H.assert_error(function(mark) mark() return net[{}] end, FILE, "a range is {first, last}")
    H.assert_error(function(mark) mark() return net[{ 1, 2, 3 }] end, FILE, "a range is")
  end)
end)

describe("HybridSequential, HybridLambda, Identity, ReflectionPad2D, Concatenate",
  function()
  local H = require("helpers.la")
  local FILE = "gluon_nn_spec.lua"

  it("HybridSequential runs children assigned as attributes, in registration order", function()
    -- MXNet 1.9 basic_layers.py: HybridSequential.hybrid_forward iterates
    -- self._children.values(), which Block.__setattr__ fills for attributes too
    local net = nn.HybridSequential()
    net.fc1 = nn.Dense(3, { in_units = 2 })
    net:add(nn.Activation("tanh"), nn.Dense(1, { in_units = 3 }))
    net:initialize()
    assert.are.equal("HybridSequential", getmetatable(net).__name)
    assert.are.equal(3, net:len())
    assert.are.equal(net.fc1, net[1])
    assert.are.same({ "fc1.weight", "fc1.bias", "2.weight", "2.bias" },
      net:collect_params():keys()) -- add() names by the count of children before it
    local x = nd.array { { 0.5, -1 }, { 2, 0.25 } }
    close(net(x), net[3](nd.tanh(net.fc1(x))):tolist())
    net.fc1 = nil -- removing the attribute removes the layer from the chain
    assert.are.equal(2, net:len())
    H.assert_error(function(mark) mark() net:add(nn.Dense(1)) end, FILE,
      "HybridSequential:add: a child named '2' exists already")
    H.assert_error(function(mark) mark() nn.HybridSequential():add(4) end, FILE,
      "HybridSequential:add: argument 1 is not a Block")
    assert.truthy(tostring(net):find("^HybridSequential%("))
    assert.are.equal(2, net[{ 1, 2 }]:len())
    assert.are.equal("HybridSequential", getmetatable(net[{ 1, 2 }]).__name)
  end)

  it("Sequential runs attribute children too (MXNet's Sequential.forward)", function()
    local net = nn.Sequential()
    net:add(nn.Dense(2, { in_units = 2 }))
    net.act = nn.Activation("relu")
    net:initialize()
    local x = nd.array { { 1, -2 }, { -3, 4 } }
    close(net(x), nd.relu(net[1](x)):tolist())
  end)

  it("HybridLambda calls fn(F, x, ...) with F = mx.nd, or an mx.nd op by name", function()
    local x = nd.array { -1, 0.5 }
    close(nn.HybridLambda("tanh")(x), { math.tanh(-1), math.tanh(0.5) })
    local seen
    local hl = nn.HybridLambda(function(F, a, b)
      seen = F
      return F.add(a, b)
    end)
    close(hl(x, x), { -2, 1 })
    assert.are.equal(nd, seen)
    assert.are.equal("HybridLambda", getmetatable(hl).__name)
    H.assert_error(function(mark) mark() nn.HybridLambda("no_such_op") end, FILE,
      "HybridLambda: mx.nd has no function 'no_such_op'")
    H.assert_error(function(mark) mark() nn.HybridLambda(3) end, FILE,
      "HybridLambda: expected a function or an mx.nd op name, got number")
    H.assert_error(function(mark) mark() nn.Lambda(true) end, FILE, "Lambda: expected a function")
  end)

  it("Identity returns its input", function()
    local x = nd.array { { 1, 2 } }
    assert.are.equal(x, nn.Identity()(x))
    H.assert_error(function(mark) mark() nn.Identity()(5) end, FILE,
      "Identity: input must be a tensor, got number")
  end)

  it("ReflectionPad2D mirrors H and W without repeating the border (MXNet's pad reflect)",
    function()
    local function ref(v, N, C, Hh, W, t, b, l, r)
      local function m(i, n) -- mirror a 1-based index into 1..n
        if i < 1 then return 2 - i end
        if i > n then return 2 * n - i end
        return i
      end
      local out = {}
      for n = 1, N do for c = 1, C do
        for i = 1 - t, Hh + b do for j = 1 - l, W + r do
          out[#out + 1] = v[(((n - 1) * C + c - 1) * Hh + m(i, Hh) - 1) * W + m(j, W)]
        end end
      end end
      return out
    end
    local vals = {}
    for i = 1, 2 * 2 * 3 * 4 do vals[i] = i * 0.5 - 3 end
    local x = nd.array(vals):reshape { 2, 2, 3, 4 }
    local y = nn.ReflectionPad2D(2)(x)
    assert.are.same({ 2, 2, 7, 8 }, y:shape())
    close(y, ref(vals, 2, 2, 3, 4, 2, 2, 2, 2))
    local z = nn.ReflectionPad2D { 0, 0, 0, 0, 1, 0, 2, 3 }(x)
    assert.are.same({ 2, 2, 4, 9 }, z:shape())
    close(z, ref(vals, 2, 2, 3, 4, 1, 0, 2, 3))
    assert.are.same(x:shape(), nn.ReflectionPad2D()(x):shape())
    H.assert_error(function(mark) mark() nn.ReflectionPad2D(-1) end, FILE,
      "ReflectionPad2D: padding must be a non-negative integer or a list of 8")
    H.assert_error(function(mark) mark() nn.ReflectionPad2D { 1, 1, 0, 0, 1, 1, 1, 1 } end, FILE,
      "ReflectionPad2D: the batch and channel axes cannot be padded")
    H.assert_error(function(mark) mark() nn.ReflectionPad2D(1)(nd.ones { 3, 4 }) end, FILE,
      "ReflectionPad2D: expected a 4-d (N, C, H, W) input, got 2-d")
    local ok, err = pcall(function() return nn.ReflectionPad2D(3)(x) end) -- 3 >= H
    assert.is_false(ok)
    assert.truthy(tostring(err):find("pad", 1, true), tostring(err))
  end)

  it("HybridConcatenate feeds the input to every child and joins along axis", function()
    local c = nn.HybridConcatenate()
    c:add(nn.Dense(2, { in_units = 3 }), nn.Identity(), nn.Dense(1, { in_units = 3 }))
    c:initialize()
    local x = nd.array { { 1, 2, 3 }, { -1, 0, 2 } }
    local y = c(x)
    assert.are.same({ 2, 6 }, y:shape())
    local a, b = c[1](x):tolist(), c[3](x):tolist() -- flat, row-major
    local xs = x:tolist()
    local want = {}
    for i = 1, 2 do
      local k = 3 * (i - 1)
      for _, v in ipairs { a[2 * i - 1], a[2 * i], xs[k + 1], xs[k + 2], xs[k + 3], b[i] } do
        want[#want + 1] = v
      end
    end
    close(y, want)
    local c1 = nn.Concatenate(1)
    c1:add(nn.Identity(), nn.Identity())
    assert.are.same({ 4, 3 }, c1(x):shape())
    H.assert_error(function(mark) mark() nn.Concatenate(0) end, FILE,
      "Concatenate: axis must be a non-zero integer")
    H.assert_error(function(mark) mark() local _ = nn.HybridConcatenate()(x) end, FILE,
      "HybridConcatenate: no children to concatenate")
  end)
end)
