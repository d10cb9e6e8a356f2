-- mx.nd's functions that MXNet 1.9 defines in Python (python/mxnet/ndarray/ndarray.py,
-- utils.py) with MXNet's calling convention (mx.core.class signature): their parameters
-- positionally in MXNet's order, or by name in the trailing options table.
--
--   nd.zeros(shape, ctx, dtype)         nd.ones / nd.empty alike; nd.zeros{2, 3, dtype=}
--   nd.full(shape, val, ctx, dtype, out)
--   nd.array(source_array, ctx, dtype)
--   nd.arange(start, stop, step, repeat, infer_range, ctx, dtype)
--   nd.linspace(start, stop, num, endpoint, ctx, dtype)
--   nd.eye(N, M, k, ctx, dtype)
--   nd.moveaxis(tensor, source, destination)          (1-based axes)
--   nd.split_v2(ary, indices_or_sections, axis, squeeze_axis)
--   nd.concatenate(arrays, axis=1, always_copy=true)   (1-based axis)
--   nd.subtract / multiply / divide / true_divide / modulo / power (lhs, rhs)
--   every op also under its MXNet names, as mx.sym has them (nd.FullyConnected,
--   nd.SoftmaxOutput, nd.broadcast_add...; not the "_"-prefixed internal ones)
--
-- The luamx forms keep their fast paths (shape then one options table: zeros({2, 3},
-- {dtype=}), arange(0, 10, 2, {dtype=})); only calls with MXNet's extra positional
-- arguments go through the signature. nd.lua calls this module once, after it has built
-- the op functions: install(nd, NDArray).
local class = require("mx.core.class")
local lib = require("mx.core.lib")

local type, select, getmetatable, error = type, select, getmetatable, error

local function is_opts(t) return type(t) == "table" and getmetatable(t) == nil end
-- opts nil, or a plain table whose keys are all in set (the original function treats them
-- as the signature would): the call may take the original's fast path
local function only(opts, set)
  if opts == nil then return true end
  if not is_opts(opts) then return false end
  for k in pairs(opts) do if not set[k] then return false end end
  return true
end
local CREATION = { dtype = true, ctx = true, out = true }
-- a shape (a number, or a list whose hash part holds only options in set: zeros{2, 3,
-- dtype=}) the original function reads as the signature would
local function plain_shape(a, set)
  if type(a) == "number" then return true end
  if not is_opts(a) or a[1] == nil then return false end
  for k in pairs(a) do
    if type(k) ~= "number" and not set[k] then return false end
  end
  return true
end

