-- mx.gluon.data.vision.transforms — image transforms (MXNet's gluon.data.vision.
-- transforms): ToTensor, Normalize, Cast, Compose.
--
-- A transform is a callable object: `t(x)`. Each one here accepts a single image
-- and, for speed, a whole batch (an extra leading axis):
--   ToTensor   (H,W,C) uint8 -> (C,H,W) float32 / 255;  (N,H,W,C) -> (N,C,H,W)
--   Normalize  (C,H,W) or (N,C,H,W) float: (x - mean) / std per channel
--   Cast       any shape: a copy in another dtype
-- so `transforms.ToTensor()(x_all)` converts a whole (60000,28,28,1) dataset tensor
-- in one call, and `ds:transform_first(ToTensor())` runs once per *batch* inside a
-- DataLoader (the transforms are `batchable`: per-sample and per-batch application
-- give the same values). `t:batch(x)` applies t to x with axis 1 as the batch axis.
local nd = require("mx.nd")

local is_tensor = nd.is_tensor
local type, error, tostring = type, error, tostring

local M = {}

-- dtype conversion through the cast op (a vectorised kernel, queued on the engine)
-- when the op table has it, else through a copy
local function cast(x, dtype)
  if x:dtype() == dtype then return x end
  if nd.cast then return nd.cast(x, { dtype = dtype }) end
  return x:to(nil, dtype)
end

local Transform = {}
Transform.__index = Transform
Transform.__call = function(self, x, ...)
  if not is_tensor(x) then
    error(self._name .. ": expected a tensor, got " .. type(x), 2)
  end
  local r = self:_forward(x, nil, 2)
  return r, ...
end
Transform.__tostring = function(self) return self._name .. "()" end
M.Transform = Transform

-- Apply to a batch: axis 1 indexes samples.
function Transform.batch(self, x)
  if not is_tensor(x) then error(self._name .. ": expected a tensor, got " .. type(x), 2) end
  local r = self:_forward(x, true, 2)
  return r
end

local function make(name, forward, fields)
  local t = setmetatable(fields or {}, Transform)
  t._name, t._forward, t.batchable = name, forward, true
  return t
end

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

-- ToTensor(): HWC uint8 image(s) in [0, 255] -> CHW float32 in [0, 1].
function M.ToTensor()
  return make("ToTensor", function(_, x, batched, level)
    local s = x:shape()
    local nd_ = #s
    if (batched and nd_ ~= 4) or (not batched and nd_ ~= 3 and nd_ ~= 4) then
      error("ToTensor: expected an image (H, W, C) or a batch (N, H, W, C), got shape "
        .. shape_str(s), level + 1)
    end
    local c = s[nd_]
    local dt = x:dtype()
    if (dt == "uint8" or dt == "float32") and x:context().device_type == "cpu" then
      -- the to_tensor op: one vectorised pass (8 us for a 64-image batch of 28x28,
      -- against 23 us for the JIT-compiled table-lookup loop it replaced)
      local y = nd.to_tensor(x)
      return y
    end
    local y
    if c == 1 then -- a channel axis of 1 moves without copying
      if nd_ == 3 then y = x:reshape { 1, s[1], s[2] } else y = x:reshape { s[1], 1, s[2], s[3] } end
    else
      if not nd.transpose then
        error("ToTensor: images with " .. c .. " channels need the transpose op", level + 1)
      end
      y = nd.transpose(x, { axes = nd_ == 3 and { 3, 1, 2 } or { 1, 4, 2, 3 } })
    end
    if x:dtype() == "float32" then -- no cast: write a new tensor, never into x
      y = nd.div_scalar(y, { scalar = 255 })
      return y
    end
    y = cast(y, "float32")
    return nd.div_scalar(y, { scalar = 255, out = y })
  end)
end

-- Normalize(mean, std): (x - mean) / std per channel; mean and std are numbers (all
-- channels) or lists with one entry per channel. Input (C, H, W) or (N, C, H, W).
function M.Normalize(mean, std)
  mean, std = mean or 0, std or 1
  local function check(v, what)
    if type(v) == "number" then return end
    if type(v) ~= "table" or #v == 0 then
      error("Normalize: " .. what .. " must be a number or a list of numbers", 3)
    end
    for i = 1, #v do
      if type(v[i]) ~= "number" then error("Normalize: " .. what .. "[" .. i .. "] is not a number", 3) end
    end
  end
  check(mean, "mean")
  check(std, "std")
  local cache = {}
  local function per_channel(v, c, x, what, level)
    if type(v) == "number" then return nil end
    if #v ~= c and #v ~= 1 then
      error(string.format("Normalize: %s has %d values but the input has %d channels", what, #v, c),
        level + 1)
    end
    local key = what .. x:dtype() .. tostring(x:context()) .. c
    local t = cache[key]
    if not t then
      local vals = {}
      for i = 1, c do vals[i] = { { #v == 1 and v[1] or v[i] } } end
      t = nd.array(vals, { dtype = x:dtype(), ctx = tostring(x:context()) })
      cache[key] = t
    end
    return t
  end
  return make("Normalize", function(_, x, batched, level)
    local s = x:shape()
    if (batched and #s ~= 4) or (not batched and #s ~= 3 and #s ~= 4) then
      error("Normalize: expected (C, H, W) or a batch (N, C, H, W), got shape " .. shape_str(s),
        level + 1)
    end
    if not x:dtype():find("float") then
      error("Normalize: expected a float tensor (apply ToTensor first), got " .. x:dtype(), level + 1)
    end
    local c = s[#s - 2]
    local m = per_channel(mean, c, x, "mean", level + 1)
    local d = per_channel(std, c, x, "std", level + 1)
    local y = m and nd.sub(x, m) or nd.sub_scalar(x, { scalar = mean })
    if d then return nd.div(y, d, { out = y }) end
    return nd.div_scalar(y, { scalar = std, out = y })
  end, { mean = mean, std = std })
end

-- Cast(dtype): a copy in dtype (default "float32").
function M.Cast(dtype)
  dtype = dtype or "float32"
  if not nd.dtype_code(dtype) then error("Cast: unknown dtype " .. tostring(dtype), 2) end
  return make("Cast", function(_, x)
    if x:dtype() == dtype then return x:to(nil, dtype) end -- always a copy
    return cast(x, dtype)
  end, { dtype = dtype })
end

-- Compose{t1, t2, ...}: apply in order. Batchable when every part is.
function M.Compose(list)
  if type(list) ~= "table" then error("Compose: expected a list of transforms", 2) end
  local all = true
  for i = 1, #list do
    local t = list[i]
    local callable = type(t) == "function" or (type(t) == "table" and getmetatable(t)
      and getmetatable(t).__call)
    if not callable then error("Compose: item " .. i .. " is not callable", 2) end
    if type(t) ~= "table" or t.batchable ~= true then all = false end
  end
  local c = make("Compose", function(_, x, batched, level)
    for i = 1, #list do
      local t = list[i]
      if batched then x = t:batch(x) else x = t(x) end
      if x == nil then error("Compose: transform " .. i .. " returned nothing", level + 1) end
    end
    return x
  end, { transforms = list })
  c.batchable = all
  return c
end

return M
