-- spec/amp_train_spec.lua (#slow) — bf16 training under mx.amp (amp.init{target_dtype=
-- "bfloat16"}) against the same run in float32: the same seed, data and order, short but
-- real training runs on real data (each `it` under ~3 minutes on one core).
--   LeNet-5 on Debian's Fashion-MNIST (2 epochs of all 60000 training images, Adam with
--     cosine decay), scored on all 10000 test images: within 0.5 points of float32
--   a ResNet of three BasicBlockV1 stages (16, 32, 64 channels, BatchNorm), one epoch of
--     all 60000 Fashion-MNIST training images (Adam, cosine decay), scored on all 10000
--     test images: within 0.5 points of float32
--   a causal transformer encoder language model (examples/transformer_lm.lua's model:
--     2 layers, units 64, 4 heads) on Debian's fortunes, 600 steps: validation
--     perplexity within 2 % of float32's
-- docs/amp.md has the measured numbers.
local mx = require("mx")
local nd, nn, gluon = mx.nd, mx.gluon.nn, mx.gluon
local amp = mx.amp

local ROOT = "/usr/share/datasets/fashion-mnist"
local FORTUNES = "/usr/share/games/fortunes"

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

local function lenet()
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(6, 5, { padding = 2, activation = "relu" }), nn.MaxPool2D(2),
    nn.Conv2D(16, 5, { activation = "relu" }), nn.MaxPool2D(2), nn.Flatten(),
    nn.Dense(120, { activation = "relu" }), nn.Dense(84, { activation = "relu" }), nn.Dense(10))
  return net
end

-- a ResNet for 28x28 images: a 3x3 stem, three BasicBlockV1 stages (the second and third
-- halve the resolution), global average pooling
local function small_resnet()
  local vision = require("mx.gluon.model_zoo.vision.resnet")
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(16, 3, { padding = 1, use_bias = false }), nn.BatchNorm(),
    nn.Activation("relu"), vision.BasicBlockV1(16, 1, false, 16),
    vision.BasicBlockV1(32, 2, true, 16), vision.BasicBlockV1(64, 2, true, 32),
    nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(10))
  return net
end

local function batches(train, n, bs)
  local ds = gluon.data.vision.FashionMNIST({ train = train })
  local loader = gluon.data.DataLoader(ds, { batch_size = bs, shuffle = false })
  local r = {}
  for x, y in loader:iter() do
    if #r == n then break end
    r[#r + 1] = { nd.transpose(x:astype("float32") / 255, { axes = { 1, 4, 2, 3 } }), y:astype("float32") }
  end
  return r
end

-- all of Fashion-MNIST: 938 training batches of 64, 100 test batches of 100 (read once)
local fashion_data
local function fashion()
  fashion_data = fashion_data or { batches(true, 938, 64), batches(false, 100, 100) }
  return fashion_data[1], fashion_data[2]
end

-- o: make (the model; LeNet), lr (0.003), epochs (2), cosine (decay the rate to 0 over the
-- run, per step: the last weights then do not carry the noise of a large final step)
local function run(train, test, bf16, o)
  o = o or {}
  mx.random.seed(42)
  local net = (o.make or lenet)()
  net:initialize(mx.init.Xavier())
  net:hybridize()
  if bf16 then amp.init({ target_dtype = "bfloat16" }) end
  local ok, acc = pcall(function()
    local lr, epochs = o.lr or 0.003, o.epochs or 2
    local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = lr,
      multi_precision = bf16 })
    local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    local steps, step = epochs * #train, 0
    for _ = 1, epochs do
      for _, b in ipairs(train) do
        if o.cosine then trainer:set_learning_rate(lr * 0.5 * (1 + math.cos(math.pi * step / steps))) end
        step = step + 1
        mx.autograd.record(function()
          local l = loss_fn(net(b[1]), b[2])
          l:backward()
        end)
        trainer:step(b[1]:shape()[1])
      end
    end
    local right, n = 0, 0
    for _, b in ipairs(test) do
      local p = nd.argmax(net(b[1]):astype("float32"), { axis = 2 }) -- 1-based classes
      right = right + nd.sum(nd.equal(p, b[2] + 1)):item()
      n = n + b[1]:shape()[1]
    end
    return right / n
  end)
  if bf16 then amp.shutdown() end
  assert(ok, acc)
  return acc
end

