-- mx.gluoncv.model_zoo.mtcnn — MTCNN's three networks (Zhang et al., 2016) with the
-- parameter names of facenet-pytorch's (conv1.weight, prelu1.weight, dense5_1.bias), so its
-- pnet.pt / rnet.pt / onet.pt (PyPI facenet-pytorch 2.6.0, tools/setup.sh --weights) load
-- through load_torch. Inputs are RGB (x - 127.5) / 128, NCHW.
--   PNet: (B, 3, H, W) -> box offsets (B, 4, h, w), face probabilities (B, 2, h, w)
--   RNet: (B, 3, 24, 24) -> offsets (B, 4), probabilities (B, 2)
--   ONet: (B, 3, 48, 48) -> offsets (B, 4), landmarks (B, 10: x1..x5, y1..y5), probabilities
-- The cascade around them (image pyramid, box generation, NMS, crops) is not here yet.
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock

local M = {}

local function conv(c, k) return U.nn().Conv2D(c, k) end
local function prelu(c) return U.nn().PReLU { in_channels = c } end
-- max pooling with PyTorch's ceil_mode (MXNet's "full" convention)
local function pool(x, k, s)
  return nd.pooling(x, { pool_type = "max", kernel = { k, k }, stride = { s, s },
    pooling_convention = "full" })
end
-- flattened as PyTorch's permute(0, 3, 2, 1): width, height, channel order
local PERM = { axes = { 1, 4, 3, 2 } }
local function flat(x) return nd.flatten(nd.transpose(x, PERM)) end
local SM1 = { axis = 2 }

local PNet = HybridBlock:extend("PNet")
M.PNet = PNet
function PNet:__init()
  HybridBlock.__init(self)
  self.conv1, self.prelu1 = conv(10, 3), prelu(10)
  self.conv2, self.prelu2 = conv(16, 3), prelu(16)
  self.conv3, self.prelu3 = conv(32, 3), prelu(32)
  self.conv4_1, self.conv4_2 = conv(2, 1), conv(4, 1)
end
function PNet:forward(x)
  x = pool(self.prelu1(self.conv1(x)), 2, 2)
  x = self.prelu3(self.conv3(self.prelu2(self.conv2(x))))
  return self.conv4_2(x), nd.softmax(self.conv4_1(x), SM1)
end

local RNet = HybridBlock:extend("RNet")
M.RNet = RNet
function RNet:__init()
  HybridBlock.__init(self)
  local L = U.nn()
  self.conv1, self.prelu1 = conv(28, 3), prelu(28)
  self.conv2, self.prelu2 = conv(48, 3), prelu(48)
  self.conv3, self.prelu3 = conv(64, 2), prelu(64)
  self.dense4, self.prelu4 = L.Dense(128, { in_units = 576 }), prelu(128)
  self.dense5_1, self.dense5_2 = L.Dense(2, { in_units = 128 }), L.Dense(4, { in_units = 128 })
end
function RNet:forward(x)
  x = pool(self.prelu1(self.conv1(x)), 3, 2)
  x = pool(self.prelu2(self.conv2(x)), 3, 2)
  x = self.prelu4(self.dense4(flat(self.prelu3(self.conv3(x)))))
  return self.dense5_2(x), nd.softmax(self.dense5_1(x), SM1)
end

local ONet = HybridBlock:extend("ONet")
M.ONet = ONet
function ONet:__init()
  HybridBlock.__init(self)
  local L = U.nn()
  self.conv1, self.prelu1 = conv(32, 3), prelu(32)
  self.conv2, self.prelu2 = conv(64, 3), prelu(64)
  self.conv3, self.prelu3 = conv(64, 3), prelu(64)
  self.conv4, self.prelu4 = conv(128, 2), prelu(128)
  self.dense5, self.prelu5 = L.Dense(256, { in_units = 1152 }), prelu(256)
  self.dense6_1 = L.Dense(2, { in_units = 256 })
  self.dense6_2 = L.Dense(4, { in_units = 256 })
  self.dense6_3 = L.Dense(10, { in_units = 256 })
end
function ONet:forward(x)
  x = pool(self.prelu1(self.conv1(x)), 3, 2)
  x = pool(self.prelu2(self.conv2(x)), 3, 2)
  x = pool(self.prelu3(self.conv3(x)), 2, 2)
  x = self.prelu5(self.dense5(flat(self.prelu4(self.conv4(x)))))
  return self.dense6_2(x), self.dense6_3(x), nd.softmax(self.dense6_1(x), SM1)
end

-- load_torch(net, path): facenet-pytorch's state dict into net (PReLU's weight is alpha here);
-- the net must have run once (or have its shapes) for the check of shapes
function M.load_torch(net, path)
  local function map(k) return (k:gsub("^(prelu%d+)%.weight$", "%1.alpha")) end
  local ok, err = pcall(net.load_parameters, net, path, { name_map = map })
  if not ok then error("load_torch: " .. tostring(err):gsub("^[^:]*:%d+: ", ""), 2) end
  return net
end

return M
