-- spec/serve_faults_spec.lua — mx-serve under faults: a handler raising (500 with its
-- message, the worker serves on), a request refused alone inside a batch, a worker that
-- crashes or exits (its batch answered 500, the worker restarted), the per-request
-- deadline (504, the stuck worker killed), the queue bound (503 + Retry-After), a
-- graceful SIGTERM drain. The handler is spec/fixtures/serve/faulty (its body picks the
-- fault). Loopback only, every wait bounded.
local S = require("helpers.serve")

if not S.available() then
  describe("mx-serve faults", function()
    it("is built", function() pending("build/mx-serve missing: libmicrohttpd-dev / libarchive-dev not installed") end)
  end)
  return
end

local store = S.tmpdir()
os.execute("cp -r spec/fixtures/serve/faulty " .. S.q(store .. "/faulty"))

local function post(srv, body, path)
  local st, b, h = S.http(srv, "POST", path or "/predictions/faulty", { body = body, timeout = 20 })
  return st, (b:sub(1, 1) == "{" and S.decode(b) or b), h
end

describe("mx-serve faults", function()
  local srv
  setup(function()
    srv = S.start { "--model-store", store, "--models", "faulty", "--deadline-ms", "1500",
      "--queue-size", "4" }
  end)
  teardown(function() S.stop(srv) end)

  it("a handler error answers 500 with its message and the worker serves on", function()
    local st, a = post(srv, "hello")
    assert.equals(200, st)
    local pid = a.pid
    st, a = post(srv, "error")
    assert.equals(500, st)
    assert.equals("InternalServerException", a.type)
    assert.truthy(a.message:find("boom: the handler failed on purpose", 1, true), a.message)
    st, a = post(srv, "client")
    assert.equals(409, st)
    assert.equals("conflict raised by the handler", a.message)
    st, a = post(srv, "hello")
    assert.equals(200, st)
    assert.equals(pid, a.pid) -- the same process
    assert.equals(2, S.metric(srv, "mx_serve_handler_errors_total", 'model="faulty"'))
  end)

  it("a request refused alone leaves its batch; the others are answered", function()
    local hs = {}
    for i, b in ipairs { "one", "bad", "two" } do
      hs[i] = S.http_async(srv, "POST", "/predictions/faulty", { body = b })
    end
    local st1, b1 = S.wait(hs[1])
    local st2, b2 = S.wait(hs[2])
    local st3, b3 = S.wait(hs[3])
    assert.equals(200, st1)
    assert.equals(422, st2)
    assert.equals(200, st3)
    assert.equals("bad input: bad", S.decode(b2).message)
    -- batched together (max_batch_delay 200 ms): the live batch held the two others
    assert.equals(2, S.decode(b1).n)
    assert.equals(2, S.decode(b3).n)
  end)

  it("a worker that crashes is restarted and its batch answered 500", function()
    local _, a = post(srv, "hello")
    local pid = a.pid
    local st
    st, a = post(srv, "crash")
    assert.equals(500, st)
    assert.truthy(a.message:find("signal 11", 1, true), a.message)
    assert.truthy(a.message:find("restarted", 1, true), a.message)
    st, a = post(srv, "hello")
    assert.equals(200, st)
    assert.is_not.equals(pid, a.pid)
    st, a = post(srv, "exit")
    assert.equals(500, st)
    assert.truthy(a.message:find("exited with status 3", 1, true), a.message)
    st = post(srv, "hello")
    assert.equals(200, st)
    assert.equals(2, S.metric(srv, "mx_serve_worker_crashes_total", 'model="faulty"'))
  end)

  it("a request past its deadline gets 504; the stuck worker is killed and replaced", function()
    local t0 = os.time()
    local st, a = post(srv, "sleep:8000")
    assert.equals(504, st)
    assert.truthy(a.message:find("deadline", 1, true))
    assert.truthy(os.time() - t0 <= 4)
    st = post(srv, "hello")
    assert.equals(200, st)
    assert.truthy(S.metric(srv, "mx_serve_rejected_total", 'model="faulty",version="1",reason="deadline"') >= 1)
  end)

  it("a full queue answers 503 with Retry-After", function()
    -- one at a time, a 10 s deadline: 1 running + 4 queued; the rest are refused
    local st, body = S.http(srv, "POST", "/models?url=faulty&model_name=slow&batch_size=1"
      .. "&response_timeout=10&synchronous=true", { api = "management" })
    assert.equals(200, st, body)
    local hs = {}
    hs[1] = S.http_async(srv, "POST", "/predictions/slow", { body = "sleep:600" })
    S.sleep(0.3)
    for i = 2, 10 do hs[i] = S.http_async(srv, "POST", "/predictions/slow", { body = "sleep:300" }) end
    local ok, full = 0, 0
    for i = 1, 10 do
      local s, b, h = S.wait(hs[i])
      if s == 200 then ok = ok + 1
      else
        assert.equals(503, s, b)
        assert.equals("1", h["retry-after"])
        assert.truthy(S.decode(b).message:find("queue", 1, true))
        full = full + 1
      end
    end
    assert.truthy(ok >= 5, ok)
    assert.truthy(full >= 1, full)
    assert.equals(full, S.metric(srv, "mx_serve_rejected_total", 'model="slow",version="1",reason="queue_full"'))
  end)

  it("a model with no worker answers 503; scaling it up serves again", function()
    local st = S.http(srv, "PUT", "/models/slow?min_worker=0&synchronous=true", { api = "management" })
    assert.equals(200, st)
    local body
    st, body = S.http(srv, "POST", "/predictions/slow", { body = "x" })
    assert.equals(503, st)
    assert.truthy(S.decode(body).message:find("no worker", 1, true))
    st = S.http(srv, "PUT", "/models/slow?min_worker=1&synchronous=true", { api = "management" })
    assert.equals(200, st)
    st = S.http(srv, "POST", "/predictions/slow", { body = "x" })
    assert.equals(200, st)
  end)

  it("a handler that fails to load leaves the registration refused with its message", function()
    local bad = store .. "/broken"
    S.dir_archive(bad, { model_name = "broken", handler = "handler.lua",
      signature = { inputs = { { name = "data", shape = { -1, 1 } } } } },
      { ["handler.lua"] = "error('this handler cannot load')" })
    local st, body = S.http(srv, "POST", "/models?url=broken&synchronous=true", { api = "management", timeout = 60 })
    assert.equals(400, st)
    assert.truthy(S.decode(body).message:find("this handler cannot load", 1, true), body)
    st = S.http(srv, "GET", "/models/broken", { api = "management" })
    assert.equals(404, st)
  end)
end)

describe("mx-serve's SIGTERM", function()
  it("drains the requests in flight, then exits 0", function()
    local srv = S.start { "--model-store", store, "--models", "faulty", "--deadline-ms", "20000" }
    local hs = {}
    for i = 1, 3 do hs[i] = S.http_async(srv, "POST", "/predictions/faulty", { body = "sleep:1500" }) end
    S.sleep(0.5)
    local pid = srv.pid
    os.execute("kill -TERM " .. pid)
    S.sleep(0.3)
    -- new connections are refused while it drains
    local st = S.http(srv, "GET", "/ping", { timeout = 2 })
    assert.is_not.equals(200, st)
    for i = 1, 3 do
      local s, b = S.wait(hs[i])
      assert.equals(200, s, b)
      assert.equals("sleep:1500", S.decode(b).echo)
    end
    local rc = S.stop(srv)
    assert.equals(0, rc)
    assert.is_false(os.execute("kill -0 " .. pid .. " 2>/dev/null") == 0)
  end)
end)

teardown(function() os.execute("rm -rf " .. S.q(store)) end)
