-- Several devices in one process (CPU ids are distinct devices): parameters with a copy
-- per device, split_and_load, the Trainer reducing gradients through mx.kv (data
-- parallelism equals the one-device step on the same global batch), and model
-- parallelism (blocks on different devices, gradients carried back by recorded copies).
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn
local nd = mx.nd
local close = require("helpers.close").within(1e-6)
local err_at = require("helpers.err_at")("gluon_multi_device_spec.lua")

local C0, C1 = mx.cpu(0), mx.cpu(1)

-- a fixed batch: 8 rows of 5 features, 3 classes
local function batch()
  local x, y = {}, {}
  for i = 1, 8 do
    x[i] = {}
    for j = 1, 5 do x[i][j] = math.sin(i * 1.3 + j * 0.7) end
    y[i] = (i * 7) % 3
  end
  return nd.array(x), nd.array(y)
end

local function mlp()
  local net = nn.Sequential()
  net:add(nn.Dense(6, { activation = "tanh", in_units = 5 }), nn.Dense(3, { in_units = 6 }))
  return net
end

-- the weights of net as flat lists, in collect_params order (copy ctx: default the first)
local function weights(net, ctx)
  local r = {}
  for _, p in net:collect_params():items() do r[#r + 1] = p:data(ctx):tolist() end
  return r
end

local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

-- `steps` sgd steps of net on (x, y) split over ctxs
local function train(net, ctxs, trainer_opts, steps, opt)
  local tr = gluon.Trainer(net:collect_params(), opt or "sgd", opt == "adam"
    and { learning_rate = 0.05, wd = 0.01 } or { learning_rate = 0.5, momentum = 0.9, wd = 0.01 },
    trainer_opts)
  local x, y = batch()
  for _ = 1, steps do
    local xs = gluon.utils.split_and_load(x, ctxs)
    local ys = gluon.utils.split_and_load(y, ctxs)
    local losses = {}
    mx.autograd.record(function()
      for i = 1, #xs do losses[i] = loss_fn(net(xs[i]), ys[i]) end
    end)
    mx.autograd.backward(losses)
    tr:step(8)
  end
  return tr
end

describe("Parameters on several devices", function()
  it("initialize with a ctx list: the same values on every copy; data/grad/list_*", function()
    local net = mlp()
    net:initialize(mx.init.Xavier(), { ctx = { C0, C1 } })
    local w = net[1].weight
    assert.are.same({ C0, C1 }, w:list_ctx())
    local d = w:list_data()
    assert.are.equal(2, #d)
    assert.are.equal(C0, d[1]:context())
    assert.are.equal(C1, d[2]:context())
    assert.are.same(d[1]:tolist(), d[2]:tolist())
    assert.are.equal(d[2], w:data(C1))
    assert.are.equal(C1, w:grad(C1):context())
    assert.are.equal(2, #w:list_grad())
    for _, g in ipairs(w:list_grad()) do nd.ones(g:shape(), { ctx = g:context(), out = g }) end
    net:collect_params():zero_grad()
    for _, g in ipairs(w:list_grad()) do assert.are.equal(0, g:sum():item()) end
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local _ = w:data(mx.cpu(2)) end, line)
    assert.matches("was not initialized on context cpu(2); it is on cpu(0), cpu(1)", msg, 1, true)
  end)

  it("a forward uses the copy on its input's device; deferred shapes work too", function()
    local net = nn.Dense(2) -- in_units deferred
    net:initialize(mx.init.Xavier(), { C0, C1 })
    local x = nd.ones({ 3, 4 })
    local y0 = net(x)
    local y1 = net(x:to(C1))
    assert.are.equal(C1, y1:context())
    assert.are.same(y0:tolist(), y1:tolist())
    assert.are.same({ 2, 4 }, net.weight:data(C1):shape())
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local _ = net(x:to(mx.cpu(3))) end, line)
    assert.matches("Parameter 'weight' was not initialized on context cpu(3)", msg, 1, true)
    -- nested blocks: still the user's line
    local seq = nn.Sequential()
    seq:add(nn.Dense(2, { in_units = 4 }), nn.Dense(1, { in_units = 2 }))
    seq:initialize(nil, { C0, C1 })
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local _ = seq(x:to(mx.cpu(3))) end, line)
    assert.matches("was not initialized on context cpu(3)", msg, 1, true)
    -- outside a forward, data() is cpu(0)'s copy again
    local _ = seq(x:to(C1))
    assert.are.equal(C0, seq[1].weight:data():context())
    assert.are.same({ C0, C1 }, seq:collect_params():list_ctx())
  end)

  it("save/load_parameters with copies on cpu(1) and cpu(2); an error leaves no device set", function()
    local tmp = os.tmpname()
    local net = mlp()
    net:initialize(mx.init.Xavier(), { mx.cpu(1), mx.cpu(2) })
    local x = nd.ones({ 2, 5 })
    assert.has_error(function() net(x) end) -- cpu(0) input: no copy there
    assert.are.equal(mx.cpu(1), net[1].weight:data():context()) -- outside a forward again
    net:save_parameters(tmp)
    local net2 = mlp()
    net2:initialize(mx.init.Zero(), { C0, mx.cpu(2) })
    net2:load_parameters(tmp)
    os.remove(tmp)
    assert.are.same(net[2].weight:data():tolist(), net2[2].weight:data(mx.cpu(2)):tolist())
    assert.are.same(net(x:to(mx.cpu(2))):tolist(), net2(x):tolist())
  end)

  it("reset_ctx moves every copy; ops on two devices are an error naming both", function()
    local net = mlp()
    net:initialize(mx.init.Xavier(), { C0, C1 })
    local before = net[1].weight:data(C0):tolist()
    net:collect_params():reset_ctx(mx.cpu(2))
    assert.are.same({ mx.cpu(2) }, net[1].weight:list_ctx())
    assert.are.same(before, net[1].weight:data():tolist())
    net:reset_ctx({ mx.cpu(3), C1 })
    assert.are.same({ mx.cpu(3), C1 }, net[2].bias:list_ctx())
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local _ = nd.add(nd.ones({ 2 }), nd.ones({ 2 }, { ctx = C1 })) end,
      line)
    assert.matches("add: inputs are on different devices (cpu(0) and cpu(1))", msg, 1, true)
  end)

  it("a copy between CPU devices is an engine op queued behind its source's writer", function()
    local eng = mx.engine
    local inline = eng.get_inline_max()
    eng.set_inline_max(0) -- queue everything: the copy must wait for the add in the queue
    local ok, err = pcall(function()
      local a = nd.ones({ 256, 256 })
      local before = eng.stats().ops_queued
      local b = nd.add(a, a)
      local c = b:to(C1)
      local d = nd.mul_scalar(c, { scalar = 3 })
      assert.is_true(eng.stats().ops_queued >= before + 3)
      assert.are.equal(C1, d:context())
      assert.are.equal(6 * 256 * 256, d:sum():item())
      local e = nd.zeros({ 256, 256 })
      b:copyto(e:to(C1)) -- into an existing tensor on another device
      nd.waitall()
    end)
    eng.set_inline_max(inline)
    assert(ok, err)
  end)

  it("each device has its own ready queue: cpu(1)'s op is not held behind cpu(0)'s", function()
    local eng, prof = mx.engine, mx.profiler
    local inline = eng.get_inline_max()
    local tmp = os.tmpname()
    local big, a, b = nd.ones({ 200, 200 }), nd.ones({ 64 }), nd.ones({ 64 }, { ctx = C1 })
    nd.waitall()
    eng.set_inline_max(0)
    prof.set_config { filename = tmp }
    prof.reset()
    prof.set_state("run")
    local ok, err = pcall(function()
      local hold = nd.dot(big, big) -- keeps the worker busy while the rest is queued
      local outs = {}
      for i = 1, 20 do outs[i] = nd.add(a, a) end -- 20 ready ops on cpu(0)
      local m = nd.mul_scalar(b, { scalar = 2 })  -- then one on cpu(1)
      nd.waitall()
      return hold, outs, m
    end)
    prof.set_state("stop")
    eng.set_inline_max(inline)
    assert(ok, err)
    prof.dump()
    local f = assert(io.open(tmp))
    local text = f:read("*a")
    f:close()
    os.remove(tmp)
    local order = {}
    for name, ts in text:gmatch('"name": "([%w_]+)", "cat": "[%w_]+", "ph": "X", "ts": ([%d.]+)') do
      order[#order + 1] = { name, tonumber(ts) }
    end
    table.sort(order, function(p, q) return p[2] < q[2] end)
    local adds_before, seen = 0, false
    for _, e in ipairs(order) do
      if e[1] == "mul_scalar" then seen = true break end
      if e[1] == "add" then adds_before = adds_before + 1 end
    end
    assert.is_true(seen)
    assert.is_true(adds_before < 20, adds_before .. " cpu(0) ops ran first (one FIFO queue)")
  end)

  it("cpu(0) .. cpu(15) hold data; a higher id is an error naming the limit", function()
    assert.are.equal(mx.cpu(15), nd.zeros({ 1 }, { ctx = mx.cpu(15) }):context())
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local _ = nd.zeros({ 1 }, { ctx = mx.cpu(16) }) end, line)
    assert.matches("cpu(16): there are 16 CPU devices, cpu(0) .. cpu(15)", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local _ = nd.ones({ 2 }):to(mx.cpu(99)) end, line)
    assert.matches("to: cpu(99): there are 16 CPU devices", msg, 1, true)
  end)

  it("MX_NUM_CPU_DEVICES lowers the limit (the core checks it too)", function()
    local child = require("helpers.child")
    local saved = child.luajit
    child.luajit = "env MX_NUM_CPU_DEVICES=2 " .. saved
    local h = child.start([[
      local mx = require("mx")
      local _ = mx.nd.zeros({ 1 }, { ctx = mx.cpu(1) })
      local ok, err = pcall(mx.nd.zeros, { 1 }, { ctx = mx.cpu(2) })
      print(ok, err)
      local lib = require("mx.core.lib")
      local out = lib.ffi.new("mx_tensor *[1]")
      local x = mx.nd.ones({ 1 })
      print("core", lib.C.mx_tensor_to(x.h, 1, 2, -1, out), lib.ffi.string(lib.C.mx_last_error()))
    ]])
    child.luajit = saved
    local r = child.finish(h)
    assert.are.equal(0, r.status, r.out)
    assert.matches("false.-cpu%(2%): there are 2 CPU devices, cpu%(0%) .. cpu%(1%)", r.out)
    assert.matches("core\t%-?%d+\tto: cpu%(2%) requested but there are 2 CPU devices", r.out)
  end)

  it("while parameters live on several devices, a block's error still blames the caller's line",
      function()
    local net = mlp()
    net:initialize(mx.init.Xavier(), { C0, C1 }) -- calls now take the multi-device path
    local id = nn.Identity()
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local _ = id(3) end, line)
    assert.matches("Identity: input must be a tensor, got number", msg, 1, true)
  end)

  it("split_and_load puts slice i on device i", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 } })
    local xs = gluon.utils.split_and_load(x, { C0, C1 })
    assert.are.equal(C1, xs[2]:context())
    assert.are.same({ 5, 6, 7, 8 }, xs[2]:tolist())
    local ys = gluon.utils.split_and_load(x, { C0, C1 }, { batch_axis = 2 })
    assert.are.same({ 2, 4, 6, 8 }, ys[2]:tolist())
  end)
