-- mx.gluon.model_zoo.vision.inception — Inception v3 as MXNet 1.9's
-- model_zoo/vision/inception.py builds it: the same stem, A/B/C/D/E mixed blocks (branches
-- concatenated on the channel axis) and branch order, so the structural parameter names
-- are MXNet's ("features.7.0.0.0.weight"). Input 3x299x299.
local block = require("mx.gluon.block")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock

local M = {}

-- conv (no bias) + BatchNorm(eps 1e-3) + relu; s = {channels, kernel, strides, padding}
local function basic_conv(L, s)
  local out = L.HybridSequential()
  out:add(L.Conv2D(s[1], s[2], { strides = s[3] or 1, padding = s[4] or 0, use_bias = false }))
  out:add(L.BatchNorm({ epsilon = 0.001 }))
  out:add(L.Activation("relu"))
  return out
end

-- a branch: an optional pool ("avg" 3x3/1 pad 1, "max" 3x3/2) then basic convs
local function branch(L, pool, ...)
  local out = L.HybridSequential()
  if pool == "avg" then
    out:add(L.AvgPool2D(3, { strides = 1, padding = 1 }))
  elseif pool == "max" then
    out:add(L.MaxPool2D(3, { strides = 2 }))
  end
  for _, s in ipairs { ... } do out:add(basic_conv(L, s)) end
  return out
end

local function concurrent(L, ...)
  local out = L.HybridConcatenate(2)
  for _, b in ipairs { ... } do out:add(b) end
  return out
end

local function make_A(L, pool_features)
  return concurrent(L,
    branch(L, nil, { 64, 1 }),
    branch(L, nil, { 48, 1 }, { 64, 5, nil, 2 }),
    branch(L, nil, { 64, 1 }, { 96, 3, nil, 1 }, { 96, 3, nil, 1 }),
    branch(L, "avg", { pool_features, 1 }))
end

local function make_B(L)
  return concurrent(L,
    branch(L, nil, { 384, 3, 2 }),
    branch(L, nil, { 64, 1 }, { 96, 3, nil, 1 }, { 96, 3, 2 }),
    branch(L, "max"))
end

local function make_C(L, c7)
  return concurrent(L,
    branch(L, nil, { 192, 1 }),
    branch(L, nil, { c7, 1 }, { c7, { 1, 7 }, nil, { 0, 3 } }, { 192, { 7, 1 }, nil, { 3, 0 } }),
    branch(L, nil, { c7, 1 }, { c7, { 7, 1 }, nil, { 3, 0 } }, { c7, { 1, 7 }, nil, { 0, 3 } },
      { c7, { 7, 1 }, nil, { 3, 0 } }, { 192, { 1, 7 }, nil, { 0, 3 } }),
    branch(L, "avg", { 192, 1 }))
end

local function make_D(L)
  return concurrent(L,
    branch(L, nil, { 192, 1 }, { 320, 3, 2 }),
    branch(L, nil, { 192, 1 }, { 192, { 1, 7 }, nil, { 0, 3 } }, { 192, { 7, 1 }, nil, { 3, 0 } },
      { 192, 3, 2 }),
    branch(L, "max"))
end

local function make_E(L)
  local b3 = L.HybridSequential()
  b3:add(branch(L, nil, { 384, 1 }))
  b3:add(concurrent(L, branch(L, nil, { 384, { 1, 3 }, nil, { 0, 1 } }),
    branch(L, nil, { 384, { 3, 1 }, nil, { 1, 0 } })))
  local b3d = L.HybridSequential()
  b3d:add(branch(L, nil, { 448, 1 }, { 384, 3, nil, 1 }))
  b3d:add(concurrent(L, branch(L, nil, { 384, { 1, 3 }, nil, { 0, 1 } }),
    branch(L, nil, { 384, { 3, 1 }, nil, { 1, 0 } })))
  return concurrent(L, branch(L, nil, { 320, 1 }), b3, b3d, branch(L, "avg", { 192, 1 }))
end

-- Inception3({classes=1000})
local Inception3 = HybridBlock:extend("Inception3")
M.Inception3 = Inception3
function Inception3:__init(opts)
  HybridBlock.__init(self)
  local o = U.opts("Inception3", opts, nil, 3, true)
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  f:add(basic_conv(L, { 32, 3, 2 }))
  f:add(basic_conv(L, { 32, 3 }))
  f:add(basic_conv(L, { 64, 3, nil, 1 }))
  f:add(L.MaxPool2D(3, { strides = 2 }))
  f:add(basic_conv(L, { 80, 1 }))
  f:add(basic_conv(L, { 192, 3 }))
  f:add(L.MaxPool2D(3, { strides = 2 }))
  f:add(make_A(L, 32))
  f:add(make_A(L, 64))
  f:add(make_A(L, 64))
  f:add(make_B(L))
  f:add(make_C(L, 128))
  f:add(make_C(L, 160))
  f:add(make_C(L, 160))
  f:add(make_C(L, 192))
  f:add(make_D(L))
  f:add(make_E(L))
  f:add(make_E(L))
  f:add(L.AvgPool2D(8))
  f:add(L.Dropout(0.5))
  self.output = L.Dense(o.classes or 1000)
end
function Inception3:forward(x) return self.output(self.features(x)) end

-- inception_v3({classes=1000, pretrained=false, ctx=, root=})
function M.inception_v3(opts, level)
  level = (level or 1) + 1
  local o = U.opts("inception_v3", opts, nil, level)
  return (U.finish(Inception3 { classes = o.classes }, "inceptionv3", o, "mxnet", level))
end

return M
