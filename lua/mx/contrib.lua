-- mx.contrib (also mx.nd.contrib) — MXNet's mx.nd.contrib namespace: the functions that
-- are not single ops, and the contrib spellings of ops luamx has under their plain names
-- (contrib.isnan is nd.isnan; the list is CONTRIB_OPS below).
--
--   boolean_mask(data, index, {axis=1}) (MXNet contrib.boolean_mask): the slices of data
--   along axis where index (1-D, length data.shape[axis], any numeric dtype) is nonzero,
--   in order. The output's size depends on index's VALUES, so like MXNet this waits for
--   index (reads it synchronously), then runs take at the selected 1-based positions: the
--   gradient is take's (the rows scattered back, zeros elsewhere). An all-zero index gives
--   an axis of length 0.
local nd = require("mx.nd")

local type, error, tostring, pcall = type, error, tostring, pcall

local M = {}

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

function M.boolean_mask(data, index, opts)
  if not nd.is_tensor(data) then
    error("boolean_mask: data must be a tensor, got " .. type(data), 2)
  end
  if not nd.is_tensor(index) then
    error("boolean_mask: index must be a tensor, got " .. type(index), 2)
  end
  local axis = 1
  if opts ~= nil then
    if type(opts) ~= "table" then error("boolean_mask: options must be a table, got " .. type(opts), 2) end
    for k in pairs(opts) do
      if k ~= "axis" then error("boolean_mask: unknown option '" .. tostring(k) .. "' (axis)", 2) end
    end
    axis = opts.axis or 1
  end
  local ds, is = data:shape(), index:shape()
  local nd_ = #ds
  if type(axis) ~= "number" or axis % 1 ~= 0 or axis < -nd_ or axis > nd_ or axis == 0 then
    error("boolean_mask: axis " .. tostring(axis) .. " is out of range for data of shape "
      .. shape_str(ds) .. " (1-based, negative from the end)", 2)
  end
  if axis < 0 then axis = axis + nd_ + 1 end
  if #is ~= 1 then
    error("boolean_mask: index must be 1-D, got shape " .. shape_str(is), 2)
  end
  if is[1] ~= ds[axis] then
    error("boolean_mask: index length " .. is[1] .. " must equal data's axis " .. axis
      .. " length " .. ds[axis] .. " (data shape " .. shape_str(ds) .. ")", 2)
  end
  local v, pos = index:tolist(), {} -- synchronous: waits for index
  for i = 1, #v do
    if v[i] ~= 0 then pos[#pos + 1] = i end
  end
  local ok, r = pcall(nd.take, data, nd.array(pos, { dtype = "int64", shape = { #pos } }),
    { axis = axis })
  if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", "")), 2) end
  return r
end

-- MXNet 1.9 contrib names of ops that exist under their plain names
local CONTRIB_OPS = { isnan = "isnan", isinf = "isinf", isfinite = "isfinite",
  AdaptiveAvgPooling2D = "adaptive_avg_pooling2d", BilinearResize2D = "bilinear_resize2d",
  adaptive_avg_pooling2d = "adaptive_avg_pooling2d", bilinear_resize2d = "bilinear_resize2d",
  ctc_loss = "ctc_loss", CTCLoss = "ctc_loss",
  DeformableConvolution = "deformable_convolution",
  ModulatedDeformableConvolution = "modulated_deformable_convolution" }
for name, op in pairs(CONTRIB_OPS) do
  local f = rawget(nd, op)
  if f then M[name] = f end
end

-- mx.contrib.amp and mx.contrib.quantization (MXNet's names) sit above Gluon: loaded when
-- first used, so that mx.contrib itself stays in the nd layer
return require("mx.core.lazy")(M, { amp = "mx.amp", quantization = "mx.contrib.quantization" })
