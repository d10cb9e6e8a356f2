-- spec/gluon_norm_layers_spec.lua — gluon.nn.BatchNorm: MXNet's options and repr, deferred
-- in_channels, running statistics updated in train mode and used in predict mode (values
-- computed here in Lua), scale/center, channels last, save/load under MXNet's names and
-- the parameters of a net saved by MXNet 1.9.1; InstanceNorm, GroupNorm and LayerNorm
-- against their ops, gradients, hybridize and errors at the caller.
local mx = require("mx")
local oracle = require("helpers.oracle")
local nn, nd = mx.gluon.nn, mx.nd
local err_at = require("helpers.err_at")("gluon_norm_layers_spec.lua")
local FIX = "spec/fixtures/"

local function flat(t) return t:reshape({ -1 }):tolist() end

local function close(a, b, tol)
  local ok, msg = oracle.close(a, b, tol or 1e-6, tol or 1e-6)
  assert(ok, msg)
end

describe("gluon.nn.BatchNorm", function()
  it("takes MXNet's options, rejects unknown ones, prints like MXNet", function()
    local bn = nn.BatchNorm({ momentum = 0.8, epsilon = 1e-3, in_channels = 4 })
    assert.are.equal("BatchNorm(axis=2, eps=0.001, momentum=0.8, fix_gamma=False, "
      .. "use_global_stats=False, in_channels=4)", tostring(bn))
    assert.is_truthy(tostring(nn.BatchNorm()):find("in_channels=None", 1, true))
    local ok, err = pcall(nn.BatchNorm, { eps = 1 })
    assert.is_false(ok)
    assert.is_truthy(err:find("eps", 1, true), err)
    ok, err = pcall(nn.BatchNorm, { momentum = 3 })
    assert.is_false(ok)
    assert.is_truthy(err:find("momentum", 1, true), err)
    assert.are.equal("null", bn.running_mean.grad_req)
    assert.are.equal("null", bn.running_var.grad_req)
    assert.are.equal("write", bn.gamma.grad_req)
    assert.are.equal("null", nn.BatchNorm({ scale = false }).gamma.grad_req)
    assert.are.equal("null", nn.BatchNorm({ center = false }).beta.grad_req)
  end)

  it("infers in_channels, updates the running stats in training, uses them in predict", function()
    local bn = nn.BatchNorm({ momentum = 0.5 })
    bn:initialize()
    local x = oracle.rand(mx, { 4, 3, 2, 2 }, "float32", { -1, 3 })
    local y = bn(x) -- predict mode: running stats zeros/ones
    assert.are.same({ 3 }, bn.gamma:data():shape())
    local xs, ys = flat(x), flat(y)
    for i = 1, #xs do assert.is_near(xs[i] / math.sqrt(1 + 1e-5), ys[i], 1e-5) end
    mx.autograd.record(function() y = bn(x) end)
    y:backward()
    -- batch statistics per channel, computed here
    local rm, rv = flat(bn.running_mean:data()), flat(bn.running_var:data())
    for k = 0, 2 do
      local s, q, n = 0, 0, 16
      for b = 0, 3 do for i = 0, 3 do s = s + xs[(b * 3 + k) * 4 + i + 1] end end
      local m = s / n
      for b = 0, 3 do for i = 0, 3 do q = q + (xs[(b * 3 + k) * 4 + i + 1] - m) ^ 2 end end
      assert.is_near(0.5 * m, rm[k + 1], 1e-5)
      assert.is_near(0.5 + 0.5 * q / n, rv[k + 1], 1e-5)
      -- the training output is normalised: mean 0, variance ~1 per channel
      local ysum = 0
      local yl = flat(y)
      for b = 0, 3 do for i = 0, 3 do ysum = ysum + yl[(b * 3 + k) * 4 + i + 1] end end
      assert.is_near(0, ysum, 1e-4)
    end
    assert.are.same({ 3 }, bn.gamma:grad():shape())
    -- predict mode now uses the updated running statistics
    local yp = flat(bn(x))
    for j = 1, #xs do
      local k = math.floor((j - 1) / 4) % 3 + 1
      assert.is_near((xs[j] - rm[k]) / math.sqrt(rv[k] + 1e-5), yp[j], 1e-4)
    end
  end)

  it("channels last (axis=-1) and use_global_stats", function()
    local bn = nn.BatchNorm({ axis = -1, use_global_stats = true })
    bn:initialize()
    local x = oracle.rand(mx, { 2, 5, 3 })
    local y
    mx.autograd.record(function() y = bn(x) end)
    assert.are.same({ 3 }, bn.gamma:data():shape())
    assert.are.same({ 0, 0, 0 }, flat(bn.running_mean:data()))
    local xs, ys = flat(x), flat(y)
    for i = 1, #xs do assert.is_near(xs[i] / math.sqrt(1 + 1e-5), ys[i], 1e-5) end
  end)

  it("saves and loads under MXNet's names", function()
    local net = nn.Sequential()
    net:add(nn.Dense(3, { in_units = 4 }), nn.BatchNorm({ in_channels = 3 }))
    net:initialize()
    mx.autograd.record(function() net(oracle.rand(mx, { 5, 4 })) end)
    local path = os.tmpname()
    net:save_parameters(path)
    local d = nd.load(path)
    for _, k in ipairs({ "1.gamma", "1.beta", "1.running_mean", "1.running_var" }) do
      assert.is_not_nil(d[k], k)
    end
    local net2 = nn.Sequential()
    net2:add(nn.Dense(3, { in_units = 4 }), nn.BatchNorm({ in_channels = 3 }))
    net2:load_parameters(path)
    os.remove(path)
    local x = oracle.rand(mx, { 2, 4 })
    local ok, msg = oracle.close(net2(x), net(x), 1e-6, 1e-6)
    assert(ok, msg)
  end)

  it("loads the Dense+BatchNorm net MXNet 1.9.1 saved, and predicts with its parameters", function()
    local net = nn.Sequential()
    net:add(nn.Dense(3, { in_units = 4 }), nn.BatchNorm({ in_channels = 3 }))
    net:load_parameters(FIX .. "mx191_gluon.params")
    local d = nd.load(FIX .. "mx191_gluon.params")
    local x = oracle.rand(mx, { 2, 4 })
    local h = nd.fully_connected(x, d["0.weight"], d["0.bias"], { num_hidden = 3 })
    local hs, ys = flat(h), flat(net(x))
    local g, b = flat(d["1.gamma"]), flat(d["1.beta"])
    local rm, rv = flat(d["1.running_mean"]), flat(d["1.running_var"])
    for j = 1, #hs do
      local k = (j - 1) % 3 + 1
      assert.is_near((hs[j] - rm[k]) / math.sqrt(rv[k] + 1e-5) * g[k] + b[k], ys[j], 1e-5)
    end
  end)
end)

