-- mx.core.file — files from Lua: the core's atomic write (temp file beside the target +
-- fsync + rename + directory fsync, core/src/atomic_file.c), for every text or byte
-- string luamx writes (plots, symbol JSON, exports), and a file's CRC-32.
local ffi = require("ffi")
local C = require("mx.core.lib").C

local M = {}

-- write_atomic(who, path, data, level): data (a string) into path; on failure the old
-- file stays and the error (naming `who` and the path) blames the caller `level` up.
function M.write_atomic(who, path, data, level)
  if type(path) ~= "string" or path == "" then
    error(who .. ": path must be a non-empty string, got " .. tostring(path), level + 1)
  end
  if C.mx_file_write_atomic(path, data, #data) ~= 0 then
    local msg = ffi.string(C.mx_last_error()):gsub("^write: ", "")
    error(who .. ": " .. msg, level + 1)
  end
end

-- crc32(path) -> crc (a number), size in bytes; nil and the message when it cannot be read.
local crcbuf, sizebuf = ffi.new("uint32_t[1]"), ffi.new("int64_t[1]")
function M.crc32(path)
  if C.mx_file_crc32(path, crcbuf, sizebuf) ~= 0 then return nil, ffi.string(C.mx_last_error()) end
  return tonumber(crcbuf[0]), tonumber(sizebuf[0])
end

return M
