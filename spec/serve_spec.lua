-- spec/serve_spec.lua — mx-serve's endpoints (docs/serving.md): archives, the TorchServe
-- inference and management APIs, KServe v2, SageMaker's contract, the metrics port, the
-- management token. Servers run on loopback ephemeral ports, started and stopped here
-- with bounded waits; models are an MLP exported by Gluon here and the image classifier
-- on a small CNN. Answers are compared with the same network's Gluon forward.
local S = require("helpers.serve")

if not S.available() then
  describe("mx-serve", function()
    it("is built", function()
      pending("build/mx-serve missing: libmicrohttpd-dev / libarchive-dev not installed")
    end)
  end)
  return
end

local mx = require("mx")
local nn = mx.gluon.nn

local dir = S.tmpdir()
local store = dir .. "/store"
os.execute("mkdir -p " .. S.q(store))
local sym, par, ref, onnx = S.export_mlp(dir, "mlp", 11)

local function close(a, b, tol)
  if type(a) == "table" then
    assert.equals(#b, #a)
    for i = 1, #a do close(a[i], b[i], tol) end
    return
  end
  assert(math.abs(a - b) <= (tol or 1e-5) * (1 + math.abs(b)), string.format("%g vs %g", a, b))
end

local X1 = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }
local X2 = { 0.5, -1, 0, 0, 1, 2, 0, 0, -3, 0, 0, 1 }

describe("mx-serve archive", function()
  it("packs tar, tar.gz and directory archives the server opens", function()
    for _, fmt in ipairs { "tar", "tgz", "dir" } do
      local rc, out = S.archive { "--model-name", "mlp_" .. fmt, "--version", "1.0", "--symbol", sym,
        "--params", par, "--handler", "json_tensor", "--input", "data:float32:-1,12",
        "--batch-size", "8", "--max-batch-delay", "5", "--export-path", store, "--format", fmt }
      assert.equals(0, rc, out)
    end
    local f = io.open(store .. "/mlp_tgz.tar.gz", "rb")
    assert.truthy(f)
    assert.equals("\31\139", f:read(2)) -- gzip magic
    f:close()
    assert.truthy(S.read(store .. "/mlp_dir/MANIFEST.json"):find('"json_tensor"', 1, true))
  end)

  it("refuses bad arguments with a message", function()
    local rc, out = S.archive { "--model-name", "x", "--symbol", sym, "--handler", "json_tensor",
      "--input", "data:float99:-1,12", "--export-path", store }
    assert.is_not.equals(0, rc)
    assert.truthy(out:find("dtype 'float99'", 1, true), out)
    rc, out = S.archive { "--model-name", "x", "--handler", "json_tensor" }
    assert.is_not.equals(0, rc)
    assert.truthy(out:find("required", 1, true), out)
    rc, out = S.archive { "--model-name", "mlp_tar", "--symbol", sym, "--params", par,
      "--handler", "json_tensor", "--input", "data:float32:-1,12", "--export-path", store }
    assert.is_not.equals(0, rc)
    assert.truthy(out:find("exists", 1, true), out)
    rc = S.archive { "--model-name", "../evil", "--symbol", sym, "--handler", "json_tensor",
      "--input", "data:float32:-1,12", "--export-path", store }
    assert.is_not.equals(0, rc)
  end)
end)

