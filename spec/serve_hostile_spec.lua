-- spec/serve_hostile_spec.lua — what a stranger can send mx-serve: oversized bodies
-- (413), oversized headers, malformed HTTP, clients too slow in their headers, body or
-- silence (cut off), truncated or boundary-less multipart, invalid JSON, wrong tensor
-- shapes and dtypes (JSON and KServe v2), pipelined requests (answered in order), and a
-- bounded fuzz of mutated HTTP requests and JSON bodies: every answer is a 4xx (or a
-- success), never a 5xx, a hang or a dead server.
local S = require("helpers.serve")

if not S.available() then
  describe("mx-serve hostile input", function()
    it("is built", function() pending("build/mx-serve missing: libmicrohttpd-dev / libarchive-dev not installed") end)
  end)
  return
end

local dir = S.tmpdir()
local store = dir .. "/store"
os.execute("mkdir -p " .. S.q(store))
os.execute("cp -r spec/fixtures/serve/faulty " .. S.q(store .. "/faulty"))
local sym, par = S.export_mlp(dir, "mlp", 5)
assert(S.archive { "--model-name", "mlp", "--symbol", sym, "--params", par, "--handler",
  "json_tensor", "--input", "data:float32:-1,12", "--batch-size", "4", "--max-batch-delay", "2",
  "--export-path", store } == 0)

local X1 = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }

