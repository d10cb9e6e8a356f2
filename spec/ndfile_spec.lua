-- mx.nd.save / mx.nd.load: MXNet .params (V1/V2/V3/legacy), .npy, .npz.
-- Fixtures in spec/fixtures were written by real MXNet 1.9.1 and numpy
-- (tools/fixtures/make_ndfile_fixtures.py), with their exact values in
-- spec/fixtures/ndfile_expected.lua.
local mx = require("mx")
local B = require("helpers.bytes")

local FIX = "spec/fixtures/"
local EXPECTED = dofile(FIX .. "ndfile_expected.lua")

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'") == 0 or true)
  return d
end

local function ls(dir)
  local p = io.popen("ls -A '" .. dir .. "'")
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  table.sort(t)
  return t
end

local function same_value(a, b)
  if a ~= a then return b ~= b end
  if a == 0 and b == 0 then return 1 / a == 1 / b end -- keeps -0 apart from 0
  return a == b
end

-- Compare a loaded tensor with an expected { dtype, shape, values } entry exactly.
local function check_array(label, t, e)
  assert.is_true(mx.nd.is_tensor(t), label .. " is not a tensor")
  assert.are.equal(e.dtype, t:dtype(), label .. " dtype")
  assert.are.same(e.shape, t:shape(), label .. " shape")
  local got = t:tolist()
  assert.are.equal(#e.values, #got, label .. " size")
  for i = 1, #got do
    if not same_value(got[i], e.values[i]) then
      error(string.format("%s: element %d is %.17g, expected %.17g", label, i, got[i],
        e.values[i]), 2)
    end
  end
end

describe("mx.nd.load reads files written by MXNet 1.9.1 and numpy", function()
  local files = {}
  for f in pairs(EXPECTED) do files[#files + 1] = f end
  table.sort(files)
  it("has the fixtures", function()
    assert.is_true(#files >= 11)
  end)
  for _, f in ipairs(files) do
    it(f .. " loads with exact values", function()
      local e = EXPECTED[f]
      local got = mx.nd.load(FIX .. f)
      local n = 0
      for k, t in pairs(got) do
        n = n + 1
        if e.named then
          assert.are.equal("string", type(k))
        else
          assert.are.equal("number", type(k))
        end
        assert.is_not_nil(e.arrays[k], f .. ": unexpected key " .. tostring(k))
        check_array(f .. "[" .. tostring(k) .. "]", t, e.arrays[k])
      end
      local want = 0
      for _ in pairs(e.arrays) do want = want + 1 end
      assert.are.equal(want, n)
      if not e.named then assert.are.equal(n, #got) end
    end)
  end

  it("loads on the CPU and the tensors work with ops", function()
    local d = mx.nd.load(FIX .. "mx191_gluon.params")
    assert.are.equal("cpu(0)", tostring(d["0.weight"]:context()))
    local y = mx.nd.dot(mx.nd.ones({ 2, 4 }), d["0.weight"], { transpose_b = true })
    assert.are.same({ 2, 3 }, y:shape())
  end)

  it("rejects a row_sparse array, naming it", function()
    local ok, err = pcall(mx.nd.load, FIX .. "mx191_rsp.params")
    assert.is_false(ok)
    assert.matches("mx191_rsp.params", err, 1, true)
    assert.matches("'emb'", err, 1, true)
    assert.matches("row_sparse", err, 1, true)
  end)

  it("loads from a Lua string with load_frombuffer", function()
    local d = mx.nd.load_frombuffer(B.read(FIX .. "np_stored.npz"))
    check_array("weight", d.weight, EXPECTED["np_stored.npz"].arrays.weight)
  end)
end)

describe("mx.nd.save", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function sample()
    return {
      f32 = mx.nd.array({ { 1.5, -2 }, { 3, 1e-30 } }),
      f64 = mx.nd.array({ math.pi, -1e300, 5e-324 }, { dtype = "float64" }),
      f16 = mx.nd.array({ 1, -2.5, 65504, 6e-8 }, { dtype = "float16" }),
      bf16 = mx.nd.array({ 1, -2.5, 3.25e38 }, { dtype = "bfloat16" }),
      u8 = mx.nd.array({ 0, 255, 7 }, { dtype = "uint8" }),
      i8 = mx.nd.array({ -128, 127 }, { dtype = "int8" }),
      i32 = mx.nd.array({ -2147483648, 2147483647 }, { dtype = "int32" }),
      i64 = mx.nd.array({ -2 ^ 53, 2 ^ 53, 3 }, { dtype = "int64" }),
      b = mx.nd.array({ 1, 0, 1 }, { dtype = "bool" }),
      d8 = mx.nd.ones({ 1, 2, 1, 2, 1, 2, 1, 2 }),
    }
  end

  it("round-trips a dict of every dtype bit-exactly", function()
    local d = sample()
    mx.nd.save(dir .. "/a.params", d)
    local back = mx.nd.load(dir .. "/a.params")
    for k, t in pairs(d) do
      assert.is_not_nil(back[k], k)
      assert.are.equal(t:dtype(), back[k]:dtype(), k)
      assert.are.same(t:shape(), back[k]:shape(), k)
      assert.are.equal(B.of_tensor(t), B.of_tensor(back[k]), k)
    end
    local n = 0
    for _ in pairs(back) do n = n + 1 end
    assert.are.equal(10, n)
  end)

  it("writes V2 records, names sorted, K = N for a dict", function()
    mx.nd.save(dir .. "/v2.params", { b = mx.nd.ones({ 2 }), a = mx.nd.zeros({ 1 }) })
    local s = B.read(dir .. "/v2.params")
    assert.are.equal(0x112, B.get_i64(s, 0))
    assert.are.equal(0, B.get_i64(s, 8))
    assert.are.equal(2, B.get_i64(s, 16))
    assert.are.equal(0xF993FAC9, B.get_u32(s, 24))
    assert.are.equal(2, B.get_i64(s, #s - 2 * 9 - 8)) -- K, then two 1-byte names
    assert.are.equal("a", s:sub(-10, -10))
    assert.are.equal("b", s:sub(-1))
    local back = mx.nd.load(dir .. "/v2.params")
    assert.are.same({ 1, 1 }, back.b:tolist())
    assert.are.same({ 0 }, back.a:tolist())
  end)

  it("writes a list file byte-identical to MXNet 1.9.1's", function()
    local orig = B.read(FIX .. "mx191_list.params")
    local l = mx.nd.load(FIX .. "mx191_list.params")
    mx.nd.save(dir .. "/l.params", l)
    assert.are.equal(orig, B.read(dir .. "/l.params"))
  end)

  it("round-trips a list, a single tensor and an empty list", function()
    local a, b = mx.nd.array({ 1, 2, 3 }), mx.nd.array({ { 4 } }, { dtype = "int64" })
    mx.nd.save(dir .. "/l.params", { a, b })
    local l = mx.nd.load(dir .. "/l.params")
    assert.are.equal(2, #l)
    assert.are.same({ 1, 2, 3 }, l[1]:tolist())
    assert.are.same({ 1, 1 }, l[2]:shape())
    assert.are.equal("int64", l[2]:dtype())
    mx.nd.save(dir .. "/one.params", a)
    assert.are.same({ 1, 2, 3 }, mx.nd.load(dir .. "/one.params")[1]:tolist())
    mx.nd.save(dir .. "/none.params", {})
    assert.are.same({}, mx.nd.load(dir .. "/none.params"))
  end)

  it("writes V3 records when a tensor is 0-d or empty, and reads them back", function()
    local d = { s = mx.nd.array(7.25), e = mx.nd.zeros({ 0, 3 }), v = mx.nd.ones({ 2 }) }
    mx.nd.save(dir .. "/v3.params", d)
    local s = B.read(dir .. "/v3.params")
    assert.are.equal(0xF993FACA, B.get_u32(s, 24))
    local back = mx.nd.load(dir .. "/v3.params")
    assert.are.same({}, back.s:shape())
    assert.are.equal(7.25, back.s:item())
    assert.are.same({ 0, 3 }, back.e:shape())
    assert.are.same({ 1, 1 }, back.v:tolist())
  end)

  it("saves views (slices, reshapes) with their own values only", function()
    local x = mx.nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    mx.nd.save(dir .. "/v.params", { row = x[2], r = x:reshape { 6 } })
    local back = mx.nd.load(dir .. "/v.params")
    assert.are.same({ 3, 4 }, back.row:tolist())
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, back.r:tolist())
  end)

  it("replaces an existing file atomically and leaves no temporary files", function()
    local path = dir .. "/ck.params"
    mx.nd.save(path, { w = mx.nd.ones({ 3 }) })
    mx.nd.save(path, { w = mx.nd.zeros({ 4 }) })
    assert.are.same({ 0, 0, 0, 0 }, mx.nd.load(path).w:tolist())
    assert.are.same({ "ck.params" }, ls(dir))
  end)

  it("removes stale temporaries of a killed save of the same path, never a live process's", function()
    local ffi = require("ffi")
    pcall(ffi.cdef, "int getpid(void); int getppid(void); int kill(int pid, int sig);")
    -- a pid that is gone: a shell that printed its pid and exited
    local h = io.popen("sh -c 'echo $$'")
    local dead = tonumber(h:read("*l"))
    h:close()
    assert.are.equal(-1, ffi.C.kill(dead, 0)) -- (ESRCH: nobody reused it yet)
    local me, parent = ffi.C.getpid(), ffi.C.getppid()
    local path = dir .. "/ck.params"
    local function touch(name)
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write("partial")
      f:close()
    end
    touch("ck.params.tmp." .. dead .. ".0")   -- stale: removed
    touch("ck.params.tmp." .. dead .. ".17")  -- stale: removed
    touch("ck.params.tmp." .. me .. ".99")    -- this process's (another thread may be saving)
    touch("ck.params.tmp." .. parent .. ".3") -- a live process's
    touch("other.params.tmp." .. dead .. ".0") -- another path's
    touch("ck.params.tmp." .. dead .. ".0x")  -- not our naming
    touch("ck.params.tmp." .. dead)           -- not our naming
    mx.nd.save(path, { w = mx.nd.ones({ 2 }) })
    local kept = { "ck.params", "ck.params.tmp." .. dead, "ck.params.tmp." .. dead .. ".0x",
      "ck.params.tmp." .. me .. ".99", "ck.params.tmp." .. parent .. ".3",
      "other.params.tmp." .. dead .. ".0" }
    table.sort(kept)
    assert.are.same(kept, ls(dir))
    assert.are.same({ 1, 1 }, mx.nd.load(path).w:tolist())
  end)

  it("on failure keeps the old file and removes the temporary", function()
    -- the target is a directory: the final rename fails after the data is written
    os.execute("mkdir '" .. dir .. "/d.params'")
    local ok, err = pcall(mx.nd.save, dir .. "/d.params", { w = mx.nd.ones({ 3 }) })
    assert.is_false(ok)
    assert.matches("d.params", err, 1, true)
    assert.are.same({ "d.params" }, ls(dir))
    -- a missing directory: nothing can be created
    ok, err = pcall(mx.nd.save, dir .. "/missing/x.params", { mx.nd.ones({ 1 }) })
    assert.is_false(ok)
    assert.matches("missing/x.params", err, 1, true)
  end)

  it("on a write error (file size limit) keeps the old file intact", function()
    local ffi = require("ffi")
    pcall(ffi.cdef, [[
      struct mx_spec_rlimit { unsigned long cur, max; };
      int getrlimit(int, struct mx_spec_rlimit *);
      int setrlimit(int, const struct mx_spec_rlimit *);
      void *signal(int, void *);
    ]])
    local RLIMIT_FSIZE, SIGXFSZ = 1, 25
    local path = dir .. "/big.params"
    mx.nd.save(path, { w = mx.nd.ones({ 10 }) })
    local old = B.read(path)
    local saved = ffi.new("struct mx_spec_rlimit")
    assert.are.equal(0, ffi.C.getrlimit(RLIMIT_FSIZE, saved))
    local prev = ffi.C.signal(SIGXFSZ, ffi.cast("void *", 1)) -- SIG_IGN: write gets EFBIG
    local lim = ffi.new("struct mx_spec_rlimit", 4096, saved.max)
    assert.are.equal(0, ffi.C.setrlimit(RLIMIT_FSIZE, lim))
    local ok, err = pcall(mx.nd.save, path, { w = mx.nd.ones({ 100000 }) })
    ffi.C.setrlimit(RLIMIT_FSIZE, saved)
    ffi.C.signal(SIGXFSZ, prev)
    assert.is_false(ok)
    assert.matches("cannot write", err, 1, true)
    assert.are.equal(old, B.read(path))
    assert.are.same({ "big.params" }, ls(dir))
  end)

  it("rejects bad arguments with errors at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() mx.nd.save(dir .. "/x", { 1, 2 }) end)
    assert.is_false(ok)
    assert.matches("ndfile_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("element 1 must be a tensor", err, 1, true)
    ok, err = pcall(mx.nd.save, dir .. "/x", { a = mx.nd.ones({ 1 }), mx.nd.ones({ 1 }) })
    assert.is_false(ok)
    assert.matches("cannot mix", err, 1, true)
    ok, err = pcall(mx.nd.save, 42, {})
    assert.is_false(ok)
    assert.matches("path must be a string", err, 1, true)
    ok, err = pcall(mx.nd.save, dir .. "/x", "nope")
    assert.is_false(ok)
    assert.matches("got string", err, 1, true)
    ok, err = pcall(mx.nd.save, dir .. "/x", { ["a\0b"] = mx.nd.ones({ 1 }) })
    assert.is_false(ok)
    assert.matches("NUL", err, 1, true)
  end)
end)

describe("mx.nd.load errors", function()
  it("names a missing file at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() mx.nd.load("/nonexistent/dir/w.params") end)
    assert.is_false(ok)
    assert.matches("ndfile_spec.lua:" .. line .. ":", err, 1, true)
    assert.matches("cannot open '/nonexistent/dir/w.params'", err, 1, true)
    assert.matches("No such file", err, 1, true)
  end)

  it("rejects a directory, an empty file and a foreign file", function()
    local ok, err = pcall(mx.nd.load, "spec")
    assert.is_false(ok)
    assert.matches("not a regular file", err, 1, true)
    local d = tmpdir()
    B.write(d .. "/empty.params", "")
    ok, err = pcall(mx.nd.load, d .. "/empty.params")
    assert.is_false(ok)
    assert.matches("empty.params: the file is empty", err, 1, true)
    B.write(d .. "/x.json", '{"nodes": []}')
    ok, err = pcall(mx.nd.load, d .. "/x.json")
    assert.is_false(ok)
    assert.matches("not an MXNet .params, .npy, .npz or safetensors file", err, 1, true)
    os.execute("rm -rf '" .. d .. "'")
  end)
end)

-- Our files load in real MXNet 1.9.1 (needs /opt/mxvenv; slow: starts Python).
describe("#slow #mxnet interop", function()
  local PY = "/opt/mxvenv/bin/python"
  local function have_mxnet()
    local f = io.open(PY, "r")
    if f then f:close() end
    return f ~= nil
  end

  local function to_json(named, np, arrays)
    local parts = {}
    for k, t in pairs(arrays) do
      local vals = {}
      for i, v in ipairs(t:tolist()) do vals[i] = string.format("%.17g", v) end
      parts[#parts + 1] = string.format('"%s": {"dtype": "%s", "shape": [%s], "values": [%s]}',
        tostring(k), t:dtype(), table.concat(t:shape(), ", "), table.concat(vals, ", "))
    end
    return string.format('{"named": %s, "np": %s, "arrays": {%s}}', tostring(named),
      tostring(np), table.concat(parts, ", "))
  end

  local function check(path, named, np, arrays)
    B.write(path .. ".json", to_json(named, np, arrays))
    local p = io.popen(PY .. " tools/fixtures/make_ndfile_fixtures.py --check '" .. path
      .. "' '" .. path .. ".json' 2>&1")
    local out = p:read("*a")
    local ok = p:close()
    assert.matches("OK", out, 1, true)
    assert.is_truthy(ok)
  end

  it("MXNet loads our dict, list and V3 files with the same values", function()
    if not have_mxnet() then pending("no MXNet venv at " .. PY) return end
    local d = tmpdir()
    local dict = {
      w = mx.nd.array({ { 1.5, -2 }, { 3, 1e-30 } }),
      f64 = mx.nd.array({ math.pi, -1e300 }, { dtype = "float64" }),
      h = mx.nd.array({ 1, -2.5, 65504 }, { dtype = "float16" }),
      u8 = mx.nd.array({ 0, 255 }, { dtype = "uint8" }),
      i8 = mx.nd.array({ -128, 127 }, { dtype = "int8" }),
      i32 = mx.nd.array({ -7, 2147483647 }, { dtype = "int32" }),
      i64 = mx.nd.array({ -2 ^ 53, 3 }, { dtype = "int64" }),
      b = mx.nd.array({ 1, 0 }, { dtype = "bool" }),
    }
    mx.nd.save(d .. "/dict.params", dict)
    check(d .. "/dict.params", true, false, dict)
    local list = { mx.nd.array({ 1, 2, 3 }), mx.nd.array({ { 4, 5 } }, { dtype = "int32" }) }
    mx.nd.save(d .. "/list.params", list)
    check(d .. "/list.params", false, false, list)
    local v3 = { s = mx.nd.array(2.5), e = mx.nd.zeros({ 0, 2 }) }
    mx.nd.save(d .. "/v3.params", v3)
    check(d .. "/v3.params", true, true, v3)
    os.execute("rm -rf '" .. d .. "'")
  end)
end)

-- GPU tensors are saved from a host copy (pending without a GPU).
describe("#gpu save", function()
  it("writes GPU tensors through a host copy, bit-exactly", function()
    if mx.num_gpus() < 1 then pending("no GPU available") return end
    local dir = tmpdir()
    local d = {
      w = mx.nd.array({ { 1.5, -2 }, { 3, 1e-30 } }):to(mx.gpu(0)),
      h = mx.nd.array({ 1, -2.5, 65504 }, { dtype = "float16" }):to(mx.gpu(0)),
      i = mx.nd.array({ -7, 9 }, { dtype = "int64" }):to(mx.gpu(0)),
    }
    mx.nd.save(dir .. "/g.params", d)
    local back = mx.nd.load(dir .. "/g.params")
    for k, t in pairs(d) do
      assert.are.equal("cpu(0)", tostring(back[k]:context()))
      assert.are.equal(B.of_tensor(t:to(mx.cpu())), B.of_tensor(back[k]), k)
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
