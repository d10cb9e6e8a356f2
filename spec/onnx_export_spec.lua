-- ONNX export (mx.onnx.export_model as MXNet 1.9's, HybridBlock:export_onnx): ResNets,
-- an LSTM, a GRU and a transformer encoder exported and run back through luamx's own
-- importer against the block's outputs; with a dev venv holding onnx, onnxruntime and
-- safetensors (/opt/torchvenv or /opt/ortvenv; #slow #torch) every family of the vision
-- zoo as well, through onnx's checker and ONNX Runtime (tools/onnx/check_export.py, 1e-4
-- of the output's scale; MX_ONNX_EXPORT_MODELS=a,b runs those cases only). Unsupported
-- ops fail naming the node.
local mx = require("mx")
local onnx = require("mx.onnx")
local sh = require("helpers.sh")

local function dev_python()
  for _, py in ipairs { "/opt/torchvenv/bin/python", "/opt/ortvenv/bin/python" } do
    local f = io.open(py, "r")
    if f then
      f:close()
      if os.execute(py .. " -c 'import onnx, onnxruntime, safetensors' 2>/dev/null") == 0 then return py end
    end
  end
end

local function tmpdir()
  local p = io.popen("mktemp -d /tmp/luamx_onnx_exp.XXXXXX")
  local d = p:read("*l")
  p:close()
  return d
end

local function max_rel(a, b)
  local x, y = a:reshape { -1 }:tolist(), b:reshape { -1 }:tolist()
  local scale, worst = 0, 0
  for i = 1, #y do scale = math.max(scale, math.abs(y[i])) end
  for i = 1, #y do worst = math.max(worst, math.abs(x[i] - y[i])) end
  return worst / (scale > 0 and scale or 1)
end

-- name -> (block maker, input shape)
local CASES = {
  resnet18_v1 = function() return mx.gluon.model_zoo.vision.resnet18_v1(), { 1, 3, 64, 64 } end,
  resnet18_v2 = function() return mx.gluon.model_zoo.vision.resnet18_v2(), { 1, 3, 64, 64 } end,
  lstm = function()
    return mx.gluon.rnn.LSTM(16, 2, { bidirectional = true, input_size = 8 }), { 5, 3, 8 }
  end,
  gru = function() return mx.gluon.rnn.GRU(16, 1, { input_size = 8 }), { 5, 3, 8 } end,
  transformer = function()
    return mx.gluon.nn.TransformerEncoder({ num_layers = 2, units = 32, hidden_size = 64, num_heads = 4 }),
      { 2, 7, 32 }
  end,
}
local ORDER = { "resnet18_v1", "resnet18_v2", "lstm", "gru", "transformer" }
-- every ResNet, and each other family of the zoo at the smallest input its pooling takes
-- (the depths of a family differ in block counts only: VGG 13-19, DenseNet 161-201)
local SLOW = { "resnet34_v1", "resnet34_v2", "resnet50_v1", "resnet50_v2", "resnet101_v1",
  "resnet101_v2", "resnet152_v1", "resnet152_v2", "alexnet", "vgg11", "vgg16_bn",
  "squeezenet1.0", "squeezenet1.1", "densenet121", "inceptionv3", "mobilenet1.0",
  "mobilenet0.25", "mobilenetv2_1.0", "mobilenetv2_0.25", "mobilenetv3_small",
  "mobilenetv3_large", "se_resnet18_v1", "resnext50_32x4d" }
local SIZE = { alexnet = 64, vgg11 = 32, vgg16_bn = 32, ["squeezenet1.0"] = 224,
  ["squeezenet1.1"] = 224, densenet121 = 224, inceptionv3 = 299 }

local function export_case(d, name, mk)
  mx.random.seed(7)
  local net, shape = mk()
  net:initialize()
  net:hybridize()
  local x = mx.random.uniform(-1, 1, shape)
  local y = net(x)
  if not mx.nd.is_tensor(y) then y = y[1] end
  local path = d .. "/" .. name .. ".onnx"
  assert.equals(path, net:export_onnx(path, { input_shapes = { shape } }))
  -- back through luamx's importer
  local meta = onnx.get_model_metadata(path)
  local in_name = meta.input_tensor_data[1][1]
  local sess = onnx.load_model(path, { input_shapes = { [in_name] = shape } })
  local back = sess:run({ [in_name] = x })[1]
  assert.same(y:shape(), back:shape())
  assert.is_true(max_rel(back, y) < 1e-4, name .. ": " .. max_rel(back, y))
  mx.nd.save(d .. "/" .. name .. "_io.safetensors", { in_0 = x, out_0 = y })
  return path
end

describe("ONNX export", function()
  it("vision zoo, LSTM, GRU and transformer encoder: exported, imported back, same outputs", function()
    local d = tmpdir()
    for _, name in ipairs(ORDER) do export_case(d, name, CASES[name]) end
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("export_model takes MXNet's files and names the op it cannot express", function()
    local d = tmpdir()
    local net = mx.gluon.nn.HybridSequential()
    net:add(mx.gluon.nn.Dense(4, { in_units = 3, activation = "relu" }),
      mx.gluon.nn.Dense(2, { in_units = 4 }))
    net:initialize()
    net:hybridize()
    local x = mx.nd.array({ { 1, 2, 3 } })
    local y = net(x)
    local sf, pf = net:export(d .. "/mlp")
    local path = onnx.export_model(sf, pf, { in_shapes = { { 1, 3 } }, onnx_file_path = d .. "/mlp.onnx" })
    local sess = onnx.load_model(path, { input_shapes = { data = { 1, 3 } } })
    assert.is_true(max_rel(sess:run({ data = x })[1], y) < 1e-6)
    -- a Symbol and a params table, dynamic batch
    local s = mx.sym.load(sf)
    local params = mx.nd.load(pf)
    onnx.export_model(s, params, { in_shapes = { { 1, 3 } }, onnx_file_path = d .. "/dyn.onnx",
      dynamic = true })
    local meta = onnx.get_model_metadata(d .. "/dyn.onnx")
    assert.equals(-1, meta.input_tensor_data[1][2][1])
    local sess4 = onnx.load_model(d .. "/dyn.onnx", { input_shapes = { data = { 4, 3 } } })
    assert.same({ 4, 2 }, sess4:run({ data = mx.nd.ones { 4, 3 } })[1]:shape())
    -- errors
    local ok, err = pcall(onnx.export_model, s, params, { in_shapes = {} })
    assert.is_false(ok)
    assert.matches("in_shapes gives 0 shapes for the 1 inputs (data)", err, 1, true)
    local v = mx.sym.var("v")
    ok, err = pcall(onnx.export_model, mx.sym.sort(v), {},
      { in_shapes = { { 3 } }, onnx_file_path = d .. "/s.onnx" })
    assert.is_false(ok)
    assert.matches("(sort): op sort has no ONNX form", err, 1, true)
    -- adaptive average pooling (SE blocks): sizes that divide the input's, else an error
    local xa = mx.random.uniform(-1, 1, { 1, 3, 8, 8 })
    onnx.export_model(mx.sym.adaptive_avg_pooling2d(v, { output_size = { 2, 4 } }), {},
      { in_shapes = { { 1, 3, 8, 8 } }, onnx_file_path = d .. "/ad.onnx" })
    local sa = onnx.load_model(d .. "/ad.onnx", { input_shapes = { v = { 1, 3, 8, 8 } } })
    local want = mx.nd.adaptive_avg_pooling2d(xa, { output_size = { 2, 4 } })
    assert.is_true(max_rel(sa:run({ v = xa })[1], want) < 1e-6)
    ok, err = pcall(onnx.export_model, mx.sym.adaptive_avg_pooling2d(v, { output_size = 3 }), {},
      { in_shapes = { { 1, 3, 8, 8 } }, onnx_file_path = d .. "/ad3.onnx" })
    assert.is_false(ok)
    assert.matches("output size 3 does not divide the input's 8", err, 1, true)
    os.execute("rm -rf '" .. d .. "'")
  end)
end)

describe("#slow #torch ONNX export checked by onnx and ONNX Runtime", function()
  it("the vision zoo's families, LSTM, GRU, transformer: onnx.checker and ORT within 1e-4", function()
    local PY = dev_python()
    if not PY then pending("no dev venv with onnx, onnxruntime and safetensors") return end
    local d = tmpdir()
    local all, only = {}, os.getenv("MX_ONNX_EXPORT_MODELS") -- (a comma list: those only)
    for _, n in ipairs(ORDER) do all[#all + 1] = n end
    for _, n in ipairs(SLOW) do
      all[#all + 1] = n
      local hw = SIZE[n] or 64
      CASES[n] = function() return mx.gluon.model_zoo.vision.get_model(n), { 1, 3, hw, hw } end
    end
    local run = {}
    for _, name in ipairs(all) do
      if not only or ("," .. only .. ","):find("," .. name .. ",", 1, true) then run[#run + 1] = name end
    end
    assert.is_true(#run > 0, "MX_ONNX_EXPORT_MODELS names none of the cases")
    for _, name in ipairs(run) do
      local path = export_case(d, name, CASES[name])
      local rc, out = sh(PY .. " tools/onnx/check_export.py " .. path .. " " .. d .. "/" .. name
        .. "_io.safetensors 1e-4")
      assert.equals(0, rc, name .. ": " .. out)
      assert.matches("OK", out, 1, true)
    end
    os.execute("rm -rf '" .. d .. "'")
  end)
end)
