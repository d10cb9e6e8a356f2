-- mx.kvstore.nccl — the 'nccl' kvstore: per-device values on the local GPUs summed with
-- NCCL (libmx_nccl.so, kernels/cuda/nccl/; C API in mx_nccl.h), and the two collectives
-- themselves for direct use:
--
--   local nccl = require("mx.kvstore.nccl")
--   nccl.allreduce({a_gpu0, a_gpu1})        -- in place: every tensor becomes the sum
--   nccl.broadcast({a_gpu0, a_gpu1}, 1)     -- every tensor becomes the one on gpu(1)
--
-- The store (mx.kv.create('nccl')) is the base KVStore with _reduce overridden: when a
-- key's values are all on distinct GPUs in the stored dtype, one grouped ncclAllReduce
-- sums them into per-device buffers the store keeps (the pushed values are not changed)
-- and the one on the stored value's device is the merged value; anything else (one
-- value, CPU values, compression) takes the base path. One process is one worker, so
-- _allreduce stays the base's (as is). NCCL's sum order is its own (ring/tree), so a
-- float sum can differ from the CPU's list-order sum in the last bits.
-- The collectives go through libmx's engine on each device's default stream (mx_nccl.h).
local ffi = require("ffi")
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local class = require("mx.core.class")
local kvstore = require("mx.kvstore")
local context = require("mx.context")

local C = lib.C
local KVStore = kvstore.KVStore
local error, tostring, type, pcall = error, tostring, type, pcall
local is_tensor = nd.is_tensor

-- the C API of libmx_nccl: mx_nccl.h's FFI region (once per Lua state)
lib.cdef_header("mx_nccl.h", "mx_nccl_comm")

local M = {}
local MAX_DEV = 64

M.BUILD_HINT = "configure with CUDA and NCCL (cmake -S . -B build -DMX_USE_CUDA=ON "
  .. "-DMX_USE_NCCL=ON; nccl.h and libnccl from the CUDA toolkit or NVIDIA's libnccl-dev, "
  .. "NCCL_HOME for another place; docs/distributed.md)"

-- The path of libmx_nccl.so on package.cpath (beside libmx), or nil.
function M.lib_path() return package.searchpath("mx.libmx_nccl", package.cpath) end

local N -- libmx_nccl, loaded on first use
local function load(who, level)
  if N then return N end
  local path = M.lib_path()
  if path == nil then
    error(who .. ": this build has no NCCL (libmx_nccl.so is not built): " .. M.BUILD_HINT
      .. "; or use 'device'", level + 1)
  end
  local ok, l = pcall(ffi.load, path)
  if not ok then
    error(who .. ": cannot load " .. path .. ": " .. tostring(l)
      .. " (libnccl.so.2 must be where the loader finds it: LD_LIBRARY_PATH)", level + 1)
  end
  N = l
  return N
end
-- load([who]) -> the FFI namespace of libmx_nccl; raises the build hint when it is absent.
function M.load(who)
  local l = load(who or "mx.kvstore.nccl", 2) -- not a tail call: the error names the caller
  return l
end
-- The loaded NCCL's version code (2.28.9 -> 22809), or nil without libmx_nccl.
function M.version()
  if M.lib_path() == nil then return nil end
  local v = load("mx.kvstore.nccl.version", 2).mx_nccl_version()
  return v > 0 and v or nil
end

local function check(rc, who, level)
  if rc ~= 0 then error(who .. ": " .. ffi.string(C.mx_last_error()), level + 1) end
end

---------------------------------------------------------------- communicators
local comms = {} -- "0,1" -> {h = mx_nccl_comm* (gc-freed), devs = {...}}: one per device set

local function comm_for(devs, who, level)
  local key = table.concat(devs, ",")
  local c = comms[key]
  if c then return c end
  local lp = load(who, level + 1)
  local n = #devs
  local arr = ffi.new("int[?]", n)
  for i = 1, n do arr[i - 1] = devs[i] end
  local out = ffi.new("mx_nccl_comm*[1]")
  check(lp.mx_nccl_comm_new(n, arr, out), who, level + 1)
  c = { h = ffi.gc(out[0], lp.mx_nccl_comm_free), devs = devs }
  comms[key] = c
  return c
end

-- The GPU ids of a list of NDArrays (one per distinct GPU), or raises naming the value.
local function gpu_ids(list, who, level)
  if type(list) ~= "table" or is_tensor(list) or #list == 0 then
    error(who .. ": expected a non-empty list of NDArrays, one per GPU", level + 1)
  end
  if #list > MAX_DEV then error(who .. ": " .. #list .. " values (at most " .. MAX_DEV .. ")", level + 1) end
  local devs, seen = {}, {}
  for i = 1, #list do
    local a = list[i]
    if not is_tensor(a) then
      error(who .. ": value " .. i .. " is not an NDArray (got " .. type(a) .. ")", level + 1)
    end
    local ctx = a:context()
    if ctx.device_type ~= "gpu" then
      error(who .. ": value " .. i .. " is on " .. tostring(ctx) .. "; NCCL works on GPU values only",
        level + 1)
    end
    if seen[ctx.device_id] then
      error(who .. ": values " .. seen[ctx.device_id] .. " and " .. i .. " are both on "
        .. tostring(ctx) .. " (one value per GPU)", level + 1)
    end
    seen[ctx.device_id] = i
    devs[i] = ctx.device_id
  end
  return devs
