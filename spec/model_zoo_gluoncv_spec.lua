-- gluon.model_zoo.vision's GluonCV networks vs their committed GluonCV 0.10 outputs
-- (#slow), and, with /opt/mxvenv, luamx's exports run by MXNet 1.9.1 and MXNet's saved
-- parameters loaded here (spec/helpers/zoo_check.lua; tools/fixtures/make_zoo_fixtures.py).
local mx = require("mx")
local Z = require("helpers.zoo_check")
local fill = require("helpers.zoo_fill")
local PY = "/opt/mxvenv/bin/python"

describe("#slow model_zoo.vision: GluonCV's networks vs their committed GluonCV outputs",
  function()
  for _, name in ipairs(Z.slow_names("gluoncv")) do
    it(name, function()
      Z.check(name)
      collectgarbage()
    end)
  end
end)

describe("#slow #mxnet model_zoo.vision with real MXNet 1.9.1", function()
  -- the fixture script needs MXNet and GluonCV (LuaJIT's popen close gives no exit status,
  -- so a venv without GluonCV would only show as missing files later)
  local function have_mxnet()
    return os.execute(PY .. " -c 'import mxnet, gluoncv' >/dev/null 2>&1") == 0
  end
  local LIVE = { "resnet18_v1", "mobilenetv2_0.25", "squeezenet1.0", "densenet121",
    "inceptionv3", "vgg11_bn", "alexnet", "mobilenetv3_large", "resnext50_32x4d",
    "se_resnet18_v1" }

  it("MXNet runs luamx's exports to luamx's outputs, and MXNet's saved params load here",
    function()
    if not have_mxnet() then pending("no MXNet venv with GluonCV at " .. PY) return end
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local ours = {}
    for _, name in ipairs(LIVE) do
      local net, x = Z.build(name)
      fill.params(net)
      net:hybridize()
      ours[name] = net(x)
      net:export(dir .. "/" .. name)
    end
    local p = io.popen(PY .. " tools/fixtures/make_zoo_fixtures.py live '" .. dir .. "' "
      .. table.concat(LIVE, " ") .. " 2>&1")
    local out = p:read("*a")
    assert(p:close(), out)
    for _, name in ipairs(LIVE) do
      local run = mx.nd.load(dir .. "/" .. name .. "-mxrun.params").out
      local d = Z.rel_diff(run, ours[name])
      assert(d < 2e-4, string.format("%s: MXNet's run of our export differs by %.3g", name, d))
      local net, x = Z.build(name)
      net:load_parameters(dir .. "/" .. name .. "-mx.params")
      local want = mx.nd.load(dir .. "/" .. name .. "-mxout.params").out
      d = Z.rel_diff(net(x), want)
      assert(d < 2e-4, string.format("%s: MXNet's params here differ by %.3g", name, d))
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
