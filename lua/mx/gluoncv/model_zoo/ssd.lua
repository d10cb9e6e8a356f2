-- mx.gluoncv.model_zoo.ssd — GluonCV 0.10's SSD for inference (gluoncv/model_zoo/ssd/):
-- the VGG16-atrous extractor (300 and 512) or a FeatureExpander over MXNet's ResNet-50 v1 /
-- MobileNet 1.0, per-layer SSDAnchorGenerator constants, ConvPredictor heads, box_decode
-- of the centre offsets and box_nms over every class's detections. Parameter names are
-- GluonCV's: structural for VGG (`features.stages.0.0.weight`), and for the expanded bases
-- the MXNet 1.x names GluonCV's SymbolBlock saves (`features.resnetv10_stage3_conv0_weight`,
-- `features.expand_trans_bn0_moving_mean`), so GluonCV's .params files load. net(x) returns
-- ids (B, post_nms, 1), scores and corner boxes in input pixels, -1 rows after the
-- detections.
--
--   local ssd = require("mx.gluoncv.model_zoo.ssd")
--   local net = ssd.ssd_512_resnet50_v1_voc()          -- 20 VOC classes, random weights
--   net:initialize(); local ids, scores, bboxes = net(x)  -- x (B, 3, 512, 512)
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local parameter = require("mx.gluon.parameter")
local initializer = require("mx.initializer")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local sqrt, floor = math.sqrt, math.floor

local M = {}

M.VOC_CLASSES = require("mx.gluoncv.model_zoo.yolo3").VOC_CLASSES

local AX34 = { axes = { 3, 4 } }
local function zero(x) return nd.mul_scalar(x, { scalar = 0 }) end

