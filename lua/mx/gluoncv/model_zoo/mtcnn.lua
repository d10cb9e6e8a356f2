-- mx.gluoncv.model_zoo.mtcnn — MTCNN's three networks (Zhang et al., 2016) with the
-- parameter names of facenet-pytorch's (conv1.weight, prelu1.weight, dense5_1.bias), so its
-- pnet.pt / rnet.pt / onet.pt (PyPI facenet-pytorch 2.6.0, tools/setup.sh --weights) load
-- through load_torch. Inputs are RGB (x - 127.5) / 128, NCHW.
--   PNet: (B, 3, H, W) -> box offsets (B, 4, h, w), face probabilities (B, 2, h, w)
--   RNet: (B, 3, 24, 24) -> offsets (B, 4), probabilities (B, 2)
--   ONet: (B, 3, 48, 48) -> offsets (B, 4), landmarks (B, 10: x1..x5, y1..y5), probabilities
-- detect(nets, img, opts) runs facenet-pytorch's cascade (its MTCNN.detect) around them.
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

-- pretrained(): {pnet=, rnet=, onet=} with facenet-pytorch's weights from the PyPI cache
-- (tools/setup.sh --weights); a missing file is an error saying where it should be
function M.pretrained()
  local cache = require("mx.gluonnlp._cache")
  local nets = {}
  for _, v in ipairs { { "pnet", PNet, 24 }, { "rnet", RNet, 24 }, { "onet", ONet, 48 } } do
    local path, why = cache.path("facenet_pytorch-2.6.0", "facenet_pytorch/data/" .. v[1] .. ".pt")
    if not path then error("mtcnn.pretrained: " .. why, 2) end
    local net = v[2]()
    net:initialize()
    net(nd.zeros { 1, 3, v[3], v[3] })
    nets[v[1]] = M.load_torch(net, path)
  end
  return nets
end

---------------------------------------------------------------- the cascade
local floor, min, max = math.floor, math.min, math.max

local function normed(x) return nd.mul_scalar(nd.sub_scalar(x, { scalar = 127.5 }),
  { scalar = 0.0078125 }) end
-- PyTorch's interpolate(mode="area"): adaptive average pooling to (h, w)
local function resample(x, h, w) return nd.adaptive_avg_pooling2d(x, { output_size = { h, w } }) end

