-- mx.gluoncv.model_zoo.segmentation against GluonCV 0.10: FCN and DeepLabV3 on ResNet-50
-- (dilated v1s) with the deterministic weights of spec/helpers/zoo_fill.lua give GluonCV's
-- main and auxiliary outputs on a 64x64 input (spec/fixtures/gluoncv_segmentation.params,
-- every 4th pixel, all 21 classes: tools/fixtures/make_segmentation_fixture.py) with its
-- parameter names, shapes and order (spec/fixtures/gluoncv_segmentation.lua); the ResNet-101
-- and ADE20K networks' counts (#slow); predict, the names and the errors.
local mx = require("mx")
local nd = mx.nd
local gcv = require("mx.gluoncv")
local seg = require("mx.gluoncv.model_zoo.segmentation")
local fill = require("helpers.zoo_fill")
local EXPECTED = dofile("spec/fixtures/gluoncv_segmentation.lua")

local function build(name)
  local net = gcv.model_zoo.get_model(name, { crop_size = 64 })
  net:initialize()
  local x = fill.data({ 1, 3, 64, 64 })
  net(x)
  return net, x
end

local function counted(net)
  local n, values = 0, 0
  for _, p in net:collect_params():items() do n, values = n + 1, values + p:data():size() end
  return n, values
end

-- every 4th pixel of (1, C, 64, 64) as (1, C, 16, 16)
local function sub(t)
  return nd.slice(t, { begin = { 1, 1, 1, 1 }, ["end"] = { 1, 21, 64, 64 }, step = { 1, 1, 4, 4 } })
end

local function close(got, want, what)
  local g, w = got:totable(), want:totable()
  local m = nd.max(nd.abs(want)):asscalar()
  local worst = 0
  for c = 1, #w[1] do
    for i = 1, #w[1][c] do
      for j = 1, #w[1][c][i] do
        worst = math.max(worst, math.abs(g[1][c][i][j] - w[1][c][i][j]))
      end
    end
  end
  assert(worst <= 2e-4 * m, string.format("%s: off by %g (largest value %g)", what, worst, m))
end

