-- mx.io.LibSVMIter: LibSVM text into csr batches, as MXNet 1.9.1's LibSVMIter (the
-- values below are MXNet 1.9.1's for the same file, round_batch padding included; without
-- round_batch MXNet's filler rows hold stale samples, luamx's zeros: spec/io_spec.lua)
local mx = require("mx")

local function write(text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

describe("mx.io.LibSVMIter", function()
  it("reads csr batches with labels, padding the last from the start", function()
    local path = write("1 0:1.5 3:2\n0 2:-1\n1 5:4\n0 1:0.5 4:3 5:1\n")
    local it = mx.io.LibSVMIter { data_libsvm = path, data_shape = { 6 }, batch_size = 3 }
    local got = {}
    for b in it:iter() do
      assert.are.equal("csr", b.data[1]:stype())
      got[#got + 1] = { b.data[1]:totable(), b.label[1]:totable(), b.pad }
    end
    assert.are.same({
      { { { 1.5, 0, 0, 2, 0, 0 }, { 0, 0, -1, 0, 0, 0 }, { 0, 0, 0, 0, 0, 4 } }, { 1, 0, 1 }, 0 },
      { { { 0, 0.5, 0, 0, 3, 1 }, { 1.5, 0, 0, 2, 0, 0 }, { 0, 0, -1, 0, 0, 0 } }, { 0, 1, 0 }, 2 },
    }, got)
    assert.is_nil(it:next())
    it:reset()
    assert.are.same({ 1, 0, 1 }, it:next().label[1]:totable())
    local short = mx.io.LibSVMIter { data_libsvm = path, data_shape = 6, batch_size = 3,
      round_batch = false }
    short:next()
    local last = short:next()
    assert.are.same({ 3, 6 }, last.data[1]:shape())
    assert.are.equal(2, last.pad)
    assert.are.same({ { 0, 0.5, 0, 0, 3, 1 }, { 0, 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0 } },
      last.data[1]:totable())
    assert.are.equal("data", it.provide_data[1].name)
    assert.are.same({ 3, 6 }, it.provide_data[1].shape)
    os.remove(path)
  end)

  it("takes rows without features, and names bad lines", function()
    local path = write("1 0:1 3:2\n0\n")
    local b = mx.io.LibSVMIter { data_libsvm = path, data_shape = { 4 }, batch_size = 2 }:next()
    assert.are.same({ { 1, 0, 0, 2 }, { 0, 0, 0, 0 } }, b.data[1]:totable())
    os.remove(path)
    local function err(text, want, shape)
      local p = write(text)
      local ok, e = pcall(function()
        local it = mx.io.LibSVMIter { data_libsvm = p, data_shape = { shape or 4 }, batch_size = 1 }
        return it -- (not a tail call: the error blames this line)
      end)
      os.remove(p)
      assert.is_false(ok)
      assert.matches(want, tostring(e), 1, true)
      assert.matches("io_libsvm_spec.lua", tostring(e), 1, true)
    end
    err("1 4:1\n", "line 1: '4:1' is not an index:value pair with a 0-based index below 4")
    err("1 2:1 1:3\n", "line 1: '1:3' is not an index:value pair")
    err("x 1:1\n", "label 'x' is not a number")
    local ok = pcall(function()
      return mx.io.LibSVMIter { data_libsvm = "/nonexistent", data_shape = 3, batch_size = 1 }
    end)
    assert.is_false(ok)
  end)
  it("keeps its data sparse: 50 million features read and batched as csr", function()
    local path = write("1 7:1 49999999:2\n0 123456:-1\n1\n")
    local it = mx.io.LibSVMIter { data_libsvm = path, data_shape = { 50000000 }, batch_size = 2,
      round_batch = false }
    local b = it:next()
    assert.are.equal("csr", b.data[1]:stype())
    assert.are.same({ 2, 50000000 }, b.data[1]:shape())
    assert.are.same({ 7, 49999999, 123456 }, b.data[1]:indices():tolist())
    assert.are.same({ 0, 2, 3 }, b.data[1]:indptr():tolist())
    b = it:next()
    assert.are.equal(1, b.pad)
    assert.are.same({ 0, 0, 0 }, b.data[1]:indptr():tolist())
    assert.is_nil(it:next())
    os.remove(path)
  end)
end)
