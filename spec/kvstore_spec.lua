-- mx.kv: local/device semantics against MXNet 1.9.1 (spec/fixtures/kvstore_mxnet.lua, made
-- by tools/fixtures/make_kvstore_mxnet.py): push lists, pull into lists, updaters, the
-- optimizer on the store, 2-bit compression with its residual; key kinds; errors.
local mx = require("mx")
local nd = mx.nd
local F = require("fixtures.kvstore_mxnet")
local close = require("helpers.close").within(1e-6)
local err_at = require("helpers.err_at")("kvstore_spec.lua")

local function flat(t)
  local r = {}
  for _, row in ipairs(t) do for _, v in ipairs(row) do r[#r + 1] = v end end
  return r
end
local ctxs = { mx.cpu(0), mx.cpu(1) }
local function arrs(step)
  return { nd.array(F.A[step], { ctx = ctxs[1] }), nd.array(F.B[step], { ctx = ctxs[2] }) }
end
local function outs()
  return { nd.zeros({ 2, 3 }, { ctx = ctxs[1] }), nd.zeros({ 2, 3 }, { ctx = ctxs[2] }) }
end
local function check_step(o, want)
  for d = 1, 2 do
    close(o[d], flat(want[d]))
    assert.are.equal(ctxs[d], o[d]:context())
  end
end

describe("mx.kv local/device vs MXNet 1.9.1", function()
  it("push of a list sums it; pull fills every out", function()
    local kv = mx.kv.create("local")
    assert.are.equal("local", kv.type)
    assert.are.equal(0, kv.rank)
    assert.are.equal(1, kv.num_workers)
    kv:init(3, nd.array(F.v0))
    kv:push(3, arrs(1))
    local o = outs()
    kv:pull(3, o)
    check_step(o, F.push_list[1])
  end)

  it("set_updater runs on the stored value at every push", function()
    local kv = mx.kv.create("local")
    kv:init(3, nd.array(F.v0))
    kv:set_updater(function(_, g, w) nd.add(w, nd.mul_scalar(g, { scalar = 0.1 }), { out = w }) end)
    for s = 1, 3 do
      kv:push(3, arrs(s))
      local o = outs()
      kv:pull(3, o)
      check_step(o, F.updater[s])
    end
  end)

  it("set_optimizer(sgd with momentum and wd) on a device store", function()
    local kv = mx.kv.create("device")
    kv:init(3, nd.array(F.v0))
    kv:set_optimizer(mx.optimizer.create("sgd",
      { learning_rate = 0.1, momentum = 0.9, wd = 0.01, rescale_grad = 0.5 }))
    for s = 1, 3 do
      kv:push(3, arrs(s))
      local o = outs()
      kv:pull(3, o)
      check_step(o, F.sgd[s])
    end
  end)

  it("2-bit compression quantises each device's value with its own residual", function()
    local kv = mx.kv.create("device")
    kv:set_gradient_compression { type = "2bit", threshold = 0.5 }
    kv:init(3, nd.array(F.v0))
    for s = 1, 4 do
      kv:push(3, arrs(s))
      local o = outs()
      kv:pull(3, o)
      check_step(o, F.twobit[s])
    end
  end)

  it("string keys, pushed and pulled as lists", function()
    local kv = mx.kv.create("local")
    kv:init({ "w1", "w2" }, { nd.array(F.v0), nd.array(F.A[4]) })
    kv:push({ "w1", "w2" }, { arrs(1), arrs(2) })
    local o1, o2 = outs(), outs()
    kv:pull({ "w1", "w2" }, { o1, o2 })
    check_step(o1, F.strkeys[1])
    check_step(o2, F.strkeys[2])
  end)
end)

describe("mx.kv API", function()
  it("pushpull sums into the outs (out = value when omitted); broadcast inits and pulls", function()
    local kv = mx.kv.create("device")
    kv:init(1, nd.zeros({ 2 }))
    local a, b = nd.array({ 1, 2 }), nd.array({ 10, 20 }, { ctx = mx.cpu(1) })
    kv:pushpull(1, { a, b })
    assert.are.same({ 11, 22 }, a:tolist())
    assert.are.same({ 11, 22 }, b:tolist())
    local o = { nd.zeros({ 2 }), nd.zeros({ 2 }, { ctx = mx.cpu(1) }) }
    kv:broadcast(2, nd.array({ 5, 6 }), o)
    assert.are.same({ 5, 6 }, o[2]:tolist())
    kv:barrier()
  end)

  it("save/load_optimizer_states restores the momentum", function()
    local tmp = os.tmpname()
    local function run(kv)
      kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 0.1, momentum = 0.9 }))
      return kv
    end
    local kv = run(mx.kv.create("local"))
    kv:init(1, nd.ones({ 3 }))
    kv:push(1, nd.array({ 1, 2, 3 }))
    kv:save_optimizer_states(tmp, true)
    kv:push(1, nd.array({ 1, 1, 1 }))
    local want = nd.zeros({ 3 })
    kv:pull(1, want)
    local kv2 = run(mx.kv.create("local"))
    kv2:init(1, nd.ones({ 3 }))
    kv2:push(1, nd.array({ 1, 2, 3 }))
    kv2:load_optimizer_states(tmp)
    kv2:push(1, nd.array({ 1, 1, 1 }))
    local got = nd.zeros({ 3 })
    kv2:pull(1, got)
    os.remove(tmp)
    close(got, want:tolist())
  end)

  it("errors name the key, the shapes and the bad argument", function()
    local kv = mx.kv.create("local")
    kv:init(7, nd.zeros({ 2, 3 }))
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() kv:pull(8, nd.zeros({ 2, 3 })) end, line)
    assert.matches("key 8 has not been initialized", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() kv:push(7, nd.zeros({ 3, 2 })) end, line)
    assert.matches("key 7 has shape (2, 3) but value 1 has shape (3, 2)", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() kv:pull(7, { nd.zeros({ 2, 3 }), nd.zeros({ 2 }) }) end, line)
    assert.matches("out 2 has shape (2,)", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() kv:init("w", nd.zeros({ 1 })) end, line)
    assert.matches("cannot be mixed", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() kv:init(7, nd.zeros({ 1 })) end, line)
    assert.matches("duplicate init of key 7", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() kv:push({ 7 }, nd.zeros({ 2, 3 })) end, line)
    assert.matches("1 keys need a list of 1 values", msg, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() kv:set_gradient_compression { type = "1bit" } end, line)
    assert.matches("unknown type 1bit", msg, 1, true)
  end)

  it("create: unknown names and nccl without a GPU are clear errors", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local k = mx.kv.create("bogus") return k end, line)
    assert.matches('unknown kvstore type "bogus"', msg, 1, true)
    if mx.num_gpus() == 0 then
      line = debug.getinfo(1, "l").currentline + 1
      msg = err_at(function() local k = mx.kv.create("nccl") return k end, line)
      assert.matches("'nccl' needs a GPU", msg, 1, true)
    end
  end)
