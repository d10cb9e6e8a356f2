-- mx.io — MXNet 1.x's data iterators (python/mxnet/io): the DataIter protocol, DataDesc and
-- DataBatch, NDArrayIter, ResizeIter, PrefetchingIter, and the iterators MXNet writes in
-- C++ (CSVIter, LibSVMIter, MNISTIter, ImageRecordIter), here in Lua over luamx's readers.
--
--   local it = mx.io.NDArrayIter(x, y, 32, true)         -- data, label, batch_size, shuffle
--   for batch in it:iter() do ... batch.data[1], batch.label[1], batch.pad ... end
--   it:reset()                                           -- the next pass
--
-- The protocol, as MXNet's: it:reset(), it:next() -> a DataBatch (nil at the end: Lua has
-- no StopIteration), it:iter_next(), it:getdata(), it:getlabel(), it:getpad(),
-- it:getindex(), and the fields batch_size, provide_data, provide_label (lists of
-- DataDesc). Your own iterator: `local It = mx.io.DataIter:extend("It")` and define
-- __init / reset / next (or iter_next + getdata/getlabel/getpad/getindex); It(...) calls
-- It.__init(self, ...). Constructors take MXNet's arguments positionally in its order or
-- by name (mx.core.class signature); the C++ iterators' arguments go by name, as in MXNet.
local class = require("mx.core.class")

local type, error, tostring, setmetatable, getmetatable, rawget, rawset =
  type, error, tostring, setmetatable, getmetatable, rawget, rawset

local M = {}

-- cls(name[, parent]): a class whose instances are made by calling it: cls(...) ->
-- cls.new(...) (new(...) runs __init when the class has one). Shared by the iterators.
local function iter_class(name, parent)
  local c = parent and class.extend(parent, name) or class.base(name)
  c.__tostring = c.__tostring or function(self)
    return "<" .. name .. ": batch_size " .. tostring(rawget(self, "batch_size")) .. ">"
  end
  c.new = function(...)
    local self = setmetatable({}, c)
    if self.__init then self:__init(...) end
    return self
  end
  return setmetatable(c, { __index = parent, __call = function(cls, ...) return cls.new(...) end })
end
M._class = iter_class

-- sig(cls, params[, named]): cls's calling convention, recorded for the signature spec
local function sig(cls, params, named)
  return class.declare(cls, class.signature(cls.__name, params, named))
end
M._sig = sig

---------------------------------------------------------------- DataDesc
-- DataDesc(name, shape, dtype="float32", layout="NCHW"): a named shape (MXNet's
-- namedtuple: desc.name / desc.shape, also desc[1] / desc[2]).
local DataDesc = iter_class("DataDesc")
M.DataDesc = DataDesc
local DESC = sig(DataDesc, { "name", "shape", "dtype", "layout" })
function DataDesc.new(...)
  local o = DESC(2, ...)
  if type(o.name) ~= "string" then
    error("DataDesc: name must be a string, got " .. type(o.name), 2)
  end
  if type(o.shape) ~= "table" then
    error("DataDesc: shape must be a list of dims, got " .. type(o.shape), 2)
  end
  local shape = {}
  for i = 1, #o.shape do shape[i] = o.shape[i] end
  return setmetatable({ o.name, shape, name = o.name, shape = shape,
    dtype = o.dtype or "float32", layout = o.layout or "NCHW" }, DataDesc)
end
function DataDesc.__tostring(d)
  return string.format("DataDesc[%s,(%s),%s,%s]", d.name, table.concat(d.shape, ", "),
    d.dtype, d.layout)
end
-- The 1-based batch axis of a layout ("NCHW" -> 1, "TNC" -> 2; nil: 1), MXNet's
-- get_batch_axis plus one.
function DataDesc.get_batch_axis(layout)
  if layout == nil then return 1 end
  local i = layout:find("N", 1, true)
  return i or 1
end
-- get_list(shapes, types): DataDescs from {name, shape} pairs (and name -> dtype).
function DataDesc.get_list(shapes, types)
  local r = {}
  for i, x in ipairs(shapes) do
    r[i] = DataDesc(x[1] or x.name, x[2] or x.shape, types and types[x[1] or x.name] or nil)
  end
  return r
end
-- a DataDesc, or a {name, shape} pair / {name=, shape=} table, as a DataDesc
function M._desc(x, level)
  if getmetatable(x) == DataDesc then return x end
  if type(x) == "table" and (x.name or type(x[1]) == "string") then
    return DataDesc(x.name or x[1], x.shape or x[2], x.dtype, x.layout)
  end
  error("expected a DataDesc or a {name, shape} pair, got " .. type(x), (level or 1) + 1)
