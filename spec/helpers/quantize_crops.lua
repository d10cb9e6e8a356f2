-- spec/helpers/quantize_crops.lua — the real-photo crops of the INT8 accuracy check
-- (spec/quantize_zoo_spec.lua) and of its MXNet / PyTorch peers (bench/quantize_crops.lua
-- writes them for bench/quantize_agreement*.py): Debian opencv-doc's photos, preprocessed as
-- the EfficientNet-Lite checkpoints expect ((x - 127) / 128, NCHW).
local mx = require("mx")
local nd = mx.nd

local M = {}
M.PHOTOS = "/usr/share/doc/opencv-doc/examples/data/"
M.NAMES = { "apple", "baboon", "butterfly", "fruits", "orange", "squirrel_cls", "messi5",
  "aero1", "HappyFish", "starry_night", "building", "home" }

function M.prep(img)
  local x = (img:astype("float32") - 127) / 128
  return nd.expand_dims(nd.transpose(x, { axes = { 3, 1, 2 } }), { axis = 1 })
end

-- k random 224x224 crops of img at short sides 224..320, every other one flipped
function M.crops(img, k, seed)
  math.randomseed(seed)
  local r = {}
  for j = 1, k do
    local c = mx.image.random_crop(mx.image.resize_short(img, 224 + 32 * (j % 4)), { 224, 224 })
    if j % 2 == 0 then c = nd.flip(c, { axis = 2 }) end
    r[#r + 1] = M.prep(c)
  end
  return r
end

-- sets() -> centre (one 224 centre crop per photo), calib (3 crops each), test (16 each):
-- lists of (1, 3, 224, 224) tensors
function M.sets()
  local centre, calib, test = {}, {}, {}
  for i, name in ipairs(M.NAMES) do
    local img = mx.image.imread(M.PHOTOS .. name .. ".jpg")
    centre[#centre + 1] = M.prep(mx.image.center_crop(mx.image.resize_short(img, 256), { 224, 224 }))
    for _, c in ipairs(M.crops(img, 3, 100 + i)) do calib[#calib + 1] = c end
    for _, c in ipairs(M.crops(img, 16, 200 + i)) do test[#test + 1] = c end
  end
  return centre, calib, test
end

-- batches(list, n): the list's tensors joined n at a time along the batch axis
function M.batches(list, n)
  local r = {}
  for i = 1, #list, n do
    local t = {}
    for k = i, math.min(i + n - 1, #list) do t[#t + 1] = list[k] end
    r[#r + 1] = nd.concat(t, { dim = 1 })
  end
  return r
end

return M
