-- tools/dist/worker.lua MODE ... — the rank programs spec/dist_sync_spec.lua runs under
-- mpirun (tools/dist/mxrun). Each prints "RESULT <rank> <text>" lines the spec parses.
--   basic          every kvstore call across the ranks, values checked against sums
--                  computed locally from each rank's known contribution
--   kill VICTIM    allreduces in a loop; rank VICTIM SIGKILLs itself at iteration 5; the
--                  survivors print the error they got (it must name VICTIM) and exit 3
--   stall          rank 1 sleeps 4 s before a barrier: the others' deadline
--                  (MX_KV_TIMEOUT) must fire first; every rank prints its error, exits 3
--   trainer UOK    gluon.Trainer(..., {kvstore='dist_sync', update_on_kvstore=UOK}): 3
--                  steps on per-rank data; prints the weights and the weights computed
--                  here by replaying every rank's gradients in one process
--   mismatch WHAT  the ranks disagree: WHAT = init (rank 1 inits key 'w' with another
--                  shape), push (rank 1 pushes a wrong-shaped value), pushpull (the
--                  same through pushpull); every rank prints the error it got, then
--                  an allreduce on a new store shows the communicator still works
--   sparse         row_sparse pushes of a few rows of a big key (the rows summed over the
--                  ranks, the bytes moved), row_sparse_pull after an update on the
--                  store, and a Trainer over an Embedding with sparse_grad against the
--                  same steps replayed densely in one process
-- Every rank first prints "RESULT <rank> pid <pid>". Extra trailing arguments (a tag the
-- spec greps for in the process list) are ignored.
local mx = require("mx")
local ffi = require("ffi")
local nd = mx.nd

local mode = arg[1] or "basic"
local kv = mx.kv.create("dist_sync", { timeout = tonumber(os.getenv("MX_TEST_TIMEOUT")) })
local r, n = kv.rank, kv.num_workers
local function out(...) io.stdout:write("RESULT ", r, " ", string.format(...), "\n"); io.stdout:flush() end
ffi.cdef("int kill(int pid, int sig); int getpid(void);")
out("pid %d", ffi.C.getpid())

if mode == "basic" then
  out("size %d", n)
  -- init: rank 0's value wins on every rank
  kv:init(1, nd.array({ r + 1, r + 2, r + 3 }))
  local w = nd.zeros({ 3 })
  kv:pull(1, w)
  out("init %s", table.concat(w:tolist(), ","))
  -- push/pull: the sum over ranks (no updater: the sum is stored)
  kv:push(1, nd.array({ r, 2 * r, 1 }))
  kv:pull(1, w)
  out("push %s", table.concat(w:tolist(), ","))
  -- pushpull with several keys and dtypes, several buckets (bucket_mb small)
  local kv2 = mx.kv.create("dist_sync", { bucket_mb = 0.001 })
  local keys, vals = {}, {}
  for k = 1, 5 do
    keys[k] = "k" .. k
    vals[k] = nd.full({ 300 }, (r + 1) * k, { dtype = k % 2 == 0 and "float64" or "float32" })
  end
  kv2:init(keys, vals)
  kv2:pushpull(keys, vals)
  local sums = {}
  for k = 1, 5 do sums[k] = vals[k]:tolist()[300] end
  out("pushpull %s", table.concat(sums, ","))
  -- float16 allreduce (own reduction op)
  local h = nd.full({ 1000 }, 0.5 * (r + 1), { dtype = "float16" })
  kv:allreduce(h)
  out("f16 %s", tostring(h:astype("float32"):tolist()[1000]))
  -- broadcast: rank 0's value into every out
  local o = nd.zeros({ 2 })
  kv:broadcast(7, nd.array({ 10 + r, 20 + r }), o)
  out("broadcast %s", table.concat(o:tolist(), ","))
  -- an updater on the store: same update everywhere (update_on_kvstore)
  local kv3 = mx.kv.create("dist_sync")
  kv3:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 0.1 }))
  kv3:init(0, nd.ones({ 4 }))
  kv3:push(0, nd.full({ 4 }, r + 1))
  local p = nd.zeros({ 4 })
  kv3:pull(0, p)
  out("sgd %.6f", p:tolist()[1])
  -- 2-bit compression: each worker's value quantised before the allreduce
  local kv4 = mx.kv.create("dist_sync")
  kv4:set_gradient_compression({ type = "2bit", threshold = 0.5 })
  kv4:init(0, nd.zeros({ 4 }))
  kv4:push(0, nd.array({ 0.7, -0.7, 0.2, 1.2 }))
  local c = nd.zeros({ 4 })
  kv4:pull(0, c)
  out("2bit %s", table.concat(c:tolist(), ","))
  -- dist_device_sync: a value per device, summed locally, then over the workers
  local kv5 = mx.kv.create("dist_device_sync")
  kv5:init(0, nd.zeros({ 3 }, { ctx = mx.cpu(0) }))
  kv5:push(0, { nd.ones({ 3 }, { ctx = mx.cpu(0) }), nd.full({ 3 }, 2, { ctx = mx.cpu(1) }) })
  local d = { nd.zeros({ 3 }, { ctx = mx.cpu(0) }), nd.zeros({ 3 }, { ctx = mx.cpu(1) }) }
  kv5:pull(0, d)
  out("device %s %s", table.concat(d[1]:tolist(), ","), table.concat(d[2]:tolist(), ","))
  kv:barrier()
  out("done")
