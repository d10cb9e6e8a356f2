-- bench/recordio_bench.lua — RecordIO read throughput: MB/s of
-- reading a ~100 MB .rec (sequentially with MXRecordIO:read, and by key in a shuffled
-- order with MXIndexedRecordIO:read_idx) against reading the same bytes as one raw file
-- per record (open + read + close, same shuffled order) and as one raw file (read whole,
-- in 1 MiB chunks; and by fread(3) into a reused buffer, the ceiling).
--   luajit bench/recordio_bench.lua [--dir=DIR] [--mb=100] [--reps=9] [--quick]
-- The records: payloads of 40..120 KB (JPEG-sized) of pseudo-random bytes, each also a
-- file DIR/raw/<k>.bin and concatenated into DIR/all.bin; made once per DIR (default
-- /tmp/luamx_recordio_bench). Every measure runs after a warm-up pass, so all of them
-- read from the page cache: this is the cost of the reader, not of the disk. Median of
-- --reps. MB = 1e6 bytes of payload (the .rec's headers and padding not counted).
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A = H.mx_setup(arg)
local rio = mx.recordio

local DIR = A.dir or "/tmp/luamx_recordio_bench"
local MB = A.quick and 10 or (A.mb or 100)
local REPS = A.quick and 1 or (A.reps or 9)
local REC, IDX, ALL = DIR .. "/data.rec", DIR .. "/data.idx", DIR .. "/all.bin"

-- the files, once per DIR and size (payloads: slices of a seeded random 256 KiB block)
local function make()
  local f = io.open(DIR .. "/.complete-" .. MB)
  if f then
    f:close()
    local sizes = {}
    for line in io.lines(DIR .. "/sizes.txt") do sizes[#sizes + 1] = tonumber(line) end
    return sizes
  end
  assert(os.execute("rm -rf '" .. DIR .. "' && mkdir -p '" .. DIR .. "/raw'"))
  math.randomseed(11)
  local block = {}
  for i = 1, 256 * 1024 do block[i] = string.char(math.random(0, 255)) end
  block = table.concat(block)
  local w = rio.MXIndexedRecordIO(IDX, REC, "w")
  local all = assert(io.open(ALL, "wb"))
  local sizes, total, k = {}, 0, 0
  while total < MB * 1e6 do
    k = k + 1
    local n = math.random(40000, 120000)
    local off = math.random(1, #block - n)
    local s = block:sub(off, off + n - 1)
    w:write_idx(k, s)
    all:write(s)
    local rf = assert(io.open(string.format("%s/raw/%d.bin", DIR, k), "wb"))
    rf:write(s)
    rf:close()
    sizes[k], total = n, total + n
  end
  w:close()
  all:close()
  local sf = assert(io.open(DIR .. "/sizes.txt", "w"))
  sf:write(table.concat(sizes, "\n"), "\n")
  sf:close()
  assert(io.open(DIR .. "/.complete-" .. MB, "w")):close()
  return sizes
end

local sizes = make()
local total = 0
for _, n in ipairs(sizes) do total = total + n end
local order = {}
for i = 1, #sizes do order[i] = i end
math.randomseed(5)
for i = #order, 2, -1 do
  local j = math.random(1, i)
  order[i], order[j] = order[j], order[i]
end

H.env_note()
io.write(string.format("# %d records, %.1f MB of payload, %s (page cache warm)\n", #sizes,
  total / 1e6, REC))

local function measure(name, fn, note)
  fn() -- warm-up: page cache, JIT
  local r = {}
  for i = 1, REPS do
    collectgarbage()
    local t0 = H.now()
    local bytes = fn()
    r[i] = bytes / (H.now() - t0) / 1e6
    assert(bytes == total, name .. ": read " .. bytes .. " bytes, expected " .. total)
  end
  H.report(name, H.median(r), "MB/s", { note = note })
end

measure("recordio_read_seq", function()
  local rd = rio.MXRecordIO(REC, "r")
  local n = 0
  while true do
    local s = rd:read()
    if not s then break end
    n = n + #s
  end
  rd:close()
  return n
end, "MXRecordIO:read, in file order")

measure("recordio_read_idx_shuffled", function()
  local rd = rio.MXIndexedRecordIO(IDX, REC, "r")
  local n = 0
  for i = 1, #order do n = n + #rd:read_idx(order[i]) end
  rd:close()
  return n
end, "MXIndexedRecordIO:read_idx, shuffled keys")

measure("raw_files_shuffled", function()
  local n = 0
  for i = 1, #order do
    local f = io.open(DIR .. "/raw/" .. order[i] .. ".bin", "rb")
    n = n + #f:read("*a")
    f:close()
  end
  return n
end, "one file per record: io.open + read('*a') + close, shuffled")

measure("raw_one_file", function()
  local f = io.open(ALL, "rb")
  local n = 0
  while true do
    local s = f:read(1048576)
    if not s then break end
    n = n + #s
  end
  f:close()
  return n
end, "the payloads concatenated, read in 1 MiB chunks")

-- the ceiling: the same file by fread(3) into one reused 1 MiB buffer (no Lua strings)
local ffi = require("ffi")
pcall(ffi.cdef, [[
  typedef struct FILE FILE;
  FILE *fopen(const char *path, const char *mode);
  size_t fread(void *ptr, size_t size, size_t n, FILE *f);
  int fclose(FILE *f);
]])
local buf = ffi.new("uint8_t[?]", 1048576)
measure("raw_one_file_fread", function()
  local f = ffi.C.fopen(ALL, "rb")
  local n = 0
  while true do
    local got = tonumber(ffi.C.fread(buf, 1, 1048576, f))
    if got == 0 then break end
    n = n + got
  end
  ffi.C.fclose(f)
  return n
end, "the payloads concatenated, fread into one 1 MiB buffer (no Lua strings)")
