-- spec/kvstore_nccl_spec.lua — the 'nccl' kvstore and libmx_nccl (kernels/cuda/nccl/).
-- Without a GPU: the error paths of mx.kv.create('nccl') and of the collectives, and, when
-- a libmx_nccl.so was built (build-cuda/, build/, build-gpu*/ or MX_NCCL_LIB), that its C
-- API resolves and reports CUDA/NCCL failures as MX_EDEVICE messages. The #gpu block runs
-- allreduce/broadcast and the store over every GPU present against CPU sums
-- (tools/gpu_check.sh runs it on a lent GPU machine).
local ffi = require("ffi")
local mx = require("mx")
local lib = require("mx.core.lib")
local nccl = require("mx.kvstore.nccl")
local nd = mx.nd
local err_at = require("helpers.err_at")("kvstore_nccl_spec.lua")

local C = lib.C
local MX_EINVAL, MX_EDEVICE = -1, -5 -- mx.h's codes
local ngpu = mx.num_gpus()
local SYMS = { "mx_nccl_version", "mx_nccl_comm_new", "mx_nccl_comm_free", "mx_nccl_comm_ndev",
  "mx_nccl_comm_device", "mx_nccl_allreduce", "mx_nccl_broadcast" }

-- A built libmx_nccl.so: the one on package.cpath, else one in a build directory.
local function built_lib()
  local cands = { os.getenv("MX_NCCL_LIB"), nccl.lib_path(), "build-cuda/lib/mx/libmx_nccl.so",
    "build/lib/mx/libmx_nccl.so", "build-gpu/lib/mx/libmx_nccl.so",
    "build-gpu-obj/lib/mx/libmx_nccl.so" }
  for i = 1, #cands do
    local p = cands[i]
    if p and p ~= "" then
      local f = io.open(p, "rb")
      if f then f:close(); return p end
    end
  end
  return nil
end

describe("mx.kv 'nccl' without a GPU", function()
  it("create('nccl') says a GPU is needed, at the caller's line", function()
    if ngpu > 0 then return pending("this machine has a GPU") end
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local kv = mx.kv.create("nccl") return kv end, line)
    assert.truthy(msg:find("'nccl' needs a GPU and this machine has none", 1, true), msg)
  end)

  it("without libmx_nccl the error says how to build it", function()
    if nccl.lib_path() then return pending("libmx_nccl is on package.cpath") end
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local l = nccl.load("mx.kv.create('nccl')") return l end, line)
    assert.truthy(msg:find("this build has no NCCL", 1, true), msg)
    assert.truthy(msg:find("-DMX_USE_NCCL=ON", 1, true), msg)
    assert.is_nil(nccl.version())
  end)

  it("with libmx_nccl on package.cpath it loads and reports NCCL's version", function()
    if not nccl.lib_path() then return pending("libmx_nccl is not on package.cpath") end
    assert.is_not_nil(nccl.load())
    assert.is_true(nccl.version() >= 20000, tostring(nccl.version()))
  end)

  it("allreduce/broadcast reject CPU values, lists and roots by name", function()
    local a, b = nd.ones({ 2 }), nd.ones({ 2 }, { ctx = mx.cpu(1) })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nccl.allreduce({ a, b }) return r end, line)
    assert.truthy(msg:find("allreduce: value 1 is on cpu(0); NCCL works on GPU values only", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nccl.allreduce(a) return r end, line)
    assert.truthy(msg:find("expected a non-empty list of NDArrays", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nccl.broadcast({ a, 3 }, 0) return r end, line)
    assert.truthy(msg:find("value 1 is on cpu(0)", 1, true), msg)
  end)
end)

describe("NcclKVStore off the GPU", function()
  it("takes the 'device' path when the values are not all on distinct GPUs", function()
    -- made as M.new makes it, minus the GPU check (no GPU here)
    local kv = mx.kv.KVStore._make(nccl.NcclKVStore, "nccl")
    local a = nd.array({ 1, 2, 3 })
    local b = nd.array({ 10, 20, 30 }, { ctx = mx.cpu(1) })
    kv:init("w", nd.zeros({ 3 }))
    kv:push("w", { a, b })
    local o0, o1 = nd.zeros({ 3 }), nd.zeros({ 3 }, { ctx = mx.cpu(1) })
    kv:pull("w", { o0, o1 })
    assert.are.same({ 11, 22, 33 }, o0:tolist())
    assert.are.same({ 11, 22, 33 }, o1:tolist())
    assert.are.same({ 1, 2, 3 }, a:tolist())
  end)

  it("device_store is nil without a GPU (mx.kv 'device' keeps the base store)", function()
    if ngpu > 0 then return pending("this machine has a GPU") end
    assert.is_nil(nccl.device_store())
  end)
end)

