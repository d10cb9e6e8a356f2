-- tools/hosts/mlp.lua — the training script tools/hosts/two_states runs in each Lua state
-- (spec/session_spec.lua). A 20-16-3 MLP on synthetic data drawn from mx.random with
-- seed 7, 40 SGD steps through mx.autograd. Prints one line:
--   result <tag> loss=<%a> checksum=<%a> gc=<full collections luamx triggered>
-- The host sets HOST_TAG (a string) and may set HOST_BEFORE / HOST_AFTER (functions it
-- registered, called before and after training: its rendezvous with a noisy state).
local mx = require("mx")
local nd, ag = mx.nd, mx.autograd
local handles = require("mx.nd.handles")

local tag = rawget(_G, "HOST_TAG") or "single"
local before, after = rawget(_G, "HOST_BEFORE"), rawget(_G, "HOST_AFTER")
if before then before() end
local gc0 = handles.gc_count

mx.random.seed(7)
local n, din, dh, dout = 64, 20, 16, 3
local X = mx.random.normal(0, 1, { n, din })
local labels = mx.random.randint(1, dout + 1, { n })
local Y = nd.one_hot(labels, { depth = dout })
local W1 = mx.random.normal(0, 0.3, { dh, din })
local b1 = nd.zeros({ dh })
local W2 = mx.random.normal(0, 0.3, { dout, dh })
local b2 = nd.zeros({ dout })
local params = { W1, b1, W2, b2 }
for _, p in ipairs(params) do p:attach_grad() end

local lr, loss = 0.1, nil
for _ = 1, 40 do
  loss = ag.record(function()
    local h = nd.relu(nd.fully_connected(X, W1, b1, { num_hidden = dh }))
    local z = nd.fully_connected(h, W2, b2, { num_hidden = dout })
    return -(nd.log_softmax(z) * Y):sum() / n
  end)
  loss:backward()
  for _, p in ipairs(params) do p[{}] = p - p:grad() * lr end
  -- temporaries: a few MB a step so luamx's memory pressure has something to do
  for _ = 1, 8 do local _ = nd.zeros({ 256, 1024 }) + 1 end
end

-- checksum: the f64 sum of every weight times its position (order-sensitive)
local sum = 0
for k, p in ipairs(params) do
  local t = p:totable()
  local flat = {}
  local function walk(v) if type(v) == "table" then for _, e in ipairs(v) do walk(e) end
    else flat[#flat + 1] = v end end
  walk(t)
  for i, v in ipairs(flat) do sum = sum + v * (i + 1000 * k) end
end
local lv = loss:item()
if after then after() end
io.write(string.format("result %s loss=%a checksum=%a gc=%d\n", tag, lv, sum,
  handles.gc_count - gc0))
io.flush()