end

---------------------------------------------------------------- DataBatch
-- DataBatch(data, label, pad, index, bucket_key, provide_data, provide_label): one batch:
-- lists of NDArrays (data, label), pad = how many trailing samples are filler.
local DataBatch = iter_class("DataBatch")
M.DataBatch = DataBatch
local BATCH = sig(DataBatch, { { "data", list = true }, { "label", list = true }, "pad", "index",
  "bucket_key", { "provide_data", list = true }, { "provide_label", list = true } })
function DataBatch.new(...)
  local o = BATCH(2, ...)
  if o.data ~= nil and type(o.data) ~= "table" then
    error("DataBatch: data must be a list of NDArrays, got " .. type(o.data), 2)
  end
  return setmetatable(o, DataBatch)
end
function DataBatch.__tostring(b)
  local function shapes(l)
    local t = {}
    for i, x in ipairs(l or {}) do t[i] = "(" .. table.concat(x:shape(), ", ") .. ")" end
    return "[" .. table.concat(t, ", ") .. "]"
  end
  return "DataBatch: data shapes: " .. shapes(b.data) .. " label shapes: "
    .. (b.label and shapes(b.label) or "None")
end

---------------------------------------------------------------- DataIter
-- DataIter(batch_size=0): the base class. next() builds a DataBatch from iter_next and
-- the getters, as MXNet's.
local DataIter = iter_class("DataIter")
M.DataIter = DataIter
local ITER = sig(DataIter, { "batch_size" })
function DataIter:__init(...)
  self.batch_size = ITER(3, ...).batch_size or 0
end
-- DataIter:extend(name): a subclass for your own iterator.
function DataIter.extend(parent, name)
  if type(name) ~= "string" then error("DataIter:extend: expected a class name", 2) end
  return iter_class(name, parent)
end
function DataIter.reset() end
function DataIter.iter_next(self)
  error(tostring(getmetatable(self).__name) .. ": iter_next (or next) is not implemented", 2)
end
function DataIter:next()
  if self:iter_next() then
    return DataBatch(self:getdata(), self:getlabel(), self:getpad(), self:getindex())
  end
  return nil
end
function DataIter.getdata(self)
  error(tostring(getmetatable(self).__name) .. ": getdata is not implemented", 2)
end
function DataIter.getlabel() return nil end
function DataIter.getindex() return nil end
function DataIter.getpad() return 0 end
-- for batch in it:iter() do ... end: the batches until next() gives nil (no reset).
function DataIter:iter()
  return function() return self:next() end
end

-- provide(it, "provide_data"): the list of DataDesc (a field, or a method that gives it)
function M._provide(it, which)
  local v = it[which]
  if type(v) == "function" then v = v(it) end
  local r = {}
  for i, d in ipairs(v or {}) do r[i] = M._desc(d, 2) end
  return r
end

---------------------------------------------------------------- ResizeIter
-- ResizeIter(data_iter, size, reset_internal=true): data_iter resized to `size` batches a
-- pass (it restarts the inner iterator when that runs out; reset resets it too unless
-- reset_internal is false).
local ResizeIter = iter_class("ResizeIter", DataIter)
M.ResizeIter = ResizeIter
local RESIZE = sig(ResizeIter, { "data_iter", "size", "reset_internal" })
function ResizeIter:__init(...)
  local o = RESIZE(3, ...)
  if type(o.data_iter) ~= "table" or type(o.data_iter.next) ~= "function" then
    error("ResizeIter: data_iter must be a data iterator", 3)
  end
  if type(o.size) ~= "number" or o.size < 0 or o.size % 1 ~= 0 then
    error("ResizeIter: size must be a non-negative integer, got " .. tostring(o.size), 3)
  end
  self.data_iter, self.size = o.data_iter, o.size
  self.reset_internal = o.reset_internal ~= false
  self.cur, self.current_batch = 0, nil
  self.provide_data = M._provide(o.data_iter, "provide_data")
  self.provide_label = M._provide(o.data_iter, "provide_label")
  self.batch_size = o.data_iter.batch_size
  self.default_bucket_key = o.data_iter.default_bucket_key
end
function ResizeIter:reset()
  self.cur = 0
  if self.reset_internal then self.data_iter:reset() end
end
function ResizeIter:iter_next()
  if self.cur == self.size then return false end
  local b = self.data_iter:next()
  if b == nil then
    self.data_iter:reset()
    b = self.data_iter:next()
    if b == nil then error("ResizeIter: the inner iterator gives no batch after a reset", 2) end
  end
  self.current_batch = b
  self.cur = self.cur + 1
  return true
