-- mx.gluoncv: GluonCV's module names (model_zoo, nn) over the vision zoo.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local FILE = "gluoncv_spec.lua"

describe("mx.gluoncv", function()
  local gcv = require("mx.gluoncv")

  it("model_zoo.get_model builds GluonCV's classification networks by name", function()
    local names = gcv.model_zoo.get_model_list()
    assert.are.equal(54, #names)
    local net = gcv.model_zoo.get_model("MobileNetV3_Small", { classes = 7 })
    net:initialize()
    assert.are.same({ 2, 7 }, net(nd.ones { 2, 3, 64, 64 }):shape())
    assert.truthy(net:collect_params()["features.3.se.conv1.weight"])
  end)

  it("pretrained weights come from GluonCV's store; errors name the file", function()
    local d = os.tmpname()
    os.remove(d)
    H.assert_error(function(mark) mark() gcv.model_zoo.get_model("resnet50_v1",
      { pretrained = true, root = d }) end, FILE, "put GluonCV's model-store file "
      .. "resnet50_v1-cc729d95.params (sha1 cc729d95031ca98cf2ff362eb57dee4d9994e4b2) in " .. d)
    H.assert_error(function(mark) mark() gcv.model_zoo.get_model("resnet50_v9") end, FILE,
      "get_model: unknown model 'resnet50_v9'")
    H.assert_error(function(mark) mark() gcv.model_zoo.get_model("vgg11", { nope = 1 }) end, FILE,
      "get_model: unknown option 'nope'")
  end)

  it("nn's hard activations are GluonCV's: relu6(x + 3) / 6 and x times it", function()
    local x = nd.array { -4, -3, -1.5, 0, 1.5, 3, 4 }
    local hs = gcv.nn.HardSigmoid()
    local sw = gcv.nn.HardSwish()
    local want = {}
    for i, v in ipairs(x:tolist()) do want[i] = math.min(math.max(v + 3, 0), 6) / 6 end
    assert(H.maxdiff(hs(x), want) < 1e-7)
    for i, v in ipairs(x:tolist()) do want[i] = v * want[i] end
    assert(H.maxdiff(sw(x), want) < 1e-7)
    assert.are.same({ 0, 0, 6 }, gcv.nn.ReLU6()(nd.array { -1, 0, 7 }):tolist())
  end)
end)
