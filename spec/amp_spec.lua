-- spec/amp_spec.lua — the amp family (core/ops/amp.lua: amp_cast, amp_multicast) and
-- mx.amp (MXNet 1.9's mx.contrib.amp): the op table's policy lists, autocast in eager,
-- recorded and hybridized calls with casts made once per tensor, convert_model /
-- convert_hybrid_block, dynamic loss scaling with an injected overflow. The gradients of
-- the casts are checked by spec/gradcheck_spec.lua; bf16 training of the examples against
-- float32 is spec/amp_train_spec.lua (#slow).
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local amp = mx.amp
local ac = require("mx.amp.autocast")

local function maxdiff(a, b)
  return nd.max(nd.abs(nd.sub(a:astype("float32"), b:astype("float32")))):item()
end

local function small_net()
  mx.random.seed(3)
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(6, 3, { padding = 1, in_channels = 3 }), nn.BatchNorm(), nn.Activation("relu"),
    nn.MaxPool2D(2), nn.Flatten(), nn.Dense(16, { activation = "relu" }), nn.Dense(4))
  net:initialize(mx.init.Xavier())
  return net
end

-- ops (by name) of a symbol, in order
local function ops_of(s)
  local r = {}
  for _, n in ipairs(s:_topo()) do if n.op then r[#r + 1] = n.op.name end end
  return r
end
local function count(list, name)
  local c = 0
  for _, v in ipairs(list) do if v == name then c = c + 1 end end
  return c
end

describe("amp_cast / amp_multicast", function()
  it("amp_cast rounds floats to nearest even and passes integers through", function()
    local x = nd.array({ 1.0, 1.00390625, 1.01171875, -3.5, 65504 })
    local y = nd.amp_cast(x, { dtype = "bfloat16" })
    assert.equal("bfloat16", y:dtype())
    -- bf16 has 8 significant bits: 1 + 2^-8 is a tie (to even: 1), 1 + 3*2^-8 -> 1 + 2^-6
    assert.same({ 1, 1, 1.015625, -3.5, 65536 }, y:astype("float32"):tolist())
    local h = nd.amp_cast(x, { dtype = "float16" })
    assert.same({ 1, 1.00390625, 1.01171875, -3.5, 65504 }, h:astype("float32"):tolist())
    local i = nd.amp_cast(nd.array({ 1, 2 }, { dtype = "int32" }), { dtype = "float16" })
    assert.equal("int32", i:dtype())
    assert.same({ 1, 2 }, i:tolist())
  end)

  it("the CPU kernel equals the reference kernel", function()
    local x = nd.random.normal(0, 100, { 70000 })
    for _, dt in ipairs({ "bfloat16", "float16", "float64" }) do
      local a, b = nd.amp_cast(x, { dtype = dt }), nd._ref.amp_cast(x, { dtype = dt })
      assert.equal(0, maxdiff(a, b), dt)
    end
  end)

  it("the CPU kernel's f32 <-> bf16 loops equal the reference on ties, Inf, NaN, denormals", function()
    -- 1 + 2^-8 and 1 + 3*2^-8: ties (to even); 3.4e38 rounds past bf16's max to Inf;
    -- 1e-40 a float32 denormal; over 70000 elements so that the parallel blocks split
    local special = { 1.00390625, 1.01171875, -1.01171875, 3.4e38, -3.4e38, 1 / 0, -1 / 0,
      0 / 0, 1e-40, -1e-40, 0, -0.0 }
    local vals = nd.random.normal(0, 1e3, { 70000 }):tolist()
    for i, v in ipairs(special) do vals[i * 997] = v end
    local x = nd.array(vals)
    local a, b = nd.amp_cast(x, { dtype = "bfloat16" }), nd._ref.amp_cast(x, { dtype = "bfloat16" })
    local la, lb = a:astype("float32"):tolist(), b:astype("float32"):tolist()
    local back, ref_back = nd.amp_cast(a, { dtype = "float32" }):tolist(),
      nd._ref.amp_cast(a, { dtype = "float32" }):tolist()
    for i = 1, #vals do
      local p, q = la[i], lb[i]
      if p ~= q and not (p ~= p and q ~= q) then
        error(string.format("element %d (%.9g): cpu %.9g, ref %.9g", i, vals[i], p, q))
      end
      p, q = back[i], ref_back[i]
      if p ~= q and not (p ~= p and q ~= q) then
        error(string.format("back to f32, element %d: cpu %.9g, ref %.9g", i, p, q))
      end
    end
    assert.equal(1 / 0, la[4 * 997])
    assert.is_true(la[8 * 997] ~= la[8 * 997]) -- NaN stays NaN
  end)

  it("amp_multicast casts to the widest (or narrowest) float dtype", function()
    local a = nd.array({ 1, 2 }, { dtype = "bfloat16" })
    local b = nd.array({ 3 }, { dtype = "float32" })
    local c = nd.array({ 4 }, { dtype = "int64" })
    local x, y, z = nd.amp_multicast(a, b, c, { num_outputs = 3 })
    assert.same({ "float32", "float32", "int64" }, { x:dtype(), y:dtype(), z:dtype() })
    x, y = nd.amp_multicast(a, b, { num_outputs = 2, cast_narrow = true })
    assert.same({ "bfloat16", "bfloat16" }, { x:dtype(), y:dtype() })
    assert.has_error(function() nd.amp_multicast(a, b, { num_outputs = 3 }) end,
      "amp_multicast: num_outputs must equal the number of inputs (2)")
    assert.has_error(function() nd.amp_cast(a, { dtype = "int8" }) end,
      "amp_cast: dtype must be a float dtype, got int8")
  end)
end)

describe("mx.amp policy lists", function()
  it("come from the op table's amp column, with MXNet's categories", function()
    local t = amp.list_target_ops()
    for _, name in ipairs({ "convolution", "fully_connected", "dot", "batch_dot", "deconvolution" }) do
      assert.is_true(count(t, name) == 1, name)
    end
    local f = amp.list_fp32_ops()
    for _, name in ipairs({ "softmax", "log_softmax", "batch_norm", "layer_norm", "sum" }) do
      assert.is_true(count(f, name) == 1, name)
    end
    assert.is_true(count(amp.list_widest_ops(), "add") == 1)
    local cond = amp.list_conditional_fp32_ops()
    assert.same({ "activation", "act_type", { "softrelu" } }, cond[1])
    local doc = io.open("docs/ops.md"):read("*a")
    assert.truthy(doc:find("target dtype (TARGET_DTYPE_OPS): dot, batch_dot", 1, true))
  end)

  it("rejects bad options", function()
    assert.has_error(function() amp.init { target_dtype = "int8" } end,
      "amp.init: target_dtype must be 'bfloat16' or 'float16', got int8")
    assert.has_error(function() amp.init { fp32_ops = { "nosuchop" } } end,
      "amp.init: unknown op 'nosuchop' (luamx or MXNet op names)")
    assert.has_error(function() amp.init { bogus = 1 } end, "amp.init: unknown option 'bogus'")
    assert.is_false(amp.is_initialized())
  end)
end)

describe("mx.amp.init (autocast)", function()
  after_each(function() amp.shutdown() end)

  it("runs target ops in bfloat16, fp32 ops in float32, widest ops in the widest dtype", function()
    local x = nd.random.uniform(-1, 1, { 4, 8 })
    local w = nd.random.uniform(-1, 1, { 5, 8 })
    local y32 = nd.fully_connected(x, w, { num_hidden = 5, no_bias = true })
    amp.init { target_dtype = "bfloat16" }
    assert.is_true(amp.is_initialized())
    assert.equal("bfloat16", amp.target_dtype())
    local y = nd.fully_connected(x, w, { num_hidden = 5, no_bias = true })
    assert.equal("bfloat16", y:dtype())
    assert.is_true(maxdiff(y, y32) < 0.05)
    assert.equal("float32", nd.softmax(y):dtype())
    assert.equal("float32", nd.add(y, x[{ {}, { 1, 5 } }]):dtype())
    assert.equal("bfloat16", nd.relu(y):dtype())
    assert.equal("float32", nd.activation(y, { act_type = "softrelu" }):dtype())
    assert.equal("bfloat16", nd.activation(y, { act_type = "tanh" }):dtype())
    assert.equal("bfloat16", (y * 2):dtype())
    -- the user's lists override the table
    amp.init { target_dtype = "bfloat16", fp32_ops = { "FullyConnected" } }
    assert.equal("float32", nd.fully_connected(x, w, { num_hidden = 5, no_bias = true }):dtype())
  end)

  it("float16 on the CPU runs convolution (no float16 kernel) in float32", function()
    amp.init { target_dtype = "float16" }
    local y = nd.convolution(nd.ones({ 1, 1, 3, 3 }), nd.ones({ 1, 1, 3, 3 }),
      { kernel = { 3, 3 }, num_filter = 1, no_bias = true })
    assert.equal("float32", y:dtype())
    assert.equal(9, y:item())
    local f = nd.fully_connected(nd.ones({ 1, 4 }), nd.ones({ 2, 4 }), { num_hidden = 2, no_bias = true })
    assert.equal("float16", f:dtype())
  end)

  it("casts a tensor once and reuses the cast until the tensor or the scope changes", function()
    amp.init { target_dtype = "bfloat16" }
    local w = nd.random.uniform(-1, 1, { 3, 3 })
    local c1 = ac.cast(w, "bfloat16")
    assert.is_true(rawequal(c1, ac.cast(w, "bfloat16")))
    nd.add(w, 1, { out = w }) -- an in-place write: the cast is stale
    local c2 = ac.cast(w, "bfloat16")
    assert.is_false(rawequal(c1, c2))
    assert.is_true(maxdiff(c2, w) < 0.01)
    local c3
    mx.autograd.record(function() c3 = ac.cast(w, "bfloat16") end)
    assert.is_false(rawequal(c2, c3)) -- a new record scope casts on its own tape
    -- an inference loop: every call reads the one cast of the weight
    local x = nd.ones({ 2, 3 })
    nd.fully_connected(x, w, { num_hidden = 3, no_bias = true })
    local e = ac.cast(w, "bfloat16")
    for _ = 1, 3 do nd.fully_connected(x, w, { num_hidden = 3, no_bias = true }) end
    assert.is_true(rawequal(e, ac.cast(w, "bfloat16")))
  end)

  it("records the casts: gradients reach float32 parameters", function()
    mx.random.seed(4)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(6, 3, { padding = 1, in_channels = 3, activation = "relu" }), nn.Flatten(),
      nn.Dense(4))
    net:initialize(mx.init.Xavier())
    local x = nd.random.uniform(0, 1, { 4, 3, 8, 8 })
    local dense_grads = {}
    local function grads()
      local L
      mx.autograd.record(function() L = nd.sum(net(x):astype("float32")) end)
      L:backward()
      dense_grads[#dense_grads + 1] = net[3].weight:grad():copy()
      return net[1].weight:grad():copy()
    end
    local g32 = grads()
    amp.init { target_dtype = "bfloat16" }
    local g16 = grads()
    assert.equal("float32", net[1].weight:data():dtype())
    assert.equal("float32", g16:dtype())
    -- relative error of the whole gradient: the conv's sums over 256 positions of mixed
    -- signs are small next to their terms, and a relu mask that flips where the
    -- pre-activation is within bfloat16's rounding of 0 moves them by a whole term (measured
    -- 5%); the Dense weight's gradient has no such cancellation (0.3%)
    local rel = nd.norm(nd.sub(g16, g32)):item() / nd.norm(g32):item()
    assert.is_true(rel < 0.1, "bf16 conv gradient's relative error " .. rel)
    local d32, d16 = dense_grads[1], dense_grads[2]
    rel = nd.norm(nd.sub(d16, d32)):item() / nd.norm(d32):item()
    assert.is_true(rel < 0.01, "bf16 dense gradient's relative error " .. rel)
  end)

  it("hybridized graphs carry one amp_cast per cast tensor", function()
    local net = small_net()
    local x = nd.random.uniform(0, 1, { 2, 3, 8, 8 })
    local y32 = net(x)
    amp.init { target_dtype = "bfloat16" }
    net:hybridize()
    local y = net(x)
    assert.equal("float32", y:astype("float32"):dtype())
    assert.is_true(maxdiff(y, y32) < 0.05 * nd.max(nd.abs(y32)):item() + 0.02)
    local X = require("mx.gluon._export")
    local s = X.symbol_of(net, 1, true)
    local ops = ops_of(s)
    -- conv: data, weight, bias; two Dense: weight, bias each (their data comes bf16 from
    -- relu after the first; the flatten of float32 batchnorm output is cast once)
    local casts = count(ops, "amp_cast")
    assert.is_true(casts >= 7 and casts <= 9, "amp_cast nodes: " .. casts)
    -- a second call replays the same graph; amp off gives a graph without casts
    net(x)
    amp.shutdown()
    net(x)
    assert.equal(0, count(ops_of(X.symbol_of(net, 1, true)), "amp_cast"))
  end)

  it("an init with the same setting as an earlier one reuses the graphs traced under it", function()
    local net = small_net()
    local x = nd.random.uniform(0, 1, { 2, 3, 8, 8 })
    net(x)
    net:hybridize()
    local function sig_after(opts)
      amp.init(opts)
      local sig = require("mx.core.state").amp_sig
      net(x)
      amp.shutdown()
      return sig
    end
    local a = sig_after({ target_dtype = "bfloat16" })
    local b = sig_after({ target_dtype = "bfloat16" })
    local c = sig_after({ target_dtype = "bfloat16", fp32_ops = { "Convolution" } })
    assert.equal(a, b)
    assert.not_equal(a, c)
    assert.not_equal(a, sig_after({ target_dtype = "float16" }))
    -- each setting replays its own graph: the fp32_ops one has no casts for the convolution
    local X = require("mx.gluon._export")
    local function casts(opts)
      amp.init(opts)
      net(x)
      local n = count(ops_of(X.symbol_of(net, 1, true)), "amp_cast")
      amp.shutdown()
      return n
    end
    local ca, cc = casts({ target_dtype = "bfloat16" }),
      casts({ target_dtype = "bfloat16", fp32_ops = { "Convolution" } })
    assert.is_true(cc < ca, cc .. " casts with a float32 convolution, " .. ca .. " without")
    assert.equal(ca, casts({ target_dtype = "bfloat16" }))
  end)
end)

describe("mx.amp with deferred initialisation", function()
  it("a layer whose shapes wait for the first (bf16) input infers them and trains", function()
    mx.random.seed(4)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(6, 5, { padding = 2, activation = "relu" }), nn.MaxPool2D(2),
      nn.Conv2D(16, 5, { activation = "relu" }), nn.Flatten(), nn.Dense(10))
    net:initialize(mx.init.Xavier())
    net:hybridize()
    amp.init { target_dtype = "bfloat16" }
    local ok, err = pcall(function()
      local x = nd.random.uniform(0, 1, { 2, 1, 16, 16 })
      local y
      mx.autograd.record(function() y = net(x) end)
      y:backward()
      assert.equal("bfloat16", y:dtype())
      assert.same({ 2, 10 }, y:shape())
      -- the second conv's weight: inferred (16, 6, 5, 5), float32, with a gradient
      local w = net[3].weight
      assert.same({ 16, 6, 5, 5 }, w:data():shape())
      assert.equal("float32", w:data():dtype())
      assert.is_true(nd.sum(nd.abs(w:grad())):item() > 0)
    end)
    amp.shutdown()
    assert(ok, err)
  end)

  it("a BatchNorm after a bf16 convolution infers its float32 statistics' shapes", function()
    mx.random.seed(4)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(8, 3), nn.BatchNorm(), nn.Activation("relu"), nn.Dense(3))
    net:initialize(mx.init.Xavier())
    net:hybridize()
    amp.init { target_dtype = "bfloat16" }
    local ok, err = pcall(function()
      local x = nd.random.uniform(0, 1, { 2, 3, 8, 8 })
      local y
      mx.autograd.record(function() y = net(x) end)
      y:backward()
      local bn = net[2]
      assert.same({ 8 }, bn.gamma:data():shape())
      assert.equal("float32", bn.gamma:data():dtype())
      assert.equal("float32", bn.running_mean:data():dtype())
      assert.is_true(nd.sum(nd.abs(bn.beta:grad())):item() > 0)
    end)
    amp.shutdown()
    assert(ok, err)
  end)
