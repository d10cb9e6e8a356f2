-- spec/runtime_spec.lua — the C inference runtime (mx_runtime.h) with no Lua in the loop:
-- models exported here by Gluon (an MLP, a CNN with BatchNorm statistics that are not the
-- identity, a block with two outputs) are run by tools/runtime/rt_check.c, which compares
-- them with the outputs this process computed, runs N contexts of one model on N threads
-- against one thread bitwise, races context creation and freeing against the model's
-- release, reshapes, binds caller buffers, runs node by node, counts heap calls in warm
-- runs and checks the error messages. examples/embed/predict.c (MXNet's predict API)
-- classifies a Debian photo and must agree with this process's forward of its input.
local mx = require("mx")
local lib = require("mx.core.lib")
local run = require("helpers.sh")
local nn = mx.gluon.nn

local build = lib.libpath:match("^(.*)/lib/mx/[^/]+$") or os.getenv("MX_BUILD_DIR") or "build"
local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'") == 0)

-- exports net (hybridized, called on x) as dir/name and saves x and its outputs
local function export(name, net, x)
  net:hybridize()
  local y = net(x)
  net:export(dir .. "/" .. name)
  local io_ = { data = x }
  if type(y) == "table" and not y.h then
    for i, t in ipairs(y) do io_["out" .. (i - 1)] = t end
  else
    io_.out0 = y
  end
  mx.nd.save(dir .. "/" .. name .. "-io.params", io_)
  return dir .. "/" .. name .. "-symbol.json", dir .. "/" .. name .. "-0000.params",
    dir .. "/" .. name .. "-io.params"
end

-- BatchNorm's running statistics away from (0, 1), so folding them is tested
local function stir_bn(net)
  for name, p in pairs(net:collect_params()) do
    if name:match("running_mean$") then p:set_data(mx.nd.random.uniform(-0.2, 0.2, p:shape())) end
    if name:match("running_var$") then p:set_data(mx.nd.random.uniform(0.5, 1.5, p:shape())) end
  end
end

local Two = nn.HybridBlock:extend("Two")
function Two:__init()
  Two.super.__init(self)
  self.a = nn.Dense(6, { in_units = 4 })
  self.b = nn.Dense(3, { in_units = 6 })
end
function Two:forward(x)
  local h = self.a(x):relu()
  return { h, mx.nd.softmax(self.b(h)) }
end

local models = {}
local function model(name)
  if models[name] then return unpack(models[name]) end
  mx.random.seed(11)
  local net, x
  if name == "mlp" then
    net = nn.HybridSequential()
    net:add(nn.Dense(32, { activation = "relu" }), nn.Dense(16), nn.Activation("tanh"), nn.Dense(5))
    x = mx.nd.random.uniform(-1, 1, { 2, 12 })
  elseif name == "cnn" then
    net = nn.HybridSequential()
    net:add(nn.Conv2D(8, 3, { padding = 1 }), nn.BatchNorm(), nn.Activation("relu"),
      nn.MaxPool2D(2), nn.Conv2D(16, 3, { use_bias = false }), nn.BatchNorm(),
      nn.Activation("relu"), nn.GlobalAvgPool2D(), nn.Dense(10))
    x = mx.nd.random.uniform(-1, 1, { 1, 3, 16, 16 })
  else
    net = Two()
    x = mx.nd.random.uniform(-1, 1, { 3, 4 })
  end
  net:initialize()
  net(x)
  stir_bn(net)
  models[name] = { export(name, net, x) }
  return unpack(models[name])
end

local function check(mode, name, extra)
  local sym, par, io_ = model(name)
  local rc, out = run(string.format("'%s/rt_check' %s '%s' '%s' '%s' %s", build, mode, sym, par,
    io_, extra or ""))
  assert.equals(0, rc, out)
  return out
end

describe("inference runtime (rt_check)", function()
  it("is built", function()
    assert.is_true(exists(build .. "/rt_check"), "build the rt_check target")
  end)

  for _, name in ipairs { "mlp", "cnn", "two" } do
    it(name .. ": matches the Lua forward at every optimisation level", function()
      local out = check("run", name)
      for lvl = 0, 2 do assert.truthy(out:find("ok run opt_level=" .. lvl, 1, true), out) end
    end)
  end

  it("one model, 4 threads with a context each: outputs bitwise equal to one thread's", function()
    assert.truthy(check("threads", "cnn", "4 25"):find("bitwise equal", 1, true))
    assert.truthy(check("threads", "mlp", "4 50"):find("bitwise equal", 1, true))
  end)

  it("contexts made, run and freed on threads while the model is released", function()
    local out = check("race", "cnn", "4 10")
    assert.truthy(out:find("ok model freed before its contexts", 1, true), out)
  end)

  it("reshape, zero-copy binding, partial runs and the steady state's heap calls", function()
    local out = check("features", "cnn")
    assert.truthy(out:find("ok reshape to batch 2", 1, true), out)
    assert.truthy(out:find("ok zero-copy input (4-byte aligned; 1-byte refused) and output", 1, true), out)
    assert.truthy(out:find("partial runs", 1, true), out)
    -- the MLP's kernels (oneDNN matmul, elementwise) allocate nothing once warm
    out = check("features", "mlp")
    assert.truthy(out:find("ok heap calls in 20 warm runs: 0", 1, true), out)
  end)

  it("bad inputs, files, shapes, options and calls fail with messages naming them", function()
    local out = check("errors", "cnn")
    for _, what in ipairs { "unknown input", "missing file", "no params", "bad JSON", "bad params",
      "wrong shape", "gpu", "unknown output", "input size", "fixed shapes", "output size" } do
      assert.truthy(out:find("ok error " .. what .. ":", 1, true), what .. "\n" .. out)
    end
    assert.truthy(out:find("weight must have shape", 1, true), out)
  end)

  it("internal outputs by name (MXNet's partial out)", function()
    local sym = model("cnn")
    local f = assert(io.open(sym))
    local json = f:read("*a")
    f:close()
    local node = assert(json:match('"name": "(pooling%d+)"') or json:match('"name":%s*"(pool[%w_]*)"'),
      "a pooling node in " .. sym)
    local out = check("internal", "cnn", node)
    assert.truthy(out:find("ok internal output " .. node .. "_output: 1 8 8 8", 1, true), out)
  end)
end)

describe("examples/embed/predict.c (MXNet's C predict API)", function()
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end) -- the exported models
  local photo = "/usr/share/doc/opencv-doc/examples/data/baboon.jpg"
  local names = "/usr/share/doc/opencv-doc/examples/data/dnn/classification_classes_ILSVRC2012.txt"

  it("classifies a photo: the top-5 of this process's forward of the same input", function()
    if not (exists(photo) and exists(names)) then
      pending("opencv-doc (tools/setup.sh) is not installed: no photo / ImageNet names")
      return
    end
    local exe = build .. "/embed/predict"
    assert.is_true(exists(exe), "build the embed_predict target")
    mx.random.seed(5)
    local net = mx.gluon.model_zoo.vision.resnet18_v1()
    net:initialize()
    net(mx.nd.zeros { 1, 3, 224, 224 })
    stir_bn(net)
    local sym, par = export("resnet18", net, mx.nd.zeros { 1, 3, 224, 224 })
    local dump = dir .. "/input.f32"
    local rc, out = run(string.format("PREDICT_DUMP_INPUT='%s' '%s' '%s' '%s' '%s' '%s' 2", dump, exe,
      sym, par, photo, names))
    assert.equals(0, rc, out)
    assert.truthy(out:find("photo .*baboon.jpg: 512x512"), out)
    assert.truthy(out:find("top-5 (2 predictors agree)", 1, true), out)
    -- the same input through this process's hybridized network
    local f = assert(io.open(dump, "rb"))
    local bytes = f:read("*a")
    f:close()
    assert.equals(3 * 224 * 224 * 4, #bytes)
    local ffi = require("ffi")
    local x = mx.nd.zeros { 1, 3, 224, 224 }
    ffi.copy(lib.C.mx_tensor_data(x.h), bytes, #bytes)
    local y = net(x):reshape(-1)
    local scores = y:tolist()
    local order = {}
    for i = 1, #scores do order[i] = i end
    table.sort(order, function(a, b) return scores[a] > scores[b] end)
    local lines = {}
    for l in io.lines(names) do lines[#lines + 1] = l end
    local k = 0
    for idx, score, label in out:gmatch("%d%. %[(%d+)%] (%S+) ([^\n]+)") do
      k = k + 1
      assert.equals(order[k] - 1, tonumber(idx), out)
      assert.equals(lines[order[k]], label)
      assert.is_true(math.abs(tonumber(score) - scores[order[k]]) <= 1e-4 * (1 + math.abs(scores[order[k]])))
    end
    assert.equals(5, k, out)
  end)
end)
