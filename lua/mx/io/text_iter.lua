-- mx.io.CSVIter and mx.io.LibSVMIter: MXNet's C++ text iterators (src/io/iter_csv.cc,
-- iter_libsvm.cc), read whole into memory and batched as MXNet's BatchLoader does
-- (lua/mx/io/batch_loader.lua). Arguments by name, as MXNet's (they take no positional
-- ones):
--
--   CSVIter{data_csv=, data_shape=, label_csv=, label_shape={1}, batch_size=,
--           round_batch=true, prefetch_buffer=, ctx=, dtype="float32"}
--     every CSV line one sample, reshaped to data_shape; labels from label_csv (lines of
--     label_shape's size), all 0 without it; batches (batch_size, data_shape...) named
--     "data" and (batch_size, label_shape...) named "softmax_label" ((batch_size) for
--     label_shape {1}).
--   LibSVMIter{data_libsvm=, data_shape={d}, label_libsvm=, label_shape={1}, batch_size=,
--              round_batch=true, num_parts=1, part_index=0, prefetch_buffer=, ctx=,
--              dtype="float32"}
--     lines "label idx:value ..." with 0-based, ascending indices (MXNet's rule); the label
--     is the first column (a (batch_size) label) unless label_libsvm is given (then its
--     lines, as data, (batch_size, label_shape...)). Data batches are csr NDArrays, as
--     MXNet's (without round_batch the last batch's filler rows are zeros, pad says how many).
-- prefetch_buffer and ctx are accepted as MXNet's and change nothing (the data is in
-- memory; batches are on the CPU). LibSVMIter keeps its data as one csr matrix (parsed
-- by gluon.data.LibSVMDataset's reader), its batches copies of rows.
local nd = require("mx.nd")
local io_ = require("mx.io")
local BL = require("mx.io.batch_loader")

local error, tostring, ipairs, tonumber = error, tostring, ipairs, tonumber

local M = {}

local function check_shape(who, what, s, level)
  if type(s) == "number" then s = { s } end
  if type(s) ~= "table" or #s == 0 then
    error(who .. ": " .. what .. " must be a shape (a list of dims), got " .. type(s), level + 1)
  end
  for i = 1, #s do
    if type(s[i]) ~= "number" or s[i] < 1 or s[i] % 1 ~= 0 then
      error(who .. ": " .. what .. " dim " .. i .. " must be a positive integer", level + 1)
    end
  end
  return s
end

local function open(who, path, what, level)
  if type(path) ~= "string" then
    error(who .. ": " .. what .. " must be a file name, got " .. type(path), level + 1)
  end
  local f, why = io.open(path, "r")
  if not f then error(who .. ": cannot open " .. what .. " " .. path .. ": " .. tostring(why), level + 1) end
  return f
end

local function prod(s)
  local n = 1
  for i = 1, #s do n = n * s[i] end
  return n
end

-- every line of a CSV file as numbers, each line `width` of them
local function read_csv(who, path, what, width, level)
  local f = open(who, path, what, level + 1)
  local vals, rowsn, ln = {}, 0, 0
  for line in f:lines() do
    ln = ln + 1
    line = line:gsub("\r$", "")
    if line:match("%S") then
      local k = 0
      for cell in (line .. ","):gmatch("([^,]*),") do
        local v = tonumber(cell)
        if v == nil then
          f:close()
          error(string.format("%s: %s line %d: '%s' is not a number", who, path, ln, cell),
            level + 1)
        end
        k = k + 1
        vals[#vals + 1] = v
      end
      if k ~= width then
        f:close()
        error(string.format("%s: %s line %d has %d values, the shape needs %d", who, path, ln,
          k, width), level + 1)
      end
      rowsn = rowsn + 1
    end
  end
  f:close()
  return vals, rowsn
end

local DTYPES = { float32 = true, float64 = true, float16 = true, int32 = true, int64 = true,
  int8 = true, uint8 = true, bfloat16 = true }
local function dtype_of(who, d, level)
  if d == nil or d == "None" then return "float32" end
  if not DTYPES[d] then error(who .. ": unknown dtype " .. tostring(d), level + 1) end
  return d
end

---------------------------------------------------------------- CSVIter
local CSVIter = io_._class("CSVIter", BL.Loader)
M.CSVIter = CSVIter
local CSV = io_._sig(CSVIter, {}, { "data_csv", "data_shape", "label_csv", "label_shape",
  "batch_size", "round_batch", "prefetch_buffer", "ctx", "dtype" })
function CSVIter:__init(...)
  local o = CSV(3, ...)
  local who = "CSVIter"
  local ds = check_shape(who, "data_shape", o.data_shape, 3)
  local ls = check_shape(who, "label_shape", o.label_shape or { 1 }, 3)
  local dt = dtype_of(who, o.dtype, 3)
  local vals, n = read_csv(who, o.data_csv, "data_csv", prod(ds), 3)
  local shape = { n }
  for _, d in ipairs(ds) do shape[#shape + 1] = d end
  local data = nd.array(vals, { dtype = dt }):reshape(shape)
  local lshape = { n } -- (a label_shape of {1} gives (batch_size) labels, as MXNet's)
  if not (#ls == 1 and ls[1] == 1) then
    for _, d in ipairs(ls) do lshape[#lshape + 1] = d end
  end
  local label
  if o.label_csv ~= nil and o.label_csv ~= "NULL" then
    local lv, ln = read_csv(who, o.label_csv, "label_csv", prod(ls), 3)
    if ln ~= n then
      error(string.format("%s: label_csv has %d lines, data_csv %d", who, ln, n), 3)
    end
    label = nd.array(lv, { dtype = dt }):reshape(lshape)
  else
    label = nd.zeros(lshape, { dtype = dt })
  end
  self:setup(who, { { "data", data }, { "softmax_label", label, label = true } },
    o.batch_size, { round_batch = o.round_batch ~= false }, 3)
end

---------------------------------------------------------------- LibSVMIter
local LibSVMIter = io_._class("LibSVMIter", BL.Loader)
M.LibSVMIter = LibSVMIter
local SVM = io_._sig(LibSVMIter, {}, { "data_libsvm", "data_shape", "label_libsvm",
  "label_shape", "batch_size", "round_batch", "num_parts", "part_index", "prefetch_buffer",
  "ctx", "dtype" })
function LibSVMIter:__init(...)
  local o = SVM(3, ...)
  local who = "LibSVMIter"
  local ds = check_shape(who, "data_shape", o.data_shape, 3)
  if #ds ~= 1 then error(who .. ": data_shape must be 1-d (the feature count)", 3) end
  local dt = dtype_of(who, o.dtype, 3)
  -- the data parsed straight into one csr matrix (never densified: feature counts of
  -- millions are what LibSVM files hold)
  open(who, o.data_libsvm, "data_libsvm", 3):close()
  local parse_libsvm = require("mx.gluon.data.libsvm")._parse
  local labels, vals, cols, ptr, n = parse_libsvm(who, o.data_libsvm, ds[1], 3)
  local function t(list, dtype)
    if #list == 0 then return nd.zeros({ 0 }, { dtype = dtype }) end
    return nd.array(list, { dtype = dtype })
  end
  local data = nd.sparse.csr_matrix({ t(vals, dt), t(cols, "int64"), t(ptr, "int64") },
    { shape = { n, ds[1] }, dtype = dt })
  local label
  if o.label_libsvm ~= nil and o.label_libsvm ~= "NULL" then
    local ls = check_shape(who, "label_shape", o.label_shape or { 1 }, 3)
    if #ls ~= 1 then error(who .. ": label_shape must be 1-d", 3) end
    open(who, o.label_libsvm, "label_libsvm", 3):close()
    local _, lvals, lcols, lptr, ln = parse_libsvm(who, o.label_libsvm, ls[1], 3)
    if ln ~= n then error(string.format("%s: label_libsvm has %d lines, data_libsvm %d", who, ln, n), 3) end
    local lv = {} -- the label rows dense: (n, label width)
    for i = 1, n * ls[1] do lv[i] = 0 end
    for r = 1, n do
      for k = lptr[r] + 1, lptr[r + 1] do lv[(r - 1) * ls[1] + lcols[k] + 1] = lvals[k] end
    end
    label = nd.array(lv, { dtype = dt }):reshape(n, ls[1])
  else
    label = nd.array(labels, { dtype = dt })
  end
  local parts, part = o.num_parts or 1, (o.part_index or 0) + 1
  if parts > 1 then
    if part < 1 or part > parts then
      error(who .. ": part_index must be in 0.." .. parts - 1, 3)
    end
    local a, b = BL.part(n, parts, part)
    data, label = data[{ { a + 1, b } }], label[{ { a + 1, b } }]
  end
  self:setup(who, { { "data", data }, { "softmax_label", label, label = true } },
    o.batch_size, { round_batch = o.round_batch ~= false }, 3)
end

return M
