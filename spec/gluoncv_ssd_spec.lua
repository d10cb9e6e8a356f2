-- mx.gluoncv.model_zoo.ssd against GluonCV 0.10: with the deterministic weights of
-- spec/helpers/zoo_fill.lua (anchors and init_scale kept) SSD on VGG16-atrous 300, ResNet-50
-- v1 and MobileNet 1.0 give GluonCV's detections and parameter counts
-- (spec/fixtures/ssd_outputs.params: tools/fixtures/make_ssd_fixtures.py); with /opt/mxvenv
-- GluonCV's own saved parameters load and give its outputs, and so do its exported models
-- through SymbolBlock.imports.
local mx = require("mx")
local nd = mx.nd
local ssd = require("mx.gluoncv.model_zoo.ssd")
local fill = require("helpers.zoo_fill")
local PY = "/opt/mxvenv/bin/python"

-- name, constructor, input size, NMS'd rows compared (ResNet's saturated scores tie after 20)
local NETS = { { "ssd_300_vgg16_atrous_voc", ssd.ssd_300_vgg16_atrous_voc, 300, 100 },
  { "ssd_512_resnet50_v1_voc", ssd.ssd_512_resnet50_v1_voc, 256, 20 },
  { "ssd_512_mobilenet1.0_voc", ssd.ssd_512_mobilenet1_0_voc, 256, 100 } }
local EVERY = 37

local function constant(name) return name:match("anchors$") or name:match("init_scale$") end

local function build(v)
  local net = v[2]()
  net:initialize()
  local x = fill.data({ 1, 3, v[3], v[3] })
  net:set_nms(0, -1, -1)
  net(x)
  return net, x
end

local function rows(net, x)
  local ids, scores, bboxes = net(x)
  return nd.concat({ ids, scores, bboxes }, { dim = -1 }):totable()[1]
end

-- ids equal, scores within 1e-4, boxes within 1e-3 of the largest coordinate
local function same(got, want, n, what)
  local m = 1
  for r = 1, n do
    for k = 3, 6 do m = math.max(m, math.abs(want[r][k])) end
  end
  for r = 1, n do
    local a, b = got[r], want[r]
    assert(a[1] == b[1], string.format("%s row %d: id %g vs %g", what, r, a[1], b[1]))
    assert(math.abs(a[2] - b[2]) < 1e-4, string.format("%s row %d: score %g vs %g", what, r,
      a[2], b[2]))
    for k = 3, 6 do
      assert(math.abs(a[k] - b[k]) <= 1e-3 * m,
        string.format("%s row %d: coordinate %d: %g vs %g", what, r, k - 2, a[k], b[k]))
    end
  end
end

describe("#slow gluoncv SSD vs GluonCV 0.10 (committed outputs)", function()
  local F = nd.load("spec/fixtures/ssd_outputs.params")
  for _, v in ipairs(NETS) do
    it(v[1] .. ": parameter names and count, every class of every anchor, the NMS'd best",
      function()
      local net, x = build(v)
      local n, values = 0, 0
      local params = net:collect_params()
      for _, p in params:items() do n, values = n + 1, values + p:data():size() end
      assert.are.same(F[v[1] .. ":count"]:tolist(), { n, values })
      assert.truthy(params["anchor_generators.6.anchors"] or params["anchor_generators.5.anchors"])
      assert.truthy(params["class_predictors.0.predictor.weight"])
      if v[1]:match("resnet") then
        assert.truthy(params["features.resnetv10_stage3_conv18_bias"])
        assert.truthy(params["features.expand_trans_bn3_moving_var"])
      elseif v[1]:match("vgg") then
        assert.truthy(params["features.norm4.scale"])
        assert.truthy(params["features.extras.3.2.weight"])
      end
      fill.params(net, constant)
      local all = rows(net, x)
      assert.are.equal(F[v[1] .. ":rows"]:tolist()[1], #all)
      local want, got = F[v[1] .. ":raw"]:totable()[1], {}
      for i = 1, #want do got[i] = all[EVERY * (i - 1) + 1] end
      same(got, want, #want, v[1] .. " raw")
      net:set_nms(0.45, 400, 100)
      same(rows(net, x), F[v[1] .. ":nms"]:totable()[1], v[4], v[1] .. " nms")
    end)
  end

  it("is reachable by GluonCV's names through gcv.model_zoo.get_model", function()
    local gcv = require("mx.gluoncv")
    local net = gcv.model_zoo.get_model("ssd_512_mobilenet1.0_voc", { classes = { "a", "b" } })
    assert.are.equal(2, #net.classes)
    assert.has_error(function() gcv.model_zoo.get_model("ssd_300_vgg16_atrous_voc",
      { pretrained = true, root = "/nonexistent" }) end)
  end)
end)

describe("#slow #mxnet gluoncv SSD with GluonCV's saved and exported models", function()
  it("GluonCV's save_parameters files load here, its exports run, both give its outputs",
    function()
    -- LuaJIT's popen close gives no exit status: a venv without GluonCV would only show as
    -- missing files later
    if os.execute(PY .. " -c 'import gluoncv' >/dev/null 2>&1") ~= 0 then
      pending("no MXNet venv with GluonCV at " .. PY)
      return
    end
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local names = {}
    for i, v in ipairs(NETS) do names[i] = v[1] end
    local p = io.popen(PY .. " tools/fixtures/make_ssd_fixtures.py live '" .. dir .. "' "
      .. table.concat(names, " ") .. " 2>&1")
    local out = p:read("*a")
    assert(p:close(), out)
    for _, v in ipairs(NETS) do
      local base = dir .. "/" .. v[1]
      local G = nd.load(base .. "-gcvout.params")
      local want = G.out:totable()[1]
      local net = v[2]()
      net:initialize()
      net:set_nms(0, -1, -1)
      net(G.x)
      net:load_parameters(base .. "-gcv.params")
      net:set_nms(0.45, 400, 100)
      same(rows(net, G.x), want, #want, v[1] .. " loaded")
      local sb = mx.gluon.SymbolBlock.imports(base .. "-symbol.json", { "data" },
        base .. "-0000.params")
      local ids, scores, bboxes = sb(G.x)
      same(nd.concat({ ids, scores, bboxes }, { dim = -1 }):totable()[1], want, #want,
        v[1] .. " imported")
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
