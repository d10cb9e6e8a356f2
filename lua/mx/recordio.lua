-- mx.recordio — MXNet's RecordIO files (.rec, with .idx indexes), as mx.recordio in
-- MXNet 1.9: the records are byte strings; pack/unpack add MXNet's image-record header.
--
--   local rio = mx.recordio
--   local w = rio.MXRecordIO("data.rec", "w")
--   w:write(rio.pack({ flag = 0, label = 3, id = 1, id2 = 0 }, payload)) ; w:close()
--   local r = rio.MXRecordIO("data.rec", "r")
--   local s = r:read()                           -- a Lua string; nil at the end
--   local header, payload = rio.unpack(s)
--
--   local idx = rio.MXIndexedRecordIO("data.idx", "data.rec", "w")
--   idx:write_idx(7, s) ; idx:close()            -- .idx lines: "<key>\t<byte offset>\n"
--   idx = rio.MXIndexedRecordIO("data.idx", "data.rec", "r")
--   idx:read_idx(7) ; idx.keys                   -- keys in file order
--
-- The format (core/src/recordio.c, docs/file-formats.md) is dmlc-core's, byte for byte:
-- files written here read in MXNet and the other way round (spec/recordio_spec.lua checks
-- files made by MXNet 1.9.1). Writers are atomic: the .rec and the .idx appear at close
-- (temp + fsync + rename); an error or a crash before close leaves the old files.
-- Malformed files are errors naming the file, the byte offset and the problem.
local ffi = require("ffi")
local lib = require("mx.core.lib")
local class = require("mx.core.class")
local write_atomic = require("mx.core.file").write_atomic
local image = require("mx.image")
local C = lib.C

local type, error, tostring, tonumber, format = type, error, tostring, tonumber, string.format
local setmetatable = setmetatable
local ffi_string = ffi.string

local M = {}

local function last_error() return ffi_string(C.mx_last_error()) end

local outp = ffi.new("mx_recordio *[1]")
local datap = ffi.new("const void *[1]")
local lenp = ffi.new("size_t[1]")

---------------------------------------------------------------- MXRecordIO
local MXRecordIO = class.base("MXRecordIO")

local function open_handle(self, level)
  if C.mx_recordio_open(self.uri, self.flag, outp) ~= 0 then error(last_error(), level + 1) end
  self._h = ffi.gc(outp[0], C.mx_recordio_close)
end

local function init(self, uri, flag)
  if type(uri) ~= "string" or uri == "" then
    error("MXRecordIO: uri must be a non-empty path string, got " .. tostring(uri), 3)
  end
  if flag ~= "r" and flag ~= "w" then
    error("MXRecordIO: flag must be 'r' or 'w', got " .. tostring(flag), 3)
  end
  self.uri, self.flag = uri, flag
  self.writable = flag == "w"
  open_handle(self, 3)
end
-- MXRecordIO(uri, flag): flag "r" (read) or "w" (write; the file appears at close).
function M.MXRecordIO(uri, flag)
  local self = setmetatable({}, MXRecordIO)
  init(self, uri, flag)
  return self
end

local function handle(self, who, level)
  local h = rawget(self, "_h")
  if h == nil then error(format("MXRecordIO.%s: '%s' is closed", who, self.uri), level + 1) end
  return h
end

-- Closes the file; a writer commits it (an error if that fails: the old file stays).
function MXRecordIO:close()
  local h = rawget(self, "_h")
  if h == nil then return end
  self._h = nil
  ffi.gc(h, nil)
  if C.mx_recordio_close(h) ~= 0 then error(last_error(), 2) end
end

-- Reopens from the start (a reader), as MXNet's reset(); a writer starts a new file.
function MXRecordIO:reset()
  self:close()
  open_handle(self, 2)
end
function MXRecordIO:open() if rawget(self, "_h") == nil then open_handle(self, 2) end end