describe("libmx_nccl C API (built library)", function()
  local path = built_lib()
  local L
  before_each(function()
    if path and not L then L = ffi.load(path) end
  end)

  it("exports every mx_nccl_* symbol and reports the NCCL version", function()
    if not path then return pending("libmx_nccl.so not built (configure with -DMX_USE_CUDA=ON)") end
    for _, s in ipairs(SYMS) do
      local ok, f = pcall(function() return L[s] end)
      assert.is_true(ok, path .. " lacks " .. s .. ": " .. tostring(f))
      assert.is_not_nil(f)
    end
    local v = L.mx_nccl_version()
    assert.is_true(v >= 20000, "NCCL version code " .. v)
    -- the header's version, when the toolkit's nccl.h is here to compare with
    local f = io.open("/usr/local/cuda/include/nccl.h", "rb")
    if f then
      local h = f:read("*a"); f:close()
      local maj, min = h:match("#define NCCL_MAJOR (%d+)"), h:match("#define NCCL_MINOR (%d+)")
      if maj and path:find("build%-cuda") then
        assert.are.equal(tonumber(maj), math.floor(v / 10000))
        assert.are.equal(tonumber(min), math.floor(v / 100) % 100)
      end
    end
  end)

  it("comm_new checks its arguments and reports a missing GPU as MX_EDEVICE", function()
    if not path then return pending("libmx_nccl.so not built") end
    local out = ffi.new("mx_nccl_comm*[1]")
    assert.are.equal(MX_EINVAL, L.mx_nccl_comm_new(0, nil, out))
    assert.truthy(ffi.string(C.mx_last_error()):find("nccl comm_new: 0 devices", 1, true))
    local devs = ffi.new("int[2]", { 0, 0 })
    local rc = L.mx_nccl_comm_new(2, devs, out)
    local msg = ffi.string(C.mx_last_error())
    if ngpu == 0 then
      assert.are.equal(MX_EDEVICE, rc)
      assert.truthy(msg:find("nccl comm_new on gpu(0), gpu(0): no CUDA device", 1, true), msg)
    else
      assert.are.equal(MX_EINVAL, rc)
      assert.truthy(msg:find("gpu(0) is listed twice", 1, true), msg)
    end
    assert.is_true(out[0] == nil)
    assert.are.equal(0, L.mx_nccl_comm_ndev(nil))
    assert.are.equal(-1, L.mx_nccl_comm_device(nil, 0))
  end)

  it("allreduce/broadcast name the bad tensor before touching NCCL", function()
    if not path then return pending("libmx_nccl.so not built") end
    local a, b = nd.ones({ 3 }), nd.ones({ 3 }, { ctx = mx.cpu(1) })
    local p = ffi.new("mx_tensor*[2]", { a.h, b.h })
    assert.are.equal(MX_EINVAL, L.mx_nccl_allreduce(nil, 2, p, nil))
    assert.truthy(ffi.string(C.mx_last_error()):find(
      "nccl allreduce: tensor 1 is on cpu(0); NCCL reduces GPU tensors only", 1, true))
    assert.are.equal(MX_EINVAL, L.mx_nccl_broadcast(nil, 0, p, 0))
    assert.truthy(ffi.string(C.mx_last_error()):find("nccl broadcast: 0 tensors", 1, true))
    assert.are.equal(MX_EINVAL, L.mx_nccl_allreduce(nil, 2, nil, nil))
    assert.truthy(ffi.string(C.mx_last_error()):find("the tensor list is NULL", 1, true))
    local q = ffi.new("mx_tensor*[2]") -- q[0] NULL
    q[1] = a.h
    assert.are.equal(MX_EINVAL, L.mx_nccl_allreduce(nil, 2, q, nil))
    assert.truthy(ffi.string(C.mx_last_error()):find("nccl allreduce: tensor 1 is NULL", 1, true))
  end)
end)

