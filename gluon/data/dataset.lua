-- mx.gluon.data datasets: Dataset, SimpleDataset, ArrayDataset and the lazy views
-- that transform / transform_first / filter / shard / take return.
--
-- A dataset has `ds:len()` and `ds:get(i)` (1-based, negatives from the end). get
-- returns one value per field: `local img, label = ds:get(1)`. A field is a tensor
-- (a view of the dataset's storage where possible), a number, or any Lua value.
--
-- Batched access (the DataLoader's fast path): a dataset may implement
-- `ds:_get_batch(indices, n)` returning one *batched* value per field for the
-- indices indices[1..n]. ArrayDataset gathers tensor rows straight into a new
-- batch tensor (one memcpy per row); a lazy transform whose function is batchable
-- (the vision transforms) runs it once on the gathered batch.
local nd = require("mx.nd")
local classlib = require("mx.core.class")
local batchify = require("mx.gluon.data.batchify")

local type, select, error, tostring = type, select, error, tostring
local is_tensor = nd.is_tensor

local M = {}

-- Classes (mx.core.class): a table of methods that is its instances' metatable;
-- calling the class constructs: Class(...) -> Class.new(...).
local function class(name, parent)
  local c = parent and classlib.extend(parent, name) or classlib.base(name)
  c._class_name = name
  local mt = getmetatable(c) or {}
  mt.__call = function(cls, ...) return cls.new(...) end
  mt.__tostring = function() return "<class " .. name .. ">" end
  return setmetatable(c, mt)
end
M._class = class
-- sig(cls, params[, named]): cls's MXNet calling convention (mx.core.class signature),
-- recorded for spec/calling_convention_spec.lua
local function sig(cls, params, named)
  return classlib.declare(cls, classlib.signature(cls._class_name, params, named))
end
M._sig = sig

local function norm_index(i, n, who, level)
  if type(i) ~= "number" or i % 1 ~= 0 or i == 0 then
    error(string.format("%s: index must be a non-zero integer (1-based), got %s", who,
      tostring(i)), level + 1)
  end
  local j = i < 0 and n + i + 1 or i
  if j < 1 or j > n then
    error(string.format("%s: index %d out of range for a dataset of %d samples", who, i, n),
      level + 1)
  end
  return j
end
M._norm_index = norm_index

---------------------------------------------------------------- Dataset
local Dataset = class("Dataset")
M.Dataset = Dataset

-- Abstract base: subclasses implement len() and get(i).
function Dataset.new()
  return setmetatable({}, Dataset)
end

-- Your own dataset (MXNet: subclass Dataset, define __len__ and __getitem__):
--   local Squares = gluon.data.Dataset:extend("Squares")
--   function Squares:__init(n) self.n = n end
--   function Squares:len() return self.n end
--   function Squares:get(i) return i * i end
--   local ds = Squares(10)          -- Squares.__init(ds, 10); ds:transform(...) etc.
function Dataset.extend(parent, name)
  if type(name) ~= "string" then error("Dataset:extend: expected a class name", 2) end
  local c = class(name, parent)
  function c.new(...)
    local self = setmetatable({}, c)
    if self.__init then self:__init(...) end
    return self
  end
  return c
end
function Dataset.len(self)
  error((self._class_name or "Dataset") .. ": len() not implemented", 2)
end
function Dataset.get(self, _)
  error((self._class_name or "Dataset") .. ": get(i) not implemented", 2)
end
function Dataset.__tostring(self)
  return string.format("<%s: %d samples>", self._class_name or "Dataset", self:len())
end

-- A new dataset whose samples are fn(fields...). lazy (default true): fn runs at each
-- get. lazy=false: fn runs now over every sample and the results are stored (one
-- batch call when fn is a batchable transform and the fields are tensors).
function Dataset.transform(self, fn, lazy)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn)
      and getmetatable(fn).__call) then
    error("transform: fn must be a function or a callable transform, got " .. type(fn), 2)
  end
  local ds = M._LazyTransformDataset.new(self, fn, false)
  if lazy == false then return ds:_materialize() end
  return ds
end