end)

describe("mx.amp.convert_model / convert_hybrid_block", function()
  it("inserts amp_cast before target and fp32 ops, once per entry", function()
    local sym = mx.sym
    local data = sym.var("data")
    local fc1 = sym.FullyConnected(data, { num_hidden = 8, name = "fc1" })
    local fc2 = sym.FullyConnected(data, { num_hidden = 8, name = "fc2" })
    local out = sym.softmax(sym.add(fc1, fc2), { name = "sm" })
    local args = { fc1_weight = nd.random.uniform(-1, 1, { 8, 4 }), fc1_bias = nd.zeros({ 8 }),
      fc2_weight = nd.random.uniform(-1, 1, { 8, 4 }), fc2_bias = nd.zeros({ 8 }) }
    local s2, a2 = amp.convert_model(out, args, {}, { target_dtype = "bfloat16" })
    local ops = ops_of(s2)
    -- data cast once for both layers, the four params once each, softmax's input to f32
    assert.equal(6, count(ops, "amp_cast"))
    assert.equal(0, count(ops, "amp_multicast"))
    local js = s2:tojson()
    assert.truthy(js:find('"op": "amp_cast"', 1, true) or js:find('"op":"amp_cast"', 1, true))
    local x = nd.random.uniform(-1, 1, { 3, 4 })
    local vals = { data = x }
    for k, v in pairs(args) do vals[k] = v end
    local want = out:eval(nil, vals)[1]
    for k, v in pairs(a2) do vals[k] = v end
    local got = s2:eval(nil, vals)[1]
    assert.equal("float32", got:dtype())
    assert.is_true(maxdiff(got, want) < 0.02)
    -- cast_optional_params: the parameters are stored in bfloat16, no cast for them
    local s3, a3 = amp.convert_model(out, args, {}, { target_dtype = "bfloat16",
      cast_optional_params = true })
    assert.equal(2, count(ops_of(s3), "amp_cast"))
    assert.equal("bfloat16", a3.fc1_weight:dtype())
    assert.equal("float32", args.fc1_weight:dtype())
    -- excluded layers stay float32; mixed inputs of a widest op get amp_multicast
    local s4 = amp.convert_model(out, args, {}, { target_dtype = "bfloat16",
      excluded_sym_names = { "fc2" } })
    local o4 = ops_of(s4)
    assert.equal(1, count(o4, "amp_multicast"))
  end)

  it("convert_hybrid_block gives a SymbolBlock within bfloat16's bounds", function()
    local net = small_net()
    net:hybridize()
    local x = nd.random.uniform(0, 1, { 2, 3, 8, 8 })
    local y32 = net(x)
    local b = amp.convert_hybrid_block(net, { target_dtype = "bfloat16", cast_optional_params = true })
    local y = b(x)
    -- bf16 keeps 8 significant bits: 3 layers of products, outputs within 2% of their range
    assert.is_true(maxdiff(y, y32) <= 0.02 * nd.max(nd.abs(y32)):item() + 1e-3,
      "diff " .. maxdiff(y, y32))
    assert.equal("bfloat16", b:collect_params():get("0.weight").dtype) -- the trace's name
    assert.is_false(amp.is_initialized())
  end)
end)

