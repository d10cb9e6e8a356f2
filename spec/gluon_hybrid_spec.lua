-- hybridize (gluon/_hybrid.lua): traced graphs replay to eager mode's values and
-- gradients, guards re-trace instead of reusing a stale branch, one tape node per call.
local mx = require("mx")
local nd, nn, autograd = mx.nd, mx.gluon.nn, mx.autograd
local H = require("mx.gluon._hybrid")

local function close(a, b, tol)
  a, b = a:tolist(), b:tolist()
  assert.equal(#a, #b)
  for i = 1, #a do assert.near(a[i], b[i], tol or 1e-5) end
end

local function mlp(seed)
  mx.random.seed(seed or 0)
  local net = nn.HybridSequential()
  net:add(nn.Dense(16, { activation = "relu" }), nn.Dense(8, { activation = "tanh" }), nn.Dense(3))
  net:initialize()
  net(nd.zeros({ 1, 7 })) -- the deferred shapes, drawn right after the seed
  return net
end

local function grads_of(net, x)
  local d = net:collect_params()
  for _, n in ipairs(d:keys()) do d:get(n):zero_grad() end
  local y
  autograd.record(function() y = net(x); y = (y * y):sum() end)
  y:backward()
  local g = {}
  for _, n in ipairs(d:keys()) do g[n] = d:get(n):grad():copy() end
  return g, y
end

describe("hybridize", function()
  it("replays an MLP to the eager values and gradients (trace, then replays)", function()
    local x = nd.random.normal(0, 1, { 5, 7 })
    local ref = mlp(1)
    local want = ref(x)
    local gwant = grads_of(ref, x)
    local net = mlp(1)
    net:hybridize()
    for _ = 1, 3 do
      close(want, net(x))
      local g = grads_of(net, x)
      for n, v in pairs(gwant) do close(v, g[n]) end
    end
    local with_backward = 0
    for _, list in pairs(H.cached_op(net).cache) do
      for _, v in ipairs(list) do if v.bexec then with_backward = with_backward + 1 end end
    end
    assert.equal(1, with_backward) -- one recording signature: one backward graph
    assert.is_truthy(H.last_variant(net))
  end)

  it("records one tape node per call of a hybridized block", function()
    local net = mlp(2)
    net:hybridize()
    local x = nd.ones({ 2, 7 })
    autograd.record(function() return net(x) end) -- trace
    local T = require("mx.autograd.tape")
    local before = 0
    for _ in pairs(T.nodes) do before = before + 1 end
    local y
    autograd.record(function() y = net(x) end)
    local after = 0
    for _ in pairs(T.nodes) do after = after + 1 end
    assert.equal(1, after - before)
    y:backward()
  end)

  it("keeps the graph per signature: another batch size traces again", function()
    local net = mlp(3)
    net:hybridize()
    local ref = mlp(3)
    for _, b in ipairs({ 2, 4, 2 }) do
      local x = nd.random.normal(0, 1, { b, 7 })
      close(ref(x), net(x))
    end
    local n = 0
    for _ in pairs(H.cached_op(net).cache) do n = n + 1 end
    assert.equal(2, n)
  end)

  it("re-traces when a value read during the trace changes (guards, not frozen branches)", function()
    local B = mx.gluon.HybridBlock:extend("Branchy")
    function B.forward(_, x)
      if x:sum():item() > 0 then return x * 2 end
      return x * -3
    end
    local b = B()
    b:hybridize()
    close(b(nd.ones({ 3 })), nd.array({ 2, 2, 2 }))
    close(b(nd.array({ -1, -1, -1 })), nd.array({ 3, 3, 3 }))
    close(b(nd.array({ 1, 2, 3 })), nd.array({ 2, 4, 6 }))
    close(b(nd.array({ -1, 0, 0 })), nd.array({ 3, 0, 0 }))
  end)

  it("warns once when a block re-traces on most calls, naming the guard", function()
    local B = mx.gluon.HybridBlock:extend("Flip")
    function B.forward(_, x) return x + x:sum():item() end
    local b = B()
    b:hybridize()
    local msgs = {}
    local w = io.stderr.write
    local saved = io.stderr
    io.stderr = { write = function(_, m) msgs[#msgs + 1] = m end } -- luacheck: ignore 122
    local ok, err = pcall(function()
      for i = 1, 10 do b(nd.array({ i })) end
    end)
    io.stderr = saved -- luacheck: ignore 122
    assert(ok, err)
    assert(w)
    assert.equal(1, #msgs)
    assert.matches("re%-traced 8 times", msgs[1])
    assert.matches("item%(%)", msgs[1])
  end)

  it("takes MXNet 1.x's hybrid_forward(F, x, params)", function()
    local B = mx.gluon.HybridBlock:extend("Affine")
    function B:__init()
      mx.gluon.HybridBlock.__init(self)
      self.w = mx.gluon.Parameter("w", { shape = { 3 } })
    end
    function B.hybrid_forward(_, F, x, p) return F.mul(x, p.w) end
    local b = B()
    b:initialize(mx.init.Constant(2))
    local x = nd.array({ { 1, 2, 3 } })
    close(b(x), nd.array({ { 2, 4, 6 } }))
    b:hybridize()
    close(b(x), nd.array({ { 2, 4, 6 } }))
    close(b(x), nd.array({ { 2, 4, 6 } }))
  end)

  it("returns several outputs and differentiates through them", function()
    local B = mx.gluon.HybridBlock:extend("Two")
    function B.forward(_, x) return x * 3, nd.exp(x) end
    local b = B()
    b:hybridize()
    local x = nd.array({ 0.5, 1 })
    x:attach_grad()
    for _ = 1, 3 do
      local y1, y2
      autograd.record(function()
        local a, c = b(x)
        y1, y2 = a, c
        return (a + c):sum()
      end):backward()
      close(y1, nd.array({ 1.5, 3 }))
      close(y2, nd.exp(nd.array({ 0.5, 1 })))
      close(x:grad(), nd.array({ 3 + math.exp(0.5), 3 + math.exp(1) }))
    end
  end)

  it("trains BatchNorm and Dropout in train mode and predicts in predict mode", function()
    mx.random.seed(5)
    local net = nn.HybridSequential()
    net:add(nn.Dense(6), nn.BatchNorm(), nn.Dropout(0.5))
    net:initialize()
    net:hybridize({ static_alloc = true })
    local x = nd.random.normal(2, 1, { 16, 4 })
    local rm = net[2].running_mean
    for _ = 1, 3 do autograd.record(function() return net(x) end) end
    local m = rm:data():tolist()
    local moved = false
    for i = 1, #m do moved = moved or math.abs(m[i]) > 1e-3 end
    assert.is_true(moved)
    -- predict mode: no dropout, deterministic
    local a, b = net(x), net(x)
    close(a, b)
  end)


  it("updates BatchNorm's running statistics in train mode without recording, as eager does", function()
    local function run(hybrid)
      mx.random.seed(6)
      local bn = nn.BatchNorm()
      local net = nn.HybridSequential()
      net:add(nn.Conv2D(4, 3), bn)
      net:initialize()
      if hybrid then net:hybridize() end
      local x = nd.random.uniform(0, 1, { 2, 3, 6, 6 })
      local y
      for _ = 1, 2 do autograd.train_mode(function() y = net(x) end) end
      return y, bn.running_mean:data(), bn.running_var:data(), net(x)
    end
    local ye, me, ve, pe = run(false)
    local yh, mh, vh, ph = run(true)
    close(ye, yh)
    close(me, mh)
    close(ve, vh)
    close(pe, ph)
    local moved = false
    for _, v in ipairs(mh:tolist()) do moved = moved or math.abs(v) > 1e-3 end
    assert.is_true(moved)
  end)
  it("hybridize(false) goes back to eager calls", function()
    local net = mlp(4)
    net:hybridize()
    local x = nd.ones({ 1, 7 })
    net(x)
    net:hybridize(false)
    assert.is_nil(H.cached_op(net))
    close(net(x), mlp(4)(x))
  end)

  it("rejects bad hybridize options, blaming the caller", function()
    local net = mlp(5)
    assert.has_error(function() net:hybridize({ static_aloc = true }) end,
      "hybridize: unknown option 'static_aloc' (active, static_alloc, static_shape)")
  end)
end)