end)

describe("data parallelism: 2 devices equal 1 device on the same global batch", function()
  local function compare(trainer_opts, opt)
    mx.random.seed(11)
    local ref = mlp()
    ref:initialize(mx.init.Xavier())
    local init = weights(ref)
    train(ref, { C0 }, nil, 3, opt)
    local net = mlp()
    net:initialize(mx.init.Xavier(), { ctx = { C0, C1 } })
    local i = 0
    for _, p in net:collect_params():items() do
      i = i + 1
      p:set_data(nd.array(init[i]):reshape(p.shape))
    end
    local tr = train(net, { C0, C1 }, trainer_opts, 3, opt)
    assert.is_truthy(tr._kv)
    local want = weights(ref)
    local got0, got1 = weights(net, C0), weights(net, C1)
    for k = 1, #want do
      close(got0[k], want[k])
      assert.are.same(got0[k], got1[k]) -- every copy gets the same update, bitwise
    end
  end
  it("kvstore='device', update on the store (MXNet's default)", function() compare(nil) end)
  it("kvstore='local', update_on_kvstore=false (allreduce, then each device)", function()
    compare({ kvstore = "local", update_on_kvstore = false })
  end)
  it("adam on each device: the update counters stay per step, not per copy", function()
    compare({ update_on_kvstore = false }, "adam")
  end)
  it("an mx.kv object as kvstore", function() compare({ kvstore = mx.kv.create("device") }) end)

  it("allreduce_grads sums every copy's gradient; update applies it", function()
    local net = nn.Dense(1, { in_units = 2, use_bias = false })
    net:initialize(mx.init.Constant(1), { C0, C1 })
    local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 1 },
      { update_on_kvstore = false })
    local xs = { nd.array({ { 1, 2 } }), nd.array({ { 10, 20 } }, { ctx = C1 }) }
    local ls = {}
    mx.autograd.record(function() for i = 1, 2 do ls[i] = net(xs[i]):sum() end end)
    mx.autograd.backward(ls)
    tr:allreduce_grads()
    assert.are.same({ 11, 22 }, net.weight:grad(C1):tolist())
    tr:update(1)
    assert.are.same({ -10, -21 }, net.weight:data(C1):tolist())
    local tr2 = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 1 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() tr2:allreduce_grads() end, line)
    assert.matches("update_on_kvstore=false", msg, 1, true)
  end)
