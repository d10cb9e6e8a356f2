-- examples/fcn_segmentation.lua (#slow): a smoke run through bin/mx as a user runs it: real
-- opencv-doc pictures with pasted objects, FCN trained two steps, the test metrics.
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

local have = io.open("/usr/share/doc/opencv-doc/examples/data/starry_night.jpg", "rb")
if have then have:close() end

describe("examples/fcn_segmentation.lua #slow", function()
  local it_data = have and it or pending
  it_data("builds the pictures, trains, reports pixel accuracy and mIoU", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/fcn_segmentation.lua "
      .. "--steps 2 --size 32 --train 8 --test 4 --batch-size 4 2>&1", abs(build)))
    assert.equal(0, code, out)
    local bg, o, s = out:match("test pixels: background (%d%.%d+), orange (%d%.%d+), starry "
      .. "night (%d%.%d+)")
    assert.truthy(bg, out)
    bg, o, s = tonumber(bg), tonumber(o), tonumber(s)
    assert.truthy(math.abs(bg + o + s - 1) < 2e-3 and o > 0 and s > 0 and bg > 0.3, out)
    assert.truthy(out:find("step 2  loss %d"), out)
    local acc, miou, abg = out:match("pixel accuracy (%d%.%d+)  mIoU (%d%.%d+)  %(all "
      .. "background: (%d%.%d+)")
    assert.truthy(acc and tonumber(acc) <= 1 and tonumber(miou) <= 1, out)
    assert.truthy(math.abs(tonumber(abg) - bg) < 1e-3, out)
  end)

  it("rejects a bad size", function()
    local out, code = run(string.format("MX_BUILD_DIR='%s' bin/mx examples/fcn_segmentation.lua "
      .. "--size 30 2>&1", abs(build)))
    assert.equal(2, code, out)
    assert.truthy(out:find("--size must be a multiple of 8, >= 32", 1, true), out)
  end)
end)
