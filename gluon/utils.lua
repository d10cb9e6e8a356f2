-- mx.gluon.utils — split_data, split_and_load, clip_global_norm (MXNet's semantics;
-- options tables for keyword arguments, batch_axis 1-based).
--
--   local parts = gluon.utils.split_data(x, 4)                 -- 4 views along axis 1
--   local xs = gluon.utils.split_and_load(x, { mx.cpu() })     -- one tensor per device
--   local norm = gluon.utils.clip_global_norm(grads, 1.0)      -- scales grads in place
local nd = require("mx.nd")
local context = require("mx.context")
local class = require("mx.core.class")

local type, error, tostring, ipairs = type, error, tostring, ipairs
local floor = math.floor

local M = {}

local function shape_str(s)
  return "(" .. table.concat(s, ", ") .. ")"
end

-- o: the parsed arguments (batch_axis, even_split)
local function split(who, data, num_slice, o, level)
  level = level + 1
  if not nd.is_tensor(data) then
    error(who .. ": data must be a tensor, got " .. type(data), level)
  end
  if type(num_slice) ~= "number" or num_slice ~= floor(num_slice) or num_slice < 1 then
    error(who .. ": num_slice must be a positive integer, got " .. tostring(num_slice), level)
  end
  local shape = data:shape()
  local nd_ = #shape
  local axis = o.batch_axis or 1
  if type(axis) ~= "number" or axis ~= floor(axis) or axis == 0 or axis > nd_ or axis < -nd_ then
    error(string.format("%s: batch_axis %s out of range for data of shape %s (1-based)", who,
      tostring(axis), shape_str(shape)), level)
  end
  if axis < 0 then axis = nd_ + axis + 1 end
  local even = o.even_split
  if even == nil then even = true end
  if type(even) ~= "boolean" then
    error(who .. ": even_split must be a boolean, got " .. type(even), level)
  end
  local size = shape[axis]
  if even and size % num_slice ~= 0 then
    error(string.format("%s: data with shape %s cannot be evenly split into %d slices along "
      .. "axis %d; use a batch size that is a multiple of %d or set even_split=false", who,
      shape_str(shape), num_slice, axis, num_slice), level)
  end
  if size < num_slice then
    error(string.format("%s: too many slices (%d) for data with shape %s along axis %d", who,
      num_slice, shape_str(shape), axis), level)
  end
  if num_slice == 1 then return { data }, axis end
  -- MXNet's sections: the first size % num_slice slices get one extra row
  local each, extras = floor(size / num_slice), size % num_slice
  local r, first = {}, 1
  for i = 1, num_slice do
    local last = first + each - 1 + (i <= extras and 1 or 0)
    if axis == 1 then
      r[i] = data[{ { first, last } }] -- a view, as MXNet's data[a:b]
    else
      r[i] = nd.slice_axis(data, { axis = axis, begin = first, ["end"] = last })
    end
    first = last + 1
  end
  return r, axis
end

-- Every function here takes MXNet's arguments positionally in its order or by name (mx.core.class
-- signature).
local SPLIT = class.signature("split_data", { "data", "num_slice", "batch_axis", "even_split" })
local SPLIT_LOAD = class.signature("split_and_load", { "data", { "ctx_list", list = true },
  "batch_axis", "even_split" })
local CLIP = class.signature("clip_global_norm", { { "arrays", list = true }, "max_norm",
  "check_isfinite" })

-- split_data(data, num_slice, batch_axis=1, even_split=true): num_slice tensors
-- along batch_axis (views when it is 1); with even_split=false the first
-- size % num_slice slices are one longer. Errors when the split is uneven and
-- even_split is true, or when there are more slices than rows.
function M.split_data(...)
  local o = SPLIT(2, ...)
  local r = split("split_data", o.data, o.num_slice, o, 2)
  return r
end