end)

describe("Trainer and reset_ctx", function()
  it("copies made after the first step (reset_ctx) get a store: they stay equal", function()
    local net = nn.Dense(1, { in_units = 2, use_bias = false })
    net:initialize(mx.init.Constant(1))
    local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 1 })
    local function step(xs)
      local ls = {}
      mx.autograd.record(function() for i = 1, #xs do ls[i] = net(xs[i]):sum() end end)
      mx.autograd.backward(ls)
      tr:step(1)
    end
    step({ nd.array({ { 1, 1 } }) })
    assert.is_nil(tr._kv)
    net:reset_ctx({ C0, C1 })
    step({ nd.array({ { 1, 2 } }), nd.array({ { 10, 20 } }, { ctx = C1 }) })
    assert.is_truthy(tr._kv)
    assert.are.same({ -11, -22 }, net.weight:data(C0):tolist())
    assert.are.same({ -11, -22 }, net.weight:data(C1):tolist())
  end)
end)

describe("Trainer kvstore options", function()
  it("update_on_kvstore=false with an async store, and a bad kvstore, are errors", function()
    local net = nn.Dense(1, { in_units = 2 })
    net:initialize()
    local fake = { type = "dist_async", pushpull = function() end }
    local tr = gluon.Trainer(net:collect_params(), "sgd", nil, { kvstore = fake, update_on_kvstore = false })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() tr:step(1) end, line)
    assert.matches("update_on_kvstore must be true with an async kvstore (dist_async)", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() gluon.Trainer(net:collect_params(), "sgd", nil, { kvstore = 3 }) end, line)
    assert.matches("Trainer: kvstore must be a type name", msg, 1, true)
    net:reset_ctx({ C0, C1 })
    local tr2 = gluon.Trainer(net:collect_params(), "sgd", nil, { kvstore = "bogus" })
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() tr2:step(1) end, line)
    assert.matches('Trainer: mx.kv.create: unknown kvstore type "bogus"', msg, 1, true)
  end)