end)

describe("mx.kv backends", function()
  it("dist types load their backend module lazily and pass name and options", function()
    local seen = {}
    package.preload["mx.kvstore.dist_sync"] = function()
      return { new = function(name, opts) seen[#seen + 1] = name; return { name = name, opts = opts } end }
    end
    package.preload["mx.kvstore.dist_async"] = function()
      return { new = function(name) seen[#seen + 1] = name; return { name = name } end }
    end
    local ok, err = pcall(function()
      local o = { timeout = 5 }
      assert.are.equal(o, mx.kv.create("dist_sync", o).opts)
      mx.kv.create("dist_device_sync")
      mx.kv.create("dist_async")
    end)
    for _, m in ipairs { "mx.kvstore.dist_sync", "mx.kvstore.dist_async" } do
      package.preload[m], package.loaded[m] = nil, nil
    end
    assert(ok, err)
    assert.are.same({ "dist_sync", "dist_device_sync", "dist_async" }, seen)
  end)

  it("a backend fills in transport only: _allreduce sees the compressed local sums", function()
    local KV = mx.kv.KVStore
    local Fake = require("mx.core.class").extend(KV, "FakeDist")
    local calls = 0
    function Fake._allreduce(_, keys, merged) -- two workers sending the same values
      calls = calls + 1
      local r = {}
      for i = 1, #keys do r[i] = nd.mul_scalar(merged[i], { scalar = 2 }) end
      return r
    end
    local kv = KV._make(Fake, "dist_sync")
    kv.num_workers = 2
    assert.is_true(kv._compress_merged)
    kv:set_gradient_compression { type = "2bit", threshold = 1 }
    kv:init({ 1, 2 }, { nd.zeros({ 3 }), nd.zeros({ 2 }) })
    -- the local sum {0.7, 1.2, -1.5} is compressed once (one residual per key): {0, 1, -1}
    kv:push({ 1, 2 }, { { nd.array({ 0.5, 0.2, -1 }), nd.array({ 0.2, 1, -0.5 }) },
      nd.array({ 3, 0 }) })
    assert.are.equal(1, calls) -- one call for all the keys of a push (buckets)
    local o = nd.zeros({ 3 })
    kv:pull(1, o)
    close(o, { 0, 2, -2 })
    kv:push(1, nd.array({ 0.3, 0, 0 })) -- residual 0.7 + 0.3 reaches the threshold
    kv:pull(1, o)
    close(o, { 2, 0, 0 })
  end)
end)

