-- mx.gluon.model_zoo.vision.squeezenet — SqueezeNet 1.0 and 1.1 as MXNet 1.9's
-- model_zoo/vision/squeezenet.py builds them (fire modules: a squeeze conv, then 1x1 and
-- 3x3 expand convs concatenated on the channel axis), with MXNet's structural parameter
-- names. Input 3x224x224.
local block = require("mx.gluon.block")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring = error, tostring

local M = {}

local function fire_conv(L, channels, kernel, padding)
  local out = L.HybridSequential()
  out:add(L.Conv2D(channels, kernel, { padding = padding or 0 }))
  out:add(L.Activation("relu"))
  return out
end

local function fire(L, squeeze, e1, e3)
  local out = L.HybridSequential()
  out:add(fire_conv(L, squeeze, 1))
  local paths = L.HybridConcatenate(2)
  paths:add(fire_conv(L, e1, 1))
  paths:add(fire_conv(L, e3, 3, 1))
  out:add(paths)
  return out
end

-- SqueezeNet(version "1.0" | "1.1", {classes=1000})
local SqueezeNet = HybridBlock:extend("SqueezeNet")
M.SqueezeNet = SqueezeNet
function SqueezeNet:__init(version, opts)
  HybridBlock.__init(self)
  local o = U.opts("SqueezeNet", opts, nil, 3, true)
  if version ~= "1.0" and version ~= "1.1" then
    error("SqueezeNet: unsupported version " .. tostring(version) .. ": 1.0 or 1.1 expected", 3)
  end
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  local function pool() return L.MaxPool2D(3, { strides = 2, ceil_mode = true }) end
  if version == "1.0" then
    f:add(L.Conv2D(96, 7, { strides = 2 }))
    f:add(L.Activation("relu"))
    f:add(pool())
    f:add(fire(L, 16, 64, 64))
    f:add(fire(L, 16, 64, 64))
    f:add(fire(L, 32, 128, 128))
    f:add(pool())
    f:add(fire(L, 32, 128, 128))
    f:add(fire(L, 48, 192, 192))
    f:add(fire(L, 48, 192, 192))
    f:add(fire(L, 64, 256, 256))
    f:add(pool())
    f:add(fire(L, 64, 256, 256))
  else
    f:add(L.Conv2D(64, 3, { strides = 2 }))
    f:add(L.Activation("relu"))
    f:add(pool())
    f:add(fire(L, 16, 64, 64))
    f:add(fire(L, 16, 64, 64))
    f:add(pool())
    f:add(fire(L, 32, 128, 128))
    f:add(fire(L, 32, 128, 128))
    f:add(pool())
    f:add(fire(L, 48, 192, 192))
    f:add(fire(L, 48, 192, 192))
    f:add(fire(L, 64, 256, 256))
    f:add(fire(L, 64, 256, 256))
  end
  f:add(L.Dropout(0.5))
  local out = L.HybridSequential()
  self.output = out
  out:add(L.Conv2D(o.classes or 1000, 1))
  out:add(L.Activation("relu"))
  out:add(L.AvgPool2D(13))
  out:add(L.Flatten())
end
function SqueezeNet:forward(x) return self.output(self.features(x)) end

local function get_squeezenet(version, opts, level)
  level = level + 1
  local o = U.opts("get_squeezenet", opts, nil, level)
  if version ~= "1.0" and version ~= "1.1" then
    error("get_squeezenet: unsupported version " .. tostring(version) .. ": 1.0 or 1.1 expected",
      level)
  end
  return (U.finish(SqueezeNet(version, { classes = o.classes }), "squeezenet" .. version, o,
    "mxnet", level))
end

-- get_squeezenet(version, {classes=1000, pretrained=false, ctx=, root=})
function M.get_squeezenet(version, opts) return (get_squeezenet(version, opts, 2)) end
function M.squeezenet1_0(opts, level) return (get_squeezenet("1.0", opts, level or 2)) end
function M.squeezenet1_1(opts, level) return (get_squeezenet("1.1", opts, level or 2)) end

return M
