-- mx.core.lib — loads libmx, declares its C API to the FFI and checks the ABI.
-- Everything else reaches C through the table this returns.
local ffi = require("ffi")
local gen = require("mx.core.opgen")
local optable = require("mx.core.ops.optable")

local M = { ffi = ffi }

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- The FFI sees the C headers themselves, never a copy: the region between their
-- /* MX_FFI_BEGIN */ and /* MX_FFI_END */ markers (no macros there). The headers lie
-- beside this file: symlinks into core/include, core/dist and kernels/cuda/nccl in the
-- checkout, copies in the installed rock.
local function header_region(name)
  local path = here .. "/" .. name
  local text = read(path)
  if not text then error("mx: cannot read " .. path, 2) end
  local decls = text:match("/%* MX_FFI_BEGIN %*/(.-)/%* MX_FFI_END %*/")
  if not decls then error("mx: " .. path .. " lacks the FFI markers", 2) end
  return decls
end
M.header_region = header_region

-- cdef_header(name, probe): ffi.cdef of header `name`'s region, once per Lua state
-- (probe: a type the region declares; a module required again after package.loaded
-- was cleared finds it declared and skips the cdef).
function M.cdef_header(name, probe)
  if pcall(ffi.typeof, probe) then return end
  ffi.cdef(header_region(name))
end

ffi.cdef(header_region("mx.h"))

local libpath = package.searchpath("mx.libmx", package.cpath)
if not libpath then
  error("mx: libmx not found on package.cpath (" .. package.cpath .. "); build it with "
    .. "`cmake -S . -B build && cmake --build build` and add build/lib/?.so to LUA_CPATH, "
    .. "or install the rock", 2)
end
-- libgomp reads its environment when it loads (with libmx, just below). Once it
-- manages more threads than there are cores (the Lua thread's team plus the engine
-- worker's) it cuts its spin-wait to ~1000 spins, and every parallel region then waits
-- on futex wake-ups: 2-thread training ran at 40k samples/s in about half the runs
-- instead of 85k. GOMP_SPINCOUNT keeps libgomp's default spin for all its threads;
-- an explicit GOMP_SPINCOUNT or OMP_WAIT_POLICY wins.
pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
if os.getenv("GOMP_SPINCOUNT") == nil and os.getenv("OMP_WAIT_POLICY") == nil then
  ffi.C.setenv("GOMP_SPINCOUNT", "300000", 0)
end
-- OpenBLAS starts its own thread pool when it loads (before libmx can call
-- openblas_set_num_threads(1)): threads we never use (OpenBLAS runs single-threaded,
-- docs/engine.md), and under a tight `ulimit -v` one of them loops on a failing mmap
-- and the process hangs at exit joining it. An explicit OPENBLAS_NUM_THREADS wins.
if os.getenv("OPENBLAS_NUM_THREADS") == nil then
  ffi.C.setenv("OPENBLAS_NUM_THREADS", "1", 0)
end
-- LuaJIT's machine-code area (512 KB) and trace count (1000) by default fit a script;
-- luamx's own Lua (dispatch, autograd, Gluon) fills them in a training loop, and a full
-- area flushes every trace ("failed to allocate mcode memory": 6 flushes an epoch of the
-- GluonTS DeepAR bench), recompiled at once, each compile an mprotect that with a second
-- thread running is a TLB shootdown too. 16 MB and 10000 traces hold it: that epoch 0.360
-- -> 0.241 s at 1 thread, 0.450 -> 0.213 s at 2. MX_JIT_DEFAULTS=1 leaves LuaJIT's limits.
if jit and jit.opt and os.getenv("MX_JIT_DEFAULTS") ~= "1" then
  pcall(jit.opt.start, "maxmcode=16384", "maxtrace=10000")
end
local C = ffi.load(libpath)
M.C = C
M.libpath = libpath

local ABI = 2
if C.mx_abi_version() ~= ABI then
  error(string.format("mx: libmx at %s has ABI %d, this Lua code expects %d", libpath,
    C.mx_abi_version(), ABI), 2)
end

-- The op table and its param structs: the same text the C side was built from.
local ops = gen.normalize(optable)
ffi.cdef(gen.cdef_text(ops))
if C.mx_op_count() ~= #ops then
  error(string.format("mx: libmx has %d ops but the op table has %d: rebuild libmx",
    C.mx_op_count(), #ops), 2)
end
-- the generated layouts (op order, param structs) must be the very ones libmx was built
-- from: a table edited after the build changes the hash even when sizes still agree
do
  local _, hi, lo = gen.table_hash(ops)
  local h = C.mx_op_table_hash()
  if tonumber(h / 4294967296ULL) ~= hi or tonumber(h % 4294967296ULL) ~= lo then
    error("mx: libmx was built from another op table (hash mismatch): rebuild libmx", 2)
  end
end
M.ops, M.ops_by_name = ops, {}
for _, op in ipairs(ops) do
  M.ops_by_name[op.name] = op
  assert(ffi.string(C.mx_op_name(op.id)) == op.name, "mx: op table order differs from libmx")
  local st = gen.struct_text(op)
  op.ctype = st and ffi.typeof("struct mx_params_" .. op.name) or nil
  local size = st and ffi.sizeof(op.ctype) or 0
  if tonumber(C.mx_op_params_size(op.id)) ~= size then
    error("mx: params layout of op " .. op.name .. " differs between Lua and libmx", 2)
  end
end

-- A session per Lua state (mx.h "sessions"): its own byte counter (which steps this
-- state's GC), random stream and wait scope, bound to the thread that loads mx. Freed
-- when the state closes (its tensors keep it alive as long as they live).
local session = C.mx_session_new()
if session == nil then error("mx: out of memory creating a session", 2) end
C.mx_session_bind(session)
M.session = session
M._session_closer = newproxy(true) -- anchored here: finalized only when the state closes
getmetatable(M._session_closer).__gc = function()
  C.mx_session_bind(nil)
  C.mx_session_free(session)
end

-- Raise the thread's C error message at `level` (2 = the caller of the function
-- that calls raise's caller ... callers pass the level of the user's frame).
function M.raise(level)
  error(ffi.string(C.mx_last_error()), level + 1)
end

return M