describe("nccl #gpu", function()
  local NOGPU = "no GPU: " .. ffi.string(C.mx_gpu_status())
  local function gpus()
    local l = {}
    for i = 0, ngpu - 1 do l[#l + 1] = mx.gpu(i) end
    return l
  end
  -- value i on gpu(i - 1): distinct per device, exact in float32 and int32 sums
  local function per_device(shape, dtype, seed)
    local vals, cpu = {}, {}
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    for i, ctx in ipairs(gpus()) do
      local flat = {}
      for j = 1, n do flat[j] = ((j * 7 + i * 13 + seed) % 29) - 14 end
      cpu[i] = nd.array(flat, { dtype = dtype }):reshape(shape)
      vals[i] = cpu[i]:to(ctx)
    end
    return vals, cpu
  end
  local function cpu_sum(cpu)
    local s = cpu[1]:copy()
    for i = 2, #cpu do s = nd.add(s, cpu[i]) end
    return s:tolist()
  end
  local function same(a, b, what)
    assert.are.equal(#b, #a, what)
    for i = 1, #b do
      if a[i] ~= b[i] then error(what .. ": element " .. i .. " is " .. a[i] .. ", expected " .. b[i]) end
    end
  end

  it("allreduce sums one tensor per GPU in place, float32 and int32", function()
    if ngpu == 0 then return pending(NOGPU) end
    for _, dt in ipairs({ "float32", "int32", "float64" }) do
      local vals, cpu = per_device({ 3, 1000 }, dt, 1)
      local want = cpu_sum(cpu)
      nccl.allreduce(vals)
      for i = 1, #vals do
        assert.are.equal(mx.gpu(i - 1), vals[i]:context())
        same(vals[i]:to(mx.cpu()):tolist(), want, dt .. " on gpu(" .. (i - 1) .. ")")
      end
    end
  end)

  it("allreduce into outs leaves the inputs as they were", function()
    if ngpu == 0 then return pending(NOGPU) end
    local vals, cpu = per_device({ 257 }, "float32", 2)
    local outs = {}
    for i, v in ipairs(vals) do outs[i] = nd.zeros({ 257 }, { ctx = v:context() }) end
    nccl.allreduce(vals, outs)
    local want = cpu_sum(cpu)
    for i = 1, #vals do
      same(outs[i]:to(mx.cpu()):tolist(), want, "out " .. i)
      same(vals[i]:to(mx.cpu()):tolist(), cpu[i]:tolist(), "input " .. i)
    end
  end)

  it("broadcast copies the root GPU's value to every GPU", function()
    if ngpu == 0 then return pending(NOGPU) end
    local root = ngpu - 1
    local vals, cpu = per_device({ 5, 7 }, "float32", 3)
    nccl.broadcast(vals, root)
    for i = 1, #vals do
      same(vals[i]:to(mx.cpu()):tolist(), cpu[root + 1]:tolist(), "gpu(" .. (i - 1) .. ")")
    end
  end)

  it("device_store gives a 'device' store on the NCCL path when libmx_nccl loads", function()
    if ngpu == 0 then return pending(NOGPU) end
    local kv = nccl.device_store()
    assert.is_not_nil(kv)
    assert.are.equal("device", kv.type)
    local vals, cpu = per_device({ 9 }, "float32", 5)
    kv:init(1, vals[1])
    kv:push(1, vals)
    local o = nd.zeros({ 9 }, { ctx = mx.gpu(0) })
    kv:pull(1, o)
    same(o:to(mx.cpu()):tolist(), cpu_sum(cpu), "device_store pull")
  end)

  it("the 'nccl' store sums pushed GPU values and pulls them into every GPU", function()
    if ngpu == 0 then return pending(NOGPU) end
    local kv = mx.kv.create("nccl")
    assert.are.equal("nccl", kv.type)
    local vals, cpu = per_device({ 4, 6 }, "float32", 4)
    kv:init(7, nd.zeros({ 4, 6 }, { ctx = mx.gpu(0) }))
    kv:push(7, vals)
    local outs = {}
    for i, ctx in ipairs(gpus()) do outs[i] = nd.zeros({ 4, 6 }, { ctx = ctx }) end
    kv:pull(7, outs)
    local want = cpu_sum(cpu)
    for i = 1, #outs do same(outs[i]:to(mx.cpu()):tolist(), want, "pull into gpu(" .. (i - 1) .. ")") end
    -- the pushed values are not changed; a second push reuses the buffers
    same(vals[1]:to(mx.cpu()):tolist(), cpu[1]:tolist(), "pushed value 1")
    kv:pushpull(7, vals, outs)
    for i = 1, #outs do same(outs[i]:to(mx.cpu()):tolist(), want, "pushpull gpu(" .. (i - 1) .. ")") end
  end)

  it("rejects two values on one GPU and bool sums by name", function()
    if ngpu == 0 then return pending(NOGPU) end
    local a, b = nd.ones({ 2 }, { ctx = mx.gpu(0) }), nd.ones({ 2 }, { ctx = mx.gpu(0) })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nccl.allreduce({ a, b }) return r end, line)
    assert.truthy(msg:find("values 1 and 2 are both on gpu(0)", 1, true), msg)
    local t = nd.ones({ 2 }, { ctx = mx.gpu(0), dtype = "bool" })
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nccl.allreduce({ t }) return r end, line)
    assert.truthy(msg:find("dtype bool is not supported", 1, true), msg)
  end)
end)