describe("gluoncv segmentation vs GluonCV 0.10 (committed outputs)", function()
  local F = nd.load("spec/fixtures/gluoncv_segmentation.params")
  for _, name in ipairs({ "fcn_resnet50_voc", "deeplab_resnet50_voc" }) do
    it(name .. ": parameter names, shapes and order; main and aux outputs", function()
      local net, x
      if name == "deeplab_resnet50_voc" then -- not in GluonCV's get_model table: get_deeplab
        net = gcv.model_zoo.get_deeplab({ backbone = "resnet50", crop_size = 64 })
        net:initialize()
        x = fill.data({ 1, 3, 64, 64 })
        net(x)
      else
        net, x = build(name)
      end
      local want = EXPECTED[name]
      local got = {}
      for k, p in net:collect_params():items() do got[#got + 1] = { k, p:data():shape() } end
      assert.are.equal(want.arrays, #got)
      for i, row in ipairs(want) do assert.are.same(row, got[i]) end
      local _, values = counted(net)
      assert.are.equal(want.values, values)
      fill.params(net)
      local out, aux = net(x)
      assert.are.same({ 1, 21, 64, 64 }, out:shape())
      assert.are.same({ 1, 21, 64, 64 }, aux:shape())
      close(sub(out), F[name .. ":out"], name .. " output")
      close(sub(aux), F[name .. ":aux"], name .. " aux output")
      -- evaluate is the main output; predict follows the input's size
      close(sub(net:evaluate(x)), F[name .. ":out"], name .. " evaluate")
      local p = net:predict(fill.data({ 1, 3, 48, 40 }))
      assert.are.same({ 1, 21, 48, 40 }, p:shape())
      assert.are.same({ 1, 21, 64, 64 }, (net(x)):shape())
    end)
  end

  it("#slow ResNet-101 and ADE20K networks: parameter counts", function()
    for _, name in ipairs({ "fcn_resnet101_voc", "deeplab_resnet101_voc",
      "deeplab_resnet50_ade" }) do
      local net = build(name)
      local n, values = counted(net)
      assert.are.same({ EXPECTED[name].arrays, EXPECTED[name].values }, { n, values }, name)
    end
  end)
end)

describe("gluoncv segmentation: names, options, errors", function()
  it("get_model knows GluonCV's names; aux=false gives one output", function()
    local names = {}
    for _, n in ipairs(gcv.model_zoo.get_model_list()) do names[n] = true end
    for _, n in ipairs({ "fcn_resnet50_voc", "fcn_resnet101_coco", "deeplab_resnet101_voc",
      "deeplab_resnet50_ade", "deeplab_resnet152_coco" }) do
      assert.is_true(names[n], n)
    end
    local net = seg.get_fcn({ dataset = "citys", aux = false, crop_size = 32 })
    net:initialize()
    local outs = { net(nd.ones({ 2, 3, 32, 32 })) }
    assert.are.equal(1, #outs)
    assert.are.same({ 2, 19, 32, 32 }, outs[1]:shape())
    assert.is_nil(net:collect_params()["auxlayer.block.0.weight"])
  end)

  it("symbol JSON of the resize has no num_args (MXNet's BilinearResize2D refuses it)", function()
    local json = mx.sym.bilinear_resize2d(mx.sym.var("x"), { height = 4, width = 4 }):tojson()
    assert.truthy(json:find('"op":"_contrib_BilinearResize2D"', 1, true), json)
    assert.falsy(json:find("num_args", 1, true), json)
    local like = mx.sym.bilinear_resize2d(mx.sym.var("x"), mx.sym.var("y"), { mode = "like" })
    local back = mx.sym.fromjson(like:tojson())
    assert.are.equal(2, #back:list_arguments())
  end)

  it("errors name the function and the argument", function()
    assert.has_error(function() seg.get_fcn({ dataset = "imagenet" }) end,
      "get_fcn: unknown dataset 'imagenet' (pascal_voc, pascal_aug, ade20k, coco, citys)")
    local ok, err = pcall(function()
      local n = gcv.model_zoo.get_deeplab({ backbone = "vgg16" })
      return n
    end)
    assert.is_false(ok)
    assert.truthy(err:find("unknown backbone 'vgg16'", 1, true), err)
    assert.truthy(err:find("gluoncv_segmentation_spec.lua", 1, true), err)
    ok, err = pcall(gcv.model_zoo.get_model, "fcn_resnet50_voc", { dataset = "coco" })
    assert.is_false(ok)
    assert.truthy(err:find("fcn_resnet50_voc: dataset and backbone are fixed by the name", 1,
      true), err)
    ok, err = pcall(seg.get_fcn, { crop = 3 })
    assert.is_false(ok)
    assert.truthy(err:find("crop", 1, true), err)
    ok, err = pcall(seg.get_fcn, { crop_size = 4 })
    assert.is_false(ok)
    assert.truthy(err:find("height must be an integer >= 8, got 4", 1, true), err)
  end)
end)

-- with /opt/gcvvenv (GluonCV 0.10 on MXNet 1.9.1): GluonCV's own save_parameters files
-- (random weights) load here and give its outputs, and luamx's export runs in MXNet's
-- SymbolBlock.imports to the same outputs
local PY = "/opt/gcvvenv/bin/python"
local have_py = io.open(PY, "rb")
if have_py then have_py:close() end
describe("#slow #gcvvenv gluoncv segmentation with GluonCV's saved parameters", function()
  local it_py = have_py and it or pending
  it_py("GluonCV's files load here; luamx's export runs in MXNet", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local names = { "fcn_resnet50_voc", "deeplab_resnet50_voc" }
    local x = fill.data({ 1, 3, 64, 64 })
    for _, name in ipairs(names) do -- luamx's export of the deterministic network
      local net
      if name:match("^deeplab") then
        net = gcv.model_zoo.get_deeplab({ backbone = "resnet50", crop_size = 64 })
      else
        net = gcv.model_zoo.get_model(name, { crop_size = 64 })
      end
      net:initialize()
      net(x)
      fill.params(net)
      net:hybridize()
      net(x)
      net:export(dir .. "/" .. name)
    end
    local cmd = string.format("%s tools/fixtures/make_segmentation_fixture.py live '%s' %s "
      .. ">/dev/null 2>&1", PY, dir, table.concat(names, " "))
    local ok = os.execute(cmd)
    assert(ok == true or ok == 0, cmd)
    local F = nd.load("spec/fixtures/gluoncv_segmentation.params")
    for _, name in ipairs(names) do
      local run = nd.load(dir .. "/" .. name .. "-mxrun.params")
      close(sub(run.out), F[name .. ":out"], name .. " exported, run by MXNet")
      close(sub(run.aux), F[name .. ":aux"], name .. " exported aux, run by MXNet")
      local net
      if name:match("^deeplab") then
        net = gcv.model_zoo.get_deeplab({ backbone = "resnet50", crop_size = 64 })
      else
        net = gcv.model_zoo.get_model(name, { crop_size = 64 })
      end
      net:load_parameters(dir .. "/" .. name .. "-gcv.params")
      local want = nd.load(dir .. "/" .. name .. "-gcvout.params")
      local out, aux = net(x)
      close(sub(out), sub(want.out), name .. " GluonCV's parameters")
      close(sub(aux), sub(want.aux), name .. " GluonCV's parameters, aux")
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
