-- mx.session — this Lua state's session (mx.h "sessions"; docs/embedding.md) and the
-- hand-over of tensors between Lua states of one process without copying.
--   local h = mx.session.export(x)               -- a number (a token, not an address)
--   local y = mx.session.import(h)               -- in another state: the same memory
--   local h = mx.session.export(x, {imports = 3}) -- three states may import it
--   mx.session.revoke(h)                          -- the imports not made are dropped
-- The tokens live in the core's registry of exports: importing a token twice (beyond
-- its `imports`), one another state already imported, a revoked one or any other
-- number is a clear error, never a crash. The first import moves the tensor's byte charge
-- to the importing state's session, so its GC accounts for it from then on. A handed-over
-- tensor's ops are ordered by the engine whichever state issues them (in-place writes
-- from two states never lose an update).
local lib = require("mx.core.lib")
local H = require("mx.nd.handles")
local ffi, C = lib.ffi, lib.C

local is_tensor, wrap = H.is_tensor, H._wrap
local u64 = ffi.typeof("uint64_t[1]")
local tensor_out = ffi.typeof("mx_tensor *[1]")

local M = {}

local function raise(fn, level)
  local msg = ffi.string(C.mx_last_error()):gsub("^mx_tensor_[%w_]+: ", "")
  error("mx.session." .. fn .. ": " .. msg, level + 1)
end

local function check_token(fn, h, level)
  if type(h) ~= "number" or h <= 0 or h % 1 ~= 0 or h >= 2 ^ 53 then
    error("mx.session." .. fn .. ": expected a handle from mx.session.export, got "
      .. (type(h) == "number" and tostring(h) or type(h)), level + 1)
  end
end

-- A token for x that `imports` imports (default 1) may redeem. Ops queued on x keep
-- running; an importer's reads wait for them like any reader.
function M.export(x, opts)
  if not is_tensor(x) then
    error("mx.session.export: expected an NDArray, got " .. type(x), 2)
  end
  if x.h == nil then error("mx.session.export: the NDArray was released", 2) end
  local n = 1
  if opts ~= nil then
    if type(opts) ~= "table" then
      error("mx.session.export: expected an options table as argument 2, got " .. type(opts), 2)
    end
    for k in pairs(opts) do
      if k ~= "imports" then error("mx.session.export: unknown option '" .. tostring(k) .. "'", 2) end
    end
    n = opts.imports == nil and 1 or opts.imports
    if type(n) ~= "number" or n < 1 or n % 1 ~= 0 or n >= 2 ^ 53 then
      error("mx.session.export: imports must be a whole number >= 1, got " .. tostring(n), 2)
    end
  end
  local tok = u64()
  if C.mx_tensor_export(x.h, n, tok) ~= 0 then raise("export", 2) end
  return tonumber(tok[0])
end

-- The NDArray for a handle from export (each import redeems one of the export's).
function M.import(h)
  check_token("import", h, 2)
  local out = tensor_out()
  if C.mx_tensor_import(h, out) ~= 0 then raise("import", 2) end
  return wrap(out[0])
end

-- Drops the imports an export has left (its tensor is released once nothing holds it).
function M.revoke(h)
  check_token("revoke", h, 2)
  if C.mx_tensor_export_revoke(h) ~= 0 then raise("revoke", 2) end
end

-- The imports a handle has left (0 once used up or revoked, or for any other number).
function M.imports_left(h)
  if type(h) ~= "number" or h <= 0 or h % 1 ~= 0 or h >= 2 ^ 53 then return 0 end
  return tonumber(C.mx_tensor_export_left(h))
end

-- Bytes held by this state's tensors (the counter that steps its GC).
function M.bytes_in_use() return tonumber(C.mx_session_bytes(lib.session)) end

-- Rebinds this state's session to the calling thread: call it first thing after a host
-- moved the state to another OS thread.
function M.bind() C.mx_session_bind(lib.session) end

return M
