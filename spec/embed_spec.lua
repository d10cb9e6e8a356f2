-- spec/embed_spec.lua — the hosts of examples/embed and what an installed luamx gives a C
-- host: game_loop.c (a Gluon policy in LuaJIT and a C-runtime model every frame, no heap
-- call once warm, collector steps within 1 ms of CPU), predict_cxx.cpp (MXNet's predict
-- API through the RAII wrapper mx_predict.hpp), a host built with only
-- `pkg-config --cflags --libs luamx` and one with find_package(luamx) after
-- `cmake --install`, the runtime's thread checks under ThreadSanitizer (#slow: a
-- second build of libmx), and the inference-only library (#slow: MX_INFERENCE_ONLY with
-- one model's ops: its exports, its size, predict.c's top-5 as the full build's).
local mx = require("mx")
local lib = require("mx.core.lib")
local run = require("helpers.sh")
local nn = mx.gluon.nn

local build = lib.libpath:match("^(.*)/lib/mx/[^/]+$") or os.getenv("MX_BUILD_DIR") or "build"
local src = build:match("^(.*)/[^/]+$") or "."
if not io.open(src .. "/CMakeLists.txt") then src = "." end
local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end
local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'") == 0)
  return d
end

-- an MLP of 12 inputs exported with its input and output (the C-side model)
local dir = tmpdir()
local function mlp()
  if exists(dir .. "/mlp-symbol.json") then return end
  os.execute("mkdir -p '" .. dir .. "'")
  mx.random.seed(2)
  local net = nn.HybridSequential()
  net:add(nn.Dense(32, { activation = "relu" }), nn.Dense(5))
  net:initialize()
  net:hybridize()
  local x = mx.nd.random.uniform(-1, 1, { 1, 12 })
  local y = net(x)
  net:export(dir .. "/mlp")
  mx.nd.save(dir .. "/mlp-io.params", { data = x, out0 = y })
end

describe("examples/embed", function()
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end) -- remade when needed again
  it("game_loop: a Lua policy and a C model per frame, no heap call per frame once warm", function()
    local exe = build .. "/embed/game_loop"
    assert.is_true(exists(exe), "build the embed_game_loop target")
    mlp()
    -- unpaced (hz 0) so the spec is quick; docs/embedding.md has a 60 Hz run
    local rc, out = run(string.format("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' LUA_CPATH='%s/lib/?.so;;' "
      .. "'%s' '%s/examples/embed/policy.lua' '%s/mlp-symbol.json' '%s/mlp-0000.params' 10000 0",
      src, src, build, exe, src, dir, dir))
    assert.equals(0, rc, out)
    assert.truthy(out:find("frames 10000 at full speed: frame cost p50", 1, true), out)
    -- the C model's runs: none at all; the Lua policy's eager ops: none per frame (an op
    -- its engine had to queue costs 3 heap calls; CI saw one such in 9,900 frames)
    local total, in_model = out:match("heap calls after warm%-up: (%d+), (%d+) of them in the C model")
    assert.equals("0", in_model, out)
    assert.is_true(tonumber(total) < 10, out)
    local cpu = tonumber(out:match("longest GC step [%d.]+ us %(CPU ([%d.]+) us%)"))
    assert.is_true(cpu ~= nil and cpu <= 1000, out)
  end)

  it("predict_cxx: MXNet's predict API through the C++ RAII wrapper", function()
    local exe = build .. "/embed/predict_cxx"
    if not exists(exe) then
      pending("no C++ compiler: predict_cxx not built")
      return
    end
    mlp()
    local rc, out = run(string.format("'%s' '%s/mlp-symbol.json' '%s/mlp-0000.params' '%s/mlp-io.params'",
      exe, dir, dir, dir))
    assert.equals(0, rc, out)
    assert.truthy(out:find("2 threads, one model: same output", 1, true), out)
    assert.truthy(out:find("reshaped to batch 2: same first half", 1, true), out)
    assert.truthy(out:find("error: MXPredSetInput: cannot find input key 'no_such_input'", 1, true), out)
  end)

  it("an installed luamx: hosts built with pkg-config and with find_package(luamx)", function()
    mlp()
    -- staged with DESTDIR (the install paths are absolute: LuaRocks' layout under the
    -- configured prefix); the .pc and CMake files find the library relative to themselves
    local stage = tmpdir()
    local rc, out = run(string.format("DESTDIR='%s' cmake --install '%s' >/dev/null", stage, build))
    assert.equals(0, rc, out)
    local f = assert(io.open(build .. "/CMakeCache.txt"))
    local prefix = stage .. f:read("*a"):match("CMAKE_INSTALL_PREFIX:PATH=([^\n]*)")
    f:close()
    local pc = prefix .. "/lib/pkgconfig"
    assert.is_true(exists(pc .. "/luamx.pc"), "luamx.pc installed")
    local host = src .. "/spec/fixtures/embed/host.c"
    rc, out = run(string.format("cc -std=c11 -o '%s/host_pc' '%s' "
      .. "$(PKG_CONFIG_PATH='%s' pkg-config --cflags --libs luamx) "
      .. "&& '%s/host_pc' '%s/mlp-symbol.json' '%s/mlp-0000.params'", prefix, host, pc, prefix, dir, dir))
    assert.equals(0, rc, out)
    assert.truthy(out:find("host ok fully_connected1_output", 1, true), out)
    local bdir = prefix .. "/hostbuild"
    rc, out = run(string.format("cmake -S '%s/spec/fixtures/embed' -B '%s' -DCMAKE_PREFIX_PATH='%s' "
      .. ">/dev/null && cmake --build '%s' >/dev/null && '%s/host' '%s/mlp-symbol.json' "
      .. "'%s/mlp-0000.params'", src, bdir, prefix, bdir, bdir, dir, dir))
    assert.equals(0, rc, out)
    assert.truthy(out:find("host ok fully_connected1_output", 1, true), out)
    os.execute("rm -rf '" .. stage .. "'")
  end)
end)