end
function ResizeIter:next()
  if not self:iter_next() then return nil end
  return self.current_batch
end
function ResizeIter:getdata() return self.current_batch.data end
function ResizeIter:getlabel() return self.current_batch.label end
function ResizeIter:getindex() return self.current_batch.index end
function ResizeIter:getpad() return self.current_batch.pad end

---------------------------------------------------------------- PrefetchingIter
-- PrefetchingIter(iters, rename_data, rename_label): the batches of one iterator (or of
-- several, merged: batch k is every iterator's batch k, data and labels concatenated in
-- order) fetched one batch ahead: next() returns the batch fetched before and asks for
-- the following one at once, so its ops (slicing, decoding, copies) run on the engine
-- while the caller computes. rename_data / rename_label: per iterator, a table old name ->
-- new name for provide_data / provide_label. (MXNet runs a Python thread per iterator;
-- here the engine and the iterators' own worker threads give the overlap.)
local PrefetchingIter = iter_class("PrefetchingIter", DataIter)
M.PrefetchingIter = PrefetchingIter
local PREFETCH = sig(PrefetchingIter, { { "iters", list = true }, { "rename_data", list = true },
  { "rename_label", list = true } })
local function renamed(descs, map)
  local r = {}
  for i, d in ipairs(descs) do
    r[i] = M.DataDesc(map and map[d.name] or d.name, d.shape, d.dtype, d.layout)
  end
  return r
end
function PrefetchingIter:__init(...)
  local o = PREFETCH(3, ...)
  local iters = o.iters
  if type(iters) == "table" and type(iters.next) == "function" then iters = { iters } end
  if type(iters) ~= "table" or #iters == 0 then
    error("PrefetchingIter: iters must be an iterator or a non-empty list of them", 3)
  end
  self.iters, self.n_iter = iters, #iters
  local pd, pl = {}, {}
  for i, it in ipairs(iters) do
    for _, d in ipairs(renamed(M._provide(it, "provide_data"), o.rename_data and o.rename_data[i])) do
      pd[#pd + 1] = d
    end
    for _, d in ipairs(renamed(M._provide(it, "provide_label"),
        o.rename_label and o.rename_label[i])) do
      pl[#pl + 1] = d
    end
  end
  self.provide_data, self.provide_label = pd, pl
  self.batch_size = pd[1] and pd[1].shape[1] or iters[1].batch_size
  self._next = nil
  self:_fetch()
end
function PrefetchingIter:_fetch()
  local bs = {}
  for i, it in ipairs(self.iters) do
    local b = it:next()
    if b == nil then
      self._next = false
      return
    end
    bs[i] = b
  end
  local data, label = {}, {}
  for _, b in ipairs(bs) do
    for _, x in ipairs(b.data or {}) do data[#data + 1] = x end
    for _, x in ipairs(b.label or {}) do label[#label + 1] = x end
  end
  for i = 2, #bs do
    if bs[i].pad ~= bs[1].pad then
      error("PrefetchingIter: the iterators' batches have different pads (" .. tostring(bs[1].pad)
        .. " and " .. tostring(bs[i].pad) .. ")", 3)
    end
  end
  self._next = DataBatch(data, label, bs[1].pad, bs[1].index, bs[1].bucket_key,
    self.provide_data, self.provide_label)
end
function PrefetchingIter:reset()
  for _, it in ipairs(self.iters) do it:reset() end
  self:_fetch()
end
function PrefetchingIter:iter_next()
  local b = self._next
  if not b then return false end
  self.current_batch = b
  self:_fetch()
  return true
end
function PrefetchingIter:next()
  if not self:iter_next() then return nil end
  return self.current_batch
end
function PrefetchingIter:getdata() return self.current_batch.data end
function PrefetchingIter:getlabel() return self.current_batch.label end
function PrefetchingIter:getindex() return self.current_batch.index end
function PrefetchingIter:getpad() return self.current_batch.pad end

-- the iterators of their own files, loaded on first use
local LAZY = { NDArrayIter = "mx.io.ndarray_iter", CSVIter = "mx.io.text_iter",
  LibSVMIter = "mx.io.text_iter", MNISTIter = "mx.io.mnist_iter",
  ImageRecordIter = "mx.io.image_record_iter", ImageRecordUInt8Iter = "mx.io.image_record_iter" }
setmetatable(M, { __index = function(t, k)
  local mod = LAZY[k]
  if mod == nil then return nil end
  local v = require(mod)[k]
  rawset(t, k, v)
  return v
end })

return M
