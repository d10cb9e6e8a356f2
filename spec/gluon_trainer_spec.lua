-- gluon.Trainer: step against hand-computed updates, multipliers, grad_req null,
-- learning-rate control, save/load_states, and a small end-to-end training run.
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn
local nd = mx.nd

local close = require("helpers.close").within(1e-6)
local H = require("helpers.la")
local FILE = "gluon_trainer_spec.lua"
local tmp = os.tmpname()
teardown(function() os.remove(tmp) end)

-- a Dense layer and the gradient of sum(out) (dW = ones^T x, db = batch)
local function setup(opts)
  local d = nn.Dense(2, opts or { in_units = 3 })
  d:initialize(mx.init.Normal(0.5))
  local x = nd.array { { 1, 2, 3 }, { -1, 0.5, 2 } }
  return d, x
end
local function fwd_bwd(d, x)
  local l
  mx.autograd.record(function() l = d(x):sum() end)
  l:backward()
end

describe("gluon.Trainer", function()
  it("step(batch_size) applies sgd with rescale_grad = 1/batch_size and wd", function()
    local d, x = setup()
    local tr = gluon.Trainer(d:collect_params(), "sgd", { learning_rate = 0.1, wd = 0.01 })
    local w0, b0 = d.weight:data():tolist(), d.bias:data():tolist()
    fwd_bwd(d, x)
    tr:step(2)
    -- dW[j][k] = sum_i x[i][k] = {0, 2.5, 5}; db = 2
    local gx = { 0, 2.5, 5 }
    local ew, eb = {}, {}
    for j = 0, 1 do
      for k = 1, 3 do
        local w = w0[j * 3 + k]
        ew[j * 3 + k] = w - 0.1 * (gx[k] / 2 + 0.01 * w)
      end
      eb[j + 1] = b0[j + 1] - 0.1 * (2 / 2 + 0.01 * b0[j + 1])
    end
    close(d.weight:data(), ew)
    close(d.bias:data(), eb)
  end)

  it("honours lr_mult, wd_mult, clip_gradient and grad_req null", function()
    local d, x = setup()
    d.weight.lr_mult = 0.5
    d.bias.grad_req = "null"
    local tr = gluon.Trainer(d:collect_params(), "sgd",
      { learning_rate = 1, clip_gradient = 1 })
    local w0, b0 = d.weight:data():tolist(), d.bias:data():tolist()
    fwd_bwd(d, x)
    tr:step(1)
    local gx = { 0, 1, 1 } -- clipped to [-1, 1]
    local ew = {}
    for j = 0, 1 do for k = 1, 3 do ew[j * 3 + k] = w0[j * 3 + k] - 0.5 * gx[k] end end
    close(d.weight:data(), ew)
    close(d.bias:data(), b0)
  end)

  it("learning_rate and set_learning_rate; a scheduler drives the rate", function()
    local d = setup()
    local tr = gluon.Trainer(d:collect_params(), "adam", { learning_rate = 0.01 })
    assert.are.equal(0.01, tr.learning_rate)
    tr:set_learning_rate(0.5)
    assert.are.equal(0.5, tr.learning_rate)
    assert.are.equal("Adam", getmetatable(tr.optimizer).__name)
    local sched = mx.lr_scheduler.FactorScheduler(1, { factor = 0.5, base_lr = 1 })
    local d2, x2 = setup()
    local t2 = gluon.Trainer(d2:collect_params(), "sgd", { lr_scheduler = sched })
    fwd_bwd(d2, x2)
    t2:step(1)
    fwd_bwd(d2, x2)
    t2:step(1)
    assert.are.equal(0.5, t2.learning_rate)
    assert.has_error(function() t2:set_learning_rate(0.1) end)
  end)

  it("rejects bad arguments", function()
    local d = setup()
    assert.has_error(function() gluon.Trainer(d:collect_params(), "nadamx") end)
    assert.has_error(function() gluon.Trainer(5, "sgd") end)
    local tr = gluon.Trainer(d:collect_params(), "sgd")
    assert.has_error(function() tr:step(0) end)
    local e = nn.Dense(2)
    e:initialize()
    local t3 = gluon.Trainer(e:collect_params(), "sgd")
    assert.has_error(function() t3:step(1) end) -- deferred: never ran forward
  end)

  it("save_states / load_states continue training identically", function()
    local function make()
      mx.random.seed(3)
      local d, x = setup()
      return d, x, gluon.Trainer(d:collect_params(), "adam", { learning_rate = 0.05 })
    end
    local d1, x, t1 = make()
    for _ = 1, 3 do fwd_bwd(d1, x) t1:step(2) end
    t1:save_states(tmp)
    d1:save_parameters(tmp .. ".params")
    for _ = 1, 2 do fwd_bwd(d1, x) t1:step(2) end
    local d2, _, t2 = make()
    d2:load_parameters(tmp .. ".params")
    t2:load_states(tmp)
    assert.are.equal(3, t2.optimizer.num_update)
    for _ = 1, 2 do fwd_bwd(d2, x) t2:step(2) end
    close(d2.weight:data(), d1.weight:data(), 1e-6)
    close(d2.bias:data(), d1.bias:data(), 1e-6)
    os.remove(tmp .. ".params")
    -- the file is .params: tensors and a plain-text header, nothing executable
    local f = mx.nd.load(tmp)
    local hdr = {}
    for i, b in ipairs(f.__trainer_header__:tolist()) do hdr[i] = string.char(b) end
    hdr = table.concat(hdr)
    assert.truthy(hdr:find("num_update=n:3", 1, true))
    assert.truthy(f["1:1"] and f["1:2"])
    -- states of another optimizer are refused
    local d3 = setup()
    local t3 = gluon.Trainer(d3:collect_params(), "sgd")
    assert.has_error(function() t3:load_states(tmp) end)
  end)

  it("trains a small MLP to separate two classes", function()
    mx.random.seed(7)
    local n = 64
    local xs, ys = {}, {}
    for i = 1, n do
      local c = i % 2
      xs[i] = { (c == 1 and 1 or -1) + (math.random() - 0.5), (math.random() - 0.5) * 2 }
      ys[i] = c
    end
    local x, y = nd.array(xs), nd.array(ys)
    local net = nn.Sequential()
    net:add(nn.Dense(8, { activation = "tanh" }), nn.Dense(2))
    net:initialize(mx.init.Xavier())
    local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.5, momentum = 0.9 })
    local first, last
    for i = 1, 40 do
      local l
      mx.autograd.record(function() l = loss_fn(net(x), y) end)
      l:backward()
      tr:step(n)
      local v = l:mean():item()
      if i == 1 then first = v end
      last = v
    end
    assert.is_true(last < first / 4, string.format("loss %g -> %g", first, last))
    local acc = gluon.metric.Accuracy()
    acc:update(y, net(x))
    local _, a = acc:get()
    assert.is_true(a > 0.95, "accuracy " .. a)
  end)

  it("refuses a stale gradient, or skips it with ignore_stale_grad (MXNet 1.9)", function()
    -- two branches; a step after a forward through one only
    local a, b = nn.Dense(2, { in_units = 3 }), nn.Dense(2, { in_units = 3 })
    local net = nn.Sequential()
    net:add(a, b)
    net:initialize(mx.init.Normal(0.5))
    local x = nd.array { { 1, 2, 3 } }
    local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1 })
    -- no backward at all yet: every parameter is stale
    H.assert_error(function(mark) mark() tr:step(1) end, FILE,
      "Trainer:step: Gradient of Parameter `0.weight` on context cpu(0) has not been updated "
      .. "by backward since last `step`", "ignore_stale_grad=true")
    local function fwd_a()
      local l
      mx.autograd.record(function() l = a(x):sum() end)
      l:backward()
    end
    fwd_a()
    H.assert_error(function(mark) mark() tr:step(1) end, FILE, "Parameter `1.weight`")
    -- the failed step changed nothing: a's gradient is still fresh
    local aw, bw = a.weight:data():tolist(), b.weight:data():tolist()
    tr:step(1, true)
    assert.are_not.same(aw, a.weight:data():tolist())
    assert.are.same(bw, b.weight:data():tolist()) -- skipped, not updated
    -- a second step without backward re-applied the old gradient before the fix
    aw = a.weight:data():tolist()
    H.assert_error(function(mark) mark() tr:step(1) end, FILE, "Parameter `0.weight`")
    tr:step(1, true)
    assert.are.same(aw, a.weight:data():tolist())
    assert.are.same(bw, b.weight:data():tolist())
    -- update() checks the same way
    H.assert_error(function(mark) mark() tr:update(1) end, FILE, "has not been updated by backward")
    -- reading or zeroing the gradient through the Parameter is not a backward
    a.weight:grad():tolist()
    net:collect_params():zero_grad()
    H.assert_error(function(mark) mark() tr:step(1, false) end, FILE, "Parameter `0.weight`")
    fwd_a()
    tr:step(1, true)
  end)

  it("a fresh gradient per backward with grad_req add; cast and set_grad_req reset the mark", function()
    local d, x = setup()
    d.weight:set_grad_req("add")
    local tr = gluon.Trainer(d:collect_params(), "sgd", { learning_rate = 1 })
    fwd_bwd(d, x)
    fwd_bwd(d, x) -- accumulates: dW = 2 * {0, 2.5, 5} per row
    local w0 = d.weight:data():tolist()
    tr:step(1)
    local ew = {}
    for j = 0, 1 do for k = 1, 3 do ew[j * 3 + k] = w0[j * 3 + k] - 2 * ({ 0, 2.5, 5 })[k] end end
    close(d.weight:data(), ew)
    d.weight:set_grad_req("write") -- a new buffer: stale until the next backward
    H.assert_error(function(mark) mark() tr:step(1) end, FILE, "Parameter `weight`")
    fwd_bwd(d, x)
    tr:step(1)
    d:cast("float64")
    H.assert_error(function(mark) mark() tr:step(1) end, FILE, "Parameter `weight`")
  end)

  it("a shared parameter listed under two names is updated once per step", function()
    local b = gluon.Block()
    b.x = nn.Dense(1, { in_units = 1, use_bias = false })
    b.y = nn.Dense(1, { in_units = 1, use_bias = false })
    b.y:share_parameters(b.x:collect_params())
    b:initialize(mx.init.One())
    assert.are.equal(2, b:collect_params():len())
    local tr = gluon.Trainer(b:collect_params(), "sgd", { learning_rate = 0.5 })
    local x = nd.array { { 1 } }
    mx.autograd.record(function() local l = b.x(x) l:backward() end)
    tr:step(1)
    assert.is_true(math.abs(b.x.weight:data():tolist()[1] - 0.5) < 1e-6)
  end)
end)
