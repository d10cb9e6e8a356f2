-- examples/yolo3_train.lua — YOLOv3 trained on real pixels: GluonCV's YOLOV3 over the three
-- stages (strides 8, 16, 32; 12x12, 6x6 and 3x3 cells at 96 px) of EfficientNet-Lite0 with
-- its ImageNet weights (tools/setup.sh --weights) or, --base mobilenet0.25, MobileNet 0.25's
-- from random weights
-- on mx.gluoncv.data.PasteDetection (Fashion-MNIST trousers, sneakers and bags pasted on
-- crops of darknet's and opencv-doc's photos; the test split other photos and items), with
-- GluonCV's YOLO3DefaultTrainTransform (the prefetched targets), the network's YOLOV3Loss
-- (objectness, centre, scale and class) and Adam; VOC07 mAP on the test split before
-- training and after each epoch.
--
--   bin/mx examples/yolo3_train.lua                   # 6 epochs of 1200 pictures
--   bin/mx examples/yolo3_train.lua --epochs 1 --train 64 --test 32   # a smoke run
--
-- Options: --epochs N (6)  --batch-size N (16)  --lr X (0.002)  --size N (96)
--   --train N (1200)  --test N (300)  --seed N (1)  --base lite0|mobilenet0.25 (lite0)
--   --quiet  --save FILE (the parameters)
local mx = require("mx")
local nd = mx.nd
local gcv = require("mx.gluoncv")
local yolo3 = require("mx.gluoncv.model_zoo.yolo3")
local progress = require("mx.progress")
local R = gcv.data.transforms.rng

local here = arg[0]:match("^(.*[/\\])") or "./"
local D = dofile(here .. "_detection.lua")
local t_start = progress.now()
local opts, train, test = D.setup("yolo3_train.lua", arg, 6)

-- the base's three stages (strides 8, 16, 32): MobileNet 0.25 cut as GluonCV cuts MobileNet
-- 1.0 for yolo3_mobilenet1.0 (features[:33], [33:69], [69:-2]), EfficientNet-Lite0 after
-- blocks 5 and 11 (the stem and blocks 1-5 kept at their ImageNet weights); detection blocks
-- of 128, 64 and 32 channels; anchors (w, h pixel pairs per stride 8, 16, 32) fitted to the
-- pasted items: trousers tall, sneakers wide, bags near square, of 0.3, 0.42 and 0.55 of the
-- side
local S = opts.size
local layers, mean, std = D.base(opts, 6)
local function cut(first, last)
  if last < 0 then last = #layers + 1 + last end
  local seq = mx.gluon.nn.HybridSequential()
  for i = first, last do seq:add(layers[i]) end
  return seq
end
local stages
if opts.base == "lite0" then stages = { cut(1, 6), cut(7, 12), cut(13, 17) }
else stages = { cut(1, 33), cut(34, 69), cut(70, 81) } end
local anchors = {}
for i, side in ipairs({ 0.3, 0.42, 0.55 }) do
  local a = side * S
  anchors[i] = { 0.4 * a, a, a, 0.5 * a, a, 0.85 * a }
end
local net = yolo3.YOLOV3(stages, { 128, 64, 32 }, anchors, { 8, 16, 32 }, train.classes)
net:initialize(mx.init.Xavier({ magnitude = 2 }))

local transform = gcv.data.transforms.presets.yolo.YOLO3DefaultTrainTransform(S, S, net, mean,
  std, false, { rng = R.new(opts.seed) })
local trainer = mx.gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr,
  wd = 5e-4 })
local order_rng = R.new(opts.seed + 1)

local map0 = D.voc07(net, test, mean, std)
print(string.format("untrained: VOC07 mAP %.4f", map0))
local map, aps, names
local train_time = 0
local NAMES = { "obj", "center", "scale", "cls" }
for epoch = 1, opts.epochs do
  if epoch == opts.epochs - 1 and opts.epochs >= 4 then trainer:set_learning_rate(opts.lr / 10) end
  local B = opts.batch_size
  local bar = progress.Bar { total = math.floor(train:len() / B),
    title = string.format("epoch %d/%d", epoch, opts.epochs) }
  if opts.quiet then bar.out = { write = function() end, flush = function() end } end
  local t0 = progress.now()
  local sums, n = { 0, 0, 0, 0 }, 0
  for idx in D.batches(train:len(), B, order_rng) do
    local x, obj_t, ctr_t, scl_t, wts_t, cls_t, gt = D.stack(train, idx, transform)
    local losses
    mx.autograd.record(function()
      losses = { net(x, gt, obj_t, ctr_t, scl_t, wts_t, cls_t) }
      losses.sum = nd.add(nd.add(losses[1], losses[2]), nd.add(losses[3], losses[4]))
    end)
    mx.autograd.backward(losses.sum)
    trainer:step(B)
    n = n + 1
    local shown = {}
    for j = 1, 4 do
      sums[j] = sums[j] + nd.mean(losses[j]):asscalar()
      shown[NAMES[j]] = sums[j] / n
    end
    bar:update(1, shown, B)
  end
  bar:finish()
  train_time = train_time + progress.now() - t0
  map, aps, names = D.voc07(net, test, mean, std)
  print(string.format("epoch %d: ObjLoss %.3f  BoxCenterLoss %.3f  BoxScaleLoss %.3f  "
    .. "ClassLoss %.3f  test VOC07 mAP %.4f", epoch, sums[1] / n, sums[2] / n, sums[3] / n,
    sums[4] / n, map))
end
local per = {}
for i = 1, #names - 1 do per[i] = string.format("%s %.3f", names[i], aps[i]) end
print(string.format("final: VOC07 mAP %.4f (%s); untrained %.4f; %.0f s training, %.0f s in all",
  map, table.concat(per, ", "), map0, train_time, progress.now() - t_start))
if opts.save then net:save_parameters(opts.save) end
