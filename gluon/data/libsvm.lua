-- mx.gluon.data.LibSVMDataset — the rows of a LibSVM text file as a Gluon dataset of
-- (csr row, label) samples. MXNet has no Gluon dataset for LibSVM (its sparse Gluon
-- tutorial reads mx.io.LibSVMIter); this one reads the same format as LibSVMIter
-- (docs/sparse.md "Data: LibSVM"): `label id:value ...` per line, feature ids 0-based and
-- ascending within a line, blank lines skipped, rows without features taken.
--
--   local ds = gluon.data.LibSVMDataset("train.libsvm", { num_features = 5000 })
--   local x, y = ds:get(1)              -- a (1, 5000) csr row and the label (a number)
--   for xb, yb in gluon.data.DataLoader(ds, { batch_size = 64, shuffle = true }):iter() do
--     -- xb: a (64, 5000) csr batch, yb: (64) labels
--   end
--
-- The file is parsed once into one csr matrix (never densified) and a label tensor; the
-- dataset is an ArrayDataset of the two, so a DataLoader's batches gather csr rows (one
-- copy per row) and its worker threads share the parsed matrix.
local nd = require("mx.nd")
local dataset = require("mx.gluon.data.dataset")

local type, error, tostring, tonumber = type, error, tostring, tonumber

local M = {}

local LibSVMDataset = dataset._class("LibSVMDataset", dataset.ArrayDataset)
M.LibSVMDataset = LibSVMDataset

local SIG = dataset._sig(LibSVMDataset, { "filename", "num_features", "dtype" })

-- parse(path) -> labels, values, column ids, indptr (Lua lists; 0-based ids), rows, max id
local function parse(who, path, width, level)
  local f, why = io.open(path, "r")
  if not f then error(who .. ": cannot open " .. path .. ": " .. tostring(why), level + 1) end
  local labels, vals, cols, ptr = {}, {}, {}, { 0 }
  local n, nnz, ln, maxid = 0, 0, 0, -1
  for line in f:lines() do
    ln = ln + 1
    if line:find("%S") then
      local first, rest = line:match("^%s*(%S+)%s*(.*)$")
      local lab = tonumber(first)
      if lab == nil then
        f:close()
        error(string.format("%s: %s line %d: label '%s' is not a number", who, path, ln, first),
          level + 1)
      end
      n = n + 1
      labels[n] = lab
      local prev = -1
      for idx, v in rest:gmatch("(%S+):(%S+)") do
        local k, x = tonumber(idx), tonumber(v)
        if k == nil or x == nil or k % 1 ~= 0 or k < 0 or k <= prev
            or (width and k >= width) then
          f:close()
          error(string.format("%s: %s line %d: '%s:%s' is not an index:value pair with a 0-based "
            .. "index%s, ascending", who, path, ln, idx, v,
            width and (" below " .. width) or ""), level + 1)
        end
        nnz = nnz + 1
        vals[nnz], cols[nnz] = x, k
        prev = k
      end
      if prev > maxid then maxid = prev end
      ptr[n + 1] = nnz
    end
  end
  f:close()
  return labels, vals, cols, ptr, n, maxid
end
M._parse = parse

-- LibSVMDataset(filename, num_features=nil, dtype="float32"): num_features omitted is the
-- largest feature id + 1. Labels are float32 (as LibSVMIter's).
function LibSVMDataset.new(...)
  local o = SIG(2, ...)
  local who = "LibSVMDataset"
  if type(o.filename) ~= "string" then
    error(who .. ": filename must be a string, got " .. type(o.filename), 2)
  end
  local width = o.num_features
  if width ~= nil and (type(width) ~= "number" or width < 1 or width % 1 ~= 0) then
    error(who .. ": num_features must be a positive integer, got " .. tostring(width), 2)
  end
  local dt = o.dtype or "float32"
  if not nd.dtype_code(dt) then error(who .. ": unknown dtype " .. tostring(dt), 2) end
  local labels, vals, cols, ptr, n, maxid = parse(who, o.filename, width, 2)
  if n == 0 then error(who .. ": " .. o.filename .. " has no rows", 2) end
  width = width or math.max(maxid + 1, 1)
  local function t(list, dtype)
    if #list == 0 then return nd.zeros({ 0 }, { dtype = dtype }) end
    return nd.array(list, { dtype = dtype })
  end
  local csr = nd.sparse.csr_matrix({ t(vals, dt), t(cols, "int64"), t(ptr, "int64") },
    { shape = { n, width }, dtype = dt })
  local self = dataset.ArrayDataset.new(csr, nd.array(labels, { dtype = "float32" }))
  self.num_features = width
  return setmetatable(self, LibSVMDataset)
end

return M