-- examples/transformer_lm.lua's model and training (Adam with warm-up and cosine decay,
-- gradient norm clipped), dropout 0 so that the two runs differ in precision only
local LM_STEPS, LM_C, LM_B = 600, 64, 32
local function lm_run(corpus, bf16)
  mx.random.seed(42)
  math.randomseed(42)
  local V = corpus.vocab.size
  local LM = nn.HybridBlock:extend("AmpSpecLM")
  function LM:__init()
    nn.HybridBlock.__init(self)
    self.embedding = nn.Embedding(V, 64)
    self.encoder = nn.TransformerEncoder({ num_layers = 2, units = 64, hidden_size = 256,
      num_heads = 4, max_length = LM_C, dropout = 0 })
    self.decoder = nn.Dense(V, { flatten = false, in_units = 64 })
  end
  function LM:forward(x)
    return self.decoder(self.encoder(self.embedding(x), nn.causal_mask(x:shape()[2])))
  end
  local net = LM()
  net:initialize(mx.init.Xavier())
  net:hybridize()
  local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
  local function windows(ids, starts)
    local xs, ys = {}, {}
    for b, st in ipairs(starts) do
      local xr, yr = {}, {}
      for i = 1, LM_C do xr[i], yr[i] = ids[st + i - 1], ids[st + i] end
      xs[b], ys[b] = xr, yr
    end
    return nd.array(xs), nd.reshape(nd.array(ys), { -1 })
  end
  if bf16 then amp.init({ target_dtype = "bfloat16" }) end
  local ok, ppl = pcall(function()
    local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = 0.002 })
    local params = {}
    for _, p in net:collect_params():items() do params[#params + 1] = p end
    local warm, per_step = LM_STEPS / 10, LM_B * LM_C
    for step = 1, LM_STEPS do
      trainer:set_learning_rate(step <= warm and 0.002 * step / warm
        or 0.001 * (1 + math.cos(math.pi * (step - warm) / (LM_STEPS - warm + 1))))
      local starts = {}
      for b = 1, LM_B do starts[b] = math.random(1, #corpus.train - LM_C) end
      local x, y = windows(corpus.train, starts)
      local loss = mx.autograd.record(function()
        return loss_fn(nd.reshape(net(x), { -1, V }), y)
      end)
      loss:backward()
      local grads = {}
      for i = 1, #params do grads[i] = params[i]:grad() end
      gluon.utils.clip_global_norm(grads, per_step)
      trainer:step(per_step)
    end
    -- consecutive windows of the held-out text
    local sum, count, starts = 0, 0, {}
    local function flush()
      local x, y = windows(corpus.valid, starts)
      sum = sum + loss_fn(nd.reshape(net(x), { -1, V }), y):astype("float32"):sum():item()
      count = count + #starts * LM_C
      starts = {}
    end
    for st = 1, #corpus.valid - LM_C, LM_C do
      starts[#starts + 1] = st
      if #starts == 64 then flush() end
    end
    if #starts > 0 then flush() end
    return math.exp(sum / count)
  end)
  if bf16 then amp.shutdown() end
  assert(ok, ppl)
  return ppl
end

describe("#slow mx.amp bf16 training", function()
  -- one kernel thread: the runs' length is the same on a shared machine (idle pool threads
  -- spinning against other jobs cost more than the second thread gains at these sizes)
  local threads
  setup(function()
    threads = mx.engine.get_num_threads()
    mx.engine.set_num_threads(1)
  end)
  teardown(function() mx.engine.set_num_threads(threads) end)

  it("LeNet on Fashion-MNIST ends within 0.5 points of float32", function()
    if not exists(ROOT .. "/train-images-idx3-ubyte.gz") then
      pending("no Fashion-MNIST in " .. ROOT .. " (Debian dataset-fashion-mnist)")
      return
    end
    local train, test = fashion()
    local o = { lr = 0.003, epochs = 2, cosine = true }
    local t0 = os.clock()
    local f32 = run(train, test, false, o)
    local t1 = os.clock()
    local bf = run(train, test, true, o)
    io.stderr:write(string.format("# LeNet Fashion-MNIST 2 epochs (60000), 10000 test: f32 %.4f "
      .. "(%.0fs), bf16 %.4f (%.0fs)\n", f32, t1 - t0, bf, os.clock() - t1))
    assert.is_true(f32 > 0.85, "float32 accuracy " .. f32)
    assert.is_true(math.abs(bf - f32) <= 0.005, string.format("bf16 %.4f vs f32 %.4f", bf, f32))
  end)

  it("a small ResNet on Fashion-MNIST ends within 0.5 points of float32", function()
    if not exists(ROOT .. "/train-images-idx3-ubyte.gz") then
      pending("no Fashion-MNIST in " .. ROOT .. " (Debian dataset-fashion-mnist)")
      return
    end
    local train, test = fashion()
    local o = { make = small_resnet, lr = 0.002, epochs = 1, cosine = true }
    local t0 = os.clock()
    local f32 = run(train, test, false, o)
    local t1 = os.clock()
    local bf = run(train, test, true, o)
    io.stderr:write(string.format("# ResNet Fashion-MNIST 1 epoch (60000), 10000 test: f32 %.4f "
      .. "(%.0fs), bf16 %.4f (%.0fs)\n", f32, t1 - t0, bf, os.clock() - t1))
    assert.is_true(f32 > 0.85, "float32 accuracy " .. f32)
    assert.is_true(math.abs(bf - f32) <= 0.005, string.format("bf16 %.4f vs f32 %.4f", bf, f32))
  end)

  it("a transformer language model on fortunes ends within 2 % of float32's perplexity", function()
    if not exists(FORTUNES .. "/fortunes") then
      pending("no fortunes in " .. FORTUNES .. " (Debian fortunes)")
      return
    end
    local corpus = dofile("examples/_text.lua").load({ files = "fortunes,wisdom,literature",
      max_chars = 120000, seed = 42 })
    local t0 = os.clock()
    local f32 = lm_run(corpus, false)
    local t1 = os.clock()
    local bf = lm_run(corpus, true)
    io.stderr:write(string.format("# transformer LM on fortunes, %d steps: validation perplexity "
      .. "f32 %.4f (%.0fs), bf16 %.4f (%.0fs)\n", LM_STEPS, f32, t1 - t0, bf, os.clock() - t1))
    assert.is_true(f32 < 12, "float32 perplexity " .. f32)
    assert.is_true(math.abs(bf / f32 - 1) <= 0.02, string.format("bf16 %.4f vs f32 %.4f", bf, f32))
  end)
end)
