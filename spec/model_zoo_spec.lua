-- gluon.model_zoo.vision: ResNet v1/v2 as MXNet 1.9's model_zoo/vision/resnet.py builds
-- them (structure, structural parameter names, parameter counts), and its errors.
-- The networks need nn.Conv2D, BatchNorm, MaxPool2D and GlobalAvgPool2D: without those
-- layers the cases that build a network are pending.
local mx = require("mx")
local nn = mx.gluon.nn
local nd = mx.nd
local vision = mx.gluon.model_zoo.vision
local H = require("helpers.la")
local FILE = "model_zoo_spec.lua"

local function need_layers()
  for _, k in ipairs { "Conv2D", "BatchNorm", "MaxPool2D", "GlobalAvgPool2D" } do
    if not nn[k] then
      pending("needs nn." .. k .. " (the conv/pool/norm layers)")
      return false
    end
  end
  return true
end

local function count(net)
  local total, trainable = 0, 0
  for _, p in net:collect_params():items() do
    local n = p:data():size()
    total = total + n
    if p.grad_req ~= "null" then trainable = trainable + n end
  end
  return total, trainable
end

describe("model_zoo.vision ResNet", function()
  it("thumbnail resnet18_v1 on 1x3x32x32: output shape, MXNet's parameter count and names",
    function()
    if not need_layers() then return end
    local net = vision.resnet18_v1 { thumbnail = true }
    net:initialize(mx.init.Xavier())
    local y = net(nd.random_uniform { shape = { 1, 3, 32, 32 } })
    assert.are.same({ 1, 1000 }, y:shape())
    -- MXNet 1.9 resnet.py, thumbnail resnet18_v1 (classes=1000), counted by hand from
    -- the layers it builds: stem conv 3x3x3x64 = 1728 (no BN in the thumbnail stem);
    -- stage 1: 2 x (2 convs 64x64x3x3 + 2 BN(64) x 4 arrays) = 148480; stage 2:
    -- 230912 (with the 1x1 downsample conv + BN) + 295936; stage 3: 920576 + 1181696;
    -- stage 4: 3676160 + 4722688; Dense 512x1000 + 1000 = 513000. Total 11691176, of
    -- which running_mean/running_var (grad_req 'null', 2 x 4736 channels) 9472. The
    -- same count for the full-size stem (11699112 total, 11689512 trainable) is
    -- torchvision's published resnet18 parameter count (11689512): the same network.
    local total, trainable = count(net)
    assert.are.equal(11691176, total)
    assert.are.equal(11681704, trainable)
    local keys = net:collect_params():keys()
    assert.are.equal(98, #keys)
    -- the structural names MXNet's save_parameters writes for this model
    assert.are.same({ "features.0.weight", "features.1.0.body.0.weight",
      "features.1.0.body.1.gamma", "features.1.0.body.1.beta",
      "features.1.0.body.1.running_mean", "features.1.0.body.1.running_var" },
      { unpack(keys, 1, 6) })
    local params = net:collect_params()
    assert.are.same({ 128, 64, 1, 1 }, params["features.2.0.downsample.0.weight"]:data():shape())
    assert.are.same({ 512 }, params["features.4.1.body.4.running_var"]:data():shape())
    assert.are.same({ 1000, 512 }, params["output.weight"]:data():shape())
    assert.is_nil(params["features.1.0.downsample.0.weight"]) -- 64 -> 64: no downsample
    -- summary over the nested blocks gives the same totals (io.write captured)
    local out = os.tmpname()
    local f = assert(io.open(out, "w"))
    local old = io.output()
    io.output(f)
    local ok, err = pcall(net.summary, net, nd.ones { 1, 3, 32, 32 })
    io.output(old)
    f:close()
    local text = assert(io.open(out)):read("*a")
    os.remove(out)
    assert(ok, err)
    assert.truthy(text:find("\n   Total params: 11691176\n", 1, true), text)
    assert.truthy(text:find("\n   Trainable params: 11681704\n", 1, true))
    assert.truthy(text:find("\n   Non-trainable params: 9472\n", 1, true))
    assert.truthy(text:find("BasicBlockV1%-%d+ +%(1, 64, 32, 32%)"))
    assert.truthy(text:find("Dense%-%d+ +%(1, 1000%) +513000\n"))
  end)

  it("thumbnail resnet18_v2 (pre-activation) and a residual v1 bottleneck", function()
    if not need_layers() then return end
    local net = vision.get_resnet(2, 18, { thumbnail = true, classes = 10 })
    net:initialize()
    assert.are.same({ 2, 10 }, net(nd.ones { 2, 3, 32, 32 }):shape())
    -- v2 thumbnail: 11687860 params at classes=1000 (by hand as above: an input
    -- BN(3) and a final BN(512), BN before each conv, 1x1 downsample convs without BN);
    -- classes=10 removes 990 x 513 Dense parameters
    assert.are.equal(11687860 - 990 * 513, (count(net)))
    assert.truthy(net:collect_params()["features.3.0.downsample.weight"]) -- 0: BN, 1: stem conv
    assert.is_nil(net:collect_params()["features.2.0.downsample.weight"])
    assert.truthy(net:collect_params()["features.2.1.bn2.gamma"])
    local b = vision.BottleneckV1(256, 2, true, 64)
    b:initialize()
    assert.are.same({ 1, 256, 4, 4 }, b(nd.ones { 1, 64, 8, 8 }):shape())
    -- the 1x1 convs of MXNet's BottleneckV1 body keep their bias
    assert.truthy(b:collect_params()["body.0.bias"])
    assert.is_nil(b:collect_params()["downsample.0.bias"])
  end)

  it("unknown sizes, versions, options and models are errors at the caller's line", function()
    H.assert_error(function(mark) mark() vision.get_resnet(3, 18) end, FILE,
      "get_resnet: invalid resnet version: 3")
    H.assert_error(function(mark) mark() vision.get_resnet(1, 20) end, FILE,
      "get_resnet: invalid number of layers: 20")
    H.assert_error(function(mark) mark() vision.resnet50_v2 { nope = 1 } end, FILE,
      "get_resnet: unknown option 'nope'")
    H.assert_error(function(mark) mark() vision.get_model("vgg17") end, FILE,
      "get_model: unknown model 'vgg17' (available: alexnet, densenet121")
    H.assert_error(function(mark) mark() vision.get_model("resnet18_v1", { pretrained = 1 }) end,
      FILE, "get_resnet: pretrained must be a boolean, got number")
    H.assert_error(function(mark) mark() vision.get_model("mobilenet1.0", { classes = 0 }) end,
      FILE, "get_mobilenet: classes must be a positive integer, got 0")
    H.assert_error(function(mark) mark() vision.get_mobilenet(-1) end, FILE,
      "get_mobilenet: multiplier must be a positive number, got -1")
    H.assert_error(function(mark) mark() vision.get_vgg(12) end, FILE,
      "get_vgg: invalid number of layers: 12. Options are 11, 13, 16, 19")
    H.assert_error(function(mark) mark() vision.get_densenet(100) end, FILE,
      "get_densenet: invalid number of layers: 100")
    H.assert_error(function(mark) mark() vision.get_squeezenet("2.0") end, FILE,
      "get_squeezenet: unsupported version 2.0")
    H.assert_error(function(mark) mark() vision.get_mobilenet_v3("tiny") end, FILE,
      "get_mobilenet_v3: model must be 'large' or 'small', got tiny")
    H.assert_error(function(mark) mark() vision.get_resnext(34) end, FILE,
      "get_resnext: invalid number of layers: 34")
    assert.are.equal(vision, mx.gluon.model_zoo.vision)
  end)
end)

describe("model_zoo pretrained weights (MXNet's model-store layout, never downloaded)", function()
  local store = require("mx.gluon.model_zoo.model_store")
  local function tmpdir()
    local d = os.tmpname()
    os.remove(d)
    assert(os.execute("mkdir -p '" .. d .. "'"))
    return d
  end

  it("a missing file names the file, its sha1 and the directory", function()
    local d = tmpdir()
    H.assert_error(function(mark) mark() vision.get_model("resnet18_v1", { pretrained = true,
      root = d }) end, FILE, "get_model_file: pretrained weights for 'resnet18_v1' are not here: "
      .. "put MXNet's model-store file resnet18_v1-a0666292.params (sha1 "
      .. "a0666292f0a30ff61f857b0b66efc0228eb6a54b) in " .. d .. " (luamx never downloads)")
    H.assert_error(function(mark) mark() vision.get_model("mobilenetv3_small",
      { pretrained = true, root = d }) end, FILE, "put GluonCV's model-store file "
      .. "mobilenetv3_small-10430433.params")
    H.assert_error(function(mark) mark() vision.get_model("resnext101e_64x4d",
      { pretrained = true, root = d }) end, FILE,
      "get_model_file: no pretrained weights for 'resnext101e_64x4d' in GluonCV's model store")
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("the default root is $MXNET_HOME/models or ~/.mxnet/models", function()
    local home = os.getenv("MXNET_HOME")
    local want = home and home ~= "" and home .. "/models" or os.getenv("HOME") .. "/.mxnet/models"
    assert.are.equal(want, store.default_root())
    assert.are.equal("a0666292", store.short_hash("resnet18_v1"))
    assert.are.equal("0ecdba34", store.short_hash("resnet50_v1b", { store = "gluoncv" }))
  end)

  it("the file's SHA-1 is checked; a matching file loads into the network", function()
    assert.are.equal("a9993e364706816aba3e25717850c26c9cd0d89d", (function()
      local p = os.tmpname()
      local f = assert(io.open(p, "wb"))
      f:write("abc")
      f:close()
      local h = store.sha1_file(p)
      os.remove(p)
      return h
    end)())
    local d = tmpdir()
    local src = vision.squeezenet1_1 { classes = 10 }
    src:initialize()
    local x = nd.random_uniform { shape = { 1, 3, 224, 224 } }
    local want = src(x)
    local path = d .. "/squeezenet1.1-" .. store.short_hash("squeezenet1.1") .. ".params"
    src:save_parameters(path)
    H.assert_error(function(mark) mark() vision.get_model("squeezenet1.1",
      { pretrained = true, root = d, classes = 10 }) end, FILE, "get_model_file: " .. path
      .. " has sha1 " .. store.sha1_file(path) .. ", the model store's is "
      .. "33ba0f93753c83d86e1eb397f38a667eaf2e9376 (a different or damaged file)")
    -- the store's hash as the file's: the weights load (what a real download gives)
    local real, h = store.STORES.mxnet["squeezenet1.1"], store.sha1_file(path)
    store.STORES.mxnet["squeezenet1.1"] = h
    assert(os.rename(path, d .. "/squeezenet1.1-" .. h:sub(1, 8) .. ".params"))
    local ok, net = pcall(vision.get_model, "squeezenet1.1", { pretrained = true, root = d,
      classes = 10 })
    store.STORES.mxnet["squeezenet1.1"] = real
    assert(ok, net)
    assert.are.same(want:tolist(), net(x):tolist())
    os.execute("rm -rf '" .. d .. "'")
  end)
end)