elseif mode == "kill" then
  local victim = tonumber(arg[2] or "2")
  local g = nd.ones({ 1000 })
  local ok, err = pcall(function()
    for it = 1, 1000 do
      if it == 5 and r == victim then
        out("dying pid %d", ffi.C.getpid())
        ffi.C.kill(ffi.C.getpid(), 9)
      end
      kv:allreduce(g)
      nd.waitall()
      -- some compute between collectives
      local s = 0
      for _ = 1, 20000 do s = s + 1 end
    end
  end)
  if not ok then
    out("error %s", tostring(err):gsub("\n", " "))
    os.exit(3)
  end
  out("finished without noticing")
elseif mode == "stall" then
  local ok, err = pcall(function()
    if r == 1 then os.execute("sleep 4") end
    kv:barrier()
  end)
  if not ok then
    out("error %s", tostring(err):gsub("\n", " "))
    os.exit(3)
  end
  out("finished without noticing")
end
if mode == "mismatch" then
  local what = arg[2]
  local ok, err = pcall(function()
    if what == "init" then
      kv:init("w", nd.zeros({ r == 1 and 4 or 3 }))
    else
      kv:init("w", nd.zeros({ 3 }))
      local v = nd.ones({ r == 1 and 4 or 3 })
      if what == "push" then kv:push("w", v) else kv:pushpull("w", v) end
      local o = nd.zeros({ 3 })
      kv:pull("w", o)
      o:wait_to_read()
    end
  end)
  out("error %s", ok and "none" or tostring(err):gsub("\n", " "))
  local kv2 = mx.kv.create("dist_sync")
  local t = nd.full({ 2 }, r + 1)
  kv2:allreduce(t)
  out("after %s", table.concat(t:tolist(), ","))
  kv2:barrier()
  out("done")
