-- tools/im2rec.lua — MXNet's tools/im2rec.py for luamx: image lists (.lst) and RecordIO
-- image files (.rec + .idx) from an image folder.
--
--   luajit tools/im2rec.lua --list [--recursive] [--train-ratio R] [--test-ratio R]
--                           [--no-shuffle] [--chunks N] [--exts .jpg,.png] PREFIX ROOT
--       writes PREFIX.lst (or PREFIX_train/_val/_test.lst when the ratios split it):
--       lines "index<TAB>label<TAB>path" (MXNet's format: labels as %f, paths relative
--       to ROOT). --recursive: every folder under ROOT that holds images is a class,
--       numbered in walk order (folders sorted by name, a folder before its children);
--       without it, the images directly in ROOT, all label 0 (as im2rec.py).
--   luajit tools/im2rec.lua [--resize N] [--center-crop] [--quality Q] [--encoding .jpg|.png]
--                           [--color 1|0|-1] [--pass-through] [--pack-label]
--                           [--num-thread N] PREFIX ROOT
--       for every PREFIX*.lst next to PREFIX: NAME.rec and NAME.idx (keys = the list's
--       indices, headers IRHeader(0, label, index, 0)). --resize N: the shorter side to N
--       (bilinear, MXNet's integer arithmetic); --center-crop: the central square first;
--       --pass-through: the file's bytes unchanged. --num-thread N > 1: N DataLoader
--       worker threads read and encode the images, this thread writes them in order.
-- The shuffle (on unless --no-shuffle) is a seeded Fisher-Yates (splitmix64, seed 100):
-- repeatable, but not the order of Python's random.seed(100). Images that cannot be
-- read are skipped with a message, as im2rec.py does.
local here = arg and arg[0] and arg[0]:match("^(.*)/tools/[^/]*$") or "."
if not package.path:find(here .. "/lua/?.lua", 1, true) then
  package.path = here .. "/lua/?.lua;" .. here .. "/lua/?/init.lua;" .. package.path
end
if not os.getenv("LUA_CPATH") and not package.cpath:find(here .. "/build/lib/", 1, true) then
  package.cpath = here .. "/build/lib/?.so;" .. package.cpath
end

local M = {}

local USAGE = [[
usage: luajit tools/im2rec.lua [--list] [--recursive] [--train-ratio R] [--test-ratio R]
         [--no-shuffle] [--chunks N] [--exts .jpeg,.jpg,.png] [--resize N] [--center-crop]
         [--quality Q] [--encoding .jpg|.png] [--color 1|0|-1] [--pass-through]
         [--pack-label] [--num-thread N] PREFIX ROOT]]

local FLAGS = { list = true, recursive = true, ["no-shuffle"] = true, ["pass-through"] = true,
  ["center-crop"] = true, ["pack-label"] = true, shuffle = true }
local VALUES = { ["train-ratio"] = "number", ["test-ratio"] = "number", chunks = "int",
  resize = "int", quality = "int", ["num-thread"] = "int", color = "int", encoding = "string",
  exts = "string" }

-- argv (a list of strings) -> options table; errors are messages for the user
function M.parse(argv)
  local o = { ["train-ratio"] = 1, ["test-ratio"] = 0, chunks = 1, resize = 0, quality = 95,
    ["num-thread"] = 1, color = 1, encoding = ".jpg", exts = ".jpeg,.jpg,.png" }
  local pos = {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local name, val = a:match("^%-%-([%w-]+)=(.*)$")
    name = name or a:match("^%-%-([%w-]+)$")
    if name then
      if FLAGS[name] then
        if val then error("--" .. name .. " takes no value") end
        o[name] = true
      elseif VALUES[name] then
        if not val then
          i = i + 1
          val = argv[i]
          if val == nil then error("--" .. name .. " needs a value") end
        end
        if VALUES[name] ~= "string" then
          local n = tonumber(val)
          if not n or (VALUES[name] == "int" and n % 1 ~= 0) then
            error("--" .. name .. " must be " .. (VALUES[name] == "int" and "an integer" or "a number")
              .. ", got " .. val)
          end
          val = n
        end
        o[name] = val
      else
        error("unknown option --" .. name)
      end
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  if #pos ~= 2 then error("expected PREFIX and ROOT, got " .. #pos .. " positional arguments") end
  o.prefix, o.root = pos[1], pos[2]
  if o.encoding ~= ".jpg" and o.encoding ~= ".jpeg" and o.encoding ~= ".png" then
    error("--encoding must be .jpg or .png, got " .. o.encoding)
  end
  if o.color ~= 1 and o.color ~= 0 and o.color ~= -1 then error("--color must be 1, 0 or -1") end
  if o.quality < 0 then error("--quality must be >= 0") end
  if o.chunks < 1 then error("--chunks must be >= 1") end
  if o["train-ratio"] < 0 or o["train-ratio"] > 1 or o["test-ratio"] < 0
      or o["train-ratio"] + o["test-ratio"] > 1 then
    error("--train-ratio and --test-ratio must be in [0, 1] with a sum <= 1")
  end
  local exts = {}
  for e in o.exts:gmatch("[^,]+") do exts[e:lower()] = true end
  o.ext_set = exts
  return o
end

local function datasets() return require("mx.gluon.data.vision.datasets") end

-- the images under root: a list of {index, relpath, label} (im2rec.py's list_image)
function M.list_images(root, recursive, exts)
  local ds = datasets()
  local out = {}
  if recursive then
    local cat, ncat = {}, 0
    local function walk(dir, rel)
      local entries = ds._listdir(dir, "im2rec", 2)
      for _, e in ipairs(entries) do
        if not e.dir and exts[ds._ext_of(e.name)] then
          if not cat[dir] then cat[dir] = ncat ncat = ncat + 1 end
          out[#out + 1] = { #out, rel .. e.name, cat[dir] }
        end
      end
      for _, e in ipairs(entries) do
        if e.dir then walk(dir .. "/" .. e.name, rel .. e.name .. "/") end
      end
    end
    walk(root, "")
  else
    for _, e in ipairs(ds._listdir(root, "im2rec", 2)) do
      if not e.dir and exts[ds._ext_of(e.name)] then out[#out + 1] = { #out, e.name, 0 } end
    end
  end
  return out
end

local function write_list(path, items)
  local lines = {}
  for k, it in ipairs(items) do
    local parts = { string.format("%d", it[1]) }
    for j = 3, #it do parts[#parts + 1] = string.format("%f", it[j]) end
    parts[#parts + 1] = it[2]
    lines[k] = table.concat(parts, "\t") .. "\n"
  end
  require("mx.core.file").write_atomic("im2rec", path, table.concat(lines), 2)
end

function M.make_list(o)
  local items = M.list_images(o.root, o.recursive, o.ext_set)
  if not o["no-shuffle"] then
    local rng = require("mx.gluon.data.sampler")._Rng(100)
    for k = #items, 2, -1 do
      local j = rng:int(k)
      items[k], items[j] = items[j], items[k]
    end
  end
  local n = #items
  local chunk_size = math.floor((n + o.chunks - 1) / o.chunks)
  local written = {}
  for c = 0, o.chunks - 1 do
    local chunk = {}
    for k = c * chunk_size + 1, math.min(n, (c + 1) * chunk_size) do chunk[#chunk + 1] = items[k] end
    local suffix = o.chunks > 1 and ("_" .. c) or ""
    local sep = math.floor(chunk_size * o["train-ratio"])
    local sep_test = math.floor(chunk_size * o["test-ratio"])
    local function part(a, b) -- chunk[a+1 .. b], 0-based half-open as Python slices
      local r = {}
      for k = a + 1, math.min(b, #chunk) do r[#r + 1] = chunk[k] end
      return r
    end
    if o["train-ratio"] == 1 then
      write_list(o.prefix .. suffix .. ".lst", chunk)
      written[#written + 1] = o.prefix .. suffix .. ".lst"
    else
      if o["test-ratio"] > 0 then
        write_list(o.prefix .. suffix .. "_test.lst", part(0, sep_test))
        written[#written + 1] = o.prefix .. suffix .. "_test.lst"
      end
      if o["train-ratio"] + o["test-ratio"] < 1 then
        write_list(o.prefix .. suffix .. "_val.lst", part(sep_test + sep, #chunk))
        written[#written + 1] = o.prefix .. suffix .. "_val.lst"
      end
      write_list(o.prefix .. suffix .. "_train.lst", part(sep_test, sep_test + sep))
      written[#written + 1] = o.prefix .. suffix .. "_train.lst"
    end
  end
  return written, n
end

-- The record payload of one .lst item (the file's bytes with --pass-through, else the
-- image decoded, center-cropped / resized as asked and encoded again), or nil and why.
-- Self-contained (no upvalues): DataLoader worker threads run it for --num-thread > 1.
local function encode_item(o, it)
  local path = o.root .. "/" .. it.path
  if o["pass-through"] then
    local f, why = io.open(path, "rb")
    if not f then return nil, why end
    local bytes = f:read("*a")
    f:close()
    return bytes
  end
  local image, nd = require("mx.image"), require("mx.nd")
  local ok, img = pcall(image.imread, path, { flag = o.color })
  if not ok then return nil, img end
  local s = img:shape()
  if o["center-crop"] and s[1] ~= s[2] then
    local m = math.floor(math.abs(s[1] - s[2]) / 2)
    if s[1] > s[2] then img = image.fixed_crop(img, 0, m, s[2], s[2])
    else img = image.fixed_crop(img, m, 0, s[1], s[1]) end
    s = img:shape()
  end
  if o.resize > 0 then
    local nw, nh
    if s[1] > s[2] then nw, nh = o.resize, math.floor(s[1] * o.resize / s[2])
    else nw, nh = math.floor(s[2] * o.resize / s[1]), o.resize end
    img = nd.imresize(img, { w = nw, h = nh, interp = 1 })
  end
  local ok2, bytes = pcall(image.imencode, img, { img_fmt = o.encoding,
    quality = o.encoding ~= ".png" and o.quality or nil,
    compression = o.encoding == ".png" and math.min(9, o.quality) or nil })
  if ok2 then return bytes end
  return nil, bytes
end

-- The payloads in .lst order from --num-thread DataLoader worker threads: each worker
-- encodes whole items (the main thread only writes), and a failed item comes back empty
-- (its reason is found again on this thread, so the skip message is the same).
local function parallel_payloads(o, items)
  local gdata, ffi = require("mx.gluon.data"), require("ffi")
  local jobs = {}
  for i = 1, #items do jobs[i] = i end
  local opts = {}
  for k, v in pairs(o) do opts[k] = v end
  local encode = encode_item
  local ds = gdata.SimpleDataset.new(jobs):transform(function(i)
    local bytes = encode(opts, items[i])
    local nd = require("mx.nd")
    local t = nd.zeros({ bytes and #bytes or 0 }, { dtype = "uint8" })
    if bytes and #bytes > 0 then require("ffi").copy(t:data_ptr(), bytes, #bytes) end
    return t
  end)
  local loader = gdata.DataLoader(ds, { batch_size = 1, num_workers = o["num-thread"],
    batchify_fn = function(samples) return samples[1] end })
  local k = 0
  local it = loader:iter()
  return function()
    local t = it()
    if t == nil then
      loader:close()
      return nil
    end
    k = k + 1
    local n = t:size()
    if n == 0 then return k, encode_item(o, items[k]) end
    return k, ffi.string(t:data_ptr(), n)
  end
end

-- one .lst -> .rec + .idx; returns the number of records written and skipped
function M.make_rec(o, lst)
  local ds = datasets()
  local rio = require("mx.recordio")
  local items = ds._parse_lst(lst, "im2rec", 2)
  local base = lst:gsub("%.lst$", "")
  local w = rio.MXIndexedRecordIO(base .. ".idx", base .. ".rec", "w")
  local written, skipped = 0, 0
  local function record(it, payload, why)
    local label = o["pack-label"] and it.label or it.label[1]
    if payload then
      w:write_idx(it.key, rio.pack({ flag = 0, label = label, id = it.key, id2 = 0 }, payload))
      written = written + 1
    else
      io.stderr:write("im2rec: skipping ", o.root .. "/" .. it.path, ": ", tostring(why), "\n")
      skipped = skipped + 1
    end
  end
  if o["num-thread"] > 1 and #items > 1 then
    for k, payload, why in parallel_payloads(o, items) do record(items[k], payload, why) end
  else
    for _, it in ipairs(items) do record(it, encode_item(o, it)) end
  end
  w:close()
  return written, skipped
end

function M.main(argv)
  local ok, o = pcall(M.parse, argv)
  if not ok then
    io.stderr:write("im2rec: ", tostring(o):gsub("^[^\n]-:%d+: ", ""), "\n", USAGE, "\n")
    return 2
  end
  local ok2, err = pcall(function()
    if o.list then
      local files, n = M.make_list(o)
      io.stdout:write(string.format("im2rec: %d images listed in %s\n", n, table.concat(files, ", ")))
      return
    end
    local dir, stem = o.prefix:match("^(.*)/([^/]*)$")
    if not dir then dir, stem = ".", o.prefix end
    stem = stem:gsub("%.lst$", "")
    local lists = {}
    for _, e in ipairs(datasets()._listdir(dir == "" and "/" or dir, "im2rec", 2)) do
      if not e.dir and e.name:sub(1, #stem) == stem and e.name:match("%.lst$") then
        lists[#lists + 1] = dir .. "/" .. e.name
      end
    end
    if #lists == 0 then error("no " .. o.prefix .. "*.lst found (make one with --list)") end
    for _, lst in ipairs(lists) do
      local n, skipped = M.make_rec(o, lst)
      io.stdout:write(string.format("im2rec: %s -> %d records%s\n", lst, n,
        skipped > 0 and (" (" .. skipped .. " skipped)") or ""))
    end
  end)
  if not ok2 then
    io.stderr:write("im2rec: ", (tostring(err):gsub("^[^\n]-:%d+: ", "")), "\n")
    return 1
  end
  return 0
end

if arg and arg[0] and arg[0]:match("im2rec%.lua$") and not package.loaded["tools.im2rec"] then
  os.exit(M.main(arg))
end
return M