-- torchvision's nms (IoU of plain areas) or facenet-pytorch's numpy one ("min": overlap
-- over the smaller +1 area), suppressing above thr; boxes {x1, y1, x2, y2, score, ...};
-- returns the kept boxes, best first
local function nms(boxes, thr, method)
  local ord = {}
  for i = 1, #boxes do ord[i] = i end
  table.sort(ord, function(a, b)
    if boxes[a][5] ~= boxes[b][5] then return boxes[a][5] > boxes[b][5] end
    return a < b
  end)
  local plus = method == "min" and 1 or 0
  local function area(b) return (b[3] - b[1] + plus) * (b[4] - b[2] + plus) end
  local keep, gone = {}, {}
  for k, i in ipairs(ord) do
    if not gone[i] then
      local a = boxes[i]
      keep[#keep + 1] = a
      for l = k + 1, #ord do
        local j = ord[l]
        if not gone[j] then
          local b = boxes[j]
          local w = max(0, min(a[3], b[3]) - max(a[1], b[1]) + plus)
          local h = max(0, min(a[4], b[4]) - max(a[2], b[2]) + plus)
          local inter = w * h
          local o
          if method == "min" then o = inter / min(area(a), area(b))
          else
            local u = area(a) + area(b) - inter
            o = u > 0 and inter / u or 0
          end
          if o > thr then gone[j] = true end
        end
      end
    end
  end
  return keep
end

-- the box made square about its centre (rerec)
local function square(b)
  local w, h = b[3] - b[1], b[4] - b[2]
  local l = max(w, h)
  b[1], b[2] = b[1] + w * 0.5 - l * 0.5, b[2] + h * 0.5 - l * 0.5
  b[3], b[4] = b[1] + l, b[2] + l
end

-- the boxes' regression (reg: offsets as fractions of the +1 width/height)
local function regress(b, r)
  local w, h = b[3] - b[1] + 1, b[4] - b[2] + 1
  b[1], b[2], b[3], b[4] = b[1] + r[1] * w, b[2] + r[2] * h, b[3] + r[3] * w, b[4] + r[4] * h
end

local function trunc(v) return v < 0 and -floor(-v) or floor(v) end

-- the crops of boxes from x (1, 3, H, W), each resized to size x size, as one batch
local function crops(x, boxes, W, H, size)
  local list, kept = {}, {}
  for _, b in ipairs(boxes) do
    local x0, y0 = max(trunc(b[1]), 1), max(trunc(b[2]), 1)
    local x1, y1 = min(trunc(b[3]), W), min(trunc(b[4]), H)
    if y1 > y0 - 1 and x1 > x0 - 1 then
      local c = nd.slice(x, { begin = { 1, 1, y0, x0 }, ["end"] = { 1, 3, y1, x1 } })
      list[#list + 1] = resample(c, size, size)
      kept[#kept + 1] = b
    end
  end
  -- concat takes at most 64 inputs: join in groups
  while #list > 1 do
    local next_ = {}
    for i = 1, #list, 64 do
      next_[#next_ + 1] = nd.concat({ unpack(list, i, min(i + 63, #list)) }, { dim = 1 })
    end
    list = next_
  end
  return list[1] and normed(list[1]) or nil, kept
end

local DETECT_OPTS = { min_face_size = true, thresholds = true, factor = true }

-- detect(nets {pnet=, rnet=, onet=}, img (H, W, 3) RGB, {min_face_size=20,
-- thresholds={0.6, 0.7, 0.7}, factor=0.709}) -> boxes { {x1, y1, x2, y2, prob}, ... } in
-- pixels, best first, and landmarks { {{x, y} x 5}, ... }: facenet-pytorch's MTCNN.detect
function M.detect(nets, img, opts)
  local o = require("mx.core.class").check_opts("mtcnn.detect", opts, DETECT_OPTS, 2)
  local minsize, th, factor = o.min_face_size or 20, o.thresholds or { 0.6, 0.7, 0.7 },
    o.factor or 0.709
  local sh = img:shape()
  if #sh ~= 3 or sh[3] ~= 3 then
    error("mtcnn.detect: img must be an RGB image (H, W, 3), got a tensor of rank " .. #sh, 2)
  end
  local H, W = sh[1], sh[2]
  local x = nd.expand_dims(nd.transpose(img:astype("float32"), { axes = { 3, 1, 2 } }),
    { axis = 1 })
  local m = 12 / minsize
  local minl, scale, scales = min(H, W) * m, m, {}
  while minl >= 12 do
    scales[#scales + 1] = scale
    scale, minl = scale * factor, minl * factor
  end
  -- PNet over the pyramid: windows at or above th[1], NMS 0.5 per scale, 0.7 across
  local all = {}
  for _, s in ipairs(scales) do
    local reg, prob = nets.pnet(normed(resample(x, floor(H * s + 1), floor(W * s + 1))))
    local P, R = prob:totable()[1][2], reg:totable()[1]
    local cand = {}
    for i = 1, #P do
      for j = 1, #P[i] do
        if P[i][j] >= th[1] then
          local bx, by = 2 * (j - 1), 2 * (i - 1)
          cand[#cand + 1] = { floor((bx + 1) / s), floor((by + 1) / s), floor((bx + 12) / s),
            floor((by + 12) / s), P[i][j], R[1][i][j], R[2][i][j], R[3][i][j], R[4][i][j] }
        end
      end
    end
    for _, b in ipairs(nms(cand, 0.5)) do all[#all + 1] = b end
  end
  local boxes = {}
  for _, b in ipairs(nms(all, 0.7)) do
    local w, h = b[3] - b[1], b[4] - b[2]
    local nb = { b[1] + b[6] * w, b[2] + b[7] * h, b[3] + b[8] * w, b[4] + b[9] * h, b[5] }
    square(nb)
    boxes[#boxes + 1] = nb
  end
  -- RNet on 24x24 crops
  local batch
  batch, boxes = crops(x, boxes, W, H, 24)
  if not batch then return {}, {} end
  local reg, prob = nets.rnet(batch)
  local R, P, pass = reg:totable(), prob:totable(), {}
  for k, b in ipairs(boxes) do
    if P[k][2] > th[2] then pass[#pass + 1] = { b[1], b[2], b[3], b[4], P[k][2], R[k] } end
  end
  boxes = nms(pass, 0.7)
  for _, b in ipairs(boxes) do regress(b, b[6]) square(b) end
  -- ONet on 48x48 crops: landmarks, then NMS over the smaller area
  batch, boxes = crops(x, boxes, W, H, 48)
  if not batch then return {}, {} end
  local oreg, marks, oprob = nets.onet(batch)
  R, P = oreg:totable(), oprob:totable()
  local L = marks:totable()
  pass = {}
  for k, b in ipairs(boxes) do
    if P[k][2] > th[3] then
      local w, h = b[3] - b[1] + 1, b[4] - b[2] + 1
      local pts = {}
      for q = 1, 5 do pts[q] = { w * L[k][q] + b[1] - 1, h * L[k][q + 5] + b[2] - 1 } end
      local nb = { b[1], b[2], b[3], b[4], P[k][2], pts }
      regress(nb, R[k])
      pass[#pass + 1] = nb
    end
  end
  local out, points = {}, {}
  for i, b in ipairs(nms(pass, 0.7, "min")) do
    out[i], points[i] = { b[1], b[2], b[3], b[4], b[5] }, b[6]
  end
  return out, points
end

return M