-- Normalize(n_channel, initial, eps): L2 normalisation over channels times a learnt
-- per-channel scale (VGG's conv4_3 output)
local Normalize = HybridBlock:extend("Normalize")
M.Normalize = Normalize
function Normalize:__init(n_channel, initial, eps)
  HybridBlock.__init(self)
  self._eps = eps or 1e-5
  self.scale = parameter.Parameter("normalize_scale", { shape = { 1, n_channel, 1, 1 },
    init = initializer.Constant(initial or 1) })
end
function Normalize:forward(x)
  return nd.mul(nd.l2_normalization(x, { mode = "channel", eps = self._eps }), self.scale:data())
end

local VGG16 = { { 2, 2, 3, 3, 3 }, { 64, 128, 256, 512, 512 } }
local EXTRAS = {
  [300] = { { { 256, 1, 1, 0 }, { 512, 3, 2, 1 } }, { { 128, 1, 1, 0 }, { 256, 3, 2, 1 } },
    { { 128, 1, 1, 0 }, { 256, 3, 1, 0 } }, { { 128, 1, 1, 0 }, { 256, 3, 1, 0 } } },
  [512] = { { { 256, 1, 1, 0 }, { 512, 3, 2, 1 } }, { { 128, 1, 1, 0 }, { 256, 3, 2, 1 } },
    { { 128, 1, 1, 0 }, { 256, 3, 2, 1 } }, { { 128, 1, 1, 0 }, { 256, 3, 2, 1 } },
    { { 128, 1, 1, 0 }, { 256, 4, 1, 1 } } },
}
local XAVIER = { rnd_type = "gaussian", factor_type = "out", magnitude = 2 }

-- VGGAtrousExtractor(im_size): VGG16's five stages and the dilated fc6/fc7 convolutions,
-- then the extra layers of im_size (300 or 512); outputs conv4_3 (normalised), fc7 and
-- each extra's
local VGGAtrous = HybridBlock:extend("VGGAtrousExtractor")
M.VGGAtrousExtractor = VGGAtrous
function VGGAtrous:__init(im_size)
  HybridBlock.__init(self)
  local L = U.nn()
  local function conv(f, k, o)
    o = o or {}
    o.weight_initializer, o.bias_initializer = initializer.Xavier(XAVIER), "zeros"
    return L.Conv2D(f, k, o)
  end
  local scale = nd.mul_scalar(nd.array({ 0.229, 0.224, 0.225 }):reshape { 1, 3, 1, 1 },
    { scalar = 255 })
  self.init_scale = parameter.Constant(scale, "init_scale")
  self.stages = L.HybridSequential()
  for i, n in ipairs(VGG16[1]) do
    local stage = L.HybridSequential()
    for _ = 1, n do
      stage:add(conv(VGG16[2][i], 3, { padding = 1 }))
      stage:add(L.Activation("relu"))
    end
    self.stages:add(stage)
  end
  local dilated = L.HybridSequential()
  dilated:add(conv(1024, 3, { padding = 6, dilation = 6 }))
  dilated:add(L.Activation("relu"))
  dilated:add(conv(1024, 1))
  dilated:add(L.Activation("relu"))
  self.stages:add(dilated)
  self.norm4 = Normalize(512, 20)
  self.extras = L.HybridSequential()
  for _, cfg in ipairs(EXTRAS[im_size]) do
    local extra = L.HybridSequential()
    for _, c in ipairs(cfg) do
      extra:add(conv(c[1], c[2], { strides = c[3], padding = c[4] }))
      extra:add(L.Activation("relu"))
    end
    self.extras:add(extra)
  end
end

local function maxpool(x, k, s, p)
  return nd.pooling(x, { pool_type = "max", kernel = { k, k }, stride = { s, s },
    pad = { p, p }, pooling_convention = "full" })
end

function VGGAtrous:forward(x)
  local stages = self.stages:children()
  x = nd.mul(x, self.init_scale:data())
  for i = 1, 3 do x = maxpool(stages[i](x), 2, 2, 0) end
  x = stages[4](x)
  local outputs = { self.norm4(x) }
  x = maxpool(stages[5](maxpool(x, 2, 2, 0)), 3, 1, 1)
  x = stages[6](x)
  outputs[2] = x
  for _, extra in ipairs(self.extras:children()) do
    x = extra(x)
    outputs[#outputs + 1] = x
  end
  return outputs
end

-- MXNet 1.x's layer names: each layer block holding parameters, in construction
-- (registration) order, named <scope><kind><count> with one counter per scope and kind,
-- as Gluon 1.x's name scopes number them
local KIND = { Conv2D = "conv", BatchNorm = "batchnorm", Dense = "dense" }
local function name_layers(b, scope, counters, out)
  if b:params():len() > 0 then
    local cls = getmetatable(b).__name
    local kind = KIND[cls] or cls:lower()
    local key = scope .. kind
    local n = counters[key] or 0
    counters[key] = n + 1
    out[#out + 1] = { b, scope .. kind .. n .. "_" }
  end
  for _, c in ipairs((b:children())) do name_layers(c, scope, counters, out) end
end

-- FeatureExpander(layers, scopes, outs, num_filters): runs the base network's layers in
-- order, taking the outputs after the layers listed in outs, then appends per entry f of
-- num_filters a 1x1 transition (max(128, f) channels) and a 3x3 stride-2 convolution, each
-- with MXNet's symbolic BatchNorm (eps 1e-3, gamma fixed at 1) and ReLU. scopes[i] is layer
-- i's MXNet 1.x name prefix: the parameters are registered here under those names (GluonCV
-- builds this block as a SymbolBlock, which saves them so), the layers themselves are not
-- children.
local Expander = HybridBlock:extend("FeatureExpander")
M.FeatureExpander = Expander
function Expander:__init(layers, scopes, outs, num_filters)
  HybridBlock.__init(self)
  local L = U.nn()
  local named, counters = {}, {}
  for i = 1, outs[#outs] do name_layers(layers[i], scopes[i], counters, named) end
  local expand = {}
  local function add(layer, prefix, aux)
    named[#named + 1] = { layer, prefix, aux }
    expand[#expand + 1] = layer
  end
  for i, f in ipairs(num_filters) do
    local init = initializer.Xavier(XAVIER)
    add(L.Conv2D(math.max(128, floor(f + 0.5)), 1, { use_bias = false,
      weight_initializer = init }), "expand_trans_conv" .. (i - 1) .. "_")
    add(L.BatchNorm { epsilon = 1e-3, scale = false }, "expand_trans_bn" .. (i - 1) .. "_", true)
    add(L.Activation("relu"))
    add(L.Conv2D(f, 3, { strides = 2, padding = 1, use_bias = false,
      weight_initializer = init }), "expand_conv" .. (i - 1) .. "_")
    add(L.BatchNorm { epsilon = 1e-3, scale = false }, "expand_bn" .. (i - 1) .. "_", true)
    add(L.Activation("relu"))
  end
  for _, e in ipairs(named) do
    local layer, prefix, sym_bn = e[1], e[2], e[3]
    if prefix then
      for pname, p in layer:params():items() do
        -- symbolic BatchNorm names its statistics moving_mean / moving_var
        if sym_bn then pname = pname:gsub("^running_", "moving_") end
        self[prefix .. pname] = p
      end
    end
  end
  local run = {}
  for i = 1, outs[#outs] do run[i] = layers[i] end
  rawset(self, "_layers", run)
  rawset(self, "_outs", outs)
  rawset(self, "_expand", expand)
end

function Expander:forward(x)
  local layers, outs, outputs = rawget(self, "_layers"), rawget(self, "_outs"), {}
  local k = 1
  for i, layer in ipairs(layers) do
    x = layer(x)
    if i == outs[k] then
      outputs[#outputs + 1] = x
      k = k + 1
    end
  end
  local expand = rawget(self, "_expand")
  for i = 1, #expand, 6 do
    for j = i, i + 5 do x = expand[j](x) end
    outputs[#outputs + 1] = x
  end
  return outputs
end

-- SSDAnchorGenerator(index, im_size, sizes {min, max}, ratios, step, alloc_size): the
-- anchors of an alloc_size x alloc_size map, centre format in pixels, as a constant
-- (1, 1, A, A, 4 * depth); forward crops them to the feature map's size
local Anchors = HybridBlock:extend("SSDAnchorGenerator")
M.SSDAnchorGenerator = Anchors
function Anchors:__init(index, sizes, ratios, step, alloc_size)
  HybridBlock.__init(self)
  local s1, s2 = sizes[1], sqrt(sizes[1] * sizes[2])
  self._depth = 2 + #ratios - 1
  local rows = {}
  for i = 0, alloc_size - 1 do
    local row = {}
    for j = 0, alloc_size - 1 do
      local cy, cx = (i + 0.5) * step, (j + 0.5) * step
      local a = { cx, cy, s1, s1, cx, cy, s2, s2 }
      for r = 2, #ratios do
        local sr = sqrt(ratios[r])
        a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = cx, cy, s1 * sr, s1 / sr
      end
      row[j + 1] = a
    end
    rows[i + 1] = row
  end
  self.anchors = parameter.Constant(nd.array({ { rows } }), "anchor_" .. (index - 1))
end
function Anchors:forward(x)
  return nd.reshape(nd.slice_like(self.anchors:data(), zero(x), AX34), { 1, -1, 4 })
end

-- ConvPredictor(num_channel): a 3x3 convolution (padding 1) predicting per anchor
local Predictor = HybridBlock:extend("ConvPredictor")
M.ConvPredictor = Predictor
function Predictor:__init(num_channel)
  HybridBlock.__init(self)
  self.predictor = U.nn().Conv2D(num_channel, 3, { padding = 1,
    weight_initializer = initializer.Xavier { magnitude = 2 }, bias_initializer = "zeros" })
end
function Predictor:forward(x) return self.predictor(x) end

local PERM = { axes = { 1, 3, 4, 2 } }

-- SSD(features, sizes, ratios, steps, classes, {nms_thresh=0.45, nms_topk=400, post_nms=100,
-- stds={0.1, 0.1, 0.2, 0.2}, anchor_alloc_size=128}): features a block returning the
-- feature maps; sizes has one more entry than there are maps. In training mode net(x)
-- returns class predictions (B, N, C + 1), box predictions (B, N, 4) and anchors (1, N, 4).
local SSD = HybridBlock:extend("SSD")
M.SSD = SSD
function SSD:__init(features, sizes, ratios, steps, classes, opts)
  HybridBlock.__init(self)
  local o = opts or {}
  self.classes = classes
  self.nms_thresh, self.nms_topk, self.post_nms = o.nms_thresh or 0.45, o.nms_topk or 400,
    o.post_nms or 100
  self._stds = o.stds or { 0.1, 0.1, 0.2, 0.2 }
  local L = U.nn()
  self.features = features
  self.class_predictors = L.HybridSequential()
  self.box_predictors = L.HybridSequential()
  self.anchor_generators = L.HybridSequential()
  local asz = o.anchor_alloc_size or 128
  for i = 1, #steps do
    local ag = Anchors(i, { sizes[i], sizes[i + 1] }, ratios[i], steps[i], asz)
    self.anchor_generators:add(ag)
    asz = math.max(floor(asz / 2), 16)
    self.class_predictors:add(Predictor(ag._depth * (#classes + 1)))
    self.box_predictors:add(Predictor(ag._depth * 4))
  end
end

-- set_nms(nms_thresh=0.45, nms_topk=400, post_nms=100): a threshold outside (0, 1) returns
-- every class's row of every anchor, unsorted
function SSD:set_nms(nms_thresh, nms_topk, post_nms)
  self.nms_thresh, self.nms_topk, self.post_nms = nms_thresh or 0.45, nms_topk or 400,
    post_nms or 100
end

function SSD:forward(x)
  local feats = self.features(x)
  local cps, bps, ags = self.class_predictors:children(), self.box_predictors:children(),
    self.anchor_generators:children()
  local cls, box, anc = {}, {}, {}
  for i, f in ipairs(feats) do
    cls[i] = nd.flatten(nd.transpose(cps[i](f), PERM))
    box[i] = nd.flatten(nd.transpose(bps[i](f), PERM))
    anc[i] = nd.reshape(ags[i](f), { 1, -1 })
  end
  local C = #self.classes
  local cls_preds = nd.reshape(nd.concat(cls, { dim = 2 }), { 0, -1, C + 1 })
  local box_preds = nd.reshape(nd.concat(box, { dim = 2 }), { 0, -1, 4 })
  local anchors = nd.reshape(nd.concat(anc, { dim = 2 }), { 1, -1, 4 })
  -- training mode (GluonCV's): the raw predictions and the anchors, for SSDTargetGenerator
  -- and SSDMultiBoxLoss
  if require("mx.autograd").is_training() then return cls_preds, box_preds, anchors end
  local s = self._stds
  local bboxes = nd.box_decode(box_preds, anchors, { std0 = s[1], std1 = s[2], std2 = s[3],
    std3 = s[4], clip = -1, format = "center" })
  -- MultiPerClassDecoder: every foreground class's softmax score, id -1 / score 0 under 0.01
  local scores = nd.slice_axis(nd.softmax(cls_preds, { axis = -1 }), { axis = -1, begin = 2,
    ["end"] = C + 1 })
  local mask = nd.greater_scalar(scores, { scalar = 0.01 })
  local ids = nd.add(nd.zeros_like(scores), nd.reshape(nd.arange { start = 0, stop = C },
    { 1, 1, C }))
  ids = nd.where(mask, ids, nd.full_like(ids, { value = -1 }))
  scores = nd.where(mask, scores, nd.zeros_like(scores))
  local per = {}
  for i = 1, C do
    local cut = { axis = -1, begin = i, ["end"] = i }
    per[i] = nd.concat({ nd.slice_axis(ids, cut), nd.slice_axis(scores, cut), bboxes },
      { dim = -1 })
  end
  local result = nd.concat(per, { dim = 2 })
  if self.nms_thresh > 0 and self.nms_thresh < 1 then
    result = nd.box_nms(result, { overlap_thresh = self.nms_thresh, topk = self.nms_topk,
      valid_thresh = 0.01, id_index = 1, score_index = 2, coord_start = 3,
      force_suppress = false })
    if self.post_nms > 0 then
      result = nd.slice_axis(result, { axis = 2, begin = 1, ["end"] = self.post_nms })
    end
  end
  return nd.slice_axis(result, { axis = -1, begin = 1, ["end"] = 1 }),
    nd.slice_axis(result, { axis = -1, begin = 2, ["end"] = 2 }),
    nd.slice_axis(result, { axis = -1, begin = 3, ["end"] = 6 })
end

local R3, R5 = { 1, 2, 0.5 }, { 1, 2, 0.5, 3, 1 / 3 }
local PRESETS = {
  ssd_300_vgg16_atrous_voc = { size = 300, sizes = { 30, 60, 111, 162, 213, 264, 315 },
    ratios = { R3, R5, R5, R5, R3, R3 }, steps = { 8, 16, 32, 64, 100, 300 } },
  ssd_512_vgg16_atrous_voc = { size = 512, sizes = { 51.2, 76.8, 153.6, 230.4, 307.2, 384.0,
    460.8, 537.6 }, ratios = { R3, R5, R5, R5, R5, R3, R3 },
    steps = { 8, 16, 32, 64, 128, 256, 512 } },
  ssd_512_resnet50_v1_voc = { base = "resnet50_v1", size = 512,
    sizes = { 51.2, 102.4, 189.4, 276.4, 363.52, 450.6, 492 },
    ratios = { R3, R5, R5, R5, R3, R3 }, steps = { 16, 32, 64, 128, 256, 512 } },
  ["ssd_512_mobilenet1.0_voc"] = { base = "mobilenet1.0", size = 512,
    sizes = { 51.2, 102.4, 189.4, 276.4, 363.52, 450.6, 492 },
    ratios = { R3, R5, R5, R5, R3, R3 }, steps = { 16, 32, 64, 128, 256, 512 } },
}
M.PRESETS = PRESETS

-- the base network's feature layers, their MXNet 1.x scopes and the output layers
local function expanded(base)
  local net = require("mx.gluon.model_zoo.vision").get_model(base)
  local layers = net.features:children()
  local scopes = {}
  if base == "resnet50_v1" then
    -- stem (conv, bn, relu, pool) then stage1..stage4; outputs stage3's and stage4's
    for i = 1, 8 do scopes[i] = i <= 4 and "resnetv10_" or "resnetv10_stage" .. (i - 4) .. "_" end
    return layers, scopes, { 7, 8 }
  end
  -- MobileNet: conv/bn/relu triples in one scope; outputs relu22's and relu26's
  for i = 1, 81 do scopes[i] = "mobilenet0_" end
  return layers, scopes, { 69, 81 }
end

local OPTS = { classes = true, pretrained = true, pretrained_base = true, ctx = true,
  root = true, nms_thresh = true, nms_topk = true, post_nms = true }

local function get(name, opts, level)
  level = level + 1
  local o = require("mx.core.class").check_opts(name, opts, OPTS, level)
  local P = PRESETS[name]
  local classes = o.classes or M.VOC_CLASSES
  local features
  if P.base then
    local layers, scopes, outs = expanded(P.base)
    features = Expander(layers, scopes, outs, { 512, 512, 256, 256 })
  else
    features = VGGAtrous(P.size)
  end
  local net = SSD(features, P.sizes, P.ratios, P.steps, classes,
    { nms_thresh = o.nms_thresh, nms_topk = o.nms_topk, post_nms = o.post_nms })
  if o.pretrained then
    local path = require("mx.gluon.model_zoo.model_store").get_model_file(name,
      { root = o.root, store = "gluoncv" }, level)
    net:load_parameters(path, { ctx = o.ctx })
  end
  return net
end

-- ssd_300_vgg16_atrous_voc(opts), ssd_512_vgg16_atrous_voc, ssd_512_resnet50_v1_voc,
-- ssd_512_mobilenet1_0_voc: {classes= (default VOC's 20), pretrained=false, root=, ctx=,
-- nms_thresh=, nms_topk=, post_nms=}; pretrained_base is accepted and ignored (no
-- ImageNet download: load the base's weights yourself)
function M.ssd_300_vgg16_atrous_voc(opts) return (get("ssd_300_vgg16_atrous_voc", opts, 2)) end
function M.ssd_512_vgg16_atrous_voc(opts) return (get("ssd_512_vgg16_atrous_voc", opts, 2)) end
function M.ssd_512_resnet50_v1_voc(opts) return (get("ssd_512_resnet50_v1_voc", opts, 2)) end
function M.ssd_512_mobilenet1_0_voc(opts) return (get("ssd_512_mobilenet1.0_voc", opts, 2)) end

return M