-- a small CNN (oneDNN convolution, BatchNorm folded, pooling) beside the MLP
local function cnn()
  if exists(dir .. "/cnn-symbol.json") then return end
  os.execute("mkdir -p '" .. dir .. "'")
  mx.random.seed(4)
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(4, 3, { padding = 1 }), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2),
    nn.Dense(3))
  net:initialize()
  net:hybridize()
  local x = mx.nd.random.uniform(-1, 1, { 1, 3, 8, 8 })
  local y = net(x)
  net:export(dir .. "/cnn")
  mx.nd.save(dir .. "/cnn-io.params", { data = x, out0 = y })
end

-- builds rt_check in a Debug tree (-O0: the quickest build) configured with MX_SANITIZE=kind
-- (or reuses the tree the env variable names) and
-- runs modes on the MLP and the CNN
local function sanitized(kind, env, opts_var, opts, modes)
  local tree = os.getenv(env)
  local own = not tree
  tree = tree or tmpdir()
  local rc, out = run(string.format("cmake -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=Debug "
    .. "-DMX_SANITIZE=%s -DMX_USE_CUDA=OFF >/dev/null && nice cmake --build '%s' -j2 --target rt_check "
    .. ">/dev/null", src, tree, kind, tree))
  assert.equals(0, rc, out)
  mlp()
  cnn()
  for _, model in ipairs { "mlp", "cnn" } do
    for _, mode in ipairs(modes) do
      rc, out = run(string.format("%s='%s' '%s/rt_check' %s '%s/%s-symbol.json' '%s/%s-0000.params' "
        .. "'%s/%s-io.params' 4 5", opts_var, opts, tree, mode, dir, model, dir, model, dir, model))
      assert.equals(0, rc, model .. " " .. mode .. "\n" .. out)
      assert.falsy(out:find("WARNING: ThreadSanitizer", 1, true), out)
      assert.falsy(out:find("ERROR: AddressSanitizer", 1, true), out)
      assert.falsy(out:find("runtime error:", 1, true), out)
    end
  end
  if own then os.execute("rm -rf '" .. tree .. "'") end