end)

describe("Trainer states on several devices", function()
  local function run(topts, opt)
    local tmp = os.tmpname()
    mx.random.seed(3)
    local net = mlp()
    net:initialize(mx.init.Xavier(), { C0, C1 })
    local tr = train(net, { C0, C1 }, topts, 2, opt)
    tr:save_states(tmp)
    local mid = weights(net)
    local x, y = batch()
    local function one_step(n, t)
      local xs, ys = gluon.utils.split_and_load(x, { C0, C1 }), gluon.utils.split_and_load(y, { C0, C1 })
      local ls = {}
      mx.autograd.record(function() for i = 1, 2 do ls[i] = loss_fn(n(xs[i]), ys[i]) end end)
      mx.autograd.backward(ls)
      t:step(8)
    end
    one_step(net, tr)
    local want = weights(net, C1)
    -- a fresh net with the weights after two steps and the saved states
    local net2 = mlp()
    net2:initialize(mx.init.Xavier(), { C0, C1 })
    local i = 0
    for _, p in net2:collect_params():items() do
      i = i + 1
      p:set_data(nd.array(mid[i]):reshape(p.shape))
    end
    local tr2 = gluon.Trainer(net2:collect_params(), opt or "sgd", opt == "adam"
      and { learning_rate = 0.05, wd = 0.01 } or { learning_rate = 0.5, momentum = 0.9, wd = 0.01 },
      topts)
    tr2:load_states(tmp)
    os.remove(tmp)
    one_step(net2, tr2)
    local got = weights(net2, C1)
    for k = 1, #want do assert.are.same(want[k], got[k]) end
  end
  it("save_states / load_states with the store updating", function() run(nil) end)
  it("save_states / load_states with per-device updates (adam)", function()
    run({ update_on_kvstore = false }, "adam")
  end)
end)

describe("model parallelism", function()
  it("two blocks on cpu(0) / cpu(1) train to the weights of one device", function()
    local Net = gluon.Block:extend("TwoDevNet")
    function Net:__init(dev2)
      Net.super.__init(self)
      self.a = nn.Dense(6, { activation = "tanh", in_units = 5 })
      self.b = nn.Dense(3, { in_units = 6 })
      rawset(self, "_dev2", dev2)
    end
    function Net:forward(x)
      local h = self.a(x)
      return self.b(h:as_in_context(rawget(self, "_dev2")))
    end
    local function run(dev2)
      mx.random.seed(5)
      local net = Net(dev2)
      net:initialize(mx.init.Xavier())
      net.b:reset_ctx(dev2)
      local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.5, momentum = 0.9 })
      local x, y = batch()
      for _ = 1, 3 do
        local l
        mx.autograd.record(function() l = loss_fn(net(x), y:to(dev2)) end)
        l:backward()
        tr:step(8)
      end
      assert.are.equal(dev2, net.b.weight:data():context())
      assert.are.equal(C0, net.a.weight:data():context())
      return weights(net)
    end
    local one, two = run(C0), run(C1)
    for k = 1, #one do assert.are.same(one[k], two[k]) end
  end)
end)
