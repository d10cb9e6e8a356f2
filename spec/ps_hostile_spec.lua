-- dist_async's wire protocol under malformed and hostile input: each check of
-- ps_protocol.decode in-process, then a live server fed garbage that keeps serving.
local Z = require("mx.kvstore.ps_zmq")
local P = require("mx.kvstore.ps_protocol")
local J = require("mx.kvstore.ps_job")
local ffi = require("ffi")

local function hdr(fields)
  local h = ffi.new("mx_ps_header")
  h.magic, h.version, h.cmd = fields.magic or P.MAGIC, fields.version or P.VERSION, fields.cmd or P.CMD.PUSH
  h.dtype, h.ndim, h.req = fields.dtype or 0, fields.ndim or 0, 1
  h.nbytes = fields.nbytes or 0
  return ffi.string(h, P.HEADER_SIZE)
end
local function dims(t)
  local b = ffi.new("int64_t[?]", #t + 1)
  for i, d in ipairs(t) do b[i - 1] = d end
  return ffi.string(b, 8 * #t)
end

-- the frame lists of malformed messages and the reason decode must give
local CASES = {
  { "one frame of garbage", { "garbage" }, "expected 4 frames, got 1" },
  { "a truncated header", { "MXPS\1\3", "k", "", "" }, "header frame is 6 bytes" },
  { "bad magic", { hdr { magic = 0x12345678 }, "k", "", "" }, "bad magic" },
  { "an unknown version", { hdr { version = 9 }, "k", "", "" }, "protocol version 9" },
  { "an unknown command", { hdr { cmd = 99 }, "k", "", "" }, "unknown command 99" },
  { "an oversized key", { hdr {}, string.rep("k", 300), "", "" }, "key frame is 300 bytes" },
  { "ndim 9", { hdr { ndim = 9 }, "k", "", "" }, "ndim 9 > 8" },
  { "a shape frame of the wrong size",
    { hdr { ndim = 2, nbytes = 16 }, "k", dims { 2 }, string.rep("\0", 16) },
    "shape frame is 8 bytes, ndim 2 needs 16" },
  { "a huge claimed size", { hdr { ndim = 1, nbytes = 1e12 }, "k", dims { 1 }, "abcd" },
    "claims 1000000000000 payload bytes, the payload frame has 4" },
  { "a negative dim", { hdr { ndim = 1, nbytes = 4 }, "k", dims { -1 }, "abcd" }, "dim 1 is %-1" },
  { "a shape that disagrees with the payload", { hdr { ndim = 2, nbytes = 4 }, "k", dims { 2, 3 }, "abcd" },
    "shape 2x3 of dtype 0 needs 24 bytes, payload has 4" },
  { "an unknown dtype", { hdr { dtype = 42, ndim = 1, nbytes = 4 }, "k", dims { 1 }, "abcd" },
    "unknown dtype code 42" },
  { "a row_sparse push without a shape", { hdr { cmd = P.CMD.PUSH_RSP }, "k", "", "" },
    "a row_sparse push needs a shape" },
  { "a row_sparse push whose rows come without their ids",
    { hdr { cmd = P.CMD.PUSH_RSP, ndim = 2, nbytes = 8 }, "k", dims { 1, 2 }, string.rep("\0", 8) },
    "shape 1x2 of dtype 0 needs 16 bytes, payload has 8" },
  { "an overflowing element count",
    { hdr { ndim = 3, nbytes = 4 }, "k", dims { 2 ^ 40, 2 ^ 40, 2 ^ 40 }, "abcd" }, "overflows" },
}

describe("ps_protocol.decode", function()
  local a, b
  setup(function()
    a, b = Z.socket(Z.PAIR), Z.socket(Z.PAIR)
    Z.bind(a, "inproc://hostile-spec")
    Z.connect(b, "inproc://hostile-spec")
  end)
  teardown(function() Z.close(a) Z.close(b) end)

  local function roundtrip(frames)
    assert.is_true(Z.send_parts(b, frames))
    local parts = Z.recv_parts(a, 0)
    local m, why = P.decode(Z, parts, 1)
    local copy = m and { key = m.key, shape = m.shape, nbytes = m.nbytes, cmd = m.cmd }
    Z.free_parts(parts)
    return copy, why
  end

  for _, c in ipairs(CASES) do
    it("rejects " .. c[1], function()
      local m, why = roundtrip(c[2])
      assert.is_nil(m)
      assert.truthy(why:find(c[3]), why)
    end)
  end

  it("accepts a well-formed message and reads its fields", function()
    local m, why = roundtrip { hdr { ndim = 2, nbytes = 24 }, "w#1", dims { 2, 3 }, string.rep("\0", 24) }
    assert.is_not_nil(m, why)
    assert.are.same({ 2, 3 }, m.shape)
    assert.are.equal("w#1", m.key)
    assert.are.equal(24, m.nbytes)
    assert.are.equal(P.CMD.PUSH, m.cmd)
  end)

  it("round-trips optimizer options and rejects code or bad lines", function()
    local t = P.encode_options({ learning_rate = 0.5, momentum = 0.9, nesterov = true, name = "x" }, "t", 1)
    assert.are.same({ learning_rate = 0.5, momentum = 0.9, nesterov = true, name = "x" }, P.decode_options(t))
    assert.has_error(function() P.encode_options({ f = function() end }, "set_optimizer", 1) end,
      "set_optimizer: optimizer option f is a function; only numbers, strings and booleans "
      .. "travel to the server (the server rebuilds the optimizer by name)")
    local o, err = P.decode_options("lr\tn\tnot-a-number")
    assert.is_nil(o)
    assert.truthy(err:find("not a number"))
    o, err = P.decode_options("garbage")
    assert.is_nil(o)
    assert.truthy(err:find("malformed"))
  end)

  it("rejects truncated or inconsistent optimizer-state blobs", function()
    local blob = P.encode_states({ lr = 0.1 }, { { key = "3", states = {
      { dtype = 0, shape = { 2 }, bytes = string.rep("\0", 8) } } } })
    local meta, entries = P.decode_states(blob)
    assert.are.equal(0.1, meta.lr)
    assert.are.equal("3", entries[1].key)
    for cut = 1, #blob - 1, 3 do
      local m2, e2 = P.decode_states(blob:sub(1, cut))
      -- a cut at a record boundary is a shorter valid blob; anything else is an error
      if m2 == nil then assert.is_string(e2) end
    end
    local m3, e3 = P.decode_states(blob:sub(1, #blob - 1))
    assert.is_nil(m3)
    assert.truthy(e3:find("truncated"), e3)
    assert.is_nil((P.decode_states("nonsense")))
  end)
end)

describe("a live server under hostile messages", function()
  it("logs and drops each one, answers bad requests with errors, and keeps serving", function()
    local job = J.start { workers = 1, servers = 1, env = { MX_KV_MAX_MSG = tostring(2 ^ 20) }, script = [[
      local mx = require("mx")
      local Z = require("mx.kvstore.ps_zmq")
      local P = require("mx.kvstore.ps_protocol")
      local ffi = require("ffi")
      local kv = mx.kv.create("dist_async")
      kv:init(1, mx.nd.zeros({4}))
      local addr = kv.servers[1].addr
      local evil = Z.socket(Z.DEALER, "evil")
      Z.connect(evil, addr)
      local function h(cmd, dtype, ndim, nbytes)
        local x = ffi.new("mx_ps_header")
        x.magic, x.version, x.cmd, x.dtype, x.ndim, x.req, x.nbytes = P.MAGIC, 1, cmd, dtype, ndim, 9, nbytes
        return ffi.string(x, 32)
      end
      local d1 = ffi.string(ffi.new("int64_t[1]", 1), 8)
      local d2 = ffi.string(ffi.new("int64_t[1]", 2), 8)
      local bad = {
        { "garbage" }, { "MXPS", "k", "", "" }, { string.rep("\255", 32), "k", "", "" },
        { h(99, 0, 0, 0), "k", "", "" }, { h(3, 0, 0, 0), string.rep("k", 999), "", "" },
        { h(3, 0, 9, 0), "k", "", "" }, { h(3, 0, 1, 1e12), "1", d1, "abcd" },
        { h(3, 0, 1, 4), "1", d2, "abcd" }, { h(3, 77, 1, 4), "1", d1, "abcd" },
        { h(3, 0, 2, 8), "1", d2, "abcdefgh" }, { "a", "b", "c", "d", "e", "f" },
      }
      for _, f in ipairs(bad) do Z.send_parts(evil, f) end
      -- well-formed but wrong: the key's size, an unknown key: error replies
      Z.send_parts(evil, { h(3, 0, 1, 8), "1", d2, "abcdefgh" })
      Z.send_parts(evil, { h(4, 255, 0, 0), "nope", "", "" })
      local replies = {}
      local t0 = Z.now()
      while #replies < 2 and Z.now() - t0 < 10 do
        if Z.poll({ evil }, 200)[1] then
          local parts = Z.recv_parts(evil, Z.DONTWAIT)
          local m = P.decode(Z, parts, 1)
          replies[#replies + 1] = P.CMD_NAME[m.cmd] .. ": " .. (m.text or "")
          Z.free_parts(parts)
        end
      end
      for _, r in ipairs(replies) do print("REPLY " .. r) end
      -- a frame over the server's MX_KV_MAX_MSG: libzmq drops that connection unread
      local big = Z.socket(Z.DEALER, "big")
      Z.connect(big, addr)
      Z.send_parts(big, { h(3, 0, 1, 2 ^ 21), "1", d1, string.rep("x", 2 ^ 21) })
      -- raw bytes that are not ZMTP at all, on a plain TCP connection
      local raw = Z.socket(11) -- ZMQ_STREAM
      Z.connect(raw, addr)
      local idb = ffi.new("uint8_t[256]")
      local sz = ffi.new("size_t[1]", 256)
      Z.lib.zmq_getsockopt(raw, Z.ROUTING_ID, idb, sz)
      Z.send_parts(raw, { ffi.string(idb, sz[0]), string.rep("\0\255GET / HTTP/1.0\r\n", 50) })
      os.execute("sleep 0.5")
      -- the server still serves the real worker
      kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 1 }))
      kv:push(1, mx.nd.ones({4}) * 3)
      local w = mx.nd.zeros({4})
      kv:pull(1, w)
      print("STILL " .. w:sum():item())
      Z.close(evil) Z.close(big) Z.close(raw)
      kv:close()
    ]] }
    local rc = job:wait(60)
    local out = job:output()
    job:stop()
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("%[worker 0%] STILL %-12"), out)
    local n = 0
    for _ in out:gmatch("%[server 0%] %[mx.ps server 0%] rejected a malformed message from peer \"evil\"") do
      n = n + 1
    end
    assert.are.equal(11, n, out)
    assert.truthy(out:find("REPLY ERR: push: key 1 holds a float32 4; the pushed value is a float32 2"), out)
    assert.truthy(out:find("REPLY ERR: pull: key nope was never initialised"), out)
  end)
end)