describe("mx.amp loss scaling", function()
  after_each(function() amp.shutdown() end)

  it("float16 training skips an overflowed step, halves the scale, then grows it", function()
    mx.random.seed(5)
    amp.init { target_dtype = "float16" }
    local net = nn.Dense(3, { in_units = 4 })
    net:initialize()
    local trainer = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1 })
    amp.init_trainer(trainer, { init_scale = 1024, scale_window = 2 })
    assert.has_error(function() amp.init_trainer(trainer) end,
      "amp.init_trainer: this trainer is already initialized for AMP")
    local x = nd.random.uniform(-1, 1, { 8, 4 })
    local function step(inject)
      local L
      mx.autograd.record(function()
        L = nd.sum(net(x):astype("float32"))
        -- the injected overflow: a huge factor on the loss makes float16 gradients Inf
        if inject then L = nd.mul(L, 1e30) end
      end)
      amp.scale_loss(L, trainer, function(scaled) scaled:backward() end)
      trainer:step(8)
    end
    local w0 = net.weight:data():copy()
    step(true) -- float16 gradients overflow to Inf: no update
    assert.equal(0, maxdiff(net.weight:data(), w0))
    assert.equal(512, amp.loss_scale(trainer))
    step(false)
    assert.is_true(maxdiff(net.weight:data(), w0) > 0)
    -- the update used the unscaled gradient: w - lr * dL/dw with dL/dw = sum of x rows
    local want = nd.sub(w0, nd.mul(nd.broadcast_to(nd.reshape(nd.sum(x, { axis = 1 }), { 1, 4 }),
      { shape = { 3, 4 } }), 0.1 / 8))
    assert.is_true(maxdiff(net.weight:data(), want) < 1e-3)
    step(false)
    assert.equal(1024, amp.loss_scale(trainer)) -- two clean steps (scale_window) double it
    assert.has_error(function() amp.scale_loss(nd.ones({ 1 }), {}, function() end) end,
      "amp.scale_loss: call amp.init_trainer(trainer) first")
  end)
end)