end
if mode == "trainer" then
  local uok = arg[2] == "true"
  local nn = mx.gluon.nn
  local function make()
    mx.random.seed(5)
    local net = nn.Dense(3, { in_units = 4 })
    net:initialize(mx.init.Xavier())
    return net
  end
  local function data(rank, step)
    local t = {}
    for i = 1, 8 do t[i] = math.sin(rank * 10 + step * 3 + i) end
    return nd.array(t):reshape({ 2, 4 })
  end
  local function grads_of(net, x)
    local loss
    mx.autograd.record(function() loss = (net(x) * net(x)):sum() end)
    loss:backward()
  end
  local net = make()
  local tr = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1, momentum = 0.9 },
    { kvstore = "dist_sync", update_on_kvstore = uok })
  for step = 1, 3 do
    grads_of(net, data(r, step))
    tr:step(2 * n)
  end
  -- the same in one process: every rank's gradient summed by hand, one local update
  local ref = make()
  local plist = {}
  for _, p in ref:collect_params():items() do plist[#plist + 1] = p end
  local o = mx.optimizer.create("sgd", { learning_rate = 0.1, momentum = 0.9, rescale_grad = 1 / (2 * n) })
  local states = {}
  for step = 1, 3 do
    local sums = {}
    for rr = 0, n - 1 do
      grads_of(ref, data(rr, step))
      for i, p in ipairs(plist) do
        sums[i] = sums[i] and sums[i] + p:grad() or p:grad():copy()
      end
    end
    for i, p in ipairs(plist) do
      states[i] = states[i] or o:create_state(i, p:data())
      o:update(i, p:data(), sums[i], states[i])
    end
  end
  local function flat(m)
    local t = {}
    for _, p in m:collect_params():items() do
      for _, v in ipairs(p:data():reshape({ -1 }):tolist()) do t[#t + 1] = string.format("%.6f", v) end
    end
    return table.concat(t, ",")
  end
  out("weights %s", flat(net))
  out("expected %s", flat(ref))
end
if mode == "sparse" then
  local ds = require("mx.kvstore.dist_sync")
  local R, D = 1000, 4
  local function rows_of(rank) return { rank, 10 + rank, 500 } end
  local function rsp(rank)
    local ids = rows_of(rank)
    local data = {}
    for i = 1, #ids do data[i] = { rank + 1, rank + 1, rank + 1, rank + 1 } end
    return nd.sparse.row_sparse_array({ data, ids }, { shape = { R, D } })
  end
  -- the expected sum, densely
  local want = {}
  for i = 1, R * D do want[i] = 0 end
  for rr = 0, n - 1 do
    for _, id in ipairs(rows_of(rr)) do
      for d = 1, D do want[id * D + d] = want[id * D + d] + rr + 1 end
    end
  end
  kv:init("e", nd.zeros({ R, D }))
  kv:barrier()
  local b0 = ds.stats().bytes
  kv:push("e", rsp(r))
  local moved = ds.stats().bytes - b0
  local w = nd.zeros({ R, D })
  kv:pull("e", w)
  local got, bad = w:reshape({ -1 }):tolist(), 0
  for i = 1, R * D do if got[i] ~= want[i] then bad = bad + 1 end end
  out("rsp_sum_mismatches %d", bad)
  out("rsp_bytes %d dense_bytes %d", moved, R * D * 4)
  -- the same sum through a dense push
  kv:init("d", nd.zeros({ R, D }))
  kv:push("d", rsp(r):tostype("default"))
  local wd = nd.zeros({ R, D })
  kv:pull("d", wd)
  out("rsp_vs_dense %g", (wd - w):abs():max():item())
  -- an updater on the store: lazy SGD on the summed rows, then row_sparse_pull
  local kv3 = mx.kv.create("dist_sync")
  kv3:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 0.1 }))
  kv3:init(0, nd.ones({ R, D }))
  kv3:push(0, rsp(r))
  local o = nd.sparse.zeros("row_sparse", { R, D })
  kv3:row_sparse_pull(0, o, { row_ids = nd.array({ 500, 0, 999, 500 }) })
  out("rsp_pull %s | %s", table.concat(o:indices():tolist(), ","),
    table.concat(o:data():reshape({ -1 }):tolist(), ","))
  -- Trainer over an Embedding with sparse gradients (updates on the store)
  local function make()
    mx.random.seed(5)
    local net = mx.gluon.nn.Embedding(20, 3, { sparse_grad = true })
    net:initialize(mx.init.Normal(1))
    return net
  end
  local function ids(rank, step) return nd.array({ { rank, step }, { 2 * rank + step, 19 } }) end
  local net = make()
  local tr = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1 },
    { kvstore = "dist_sync" })
  for step = 1, 3 do
    local x = ids(r, step)
    local loss
    mx.autograd.record(function() loss = (net(x) * net(x)):sum() end)
    loss:backward()
    tr:step(2 * n)
  end
  out("trainer_uok %s", tostring(tr._uok))
  -- replayed in one process with dense gradients
  local ref = make()
  local rw = ref.weight:data()
  for step = 1, 3 do
    local sum = nd.zeros({ 20, 3 })
    for rr = 0, n - 1 do
      local x = ids(rr, step)
      local wv = rw:copy()
      wv:attach_grad()
      local loss
      mx.autograd.record(function()
        local e = nd.embedding(x, wv, { input_dim = 20, output_dim = 3 })
        loss = (e * e):sum()
      end)
      loss:backward()
      sum = sum + wv:grad()
    end
    (rw - sum * (0.1 / (2 * n))):copyto(rw)
  end
  local function flat(t)
    local f = {}
    for i, v in ipairs(t:reshape({ -1 }):tolist()) do f[i] = string.format("%.5f", v) end
    return table.concat(f, ",")
  end
  out("weights %s", flat(net.weight:data()))
  out("expected %s", flat(rw))
  kv:barrier()
  out("done")
end
