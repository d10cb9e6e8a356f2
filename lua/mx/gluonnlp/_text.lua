-- mx.gluonnlp._text — loads libmx_text (core/text: the tokenizers' C side) and declares
-- its API to the FFI from the header itself (the MX_FFI_BEGIN/END region of mx_text.h,
-- mx/core/mx_text.h, through mx.core.lib's cdef_header). Errors from C become
-- error(msg, level) here.
local ffi = require("ffi")

local M = { ffi = ffi }

require("mx.core.lib").cdef_header("mx_text.h", "mx_text_wordpiece_opts")

local libpath = package.searchpath("mx.libmx_text", package.cpath)
if not libpath then
  error("mx.gluonnlp: libmx_text not found on package.cpath; it is built when Debian's "
    .. "libutf8proc-dev and libpcre2-dev are installed (tools/setup.sh --deps), then "
    .. "rebuild", 2)
end
local C = ffi.load(libpath)
M.C = C

-- check(rc, level): raise the library's message blaming `level` frames up
function M.check(rc, level)
  if rc ~= 0 then error(ffi.string(C.mx_text_last_error()), level + 1) end
end

-- Buffers reused by the encoders (grown, never shrunk): ids and offset pairs.
local cap = 0
local ids_buf, off_buf
local nbuf = ffi.new("int64_t[1]")

function M.buffers(need)
  if need > cap then
    cap = math.max(need, 2 * cap, 1024)
    ids_buf = ffi.new("int32_t[?]", cap)
    off_buf = ffi.new("int64_t[?]", 2 * cap)
  end
  return ids_buf, off_buf, cap, nbuf
end

-- run(fn, obj, text, want_offsets, level) -> ids_ptr, offs_ptr, n: call an encoder,
-- growing the buffers when the text yields more tokens than they hold.
function M.run(fn, obj, text, want_offsets, level)
  local need = #text + 16
  while true do
    local ids, offs, c, n = M.buffers(need)
    M.check(fn(obj, text, #text, ids, want_offsets and offs or nil, c, n), level + 1)
    local got = tonumber(n[0])
    if got <= c then return ids, offs, got end
    need = got
  end
end

return M
