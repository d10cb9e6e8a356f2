-- mx.nd's functions that MXNet 1.9 defines in Python (python/mxnet/ndarray/ndarray.py,
-- utils.py) with MXNet's calling convention (mx._class signature): their parameters
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
--
-- The luamx forms keep their fast paths (shape then one options table: zeros({2, 3},
-- {dtype=}), arange(0, 10, 2, {dtype=})); only calls with MXNet's extra positional
-- arguments go through the signature. nd.lua calls this module once, after it has built
-- the op functions: install(nd, NDArray).
local class = require("mx._class")

local type, select, getmetatable, error = type, select, getmetatable, error

local function is_opts(t) return type(t) == "table" and getmetatable(t) == nil end

return function(nd, NDArray)
  local sig, declare = class.signature, class.declare

  -- (shape, ctx, dtype): zeros, ones, empty
  for _, name in ipairs { "zeros", "ones", "empty" } do
    local orig = nd[name]
    local S = sig(name, { "shape", "ctx", "dtype", { "stype", unsupported = "dense only",
      default = "default" } }, { "out" })
    nd[name] = function(a, b, ...)
      if select("#", ...) == 0 and (b == nil or is_opts(b)) then return orig(a, b) end
      local o = S(2, a, b, ...)
      return orig(o.shape, { ctx = o.ctx, dtype = o.dtype, out = o.out })
    end
    declare(nd[name], S)
  end

  -- full(shape, val, ctx, dtype, out)
  do
    local orig = nd.full
    local S = sig("full", { "shape", "val", "ctx", "dtype", "out" })
    nd.full = function(a, b, c, ...)
      if select("#", ...) == 0 and ((type(b) == "number" and (c == nil or is_opts(c)))
          or (c == nil and (b == nil or is_opts(b)))) then
        return orig(a, b, c)
      end
      local o = S(2, a, b, c, ...)
      local opts = { ctx = o.ctx, dtype = o.dtype, out = o.out }
      if o.val == nil then return orig(o.shape, opts) end
      return orig(o.shape, o.val, opts)
    end
    declare(nd.full, S)
  end

  -- array(source_array, ctx, dtype)
  do
    local orig = nd.array
    local S = sig("array", { { "source_array", list = true }, "ctx", "dtype" }, { "shape" })
    nd.array = function(a, b, ...)
      if select("#", ...) == 0 and (b == nil or is_opts(b)) then return orig(a, b) end
      local o = S(2, a, b, ...)
      return orig(o.source_array, { ctx = o.ctx, dtype = o.dtype, shape = o.shape })
    end
    declare(nd.array, S)
  end

  -- the numeric creation ops: leading numbers as before, then MXNet's ctx and dtype
  local function numeric(name, params)
    local orig = nd[name]
    local S = sig(name, params)
    nd[name] = function(...)
      local n = select("#", ...)
      local nums = is_opts((select(n, ...))) and n - 1 or n
      local fast = nums <= 3 -- the op table's positional params (start, stop, step...)
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
    { "infer_range", unsupported = "stop is required", default = false }, "ctx", "dtype" })
  numeric("linspace", { "start", "stop", "num", "endpoint", "ctx", "dtype" })
  numeric("eye", { "N", "M", "k", "ctx", "dtype" })

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
    local function split_v2(x, ios, c, ...)
      if select("#", ...) == 0 and (c == nil or is_opts(c)) and not is_opts(ios) then
        return orig(x, ios, c)
      end
      if is_opts(ios) and ios[1] == nil and next(ios) ~= nil and c == nil
          and ios.indices_or_sections == nil then
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

  -- MXNet's Python names of the binary ops
  nd.subtract, nd.multiply, nd.divide, nd.true_divide = nd.sub, nd.mul, nd.div, nd.div
  nd.modulo, nd.power = nd.mod, nd.pow
end
