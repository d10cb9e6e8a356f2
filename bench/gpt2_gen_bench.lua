-- bench/gpt2_gen_bench.lua — GPT-2 124M config (random weights, seed 0), batch 1:
-- a 16-token prompt, then --tokens (64) greedy tokens one at a time with the key/value
-- cache; generated tokens per second (the prompt excluded); --threads=N.
-- Peer: bench/gpt2_gen_bench.py (transformers GPT2LMHeadModel, past_key_values).
--   luajit bench/gpt2_gen_bench.lua --threads=1
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local nlp = require("mx.gluonnlp")
H.env_note()
mx.random.seed(0)
local model = nlp.model.get_model("gpt2_117m")
model:initialize(mx.init.Normal(0.02))
mx.autograd.set_training(false)
local N = A.tokens or 64
local prompt = {}
for i = 1, 16 do prompt[i] = (i * 1237) % 50257 end
local function generate()
  local logits, states = model(nd.array({ prompt }, { dtype = "int32" }))
  local V = 50257
  local last = nd.argmax(nd.reshape(nd.slice_axis(logits, { axis = 2, begin = 16, ["end"] = 16 }), { 1, V }),
    { axis = 2 })
  for _ = 1, N do
    logits, states = model(nd.reshape(last:astype("int32"), { 1, 1 }), states)
    last = nd.argmax(nd.reshape(logits, { 1, V }), { axis = 2 }) - 1 -- argmax is 1-based
  end
  last:wait_to_read()
end
local cpu = {} -- process CPU time per generation, each timed call's (os.clock)
local t = H.time(function(n)
  local c0 = os.clock()
  for _ = 1, n do generate() end
  cpu[#cpu + 1] = (os.clock() - c0) / n
end, { n = 1, reps = A.reps or 5, warmup = 1 })
H.report("gpt2_124m_generate_b1", N / (t.median * 1e-9), "tokens/s", { impl = "luamx",
  note = threads .. "T, 16-token prompt, " .. N .. " new tokens" })
-- on a shared machine the CPU time a 1-thread run got is the steadier number
H.report("gpt2_124m_generate_b1_cpu", N / H.median({ unpack(cpu, #cpu - (A.reps or 5) + 1) }),
  "tokens/s", { impl = "luamx", note = threads .. "T, per process CPU second" })
