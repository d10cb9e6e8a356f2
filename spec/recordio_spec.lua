-- mx.recordio: MXNet's RecordIO files (core/src/recordio.c, lua/mx/recordio.lua), checked
-- against files written by real MXNet 1.9.1 (spec/fixtures/mx191_rec.{rec,idx}, made by
-- tools/fixtures/make_recordio_fixtures.py, which lists the records) both ways.
local mx = require("mx")
local H = require("helpers.la")
local rio = mx.recordio

local FILE = "spec/recordio_spec.lua"
local FIX = "spec/fixtures/mx191_rec"

local function tmpdir()
  local p = io.popen("mktemp -d")
  local d = p:read("*l")
  p:close()
  return d
end
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
local function spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local MAGIC = "\10\35\215\206" -- 0xced7230a, little-endian
local MAGIC_PAYLOAD = "abcd" .. MAGIC .. "efgh" .. MAGIC .. MAGIC .. "ij"
local BYTES = {}
for i = 0, 255 do BYTES[#BYTES + 1] = string.char(i) end
local B256 = table.concat(BYTES)

-- the fixture's records, in write order (key, record)
local function records()
  return {
    { 0, rio.pack({ flag = 0, label = 3, id = 7, id2 = 0 }, "hello") },
    { 1, rio.pack({ flag = 0, label = { 1.5, -2, 4.25 }, id = 8, id2 = 9 }, "vector label") },
    { 2, rio.pack({ flag = 0, label = 1, id = 9, id2 = 0 }, MAGIC_PAYLOAD) },
    { 5, "" },
    { 3, B256 .. B256 .. B256 .. "xy" },
  }
end

describe("mx.recordio reads MXNet 1.9.1's files", function()
  it("reads every record in order, with the index's keys", function()
    local r = rio.MXRecordIO(FIX .. ".rec", "r")
    local want = records()
    for i = 1, #want do
      assert.equal(want[i][2], r:read(), "record " .. i)
    end
    assert.is_nil(r:read())
    assert.is_nil(r:read())
    r:reset()
    assert.equal(want[1][2], r:read())
    r:close()
    r:close() -- closing twice is harmless

    local ix = rio.MXIndexedRecordIO(FIX .. ".idx", FIX .. ".rec", "r")
    assert.same({ 0, 1, 2, 5, 3 }, ix.keys)
    assert.equal(want[5][2], ix:read_idx(3))
    assert.equal(want[3][2], ix:read_idx(2))
    ix:seek(5)
    assert.equal("", ix:read())
    assert.equal(want[5][2], ix:read())
    ix:close()
  end)

  it("unpacks MXNet's IRHeader: scalar and vector labels, ids, the payload", function()
    local ix = rio.MXIndexedRecordIO(FIX .. ".idx", FIX .. ".rec", "r")
    local h, p = rio.unpack(ix:read_idx(0))
    assert.same({ flag = 0, label = 3, id = 7, id2 = 0 }, h)
    assert.equal("hello", p)
    h, p = rio.unpack(ix:read_idx(1))
    assert.same({ flag = 3, label = { 1.5, -2, 4.25 }, id = 8, id2 = 9 }, h)
    assert.equal("vector label", p)
    -- the magic word inside the payload came back from a multi-part record
    h, p = rio.unpack(ix:read_idx(2))
    assert.equal(9, h.id)
    assert.equal(MAGIC_PAYLOAD, p)
    ix:close()
  end)
end)

describe("mx.recordio writes MXNet's format", function()
  it("writes the fixture's records byte for byte as MXNet 1.9.1 did (.rec and .idx)", function()
    local d = tmpdir()
    local w = rio.MXIndexedRecordIO(d .. "/a.idx", d .. "/a.rec", "w")
    for _, kr in ipairs(records()) do w:write_idx(kr[1], kr[2]) end
    -- nothing is visible before close (the writer is atomic)
    assert.is_nil(io.open(d .. "/a.rec", "rb"))
    w:close()
    assert.equal(slurp(FIX .. ".rec"), slurp(d .. "/a.rec"))
    assert.equal(slurp(FIX .. ".idx"), slurp(d .. "/a.idx"))
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("round-trips records of every length, with magic words at every alignment", function()
    local d = tmpdir()
    local path = d .. "/r.rec"
    local want = {}
    for n = 0, 40 do
      local s = {}
      for i = 1, n do s[i] = string.char((i * 37 + n) % 256) end
      want[#want + 1] = table.concat(s)
    end
    for off = 0, 7 do
      want[#want + 1] = ("z"):rep(off) .. MAGIC .. ("q"):rep(off) .. MAGIC
    end
    want[#want + 1] = MAGIC:rep(5)
    local w = rio.MXRecordIO(path, "w")
    local pos = {}
    for i, s in ipairs(want) do
      pos[i] = w:tell()
      w:write(s)
    end
    w:close()
    local r = rio.MXRecordIO(path, "r")
    for i, s in ipairs(want) do
      assert.equal(pos[i], r:tell())
      assert.equal(s, r:read(), "record " .. i)
    end
    assert.is_nil(r:read())
    r:close()
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("keeps the old file when the writer is never closed or fails", function()
    local d = tmpdir()
    local path = d .. "/keep.rec"
    spit(path, "old")
    local w = rio.MXRecordIO(path, "w")
    w:write("new record")
    assert.equal("old", slurp(path))
    w:close()
    local r = rio.MXRecordIO(path, "r")
    assert.equal("new record", r:read())
    r:close()
    os.execute("rm -rf '" .. d .. "'")
  end)
end)

describe("mx.recordio errors", function()
  local d
  setup(function() d = tmpdir() end)
  teardown(function() os.execute("rm -rf '" .. d .. "'") end)

  local function reader_of(bytes)
    local path = d .. "/bad.rec"
    spit(path, bytes)
    return rio.MXRecordIO(path, "r")
  end
  local good = slurp(FIX .. ".rec")

  it("rejects malformed files with the file, the byte offset and the problem", function()
    local cases = {
      { good:sub(1, 6), "truncated record header at byte 0" },
      { good:sub(1, 30), "truncated record at byte 0" },
      { "NOTARECORDIOFILE", "bad magic" },
      { MAGIC .. "\0\0\0\32" .. MAGIC .. "\0\0\0\0", "ends without its last part" },
      { good:sub(0x84 + 1), "a continuation part (flag 2) at byte 0" },
      { good:sub(1, 0x84 + 4), "truncated record header at byte 132" },
      { MAGIC .. "\0\0\0\224", "invalid part flag 7" },
    }
    for _, c in ipairs(cases) do
      local r = reader_of(c[1])
      H.assert_error(function(mark)
        mark() for _ = 1, 10 do r:read() end
      end, FILE, "bad.rec", c[2])
      r:close()
    end
    -- a record beyond the first is reported at its own offset
    local r = reader_of(good:sub(1, 0x28 + 12))
    assert.is_string(r:read())
    H.assert_error(function(mark) mark() r:read() end, FILE, "at byte 40")
    r:close()
  end)

  it("rejects bad arguments and misuse at the caller's line", function()
    H.assert_error(function(mark) mark() rio.MXRecordIO(d .. "/nope/x.rec", "r") end, FILE,
      "cannot open", "nope/x.rec")
    H.assert_error(function(mark) mark() rio.MXRecordIO(d .. "/x.rec", "a") end, FILE,
      "flag must be 'r' or 'w'")
    H.assert_error(function(mark) mark() rio.MXRecordIO(nil, "r") end, FILE, "uri")
    H.assert_error(function(mark) mark() rio.MXRecordIO(d .. "/nodir/x.rec", "w") end, FILE,
      "temporary file", "nodir")
    local w = rio.MXRecordIO(d .. "/w.rec", "w")
    H.assert_error(function(mark) mark() w:read() end, FILE, "open for writing")
    H.assert_error(function(mark) mark() w:write(5) end, FILE, "must be a (byte) string")
    w:close()
    H.assert_error(function(mark) mark() w:write("x") end, FILE, "is closed")
    local r = rio.MXRecordIO(FIX .. ".rec", "r")
    H.assert_error(function(mark) mark() r:write("x") end, FILE, "open for reading")
    r:close()
    local ix = rio.MXIndexedRecordIO(FIX .. ".idx", FIX .. ".rec", "r")
    H.assert_error(function(mark) mark() ix:read_idx(4) end, FILE, "no key 4")
    H.assert_error(function(mark) mark() ix:read_idx(1.5) end, FILE, "key must be an integer")
    ix:close()
    spit(d .. "/bad.idx", "0\t0\nbroken line\n")
    H.assert_error(function(mark) mark() rio.MXIndexedRecordIO(d .. "/bad.idx", FIX .. ".rec", "r") end,
      FILE, "bad.idx", "line 2")
    -- an index entry that does not point at a record's start
    spit(d .. "/off.idx", "0\t8\n1\t6\n")
    ix = rio.MXIndexedRecordIO(d .. "/off.idx", FIX .. ".rec", "r")
    H.assert_error(function(mark) mark() ix:read_idx(0) end, FILE, "bad magic", "at byte 8")
    H.assert_error(function(mark) mark() ix:read_idx(1) end, FILE, "multiple of 4")
    ix:close()
  end)

  it("pack and unpack check their arguments", function()
    H.assert_error(function(mark) mark() rio.pack(5, "x") end, FILE, "header must be a table")
    H.assert_error(function(mark) mark() rio.pack({}, 5) end, FILE, "s must be a string")
    H.assert_error(function(mark) mark() rio.pack({ label = "a" }, "x") end, FILE, "label")
    H.assert_error(function(mark) mark() rio.pack({ label = { 1, "a" } }, "x") end, FILE, "label[2]")
    H.assert_error(function(mark) mark() rio.pack({ id = -1 }, "x") end, FILE, "header.id")
    H.assert_error(function(mark) mark() rio.unpack("short") end, FILE, "24-byte header")
    local s = rio.pack({ label = { 1, 2, 3 } }, "")
    H.assert_error(function(mark) mark() rio.unpack(s:sub(1, 30)) end, FILE, "3 label values")
    -- a label tensor packs as its values
    local h = rio.unpack(rio.pack({ label = mx.nd.array({ 0.5, 2 }) }, "p"))
    assert.same({ 0.5, 2 }, h.label)
  end)
end)

-- Our files read in real MXNet 1.9.1 (needs /opt/mxvenv; slow: starts Python).
describe("#slow #mxnet recordio interop", function()
  local PY = "/opt/mxvenv/bin/python"
  it("MXNet reads the records and headers luamx wrote", function()
    local f = io.open(PY, "r")
    if not f then pending("no MXNet venv at " .. PY) return end
    f:close()
    local d = tmpdir()
    local w = rio.MXIndexedRecordIO(d .. "/o.idx", d .. "/o.rec", "w")
    w:write_idx(4, rio.pack({ label = { 2, 0.25 }, id = 11, id2 = 12 }, MAGIC .. "tail"))
    w:write_idx(9, rio.pack({ label = 6, id = 3 }, "six"))
    w:close()
    local p = io.popen(PY .. " tools/fixtures/make_recordio_fixtures.py --check '" .. d
      .. "/o.rec' '" .. d .. "/o.idx' 2>&1")
    local out = p:read("*a")
    p:close()
    assert.matches("4 40 2 [2.0, 0.25] 11 12 0a23d7ce7461696c", out, 1, true)
    assert.matches("9 27 0 6.0 3 0 736978", out, 1, true)
    os.execute("rm -rf '" .. d .. "'")
  end)
end)
