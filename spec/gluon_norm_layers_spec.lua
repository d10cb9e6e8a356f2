-- spec/gluon_norm_layers_spec.lua — gluon.nn.BatchNorm: MXNet's options and repr, deferred
-- in_channels, running statistics updated in train mode and used in predict mode (values
-- computed here in Lua), scale/center, channels last, save/load under MXNet's names and
-- the parameters of a net saved by MXNet 1.9.1.
local mx = require("mx")
local oracle = require("helpers.oracle")
local nn, nd = mx.gluon.nn, mx.nd
local FIX = "spec/fixtures/"

local function flat(t) return t:reshape({ -1 }):tolist() end

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
