-- examples/fashion_mnist_mlp.lua end to end (#slow): one epoch on a subset of the
-- real Fashion-MNIST, through bin/mx, as a user runs it.
local lib = require("mx._lib")

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

local have = io.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", "rb")
if have then have:close() end

describe("examples/fashion_mnist_mlp.lua #slow", function()
  local it_data = have and it or pending
  it_data("trains to well above chance, and reloads its parameters to the same accuracy", function()
    local params = os.tmpname()
    local cmd = string.format("MX_BUILD_DIR='%s' bin/mx examples/fashion_mnist_mlp.lua --epochs 1 "
      .. "--train-subset 12800 --batch-size 64 --seed 3 --params '%s' 2>&1", abs(build), params)
    local out, code = run(cmd)
    os.remove(params)
    assert.equal(0, code, out)
    -- not a terminal: one clean line per epoch, no carriage returns
    assert.falsy(out:find("\r", 1, true), out)
    local line = out:match("(epoch 1/1 200/200 [^\n]*)\n")
    assert.truthy(line, out)
    assert.truthy(line:find("loss %d%.%d+  acc %d%.%d+  test%-acc %d%.%d+  [%d%.]+k? samples/s  [%d%.]+s$"),
      line)
    local acc, again = out:match("test accuracy (%d%.%d+); after save_parameters/load_parameters "
      .. "(%d%.%d+) %(same%)")
    assert.truthy(acc, out)
    assert.equal(acc, again)
    -- chance is 0.10; one epoch over 12800 images reaches ~0.8
    assert.is_true(tonumber(acc) > 0.7, out)
  end)

end)

describe("examples/fashion_mnist_mlp.lua options", function()
  it("rejects bad options with a usage line", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/fashion_mnist_mlp.lua "
      .. "--optimiser adam 2>&1", abs(build)))
    assert.equal(2, code)
    assert.truthy(out:find("unknown option --optimiser", 1, true), out)
    assert.truthy(out:find("usage: fashion_mnist_mlp.lua", 1, true), out)
  end)
end)

-- examples/image_folder_classifier.lua (#slow): the whole path on a tiny subset: the
-- image folder cut from Debian's opencv-doc digits.png, tools/im2rec.lua run as a
-- subprocess, ImageRecordDataset + augmentation in 2 worker threads, one epoch.
local digits = io.open("/usr/share/doc/opencv-doc/examples/data/digits.png", "rb")
if digits then digits:close() end

describe("examples/image_folder_classifier.lua #slow", function()
  local it_data = digits and it or pending
  it_data("builds the folder and the records, trains a few steps with workers", function()
    local work, plot = os.tmpname(), os.tmpname() .. ".svg"
    os.remove(work)
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/image_folder_classifier.lua "
      .. "--per-class 20 --epochs 1 --batch-size 32 --workers 2 --work '%s' --plot '%s' 2>&1",
      abs(build), work, plot))
    assert.equal(0, code, out)
    assert.truthy(out:find("200 images in 10 classes (0 1 2 3 4 5 6 7 8 9)", 1, true), out)
    -- im2rec's 90/10 split of the 200 images, as records
    local ntrain, ntest = out:match("records: (%d+) training / (%d+) test images")
    assert.equal(200, tonumber(ntrain) + tonumber(ntest), out)
    assert.equal(20, tonumber(ntest), out)
    for _, f in ipairs({ "/digits_train.rec", "/digits_train.idx", "/digits_val.rec",
      "/digits_train.lst", "/digits/7/019.png" }) do
      local h = io.open(work .. f, "rb")
      assert.truthy(h, work .. f .. " missing")
      h:close()
    end
    -- 180 // 32 = 5 steps (last batch discarded)
    assert.truthy(out:find("epoch 1/1 5/5 ", 1, true), out)
    local acc = tonumber(out:match("test accuracy (%d%.%d+)"))
    assert.truthy(acc and acc >= 0 and acc <= 1, out)
    local svg = io.open(plot)
    assert.truthy(svg and svg:read("*a"):find("<svg", 1, true), plot)
    svg:close()
    os.remove(plot)
    os.execute("rm -rf '" .. work .. "'")
  end)
end)

describe("examples/image_folder_classifier.lua options", function()
  it("rejects a bad --per-class with a usage line", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/image_folder_classifier.lua "
      .. "--per-class 5 2>&1", abs(build)))
    assert.equal(2, code, out)
    assert.truthy(out:find("--per-class must be an integer in 10..500", 1, true), out)
  end)
end)
