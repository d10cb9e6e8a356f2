-- mx.io — MXNet's data iterators for sparse data: LibSVMIter reads a LibSVM text file
-- (`label idx:value idx:value ...`, feature ids 0-based as MXNet's LibSVMIter requires)
-- into batches whose data is a (batch_size, num_features) csr tensor:
--   local it = mx.io.LibSVMIter { data_libsvm = "train.libsvm", data_shape = { 1000 },
--                                 batch_size = 32 }
--   for batch in it:batches() do ... batch.data[1] (csr), batch.label[1], batch.pad end
--   it:reset()  -- it:next() returns the next batch or nil
-- round_batch (default true, as MXNet): the last batch is filled up from the start of the
-- file and batch.pad says how many rows are such filler.
local nd = require("mx.nd")

local type, error, tostring, tonumber = type, error, tostring, tonumber

local M = {}

local LibSVMIter = {}
LibSVMIter.__index = LibSVMIter
M.LibSVMIter = setmetatable({}, { __call = function(_, opts) return LibSVMIter.new(opts, 3) end })

local OPTS = { data_libsvm = true, data_shape = true, batch_size = true, round_batch = true,
  dtype = true }

-- every row of the file: {label, ids (0-based), values}
local function parse(path, nfeat, level)
  local f, err = io.open(path, "r")
  if not f then
    error("LibSVMIter: cannot open data_libsvm '" .. tostring(path) .. "': " .. err, level + 1)
  end
  local rows, ln = {}, 0
  for line in f:lines() do
    ln = ln + 1
    line = line:gsub("#.*$", "")
    if line:find("%S") then
      local label, rest = line:match("^%s*(%S+)(.*)$")
      local y = tonumber(label)
      if not y then
        f:close()
        error(string.format("LibSVMIter: %s:%d: the label '%s' is not a number", path, ln, label),
          level + 1)
      end
      local ids, vals, last = {}, {}, -1
      for tok in rest:gmatch("%S+") do
        local i, v = tok:match("^(%d+):(%S+)$")
        i, v = tonumber(i), tonumber(v)
        if not i or not v then
          f:close()
          error(string.format("LibSVMIter: %s:%d: '%s' is not index:value", path, ln, tok), level + 1)
        end
        if i >= nfeat then
          f:close()
          error(string.format("LibSVMIter: %s:%d: feature id %d is outside data_shape (%d "
            .. "features; ids are 0-based)", path, ln, i, nfeat), level + 1)
        end
        if i <= last then
          f:close()
          error(string.format("LibSVMIter: %s:%d: feature ids must ascend (%d after %d)", path, ln,
            i, last), level + 1)
        end
        last = i
        ids[#ids + 1], vals[#vals + 1] = i, v
      end
      rows[#rows + 1] = { y, ids, vals }
    end
  end
  f:close()
  return rows
end

function LibSVMIter.new(opts, level)
  local who = "LibSVMIter"
  if type(opts) ~= "table" then error(who .. ": options must be a table", level) end
  for k in pairs(opts) do
    if not OPTS[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", level) end
  end
  local shape = opts.data_shape
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" or #shape ~= 1 or type(shape[1]) ~= "number" or shape[1] < 1 then
    error(who .. ": data_shape must be {num_features}", level)
  end
  local bs = opts.batch_size
  if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
    error(who .. ": batch_size must be a positive integer", level)
  end
  local rows = parse(opts.data_libsvm, shape[1], level)
  if #rows == 0 then error(who .. ": '" .. opts.data_libsvm .. "' holds no rows", level) end
  return setmetatable({ _rows = rows, _nfeat = shape[1], _bs = bs, _pos = 0,
    _round = opts.round_batch ~= false, _dtype = opts.dtype or "float32",
    provide_data = { { name = "data", shape = { bs, shape[1] } } },
    provide_label = { { name = "softmax_label", shape = { bs } } } }, LibSVMIter)
end

function LibSVMIter:reset() self._pos = 0 end

function LibSVMIter:next()
  local rows, n, bs = self._rows, #self._rows, self._bs
  if self._pos >= n then return nil end
  local take, pad = {}, 0
  for k = 1, bs do
    local i = self._pos + k
    if i > n then
      if not self._round then break end
      pad = pad + 1
      i = (i - 1) % n + 1
    end
    take[#take + 1] = rows[i]
  end
  self._pos = self._pos + bs
  local data, ids, ptr, labels = {}, {}, { 0 }, {}
  for r, row in ipairs(take) do
    labels[r] = row[1]
    for j = 1, #row[2] do ids[#ids + 1], data[#data + 1] = row[2][j], row[3][j] end
    ptr[#ptr + 1] = #ids
  end
  local x = nd.sparse.csr_matrix({ nd.array(#data > 0 and data or {}, { dtype = self._dtype })
      :reshape { #data }, nd.array(#ids > 0 and ids or {}, { dtype = "int64" }):reshape { #ids }, ptr },
    { shape = { #take, self._nfeat } })
  return { data = { x }, label = { nd.array(labels) }, pad = pad }
end

-- for batch in it:batches() do ... end (from the current position)
function LibSVMIter:batches()
  return function() return self:next() end
end

return M
