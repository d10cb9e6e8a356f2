-- sparse storage (row_sparse, csr): construction and parts, .params files written by MXNet
-- 1.9.1, the storage-type kernels and the dense fallback, checked against MXNet 1.9.1
-- (spec/fixtures/sparse_mxnet.lua, tools/fixtures/make_sparse_fixtures.py)
local mx = require("mx")
local nd = mx.nd
local close = require("helpers.close").within(1e-6)
local B = require("helpers.bytes")

local FIX = "spec/fixtures/"
local F = dofile(FIX .. "sparse_mxnet.lua")

local function flat(t) return t:tolist() end

-- a tensor against a fixture entry: storage type, dtype, shape, values and parts
local function same(label, got, want, tol)
  assert.are.equal(want.stype, got:stype(), label .. ": stype")
  assert.are.equal(want.dtype, got:dtype(), label .. ": dtype")
  assert.are.same(want.shape, got:shape(), label .. ": shape")
  local v = got:totable()
  local function flatten(t, out)
    for _, x in ipairs(t) do
      if type(x) == "table" then flatten(x, out) else out[#out + 1] = x end
    end
    return out
  end
  close(type(v) == "table" and flatten(v, {}) or { v }, want.values, tol)
  if want.data then
    close(flat(got:data()), want.data, tol)
    assert.are.same(want.indices, flat(got:indices()), label .. ": indices")
    if want.indptr then assert.are.same(want.indptr, flat(got:indptr()), label .. ": indptr") end
  end
end

describe("sparse construction", function()
  it("csr_matrix from (data, indices, indptr), coordinates, dense data and a shape", function()
    local c = nd.sparse.csr_matrix({ { 1, 2, 3 }, { 2, 0, 1 }, { 0, 2, 2, 3 } }, { shape = { 3, 4 } })
    assert.are.equal("csr", c:stype())
    -- columns sorted within a row on construction
    assert.are.same({ 0, 2, 1 }, flat(c:indices()))
    assert.are.same({ 2, 1, 3 }, flat(c:data()))
    assert.are.same({ 0, 2, 2, 3 }, flat(c:indptr()))
    assert.are.equal("int64", c:indices():dtype())
    assert.are.equal(3, c:nnz())
    assert.are.same({ { 2, 0, 1, 0 }, { 0, 0, 0, 0 }, { 0, 3, 0, 0 } }, c:totable())
    -- coordinates: duplicates summed
    local o = nd.sparse.csr_matrix({ { 1, 2, 5 }, { { 0, 2, 0 }, { 1, 0, 1 } } }, { shape = { 3, 2 } })
    assert.are.same({ { 0, 6 }, { 0, 0 }, { 2, 0 } }, o:totable())
    assert.are.same({ 0, 1, 1, 2 }, flat(o:indptr()))
    local d = nd.sparse.csr_matrix({ { 0, 1.5 }, { 0, 0 } })
    assert.are.same({ 1 }, flat(d:indices()))
    assert.are.same({ 0, 1, 1 }, flat(d:indptr()))
    local z = nd.sparse.csr_matrix({ 2, 3 }, { dtype = "float64" })
    assert.are.equal(0, z:nnz())
    assert.are.equal("float64", z:dtype())
    assert.are.same({ 2, 3 }, z:shape())
  end)

  it("row_sparse_array from (data, indices), dense data and a shape", function()
    local r = nd.sparse.row_sparse_array({ { { 1, 2 }, { 3, 4 } }, { 3, 1 } }, { shape = { 5, 2 } })
    assert.are.equal("row_sparse", r:stype())
    assert.are.same({ 1, 3 }, flat(r:indices()))
    assert.are.same({ { 3, 4 }, { 1, 2 } }, r:data():totable())
    assert.are.same({ { 0, 0 }, { 3, 4 }, { 0, 0 }, { 1, 2 }, { 0, 0 } }, r:totable())
    local d = nd.array({ { 0, 0 }, { 0, 7 }, { 0, 0 } }):tostype("row_sparse")
    assert.are.same({ 1 }, flat(d:indices()))
    assert.are.equal(1, d:nnz())
    local z = nd.sparse.zeros("row_sparse", { 4, 2, 3 })
    assert.are.equal(0, z:nnz())
    assert.are.same({ 4, 2, 3 }, z:shape())
    assert.are.equal(24, z:size())
    assert.are.equal("default", nd.sparse.zeros("default", { 2 }):stype())
  end)

  it("tostype and cast_storage convert both ways, and astype keeps the storage type", function()
    local a = nd.array({ { 1, 0, 2 }, { 0, 0, 0 }, { 0, 3, 0 } })
    for _, s in ipairs({ "csr", "row_sparse" }) do
      local x = a:tostype(s)
      assert.are.equal(s, x:stype())
      assert.are.equal("default", x:tostype("default"):stype())
      assert.are.same(a:totable(), x:tostype("default"):totable())
      local h = x:astype("float64")
      assert.are.equal(s, h:stype())
      assert.are.equal("float64", h:dtype())
      assert.are.same(a:totable(), h:totable())
    end
    -- row_sparse <-> csr goes through dense (MXNet refuses these casts)
    assert.are.same(a:totable(), a:tostype("csr"):tostype("row_sparse"):totable())
    assert.are.equal("csr", a:tostype("row_sparse"):tostype("csr"):stype())
    assert.are.equal("default", a:stype())
    assert.matches("<CSRNDArray 3x3 float32 @cpu%(0%)>", tostring(a:tostype("csr")))
  end)

  it("rejects bad parts with messages naming them", function()
    local function err(f, want)
      local ok, e = pcall(f)
      assert.is_false(ok)
      assert.matches(want, tostring(e), 1, true)
      assert.matches("sparse_spec.lua", tostring(e), 1, true)
    end
    err(function() nd.sparse.csr_matrix({ { 1 }, { 5 }, { 0, 1 } }, { shape = { 1, 3 } }) end, "csr_matrix")
    err(function() nd.sparse.csr_matrix({ { 1, 2 }, { 0, 1 }, { 0, 2, 1 } }, { shape = { 2, 3 } }) end,
      "indptr")
    err(function() nd.sparse.row_sparse_array({ { { 1, 2 } }, { 4 } }, { shape = { 4, 2 } }) end,
      "index 4")
    err(function() nd.sparse.row_sparse_array({ { { 1, 2 } }, { 0, 1 } }, { shape = { 4, 2 } }) end,
      "row_sparse_array: data has shape")
    err(function() nd.sparse.csr_matrix({ { 1, 2, 3 }, { 0, 0 }, { 0, 1, 2 } }) end, "shape=")
    err(function() nd.array({ 1, 2 }):tostype("coo") end, "unknown storage type coo")
    err(function() nd.array({ 1, 2 }):indices() end, "default (dense) storage")
    err(function() nd.sparse.zeros("row_sparse", { 2, 2 }):indptr() end, "no indptr")
    err(function() nd.sparse.zeros("csr", { 2, 2 }):data_ptr() end, "data_ptr")
  end)
end)

describe("sparse .params files", function()
  it("loads every array MXNet 1.9.1 saved with its storage type and parts", function()
    local d = nd.load(FIX .. "mx191_sparse.params")
    local n = 0
    for k, want in pairs(F.arrays) do
      assert.is_not_nil(d[k], k)
      same(k, d[k], want, 0)
      if want.data_shape then assert.are.same(want.data_shape, d[k]:data():shape()) end
      n = n + 1
    end
    assert.are.equal(8, n)
  end)

  it("writes the bytes MXNet 1.9.1 wrote for the same arrays", function()
    local d = nd.load(FIX .. "mx191_sparse.params")
    local path = os.tmpname()
    nd.save(path, d) -- names sorted, as the fixture script saved them
    local mine, theirs = B.read(path), B.read(FIX .. "mx191_sparse.params")
    os.remove(path)
    assert.are.equal(#theirs, #mine)
    assert.is_true(mine == theirs)
    -- and a round trip of arrays made here
    local r = nd.sparse.row_sparse_array({ { { 1.5, 2 } }, { 3 } }, { shape = { 4, 2 }, dtype = "float64" })
    local c = nd.sparse.csr_matrix({ { 7 }, { 2 }, { 0, 0, 1 } }, { shape = { 2, 3 }, dtype = "int32" })
    nd.save(path, { r = r, c = c })
    local back = nd.load(path)
    os.remove(path)
    assert.are.same(r:totable(), back.r:totable())
    assert.are.equal("float64", back.r:dtype())
    assert.are.same(c:totable(), back.c:totable())
    assert.are.equal("csr", back.c:stype())
    assert.are.equal("int32", back.c:dtype())
  end)

  it("MXNDListCreate (the C predict API) hands out sparse arrays densified", function()
    local ffi = require("ffi")
    pcall(ffi.cdef, [[
      int MXNDListCreate(const char *nd_file_bytes, int nd_file_size, void **out, uint32_t *out_length);
      int MXNDListGet(void *handle, uint32_t index, const char **out_key, const float **out_data,
                      const uint32_t **out_shape, uint32_t *out_ndim);
      int MXNDListFree(void *handle);]])
    local C = require("mx.core.lib").C
    local bytes = B.read(FIX .. "mx191_sparse.params")
    local h, n = ffi.new("void*[1]"), ffi.new("uint32_t[1]")
    assert.are.equal(0, C.MXNDListCreate(bytes, #bytes, h, n))
    local key, data, shape, nd_ = ffi.new("const char*[1]"), ffi.new("const float*[1]"),
      ffi.new("const uint32_t*[1]"), ffi.new("uint32_t[1]")
    local seen = 0
    for i = 0, n[0] - 1 do
      assert.are.equal(0, C.MXNDListGet(h[0], i, key, data, shape, nd_))
      local want = F.arrays[ffi.string(key[0])]
      for j = 1, #want.values do assert.are.equal(want.values[j], data[0][j - 1]) end
      seen = seen + 1
    end
    C.MXNDListFree(h[0])
    assert.are.equal(8, seen)
  end)

  it("rejects a hostile sparse record: a column id past the matrix", function()
    local r = nd.sparse.csr_matrix({ { 1 }, { 1 }, { 0, 1 } }, { shape = { 1, 2 } })
    local path = os.tmpname()
    nd.save(path, { x = r })
    local s = B.read(path)
    -- the last 8 bytes before the name table are the one column id
    local at = s:find("\1\0\0\0\0\0\0\0\1\0\0\0\0\0\0\0\1\0\0\0\0\0\0\0x", 1, true)
    assert.is_truthy(at)
    local bad = B.patch(s, at - 1, B.i64(9))
    local ok, e = pcall(nd.load_frombuffer, bad)
    assert.is_false(ok)
    assert.matches("column", tostring(e))
    os.remove(path)
  end)
end)

describe("sparse ops against MXNet 1.9.1", function()
  local A = nd.load(FIX .. "mx191_sparse.params")
  local env = setmetatable({ nd = nd, csr = A.csr, rsp = A.rsp, rsp3 = A.rsp3,
    w = nd.array({ { -1, -0.5 }, { 0, 0.5 }, { 1, 1.5 }, { 2, 2.5 } }),
    w3 = nd.arange(0, 12):reshape { 4, 3 } - 4,
    wt = nd.arange(0, 12):reshape { 3, 4 } * 0.25,
    d42 = nd.arange(0, 8):reshape { 4, 2 } - 3,
    d44 = nd.arange(0, 16):reshape { 4, 4 } * 0.5 - 2,
    rsp_b = nd.sparse.row_sparse_array({ { { 10, 20 }, { 30, 40 } }, { 1, 2 } }, { shape = { 4, 2 } }),
    csr_b = nd.sparse.csr_matrix({ { 1, -1, 2 }, { 1, 2, 0 }, { 0, 2, 2, 2, 3 } }, { shape = { 4, 4 } }),
    cond = nd.sparse.csr_matrix({ { 1, 1 }, { 1, 3 }, { 0, 1, 1, 2, 2 } }, { shape = { 4, 4 } }),
  }, { __index = _G })
  -- MXNet's parts here are not canonical (unsorted ids, stored zeros, slack past indptr's
  -- end; mul of two row_sparse keeps the union of their rows): the values and the storage
  -- type must agree, and ours must be canonical
  local VALUES_ONLY = { ["nd.mul(rsp, rsp_b)"] = true, ["nd.add(csr, csr_b)"] = true,
    ["nd.sub(csr, csr_b)"] = true, ["nd.mul(csr, csr_b)"] = true,
    ["rsp3:retain({4, 0, 1})"] = true }
  local function canonical(label, x)
    if x:stype() == "default" then return end
    local ids = flat(x:indices())
    if x:stype() == "row_sparse" then
      for i = 2, #ids do assert.is_true(ids[i] > ids[i - 1], label .. ": row ids ascending") end
      return
    end
    local ptr = flat(x:indptr())
    assert.are.equal(#ids, ptr[#ptr])
    for r = 1, #ptr - 1 do
      for j = ptr[r] + 2, ptr[r + 1] do
        assert.is_true(ids[j] > ids[j - 1], label .. ": column ids ascending")
      end
    end
  end
  for _, case in ipairs(F.ops) do
    it(case[1], function()
      local f = assert(load("return " .. case[1], case[1], "t", env))
      local got, want = f(), case[2]
      if VALUES_ONLY[case[1]] then
        want = { stype = want.stype, dtype = want.dtype, shape = want.shape, values = want.values }
        canonical(case[1], got)
        assert.is_true(got:nnz() < #case[2].data)
      end
      -- a full reduction is 0-d here (docs/mxnet-differences.md), (1,) in MXNet 1.9
      if #got:shape() == 0 then want = { stype = want.stype, dtype = want.dtype, shape = {},
        values = want.values } end
      same(case[1], got, want, 1e-6)
    end)
  end

  it("picks a storage-type kernel or falls back to dense, counting fallbacks", function()
    local C = require("mx.core.lib").C
    local n0 = tonumber(C.mx_storage_fallbacks())
    local y = nd.dot(A.csr, env.w)
    assert.are.equal(n0, tonumber(C.mx_storage_fallbacks()))
    assert.are.equal("default", y:stype())
    y = nd.tanh(A.csr)
    assert.are.equal(n0 + 1, tonumber(C.mx_storage_fallbacks()))
    assert.are.equal("default", y:stype())
    -- out= keeps the slot's storage type: dot(csr.T, w) into a dense slot
    local o = nd.zeros({ 4, 2 })
    nd.dot(A.csr, env.w, { transpose_a = true, out = o })
    assert.are.equal("default", o:stype())
    close(flat(o), flat(nd.dot(A.csr:tostype("default"), env.w, { transpose_a = true })))
  end)
end)

describe("sparse cpu kernels", function()
  -- a random csr (rows, cols) with about density * rows * cols entries, some empty rows
  local function random_csr(rows, cols, density, dtype)
    mx.random.seed(11)
    local d = nd.random.uniform(-1, 1, { rows, cols }, { dtype = dtype })
    local keep = nd.lesser_scalar(nd.random.uniform(0, 1, { rows, cols }, { dtype = dtype }),
      { scalar = density })
    return nd.mul(d, keep:astype(dtype)):tostype("csr")
  end
  for _, dt in ipairs({ "float32", "float64" }) do
    it("dot(csr, dense) and dot(csr^T, dense) agree with the reference kernels (" .. dt .. ")", function()
      local C = require("mx.core.lib").C
      local op = C.mx_op_find("dot")
      assert.are.equal(3, bit.band(C.mx_op_stype_backends(op, 0), 3)) -- ref and cpu
      local a = random_csr(300, 200, 0.03, dt)
      local b = nd.random.uniform(-1, 1, { 200, 33 }, { dtype = dt })
      local tol = dt == "float32" and 1e-5 or 1e-12
      close(flat(nd.dot(a, b)), flat(nd._ref.dot(a, b)), tol)
      local bt = nd.random.uniform(-1, 1, { 300, 17 }, { dtype = dt })
      local y, r = nd.dot(a, bt, { transpose_a = true }), nd._ref.dot(a, bt, { transpose_a = true })
      assert.are.equal("row_sparse", y:stype())
      assert.are.same(flat(r:indices()), flat(y:indices()))
      close(flat(y:data()), flat(r:data()), tol)
      close(flat(y), flat(nd.dot(a:tostype("default"), bt, { transpose_a = true })), tol)
      -- an empty matrix, and a float16 one (the cpu kernels decline it: the reference runs)
      local z = nd.sparse.zeros("csr", { 4, 200 }, { dtype = dt })
      assert.are.same({ 0, 0, 0, 0 }, flat(nd.dot(z, b):sum({ axis = 2 })))
      assert.are.equal(0, nd.dot(z, nd.ones({ 4, 3 }, { dtype = dt }), { transpose_a = true }):nnz())
    end)
  end
  for _, dt in ipairs({ "float32", "float64" }) do
    it("add, sub, mul of row_sparse and of csr pairs and row_sparse -> dense agree with the "
      .. "reference kernels exactly (" .. dt .. ")", function()
      local C = require("mx.core.lib").C
      for _, name in ipairs({ "add", "sub", "mul" }) do
        local op = C.mx_op_find(name)
        assert.are.equal(3, bit.band(C.mx_op_stype_backends(op, 0), 3), name) -- ref and cpu
      end
      local function parts(t)
        local p = { t:stype(), flat(t:indices()), t:nnz() > 0 and flat(t:data():reshape({ -1 })) or {} }
        if t:stype() == "csr" then p[4] = flat(t:indptr()) end
        return p
      end
      local a, b = random_csr(120, 90, 0.05, dt), random_csr(120, 90, 0.05, dt)
      mx.random.seed(3)
      b = nd.mul(nd.random.uniform(-1, 1, { 120, 90 }, { dtype = dt }), b:tostype("default")):tostype("csr")
      local ra = nd.sparse.row_sparse_array({ nd.random.uniform(-1, 1, { 40, 3, 2 }, { dtype = dt }),
        nd.arange(0, 80, 2, { dtype = "int64" }) }, { shape = { 100, 3, 2 } })
      local rb = nd.sparse.row_sparse_array({ nd.random.uniform(-1, 1, { 30, 3, 2 }, { dtype = dt }),
        nd.arange(0, 90, 3, { dtype = "int64" }) }, { shape = { 100, 3, 2 } })
      local ez = nd.sparse.zeros("row_sparse", { 100, 3, 2 }, { dtype = dt })
      local cz = nd.sparse.zeros("csr", { 120, 90 }, { dtype = dt })
      for _, name in ipairs({ "add", "sub", "mul" }) do
        for _, pair in ipairs({ { a, b }, { b, a }, { a, cz }, { cz, b }, { ra, rb }, { rb, ra },
          { ra, ez }, { ez, rb } }) do
          local got, want = nd[name](pair[1], pair[2]), nd._ref[name](pair[1], pair[2])
          assert.are.same(parts(want), parts(got), name)
        end
      end
      for _, r in ipairs({ ra, ez }) do
        assert.are.same(flat(nd._ref.cast_storage(r):reshape({ -1 })),
          flat(r:tostype("default"):reshape({ -1 })))
      end
    end)
  end
  for _, dt in ipairs({ "float32", "float64" }) do
    it("the lazy updates agree with the reference kernels and leave the other rows (" .. dt .. ")",
      function()
      local C = require("mx.core.lib").C
      local tol = dt == "float32" and 1e-5 or 1e-12
      mx.random.seed(5)
      local ids = nd.array({ 1, 4, 5, 9 }, { dtype = "int64" })
      local g = nd.sparse.row_sparse_array({ nd.random.uniform(-2, 2, { 4, 3 }, { dtype = dt }), ids },
        { shape = { 10, 3 } })
      local cases = {
        { "sgd_update", 0, { lr = 0.1, wd = 0.01, rescale_grad = 0.5 } },
        { "sgd_mom_update", 1, { lr = 0.1, wd = 0.01, momentum = 0.9, clip_gradient = 0.7 } },
        { "adam_update", 2, { lr = 0.01, wd = 0.01, beta1 = 0.9, beta2 = 0.99, epsilon = 1e-8 } },
        { "adagrad_update", 1, { lr = 0.1, wd = 0.01, epsilon = 1e-7 } },
      }
      for _, c in ipairs(cases) do
        local name, ns, opts = c[1], c[2], c[3]
        assert.are.equal(3, bit.band(C.mx_op_stype_backends(C.mx_op_find(name), 0), 3), name)
        local function inputs()
          mx.random.seed(9)
          local t = { nd.random.uniform(-1, 1, { 10, 3 }, { dtype = dt }), g }
          for _ = 1, ns do t[#t + 1] = nd.random.uniform(0, 1, { 10, 3 }, { dtype = dt }) end
          return t
        end
        local a, b = inputs(), inputs()
        local w0 = a[1]:totable()
        local n = #a
        a[n + 1], b[n + 1] = opts, opts
        local ra = { nd[name](unpack(a, 1, n + 1)) }
        local rb = { nd._ref[name](unpack(b, 1, n + 1)) }
        for k = 1, #rb do close(flat(ra[k]:reshape({ -1 })), flat(rb[k]:reshape({ -1 })), tol) end
        local w1 = ra[1]:totable()
        for _, r in ipairs({ 0, 2, 3, 6, 7, 8 }) do assert.are.same(w0[r + 1], w1[r + 1], name) end
      end
    end)
  end
  for _, dt in ipairs({ "float32", "float64" }) do
    it("embedding's row_sparse gradient agrees with the reference kernel exactly (" .. dt .. ")",
      function()
      local C = require("mx.core.lib").C
      local op = C.mx_op_find("embedding_backward")
      assert.are.equal(3, bit.band(C.mx_op_stype_backends(op, 0), 3))
      mx.random.seed(4)
      local ids = nd.array({ { 3, 1, 3 }, { 7, 1, 0 } })
      local w = nd.zeros({ 9, 5 }, { dtype = dt })
      local g = nd.random.uniform(-1, 1, { 2, 3, 5 }, { dtype = dt })
      local a = nd.embedding_backward(ids, w, g, { sparse_grad = true })
      local b = nd._ref.embedding_backward(ids, w, g, { sparse_grad = true })
      assert.are.equal("row_sparse", a:stype())
      assert.are.same({ 0, 1, 3, 7 }, flat(a:indices()))
      assert.are.same(flat(b:indices()), flat(a:indices()))
      assert.are.same(flat(b:data():reshape({ -1 })), flat(a:data():reshape({ -1 })))
      local ok, err = pcall(nd.embedding_backward, nd.array({ 9 }), w, nd.ones({ 1, 5 }, { dtype = dt }),
        { sparse_grad = true })
      assert.is_false(ok)
      assert.matches("data%[0%] = 9 is not a token id in %[0, 9%)", tostring(err))
    end)
  end
  it("float16 operands run the reference kernel", function()
    local a = nd.array({ { 1, 0 }, { 0, 2 } }, { dtype = "float16" }):tostype("csr")
    local b = nd.array({ { 1, 2 }, { 3, 4 } }, { dtype = "float16" })
    assert.are.same({ { 1, 2 }, { 6, 8 } }, nd.dot(a, b):totable())
  end)
end)

describe("sparse op table", function()
  it("declares the storage types of dot's kernels", function()
    local C = require("mx.core.lib").C
    local op = C.mx_op_find("dot")
    local n = C.mx_op_stype_count(op)
    assert.is_true(n >= 5)
    local ffi = require("ffi")
    local ins, outs = ffi.new("int[8]"), ffi.new("int[4]")
    assert.are.equal(2, C.mx_op_stype_sig(op, 0, ins, outs))
    assert.are.same({ 2, 0, 0 }, { ins[0], ins[1], outs[0] })
    assert.are.equal("dot_csr_dns", ffi.string(C.mx_op_stype_name(op, 0)))
  end)

  it("cast_storage, sparse_retain and square_sum have their dense kernels", function()
    local x = nd.array({ { 1, 2 }, { 0, 0 }, { 3, 0 } })
    assert.are.same(x:totable(), nd.cast_storage(x):totable())
    assert.are.same({ { 1, 2 }, { 0, 0 }, { 0, 0 } },
      nd.sparse_retain(x, nd.array({ 0 }, { dtype = "int64" })):totable())
    close(flat(nd.square_sum(x, { axis = 2 })), { 5, 0, 9 })
    close(flat(nd.square_sum(x)), { 14 })
    local ok, e = pcall(nd.sparse_retain, x, nd.array({ 3 }, { dtype = "int64" }))
    assert.is_false(ok)
    assert.matches("sparse_retain", tostring(e))
  end)
end)

-- Our files load in real MXNet 1.9.1 (needs /opt/mxvenv; slow: starts Python).
describe("#slow #mxnet sparse interop", function()
  it("MXNet loads the arrays built here from their parts with the same parts", function()
    local PY = "/opt/mxvenv/bin/python"
    local f = io.open(PY, "r")
    if not f then pending("no MXNet venv at " .. PY) return end
    f:close()
    local arrays = {}
    for k, a in pairs(F.arrays) do
      local opts = { shape = a.shape, dtype = a.dtype }
      if a.stype == "csr" then
        arrays[k] = nd.sparse.csr_matrix({ nd.array(a.data, { dtype = a.dtype }), a.indices, a.indptr }, opts)
      elseif a.stype == "row_sparse" then
        local d = nd.array(a.data, { dtype = a.dtype }):reshape(a.data_shape)
        arrays[k] = nd.sparse.row_sparse_array({ d, a.indices }, opts)
      else
        arrays[k] = nd.array(a.values, { dtype = a.dtype }):reshape(a.shape)
      end
    end
    local path = os.tmpname()
    nd.save(path, arrays)
    local p = io.popen(PY .. " tools/fixtures/make_sparse_fixtures.py --check '" .. path .. "' 2>&1")
    local out = p:read("*a")
    local ok = p:close()
    os.remove(path)
    assert.matches("checked 8 arrays, 0 bad", out, 1, true)
    assert.is_truthy(ok)
  end)
end)

describe("sparse gradients", function()
  it("Embedding's sparse_grad writes a row_sparse gradient, as MXNet 1.9.1", function()
    local E = F.embedding
    local w = nd.array(E.weight):reshape { 6, 2 }
    w:attach_grad("write", "row_sparse")
    local y
    mx.autograd.record(function()
      y = nd.embedding(nd.array(E.ids):reshape { 2, 2 }, w, { sparse_grad = true })
    end)
    y:backward(nd.array(E.head):reshape { 2, 2, 2 })
    same("grad", w:grad(), E.grad, 0)
    -- two lookups of one weight (the gradients summed before the buffer), and req add
    local w2 = nd.array(E.weight):reshape { 6, 2 }
    w2:attach_grad("add", "row_sparse")
    for _ = 1, 2 do
      mx.autograd.record(function()
        y = nd.add(nd.embedding(nd.array({ 1, 5 }), w2, { sparse_grad = true }),
          nd.embedding(nd.array({ 5, 2 }), w2, { sparse_grad = true }))
      end)
      y:backward()
    end
    assert.are.equal("row_sparse", w2:grad():stype())
    assert.are.same({ 1, 2, 5 }, flat(w2:grad():indices()))
    assert.are.same({ { 2, 2 }, { 2, 2 }, { 4, 4 } }, w2:grad():data():totable())
    w2:zero_grad()
    assert.are.equal("row_sparse", w2:grad():stype())
    assert.are.equal(0, w2:grad():nnz())
    -- a dense buffer gets the same values densely
    local w3 = nd.array(E.weight):reshape { 6, 2 }
    w3:attach_grad()
    mx.autograd.record(function()
      y = nd.embedding(nd.array(E.ids):reshape { 2, 2 }, w3, { sparse_grad = true })
    end)
    y:backward(nd.array(E.head):reshape { 2, 2, 2 })
    assert.are.equal("default", w3:grad():stype())
    close(flat(w3:grad()), E.grad.values)
    local ok, e = pcall(function() w3:attach_grad("write", "coo") end)
    assert.is_false(ok)
    assert.matches("stype must be", tostring(e))
  end)

  it("dot(csr, w)'s gradient for w is csr^T . head", function()
    local A = nd.load(FIX .. "mx191_sparse.params").csr
    local w = nd.arange(0, 8):reshape { 4, 2 }
    w:attach_grad()
    local y
    mx.autograd.record(function() y = nd.dot(A, w) end)
    local h = nd.arange(1, 9):reshape { 4, 2 }
    y:backward(h)
    close(flat(w:grad()), flat(nd.dot(A:tostype("default"), h, { transpose_a = true })))
  end)

  for _, c in ipairs(F.lazy) do
    it("lazy update " .. c.name .. " with row_sparse gradients matches MXNet 1.9.1", function()
      local L = F.lazy
      local o = mx.optimizer.create(c.optimizer:lower(), c.opts)
      local w = nd.array(L.weight):reshape { 5, 2 }
      local st = o:create_state(1, w)
      local C = require("mx.core.lib").C
      local n0 = tonumber(C.mx_storage_fallbacks())
      for _, g in ipairs(L.grads) do
        local gr = nd.sparse.row_sparse_array({ nd.array(g.data):reshape { g.rows, 2 }, g.indices },
          { shape = { 5, 2 } })
        o:update(1, w, gr, st)
      end
      close(flat(w), c.result, 1e-5)
      assert.are.equal(n0, tonumber(C.mx_storage_fallbacks())) -- no dense fallback
    end)
  end

  it("mul's gradient keeps row_sparse operands row_sparse (a factorization machine's v*v), "
    .. "no dense fallback, the dense result", function()
    local C = require("mx.core.lib").C
    local x = nd.sparse.csr_matrix({ { 1, 2, 3, 4 }, { 0, 2, 1, 5 }, { 0, 2, 2, 4 } },
      { shape = { 3, 6 } })
    local vals = nd.array({ { 0.1, -0.2 }, { 0.3, 0.4 }, { -0.5, 0.6 }, { 0.7, 0.8 } })
    local v = nd.sparse.row_sparse_array({ vals, { 0, 1, 2, 5 } }, { shape = { 6, 2 } })
    v:attach_grad("write", "row_sparse")
    local n0 = tonumber(C.mx_storage_fallbacks())
    local y = mx.autograd.record(function()
      local xv = nd.dot(x, v)
      return (xv * xv - nd.dot(x * x, v * v)):sum()
    end)
    y:backward()
    assert.are.equal(n0, tonumber(C.mx_storage_fallbacks()))
    assert.are.equal("row_sparse", v:grad():stype())
    local vd = v:tostype("default")
    vd:attach_grad()
    local xd = x:tostype("default")
    y = mx.autograd.record(function()
      local xv = nd.dot(xd, vd)
      return (xv * xv - nd.dot(xd * xd, vd * vd)):sum()
    end)
    y:backward()
    close(flat(v:grad():tostype("default")), flat(vd:grad()))
  end)

  it("Gluon: Embedding(sparse_grad) + Trainer changes only the looked-up rows", function()
    local gluon = mx.gluon
    local function run(sparse)
      mx.random.seed(7)
      local net = gluon.nn.Embedding(10, 3, { sparse_grad = sparse })
      net:initialize(mx.init.Uniform(0.5))
      local tr = gluon.Trainer(net:collect_params(), "sgd",
        { learning_rate = 0.5, momentum = 0.9, wd = 0.1 })
      local w0 = net.weight:data():copy()
      for _, ids in ipairs({ { 1, 3, 3 }, { 7, 1 } }) do
        local y
        mx.autograd.record(function() y = net(nd.array(ids)):sum() end)
        y:backward()
        tr:step(1)
      end
      return w0, net.weight:data(), net.weight:grad()
    end
    local w0, w, g = run(true)
    assert.are.equal("row_sparse", g:stype())
    assert.are.same({ 1, 7 }, flat(g:indices()))
    local a, b = w0:totable(), w:totable()
    for r = 1, 10 do
      local touched = r == 2 or r == 4 or r == 8
      for c = 1, 3 do
        if touched then assert.is_true(a[r][c] ~= b[r][c], "row " .. r)
        else assert.are.equal(a[r][c], b[r][c], "row " .. r) end
      end
    end
    -- the dense gradient decays and moves every row (MXNet's standard update)
    local _, wd = run(false)
    assert.are_not.equal(a[1][1], wd:totable()[1][1])
    -- touched in both steps: the two updates agree there
    close(flat(w[2]), flat(wd[2]), 1e-6)
  end)
end)