describe("mx-serve hostile input", function()
  local srv
  setup(function()
    srv = S.start { "--model-store", store, "--models", "mlp.tar,faulty", "--max-request-size",
      "65536", "--header-timeout", "1", "--body-timeout", "2", "--idle-timeout", "2" }
  end)
  teardown(function()
    assert.truthy(S.alive(srv))
    S.stop(srv)
  end)

  local function post(path, body, typ)
    local st, b = S.http(srv, "POST", path, { body = body, type = typ or "application/json" })
    return st, b, (b:sub(1, 1) == "{" and S.decode(b) or {})
  end

  it("bodies over the limit: 413, by Content-Length and chunked", function()
    local big = string.rep("1,", 40000)
    local st, _, j = post("/predictions/mlp", "[" .. big .. "1]")
    assert.equals(413, st)
    assert.truthy(j.message:find("65536", 1, true))
    local st2, b2 = S.http(srv, "POST", "/predictions/mlp", { body = "[" .. big .. "1]",
      headers = { "Transfer-Encoding: chunked" }, type = "application/json" })
    assert.equals(413, st2, b2)
    st = post("/predictions/mlp", S.json.encode(X1))
    assert.equals(200, st)
  end)

  it("malformed HTTP and oversized headers: 4xx answers, the server unharmed", function()
    -- not a request line at all: libmicrohttpd closes without an answer
    local st = S.raw(srv, "GARBAGE\r\n\r\n")
    assert.truthy(st == nil or (st >= 400 and st < 500), tostring(st))
    st = S.raw(srv, "GET /ping\r\n\r\n")
    assert.truthy(st and st >= 400 and st < 500, tostring(st))
    st = S.raw(srv, "GET /ping HTTP/9.9\r\nHost: x\r\n\r\n")
    assert.equals(505, st)
    st = S.raw(srv, "GET /ping HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
    assert.truthy(st and st >= 400 and st < 500, tostring(st))
    st = S.raw(srv, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " .. string.rep("a", 100000) .. "\r\n\r\n")
    assert.truthy(st == nil or (st >= 400 and st < 500), tostring(st))
    st = S.raw(srv, "POST /predictions/mlp HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n")
    assert.truthy(st and st >= 400 and st < 500, tostring(st))
    st = S.raw(srv, "POST /predictions/mlp HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n")
    assert.truthy(st and st >= 400 and st < 500, tostring(st))
    st = S.raw(srv, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    assert.equals(200, st)
  end)

  it("cuts off clients too slow in their headers, their body, or silent", function()
    local function cut_within(bytes, secs)
      local fd = S.connect(srv)
      if bytes then S.send(fd, bytes) end
      local t0 = os.time()
      local _, closed = S.recv_all(fd, secs)
      S.close(fd)
      return closed, os.time() - t0
    end
    local closed, t = cut_within("POST /predictions/mlp HTTP/1.1\r\nHost: x\r\nX-Slow: ", 6)
    assert.is_true(closed)
    assert.truthy(t <= 4, t)
    closed, t = cut_within("POST /predictions/mlp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n[1,", 7)
    assert.is_true(closed)
    assert.truthy(t <= 5, t)
    closed, t = cut_within(nil, 7)
    assert.is_true(closed)
    assert.truthy(t <= 5, t)
    assert.truthy(S.metric(srv, "mx_serve_connections_cut_total", 'reason="header_timeout"') >= 1)
    assert.truthy(S.metric(srv, "mx_serve_connections_cut_total", 'reason="body_timeout"') >= 1)
    assert.truthy(S.metric(srv, "mx_serve_connections_cut_total", 'reason="idle_timeout"') >= 1)
  end)

  it("truncated or boundary-less multipart: 400", function()
    local st, _, j = post("/predictions/faulty", "--XyZ\r\nContent-Disposition: form-data; name=\"data\"\r\n\r\nabc",
      "multipart/form-data; boundary=XyZ")
    assert.equals(400, st)
    assert.truthy(j.message:find("multipart", 1, true))
    st = post("/predictions/faulty", "--XyZ\r\n\r\nabc\r\n--XyZ--\r\n", "multipart/form-data")
    assert.equals(400, st)
    st, _, j = post("/predictions/faulty", "--XyZ\r\nContent-Disposition: form-data; name=\"data\"\r\n\r\nabc\r\n--XyZ--\r\n",
      "multipart/form-data; boundary=XyZ")
    assert.equals(200, st)
    assert.equals("abc", j.echo)
  end)

  it("JSON tensors: invalid JSON, wrong shapes, ragged data, strings, unknown inputs: 400", function()
    local cases = {
      { "[1, 2,", "invalid JSON" },
      { "[1, 2, 3]", "shape [1, 3]" },
      { "[[1,2,3,4,5,6,7,8,9,10,11,12],[1,2]]", "ragged" },
      { '["a",2,3,4,5,6,7,8,9,10,11,12]', "string" },
      { '{"nope": [1]}', "no input 'nope'" },
      { '{"instances": 7}', "instances" },
      { string.rep("[", 5000) .. string.rep("]", 5000), "" },
      { "", "invalid JSON" },
    }
    for _, c in ipairs(cases) do
      local st, b = post("/predictions/mlp", c[1])
      assert.equals(400, st, c[1]:sub(1, 40) .. " -> " .. b)
      assert.truthy(b:find(c[2], 1, true), b)
    end
  end)

  it("KServe v2: each malformed request is a 400 naming the problem", function()
    local function v2(t) return post("/v2/models/mlp/infer", type(t) == "string" and t or S.json.encode(t)) end
    local good = { name = "data", shape = { 1, 12 }, datatype = "FP32", data = X1 }
    local function with(k, v)
      local t = {}
      for a, b in pairs(good) do t[a] = b end
      t[k] = v
      return { inputs = { t } }
    end
    local cases = {
      { "{", "invalid JSON" },
      { "[]", "JSON object" },
      { "{}", "\"inputs\"" },
      { { inputs = { { shape = { 1 } } } }, "name" },
      { with("name", "other"), "no input 'other'" },
      { with("datatype", "FP64"), "takes FP32" },
      { with("datatype", "UINT16"), "not supported" },
      { with("shape", { 1, 11 }), "does not match" },
      { with("shape", { 2, 12 }), "needs 24" },
      { with("shape", { -1, 12 }), "non-negative" },
      { with("shape", { 65536, 65536, 65536 }), "" },
      { with("data", { "x" }), "not a number" },
      { with("data", 5), "must be an array" },
      { { id = 5, inputs = { good } }, "\"id\"" },
      { { inputs = { good, good } }, "twice" },
      { { inputs = { good }, outputs = { { name = "nope" } } }, "no output 'nope'" },
    }
    for _, c in ipairs(cases) do
      local st, b = v2(c[1])
      assert.truthy(st == 400 or st == 413, b)
      local msg = S.decode(b).error
      assert.truthy(msg and msg:find(c[2], 1, true),
        (type(c[1]) == "string" and c[1] or S.json.encode(c[1])) .. " -> " .. b)
    end
    local st = v2 { inputs = { good } }
    assert.equals(200, st)
  end)

  it("answers pipelined requests in their order", function()
    local fd = S.connect(srv)
    local reqs = {}
    for i = 1, 6 do
      local body = "msg" .. i
      reqs[i] = "POST /predictions/faulty HTTP/1.1\r\nHost: x\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body
    end
    S.send(fd, table.concat(reqs))
    local res = S.recv_responses(fd, 6, 20)
    S.close(fd)
    assert.equals(6, #res)
    for i = 1, 6 do
      assert.equals(200, res[i].status)
      assert.equals("msg" .. i, S.decode(res[i].body).echo)
    end
  end)

  it("a bounded fuzz of mutated requests and bodies: no 5xx, no hang", function()
    math.randomseed(20261201)
    local function mutate(s)
      local b = { s:byte(1, -1) }
      for _ = 1, math.random(1, 6) do
        local i = math.random(1, #b)
        local r = math.random(1, 4)
        if r == 1 then b[i] = math.random(0, 255)
        elseif r == 2 then table.remove(b, i)
        elseif r == 3 then table.insert(b, i, b[math.random(1, #b)])
        else
          local alphabet = "[]{},:\"0-e.\r\n "
          b[i] = alphabet:byte(math.random(1, #alphabet))
        end
      end
      local out = {}
      for i = 1, #b do out[i] = string.char(b[i]) end
      return table.concat(out)
    end
    local v2body = S.json.encode { id = "f", inputs = { { name = "data", shape = { 1, 12 },
      datatype = "FP32", data = X1 } } }
    local bodies = { { "/v2/models/mlp/infer", v2body }, { "/predictions/mlp", S.json.encode { instances = { X1 } } } }
    local head = "POST /predictions/mlp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      .. "Content-Length: 30\r\n\r\n" .. S.json.encode(X1):sub(1, 30)
    local seen = {}
    for n = 1, 240 do
      local st, b
      if n % 3 == 0 then
        st, b = S.raw(srv, mutate(head), 5)
      else
        local c = bodies[n % 3]
        local body = mutate(c[2])
        st, b = S.raw(srv, "POST " .. c[1] .. " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
          .. "Content-Type: application/json\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body, 10)
        assert.truthy(st, "no answer to a well-framed request")
      end
      if st then
        assert.truthy(st < 500, st .. ": " .. tostring(b))
        seen[st] = (seen[st] or 0) + 1
      end
    end
    assert.truthy((seen[400] or 0) > 50)
    local st = S.http(srv, "POST", "/predictions/mlp", { body = S.json.encode(X1) })
    assert.equals(200, st)
  end)
end)

teardown(function() os.execute("rm -rf " .. S.q(dir)) end)
