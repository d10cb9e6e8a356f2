-- spec/helpers/zoo_check.lua — what the model-zoo-vs-MXNet specs share: building a network
-- with the deterministic weights of spec/helpers/zoo_fill.lua, and comparing its
-- parameter count and output with MXNet's committed ones
-- (spec/fixtures/zoo_expected.lua, zoo_outputs.params: tools/fixtures/make_zoo_fixtures.py).
local mx = require("mx")
local fill = require("helpers.zoo_fill")
local assert = require("luassert")

local M = {}
M.EXPECTED = dofile("spec/fixtures/zoo_expected.lua")
local outputs

local function counts(net)
  local arrays, values = 0, 0
  for _, p in net:collect_params():items() do
    arrays, values = arrays + 1, values + p:data():size()
  end
  return arrays, values
end

-- max |a - b| / max(1, max |b|): outputs of deep random networks reach the hundreds
function M.rel_diff(a, b)
  local x, y = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  assert(#x == #y, "sizes differ")
  local d, m = 0, 1
  for i = 1, #y do
    local e = math.abs(x[i] - y[i])
    if e ~= e then return math.huge end
    if e > d then d = e end
    if math.abs(y[i]) > m then m = math.abs(y[i]) end
  end
  return d / m
end

-- build(name): the initialised network (shapes known), its input, its fixture entry
function M.build(name)
  local e = M.EXPECTED[name]
  local net = mx.gluon.model_zoo.vision.get_model(name)
  net:initialize()
  local x = fill.data({ 1, 3, e.size, e.size })
  net(x)
  return net, x, e
end

-- check(name): parameter counts and the output with deterministic weights equal MXNet's
function M.check(name)
  outputs = outputs or mx.nd.load("spec/fixtures/zoo_outputs.params")
  local net, x, e = M.build(name)
  local arrays, values = counts(net)
  assert.are.same({ e.arrays, e.values }, { arrays, values }, name)
  fill.params(net)
  local d = M.rel_diff(net(x), outputs[name])
  assert(d < 2e-4, string.format("%s: output differs from MXNet's by %.3g (relative)", name, d))
end

M.FAST = { "mobilenet0.25", "mobilenetv2_0.25", "squeezenet1.1", "resnet18_v1",
  "mobilenetv3_small", "se_resnet18_v2" }

-- the fixture's networks of one source ("mxnet" or "gluoncv") minus the FAST ones, sorted
function M.slow_names(source)
  local fast, names = {}, {}
  for _, n in ipairs(M.FAST) do fast[n] = true end
  for k, e in pairs(M.EXPECTED) do
    if e.source == source and not fast[k] then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

return M
