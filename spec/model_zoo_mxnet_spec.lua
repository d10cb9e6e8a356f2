-- gluon.model_zoo.vision against MXNet 1.9.1 and GluonCV 0.10: every classification
-- network with deterministic weights (spec/helpers/zoo_fill.lua, the same values as
-- tools/fixtures/zoo_fill.py) gives MXNet's committed output and parameter count
-- (spec/fixtures/zoo_outputs.params, zoo_expected.lua: tools/fixtures/make_zoo_fixtures.py);
-- with /opt/mxvenv, MXNet runs luamx's exports and luamx loads MXNet's saved parameters.
local mx = require("mx")
local vision = mx.gluon.model_zoo.vision
local fill = require("helpers.zoo_fill")

local EXPECTED = dofile("spec/fixtures/zoo_expected.lua")
local OUTPUTS = mx.nd.load("spec/fixtures/zoo_outputs.params")
local PY = "/opt/mxvenv/bin/python"

local function counts(net)
  local arrays, values = 0, 0
  for _, p in net:collect_params():items() do
    arrays, values = arrays + 1, values + p:data():size()
  end
  return arrays, values
end

-- max |a - b| / max(1, max |b|): outputs of deep random networks reach the hundreds
local function rel_diff(a, b)
  local x, y = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  assert.are.equal(#y, #x)
  local d, m = 0, 1
  for i = 1, #y do
    local e = math.abs(x[i] - y[i])
    if e ~= e then return math.huge end
    if e > d then d = e end
    if math.abs(y[i]) > m then m = math.abs(y[i]) end
  end
  return d / m
end

local function build(name)
  local e = EXPECTED[name]
  local net = vision.get_model(name)
  net:initialize()
  local x = fill.data({ 1, 3, e.size, e.size })
  net(x)
  return net, x, e
end

local function check_fixture(name)
  local net, x, e = build(name)
  local arrays, values = counts(net)
  assert.are.same({ e.arrays, e.values }, { arrays, values }, name)
  fill.params(net)
  local y = net(x)
  local d = rel_diff(y, OUTPUTS[name])
  assert(d < 2e-4, string.format("%s: output differs from MXNet's by %.3g (relative)", name, d))
end

local FAST = { "mobilenet0.25", "mobilenetv2_0.25", "squeezenet1.1", "resnet18_v1",
  "mobilenetv3_small", "se_resnet18_v2" }

describe("model_zoo.vision vs MXNet 1.9.1 / GluonCV 0.10 (committed outputs)", function()
  for _, name in ipairs(FAST) do
    it(name .. ": parameter count and output equal MXNet's", function() check_fixture(name) end)
  end
end)

describe("#slow model_zoo.vision: every network vs its committed MXNet/GluonCV output",
  function()
  local names = {}
  for k in pairs(EXPECTED) do names[#names + 1] = k end
  table.sort(names)
  local fast = {}
  for _, n in ipairs(FAST) do fast[n] = true end
  for _, name in ipairs(names) do
    if not fast[name] then
      it(name, function()
        check_fixture(name)
        collectgarbage()
      end)
    end
  end
end)

describe("#slow #mxnet model_zoo.vision with real MXNet 1.9.1", function()
  local function have_mxnet()
    local f = io.open(PY, "r")
    if f then f:close() end
    return f ~= nil
  end
  local LIVE = { "resnet18_v1", "mobilenetv2_0.25", "squeezenet1.0", "densenet121",
    "inceptionv3", "vgg11_bn", "alexnet", "mobilenetv3_large", "resnext50_32x4d",
    "se_resnet18_v1" }

  it("MXNet runs luamx's exports to luamx's outputs, and MXNet's saved params load here",
    function()
    if not have_mxnet() then pending("no MXNet venv at " .. PY) return end
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local ours = {}
    for _, name in ipairs(LIVE) do
      local net, x = build(name)
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
      local d = rel_diff(run, ours[name])
      assert(d < 2e-4, string.format("%s: MXNet's run of our export differs by %.3g", name, d))
      local net, x = build(name)
      net:load_parameters(dir .. "/" .. name .. "-mx.params")
      local want = mx.nd.load(dir .. "/" .. name .. "-mxout.params").out
      d = rel_diff(net(x), want)
      assert(d < 2e-4, string.format("%s: MXNet's params here differ by %.3g", name, d))
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