-- write(s): appends the byte string s as one record.
function MXRecordIO:write(s)
  local h = handle(self, "write", 2)
  if not self.writable then error(format("MXRecordIO.write: '%s' is open for reading", self.uri), 2) end
  if type(s) ~= "string" then
    error("MXRecordIO.write: a record must be a (byte) string, got " .. type(s), 2)
  end
  if C.mx_recordio_write(h, s, #s) ~= 0 then error(last_error(), 2) end
end

-- read(): the next record as a string, or nil at the end of the file.
function MXRecordIO:read()
  local h = handle(self, "read", 2)
  if self.writable then error(format("MXRecordIO.read: '%s' is open for writing", self.uri), 2) end
  if C.mx_recordio_read(h, datap, lenp) ~= 0 then error(last_error(), 2) end
  if datap[0] == nil then return nil end
  return ffi_string(datap[0], lenp[0])
end

-- tell(): the byte offset of the next record (what an .idx file stores).
function MXRecordIO:tell() return tonumber(C.mx_recordio_tell(handle(self, "tell", 2))) end

-- seek(pos): continue reading at byte offset pos (a record's start).
function MXRecordIO:_seek(pos, level)
  local h = handle(self, "seek", level)
  if type(pos) ~= "number" then
    error("MXRecordIO.seek: pos must be a number, got " .. type(pos), level + 1)
  end
  if C.mx_recordio_seek(h, pos) ~= 0 then error(last_error(), level + 1) end
end

---------------------------------------------------------------- MXIndexedRecordIO
local MXIndexedRecordIO = class.extend(MXRecordIO, "MXIndexedRecordIO")

local function read_index(self, level)
  local f = io.open(self.idx_path, "rb")
  if not f then return end -- MXNet: a missing index is an empty one
  local text = f:read("*a")
  f:close()
  local n = 0
  for line in text:gmatch("[^\n]+") do
    n = n + 1
    local k, pos = line:match("^%s*(%-?%d+)%s+(%d+)%s*$")
    if not k then
      error(format("MXIndexedRecordIO: '%s' line %d is not '<key>\\t<offset>': %q", self.idx_path,
        n, line:sub(1, 60)), level + 1)
    end
    k, pos = tonumber(k), tonumber(pos)
    if self.idx[k] == nil then self.keys[#self.keys + 1] = k end
    self.idx[k] = pos
  end
end

-- MXIndexedRecordIO(idx_path, uri, flag): a RecordIO file with an index of integer keys.
function M.MXIndexedRecordIO(idx_path, uri, flag)
  if type(idx_path) ~= "string" or idx_path == "" then
    error("MXIndexedRecordIO: idx_path must be a non-empty path string, got " .. tostring(idx_path), 2)
  end
  local self = setmetatable({ idx_path = idx_path, idx = {}, keys = {} }, MXIndexedRecordIO)
  init(self, uri, flag)
  if flag == "r" then read_index(self, 2) end
  return self
end

-- close(): a writer writes the .idx (atomically) after committing the .rec.
function MXIndexedRecordIO:close()
  local was_open = rawget(self, "_h") ~= nil
  MXRecordIO.close(self)
  if was_open and self.writable then
    local out = {}
    for i, k in ipairs(self.keys) do out[i] = format("%d\t%d\n", k, self.idx[k]) end
    write_atomic("MXIndexedRecordIO", self.idx_path, table.concat(out), 2)
  end
end

local function check_key(who, key, level)
  if type(key) ~= "number" or key % 1 ~= 0 then
    error(format("MXIndexedRecordIO.%s: key must be an integer, got %s", who, tostring(key)), level + 1)
  end
end

-- seek(key): the next read() returns record `key`.
function MXIndexedRecordIO:seek(key)
  check_key("seek", key, 2)
  local pos = self.idx[key]
  if pos == nil then error(format("MXIndexedRecordIO.seek: no key %d in '%s'", key, self.idx_path), 2) end
  self:_seek(pos, 2)
end

function MXIndexedRecordIO:read_idx(key)
  check_key("read_idx", key, 2)
  local pos = self.idx[key]
  if pos == nil then error(format("MXIndexedRecordIO.read_idx: no key %d in '%s'", key, self.idx_path), 2) end
  self:_seek(pos, 2)
  local h = rawget(self, "_h")
  if C.mx_recordio_read(h, datap, lenp) ~= 0 then error(last_error(), 2) end
  if datap[0] == nil then
    error(format("MXIndexedRecordIO.read_idx: key %d points past the end of '%s'", key, self.uri), 2)
  end
  return ffi_string(datap[0], lenp[0])
end

function MXIndexedRecordIO:write_idx(key, s)
  check_key("write_idx", key, 2)
  if not self.writable then
    error(format("MXIndexedRecordIO.write_idx: '%s' is open for reading", self.uri), 2)
  end
  local pos = self:tell()
  MXRecordIO.write(self, s)
  if self.idx[key] == nil then self.keys[#self.keys + 1] = key end
  self.idx[key] = pos
end

---------------------------------------------------------------- IRHeader, pack, unpack
ffi.cdef [[
typedef struct { uint32_t flag; float label; uint64_t id; uint64_t id2; } mx_irheader;
]]
local HEADER_SIZE = ffi.sizeof("mx_irheader") -- 24, as MXNet's struct 'IfQQ'
local header_t = ffi.typeof("mx_irheader")
local hdr = ffi.new(header_t)
local hdrp = ffi.typeof("const mx_irheader *")
local floatp = ffi.typeof("const float *")

-- IRHeader{flag=, label=, id=, id2=}: the header MXNet's image records start with.
function M.IRHeader(flag, label, id, id2)
  if type(flag) == "table" then return { flag = flag.flag or 0, label = flag.label or 0,
    id = flag.id or 0, id2 = flag.id2 or 0 } end
  return { flag = flag or 0, label = label or 0, id = id or 0, id2 = id2 or 0 }
end

local function id_of(v, what, level)
  if v == nil then return 0 end
  if type(v) == "number" and v >= 0 and v % 1 == 0 then return v end
  if type(v) == "cdata" then return v end
  error("recordio.pack: header." .. what .. " must be a non-negative integer, got " .. tostring(v), level + 1)
end
local function id_out(v)
  if v < 2 ^ 53 then return tonumber(v) end
  return v
end

-- pack(header, s): header (IRHeader fields) + s as one string. A label that is a list of
-- numbers (or a 1-D tensor) is stored after the header as float32 values with flag =
-- its length, as MXNet does.
function M.pack(header, s)
  if type(header) ~= "table" then
    error("recordio.pack: header must be a table (IRHeader), got " .. type(header), 2)
  end
  if type(s) ~= "string" then error("recordio.pack: s must be a string, got " .. type(s), 2) end
  local label = header.label or 0
  if type(label) == "cdata" or (type(label) == "table" and label.tolist) then label = label:tolist() end
  hdr.id, hdr.id2 = id_of(header.id, "id", 2), id_of(header.id2, "id2", 2)
  local extra = ""
  if type(label) == "number" then
    local flag = header.flag or 0
    if type(flag) ~= "number" or flag < 0 or flag % 1 ~= 0 then
      error("recordio.pack: header.flag must be a non-negative integer, got " .. tostring(flag), 2)
    end
    hdr.flag, hdr.label = flag, label
  elseif type(label) == "table" then
    local n = #label
    local arr = ffi.new("float[?]", math.max(n, 1))
    for i = 1, n do
      if type(label[i]) ~= "number" then
        error(format("recordio.pack: header.label[%d] is not a number", i), 2)
      end
      arr[i - 1] = label[i]
    end
    hdr.flag, hdr.label = n, 0
    extra = ffi_string(arr, 4 * n)
  else
    error("recordio.pack: header.label must be a number or a list of numbers, got " .. type(label), 2)
  end
  return ffi_string(hdr, HEADER_SIZE) .. extra .. s
end

-- unpack(s) -> header, payload: header.label is a number, or a list of flag numbers
-- when the record carries a label vector (flag > 0).
function M.unpack(s)
  if type(s) ~= "string" then error("recordio.unpack: s must be a string, got " .. type(s), 2) end
  if #s < HEADER_SIZE then
    error(format("recordio.unpack: a record holds at least the %d-byte header, got %d bytes",
      HEADER_SIZE, #s), 2)
  end
  local h = ffi.cast(hdrp, s)
  local flag = tonumber(h.flag)
  local header = { flag = flag, label = tonumber(h.label), id = id_out(h.id), id2 = id_out(h.id2) }
  local off = HEADER_SIZE
  if flag > 0 then
    if #s < off + 4 * flag then
      error(format("recordio.unpack: the header says %d label values, but only %d bytes follow it",
        flag, #s - off), 2)
    end
    local lp = ffi.cast(floatp, ffi.cast("const char *", s) + off)
    local label = {}
    for i = 1, flag do label[i] = tonumber(lp[i - 1]) end
    header.label = label
    off = off + 4 * flag
  end
  return header, s:sub(off + 1)
end

---------------------------------------------------------------- images
-- pack_img(header, img, {quality=95, img_fmt='.jpg'}): img (H, W, C) uint8 encoded
-- (mx.image.imencode) and packed. As MXNet's (cv2.imencode), img's channels are taken
-- in OpenCV's B, G, R order; pass to_rgb=true when img is RGB (mx.image.imread's).
local PACK_IMG = { quality = true, img_fmt = true, to_rgb = true }
function M.pack_img(header, img, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("recordio.pack_img: options must be a table", 2) end
  for k in pairs(opts) do
    if not PACK_IMG[k] then error("recordio.pack_img: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local ok, s = pcall(image.imencode, img, { quality = opts.quality or 95,
    img_fmt = opts.img_fmt or ".jpg", to_rgb = opts.to_rgb == true })
  if not ok then error("recordio.pack_img: " .. tostring(s), 2) end
  local r = M.pack(header, s)
  return r
end

-- unpack_img(s, {iscolor=-1, to_rgb=false}) -> header, img: the record's image decoded as
-- MXNet's (cv2.imdecode: iscolor 1 colour, 0 gray, -1 as stored; B, G, R order unless
-- to_rgb=true).
function M.unpack_img(s, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("recordio.unpack_img: options must be a table", 2) end
  for k in pairs(opts) do
    if k ~= "iscolor" and k ~= "to_rgb" then
      error("recordio.unpack_img: unknown option '" .. tostring(k) .. "'", 2)
    end
  end
  local ok, header, payload = pcall(M.unpack, s)
  if not ok then error(tostring(header), 2) end
  local iscolor = opts.iscolor == nil and -1 or opts.iscolor
  local ok2, img = pcall(image.imdecode, payload,
    { flag = iscolor, to_rgb = opts.to_rgb == true })
  if not ok2 then error("recordio.unpack_img: " .. tostring(img), 2) end
  return header, img
end

return M
