-- mx.session — this Lua state's session (mx.h "sessions"; docs/embedding.md) and the
-- hand-over of tensors between Lua states of one process without copying.
--   local h = mx.session.export(x)   -- a number; x's C tensor is retained for h
--   local y = mx.session.import(h)   -- in another state: an NDArray on the same memory
-- A handle is imported exactly once (import takes over the reference export made);
-- the host carries the number from one state to the other. import moves the tensor's
-- byte charge to the importing state's session, so its GC accounts for it from then on.
local lib = require("mx.core.lib")
local H = require("mx.nd.handles")
local ffi, C = lib.ffi, lib.C

local is_tensor, wrap = H.is_tensor, H._wrap
local tensor_ptr = ffi.typeof("mx_tensor *")
local uintptr = ffi.typeof("uintptr_t")

local M = {}

-- The handle of x for another state: the address of its C tensor as a number (exact:
-- addresses fit in a double's 53 bits). Ops queued on x keep running; the importer's
-- reads wait for them like any reader.
function M.export(x)
  if not is_tensor(x) then
    error("mx.session.export: expected an NDArray, got " .. type(x), 2)
  end
  if x.h == nil then error("mx.session.export: the NDArray was released", 2) end
  C.mx_tensor_retain(x.h)
  return tonumber(ffi.cast(uintptr, x.h))
end

-- The NDArray for a handle from export (called once per handle, in the receiving state).
function M.import(h)
  if type(h) ~= "number" or h <= 0 or h % 1 ~= 0 then
    error("mx.session.import: expected a handle from mx.session.export, got " .. tostring(h), 2)
  end
  local t = ffi.cast(tensor_ptr, ffi.cast(uintptr, h))
  C.mx_tensor_adopt(t, lib.session)
  return wrap(t)
end

-- Bytes held by this state's tensors (the counter that steps its GC).
function M.bytes_in_use() return tonumber(C.mx_session_bytes(lib.session)) end

-- Rebinds this state's session to the calling thread: call it first thing after a host
-- moved the state to another OS thread.
function M.bind() C.mx_session_bind(lib.session) end

return M