-- split_and_load(data, ctx_list, batch_axis=1, even_split=true): data (a tensor or a
-- Lua array) split into #ctx_list slices, slice i on ctx_list[i] (e.g. {mx.cpu(0),
-- mx.cpu(1)}: CPU ids are distinct devices). ctx_list is a context or a list of them.
function M.split_and_load(...)
  local opts = SPLIT_LOAD(2, ...)
  local data, ctx_list = opts.data, opts.ctx_list
  if context.is_context(ctx_list) or type(ctx_list) == "string" then ctx_list = { ctx_list } end
  if type(ctx_list) ~= "table" or #ctx_list == 0 then
    error("split_and_load: ctx_list must be a context or a non-empty list of contexts, got "
      .. type(ctx_list), 2)
  end
  for i, c in ipairs(ctx_list) do context.parse(c, 2, "split_and_load: ctx_list[" .. i .. "]") end
  if not nd.is_tensor(data) then
    if type(data) ~= "table" then
      error("split_and_load: data must be a tensor or a Lua array, got " .. type(data), 2)
    end
    local ok, t = pcall(nd.array, data, { ctx = ctx_list[1] })
    if not ok then error("split_and_load: " .. tostring(t), 2) end
    data = t
  end
  if #ctx_list == 1 then return { data:to(ctx_list[1]) } end
  local slices = split("split_and_load", data, #ctx_list, opts, 2)
  for i, s in ipairs(slices) do slices[i] = s:to(ctx_list[i]) end
  return slices
end

M._warned = { nonfinite = false }

-- clip_global_norm(arrays, max_norm, check_isfinite=true): rescales the arrays in
-- place so that their joint L2 norm is at most max_norm (each multiplied by
-- min(1, max_norm / (norm + 1e-8))) and returns the norm before clipping: a number,
-- or a 1-element float32 tensor with check_isfinite=false (MXNet returns an NDArray
-- then). A NaN/Inf norm writes one warning per process to stderr (M._warned; the
-- arrays then become NaN or 0, "undefined" in MXNet's words).
function M.clip_global_norm(...)
  local o = CLIP(2, ...)
  local arrays, max_norm = o.arrays, o.max_norm
  if type(arrays) ~= "table" or nd.is_tensor(arrays) or #arrays == 0 then
    error("clip_global_norm: arrays must be a non-empty list of tensors", 2)
  end
  if type(max_norm) ~= "number" then
    error("clip_global_norm: max_norm must be a number, got " .. type(max_norm), 2)
  end
  local total = 0
  for i, a in ipairs(arrays) do
    if not nd.is_tensor(a) then
      error("clip_global_norm: arrays[" .. i .. "] is not a tensor (got " .. type(a) .. ")", 2)
    end
    local dt = a:dtype()
    if dt ~= "float32" and dt ~= "float64" and dt ~= "float16" and dt ~= "bfloat16" then
      error("clip_global_norm: arrays[" .. i .. "] must be floating-point, got dtype " .. dt, 2)
    end
    if a:size() > 0 then
      local f = a:to(nil, "float64")
      total = total + nd.sum(nd.square(f)):item()
    end
  end
  total = math.sqrt(total)
  local check = o.check_isfinite ~= false
  if check and (total ~= total or total == math.huge) and not M._warned.nonfinite then
    M._warned.nonfinite = true
    io.stderr:write("mx.gluon.utils.clip_global_norm: nan or inf is detected; clipping "
      .. "results will be undefined\n")
  end
  local scale = max_norm / (total + 1e-8)
  if total ~= total then scale = total elseif scale > 1 then scale = 1 end
  for _, a in ipairs(arrays) do
    if scale ~= 1 then nd.mul_scalar(a, { scalar = scale, out = a }) end
  end
  if check then return total end
  return nd.array({ total })
end

-- parallel_apply(fn, inputs) -> { fn(inputs[1]), ... }: the per-device forwards of
-- data parallelism run together (as coroutines), so that SyncBatchNorm layers with
-- num_devices = #inputs meet at each call and normalise with the whole batch's statistics
-- (gluon/nn/sync_batch_norm.lua). Each call's first result is kept.
local PARALLEL = class.signature("parallel_apply", { "fn", { "inputs", list = true } })
function M.parallel_apply(...)
  local o = PARALLEL(2, ...)
  local r = require("mx.gluon.nn.sync_batch_norm")._parallel_apply(o.fn, o.inputs, 2)
  return r
end

class.declare(M.parallel_apply, PARALLEL)
class.declare(M.split_data, SPLIT)
class.declare(M.split_and_load, SPLIT_LOAD)
class.declare(M.clip_global_norm, CLIP)

return M