describe("gluon.nn.InstanceNorm and GroupNorm", function()
  it("InstanceNorm: MXNet's defaults (scale off), deferred in_channels, channels last", function()
    local l = nn.InstanceNorm()
    assert.are.equal("InstanceNorm(eps=1e-05, axis=2, center=True, scale=False, in_channels=None)",
      tostring(l))
    assert.are.equal("null", l.gamma.grad_req)
    assert.are.equal("write", l.beta.grad_req)
    l:initialize()
    local x = oracle.rand(mx, { 2, 3, 4 }, "float32", { -1, 2 })
    local y = l(x)
    assert.are.same({ 3 }, l.gamma:data():shape())
    local xs, ys = flat(x), flat(y)
    for s = 0, 5 do -- each (sample, channel) row of 4, normalised
      local m, q = 0, 0
      for i = 1, 4 do m = m + xs[s * 4 + i] / 4 end
      for i = 1, 4 do q = q + (xs[s * 4 + i] - m) ^ 2 / 4 end
      for i = 1, 4 do assert.is_near((xs[s * 4 + i] - m) / math.sqrt(q + 1e-5), ys[s * 4 + i], 1e-5) end
    end
    local l2 = nn.InstanceNorm({ axis = -1, scale = true })
    l2:initialize()
    local xt = nd.swapaxes(x, { dim1 = 2, dim2 = 3 })
    local ok, msg = oracle.close(l2(xt), nd.swapaxes(y, { dim1 = 2, dim2 = 3 }), 1e-5, 1e-5)
    assert(ok, msg)
    assert.are.same({ 3 }, l2.gamma:data():shape())
    local e1, e2 = pcall(nn.InstanceNorm, { num_groups = 2 })
    assert.is_false(e1)
    assert.is_truthy(e2:find("num_groups", 1, true), e2)
  end)

  it("GroupNorm: per-group gamma/beta (MXNet 1.9), values and gradients flow", function()
    local l = nn.GroupNorm({ num_groups = 2 })
    assert.are.equal("GroupNorm(num_groups=2, eps=1e-05, center=True, scale=True)", tostring(l))
    l:initialize()
    assert.are.same({ 2 }, l.gamma:data():shape())
    local x = oracle.rand(mx, { 2, 4, 3 }, "float32", { -1, 2 })
    local y
    mx.autograd.record(function() y = l(x) end)
    y:backward()
    local xs, ys = flat(x), flat(y)
    for s = 0, 3 do -- (sample, group): 2 channels x 3 positions = 6 contiguous values
      local m, q = 0, 0
      for i = 1, 6 do m = m + xs[s * 6 + i] / 6 end
      for i = 1, 6 do q = q + (xs[s * 6 + i] - m) ^ 2 / 6 end
      for i = 1, 6 do assert.is_near((xs[s * 6 + i] - m) / math.sqrt(q + 1e-5), ys[s * 6 + i], 1e-5) end
    end
    -- d(sum y)/d beta = the element count per group; d/d gamma = sum(xhat) = 0
    local db, dg = flat(l.beta:grad()), flat(l.gamma:grad())
    assert.is_near(12, db[1], 1e-4)
    assert.is_near(0, dg[1], 1e-4)
    local ok = pcall(function() return l(oracle.rand(mx, { 2, 3, 3 })) end)
    assert.is_false(ok)
  end)
end)

