-- examples/ssd_train.lua — SSD trained on real pixels: GluonCV's SSD over EfficientNet-Lite0
-- with its ImageNet weights (tools/setup.sh --weights) or, --base mobilenet0.25, MobileNet 0.25
-- from random weights (FeatureExpander, four maps at 96 px: 6x6, 3x3, 2x2, 1x1, 226 anchors)
-- on mx.gluoncv.data.PasteDetection (Fashion-MNIST trousers, sneakers and bags pasted on
-- crops of darknet's and opencv-doc's photos; the test split other photos and items), with
-- GluonCV's SSDDefaultTrainTransform, SSDMultiBoxLoss and Adam; VOC07 mAP on the test split
-- before training and after each epoch.
--
--   bin/mx examples/ssd_train.lua                   # 7 epochs of 1200 pictures
--   bin/mx examples/ssd_train.lua --epochs 1 --train 64 --test 32   # a smoke run
--
-- Options: --epochs N (7)  --batch-size N (16)  --lr X (0.002)  --size N (96)
--   --train N (1200)  --test N (300)  --seed N (1)  --base lite0|mobilenet0.25 (lite0)
--   --quiet  --save FILE (the parameters)
local mx = require("mx")
local nd = mx.nd
local gcv = require("mx.gluoncv")
local ssd = require("mx.gluoncv.model_zoo.ssd")
local progress = require("mx.progress")
local R = gcv.data.transforms.rng

local here = arg[0]:match("^(.*[/\\])") or "./"
local D = dofile(here .. "_detection.lua")
local t_start = progress.now()
local opts, train, test = D.setup("ssd_train.lua", arg, 7)

-- the network: the base's layers up to its stride-16 and stride-32 outputs (MobileNet 0.25:
-- relu22, relu26; EfficientNet-Lite0: blocks 11 and 16, the stem and blocks 1-5 kept at
-- their ImageNet weights), two expanded maps; anchors of 0.25 to 0.85 of the side, fitted to
-- the items (0.3 to 0.6 of the side)
local S = opts.size
local layers, mean, std = D.base(opts, 6)
local scopes, outs = {}, { 69, 81 }
if opts.base == "lite0" then outs = { 12, 17 } end
for i = 1, outs[2] do scopes[i] = opts.base == "lite0" and "efficientnetlite0_" or "mobilenet0_" end
local features = ssd.FeatureExpander(layers, scopes, outs, { 128, 128 })
local R3, R5 = { 1, 2, 0.5 }, { 1, 2, 0.5, 3, 1 / 3 }
-- steps: the side over each map's cells (S / 16, S / 32, then 2 and 1 cells)
local net = ssd.SSD(features, { 0.25 * S, 0.4 * S, 0.55 * S, 0.7 * S, 0.85 * S },
  { R3, R5, R5, R3 }, { 16, 32, S / math.ceil(S / 64), S }, train.classes,
  { anchor_alloc_size = S / 16 })
net:initialize(mx.init.Xavier({ magnitude = 2 }))
local anchors
mx.autograd.train_mode(function() anchors = select(3, net(nd.zeros({ 1, 3, S, S }))) end)
print(string.format("SSD: %d anchors", anchors:shape()[2]))

local transform = gcv.data.transforms.presets.ssd.SSDDefaultTrainTransform(S, S, anchors,
  mean, std, 0.5, nil, { rng = R.new(opts.seed) })
local loss_fn = gcv.loss.SSDMultiBoxLoss()
local trainer = mx.gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr,
  wd = 5e-4 })
local order_rng = R.new(opts.seed + 1)

local map0 = D.voc07(net, test, mean, std)
print(string.format("untrained: VOC07 mAP %.4f", map0))
local map, aps, names
local train_time = 0
for epoch = 1, opts.epochs do
  -- the last two epochs at a tenth of the rate
  if epoch == opts.epochs - 1 and opts.epochs >= 4 then trainer:set_learning_rate(opts.lr / 10) end
  local B = opts.batch_size
  local bar = progress.Bar { total = math.floor(train:len() / B),
    title = string.format("epoch %d/%d", epoch, opts.epochs) }
  if opts.quiet then bar.out = { write = function() end, flush = function() end } end
  local t0 = progress.now()
  local ce_sum, l1_sum, n = 0, 0, 0
  for idx in D.batches(train:len(), B, order_rng) do
    local x, cls_t, box_t = D.stack(train, idx, transform)
    local sum_l, cls_l, box_l
    mx.autograd.record(function()
      local cls_p, box_p = net(x)
      sum_l, cls_l, box_l = loss_fn(cls_p, box_p, cls_t, box_t)
    end)
    mx.autograd.backward(sum_l)
    trainer:step(1)
    ce_sum = ce_sum + nd.mean(cls_l[1]):asscalar()
    l1_sum = l1_sum + nd.mean(box_l[1]):asscalar()
    n = n + 1
    bar:update(1, { ce = ce_sum / n, smoothl1 = l1_sum / n }, B)
  end
  bar:finish()
  train_time = train_time + progress.now() - t0
  map, aps, names = D.voc07(net, test, mean, std)
  print(string.format("epoch %d: CrossEntropy %.4f  SmoothL1 %.4f  test VOC07 mAP %.4f", epoch,
    ce_sum / n, l1_sum / n, map))
end
local per = {}
for i = 1, #names - 1 do per[i] = string.format("%s %.3f", names[i], aps[i]) end
print(string.format("final: VOC07 mAP %.4f (%s); untrained %.4f; %.0f s training, %.0f s in all",
  map, table.concat(per, ", "), map0, train_time, progress.now() - t_start))
if opts.save then net:save_parameters(opts.save) end
