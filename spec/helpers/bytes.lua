-- spec/helpers/bytes.lua — little-endian byte strings for specs that build or damage
-- binary files: pack/unpack integers, patch a string at a 0-based offset, read files.
local ffi = require("ffi")

local M = {}

local i32 = ffi.new("int32_t[1]")
local u32 = ffi.new("uint32_t[1]")
local i64 = ffi.new("int64_t[1]")
local u16 = ffi.new("uint16_t[1]")

-- Pack a number (or an int64/uint64 cdata) as little-endian bytes.
function M.i32(v) i32[0] = v return ffi.string(i32, 4) end
function M.u32(v) u32[0] = v return ffi.string(u32, 4) end
function M.u16(v) u16[0] = v return ffi.string(u16, 2) end
function M.i64(v) i64[0] = v return ffi.string(i64, 8) end
M.u64 = M.i64

-- Read a little-endian integer at a 0-based offset.
function M.get_i32(s, off) ffi.copy(i32, s:sub(off + 1, off + 4), 4) return i32[0] end
function M.get_u32(s, off) ffi.copy(u32, s:sub(off + 1, off + 4), 4) return tonumber(u32[0]) end
function M.get_u16(s, off) ffi.copy(u16, s:sub(off + 1, off + 2), 2) return u16[0] end
function M.get_i64(s, off) ffi.copy(i64, s:sub(off + 1, off + 8), 8) return tonumber(i64[0]) end

-- s with the bytes at 0-based offset `off` replaced by `rep`.
function M.patch(s, off, rep)
  assert(off >= 0 and off + #rep <= #s, "patch outside the string")
  return s:sub(1, off) .. rep .. s:sub(off + 1 + #rep)
end

-- s with `ins` inserted at 0-based offset `off`, or `n` bytes removed there.
function M.insert(s, off, ins) return s:sub(1, off) .. ins .. s:sub(off + 1) end
function M.remove(s, off, n) return s:sub(1, off) .. s:sub(off + 1 + n) end

function M.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function M.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- CRC-32 (zip's) of a string, through zlib.
local zlib
function M.crc32(s)
  if not zlib then
    pcall(ffi.cdef, "unsigned long crc32(unsigned long crc, const uint8_t *buf, unsigned len);")
    local ok, lib = pcall(ffi.load, "z")
    zlib = ok and lib or ffi.load("libz.so.1")
  end
  return tonumber(zlib.crc32(0, s, #s))
end

-- Bytes of a tensor's data (CPU).
local ESIZE = { float32 = 4, float64 = 8, float16 = 2, bfloat16 = 2, uint8 = 1, int8 = 1,
  int32 = 4, int64 = 8, bool = 1, int16 = 2 }
function M.of_tensor(t)
  return ffi.string(t:data_ptr(), t:size() * ESIZE[t:dtype()])
end

return M
