-- The batching of MXNet's C++ iterators (src/io/iter_batchloader.h) over samples held in
-- memory: fields (data, then labels) are NDArrays whose first axis is the sample.
--   round_batch true: a short last batch is filled with the first samples of the next
--     pass (batch.pad says how many) and the next pass starts after them (MXNet's
--     num_overflow: no sample is seen twice in a row);
--   round_batch false: the short last batch is kept, filled with zeros (batch.pad), and
--     the next pass starts at the first sample;
--   drop_last true (MNISTIter's): a short last batch is not given.
-- Loader(who, fields, batch_size, opts) with fields {{name, array, label=bool}, ...} and
-- opts {round_batch=, drop_last=}; the iterators of text_iter.lua and mnist_iter.lua
-- subclass it.
local nd = require("mx.nd")
local io_ = require("mx.io")
local batchify = require("mx.gluon.data.batchify")

local error, tostring, ipairs = error, tostring, ipairs

local M = {}

local Loader = io_._class("_BatchLoader", io_.DataIter)
M.Loader = Loader

function Loader.setup(self, who, fields, batch_size, opts, level)
  if type(batch_size) ~= "number" or batch_size < 1 or batch_size % 1 ~= 0 then
    error(who .. ": batch_size must be a positive integer, got " .. tostring(batch_size),
      level + 1)
  end
  local n = fields[1][2]:shape()[1]
  for _, f in ipairs(fields) do
    if f[2]:shape()[1] ~= n then
      error(string.format("%s: %s has %d samples, %s %d", who, f[1], f[2]:shape()[1],
        fields[1][1], n), level + 1)
    end
  end
  if n == 0 then error(who .. ": no samples", level + 1) end
  if opts.round_batch and n < batch_size then
    error(string.format("%s: %d samples for a batch of %d (round_batch needs at least a "
      .. "batch)", who, n, batch_size), level + 1)
  end
  self.batch_size, self.num_data, self._fields = batch_size, n, fields
  self._round, self._drop = opts.round_batch == true, opts.drop_last == true
  self._start, self._cursor, self._overflow = 0, 0, 0
  local pd, pl = {}, {}
  for _, f in ipairs(fields) do
    -- a csr field (LibSVMIter's data) stays csr: batches copy its rows' runs
    if f[2]:stype() == "csr" then f.parts = batchify.csr_parts(f[2]) end
    local s = f[2]:shape()
    s[1] = batch_size
    local d = io_.DataDesc(f[1], s, f[2]:dtype())
    if f.label then pl[#pl + 1] = d else pd[#pd + 1] = d end
  end
  self.provide_data, self.provide_label = pd, pl
end

function Loader:reset()
  self._cursor = self._overflow -- round_batch: after the samples the last pad used
  self._overflow = 0
end

-- rows [a, b) (0-based) of a field
local function rows(x, a, b) return x[{ { a + 1, b } }] end

function Loader:_make()
  local bs, n, c = self.batch_size, self.num_data, self._cursor
  if c >= n or (self._drop and c + bs > n) then return nil end
  local data, label = {}, {}
  local pad = 0
  for _, f in ipairs(self._fields) do
    local x = f[2]
    local v
    if f.parts then
      local idx = {}
      for i = c + 1, math.min(c + bs, n) do idx[#idx + 1] = i end
      pad = c + bs - math.min(c + bs, n)
      if self._round then for i = 1, pad do idx[#idx + 1] = i end end
      v = batchify.csr_rows(f.parts, idx, #idx, x:context())
      if #idx < bs then -- zero filler rows: no entries
        local ptr = v:indptr():tolist()
        for _ = #idx + 1, bs do ptr[#ptr + 1] = ptr[#ptr] end
        v = nd.sparse.csr_matrix({ v:data(), v:indices(), ptr },
          { shape = { bs, x:shape()[2] }, dtype = x:dtype() })
      end
    elseif c + bs <= n then
      v = rows(x, c, c + bs)
    elseif self._round then
      pad = c + bs - n
      v = nd.concat(rows(x, c, n), rows(x, 0, pad), { dim = 1 })
    else
      pad = c + bs - n
      local s = x:shape()
      s[1] = pad
      v = nd.concat(rows(x, c, n), nd.zeros(s, { dtype = x:dtype(), ctx = x:context() }),
        { dim = 1 })
    end
    if f.stype then v = v:tostype(f.stype) end
    if f.label then label[#label + 1] = v else data[#data + 1] = v end
  end
  if c + bs > n and self._round then self._overflow = pad end
  self._cursor = c + bs
  self._pad = pad
  return io_.DataBatch(data, label, pad, nil)
end
-- next() -> the next DataBatch (nil at the end); iter_next() and the getters read the
-- current one: getdata / getlabel give one NDArray, as MXNet's C++ iterators (MXDataIter)
function Loader:next()
  local b = self:_make()
  self._batch = b
  return b
end
function Loader:iter_next() return self:next() ~= nil end
local function current(self, who)
  local b = self._batch
  if b == nil then error(who .. ": no current batch (call iter_next or next first)", 3) end
  return b
end
function Loader:getdata() return current(self, "getdata").data[1] end
function Loader:getlabel() return current(self, "getlabel").label[1] end
function Loader:getpad() return current(self, "getpad").pad end

-- The rows of `arrays` (fields) in a permutation (shuffle) or part `part` of `parts`
-- (num_parts / part_index, 1-based part here): MXNet's partitions are contiguous.
function M.permute(fields, perm)
  for _, f in ipairs(fields) do f[2] = nd.take(f[2], perm, { axis = 1 }) end
end
function M.part(n, parts, part)
  local base, extra = math.floor(n / parts), n % parts
  local first = (part - 1) * base + math.min(part - 1, extra)
  return first, first + base + (part <= extra and 1 or 0)
end

return M
