-- nn.SyncBatchNorm (MXNet 1.9's gluon.contrib.nn.SyncBatchNorm) across the CPU devices of
-- one process, its per-device forwards run together by gluon.utils.parallel_apply: the
-- outputs, the slices' gradients, the parameters' gradients summed over the devices and
-- the running statistics equal one BatchNorm over the whole batch.
local mx = require("mx")
local H = require("helpers.la")
local nd, nn, gluon, ag = mx.nd, mx.gluon.nn, mx.gluon, mx.autograd
local FILE = "gluon_sync_batch_norm_spec.lua"

local C0, C1, C2 = mx.cpu(0), mx.cpu(1), mx.cpu(2)

local function close(a, b, tol, what)
  local d = H.maxdiff(a, b)
  assert(d <= tol, string.format("%s: max difference %g", what or "", d))
end

-- net(norm): the layers around the norm layer under test (built twice: BatchNorm and
-- SyncBatchNorm, same parameter names)
local NETS = {
  mlp = { shape = { 6, 5 }, build = function(norm)
    local net = nn.Sequential()
    net:add(nn.Dense(4, { in_units = 5 }), norm, nn.Activation("tanh"), nn.Dense(3, { in_units = 4 }))
    return net
  end },
  cnn = { shape = { 7, 3, 4, 5 }, build = function(norm)
    local net = nn.Sequential()
    net:add(norm, nn.Conv2D(4, 3, { in_channels = 3, padding = 1 }), nn.Activation("relu"))
    return net
  end, channels = 3 },
}

local function check(kind, ctxs, opts)
  local spec = NETS[kind]
  local c = spec.channels or 4
  local x = nd.array(H.rand(mx, spec.shape, { seed = 3 }):totable())
  local head = H.rand(mx, { spec.shape[1], kind == "mlp" and 3 or 4, unpack(spec.shape, 3) },
    { seed = 4 }):astype("float32")
  local o = { in_channels = c }
  for k, v in pairs(opts or {}) do o[k] = v end
  local ref = spec.build(nn.BatchNorm(o))
  ref:initialize(mx.init.Uniform(0.5), C1)
  o.num_devices = #ctxs
  local sync = spec.build(nn.SyncBatchNorm(o))
  sync:initialize(nil, ctxs)
  for name, p in ref:collect_params():items() do sync:collect_params():get(name):set_data(p:data()) end
  -- the reference: one BatchNorm over the whole batch (on cpu(1))
  local xr = x:to(C1)
  xr:attach_grad()
  local yr = ag.record(function()
    local y = ref(xr)
    y:backward(head:to(C1))
    return y
  end)
  local xs = gluon.utils.split_and_load(x, ctxs, 1, false)
  local hs = gluon.utils.split_and_load(head, ctxs, 1, false)
  for _, s in ipairs(xs) do s:attach_grad() end
  local ys = ag.record(function()
    local ys = gluon.utils.parallel_apply(sync, xs)
    ag.backward(ys, hs)
    return ys
  end)
  local parts, gparts = {}, {}
  for i, y in ipairs(ys) do
    assert.are.equal(tostring(ctxs[i]), tostring(y:context()))
    parts[i], gparts[i] = y:to(C1), xs[i]:grad():to(C1)
  end
  close(nd.concat(parts, { dim = 1 }), yr, 1e-5, kind .. " outputs")
  close(nd.concat(gparts, { dim = 1 }), xr:grad(), 1e-5, kind .. " input gradients")
  for name, p in ref:collect_params():items() do
    local q = sync:collect_params():get(name)
    if p.grad_req ~= "null" then
      local g = q:grad(ctxs[1]):to(C1)
      for i = 2, #ctxs do g = g + q:grad(ctxs[i]):to(C1) end
      close(g, p:grad(), 1e-5, kind .. " " .. name .. " gradient")
    else -- running_mean / running_var: every device's holds the global statistics
      for _, ctx in ipairs(ctxs) do close(q:data(ctx):to(C1), p:data(), 1e-6, name) end
    end
  end
end

describe("nn.SyncBatchNorm", function()
  it("equals one BatchNorm over the whole batch: outputs, gradients, running statistics "
    .. "(Dense, two devices)", function()
    check("mlp", { C0, C1 })
  end)
  it("the same on 4-D data before a convolution, three devices of unequal slices", function()
    check("cnn", { C0, C1, C2 })
  end)
  it("with scale=false and center=false (gamma 1, beta 0, as MXNet's fix_gamma)", function()
    check("mlp", { C0, C1 }, { scale = false, center = false })
  end)

  it("is BatchNorm in predict mode, with num_devices=1 and use_global_stats", function()
    local x = nd.array(H.rand(mx, { 4, 3 }, { seed = 5 }):totable())
    local a, b = nn.BatchNorm({ in_channels = 3 }), nn.SyncBatchNorm({ in_channels = 3, num_devices = 2 })
    a:initialize()
    b:initialize()
    close(b(x), a(x), 0, "predict")
    local c = nn.SyncBatchNorm({ in_channels = 3, num_devices = 1 })
    c:initialize()
    ag.record(function() close(c(x), a(x), 1e-6, "num_devices=1") end)
    local d = nn.SyncBatchNorm(3, 2, { use_global_stats = true })
    local e = nn.BatchNorm({ in_channels = 3, use_global_stats = true })
    d:initialize()
    e:initialize()
    ag.record(function() close(d(x), e(x), 1e-6, "use_global_stats") end)
  end)

  it("takes MXNet's arguments (in_channels, num_devices, momentum, ...) and prints them", function()
    local l = nn.SyncBatchNorm(4, 2, 0.8, 1e-3)
    assert.truthy(tostring(l):find("num_devices=2", 1, true))
    assert.truthy(tostring(l):find("momentum=0.8", 1, true))
    H.assert_error(function(mark) mark() nn.SyncBatchNorm(4, 0) end, FILE,
      "SyncBatchNorm: num_devices must be a positive integer, got 0")
    H.assert_error(function(mark) mark() nn.SyncBatchNorm(4, 2, 2) end, FILE,
      "SyncBatchNorm: momentum must be a number in [0, 1], got 2")
  end)

  it("explains what a training forward outside parallel_apply, a missing device or a "
    .. "second slice on one device needs", function()
    local l = nn.SyncBatchNorm(3, 2)
    l:initialize(nil, { C0, C1 })
    local x = nd.ones { 2, 3 }
    H.assert_error(function(mark) ag.record(function() mark() l(x) end) end, FILE,
      "SyncBatchNorm: in training with num_devices=2 the devices' forwards must run together: "
      .. "call them through mx.gluon.utils.parallel_apply(fn, inputs)")
    H.assert_error(function(mark)
      ag.record(function() mark() gluon.utils.parallel_apply(l, { x }) end)
    end, FILE, "parallel_apply: 1 of 1 forwards wait at a SyncBatchNorm whose num_devices")
    H.assert_error(function(mark)
      ag.record(function() mark() gluon.utils.parallel_apply(l, { x, nd.ones { 2, 3 } }) end)
    end, FILE, "SyncBatchNorm: two slices on cpu(0)")
    H.assert_error(function(mark)
      ag.record(function() mark() gluon.utils.parallel_apply(l, { x, nd.ones({ 2, 4 }, { ctx = C1 }) }) end)
    end, FILE, "does not match the first slice (2, 3)")
    H.assert_error(function(mark) mark() gluon.utils.parallel_apply(l, {}) end, FILE,
      "parallel_apply: inputs must be a non-empty list")
  end)

  it("parallel_apply returns each input's result in order", function()
    local r = gluon.utils.parallel_apply(function(v) return v * 2 end, { 1, 2, 3 })
    assert.are.same({ 2, 4, 6 }, r)
  end)
end)
