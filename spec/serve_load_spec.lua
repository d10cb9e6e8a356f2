-- spec/serve_load_spec.lua — mx-serve under load (loopback, bounded in requests and
-- time; no timing is asserted): concurrent clients see dynamic batching in the metrics,
-- a version switch under load (register v2 beside v1, set-default, delete v1) fails no
-- request, and (#slow) a million requests leave the front end's and the worker's RSS
-- flat.
local S = require("helpers.serve")

if not S.available() then
  describe("mx-serve under load", function()
    it("is built", function() pending("build/mx-serve missing: libmicrohttpd-dev / libarchive-dev not installed") end)
  end)
  return
end

local dir = S.tmpdir()
local store = dir .. "/store"
os.execute("mkdir -p " .. S.q(store))
local X1 = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }
local body = S.json.encode(X1)

local function archive(name, version, seed, extra)
  local sym, par, ref = S.export_mlp(dir, name .. version, seed)
  local args = { "--model-name", name, "--version", version, "--symbol", sym, "--params", par,
    "--handler", "json_tensor", "--input", "data:float32:-1,12", "--batch-size", "8",
    "--max-batch-delay", "5", "--export-path", store, "--format", "dir" }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  local rc, out = S.archive(args)
  assert(rc == 0, out)
  os.execute("mv " .. S.q(store .. "/" .. name) .. " " .. S.q(store .. "/" .. name .. "-" .. version))
  return ref
end
local ref1 = archive("mlp", "1", 21)
local ref2 = archive("mlp", "2", 22)

local function close(a, b)
  for i = 1, #b do assert(math.abs(a[i] - b[i]) <= 1e-5 * (1 + math.abs(b[i])), a[i] .. " vs " .. b[i]) end
end

describe("mx-serve under load", function()
  local srv
  setup(function() srv = S.start { "--model-store", store, "--models", "mlp-1" } end)
  teardown(function() S.stop(srv) end)

  it("batches concurrent requests: the batch-size histogram counts batches above one", function()
    local r = S.load(srv, "/predictions/mlp", { body = body, type = "application/json",
      connections = 16, requests = 4000 })
    assert.equals(4000, r.status["200"])
    assert.equals(0, r.errors)
    local batches = S.metric(srv, "mx_serve_batch_size_count", 'model="mlp",version="1"')
    local rows = S.metric(srv, "mx_serve_batch_size_sum", 'model="mlp",version="1"')
    local singles = S.metric(srv, "mx_serve_batch_size_bucket", 'model="mlp",version="1",le="1"')
    assert.equals(4000, rows)
    assert.truthy(batches < 4000 * 0.75, batches)   -- requests shared batches
    assert.truthy(singles < batches, singles)
    assert.truthy(rows / batches > 1.3, rows / batches)
  end)

  it("switches versions under load with no failed request", function()
    local st, b = S.http(srv, "POST", "/predictions/mlp", { body = body })
    close(S.decode(b), ref1 { X1 }[1])
    local out = S.load(srv, "/predictions/mlp", { body = body, type = "application/json",
      connections = 8, requests = 200000, duration = 25, background = true })
    S.sleep(1)
    st, b = S.http(srv, "POST", "/models?url=mlp-2&synchronous=true&initial_workers=1",
      { api = "management", timeout = 60 })
    assert.equals(200, st, b)
    S.sleep(1)
    st = S.http(srv, "PUT", "/models/mlp/2/set-default", { api = "management" })
    assert.equals(200, st)
    S.sleep(1)
    st = S.http(srv, "DELETE", "/models/mlp/1", { api = "management" })
    assert.equals(200, st)
    local r = S.load_result(out, 120)
    assert.truthy(r.requests > 1000, r.requests)
    assert.equals(0, r.errors)
    assert.equals(r.requests, r.status["200"])
    st, b = S.http(srv, "POST", "/predictions/mlp", { body = body })
    assert.equals(200, st)
    close(S.decode(b), ref2 { X1 }[1])
    st = S.http(srv, "GET", "/models/mlp/1", { api = "management" })
    assert.equals(404, st)
  end)
end)

describe("mx-serve's memory #slow", function()
  it("stays flat over a million requests (front end and worker RSS)", function()
    local srv = S.start { "--model-store", store, "--models", "mlp-2" }
    local worker = S.workers(srv)[1]
    local fe, wk = {}, {}
    local total = 0
    for round = 1, 10 do
      local r = S.load(srv, "/predictions/mlp", { body = body, type = "application/json",
        connections = 16, requests = 100000 })
      assert.equals(100000, r.status["200"])
      total = total + r.requests
      fe[round], wk[round] = S.rss(srv.pid), S.rss(worker)
    end
    assert.equals(1000000, total)
    assert.equals(worker, S.workers(srv)[1]) -- never restarted
    S.stop(srv)
    -- after two warm-up rounds, growth under 4 MB (front end) and 16 MB (worker)
    local msg = string.format("front end RSS MB %s; worker %s",
      table.concat((function() local t = {} for i, v in ipairs(fe) do t[i] = string.format("%.1f", v / 2^20) end return t end)(), " "),
      table.concat((function() local t = {} for i, v in ipairs(wk) do t[i] = string.format("%.1f", v / 2^20) end return t end)(), " "))
    print(msg)
    assert.truthy(fe[10] - fe[2] < 4 * 2^20, msg)
    assert.truthy(wk[10] - wk[2] < 16 * 2^20, msg)
  end)
end)

teardown(function() os.execute("rm -rf " .. S.q(dir)) end)
