-- examples/fashion_mnist_mlp.lua end to end (#slow): one epoch on a subset of the
-- real Fashion-MNIST, through bin/mx, as a user runs it.
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

-- the sequence-model examples: tiny configurations (the real runs: docs/sequence-models.md)
local fortunes = io.open("/usr/share/games/fortunes/fortunes", "rb")
if fortunes then fortunes:close() end
local sunspots = io.open("/usr/lib/python3/dist-packages/statsmodels/datasets/sunspots/sunspots.csv", "rb")
if sunspots then sunspots:close() end
local function read_svg(path)
  local f = io.open(path)
  local s = f and f:read("*a")
  if f then f:close() end
  os.remove(path)
  return s or ""
end

describe("examples/char_lstm.lua", function()
  local it_data = fortunes and it or pending
  it_data("trains a few batches, reports validation perplexity, saves and samples from a prompt", function()
    local plot, params = os.tmpname() .. ".svg", os.tmpname()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/char_lstm.lua --files fortunes "
      .. "--max-chars 20000 --epochs 1 --max-batches 6 --hidden 32 --bptt 16 --batch-size 8 --threads 1 "
      .. "--max-ppl 1000 --plot '%s' --params '%s' --sample 'The cat' --sample-len 40 2>&1",
      abs(build), plot, params))
    assert.equal(0, code, out)
    assert.truthy(out:find("epoch 1/1 6/6 ", 1, true), out)
    local ppl = tonumber(out:match("validation perplexity (%d+%.%d+) %(bound 1000: met%)"))
    -- below a uniform guess over the vocabulary (~90 characters) after 6 steps of Adam
    assert.truthy(ppl and ppl > 1 and ppl < 90, out)
    local sample = out:match("%-%-%-%- sample %(temperature 0%.7%)\n(.-)\n%-%-%-%-")
    assert.truthy(sample and sample:sub(1, 7) == "The cat" and #sample >= 47, out)
    assert.truthy(read_svg(plot):find("<svg", 1, true))
    -- --load: the saved model samples without training
    local out2, code2 = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/char_lstm.lua --files fortunes "
      .. "--max-chars 20000 --hidden 32 --threads 1 --load '%s' --sample 'A' --sample-len 10 2>&1",
      abs(build), params))
    os.remove(params)
    assert.equal(0, code2, out2)
    assert.falsy(out2:find("epoch", 1, true), out2)
    assert.truthy(out2:find("---- sample", 1, true), out2)
  end)

  it("rejects an unknown option with the usage", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/char_lstm.lua --bogus 2>&1",
      abs(build)))
    assert.equal(2, code, out)
    assert.truthy(out:find("unknown option --bogus", 1, true), out)
  end)
end)

describe("examples/transformer_lm.lua", function()
  local it_data = fortunes and it or pending
  it_data("trains a few steps with the causal mask and reports validation perplexity", function()
    local plot = os.tmpname() .. ".svg"
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/transformer_lm.lua "
      .. "--files fortunes --max-chars 20000 --steps 8 --eval-every 4 --context 16 --units 16 --ffn 32 "
      .. "--heads 2 --layers 1 --batch-size 8 --threads 1 --max-ppl 1000 --plot '%s' "
      .. "--sample 'Q' --sample-len 20 2>&1", abs(build), plot))
    assert.equal(0, code, out)
    local ppl = tonumber(out:match("validation perplexity (%d+%.%d+) %(bound 1000: met%)"))
    assert.truthy(ppl and ppl > 1 and ppl < 200, out)
    assert.truthy(out:find("---- sample", 1, true), out)
    assert.truthy(read_svg(plot):find("<svg", 1, true))
  end)
end)

describe("examples/lstm_forecast.lua", function()
  local it_data = sunspots and it or pending
  it_data("fits a few epochs and scores MASE against the seasonal-naive forecast (m=11)", function()
    local plot = os.tmpname() .. ".svg"
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/lstm_forecast.lua --epochs 8 "
      .. "--hidden 16 --threads 1 --plot '%s' 2>&1", abs(build), plot))
    assert.equal(0, code, out)
    local mase = tonumber(out:match("MASE (%d+%.%d+) %(bound 1: met%)"))
    assert.truthy(mase and mase > 0 and mase < 1, out)
    assert.truthy(out:find("held-out 1969-2008", 1, true), out)
    assert.truthy(out:find("seasonal-naive (m=11) MAE 25.73", 1, true), out)
    assert.truthy(read_svg(plot):find("<svg", 1, true))
  end)
end)

-- examples/gluonts_forecast.lua (#slow): DeepAR against seasonal naive on AirPassengers,
-- one epoch, the plot written (needs the data sets of tools/gluonts_data.sh)
local gts_data = require("mx.gluonts.repository").available("airpassengers")
describe("examples/gluonts_forecast.lua #slow", function()
  (gts_data and it or pending)("backtests, plots and saves a predictor", function()
    local plot, dir = os.tmpname(), os.tmpname()
    os.remove(dir)
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/gluonts_forecast.lua "
      .. "--epochs 1 --plot '%s' --save '%s' 2>&1", os.getenv("MX_BUILD_DIR") or "build", plot, dir))
    assert.equal(0, code, out)
    assert.matches("seasonal naive", out)
    assert.matches("DeepAR", out)
    assert.matches("loaded back", out)
    local f = io.open(plot, "rb")
    assert.matches("<svg", f:read("*a"))
    f:close()
    os.remove(plot)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
