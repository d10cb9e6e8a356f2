-- mx.kvstore.ps_protocol — the dist_async wire format: our own framing over zmq
-- multipart messages. Every message (after the ROUTER's identity frame) is exactly four
-- frames:
--
--   1 header, 32 bytes (little-endian, as the C struct below):
--       magic u32 'MXPS' | version u8 | cmd u8 | dtype u8 | ndim u8 |
--       req u32 (request id, echoed in the reply) | arg i32 (rank, role, step...) |
--       arg2 i64 | nbytes u64 (the payload's size)
--   2 key: 0..MAX_KEY bytes (a kvstore key as text; shards are "key#part")
--   3 shape: ndim int64 dims (ndim <= 8, each 0 <= d)
--   4 payload: nbytes bytes (a tensor's row-major data, or text for dtype BYTES)
--
-- Row_sparse traffic (only the rows a worker touched or asks for travel):
--   PUSH_RSP key: shape (nnr, row dims...) of the rows, payload nnr int64 row ids
--     (0-based within the key's shard, ascending) then the rows;
--   PULL_RSP key: an int64 (n) tensor of row ids; the reply an (n, row dims...) tensor.
--
-- decode() checks, in this order and before anything is allocated: the frame count, the
-- header size, magic, version, the command, the key size, ndim and the shape frame's size,
-- each dim, the dtype, prod(shape) * itemsize == nbytes (with overflow checks) and
-- nbytes == the payload frame's size. A failing check returns nil + a message naming the
-- field; the server logs it and keeps serving. Huge claimed sizes never reach an
-- allocation: libzmq itself refuses frames over ZMQ_MAXMSGSIZE (ps_zmq.lua), and a claim
-- that disagrees with the frame actually received is rejected here.
local ffi = require("ffi")

ffi.cdef [[
typedef struct mx_ps_header {
  uint32_t magic; uint8_t version; uint8_t cmd; uint8_t dtype; uint8_t ndim;
  uint32_t req; int32_t arg; int64_t arg2; uint64_t nbytes;
} mx_ps_header;
]]

local M = {}
M.MAGIC = 0x5350584D -- "MXPS" read little-endian
M.VERSION = 1
M.HEADER_SIZE = 32
M.MAX_KEY = 256
M.MAX_NDIM = 8
assert(ffi.sizeof("mx_ps_header") == M.HEADER_SIZE)

-- commands (worker/server -> server/scheduler) and replies
M.CMD = {
  REGISTER = 1, INIT = 2, PUSH = 3, PULL = 4, SET_OPT = 5, BARRIER = 6,
  GET_STATES = 7, SET_STATES = 8, BYE = 9, SHUTDOWN = 10, PING = 11, PUSH_RSP = 12,
  PULL_RSP = 13,
  OK = 64, ERR = 65,
}
M.CMD_NAME = {}
for k, v in pairs(M.CMD) do M.CMD_NAME[v] = k end

-- MXNet's dtype codes and item sizes; BYTES marks a text/binary payload
M.BYTES = 255
M.ITEMSIZE = { [0] = 4, [1] = 8, [2] = 2, [3] = 1, [4] = 4, [5] = 1, [6] = 8, [7] = 1,
  [12] = 2, [255] = 1 }
M.DT_NAME = { [0] = "float32", [1] = "float64", [2] = "float16", [3] = "uint8", [4] = "int32",
  [5] = "int8", [6] = "int64", [7] = "bool", [12] = "bfloat16" }

local hdr_t = ffi.typeof("mx_ps_header")
local hdrp_t = ffi.typeof("const mx_ps_header*")
local i64p_t = ffi.typeof("const int64_t*")
local shapebuf = ffi.new("int64_t[8]")

-- header(cmd, opts) -> 32-byte Lua string
local hbuf = hdr_t()
function M.header(cmd, dtype, ndim, req, arg, arg2, nbytes)
  hbuf.magic, hbuf.version, hbuf.cmd = M.MAGIC, M.VERSION, cmd
  hbuf.dtype, hbuf.ndim, hbuf.req = dtype or M.BYTES, ndim or 0, req or 0
  hbuf.arg, hbuf.arg2, hbuf.nbytes = arg or 0, arg2 or 0, nbytes or 0
  return ffi.string(hbuf, M.HEADER_SIZE)
end

-- shape (Lua list) -> frame string
function M.shape_frame(shape)
  local n = #shape
  for i = 1, n do shapebuf[i - 1] = shape[i] end
  return ffi.string(shapebuf, 8 * n)
end

-- message(cmd, key, payload_string, fields): the four frames for a text/bytes payload
function M.text_message(cmd, key, text, req, arg, arg2)
  text = text or ""
  return { M.header(cmd, M.BYTES, 0, req, arg, arg2, #text), key or "", "", text }
end

-- decode(Z, parts, first): parts[first..] are the four frames. Returns a table
-- {cmd, dtype, ndim, shape, key, req, arg, arg2, nbytes, data (payload pointer, valid
-- while parts are), text (payload as a string when dtype is BYTES)} or nil, reason.
function M.decode(Z, parts, first)
  local nf = #parts - first + 1
  if nf ~= 4 then return nil, string.format("expected 4 frames, got %d", nf) end
  local hp = parts[first]
  if Z.part_size(hp) ~= M.HEADER_SIZE then
    return nil, string.format("header frame is %d bytes, expected %d", Z.part_size(hp),
      M.HEADER_SIZE)
  end
  local h = ffi.cast(hdrp_t, Z.part_data(hp))
  if h.magic ~= M.MAGIC then return nil, string.format("bad magic 0x%08x", h.magic) end
  if h.version ~= M.VERSION then
    return nil, string.format("protocol version %d, this server speaks %d", h.version, M.VERSION)
  end
  local cmd = h.cmd
  if not M.CMD_NAME[cmd] then return nil, string.format("unknown command %d", cmd) end
  local ksz = Z.part_size(parts[first + 1])
  if ksz > M.MAX_KEY then
    return nil, string.format("key frame is %d bytes (at most %d)", ksz, M.MAX_KEY)
  end
  local ndim = h.ndim
  if ndim > M.MAX_NDIM then return nil, string.format("ndim %d > %d", ndim, M.MAX_NDIM) end
  local ssz = Z.part_size(parts[first + 2])
  if ssz ~= 8 * ndim then
    return nil, string.format("shape frame is %d bytes, ndim %d needs %d", ssz, ndim, 8 * ndim)
  end
  local isz = M.ITEMSIZE[h.dtype]
  if not isz then return nil, string.format("unknown dtype code %d", h.dtype) end
  local nbytes = h.nbytes
  local psz = Z.part_size(parts[first + 3])
  if nbytes ~= psz then
    return nil, string.format("header claims %s payload bytes, the payload frame has %d",
      tostring(nbytes):gsub("ULL$", ""), psz)
  end
  local shape = {}
  if h.dtype ~= M.BYTES then
    local sp = ffi.cast(i64p_t, Z.part_data(parts[first + 2]))
    local count = 1
    for i = 0, ndim - 1 do
      local d = sp[i]
      if d < 0 or d > 2 ^ 40 then
        return nil, string.format("dim %d is %s", i + 1, tostring(d):gsub("LL$", ""))
      end
      d = tonumber(d)
      count = count * d
      if count > 2 ^ 50 then return nil, "shape's element count overflows" end
      shape[i + 1] = d
    end
    -- PUSH_RSP: the row ids precede the rows
    local ids = 0
    if cmd == M.CMD.PUSH_RSP then
      if ndim < 1 then return nil, "a row_sparse push needs a shape (rows, ...)" end
      ids = shape[1] * 8
    end
    if count * isz + ids ~= psz then
      return nil, string.format("shape %s of dtype %d needs %d bytes, payload has %d",
        table.concat(shape, "x"), h.dtype, count * isz + ids, psz)
    end
  elseif ndim ~= 0 then
    return nil, "a bytes payload carries no shape"
  end
  local m = {
    cmd = cmd, dtype = h.dtype, ndim = ndim, shape = shape,
    key = Z.part_string(parts[first + 1]), req = h.req, arg = h.arg,
    arg2 = tonumber(h.arg2), nbytes = psz, data = Z.part_data(parts[first + 3]),
  }
  if h.dtype == M.BYTES then m.text = Z.part_string(parts[first + 3]) end
  return m
end

---------------------------------------------------------------- optimizer options
-- The optimizer travels as its name plus plain options (numbers, strings, booleans),
-- one "name\ttype\tvalue" line each; never code. The server rebuilds it with
-- mx.optimizer.create(name, options).
function M.encode_options(opts, who, level)
  local names = {}
  for k in pairs(opts) do names[#names + 1] = k end
  table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
  local lines = {}
  for _, k in ipairs(names) do
    local v = opts[k]
    if type(k) ~= "string" or k:find("[\t\n]") then
      error(who .. ": optimizer option names must be plain strings, got " .. tostring(k), level + 1)
    end
    local t = type(v)
    if t == "number" then lines[#lines + 1] = k .. "\tn\t" .. string.format("%.17g", v)
    elseif t == "boolean" then lines[#lines + 1] = k .. "\tb\t" .. tostring(v)
    elseif t == "string" and not v:find("[\t\n]") then lines[#lines + 1] = k .. "\ts\t" .. v
    else
      error(string.format("%s: optimizer option %s is a %s; only numbers, strings and "
        .. "booleans travel to the server (the server rebuilds the optimizer by name)",
        who, k, t), level + 1)
    end
  end
  return table.concat(lines, "\n")
end

function M.decode_options(text)
  local opts = {}
  if text == "" then return opts end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local k, t, v = line:match("^([^\t]+)\t([nbs])\t(.*)$")
    if not k then return nil, "malformed optimizer option line " .. string.format("%q", line) end
    if t == "n" then
      v = tonumber(v)
      if not v then return nil, "optimizer option " .. k .. " is not a number" end
    elseif t == "b" then
      if v ~= "true" and v ~= "false" then return nil, "optimizer option " .. k .. " is not a boolean" end
      v = v == "true"
    end
    opts[k] = v
  end
  return opts
end

---------------------------------------------------------------- optimizer states
-- A server's optimizer states as one byte string: "MXPSST1\n", the optimizer's plain
-- state data as option lines, "\n\n", then per key: u32 keylen, key, u32 nstates, and per
-- state: u8 dtype, u8 ndim, ndim i64 dims, u64 nbytes, bytes. The parser checks every
-- length against what is left before reading it.
local u32b = ffi.new("uint32_t[1]")
local u64b = ffi.new("uint64_t[1]")
local function u32s(v) u32b[0] = v return ffi.string(u32b, 4) end
local function u64s(v) u64b[0] = v return ffi.string(u64b, 8) end

function M.encode_states(meta, entries)
  local out = { "MXPSST1\n", M.encode_options(meta, "save_optimizer_states", 2), "\n\n" }
  for _, e in ipairs(entries) do
    out[#out + 1] = u32s(#e.key) .. e.key .. u32s(#e.states)
    for _, s in ipairs(e.states) do
      out[#out + 1] = string.char(s.dtype, #s.shape) .. M.shape_frame(s.shape)
        .. u64s(#s.bytes) .. s.bytes
    end
  end
  return table.concat(out)
end

function M.decode_states(blob)
  if blob:sub(1, 8) ~= "MXPSST1\n" then return nil, "not an optimizer-states blob (bad magic)" end
  local e = blob:find("\n\n", 9, true)
  if not e then return nil, "truncated optimizer-states header" end
  local meta, err = M.decode_options(blob:sub(9, e - 1))
  if not meta then return nil, err end
  local pos, n = e + 2, #blob
  local p = ffi.cast("const uint8_t*", blob)
  local entries = {}
  local function need(k, what)
    if pos + k - 1 > n then error({ msg = "truncated optimizer states at " .. what }) end
  end
  local ok, perr = pcall(function()
    while pos <= n do
      need(4, "key length")
      local kl = ffi.cast("const uint32_t*", p + pos - 1)[0]
      pos = pos + 4
      if kl > M.MAX_KEY then error({ msg = "key length " .. kl .. " too large" }) end
      need(kl, "key")
      local key = blob:sub(pos, pos + kl - 1)
      pos = pos + kl
      need(4, "state count")
      local ns = ffi.cast("const uint32_t*", p + pos - 1)[0]
      pos = pos + 4
      if ns > 16 then error({ msg = "state count " .. ns .. " too large" }) end
      local states = {}
      for i = 1, ns do
        need(2, "state header")
        local dt, nd = p[pos - 1], p[pos]
        pos = pos + 2
        if nd > M.MAX_NDIM or not M.ITEMSIZE[dt] or dt == M.BYTES then
          error({ msg = "bad state dtype/ndim" })
        end
        need(8 * nd + 8, "state shape")
        local shape, count = {}, 1
        local sp = ffi.cast("const int64_t*", p + pos - 1)
        for d = 0, nd - 1 do
          local v = sp[d]
          if v < 0 or v > 2 ^ 40 then error({ msg = "bad state dim" }) end
          shape[d + 1] = tonumber(v)
          count = count * shape[d + 1]
        end
        pos = pos + 8 * nd
        local nb = tonumber(ffi.cast("const uint64_t*", p + pos - 1)[0])
        pos = pos + 8
        if nb ~= count * M.ITEMSIZE[dt] then error({ msg = "state size disagrees with shape" }) end
        need(nb, "state data")
        states[i] = { dtype = dt, shape = shape, bytes = blob:sub(pos, pos + nb - 1) }
        pos = pos + nb
      end
      entries[#entries + 1] = { key = key, states = states }
    end
  end)
  if not ok then return nil, type(perr) == "table" and perr.msg or tostring(perr) end
  return meta, entries
end

return M
