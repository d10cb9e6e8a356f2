-- mx.gluoncv.model_zoo.segmentation — GluonCV 0.10's semantic segmentation networks
-- (gluoncv/model_zoo/segbase.py, fcn.py, deeplabv3.py): SegBaseModel over a dilated
-- ResNetV1s (deep stem, output stride 8), FCN (_FCNHead on stage 4) and DeepLabV3
-- (_DeepLabHead: _ASPP with rates 6/12/18 x2 = 12, 24, 36 and image pooling), each with the
-- auxiliary _FCNHead on stage 3; outputs bilinearly resized (align_corners, as MXNet's
-- BilinearResize2D) to height x width (crop_size by default). GluonCV's attribute names, so
-- its .params files load ("head.aspp.concurent.4.gap.1.weight", "auxlayer.block.0.weight").
--
--   local seg = require("mx.gluoncv.model_zoo.segmentation")
--   local net = seg.get_fcn({ dataset = "pascal_voc", backbone = "resnet50", crop_size = 480 })
--   net:initialize(); local out, aux = net(x)      -- x (B, 3, 480, 480): (B, 21, 480, 480)
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")
local check_opts = require("mx.core.class").check_opts
local v1b = require("mx.gluoncv.model_zoo.resnetv1b")

local HybridBlock = block.HybridBlock
local error, tostring, type, floor = error, tostring, type, math.floor

local M = {}

-- GluonCV's dataset names: classes and the model-store acronym
M.DATASETS = { pascal_voc = { 21, "voc" }, pascal_aug = { 21, "voc" }, ade20k = { 150, "ade" },
  coco = { 21, "coco" }, citys = { 19, "citys" } }

local function bn(L, o) return L.BatchNorm({ use_global_stats = o and o.use_global_stats or nil }) end

