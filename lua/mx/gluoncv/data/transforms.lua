-- mx.gluoncv.data.transforms — GluonCV's transforms: bbox (crop, flip, resize, translate),
-- image (imresize, resize_short_within, random_expand, random_flip), experimental
-- (random_color_distort, random_crop_with_constraints), rng (the transforms' random source),
-- and the presets: transform_test / load_test for SSD and YOLOv3 (the short side resized to
-- `short`, the long one capped at max_size, both rounded to multiples of stride, then
-- to_tensor and ImageNet normalisation) and the training transforms
-- presets.ssd.SSDDefaultTrainTransform / presets.yolo.YOLO3DefaultTrainTransform.
--
--   local T = require("mx.gluoncv").data.transforms
--   local x, orig = T.presets.ssd.load_test("dog.jpg", 512)   -- x (1, 3, h, w), orig (h, w, 3)
local nd = require("mx.nd")
local check_opts = require("mx.core.class").check_opts

local M = { image = require("mx.gluoncv.data.transforms.image"),
  bbox = require("mx.gluoncv.data.transforms.bbox"),
  experimental = require("mx.gluoncv.data.transforms.experimental"),
  rng = require("mx.gluoncv.data.transforms.rng"), presets = { ssd = {}, yolo = {} } }
local train = require("mx.gluoncv.data.transforms.train")
M.presets.ssd.SSDDefaultTrainTransform = train.SSDDefaultTrainTransform
M.presets.yolo.YOLO3DefaultTrainTransform = train.YOLO3DefaultTrainTransform

local MEAN, STD = { 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }
local OPTS = { max_size = true, mean = true, std = true, stride = true }

local function transform(who, imgs, short, opts, level)
  local o = check_opts(who, opts, OPTS, level + 1)
  local one = nd.is_tensor(imgs)
  if one then imgs = { imgs } end
  if type(imgs) ~= "table" then
    error(who .. ": imgs must be an image (H, W, 3) or a list of them, got " .. type(imgs), level + 1)
  end
  local mean = nd.reshape(nd.array(o.mean or MEAN), { 3, 1, 1 })
  local std = nd.reshape(nd.array(o.std or STD), { 3, 1, 1 })
  local tensors, origs = {}, {}
  for i, img in ipairs(imgs) do
    if not nd.is_tensor(img) then
      error(string.format("%s: imgs[%d] is a %s, not an image", who, i, type(img)), level + 1)
    end
    local r = M.image.resize_short_within(img, short, o.max_size or 1024, o.stride or 1)
    origs[i] = r
    local x = nd.div(nd.sub(nd.to_tensor(r), mean), std)
    tensors[i] = nd.expand_dims(x, { axis = 1 })
  end
  if one then return tensors[1], origs[1] end
  return tensors, origs
end

local function load(who, files, short, opts, level)
  local image = require("mx.image")
  local one = type(files) == "string"
  if one then files = { files } end
  local imgs = {}
  for i, f in ipairs(files) do imgs[i] = image.imread(f) end
  local t, o = transform(who, imgs, short, opts, level + 1)
  if one then return t[1], o[1] end
  return t, o
end

-- presets.ssd.transform_test(imgs, short, {max_size=1024, mean=, std=}) -> tensor(s)
-- (1, 3, h, w) and the resized uint8 image(s); load_test(filenames, short, opts) reads them
function M.presets.ssd.transform_test(imgs, short, opts)
  local t, o = transform("presets.ssd.transform_test", imgs, short, opts, 2)
  return t, o
end
function M.presets.ssd.load_test(files, short, opts)
  local t, o = load("presets.ssd.load_test", files, short, opts, 2)
  return t, o
end
-- presets.yolo.transform_test(imgs, short=416, {max_size=1024, stride=1, mean=, std=})
function M.presets.yolo.transform_test(imgs, short, opts)
  local t, o = transform("presets.yolo.transform_test", imgs, short or 416, opts, 2)
  return t, o
end
function M.presets.yolo.load_test(files, short, opts)
  local t, o = load("presets.yolo.load_test", files, short or 416, opts, 2)
  return t, o
end

return M