-- Like transform, but fn sees (and replaces) only the first field: the usual
-- `ds:transform_first(transforms.ToTensor())` for (image, label) datasets.
function Dataset.transform_first(self, fn, lazy)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn)
      and getmetatable(fn).__call) then
    error("transform_first: fn must be a function or a callable transform, got " .. type(fn), 2)
  end
  local ds = M._LazyTransformDataset.new(self, fn, true)
  if lazy == false then return ds:_materialize() end
  return ds
end

-- Samples for which fn(fields...) is true (evaluated now, once).
function Dataset.filter(self, fn)
  local keep = {}
  for i = 1, self:len() do
    if fn(self:get(i)) then keep[#keep + 1] = i end
  end
  return M._IndexedDataset.new(self, keep)
end

-- Part `index` (1-based) of `num_shards` contiguous, near-equal parts (MXNet's
-- shard: the first len % num_shards parts get one extra sample).
function Dataset.shard(self, num_shards, index)
  if type(num_shards) ~= "number" or num_shards < 1 or num_shards % 1 ~= 0 then
    error("shard: num_shards must be a positive integer", 2)
  end
  if type(index) ~= "number" or index < 1 or index > num_shards or index % 1 ~= 0 then
    error("shard: index must be in 1.." .. num_shards .. " (1-based), got " .. tostring(index), 2)
  end
  local n = self:len()
  local base, extra = math.floor(n / num_shards), n % num_shards
  local first = (index - 1) * base + math.min(index - 1, extra) + 1
  local count = base + (index <= extra and 1 or 0)
  local idx = {}
  for k = 1, count do idx[k] = first + k - 1 end
  return M._IndexedDataset.new(self, idx)
end

-- The first `count` samples (all of them when count is nil or larger).
function Dataset.take(self, count)
  local n = self:len()
  if count == nil or count > n then count = n end
  local idx = {}
  for k = 1, count do idx[k] = k end
  return M._IndexedDataset.new(self, idx)
end

-- All samples, stored: an ArrayDataset of stacked fields when every field is a
-- tensor or a number (batches then gather from it), else a list of samples.
function Dataset._materialize(self)
  local n = self:len()
  if n == 0 then return M.SimpleDataset.new({}) end
  local function pack(...) return { n = select("#", ...), ... } end
  local samples = {}
  for k = 1, n do samples[k] = pack(self:get(k)) end
  local stackable = true
  for f = 1, samples[1].n do
    local v = samples[1][f]
    if not (is_tensor(v) or type(v) == "number") then stackable = false end
  end
  if stackable then
    local fields = batchify.fields(samples, n)
    return M.ArrayDataset.new(unpack(fields, 1, #fields))
  end
  return M._SampleListDataset.new(samples)
end

---------------------------------------------------------------- SimpleDataset
-- A dataset over a Lua list: get(i) returns list[i] (a table sample is returned as
-- is: one field).
local SimpleDataset = class("SimpleDataset", Dataset)
M.SimpleDataset = SimpleDataset

local SIMPLE = sig(SimpleDataset, { { "data", list = true } })
function SimpleDataset.new(...)
  local list = SIMPLE(2, ...).data
  if type(list) ~= "table" then
    error("SimpleDataset: expected a Lua list, got " .. type(list), 2)
  end
  return setmetatable({ _data = list, _n = #list }, SimpleDataset)
end
function SimpleDataset.len(self) return self._n end
function SimpleDataset.get(self, i)
  return self._data[norm_index(i, self._n, "SimpleDataset:get", 2)]
end

---------------------------------------------------------------- ArrayDataset
-- ArrayDataset(a, b, ...): field k of sample i is row i of the k-th argument, where
-- each argument is a tensor (row i = x[i], a view; a 1-d tensor gives a number) or
-- a Lua list. All arguments must have the same length.
local ArrayDataset = class("ArrayDataset", Dataset)
M.ArrayDataset = ArrayDataset

local function arg_len(a, k, level)
  if is_tensor(a) then
    if a:ndim() == 0 then error("ArrayDataset: argument " .. k .. " is a 0-d tensor", level + 1) end
    return a:shape()[1]
  elseif type(a) == "table" then
    return #a
  end
  error("ArrayDataset: argument " .. k .. " must be a tensor or a Lua list, got " .. type(a),
    level + 1)
end

local DIRECT = { float32 = true, float64 = true, int32 = true, int64 = true, int8 = true,
  uint8 = true, bool = true }

local ARRAY = sig(ArrayDataset, { { "args", rest = true } })
function ArrayDataset.new(...)
  local fields = ARRAY(2, ...).args or { n = 0 }
  local nf = fields.n
  if nf == 0 then error("ArrayDataset: needs at least one tensor or list", 2) end
  local n
  for k = 1, nf do
    local len = arg_len(fields[k], k, 2)
    if n and len ~= n then
      error(string.format("ArrayDataset: all arguments must have the same length; argument 1 "
        .. "has %d, argument %d has %d", n, k, len), 2)
    end
    n = len
  end
  local self = setmetatable({ _fields = fields, _nf = nf, _n = n }, ArrayDataset)
  self._scalar = {}
  for k = 1, nf do
    local a = fields[k]
    -- 1-d CPU tensors: samples are numbers read straight from memory (dtypes whose
    -- C type is the value; float16/bfloat16 go through item())
    if is_tensor(a) and a:ndim() == 1 and a:context().device_type == "cpu"
        and DIRECT[a:dtype()] then
      self._scalar[k] = true
    end
    -- a csr field: its parts, read once; batches copy their rows' runs
    if is_tensor(a) and a:stype() == "csr" then
      self._csr = self._csr or {}
      self._csr[k] = batchify.csr_parts(a)
    elseif is_tensor(a) and a:stype() ~= "default" then
      error("ArrayDataset: argument " .. k .. " is " .. a:stype() .. " (csr and dense tensors "
        .. "make datasets)", 2)
    end
  end
  return self
end

function ArrayDataset.len(self) return self._n end

local function field_at(self, k, j)
  local a = self._fields[k]
  if self._scalar[k] then return tonumber(a:data_ptr()[j - 1]) end
  local v = a[j] -- tensor row view, or list element
  if is_tensor(v) and v:ndim() == 0 then return v:item() end -- 1-d: a number
  return v
end

function ArrayDataset.get(self, i)
  local j = norm_index(i, self._n, "ArrayDataset:get", 2)
  local nf = self._nf
  if nf == 1 then return field_at(self, 1, j) end
  if nf == 2 then return field_at(self, 1, j), field_at(self, 2, j) end
  local out = {}
  for k = 1, nf do out[k] = field_at(self, k, j) end
  return unpack(out, 1, nf)
end

-- The raw fields (tensors or lists) as given.
function ArrayDataset.arrays(self) return unpack(self._fields, 1, self._nf) end

function ArrayDataset._get_batch(self, idx, n)
  local nf = self._nf
  local out = {}
  for k = 1, nf do
    local a = self._fields[k]
    if self._csr and self._csr[k] then
      out[k] = batchify.csr_rows(self._csr[k], idx, n, a:context())
    elseif is_tensor(a) then
      out[k] = batchify.gather(a, idx, n)
    else
      local vals = {}
      for b = 1, n do vals[b] = a[idx[b]] end
      out[k] = batchify.stack(vals, n)
    end
  end
  return unpack(out, 1, nf)
end

---------------------------------------------------------------- lazy views
-- Samples of `base` at a list of indices (filter, shard, take).
local IndexedDataset = class("IndexedDataset", Dataset)
M._IndexedDataset = IndexedDataset

function IndexedDataset.new(base, idx)
  return setmetatable({ _base = base, _idx = idx, _n = #idx }, IndexedDataset)
end
function IndexedDataset.len(self) return self._n end
function IndexedDataset.get(self, i)
  return self._base:get(self._idx[norm_index(i, self._n, "Dataset:get", 2)])
end
function IndexedDataset._get_batch(self, idx, n)
  if not self._base._get_batch then return nil end
  local map = {}
  for b = 1, n do map[b] = self._idx[idx[b]] end
  return self._base:_get_batch(map, n)
end

local LazyTransformDataset = class("LazyTransformDataset", Dataset)
M._LazyTransformDataset = LazyTransformDataset

function LazyTransformDataset.new(base, fn, first_only)
  return setmetatable({ _base = base, _fn = fn, _first = first_only }, LazyTransformDataset)
end
function LazyTransformDataset.len(self) return self._base:len() end

local function apply(fn, first, ...)
  if first then
    local x = ...
    return fn(x), select(2, ...)
  end
  return fn(...)
end

function LazyTransformDataset.get(self, i)
  return apply(self._fn, self._first, self._base:get(i))
end

-- Batch path: only when fn may run on a whole batch (a batchable transform), and
-- the base can produce batches itself. Returns nothing otherwise (the loader then
-- goes sample by sample).
local function batchable(fn)
  return type(fn) == "table" and fn.batchable == true
end

function LazyTransformDataset._get_batch(self, idx, n)
  if not batchable(self._fn) or not self._base._get_batch then return nil end
  local fields = { self._base:_get_batch(idx, n) }
  if #fields == 0 then return nil end
  -- a batchable transform maps its first argument and passes the others through,
  -- so transform and transform_first agree here
  fields[1] = self._fn:batch(fields[1])
  return unpack(fields, 1, #fields)
end

-- Eager transform: run the transform over everything now and keep the results
-- (one batch call for a batchable transform over a batch-capable dataset).
function LazyTransformDataset._materialize(self)
  if batchable(self._fn) and self._base._get_batch then
    local n = self._base:len()
    local idx = {}
    for k = 1, n do idx[k] = k end
    local fields = { self:_get_batch(idx, n) }
    if #fields > 0 then return ArrayDataset.new(unpack(fields, 1, #fields)) end
  end
  return Dataset._materialize(self)
end

-- Stored samples (packed tables), unpacked by get.
local SampleListDataset = class("SampleListDataset", Dataset)
M._SampleListDataset = SampleListDataset
function SampleListDataset.new(samples)
  return setmetatable({ _s = samples, _n = #samples }, SampleListDataset)
end
function SampleListDataset.len(self) return self._n end
function SampleListDataset.get(self, i)
  local s = self._s[norm_index(i, self._n, "Dataset:get", 2)]
  return unpack(s, 1, s.n)
end

---------------------------------------------------------------- recipes
-- How a DataLoader worker state rebuilds a dataset (docs/design/data.md "Worker
-- threads"): `ds:_recipe()` returns {module=, ctor=, args={...}}; the worker calls
-- require(module)[ctor](unpack(args)). The loader serialises args: tensors travel as
-- retained C handles (storage shared), datasets and transforms as their own recipes,
-- Lua functions through string.dump (see dataloader.lua).
local MOD = "mx.gluon.data.dataset"
function ArrayDataset._recipe(self)
  return { module = MOD, ctor = "ArrayDataset", args = { unpack(self._fields, 1, self._nf) } }
end
function SimpleDataset._recipe(self)
  return { module = MOD, ctor = "SimpleDataset", args = { self._data } }
end
function IndexedDataset._recipe(self)
  return { module = MOD, ctor = "_IndexedDataset", args = { self._base, self._idx } }
end
function LazyTransformDataset._recipe(self)
  return { module = MOD, ctor = "_LazyTransformDataset", args = { self._base, self._fn, self._first } }
end
function SampleListDataset._recipe(self)
  return { module = MOD, ctor = "_SampleListDataset", args = { self._s } }
end

-- recipe(module, ctor, ...): require(module)[ctor](...) made here, remembered so a
-- DataLoader worker makes the same object in its own state. The way to hand a worker
-- a transform that is a closure over things that cannot be serialised:
--   ds:transform_first(gluon.data.recipe("my.transforms", "augment", 0.5))
local RecipeFn = {}
RecipeFn.__index = RecipeFn
RecipeFn.__call = function(self, ...) return self._fn(...) end
M._RecipeFn = RecipeFn

function M.recipe(module, ctor, ...)
  if type(module) ~= "string" or type(ctor) ~= "string" then
    error("recipe: expected (module name, constructor name, arguments...)", 2)
  end
  local ok, mod = pcall(require, module)
  if not ok then error("recipe: cannot require '" .. module .. "': " .. tostring(mod), 2) end
  local f = type(mod) == "table" and mod[ctor]
  if f == nil then error("recipe: module '" .. module .. "' has no '" .. ctor .. "'", 2) end
  local r = { module = module, ctor = ctor, args = { n = select("#", ...), ... } }
  local obj = f(...)
  if type(obj) == "table" then
    rawset(obj, "_recipe_value", r)
    return obj
  elseif type(obj) == "function" then
    return setmetatable({ _fn = obj, _recipe_value = r }, RecipeFn)
  end
  error("recipe: " .. module .. "." .. ctor .. " returned a " .. type(obj)
    .. " (expected a dataset, a transform or a function)", 2)
end

return M