describe("mx-serve APIs", function()
  local srv
  setup(function()
    srv = S.start { "--model-store", store, "--models", "mlp=mlp_tar.tar" }
  end)
  teardown(function() S.stop(srv) end)

  it("GET /ping", function()
    local st, body = S.http(srv, "GET", "/ping")
    assert.equals(200, st)
    assert.equals("Healthy", S.decode(body).status)
    st = S.http(srv, "POST", "/ping")
    assert.equals(405, st)
  end)

  it("POST /predictions/{model}: every JSON form, against the Gluon forward", function()
    local want = ref { X1, X2 }
    local st, body = S.http(srv, "POST", "/predictions/mlp",
      { body = S.json.encode(X1), type = "application/json" })
    assert.equals(200, st, body)
    close(S.decode(body), want[1])
    st, body = S.http(srv, "PUT", "/predictions/mlp", { body = S.json.encode { instances = { X1, X2 } } })
    assert.equals(200, st, body)
    close(S.decode(body), want)
    st, body = S.http(srv, "POST", "/predictions/mlp/1.0", { body = S.json.encode { data = { X2 } } })
    assert.equals(200, st, body)
    close(S.decode(body), { want[2] })
    st, body = S.http(srv, "POST", "/predictions/mlp", { body = S.json.encode { inputs = { data = X1 } } })
    assert.equals(200, st, body)
    close(S.decode(body), want[1])
    st, body = S.http(srv, "POST", "/predictions/mlp", { form = { data = (function()
      local p = srv.dir .. "/x.json"
      S.write(p, S.json.encode(X2))
      return p
    end)() } })
    assert.equals(200, st, body)
    close(S.decode(body), want[2])
  end)

  it("answers unknown models, versions and methods with 404 / 405", function()
    local st, body = S.http(srv, "POST", "/predictions/nope", { body = "[1]" })
    assert.equals(404, st)
    assert.equals("Model not found: nope", S.decode(body).message)
    st, body = S.http(srv, "POST", "/predictions/mlp/9.9", { body = "[1]" })
    assert.equals(404, st)
    assert.truthy(S.decode(body).message:find("9.9", 1, true))
    local _, hdr
    st, _, hdr = S.http(srv, "GET", "/predictions/mlp")
    assert.equals(405, st)
    assert.truthy(hdr.allow:find("POST", 1, true))
    st = S.http(srv, "GET", "/nothing/here")
    assert.equals(404, st)
  end)

  it("OPTIONS / and /api-description describe the API; OPTIONS /predictions/{m} the model", function()
    local st, body = S.http(srv, "OPTIONS", "/")
    assert.equals(200, st)
    local doc = S.decode(body)
    assert.equals("3.0.1", doc.openapi)
    assert.truthy(doc.paths["/predictions/{model_name}"])
    st = S.http(srv, "GET", "/api-description")
    assert.equals(200, st)
    st, body = S.http(srv, "OPTIONS", "/predictions/mlp")
    assert.equals(200, st)
    local d = S.decode(body)[1]
    assert.equals("mlp", d.modelName)
    assert.same({ -1, 12 }, d.signature.inputs[1].shape)
    assert.same({ -1, 5 }, d.signature.outputs[1].shape)
  end)

  it("KServe v2: health, metadata, readiness, infer with JSON tensors", function()
    local st, body = S.http(srv, "GET", "/v2/health/live")
    assert.equals(200, st)
    assert.is_true(S.decode(body).live)
    st = S.http(srv, "GET", "/v2/health/ready")
    assert.equals(200, st)
    st, body = S.http(srv, "GET", "/v2")
    assert.equals(200, st)
    assert.equals("mx-serve", S.decode(body).name)
    st, body = S.http(srv, "GET", "/v2/models/mlp")
    assert.equals(200, st)
    local md = S.decode(body)
    assert.same({ "1.0" }, md.versions)
    assert.equals("FP32", md.inputs[1].datatype)
    assert.same({ -1, 12 }, md.inputs[1].shape)
    assert.same({ -1, 5 }, md.outputs[1].shape)
    st = S.http(srv, "GET", "/v2/models/mlp/versions/1.0/ready")
    assert.equals(200, st)
    local req = { id = "r7", inputs = { { name = "data", shape = { 2, 12 }, datatype = "FP32",
      data = { X1, X2 } } } }
    st, body = S.http(srv, "POST", "/v2/models/mlp/infer", { body = S.json.encode(req) })
    assert.equals(200, st, body)
    local r = S.decode(body)
    assert.equals("r7", r.id)
    assert.equals("mlp", r.model_name)
    assert.equals("1.0", r.model_version)
    assert.same({ 2, 5 }, r.outputs[1].shape)
    assert.equals("FP32", r.outputs[1].datatype)
    local want = ref { X1, X2 }
    local flat = {}
    for _, row in ipairs(want) do for _, v in ipairs(row) do flat[#flat + 1] = v end end
    close(r.outputs[1].data, flat)
    -- flat data, a version in the path
    req.inputs[1].data = flat and { unpack(X1) }
    req.inputs[1].shape = { 1, 12 }
    st, body = S.http(srv, "POST", "/v2/models/mlp/versions/1.0/infer", { body = S.json.encode(req) })
    assert.equals(200, st, body)
    close(S.decode(body).outputs[1].data, want[1])
    st, body = S.http(srv, "POST", "/v2/models/nope/infer", { body = S.json.encode(req) })
    assert.equals(404, st)
    assert.truthy(S.decode(body).error)
  end)

  it("SageMaker's POST /invocations and GET /execution-parameters on the inference port", function()
    local st, body = S.http(srv, "POST", "/invocations",
      { body = S.json.encode(X1), type = "application/json" })
    assert.equals(200, st, body)
    close(S.decode(body), ref { X1 }[1])
    st, body = S.http(srv, "GET", "/execution-parameters")
    assert.equals(200, st)
    assert.equals("MULTI_RECORD", S.decode(body).BatchStrategy)
  end)

  it("the management API: register, list, describe, scale, versions, set-default, delete", function()
    local M = { api = "management" }
    local function mg(method, path) return S.http(srv, method, path, M) end
    local st, body = mg("GET", "/models")
    assert.equals(200, st)
    assert.same({ { modelName = "mlp", modelUrl = "mlp_tar.tar" } }, S.decode(body).models)
    -- a second version of mlp from the directory archive, synchronously
    st, body = mg("POST", "/models?url=mlp_dir&model_name=mlp&synchronous=true&initial_workers=1")
    assert.equals(409, st, body) -- its manifest says version 1.0 too
    local rc, out = S.archive { "--model-name", "mlp", "--version", "2.0", "--symbol", sym, "--params", par,
      "--handler", "json_tensor", "--input", "data:float32:-1,12", "--export-path", store,
      "--format", "dir" }
    assert.equals(0, rc, out)
    st, body = mg("POST", "/models?url=mlp&synchronous=true&initial_workers=1&batch_size=4&max_batch_delay=2")
    assert.equals(200, st, body)
    assert.truthy(S.decode(body).status:find("2.0", 1, true))
    st, body = mg("GET", "/models/mlp/all")
    assert.equals(200, st)
    local all = S.decode(body)
    assert.equals(2, #all)
    st, body = mg("GET", "/models/mlp/2.0")
    assert.equals(200, st, body)
    local d = S.decode(body)[1]
    assert.equals("2.0", d.modelVersion)
    assert.equals(4, d.batchSize)
    assert.equals(2, d.maxBatchDelay)
    assert.is_false(d.default)
    assert.equals("READY", d.status)
    -- the default stays 1.0 until set-default
    st, body = mg("GET", "/models/mlp")
    assert.equals(200, st, body)
    assert.equals("1.0", S.decode(body)[1].modelVersion)
    st = mg("DELETE", "/models/mlp")
    assert.equals(403, st) -- the default of two versions
    st, body = mg("PUT", "/models/mlp/2.0/set-default")
    assert.equals(200, st, body)
    st, body = mg("GET", "/models/mlp")
    assert.equals(200, st, body)
    assert.equals("2.0", S.decode(body)[1].modelVersion)
    st = mg("PUT", "/models/mlp/7.0/set-default")
    assert.equals(404, st)
    -- scale 2.0 to two workers and back
    st, body = mg("PUT", "/models/mlp/2.0?min_worker=2&max_worker=2&synchronous=true")
    assert.equals(200, st, body)
    st, body = mg("GET", "/models/mlp/2.0")
    assert.equals(200, st, body)
    assert.equals(2, #S.decode(body)[1].workers)
    st = mg("PUT", "/models/mlp/2.0?min_worker=1&synchronous=true")
    assert.equals(200, st)
    st = mg("PUT", "/models/mlp?min_worker=x")
    assert.equals(400, st)
    st = mg("PUT", "/models/mlp?min_worker=3&max_worker=1")
    assert.equals(400, st)
    -- predictions route to the default version, and to an explicit one
    local want = ref { X1 }[1]
    st, body = S.http(srv, "POST", "/predictions/mlp", { body = S.json.encode(X1) })
    assert.equals(200, st, body)
    close(S.decode(body), want)
    st, body = S.http(srv, "POST", "/predictions/mlp/1.0", { body = S.json.encode(X1) })
    assert.equals(200, st, body)
    close(S.decode(body), want)
    st = mg("DELETE", "/models/mlp/1.0")
    assert.equals(200, st)
    st = S.http(srv, "POST", "/predictions/mlp/1.0", { body = S.json.encode(X1) })
    assert.equals(404, st)
    -- bad registrations
    st, body = mg("POST", "/models")
    assert.equals(400, st)
    assert.truthy(S.decode(body).message:find("url", 1, true))
    st = mg("POST", "/models?url=https://example.com/m.tar")
    assert.equals(400, st)
    st = mg("POST", "/models?url=../../etc")
    assert.equals(400, st)
    st = mg("POST", "/models?url=missing.tar")
    assert.equals(404, st)
    st = mg("POST", "/models?url=mlp_tgz.tar.gz&batch_size=zero")
    assert.equals(400, st)
    -- an asynchronous registration answers 202 and becomes READY
    st, body = mg("POST", "/models?url=mlp_tgz.tar.gz&model_name=mlp_gz")
    assert.equals(202, st, body)
    local ready = false
    for _ = 1, 300 do
      st, body = mg("GET", "/models/mlp_gz")
      if st == 200 and S.decode(body)[1].status == "READY" then ready = true break end
      S.sleep(0.1)
    end
    assert.is_true(ready)
    st, body = S.http(srv, "POST", "/predictions/mlp_gz", { body = S.json.encode(X2) })
    assert.equals(200, st, body)
    close(S.decode(body), ref { X2 }[1])
    st = mg("DELETE", "/models/mlp_gz")
    assert.equals(200, st)
    st = mg("DELETE", "/models/mlp_gz")
    assert.equals(404, st)
  end)

  it("serves an ONNX archive (the ONNX importer under the C runtime)", function()
    local rc, out = S.archive { "--model-name", "mlp_onnx", "--onnx", onnx, "--handler", "json_tensor",
      "--input", "data:float32:-1,12", "--batch-size", "4", "--export-path", store }
    assert.equals(0, rc, out)
    local st, body = S.http(srv, "POST", "/models?url=mlp_onnx.tar&synchronous=true",
      { api = "management", timeout = 60 })
    assert.equals(200, st, body)
    st, body = S.http(srv, "POST", "/predictions/mlp_onnx",
      { body = S.json.encode { instances = { X1, X2 } } })
    assert.equals(200, st, body)
    close(S.decode(body), ref { X1, X2 })
    st = S.http(srv, "DELETE", "/models/mlp_onnx", { api = "management" })
    assert.equals(200, st)
  end)

  it("the metrics port: Prometheus text with per-model counters and histograms", function()
    local st, text, hdr = S.http(srv, "GET", "/metrics", { api = "metrics" })
    assert.equals(200, st)
    assert.truthy(hdr["content-type"]:find("text/plain", 1, true))
    assert.truthy(text:find("# TYPE mx_serve_requests_total counter", 1, true))
    assert.truthy(text:find("# TYPE mx_serve_batch_size histogram", 1, true))
    assert.truthy(S.metric(srv, "mx_serve_requests_total", 'model="mlp",version="2.0",code="200"') >= 1)
    assert.truthy(S.metric(srv, "mx_serve_inference_seconds_count", 'model="mlp",version="2.0"') >= 1)
    assert.truthy(S.metric(srv, "mx_serve_queue_seconds_count", 'model="mlp",version="2.0"') >= 1)
    assert.truthy(S.metric(srv, "process_resident_memory_bytes") > 0)
    assert.truthy(S.metric(srv, "mx_serve_http_requests_total", 'api="management",code="404"') >= 1)
    st = S.http(srv, "GET", "/other", { api = "metrics" })
    assert.equals(404, st)
  end)
end)

describe("mx-serve with a management token", function()
  local srv
  setup(function()
    srv = S.start({ "--model-store", store, "--token", "s3cret" }, { token = "s3cret" })
  end)
  teardown(function() S.stop(srv) end)

  it("refuses the management API without the token, not the inference API", function()
    local st, body = S.http(srv, "GET", "/models", { api = "management" })
    assert.equals(401, st)
    assert.truthy(S.decode(body).message:find("Bearer", 1, true))
    st = S.http(srv, "GET", "/models", { api = "management", token = "wrong" })
    assert.equals(401, st)
    st = S.http(srv, "GET", "/models", { api = "management", token = "s3cret" })
    assert.equals(200, st)
    st = S.http(srv, "POST", "/models?url=mlp_tar.tar", { api = "management" })
    assert.equals(401, st)
    st = S.http(srv, "GET", "/ping")
    assert.equals(200, st)
  end)
end)

describe("mx-serve in SageMaker's mode", function()
  local srv, mdir
  setup(function()
    -- the model directory SageMaker mounts: here a copy of the directory archive
    mdir = dir .. "/opt_ml_model"
    os.execute("cp -r " .. S.q(store .. "/mlp_dir") .. " " .. S.q(mdir))
    srv = S.start({ "--sagemaker", "--model-dir", mdir, "--inference-address", "127.0.0.1:0" },
      { sagemaker = true })
  end)
  teardown(function() S.stop(srv) end)

  it("serves GET /ping and POST /invocations from the model directory", function()
    local st = S.http(srv, "GET", "/ping")
    assert.equals(200, st)
    local st2, body = S.http(srv, "POST", "/invocations", { body = S.json.encode { instances = { X1 } },
      type = "application/json" })
    assert.equals(200, st2, body)
    close(S.decode(body), ref { X1 })
  end)
end)

describe("mx-serve's image classifier", function()
  local srv
  local photo = "/usr/share/doc/opencv-doc/examples/data/baboon.jpg"
  local logo = "/usr/share/doc/opencv-doc/examples/data/LinuxLogo.jpg"
  setup(function()
    mx.random.seed(3)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(8, 3, { strides = 2, padding = 1 }), nn.BatchNorm(), nn.Activation("relu"),
      nn.GlobalAvgPool2D(), nn.Dense(10))
    net:initialize()
    net:hybridize()
    net(mx.nd.zeros { 1, 3, 64, 64 })
    net:export(dir .. "/cnn")
    local labels = {}
    for i = 0, 9 do labels[#labels + 1] = "class" .. i end
    S.write(dir .. "/labels.txt", table.concat(labels, "\n") .. "\n")
    local rc, out = S.archive { "--model-name", "cnn", "--symbol", dir .. "/cnn-symbol.json", "--params",
      dir .. "/cnn-0000.params", "--handler", "image_classifier", "--input",
      "data:float32:-1,3,64,64", "--extra-files", dir .. "/labels.txt", "--config",
      '{"resize": 72, "crop": 64, "topk": 3}', "--batch-size", "4", "--export-path", store }
    assert.equals(0, rc, out)
    srv = S.start { "--model-store", store, "--models", "cnn.tar", "--max-image-pixels", "300000" }
  end)
  teardown(function() S.stop(srv) end)

  it("answers the top-k labels of a JPEG, raw or as a multipart part, most probable first", function()
    if not io.open(logo) then pending("opencv-doc's LinuxLogo.jpg is missing") return end
    local st, body = S.http(srv, "POST", "/predictions/cnn", { file = logo, type = "image/jpeg" })
    assert.equals(200, st, body)
    local order = {}
    for _, p in body:gmatch('"(class%d)":([%d.e+-]+)') do order[#order + 1] = tonumber(p) end
    assert.equals(3, #order)
    assert.truthy(order[1] >= order[2] and order[2] >= order[3])
    local st2, body2 = S.http(srv, "POST", "/predictions/cnn", { form = { data = logo } })
    assert.equals(200, st2)
    assert.equals(body, body2)
    -- the same pixels through the Lua pipeline in this process
    local f = io.open(logo, "rb")
    local img = mx.image.imdecode(f:read("*a"))
    f:close()
    img = mx.image.center_crop(mx.image.resize_short(img, 72, 1), { 64, 64 }, 1)
    local mean = mx.nd.array({ { { 0.485 } }, { { 0.456 } }, { { 0.406 } } })
    local std = mx.nd.array({ { { 0.229 } }, { { 0.224 } }, { { 0.225 } } })
    local x = ((mx.nd.to_tensor(img) - mean) / std):reshape { 1, 3, 64, 64 }
    local sb = mx.gluon.SymbolBlock.imports(dir .. "/cnn-symbol.json", { "data" }, dir .. "/cnn-0000.params")
    local p = mx.nd.softmax(sb(x)):tolist()
    local got = S.decode(body)
    for label, v in pairs(got) do close(v, p[tonumber(label:match("%d+")) + 1], 1e-4) end
  end)

  it("refuses non-image bytes, truncated and oversized images with a clear 4xx", function()
    local st, body = S.http(srv, "POST", "/predictions/cnn", { body = "GIF89a not really" })
    assert.equals(400, st)
    assert.truthy(S.decode(body).message:find("not a JPEG or PNG", 1, true))
    st, body = S.http(srv, "POST", "/predictions/cnn", { body = "" })
    assert.equals(400, st)
    assert.truthy(S.decode(body).message:find("empty body", 1, true))
    if io.open(photo) then
      local f = io.open(photo, "rb")
      local bytes = f:read("*a")
      f:close()
      st, body = S.http(srv, "POST", "/predictions/cnn", { body = bytes:sub(1, 4000) })
      assert.equals(400, st)
      assert.truthy(S.decode(body).message:find("truncated", 1, true), body)
      -- 512 x 512 = 262144 pixels fit; a header claiming more does not (nothing decoded)
      st, body = S.http(srv, "POST", "/predictions/cnn", { file = photo })
      assert.equals(200, st, body)
      -- the SOF0 marker's height and width (512, 512) -> (2048, 2048)
      local at = bytes:find("\255\192\0\17\8\2\0\2\0", 1, true)
      assert.truthy(at)
      local big = bytes:sub(1, at + 4) .. "\8\0\8\0" .. bytes:sub(at + 9)
      st, body = S.http(srv, "POST", "/predictions/cnn", { body = big })
      assert.equals(413, st, body)
      assert.truthy(S.decode(body).message:find("2048x2048", 1, true), body)
    end
  end)
end)

describe("mx-serve's batches", function()
  it("give their tensors back when answered, except those kept (workers without huge pages)", function()
    -- each answer says whether the tensor the previous batch made is released by now
    local hstore = dir .. "/scope_store"
    S.dir_archive(hstore .. "/probe", { model_name = "probe", handler = "handler.lua",
      signature = { inputs = { { name = "data", shape = { -1, 1 } } } } },
      { ["handler.lua"] = [[
local mx = require("mx")
local H = require("mx.serve").Handler:extend("Probe")
function H:initialize(ctx)
  require("mx.serve").Handler.initialize(self, ctx)
  self.base = mx.nd.ones({ 4 })
end
function H:preprocess()
  local released = self.prev ~= nil and not pcall(function() return self.prev:sum() end)
  self.prev = mx.nd.ones({ 256 }) * 2
  self.kept = self.kept or mx.nd.keep(mx.nd.zeros({ 3 }) + 7)
  return { released = released, v = (self.prev + self.base:sum()):sum():asscalar() }
end
function H:inference(x) return x end
function H:postprocess(x)
  local r = {}
  for i = 1, #self.live do
    r[i] = { released = x.released, v = x.v, kept = self.kept:sum():asscalar(),
      hugepages = os.getenv("MX_HUGEPAGES") or "unset" }
  end
  return r
end
return H
]] })
    local srv = S.start { "--model-store", hstore, "--models", "probe" }
    finally(function() S.stop(srv) end)
    for round = 1, 3 do
      local st, body = S.http(srv, "POST", "/predictions/probe", { body = "x", timeout = 20 })
      assert.equals(200, st, body)
      local a = S.decode(body)
      assert.equals(round > 1, a.released, body)
      assert.equals(1536, a.v)
      assert.equals(21, a.kept) -- nd.keep: alive across batches
      assert.equals("0", a.hugepages) -- the worker's blocks on 4 kB pages (docs/serving.md)
    end
  end)
end)

teardown(function() os.execute("rm -rf " .. S.q(dir)) end)
