-- gluon.data.LibSVMDataset and csr batches from the DataLoader: csr rows batched into
-- one csr (the ArrayDataset fast path, the default batchify of csr samples, worker
-- threads), checked against the same data held dense.
local mx = require("mx")
local nd, gluon = mx.nd, mx.gluon
local err_at = require("helpers.err_at")("data_libsvm_spec.lua")

local function line() return debug.getinfo(2, "l").currentline + 1 end
local function write(text)
  local p = os.tmpname()
  local f = assert(io.open(p, "w"))
  f:write(text)
  f:close()
  return p
end

local TEXT = "1 0:0.5 2:1.2\n-2\n\n-3 0:0.6 1:2.4 2:1.2\r\n4 5:-1.25\n0 1:1 3:2 4:3\n"
local DENSE = { { 0.5, 0, 1.2, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0 }, { 0.6, 2.4, 1.2, 0, 0, 0 },
  { 0, 0, 0, 0, 0, -1.25 }, { 0, 1, 0, 2, 3, 0 } }
local LABELS = { 1, -2, -3, 4, 0 }

local function close_rows(got, want, rows)
  for i, r in ipairs(rows) do
    for j = 1, #want[r] do
      assert.is_true(math.abs(got[i][j] - want[r][j]) < 1e-6,
        string.format("row %d col %d: %g vs %g", i, j, got[i][j], want[r][j]))
    end
  end
end

describe("gluon.data.LibSVMDataset", function()
  local path
  setup(function() path = write(TEXT) end)
  teardown(function() os.remove(path) end)

  it("reads every non-blank line as a (1, num_features) csr row and its label", function()
    local ds = gluon.data.LibSVMDataset(path)
    assert.are.equal(5, ds:len())
    assert.are.equal(6, ds.num_features) -- the largest id + 1
    for i = 1, 5 do
      local x, y = ds:get(i)
      assert.are.equal("csr", x:stype())
      assert.are.same({ 1, 6 }, x:shape())
      close_rows(x:totable(), DENSE, { i })
      assert.are.equal(LABELS[i], y)
    end
    local wide = gluon.data.LibSVMDataset(path, { num_features = 10, dtype = "float64" })
    local x = wide:get(5)
    assert.are.same({ 1, 10 }, x:shape())
    assert.are.equal("float64", x:dtype())
    assert.are.same({ 1, 3, 4 }, x:indices():tolist())
  end)

  for _, nw in ipairs({ 0, 2 }) do
    it("DataLoader (num_workers=" .. nw .. "): csr batches of the rows, labels dense, the "
      .. "shuffled order the same as a dense ArrayDataset's", function()
      local ds = gluon.data.LibSVMDataset(path, 6)
      local seen = {}
      local dl = gluon.data.DataLoader(ds, { batch_size = 2, shuffle = true, num_workers = nw,
        seed = 7 })
      local dense = gluon.data.ArrayDataset(nd.array(DENSE), nd.array(LABELS))
      local dd = gluon.data.DataLoader(dense, { batch_size = 2, shuffle = true, seed = 7 })
      local it2 = dd:iter()
      local nb = 0
      for xb, yb in dl:iter() do
        nb = nb + 1
        local xd, yd = it2()
        assert.are.equal("csr", xb:stype())
        assert.are.same(xd:shape(), xb:shape())
        assert.are.same(xd:totable(), xb:totable())
        assert.are.same(yd:tolist(), yb:tolist())
        for _, v in ipairs(yb:tolist()) do seen[#seen + 1] = v end
      end
      assert.are.equal(3, nb) -- 2 + 2 + 1
      table.sort(seen)
      assert.are.same({ -3, -2, 0, 1, 4 }, seen)
    end)
  end

  it("a transform's csr samples go through the default batchify (with workers too)", function()
    local ds = gluon.data.LibSVMDataset(path):transform_first(function(x) return x * 2 end)
    for _, nw in ipairs({ 0, 2 }) do
      local dl = gluon.data.DataLoader(ds, { batch_size = 3, num_workers = nw })
      local xb, yb = dl:iter()()
      assert.are.equal("csr", xb:stype())
      local want = {}
      for r = 1, 3 do
        want[r] = {}
        for j = 1, 6 do want[r][j] = 2 * DENSE[r][j] end
      end
      close_rows(xb:totable(), want, { 1, 2, 3 })
      assert.are.same({ 1, -2, -3 }, yb:tolist())
    end
  end)

  it("errors name the file, the line and the pair, at the caller's line", function()
    local bad = write("1 0:1\nx 1:2\n")
    local l = line()
    local msg = err_at(function() local d = gluon.data.LibSVMDataset(bad) return d end, l)
    assert.matches("line 2: label 'x' is not a number", msg)
    os.remove(bad)
    bad = write("1 3:1 2:1\n")
    l = line()
    msg = err_at(function() local d = gluon.data.LibSVMDataset(bad) return d end, l)
    assert.matches("line 1: '2:1' is not an index:value pair with a 0%-based index, ascending", msg)
    l = line()
    msg = err_at(function() local d = gluon.data.LibSVMDataset(path, 5) return d end, l)
    assert.matches("line 5: '5:%-1.25' is not an index:value pair with a 0%-based index below 5", msg)
    os.remove(bad)
    l = line()
    msg = err_at(function() local d = gluon.data.LibSVMDataset("/nonexistent.libsvm") return d end, l)
    assert.matches("cannot open /nonexistent.libsvm", msg)
  end)
end)

describe("batchify of csr samples", function()
  local b = gluon.data.batchify
  local c = nd.sparse.csr_matrix({ { 1, 2, 3 }, { 0, 2, 1 }, { 0, 2, 2, 3 } }, { shape = { 3, 4 } })

  it("stacks single csr rows into one csr, empty rows included", function()
    local r = b.default({ c[3], c[2], c[1] })
    assert.are.equal("csr", r:stype())
    assert.are.same({ { 0, 3, 0, 0 }, { 0, 0, 0, 0 }, { 1, 0, 2, 0 } }, r:totable())
    assert.are.same({ 0, 1, 1, 3 }, r:indptr():tolist())
  end)

  it("refuses mixed storage types and multi-row csr samples", function()
    local l = line()
    local msg = err_at(function() local r = b.stack({ c[1], nd.zeros({ 1, 4 }) }) return r end, l)
    assert.matches("sample 2 is a default tensor where sample 1 is a csr tensor", msg)
    l = line()
    msg = err_at(function() local r = b.stack({ c[1], c[{ { 1, 2 } }] }) return r end, l)
    assert.matches("csr samples must be single rows of one width: sample 1 is %(1, 4%), sample 2 "
      .. "is %(2, 4%)", msg)
  end)
end)