describe("gluon norm layers' errors", function()
  it("name the layer and blame the caller's line", function()
    local bn = nn.BatchNorm({ in_channels = 4 })
    local gn = nn.GroupNorm({ num_groups = 2 })
    local inn = nn.InstanceNorm()
    bn:initialize()
    gn:initialize()
    inn:initialize()
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = bn(nd.ones({ 2, 5 })) return r end, line)
    assert.is_truthy(msg:find("BatchNorm: batch_norm: gamma must have shape (5)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = gn(nd.ones({ 2, 3, 4 })) return r end, line)
    assert.is_truthy(msg:find("GroupNorm: group_norm: num_groups=2", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = inn(nd.ones({ 2, 4 })) return r end, line)
    assert.is_truthy(msg:find("InstanceNorm: instance_norm: data must have at least 3 dims", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = bn("x") return r end, line)
    assert.is_truthy(msg:find("BatchNorm", 1, true), msg)
  end)
end)

describe("gluon.nn.LayerNorm", function()
  it("infers in_channels, names gamma/beta, equals the op; center/scale", function()
    local ln = nn.LayerNorm()
    assert.is_truthy(tostring(ln):find("in_channels=None", 1, true))
    ln:initialize()
    local x = oracle.rand(mx, { 2, 3, 5 }, "float32")
    local y = ln(x)
    assert.are.same({ 5 }, ln.gamma:data():shape())
    assert.are.equal("LayerNorm(axis=-1, eps=1e-05, center=True, scale=True, in_channels=5)",
      tostring(ln))
    close(y, (nd.layer_norm(x, nd.ones({ 5 }), nd.zeros({ 5 }))), 1e-6)
    local names = ln:collect_params():keys()
    table.sort(names)
    assert.are.same({ "beta", "gamma" }, names)
    local l2 = nn.LayerNorm({ axis = 2, epsilon = 1e-3, center = false, scale = false,
      in_channels = 3 })
    assert.are.equal("null", l2.gamma.grad_req)
    assert.are.equal("null", l2.beta.grad_req)
    l2:initialize()
    close(l2(x), (nd.layer_norm(x, nd.ones({ 3 }), nd.zeros({ 3 }), { axis = 2, eps = 1e-3 })), 1e-6)
  end)

  it("backward reaches gamma and beta; hybridized equals eager", function()
    local ln = nn.LayerNorm({ in_channels = 4 })
    ln:initialize()
    local x = oracle.rand(mx, { 3, 4 }, "float32")
    local y
    mx.autograd.record(function() y = ln(x) end)
    y:backward()
    close(ln.beta:grad(), nd.full({ 4 }, 3))
    assert.are.same({ 4 }, ln.gamma:grad():shape())
    local h = nn.LayerNorm()
    h:initialize()
    local ref = h(x)
    h:hybridize()
    close(h(x), ref)
    close(h(x), ref)
  end)

  it("errors: bad options, wrong features at the caller's line", function()
    local ok, err = pcall(nn.LayerNorm, { epsilon = -1 })
    assert.is_false(ok)
    assert.is_truthy(err:find("LayerNorm: epsilon", 1, true), err)
    ok, err = pcall(nn.LayerNorm, { eps = 1 })
    assert.is_false(ok)
    assert.is_truthy(err:find("eps", 1, true), err)
    local ln = nn.LayerNorm({ in_channels = 4 })
    ln:initialize()
    local x = nd.ones({ 2, 5 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = ln(x) return r end, line)
    assert.is_truthy(msg:find("LayerNorm", 1, true) and msg:find("got (4,)", 1, true), msg)
  end)
end)

describe("the norm layers on float16 data", function()
  it("run as MXNet's: float16 out, a float16 cast keeps BatchNorm's parameters float32", function()
    local net = nn.HybridSequential()
    net:add(nn.Dense(4, { in_units = 3 }), nn.BatchNorm(), nn.LayerNorm())
    net:initialize()
    net:cast("float16")
    local d = net:collect_params()
    assert.equal("float16", d["0.weight"].dtype)
    for _, n in ipairs { "gamma", "beta", "running_mean", "running_var" } do
      assert.equal("float32", d["1." .. n].dtype)
    end
    assert.equal("float16", d["2.gamma"].dtype)
    local x = nd.random.uniform(-1, 1, { 2, 3 }):astype("float16")
    local y = mx.autograd.record(function() return net(x) end)
    assert.equal("float16", y:dtype())
    y:backward()
    assert.equal("float32", d["1.gamma"]:grad():dtype())
    net:hybridize()
    assert.equal("float16", net(x):dtype())
  end)
end)
