-- spec/gluoncv_ssd_train_spec.lua — SSD in training: the hybridized network (MobileNet 0.25
-- base through FeatureExpander, as examples/ssd_train.lua builds it) gives eager mode's
-- training outputs, SSDMultiBoxLoss gradients and BatchNorm running statistics, both under
-- autograd.record and in train mode without recording (what the example's anchors come from).
local mx = require("mx")
local nd = mx.nd
local ssd = require("mx.gluoncv.model_zoo.ssd")
local gcv = require("mx.gluoncv")

local S = 64

local function build(hybrid)
  mx.random.seed(7)
  local base = mx.gluon.model_zoo.vision.get_model("mobilenet0.25")
  local scopes = {}
  for i = 1, 81 do scopes[i] = "mobilenet0_" end
  local features = ssd.FeatureExpander(base.features:children(), scopes, { 69, 81 }, { 32, 32 })
  local k = S / 128
  local R3 = { 1, 2, 0.5 }
  local net = ssd.SSD(features, { 16 * k, 32 * k, 56 * k, 88 * k, 124 * k }, { R3, R3, R3, R3 },
    { 16, 32, 64, 64 }, { "a", "b", "c" }, { anchor_alloc_size = S / 16 })
  net:initialize(mx.init.Xavier({ magnitude = 2 }))
  if hybrid then net:hybridize() end
  return net
end

local function maxdiff(a, b)
  return nd.max(nd.abs(nd.sub(a, b))):asscalar()
end

-- one training step's values: train-mode anchors, the record's outputs and losses, every
-- parameter's gradient and every parameter's value after (the running statistics moved)
local function step(hybrid)
  local net = build(hybrid)
  local anchors
  mx.autograd.train_mode(function() anchors = select(3, net(nd.zeros({ 1, 3, S, S }))) end)
  mx.random.seed(8)
  local x = nd.random.uniform(-1, 1, { 2, 3, S, S })
  local n = anchors:shape()[2]
  local cls_t = nd.floor(nd.random.uniform(-1, 4, { 2, n }))
  local box_t = nd.random.normal(0, 1, { 2, n, 4 })
  local loss = gcv.loss.SSDMultiBoxLoss()
  local cls_p, box_p, sum_l
  mx.autograd.record(function()
    cls_p, box_p = net(x)
    sum_l = loss(cls_p, box_p, cls_t, box_t)
  end)
  mx.autograd.backward(sum_l)
  local params, grads = {}, {}
  local d = net:collect_params()
  for _, name in ipairs(d:keys()) do
    local p = d:get(name)
    params[name] = p:data():copy()
    if p.grad_req ~= "null" then grads[name] = p:grad():copy() end
  end
  return { anchors = anchors, cls = cls_p, box = box_p, loss = sum_l[1], infer = net(x) },
    params, grads
end

describe("gluoncv SSD training, hybridized", function()
  it("gives eager mode's outputs, gradients and running statistics", function()
    local ve, pe, ge = step(false)
    local vh, ph, gh = step(true)
    for _, k in ipairs({ "anchors", "cls", "box", "loss", "infer" }) do
      assert(maxdiff(ve[k], vh[k]) <= 1e-4, k .. ": " .. maxdiff(ve[k], vh[k]))
    end
    local moved, ng = 0, 0
    for name, v in pairs(pe) do
      assert(ph[name], "hybridized network lacks " .. name)
      assert(maxdiff(v, ph[name]) <= 1e-5, name .. ": " .. maxdiff(v, ph[name]))
      if name:match("running_mean$") and nd.max(nd.abs(v)):asscalar() > 1e-3 then moved = moved + 1 end
    end
    for name, g in pairs(ge) do
      local scale = math.max(1, nd.max(nd.abs(g)):asscalar())
      assert(maxdiff(g, gh[name]) <= 1e-3 * scale, name .. ": " .. maxdiff(g, gh[name]))
      ng = ng + 1
    end
    assert.is_true(moved > 10, "running means moved: " .. moved)
    assert.is_true(ng > 50, "gradients compared: " .. ng)
  end)
end)
