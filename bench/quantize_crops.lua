-- bench/quantize_crops.lua OUT.safetensors [OUT.params]: the calibration and test crops of
-- spec/quantize_zoo_spec.lua (spec/helpers/quantize_crops.lua) for the int8 accuracy peers:
-- OUT.safetensors {calib, test} for bench/quantize_agreement.py (PyTorch); OUT.params the
-- same crops plus the EfficientNet-Lite0 checkpoint's arrays in MXNet's .params format for
-- bench/quantize_agreement_mxnet.py (MXNet 1.9.1). Run from the repository root.
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local mx = require("mx")
local nd = mx.nd
local QC = require("helpers.quantize_crops")
local E = require("helpers.efficientnet_lite")

local _, calib, test = QC.sets()
local function cat(list) return nd.concat(QC.batches(list, 32), { dim = 1 }) end
local crops = { calib = cat(calib), test = cat(test) }
nd.save(assert(arg[1], "usage: quantize_crops.lua OUT.safetensors [OUT.params]"), crops)
if arg[2] then
  local cache = os.getenv("LUAMX_PYPI_CACHE") or ((os.getenv("HOME") or "") .. "/.cache/luamx/pypi")
  local t = nd.load(cache .. "/" .. E.PTH)
  t.crops_calib, t.crops_test = crops.calib, crops.test
  nd.save(arg[2], t)
end