end

describe("the runtime under sanitizers #slow", function()
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end) -- the exported models
  it("ThreadSanitizer: N contexts of one model on N threads, create/free races", function()
    sanitized("thread", "MX_TSAN_BUILD", "TSAN_OPTIONS",
      "halt_on_error=1 suppressions=" .. src .. "/tools/runtime/tsan.supp", { "threads", "race" })
  end)
  it("AddressSanitizer + UBSan: every rt_check mode", function()
    sanitized("ON", "MX_ASAN_BUILD", "ASAN_OPTIONS", "detect_leaks=0",
      { "run", "threads", "race", "features", "errors" })
  end)
end)

-- the top-5 lines ("1. [idx] score label") a predict host prints
local function top5(out)
  local lines = {}
  for l in out:gmatch("%d%. %[%d+%] [^\n]+") do lines[#lines + 1] = l end
  return lines
end

describe("the inference-only library #slow", function()
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end) -- the exported model
  it("builds from one model's ops, exports only the runtime and classifies as the full build", function()
    local photo = "/usr/share/doc/opencv-doc/examples/data/baboon.jpg"
    local names = "/usr/share/doc/opencv-doc/examples/data/dnn/classification_classes_ILSVRC2012.txt"
    if not (exists(photo) and exists(names)) then
      pending("opencv-doc (tools/setup.sh) is not installed: no photo / ImageNet names")
      return
    end
    os.execute("mkdir -p '" .. dir .. "'")
    mx.random.seed(5)
    local net = mx.gluon.model_zoo.vision.resnet18_v1()
    net:initialize()
    net:hybridize()
    net(mx.nd.zeros { 1, 3, 224, 224 })
    net:export(dir .. "/resnet18")
    local sym, par = dir .. "/resnet18-symbol.json", dir .. "/resnet18-0000.params"
    -- MX_OPS: the model's ops only (and what the passes build), as an app would ship it
    local tree = os.getenv("MX_INFERENCE_BUILD") or tmpdir()
    local rc, out = run(string.format("cmake -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=Release "
      .. "-DMX_INFERENCE_ONLY=ON -DMX_OPS='%s' -DMX_USE_CUDA=OFF >/dev/null && nice cmake --build "
      .. "'%s' -j2 --target mx embed_predict >/dev/null", src, tree, sym, tree))
    assert.equals(0, rc, out)
    local so = tree .. "/libmx.so"
    assert.is_true(exists(so), out)
    -- every exported function is the runtime's or the predict API's (core/src/runtime.map)
    rc, out = run("nm -D --defined-only '" .. so .. "'")
    assert.equals(0, rc, out)
    local nfun = 0
    for kind, name in out:gmatch("%x+ (%a) ([%w_@.]+)") do
      if kind == "T" then
        nfun = nfun + 1
        assert.is_truthy(name:match("^mx_rt_") or name:match("^MXPred") or name:match("^MXNDList")
          or name == "MXGetLastError", name)
      end
    end
    assert.is_true(nfun > 10, out)
    -- small enough to ship in an app: <= 2 MB stripped with ResNet-18's ops
    rc, out = run(string.format("strip -o '%s/stripped.so' '%s' && stat -c %%s '%s/stripped.so'",
      tree, so, tree))
    assert.equals(0, rc, out)
    assert.is_true(tonumber(out:match("^(%d+)")) <= 2 * 1024 * 1024, out)
    -- the same top-5 and scores as the full library's host on the same model and photo
    local runs = {}
    for _, exe in ipairs { build .. "/embed/predict", tree .. "/embed/predict" } do
      rc, out = run(string.format("'%s' '%s' '%s' '%s' '%s' 1", exe, sym, par, photo, names))
      assert.equals(0, rc, exe .. "\n" .. out)
      runs[#runs + 1] = top5(out)
    end
    assert.equals(5, #runs[1])
    assert.same(runs[1], runs[2])
    if not os.getenv("MX_INFERENCE_BUILD") then os.execute("rm -rf '" .. tree .. "'") end
  end)
end)