return function(nd, NDArray)
  local sig, declare = class.signature, class.declare

  -- (shape, ctx, dtype): zeros, ones, empty
  for _, name in ipairs { "zeros", "ones", "empty" } do
    local orig = nd[name]
    local params = { "shape", "ctx", "dtype" }
    if name ~= "ones" then -- (MXNet's ones has no stype)
      params[4] = { "stype", unsupported = "dense only", default = "default" }
    end
    local S = sig(name, params, { "out" })
    nd[name] = function(a, b, ...)
      if select("#", ...) == 0 and only(b, CREATION) and plain_shape(a, CREATION) then
        return orig(a, b)
      end
      local o = S(2, a, b, ...)
      return orig(o.shape, { ctx = o.ctx, dtype = o.dtype, out = o.out })
    end
    declare(nd[name], S)
  end

  -- full(shape, val, ctx, dtype, out)
  do
    local orig = nd.full
    -- (the op's own name for val, value, by name too)
    local S = sig("full", { "shape", "val", "ctx", "dtype", "out" }, { "value" })
    local FAST = { dtype = true, ctx = true, out = true, value = true }
    nd.full = function(a, b, c, ...)
      if select("#", ...) == 0 and plain_shape(a, FAST) and ((type(b) == "number"
          and only(c, CREATION)) or (c == nil and only(b, FAST))) then
        return orig(a, b, c)
      end
      local o = S(2, a, b, c, ...)
      if o.val ~= nil and o.value ~= nil then
        error("full: val given twice (also as value)", 2)
      end
      return orig(o.shape, o.val or o.value or 0, { ctx = o.ctx, dtype = o.dtype, out = o.out })
    end
    declare(nd.full, S)
  end

  -- array(source_array, ctx, dtype)
  do
    local orig = nd.array
    local S = sig("array", { { "source_array", list = true }, "ctx", "dtype" }, { "shape" })
    local FAST = { dtype = true, ctx = true, shape = true }
    nd.array = function(a, b, ...)
      if select("#", ...) == 0 and only(b, FAST) and not (is_opts(a) and a[1] == nil
          and next(a) ~= nil) then
        return orig(a, b)
      end
      local o = S(2, a, b, ...)
      return orig(o.source_array, { ctx = o.ctx, dtype = o.dtype, shape = o.shape })
    end
    declare(nd.array, S)
  end

  -- the numeric creation ops: leading numbers as before, then MXNet's ctx and dtype
  local function numeric(name, params, fast_names)
    local orig = nd[name]
    local S = sig(name, params)
    local FAST = { dtype = true, ctx = true }
    for _, k in ipairs(fast_names) do FAST[k] = true end
    nd[name] = function(...)
      local n = select("#", ...)
      local last = select(n, ...)
      local nums = is_opts(last) and n - 1 or n
      -- the op table's positional params (start, stop, step...): numbers, at most 3
      local fast = nums <= 3 and (nums == n or only(last, FAST))
      for i = 1, nums do
        if type((select(i, ...))) ~= "number" then fast = false break end
      end
      if fast then return orig(...) end
      local o = S(2, ...)
      o.infer_range = nil
      return orig(o)
    end
    declare(nd[name], S)
  end
  numeric("arange", { "start", "stop", "step", "repeat",
    { "infer_range", unsupported = "stop is required", default = false }, "ctx", "dtype" },
    { "repeat" })
  numeric("linspace", { "start", "stop", "num", "endpoint", "ctx", "dtype" }, { "endpoint" })
  numeric("eye", { "N", "M", "k", "ctx", "dtype" }, {})

  -- moveaxis(tensor, source, destination)
  do
    local orig = nd.moveaxis
    local S = sig("moveaxis", { "tensor", "source", "destination" }, { "out" })
    local function moveaxis(...)
      local o = S(2, ...)
      return orig(o.tensor, { source = o.source, destination = o.destination, out = o.out })
    end
    nd.moveaxis, NDArray.moveaxis = moveaxis, moveaxis
    declare(moveaxis, S)
  end

  -- split_v2(ary, indices_or_sections, axis, squeeze_axis): nd.lua's split_v2 with the
  -- axis and squeeze_axis also positional
  do
    local orig = nd.split_v2
    local S = sig("split_v2", { "ary", { "indices_or_sections", list = true }, "axis",
      "squeeze_axis" }, { "out" })
    local FAST = { axis = true, squeeze_axis = true, out = true }
    local OWN = { indices = true, sections = true, axis = true, squeeze_axis = true, out = true }
    local function split_v2(x, ios, c, ...)
      if select("#", ...) == 0 and only(c, FAST) and not is_opts(ios) and not is_opts(x) then
        return orig(x, ios, c)
      end
      if c == nil and is_opts(ios) and ios[1] == nil and next(ios) ~= nil and only(ios, OWN) then
        return orig(x, ios) -- the op's own options (indices=, sections=)
      end
      local o = S(2, x, ios, c, ...)
      local v = o.indices_or_sections
      if type(v) == "table" and (getmetatable(v) ~= nil or (v[1] == nil and next(v) ~= nil)) then
        error("split_v2: indices_or_sections must be an integer or a list of integers, got a "
          .. "table of options (the op's own options go alone: split_v2(x, {indices=...}))", 2)
      end
      return orig(o.ary, o.indices_or_sections, { axis = o.axis, squeeze_axis = o.squeeze_axis,
        out = o.out })
    end
    nd.split_v2, NDArray.split_v2 = split_v2, split_v2
    declare(split_v2, S)
  end

  -- concatenate(arrays, axis=1, always_copy=true): concat of a list along axis
  do
    local S = sig("concatenate", { { "arrays", list = true }, "axis", "always_copy" })
    nd.concatenate = function(...)
      local o = S(2, ...)
      if type(o.arrays) ~= "table" or #o.arrays == 0 then
        error("concatenate: arrays must be a non-empty list of tensors", 2)
      end
      for i, a in ipairs(o.arrays) do
        if not nd.is_tensor(a) then
          error("concatenate: arrays[" .. i .. "] must be a tensor, got " .. type(a), 2)
        end
      end
      if #o.arrays == 1 and o.always_copy == false then return o.arrays[1] end
      return nd.concat(o.arrays, { dim = o.axis or 1 })
    end
    declare(nd.concatenate, S)
  end

  -- the MXNet names of the ops (where no luamx function has that name), taking MXNet's
  -- positional params (mx.core.opargs)
  -- (nd._alias_of: such a function -> the luamx op its errors name)
  local opargs = require("mx.core.opargs")
  local function is_input(v) return nd.is_tensor(v) end
  local alias_of = setmetatable({}, { __mode = "k" })
  nd._alias_of = alias_of
  for _, op in ipairs(lib.ops) do
    local f = nd[op.name]
    if f ~= nil then
      for _, name in ipairs(op.mxnet or {}) do
        if name:sub(1, 1) ~= "_" and nd[name] == nil then
          nd[name] = opargs.wrap(op, name, f, is_input)
          alias_of[nd[name]] = op.name
        end
      end
    end
  end

  -- MXNet's Python names of the binary ops
  nd.subtract, nd.multiply, nd.divide, nd.true_divide = nd.sub, nd.mul, nd.div, nd.div
  nd.modulo, nd.power = nd.mod, nd.pow
end
