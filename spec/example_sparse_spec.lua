-- examples/sparse_linear.lua, factorization_machine.lua and sparse_embedding.lua end to
-- end on small subsets of Debian's fortunes, through bin/mx, as a user runs them.
local lib = require("mx.core.lib")

local build = lib.libpath:match("^(.*)/lib/mx/libmx%.so$")
local function abs(p) return p:sub(1, 1) == "/" and p or (os.getenv("PWD") .. "/" .. p) end
-- LuaJIT's popen:close() gives no exit status: the command echoes it
local function run(cmd)
  local p = assert(io.popen(string.format("MX_BUILD_DIR='%s' %s 2>&1", abs(build), cmd)
    .. '; echo "EXIT=$?"'))
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.*)EXIT=(%d+)\n$")
  return body, tonumber(code)
end

local have = io.open("/usr/share/games/fortunes/computers", "rb")
if have then have:close() end
local it_data = have and it or pending

describe("examples/sparse_linear.lua", function()
  it_data("trains a row_sparse linear classifier on 2 devices with DataLoader workers, well "
    .. "above chance", function()
    local work = os.tmpname()
    os.remove(work)
    local out, code = run("bin/mx examples/sparse_linear.lua --per-class 80 --epochs 8 --devices 2 "
      .. "--workers 2 --quiet --work '" .. work .. "'")
    assert.equal(0, code, out)
    -- the LibSVM files it wrote and read back
    local f = io.open(work .. "/train.libsvm", "rb")
    assert.truthy(f, out)
    local first = f:read("*l")
    f:close()
    assert.truthy(first:match("^%d %d+:[%d.e-]+"), first)
    os.execute("rm -rf '" .. work .. "'")
    assert.falsy(out:find("Storage type fallback", 1, true), out)
    local acc, n, chance = out:match("held%-out accuracy (%d%.%d+) over (%d+) quotes %(chance (%d%.%d+)%)")
    assert.truthy(acc, out)
    assert.equal("96", n)
    assert.is_true(tonumber(acc) > 2 * tonumber(chance), out)
    assert.truthy(out:find("on 2 device(s)", 1, true), out)
  end)

  it("rejects bad options with a usage line", function()
    local out, code = run("bin/mx examples/sparse_linear.lua --devices 3")
    assert.equal(2, code, out)
    assert.truthy(out:find("--devices must be 1 or 2", 1, true), out)
    out, code = run("bin/mx examples/sparse_linear.lua --optimizer lbfgs")
    assert.equal(2, code, out)
  end)
end)

describe("examples/factorization_machine.lua", function()
  it_data("a factorization machine on computers vs politics beats the majority class", function()
    local out, code = run("bin/mx examples/factorization_machine.lua --per-class 300 --epochs 6 --quiet")
    assert.equal(0, code, out)
    assert.falsy(out:find("Storage type fallback", 1, true), out)
    local acc, maj = out:match("held%-out accuracy (%d%.%d+) over 120 quotes %(majority class (%d%.%d+)%)")
    assert.truthy(acc, out)
    assert.is_true(tonumber(acc) > tonumber(maj) + 0.15, out)
  end)

  it("needs two categories", function()
    local out, code = run("bin/mx examples/factorization_machine.lua --categories food")
    assert.equal(2, code, out)
    assert.truthy(out:find("must name two categories", 1, true), out)
  end)
end)

describe("examples/sparse_embedding.lua", function()
  it_data("only the rows training looked up change, on 2 devices alike", function()
    local out, code = run("bin/mx examples/sparse_embedding.lua --per-class 60 --epochs 3 --devices 2 "
      .. "--quiet")
    assert.equal(0, code, out)
    local seen, moved, unseen, umoved = out:match("rows looked up in training: (%d+), moved (%d+); "
      .. "rows never looked up: (%d+), moved (%d+); both devices' copies equal")
    assert.truthy(seen, out)
    assert.equal(seen, moved)
    assert.is_true(tonumber(unseen) > 100, out)
    assert.equal("0", umoved)
    local acc = tonumber(out:match("held%-out accuracy (%d%.%d+)"))
    assert.is_true(acc > 0.25, out)
  end)
end)