-- HybridConcurrent(axis): runs every child on the input and concatenates the outputs
-- (MXNet's gluon.contrib.nn.HybridConcurrent)
local HybridConcurrent = U.nn().HybridSequential:extend("HybridConcurrent")
M.HybridConcurrent = HybridConcurrent
function HybridConcurrent:__init(axis)
  U.nn().HybridSequential.__init(self)
  self._axis = axis or -1
end
function HybridConcurrent:forward(x)
  local outs = {}
  for i = 1, self:len() do outs[i] = self:get(i)(x) end
  return nd.concat(outs, { dim = self._axis })
end

-- _FCNHead(in_channels, channels): 3x3 conv (in/4) + BN + relu + dropout 0.1 + 1x1 conv
local FCNHead = HybridBlock:extend("_FCNHead")
M.FCNHead = FCNHead
function FCNHead:__init(in_channels, channels, o)
  HybridBlock.__init(self)
  local L = U.nn()
  local inter = floor(in_channels / 4)
  self.block = L.HybridSequential()
  self.block:add(L.Conv2D(inter, 3, { padding = 1, use_bias = false, in_channels = in_channels }))
  self.block:add(bn(L, o))
  self.block:add(L.Activation("relu"))
  self.block:add(L.Dropout(0.1))
  self.block:add(L.Conv2D(channels, 1, { in_channels = inter }))
end
function FCNHead:forward(x) return self.block(x) end

local function conv_bn_relu(L, seq, out, kernel, opts, o)
  opts.use_bias = false
  seq:add(L.Conv2D(out, kernel, opts))
  seq:add(bn(L, o))
  seq:add(L.Activation("relu"))
  return seq
end

-- _AsppPooling(in, out, height, width): global average -> 1x1 conv + BN + relu, resized back
local AsppPooling = HybridBlock:extend("_AsppPooling")
M.AsppPooling = AsppPooling
function AsppPooling:__init(in_channels, out_channels, height, width, o)
  HybridBlock.__init(self)
  local L = U.nn()
  self._up = { height = height, width = width }
  self.gap = L.HybridSequential()
  self.gap:add(L.GlobalAvgPool2D())
  conv_bn_relu(L, self.gap, out_channels, 1, { in_channels = in_channels }, o)
end
function AsppPooling:forward(x)
  local up = self._up
  if not up then
    local s = x:shape()
    up = { height = s[3], width = s[4] }
  end
  return nd.bilinear_resize2d(self.gap(x), up)
end

-- _ASPP(in_channels, rates {r1, r2, r3}, height, width): 1x1, three dilated 3x3 and the
-- pooling branch (256 channels each), concatenated, projected to 256 (+ dropout 0.5)
local ASPP = HybridBlock:extend("_ASPP")
M.ASPP = ASPP
function ASPP:__init(in_channels, rates, height, width, o)
  HybridBlock.__init(self)
  local L = U.nn()
  local out = 256
  self.concurent = HybridConcurrent(2)
  self.concurent:add(conv_bn_relu(L, L.HybridSequential(), out, 1, { in_channels = in_channels }, o))
  for i = 1, 3 do
    self.concurent:add(conv_bn_relu(L, L.HybridSequential(), out, 3, { padding = rates[i],
      dilation = rates[i], in_channels = in_channels }, o))
  end
  self.concurent:add(AsppPooling(in_channels, out, height, width, o))
  self.project = conv_bn_relu(L, L.HybridSequential(), out, 1, { in_channels = 5 * out }, o)
  self.project:add(L.Dropout(0.5))
end
function ASPP:forward(x) return self.project(self.concurent(x)) end

-- _DeepLabHead(nclass, height, width): _ASPP(2048, {12, 24, 36}) + 3x3 conv + BN + relu +
-- dropout 0.1 + 1x1 conv to nclass
local DeepLabHead = HybridBlock:extend("_DeepLabHead")
M.DeepLabHead = DeepLabHead
function DeepLabHead:__init(nclass, height, width, o)
  HybridBlock.__init(self)
  local L = U.nn()
  self.aspp = ASPP(2048, { 12, 24, 36 }, height, width, o)
  self.block = conv_bn_relu(L, L.HybridSequential(), 256, 3, { padding = 1, in_channels = 256 }, o)
  self.block:add(L.Dropout(0.1))
  self.block:add(L.Conv2D(nclass, 1, { in_channels = 256 }))
end
function DeepLabHead:forward(x) return self.block(self.aspp(x)) end

-- SegBaseModel: the dilated backbone's stem and stages as the model's own children
local SegBase = HybridBlock:extend("SegBaseModel")
M.SegBaseModel = SegBase
local BACKBONES = { resnet50 = 50, resnet101 = 101, resnet152 = 152 }
local MODEL_OPTS = { backbone = true, aux = true, base_size = true, crop_size = true,
  height = true, width = true, use_global_stats = true }
function SegBase:__init(who, nclass, opts, level)
  HybridBlock.__init(self)
  level = level + 1
  local o = check_opts(who, opts, MODEL_OPTS, level)
  if type(nclass) ~= "number" or nclass < 1 or nclass % 1 ~= 0 then
    error(who .. ": nclass must be a positive integer, got " .. tostring(nclass), level)
  end
  local backbone = o.backbone or "resnet50"
  local depth = BACKBONES[backbone]
  if not depth then
    error(who .. ": unknown backbone '" .. tostring(backbone) .. "' (resnet50, resnet101, "
      .. "resnet152)", level)
  end
  self.aux = o.aux == nil and true or o.aux
  self.nclass = nclass
  self.base_size, self.crop_size = o.base_size or 520, o.crop_size or 480
  local h, w = o.height or self.crop_size, o.width or self.crop_size
  for _, kv in ipairs({ { "height", h }, { "width", w }, { "base_size", self.base_size } }) do
    local k, v = kv[1], kv[2]
    if type(v) ~= "number" or v < 8 or v % 1 ~= 0 then
      error(who .. ": " .. k .. " must be an integer >= 8, got " .. tostring(v), level)
    end
  end
  self._up = { height = h, width = w }
  local base = v1b.ResNetV1b(v1b.DEPTHS[depth], { dilated = true, deep_stem = true,
    stem_width = 64, use_global_stats = o.use_global_stats })
  for _, k in ipairs({ "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3",
    "layer4" }) do
    self[k] = base[k]
  end
  return o, h, w
end

function SegBase:base_forward(x)
  x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
  local c3 = self.layer3(self.layer2(self.layer1(x)))
  return c3, self.layer4(c3)
end

-- forward(x): the head's output, and the auxiliary head's with aux, both height x width
function SegBase:forward(x)
  local c3, c4 = self:base_forward(x)
  local out = nd.bilinear_resize2d(self.head(c4), self._up)
  if not self.aux then return out end
  return out, nd.bilinear_resize2d(self.auxlayer(c3), self._up)
end

-- evaluate(x): the main output only (GluonCV's SegBaseModel.evaluate)
function SegBase:evaluate(x) return (self:forward(x)) end

-- predict(x): the main output at x's own height and width, whatever crop_size was
-- (GluonCV's predict, which leaves the model set to that size; here it is restored)
function SegBase:predict(x)
  local shape = x:shape()
  local up, pool = self._up, self:_pooling()
  local pool_up = pool and pool._up
  self._up = { height = shape[3], width = shape[4] }
  if pool then pool._up = nil end
  local ok, out = pcall(self.forward, self, x)
  self._up = up
  if pool then pool._up = pool_up end
  if not ok then error(out, 0) end
  return out
end
function SegBase._pooling() return nil end

-- FCN(nclass, {backbone="resnet50", aux=true, base_size=520, crop_size=480, height=, width=})
local FCN = SegBase:extend("FCN")
M.FCN = FCN
function FCN:__init(nclass, opts)
  local o = SegBase.__init(self, "FCN", nclass, opts, 3)
  self.head = FCNHead(2048, nclass, o)
  if self.aux then self.auxlayer = FCNHead(1024, nclass, o) end
end

-- DeepLabV3(nclass, opts): as FCN, with _DeepLabHead (its pooling branch resized to
-- height/8 x width/8, the stride-8 features' size for a height x width input)
local DeepLabV3 = SegBase:extend("DeepLabV3")
M.DeepLabV3 = DeepLabV3
function DeepLabV3:__init(nclass, opts)
  local o, h, w = SegBase.__init(self, "DeepLabV3", nclass, opts, 3)
  self.head = DeepLabHead(nclass, floor(h / 8), floor(w / 8), o)
  if self.aux then self.auxlayer = FCNHead(1024, nclass, o) end
end
-- predict sizes the pooling branch to the features (GluonCV's _DeepLabHead.demo)
function DeepLabV3:_pooling() return self.head.aspp.concurent:get(5) end

local GET_OPTS = { dataset = true, backbone = true, pretrained = true, root = true, ctx = true,
  pretrained_base = true, aux = true, base_size = true, crop_size = true, height = true,
  width = true, use_global_stats = true }

local function get(who, prefix, cls)
  return function(opts, level)
    level = (level or 1) + 1
    local o = check_opts(who, opts, GET_OPTS, level)
    local dataset = o.dataset or "pascal_voc"
    local ds = M.DATASETS[dataset]
    if not ds then
      error(who .. ": unknown dataset '" .. tostring(dataset) .. "' (pascal_voc, pascal_aug, "
        .. "ade20k, coco, citys)", level)
    end
    if o.pretrained ~= nil and type(o.pretrained) ~= "boolean" then
      error(who .. ": pretrained must be a boolean, got " .. type(o.pretrained), level)
    end
    local mo = {}
    for k in pairs(MODEL_OPTS) do mo[k] = o[k] end
    local ok, net = pcall(cls, ds[1], mo)
    if not ok then error(who .. ": " .. tostring(net):gsub("^[^:]*:%d+: ", ""), level) end
    local name = prefix .. "_" .. (o.backbone or "resnet50") .. "_" .. ds[2]
    return (U.finish(net, name, o, "gluoncv", level))
  end
end

-- get_fcn({dataset="pascal_voc", backbone="resnet50", pretrained=false, root=, ctx=,
-- aux=true, base_size=520, crop_size=480, ...}); pretrained loads fcn_<backbone>_<voc|ade|
-- coco>-<hash>.params from the model store (GluonCV's table), never downloads
M.get_fcn = get("get_fcn", "fcn", FCN)
M.get_deeplab = get("get_deeplab", "deeplab", DeepLabV3)

-- GluonCV's model names (its model_zoo table): fcn_resnet50_voc, deeplab_resnet101_ade, ...
M.MODELS = {}
local NAMED = {
  fcn = { "resnet50_voc", "resnet101_voc", "resnet101_coco", "resnet50_ade", "resnet101_ade" },
  deeplab = { "resnet101_voc", "resnet152_voc", "resnet101_coco", "resnet152_coco",
    "resnet50_ade", "resnet101_ade", "resnet50_citys", "resnet101_citys" },
}
local ACRONYM = { voc = "pascal_voc", ade = "ade20k", coco = "coco", citys = "citys" }
for fam, list in pairs(NAMED) do
  local getter = fam == "fcn" and M.get_fcn or M.get_deeplab
  for _, suffix in ipairs(list) do
    local bb, acr = suffix:match("^(%w+)_(%w+)$")
    local name = fam .. "_" .. suffix
    M.MODELS[name] = function(opts, level)
      level = (level or 1) + 1
      local o = {}
      for k, v in pairs(opts or {}) do o[k] = v end
      if o.dataset ~= nil or o.backbone ~= nil then
        error(name .. ": dataset and backbone are fixed by the name", level)
      end
      o.dataset, o.backbone = ACRONYM[acr], bb
      return getter(o, level)
    end
  end
end

return M
