-- bench/amp_train_bench.lua — one training step (forward, backward, trainer step) in
-- float32 against the same step under mx.amp bfloat16 (amp.init{target_dtype="bfloat16"}),
-- ms per step, medians; the f32 and bf16 steps alternate one by one (each model warmed up
-- first), so that both see the same load on a shared machine.
--   resnet18     gluon.model_zoo.vision.resnet18_v1, batch 32, 3x224x224, SGD momentum
--   transformer  embedding (vocab 96) -> nn.TransformerEncoder (2 layers, units 256, 4
--                heads, FFN 1024, dropout 0, causal mask) -> Dense(96) at every position,
--                batch 16, 128 positions, softmax cross-entropy, Adam
-- Both hybridized, random inputs and labels (timing only).
--   MX_BUILD=build luajit bench/amp_train_bench.lua --threads=1 [--models=resnet18,transformer]
--       [--reps=5] [--warmup=2] [--passes=2] [--eager] [--only=f32|bf16] [--profile]
--   reps * passes timed steps of each dtype; --profile: the per-op table of one more step
-- Prints RESULT lines (bench/harness.lua) and a table: wall-clock medians and the process's
-- CPU time per step (os.clock: all threads; on a shared machine the CPU time is the steadier
-- number at 1 thread, wall time is what counts at 2).
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local gluon, nn, nd, amp = mx.gluon, mx.gluon.nn, mx.nd, mx.amp
H.env_note()

local reps, warmup, passes = A.reps or 5, A.warmup or 2, A.passes or 2
local models = {}
for m in (A.models or "resnet18,transformer"):gmatch("[^,]+") do models[#models + 1] = m end

local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

local Builders = {}

function Builders.resnet18()
  mx.random.seed(1)
  local net = gluon.model_zoo.vision.resnet18_v1()
  net:initialize(mx.init.Xavier())
  local x = nd.random.uniform(0, 1, { 32, 3, 224, 224 })
  local y = nd.random.randint(0, 1000, { 32 }):astype("float32")
  local trainer = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.01,
    momentum = 0.9 })
  return net, function()
    local loss = mx.autograd.record(function() return loss_fn(net(x), y) end)
    loss:backward()
    trainer:step(32)
  end, "b32 224x224 sgd-mom", x
end

local V, T, B = 96, 128, 16
local LM = nn.HybridBlock:extend("AmpBenchLM")
function LM:__init()
  nn.HybridBlock.__init(self)
  self.embedding = nn.Embedding(V, 256)
  self.encoder = nn.TransformerEncoder({ num_layers = 2, units = 256, hidden_size = 1024,
    num_heads = 4, max_length = T, dropout = 0 })
  self.decoder = nn.Dense(V, { flatten = false, in_units = 256 })
end
function LM:forward(x)
  return self.decoder(self.encoder(self.embedding(x), nn.causal_mask(x:shape()[2])))
end

function Builders.transformer()
  mx.random.seed(1)
  local net = LM()
  net:initialize(mx.init.Xavier())
  local x = nd.random.randint(0, V, { B, T }):astype("float32")
  local y = nd.random.randint(0, V, { B * T }):astype("float32")
  local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = 1e-3 })
  return net, function()
    local loss = mx.autograd.record(function()
      return loss_fn(nd.reshape(net(x), { -1, V }), y)
    end)
    loss:backward()
    trainer:step(B * T)
  end, "2L d256 h4 ffn1024 b16 t128 adam", x
end

local AMP = { target_dtype = "bfloat16" }
local function with_amp(bf16, fn)
  if bf16 then amp.init(AMP) end
  local ok, err = pcall(fn)
  if bf16 then amp.shutdown() end
  if not ok then error(err, 0) end
end

-- one timed step (ms wall, ms CPU)
local function timed(step, bf16)
  collectgarbage("collect")
  local t0, c0
  with_amp(bf16, function()
    t0, c0 = H.now(), os.clock()
    step()
    nd.waitall()
  end)
  return (H.now() - t0) * 1e3, (os.clock() - c0) * 1e3
end

-- one model (deferred shapes from a float32 call, hybridized) whose steps alternate
-- between float32 and bf16, one each per round, so that both see the same machine load;
-- each setting replays its own traced graph (amp.init with the same setting finds it), the
-- parameters are shared (timing only: the updates of both modes go to the same weights)
local function measure(name, f32, bf)
  local net, step, setting, x = Builders[name]()
  net(x)
  if not A.eager then net:hybridize() end
  for _, bf16 in ipairs({ false, true }) do
    with_amp(bf16, function()
      for _ = 1, warmup do step() end
      nd.waitall()
    end)
  end
  local runs = { step, step }
  for _ = 1, reps * passes do
    if A.only ~= "bf16" then
      local w, c = timed(runs[1], false)
      f32[#f32 + 1], f32.cpu[#f32.cpu + 1] = w, c
    end
    if A.only ~= "f32" then
      local w, c = timed(runs[2], true)
      bf[#bf + 1], bf.cpu[#bf.cpu + 1] = w, c
    end
  end
  if A.profile then
    for i, bf16 in ipairs({ false, true }) do
      with_amp(bf16, function()
        mx.profiler.reset()
        mx.profiler.set_state("run")
        runs[i]()
        nd.waitall()
        mx.profiler.set_state("stop")
      end)
      print(string.format("# profile of one %s step, %s:", name, bf16 and "bf16" or "f32"))
      print(mx.profiler.dumps(true))
    end
  end
  return setting
end

local rows = {}
for _, name in ipairs(models) do
  if not Builders[name] then error("unknown model " .. name, 0) end
  local f32, bf = { cpu = {} }, { cpu = {} }
  local setting = measure(name, f32, bf)
  local tf, tb = H.median(f32), H.median(bf)
  local cf, cb = H.median(f32.cpu), H.median(bf.cpu)
  local note = threads .. "T " .. setting .. (A.eager and " eager" or "")
  H.report("amp_train_" .. name .. "_f32", tf, "ms", { note = note })
  H.report("amp_train_" .. name .. "_bf16", tb, "ms", { note = note })
  H.report("amp_train_" .. name .. "_f32_cpu", cf, "ms", { note = note })
  H.report("amp_train_" .. name .. "_bf16_cpu", cb, "ms", { note = note })
  rows[#rows + 1] = { name, note, tf, tb, cf, cb }
end
local f = io.open("/proc/loadavg")
local load = f and f:read("*l") or "?"
if f then f:close() end
print("| model | setting | f32 ms/step | bf16 ms/step | bf16 speed-up | f32 CPU ms | bf16 CPU ms "
  .. "| speed-up by CPU time |")
print("|---|---|---|---|---|---|---|---|")
for _, r in ipairs(rows) do
  print(string.format("| %s | %s | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx |", r[1], r[2], r[3],
    r[4], r[3] / r[4], r[5], r[6], r[5] / r[6]))
end
print("# loadavg at the end: " .. load)
