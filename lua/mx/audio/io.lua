-- mx.audio.io — audio files through Debian's libsndfile (WAV, FLAC, OGG/Vorbis, AIFF...,
-- whatever the library reads). load() returns float samples in [-1, 1] as a
-- (channels, frames) tensor and the sample rate; save() writes (channels, frames) or
-- (frames) atomically (the whole file is encoded in memory, then written with the
-- core's temp + fsync + rename).
local ffi = require("ffi")
local nd = require("mx.nd")
local file = require("mx.core.file")

local M = {}

ffi.cdef [[
typedef int64_t sf_count_t;
typedef struct SNDFILE_tag SNDFILE;
typedef struct SF_INFO { sf_count_t frames; int samplerate; int channels; int format; int sections;
  int seekable; } SF_INFO;
typedef sf_count_t (*sf_vio_get_filelen)(void *user_data);
typedef sf_count_t (*sf_vio_seek)(sf_count_t offset, int whence, void *user_data);
typedef sf_count_t (*sf_vio_read)(void *ptr, sf_count_t count, void *user_data);
typedef sf_count_t (*sf_vio_write)(const void *ptr, sf_count_t count, void *user_data);
typedef sf_count_t (*sf_vio_tell)(void *user_data);
typedef struct SF_VIRTUAL_IO { sf_vio_get_filelen get_filelen; sf_vio_seek seek; sf_vio_read read;
  sf_vio_write write; sf_vio_tell tell; } SF_VIRTUAL_IO;
SNDFILE *sf_open(const char *path, int mode, SF_INFO *sfinfo);
SNDFILE *sf_open_virtual(SF_VIRTUAL_IO *sfvirtual, int mode, SF_INFO *sfinfo, void *user_data);
int sf_close(SNDFILE *sndfile);
const char *sf_strerror(SNDFILE *sndfile);
sf_count_t sf_readf_float(SNDFILE *sndfile, float *ptr, sf_count_t frames);
sf_count_t sf_readf_double(SNDFILE *sndfile, double *ptr, sf_count_t frames);
sf_count_t sf_writef_float(SNDFILE *sndfile, const float *ptr, sf_count_t frames);
int sf_format_check(const SF_INFO *info);
]]

local ok, SF = pcall(ffi.load, "sndfile")
if not ok then ok, SF = pcall(ffi.load, "libsndfile.so.1") end
if not ok then SF = nil end

local SFM_READ, SFM_WRITE = 0x10, 0x20
local MAJOR = { wav = 0x010000, aiff = 0x020000, au = 0x030000, flac = 0x170000, ogg = 0x200000 }
local SUB = { PCM_16 = 0x0002, PCM_24 = 0x0003, PCM_32 = 0x0004, PCM_U8 = 0x0005, FLOAT = 0x0006,
  DOUBLE = 0x0007, VORBIS = 0x0060 }

local function lib(who, level)
  if not SF then
    error(who .. ": libsndfile not found (Debian package libsndfile1, tools/setup.sh)", level + 1)
  end
  return SF
end

-- load(path, {mono=false, dtype="float32"}) -> samples (channels, frames), sample_rate.
-- mono averages the channels into (frames).
function M.load(path, o)
  o = o or {}
  local L = lib("audio.load", 2)
  if type(path) ~= "string" then error("audio.load: path must be a string, got " .. type(path), 2) end
  local info = ffi.new("SF_INFO")
  local f = L.sf_open(path, SFM_READ, info)
  if f == nil then error("audio.load: " .. path .. ": " .. ffi.string(L.sf_strerror(nil)), 2) end
  local frames, ch = tonumber(info.frames), info.channels
  local dtype = o.dtype or "float32"
  if dtype ~= "float32" and dtype ~= "float64" then
    L.sf_close(f)
    error("audio.load: dtype must be float32 or float64, got " .. tostring(dtype), 2)
  end
  local inter = nd.empty({ math.max(frames, 1), ch }, { dtype = dtype })
  local got = dtype == "float32" and L.sf_readf_float(f, inter:data_ptr(), frames)
    or L.sf_readf_double(f, inter:data_ptr(), frames)
  L.sf_close(f)
  if tonumber(got) ~= frames then
    error(string.format("audio.load: %s: read %d of %d frames", path, tonumber(got), frames), 2)
  end
  if frames == 0 then return nd.zeros({ ch, 0 }, { dtype = dtype }), info.samplerate end
  local x = nd.transpose(inter)
  if o.mono then x = nd.mean(x, { axis = 1 }) end
  return x, info.samplerate
end

-- info(path) -> {frames=, sample_rate=, channels=, format=} without reading the samples
function M.info(path)
  local L = lib("audio.info", 2)
  -- (sf_open dereferences a NULL path: the process died)
  if type(path) ~= "string" then error("audio.info: path must be a string, got " .. type(path), 2) end
  local info = ffi.new("SF_INFO")
  local f = L.sf_open(path, SFM_READ, info)
  if f == nil then error("audio.info: " .. tostring(path) .. ": " .. ffi.string(L.sf_strerror(nil)), 2) end
  L.sf_close(f)
  return { frames = tonumber(info.frames), sample_rate = info.samplerate, channels = info.channels,
    format = info.format }
end

-- an in-memory file for sf_open_virtual: the callbacks grow a byte buffer
local function memfile()
  local m = { buf = ffi.new("uint8_t[?]", 65536), cap = 65536, len = 0, pos = 0 }
  local cbs = {}
  cbs.get_filelen = ffi.cast("sf_vio_get_filelen", function() return m.len end)
  cbs.seek = ffi.cast("sf_vio_seek", function(off, whence)
    local base = whence == 0 and 0 or whence == 1 and m.pos or m.len
    m.pos = base + tonumber(off)
    return m.pos
  end)
  cbs.read = ffi.cast("sf_vio_read", function(ptr, count)
    local n = math.max(0, math.min(tonumber(count), m.len - m.pos))
    ffi.copy(ptr, m.buf + m.pos, n)
    m.pos = m.pos + n
    return n
  end)
  cbs.write = ffi.cast("sf_vio_write", function(ptr, count)
    local n = tonumber(count)
    if m.pos + n > m.cap then
      local nc = m.cap
      while nc < m.pos + n do nc = nc * 2 end
      local nb = ffi.new("uint8_t[?]", nc)
      ffi.copy(nb, m.buf, m.len)
      m.buf, m.cap = nb, nc
    end
    ffi.copy(m.buf + m.pos, ptr, n)
    m.pos = m.pos + n
    if m.pos > m.len then m.len = m.pos end
    return n
  end)
  cbs.tell = ffi.cast("sf_vio_tell", function() return m.pos end)
  local vio = ffi.new("SF_VIRTUAL_IO", { cbs.get_filelen, cbs.seek, cbs.read, cbs.write, cbs.tell })
  function m.free() for _, c in pairs(cbs) do c:free() end end
  m.vio = vio
  return m
end

-- save(path, samples, sample_rate, {format= from the extension (wav), subtype="PCM_16"}):
-- samples (channels, frames) or (frames), floats in [-1, 1] (clipped by libsndfile's
-- integer encoders)
function M.save(path, x, sr, o)
  if o ~= nil and type(o) ~= "table" then error("audio.save: options must be a table, got " .. type(o), 2) end
  o = o or {}
  local L = lib("audio.save", 2)
  if type(path) ~= "string" then error("audio.save: path must be a string, got " .. type(path), 2) end
  if not nd.is_tensor(x) then error("audio.save: samples must be a tensor", 2) end
  if type(sr) ~= "number" or sr < 1 or sr % 1 ~= 0 then
    error("audio.save: sample_rate must be a positive integer, got " .. tostring(sr), 2)
  end
  local s = x:shape()
  if #s == 1 then x = nd.reshape(x, { 1, s[1] }) s = x:shape() end
  if #s ~= 2 then error("audio.save: samples must be (channels, frames) or (frames), got " .. #s
    .. " dims", 2) end
  local fmt = o.format or (path:match("%.(%w+)$") or "wav"):lower()
  local major = MAJOR[fmt]
  if not major then error("audio.save: unknown format '" .. fmt .. "' (wav, flac, ogg, aiff, au)", 2) end
  local sub = SUB[o.subtype or (fmt == "ogg" and "VORBIS" or "PCM_16")]
  if not sub then error("audio.save: unknown subtype '" .. tostring(o.subtype) .. "'", 2) end
  local info = ffi.new("SF_INFO")
  info.samplerate, info.channels, info.format = sr, s[1], major + sub
  if L.sf_format_check(info) == 0 then
    error(string.format("audio.save: libsndfile cannot write %s with subtype %s", fmt,
      tostring(o.subtype)), 2)
  end
  local inter = nd.transpose(x):astype("float32")
  inter = inter + 0 -- a contiguous copy
  local m = memfile()
  local f = L.sf_open_virtual(m.vio, SFM_WRITE, info, nil)
  if f == nil then
    m.free()
    error("audio.save: " .. path .. ": " .. ffi.string(L.sf_strerror(nil)), 2)
  end
  local wrote = L.sf_writef_float(f, inter:data_ptr(), s[2])
  L.sf_close(f)
  local bytes = ffi.string(m.buf, m.len)
  m.free()
  if tonumber(wrote) ~= s[2] then error("audio.save: " .. path .. ": wrote " .. tonumber(wrote) .. " of "
    .. s[2] .. " frames", 2) end
  file.write_atomic("audio.save", path, bytes, 2)
end

return M