end

local function handles(list, n)
  local p = ffi.new("mx_tensor*[?]", n)
  for i = 1, n do p[i - 1] = list[i].h end
  return p
end

-- allreduce(list[, outs]): outs[i] (default list[i], in place) = the sum of list over the
-- GPUs. One value per GPU, one dtype and shape; asynchronous like any op (engine-ordered).
function M.allreduce(list, outs)
  local who = "mx.kvstore.nccl.allreduce"
  local devs = gpu_ids(list, who, 2)
  if outs ~= nil then
    local od = gpu_ids(outs, who .. " (outs)", 2)
    if #od ~= #devs then error(who .. ": " .. #list .. " values but " .. #od .. " outs", 2) end
  end
  local c = comm_for(devs, who, 2)
  check(N.mx_nccl_allreduce(c.h, #list, handles(list, #list), outs and handles(outs, #outs) or nil),
    who, 2)
  return outs or list
end

-- broadcast(list, root): every value becomes the one on gpu(root) (in place).
function M.broadcast(list, root)
  local who = "mx.kvstore.nccl.broadcast"
  local devs = gpu_ids(list, who, 2)
  if type(root) ~= "number" or root % 1 ~= 0 then
    error(who .. ": root must be a GPU id (integer), got " .. tostring(root), 2)
  end
  local c = comm_for(devs, who, 2)
  check(N.mx_nccl_broadcast(c.h, #list, handles(list, #list), root), who, 2)
  return list
end

---------------------------------------------------------------- the store
local Nccl = class.extend(KVStore, "NcclKVStore")
M.NcclKVStore = Nccl

local function make(name, opts)
  local self = KVStore._make(Nccl, name, opts)
  self._nbufs = {} -- key -> {devs = "0,1", [i] = the buffer on value i's GPU}
  self._src = ffi.new("mx_tensor*[?]", MAX_DEV)
  self._dst = ffi.new("mx_tensor*[?]", MAX_DEV)
  return self
end

-- new(name, opts): called by mx.kv.create('nccl') (no options of its own).
function M.new(name, opts)
  local who = "mx.kv.create('" .. name .. "')"
  if opts ~= nil then class.check_opts(who, opts, {}, 3) end
  if context.num_gpus() == 0 then
    error(who .. ": 'nccl' needs a GPU and this machine has none (use 'device' or 'local' on "
      .. "CPUs)", 3)
  end
  load(who, 3)
  return make(name, opts)
end

-- device_store(opts) -> an NcclKVStore of type 'device' when a GPU and a loadable
-- libmx_nccl are present, else nil (never an error: 'device' then stays the base store).
-- For mx.kv.create('device') to sum GPU values with NCCL.
function M.device_store(opts)
  if context.num_gpus() == 0 or M.lib_path() == nil then return nil end
  if not N then
    local ok, l = pcall(ffi.load, M.lib_path())
    if not ok then return nil end
    N = l
  end
  return make("device", opts)
end

-- Every value on a distinct GPU in the stored dtype -> their GPU ids; else nil.
local function all_gpu(arrays, dt)
  local n = #arrays
  if n < 2 or n > MAX_DEV then return nil end
  local devs, seen = {}, {}
  for i = 1, n do
    local a = arrays[i]
    local ctx = a:context()
    if ctx.device_type ~= "gpu" or seen[ctx.device_id] or a:dtype() ~= dt then return nil end
    seen[ctx.device_id] = true
    devs[i] = ctx.device_id
  end
  return devs
end

-- The sum of one key's per-device values (see the header). Level 3: the user's push line.
function Nccl:_reduce(key, arrays)
  local s = self._store[key]
  local dt = s:dtype()
  local devs = self._gc == nil and all_gpu(arrays, dt)
  if not devs then return KVStore._reduce(self, key, arrays) end
  local c = comm_for(devs, "KVStore:push", 3)
  local dkey = table.concat(devs, ",")
  local bufs = self._nbufs[key]
  if bufs == nil or bufs.devs ~= dkey then
    bufs = { devs = dkey }
    for i = 1, #arrays do
      bufs[i] = nd.keep(nd.empty(s:shape(), { dtype = dt, ctx = arrays[i]:context() }))
    end
    self._nbufs[key] = bufs
  end
  local src, dst = self._src, self._dst
  local home = bufs[1]
  local sctx = s:context()
  for i = 1, #arrays do
    src[i - 1] = arrays[i].h
    dst[i - 1] = bufs[i].h
    if arrays[i]:context() == sctx then home = bufs[i] end
  end
  check(N.mx_nccl_allreduce(c.h, #arrays, src, dst), "KVStore:push", 3)
  return home
end

M._comms = comms
return M
