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

local function smoke(script, loss_line)
  local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/%s --epochs 1 "
    .. "--train 16 --test 8 --batch-size 8 --size 64 2>&1", abs(build), script))
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

describe("examples/ssd_train.lua and yolo3_train.lua #slow", function()
  local it_data = READY and it or pending
  it_data("SSD: trains an epoch, reports the losses and VOC07 mAP", function()
    smoke("ssd_train.lua", "epoch 1: CrossEntropy %d+%.%d+  SmoothL1 %d+%.%d+  test VOC07 mAP")
  end)
  it_data("YOLOv3: trains an epoch, reports the four losses and VOC07 mAP", function()
    smoke("yolo3_train.lua", "epoch 1: ObjLoss [%d.]+  BoxCenterLoss [%d.]+  BoxScaleLoss "
      .. "[%d.]+  ClassLoss [%d.]+  test VOC07 mAP")
  end)
  it("rejects a bad size", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/ssd_train.lua "
      .. "--size 70 2>&1", abs(build)))
    assert.equal(2, code, out)
    assert.truthy(out:find("--size must be a multiple of 32, >= 64", 1, true), out)
  end)
end)
