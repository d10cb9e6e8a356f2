-- spec/linalg_products_spec.lua — dot, batch_dot, matmul, fully_connected (f32, f64, ints,
-- bf16) and the attention matmuls: against naive Lua products, against the reference
-- kernels (nd._ref), the BLAS paths (f32 through oneDNN/cblas, f64 through cblas, ints
-- through ref), shapes and error messages.
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "linalg_products_spec.lua"

-- t's values as the untransposed matrix; when tr, t is stored as (rows, cols)
local function mat(t, rows, cols, tr)
  local v = t:tolist()
  if tr then return H.transpose_flat(v, rows, cols) end
  return v
end

describe("dot", function()
  for _, flags in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
    local ta, tb = flags[1], flags[2]
    it(string.format("multiplies 2-d matrices (transpose_a=%s, transpose_b=%s)", ta, tb), function()
      local M, K, N = 5, 7, 3
      local a = H.rand(mx, ta and { K, M } or { M, K }, { seed = 1 }):astype("float32")
      local b = H.rand(mx, tb and { N, K } or { K, N }, { seed = 2 }):astype("float32")
      local c = nd.dot(a, b, { transpose_a = ta, transpose_b = tb })
      assert.is_true(H.same_shape(c, { M, N }))
      local want = H.matmul_flat(mat(a, K, M, ta), mat(b, N, K, tb), M, K, N)
      assert.is_true(H.maxdiff(c, want) < 1e-5)
      local r = nd._ref.dot(a, b, { transpose_a = ta, transpose_b = tb })
      assert.is_true(H.maxdiff(c, r) < 1e-5)
    end)
  end

  it("follows MXNet's N-d rules (lhs last axis with rhs first axis)", function()
    local a = H.rand(mx, { 2, 3, 4 }, { seed = 3 })
    local b = H.rand(mx, { 4, 5, 2 }, { seed = 4 })
    local c = nd.dot(a, b)
    assert.is_true(H.same_shape(c, { 2, 3, 5, 2 }))
    assert.is_true(H.maxdiff(c:tolist(), H.matmul_flat(a:tolist(), b:tolist(), 6, 4, 10)) < 1e-12)
    -- transpose_a contracts lhs's first axis: (4, 2, 3)^T . (4, 5)
    local at = H.rand(mx, { 4, 2, 3 }, { seed = 5 })
    local b2 = H.rand(mx, { 4, 5 }, { seed = 6 })
    local c2 = nd.dot(at, b2, { transpose_a = true })
    assert.is_true(H.same_shape(c2, { 2, 3, 5 }))
    local want = H.matmul_flat(H.transpose_flat(at:tolist(), 4, 6), b2:tolist(), 6, 4, 5)
    assert.is_true(H.maxdiff(c2, want) < 1e-12)
    -- transpose_b contracts rhs's last axis
    local bt = H.rand(mx, { 5, 2, 3 }, { seed = 7 })
    local a3 = H.rand(mx, { 2, 3 }, { seed = 8 })
    local c3 = nd.dot(a3, bt, { transpose_b = true })
    assert.is_true(H.same_shape(c3, { 2, 5, 2 }))
    assert.is_true(H.maxdiff(c3, nd._ref.dot(a3, bt, { transpose_b = true })) < 1e-12)
  end)

  it("handles 1-d operands: vector . vector is (1,), vector . matrix drops the axis", function()
    local v = nd.array({ 1, 2, 3 })
    local c = nd.dot(v, v)
    assert.is_true(H.same_shape(c, { 1 }))
    assert.equal(14, c:item())
    local m = nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    assert.same({ 22, 28 }, nd.dot(v, m):totable())
    assert.same({ 5, 11, 17 }, nd.dot(m, nd.array({ 1, 2 })):totable())
  end)

  it("uses the right path per dtype: f32, f64 (cblas) and int32 (ref) agree with ref", function()
    for _, dt in ipairs { "float32", "float64", "int32", "int64" } do
      local a = H.rand(mx, { 9, 6 }, { seed = 9, int = true, dtype = dt })
      local b = H.rand(mx, { 6, 4 }, { seed = 10, int = true, dtype = dt })
      local c = nd.dot(a, b)
      assert.equal(dt, c:dtype())
      assert.equal(0, H.maxdiff(c, nd._ref.dot(a, b)))
      assert.equal(0, H.maxdiff(c, H.matmul_flat(a:tolist(), b:tolist(), 9, 6, 4)))
    end
  end)

  it("matches the reference on mid-size and threaded (>= 32 MFLOP) f32 GEMMs", function()
    local a = H.rand(mx, { 70, 130 }, { seed = 11, dtype = "float32" })
    local b = H.rand(mx, { 130, 90 }, { seed = 12, dtype = "float32" })
    assert.is_true(H.maxdiff(nd.dot(a, b), nd._ref.dot(a, b)) < 1e-4)
    local p = H.rand(mx, { 256, 256 }, { seed = 13, dtype = "float32" })
    local q = H.rand(mx, { 256, 256 }, { seed = 14, dtype = "float32" })
    local c = nd.dot(p, q, { transpose_b = true })
    assert.is_true(H.maxdiff(c, nd._ref.dot(p, q, { transpose_b = true })) < 1e-3)
  end)

  it("gives zeros for an empty contraction and empty results for empty dims", function()
    local c = nd.dot(nd.ones { 3, 0 }, nd.ones { 0, 2 })
    assert.is_true(H.same_shape(c, { 3, 2 }))
    assert.same({ 0, 0, 0, 0, 0, 0 }, c:tolist())
    assert.is_true(H.same_shape(nd.dot(nd.ones { 0, 4 }, nd.ones { 4, 2 }), { 0, 2 }))
  end)

  it("writes into out=", function()
    local a, b = nd.ones { 2, 3 }, nd.ones { 3, 2 }
    local o = nd.zeros { 2, 2 }
    local r = nd.dot(a, b, { out = o })
    assert.equal(o, r)
    assert.same({ 3, 3, 3, 3 }, o:tolist())
  end)

  it("reports mismatched shapes and dtypes at the caller's line", function()
    local a, b = nd.ones { 2, 3 }, nd.ones { 4, 2 }
    H.assert_error(function(mark) mark() nd.dot(a, b) end, FILE, "dot", "(2, 3)", "(4, 2)")
    H.assert_error(function(mark) mark() a:dot(b, { transpose_b = true }) end, FILE, "(2, 3)",
      "transpose_b")
    H.assert_error(function(mark) mark() nd.dot(a, nd.ones({ 3, 2 }, { dtype = "float64" })) end,
      FILE, "dot", "float32", "float64")
    H.assert_error(function(mark) mark() nd.dot(a, b, { transpose = true }) end, FILE,
      "unknown option 'transpose'")
  end)
end)

describe("batch_dot", function()
  it("multiplies each batch with transpose flags and agrees with ref", function()
    for _, flags in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
      local ta, tb = flags[1], flags[2]
      local B, M, K, N = 3, 4, 5, 2
      local a = H.rand(mx, ta and { B, K, M } or { B, M, K }, { seed = 13 })
      local b = H.rand(mx, tb and { B, N, K } or { B, K, N }, { seed = 14 })
      local c = nd.batch_dot(a, b, { transpose_a = ta, transpose_b = tb })
      assert.is_true(H.same_shape(c, { B, M, N }))
      for i = 1, B do
        local want = H.matmul_flat(mat(a[i], K, M, ta), mat(b[i], N, K, tb), M, K, N)
        assert.is_true(H.maxdiff(c[i], want) < 1e-12)
      end
      assert.is_true(H.maxdiff(c, nd._ref.batch_dot(a, b, { transpose_a = ta, transpose_b = tb })) < 1e-12)
    end
  end)

  it("runs many small float32 batches across the pool", function()
    local a = H.rand(mx, { 64, 8, 8 }, { seed = 15, dtype = "float32" })
    local b = H.rand(mx, { 64, 8, 8 }, { seed = 16, dtype = "float32" })
    assert.is_true(H.maxdiff(nd.batch_dot(a, b), nd._ref.batch_dot(a, b)) < 1e-5)
  end)

  it("rejects non-3-d operands and mismatched batch dims", function()
    H.assert_error(function(mark) mark() nd.batch_dot(nd.ones { 2, 3 }, nd.ones { 3, 2 }) end, FILE,
      "batch_dot", "3-d")
    H.assert_error(function(mark) mark() nd.batch_dot(nd.ones { 2, 2, 3 }, nd.ones { 3, 3, 2 }) end,
      FILE, "batch dims differ")
  end)
end)

describe("matmul", function()
  it("broadcasts batch dims like NumPy", function()
    local a = H.rand(mx, { 2, 1, 3, 4 }, { seed = 17 })
    local b = H.rand(mx, { 3, 4, 2 }, { seed = 18 })
    local c = nd.matmul(a, b)
    assert.is_true(H.same_shape(c, { 2, 3, 3, 2 }))
    for i = 1, 2 do
      for j = 1, 3 do
        local want = H.matmul_flat(a[i][1]:tolist(), b[j]:tolist(), 3, 4, 2)
        assert.is_true(H.maxdiff(c[i][j], want) < 1e-12)
      end
    end
    assert.is_true(H.maxdiff(c, nd._ref.matmul(a, b)) < 1e-12)
  end)

  it("treats a batch of rows times one matrix as one GEMM", function()
    local a = H.rand(mx, { 3, 5, 4 }, { seed = 19, dtype = "float32" })
    local b = H.rand(mx, { 4, 6 }, { seed = 20, dtype = "float32" })
    local c = nd.matmul(a, b)
    assert.is_true(H.same_shape(c, { 3, 5, 6 }))
    assert.is_true(H.maxdiff(c, H.matmul_flat(a:tolist(), b:tolist(), 15, 4, 6)) < 1e-5)
  end)

  it("promotes 1-d operands and drops the added axis", function()
    local v = nd.array({ 1, 2 })
    local m = nd.array({ { 1, 2 }, { 3, 4 } })
    assert.same({ 7, 10 }, nd.matmul(v, m):totable())
    assert.same({ 5, 11 }, nd.matmul(m, v):totable())
    assert.equal(0, nd.matmul(v, v):ndim())
    assert.equal(5, nd.matmul(v, v):item())
  end)

  it("rejects incompatible shapes", function()
    H.assert_error(function(mark) mark() nd.matmul(nd.ones { 2, 3 }, nd.ones { 2, 3 }) end, FILE,
      "matmul", "(2, 3)")
    H.assert_error(function(mark) mark() nd.matmul(nd.ones { 2, 2, 3 }, nd.ones { 3, 3, 2 }) end,
      FILE, "cannot be broadcast")
  end)
end)

describe("fully_connected", function()
  it("computes data . weight^T + bias (MXNet's FullyConnected)", function()
    local x = H.rand(mx, { 4, 3 }, { seed = 21, dtype = "float32" })
    local w = H.rand(mx, { 5, 3 }, { seed = 22, dtype = "float32" })
    local b = H.rand(mx, { 5 }, { seed = 23, dtype = "float32" })
    local y = nd.fully_connected(x, w, b, { num_hidden = 5 })
    assert.is_true(H.same_shape(y, { 4, 5 }))
    local want = H.matmul_flat(x:tolist(), H.transpose_flat(w:tolist(), 5, 3), 4, 3, 5)
    local bv = b:tolist()
    for i = 0, 3 do for j = 1, 5 do want[i * 5 + j] = want[i * 5 + j] + bv[j] end end
    assert.is_true(H.maxdiff(y, want) < 1e-5)
    assert.is_true(H.maxdiff(y, nd._ref.fully_connected(x, w, b)) < 1e-5)
  end)

  it("f32 layer sizes (oneDNN's cached matmul primitives) match the ref kernel", function()
    -- shapes above the small-product loop, with and without bias, repeated (cache
    -- hits), a view as data and more shapes than the cache holds (evictions)
    for round = 1, 2 do
      -- one row (the batch-1 GEMV): K = 300 and 777 leave tails past the 32-float steps,
      -- 1 x 777 . 777 x 300 is split across the team
      for k, sh in ipairs { { 64, 784, 256 }, { 64, 256, 10 }, { 3, 50, 7 }, { 1, 300, 40 },
        { 1, 777, 300 } } do
        local M, K, N = sh[1], sh[2], sh[3]
        local x = H.rand(mx, { M, K }, { seed = 30 + k, dtype = "float32" })
        local w = H.rand(mx, { N, K }, { seed = 40 + k, dtype = "float32" })
        local b = H.rand(mx, { N }, { seed = 50 + k, dtype = "float32" })
        local y = nd.fully_connected(x, w, b)
        assert.is_true(H.maxdiff(y, nd._ref.fully_connected(x, w, b)) < 1e-4, "round " .. round)
        local y0 = nd.fully_connected(x, w, { no_bias = true })
        assert.is_true(H.maxdiff(y0, nd._ref.fully_connected(x, w, { no_bias = true })) < 1e-4)
        local yr = nd.fully_connected(x, w, b, { act_type = "relu" })
        assert.is_true(H.maxdiff(yr, nd.relu(y)) < 1e-6)
        assert.is_true(H.maxdiff(yr, nd._ref.fully_connected(x, w, b, { act_type = "relu" })) < 1e-4)
        -- a few float32 ulps of the largest output: oneDNN's erf/tanh differ by CPU (AVX-512's
        -- tanh was 2.1e-5 off at |y| = 36, 6e-7 relative)
        local ulps = 2e-6 * math.max(1, nd.max(nd.abs(y)):item())
        for _, a in ipairs({ { "gelu", "erf" }, { "gelu_tanh", "tanh" } }) do
          local yg = nd.fully_connected(x, w, b, { act_type = a[1] })
          assert.is_true(H.maxdiff(yg, nd.gelu(y, { approximation = a[2] })) < ulps, a[1])
          assert.is_true(H.maxdiff(yg, nd._ref.fully_connected(x, w, b, { act_type = a[1] })) < 1e-4, a[1])
        end
        local x64, w64 = x:astype("float64"), w:astype("float64") -- the sgemm-free f64 path
        assert.is_true(H.maxdiff(nd.fully_connected(x64, w64, { no_bias = true, act_type = "relu" }),
          nd.relu(nd.fully_connected(x64, w64, { no_bias = true }))) < 1e-12)
        assert.is_true(H.maxdiff(nd.fully_connected(x64, w64, { no_bias = true, act_type = "gelu" }),
          nd._ref.fully_connected(x64, w64, { no_bias = true, act_type = "gelu" })) < 1e-12)
      end
    end
    local big = H.rand(mx, { 3, 20, 30 }, { seed = 60, dtype = "float32" })
    local w = H.rand(mx, { 9, 30 }, { seed = 61, dtype = "float32" })
    local v = big[2] -- a view at an offset into its storage
    assert.is_true(H.maxdiff(nd.fully_connected(v, w, { no_bias = true }),
      nd._ref.fully_connected(v, w, { no_bias = true })) < 1e-4)
    for n = 1, 40 do -- 40 shapes through a 32-entry cache
      local x, wn = nd.ones { 2, 40 + n }, nd.ones { 13, 40 + n }
      assert.are.equal(40 + n, nd.fully_connected(x, wn, { no_bias = true })[2][13]:item())
    end
  end)

  it("flattens N-d data by default and maps the last axis with flatten=false", function()
    local x = H.rand(mx, { 2, 3, 4 }, { seed = 24 })
    local w = H.rand(mx, { 6, 12 }, { seed = 25 })
    local y = nd.fully_connected(x, w, { no_bias = true })
    assert.is_true(H.same_shape(y, { 2, 6 }))
    assert.is_true(H.maxdiff(y, nd.dot(x:reshape { 2, 12 }, w, { transpose_b = true })) < 1e-12)
    local w2 = H.rand(mx, { 6, 4 }, { seed = 26 })
    local b2 = H.rand(mx, { 6 }, { seed = 27 })
    local y2 = nd.fully_connected(x, w2, b2, { flatten = false })
    assert.is_true(H.same_shape(y2, { 2, 3, 6 }))
    assert.is_true(H.maxdiff(y2, nd._ref.fully_connected(x, w2, b2, { flatten = false })) < 1e-12)
  end)

  it("checks the inputs against num_hidden, no_bias and the weight", function()
    local x, w, b = nd.ones { 2, 3 }, nd.ones { 4, 3 }, nd.ones { 4 }
    H.assert_error(function(mark) mark() nd.fully_connected(x, w, { num_hidden = 4 }) end, FILE,
      "fully_connected", "no_bias")
    H.assert_error(function(mark) mark() nd.fully_connected(x, w, b, { num_hidden = 5 }) end, FILE,
      "num_hidden=5")
    H.assert_error(function(mark) mark() nd.fully_connected(x, nd.ones { 4, 2 }, b) end, FILE,
      "(2, 3)", "(4, 2)")
    H.assert_error(function(mark) mark() nd.fully_connected(x, w, nd.ones { 3 }) end, FILE, "bias")
  end)
end)

-- bf16 products: oneDNN's bf16 matmul sums in f32 and rounds the result once,
-- so against the f64 product of the same (bf16-rounded) inputs the error is at most a
-- half-ulp of bf16 (2^-8 relative) plus f32 summation noise.
describe("bf16 dot / fully_connected / batch_dot", function()
  local function rel_err(got, want)
    local g, w = got:astype("float64"):reshape({ -1 }):tolist(), want:reshape({ -1 }):tolist()
    local worst, scale = 0, 0
    for i = 1, #w do scale = math.max(scale, math.abs(w[i])) end
    for i = 1, #w do worst = math.max(worst, math.abs(g[i] - w[i])) end
    return worst / scale
  end
  it("matches the f64 product of the bf16 inputs within bf16 rounding, and the ref kernel", function()
    mx.random.seed(5)
    for _, s in ipairs { { 3, 5, 4 }, { 67, 130, 33 }, { 256, 256, 512 } } do
      local M, K, N = s[1], s[2], s[3]
      local a = nd.random.uniform(-1, 1, { M, K }):astype("bfloat16")
      local b = nd.random.uniform(-1, 1, { K, N }):astype("bfloat16")
      local a64, b64 = a:astype("float64"), b:astype("float64")
      local want = nd.dot(a64, b64)
      local got = nd.dot(a, b)
      assert.equal("bfloat16", got:dtype())
      assert.is_true(rel_err(got, want) < 2 ^ -7, "dot " .. M .. "x" .. K .. "x" .. N)
      assert.is_true(rel_err(nd._ref.dot(a, b), want) < 2 ^ -7)
      local bt = b:transpose()
      assert.is_true(rel_err(nd.dot(a, bt, { transpose_b = true }), want) < 2 ^ -7)
      local bias = nd.random.uniform(-1, 1, { N }):astype("bfloat16")
      local fc = nd.fully_connected(a, bt, bias, { num_hidden = N })
      local fwant = nd.add(want, bias:astype("float64"):reshape({ 1, N }))
      assert.is_true(rel_err(fc, fwant) < 2 ^ -7, "fully_connected")
      local relu = nd.fully_connected(a, bt, bias, { num_hidden = N, act_type = "relu" })
      assert.is_true(rel_err(relu, nd.relu(fwant)) < 2 ^ -7, "fully_connected relu")
      assert.equal("bfloat16", relu:dtype())
      -- against the ref kernel too (oneDNN's bf16 primitive from 16 rows on, with the bias
      -- and relu in the same pass; the cpu kernel's GEMM below)
      local rfc = nd._ref.fully_connected(a, bt, bias, { num_hidden = N, act_type = "relu" })
      assert.is_true(rel_err(relu, rfc:astype("float64")) < 2 ^ -7, "fully_connected vs ref")
      local gelu = nd.fully_connected(a, bt, bias, { num_hidden = N, act_type = "gelu" })
      local rg = nd._ref.fully_connected(a, bt, bias, { num_hidden = N, act_type = "gelu" })
      assert.is_true(rel_err(gelu, rg:astype("float64")) < 2 ^ -6, "fully_connected gelu vs ref")
    end
    local x = nd.random.uniform(-1, 1, { 3, 20, 30 }):astype("bfloat16")
    local y = nd.random.uniform(-1, 1, { 3, 30, 10 }):astype("bfloat16")
    assert.is_true(rel_err(nd.batch_dot(x, y), nd.batch_dot(x:astype("float64"), y:astype("float64")))
      < 2 ^ -7)
  end)
end)

---------------------------------------------------------------- attention
describe("interleaved attention matmuls", function()
  local oracle = require("helpers.oracle")
  local err_at = require("helpers.err_at")(FILE)
  local function close(a, b, tol)
    local ok, msg = oracle.close(a, b, tol, tol)
    assert(ok, msg)
  end
  local function t(v, dt)
    return nd.array(v.values, { dtype = dt or "float64" }):reshape(v.shape):copy()
  end
  local R = nd._ref

  it("cpu kernels match the reference (forward and backward ops, f32 and f64)", function()
    for _, cs in ipairs({ { 4, 2, 2, 3 }, { 5, 3, 1, 8 }, { 17, 2, 4, 16 }, { 1, 1, 1, 1 } }) do
      local T, N, Hh, D = cs[1], cs[2], cs[3], cs[4]
      local Tq = T + 2
      for _, dt in ipairs({ "float32", "float64" }) do
        local tol = dt == "float32" and 2e-5 or 1e-12
        local o = { heads = Hh }
        local qkv = oracle.rand(mx, { T, N, 3 * Hh * D }, dt)
        local att = oracle.rand(mx, { N * Hh, T, T }, dt)
        local q, kv = oracle.rand(mx, { Tq, N, Hh * D }, dt), oracle.rand(mx, { T, N, 2 * Hh * D }, dt)
        local att2 = oracle.rand(mx, { N * Hh, Tq, T }, dt)
        local go = oracle.rand(mx, { T, N, Hh * D }, dt)
        local go2 = oracle.rand(mx, { Tq, N, Hh * D }, dt)
        close(nd.interleaved_matmul_selfatt_qk(qkv, o), R.interleaved_matmul_selfatt_qk(qkv, o), tol)
        close(nd.interleaved_matmul_selfatt_valatt(qkv, att, o),
          R.interleaved_matmul_selfatt_valatt(qkv, att, o), tol)
        close(nd.interleaved_matmul_encdec_qk(q, kv, o), R.interleaved_matmul_encdec_qk(q, kv, o), tol)
        close(nd.interleaved_matmul_encdec_valatt(kv, att2, o),
          R.interleaved_matmul_encdec_valatt(kv, att2, o), tol)
        close(nd.interleaved_matmul_selfatt_qk_backward(att, qkv, o),
          R.interleaved_matmul_selfatt_qk_backward(att, qkv, o), tol)
        local pairs_ = {
          { { nd.interleaved_matmul_selfatt_valatt_backward(go, qkv, att, o) },
            { R.interleaved_matmul_selfatt_valatt_backward(go, qkv, att, o) } },
          { { nd.interleaved_matmul_encdec_qk_backward(att2, q, kv, o) },
            { R.interleaved_matmul_encdec_qk_backward(att2, q, kv, o) } },
          { { nd.interleaved_matmul_encdec_valatt_backward(go2, kv, att2, o) },
            { R.interleaved_matmul_encdec_valatt_backward(go2, kv, att2, o) } } }
        for _, pr in ipairs(pairs_) do
          for i = 1, 2 do close(pr[1][i], pr[2][i], tol) end
        end
      end
    end
  end)

  it("match MXNet 1.9.1's _contrib_interleaved_matmul_* (values and gradients)", function()
    local M = dofile("spec/fixtures/attn_mxnet.lua")
    local cases = {
      { "selfatt_qk", { "qkv" } }, { "selfatt_qk_h3", { "qkv" }, "selfatt_qk" },
      { "selfatt_valatt", { "qkv", "att" } }, { "encdec_qk", { "q", "kv" } },
      { "encdec_valatt", { "kv", "att" } } }
    for _, cs in ipairs(cases) do
      local c, op = M[cs[1]], "interleaved_matmul_" .. (cs[3] or cs[1])
      local ins = {}
      for i, k in ipairs(cs[2]) do
        ins[i] = t(c[k], "float32")
        ins[i]:attach_grad()
      end
      local y
      mx.autograd.record(function()
        if #ins == 1 then y = nd[op](ins[1], { heads = c.heads })
        else y = nd[op](ins[1], ins[2], { heads = c.heads }) end
      end)
      y:backward(t(c.w, "float32"))
      close(y, t(c.out, "float32"), 1e-5)
      for i, k in ipairs(cs[2]) do close(ins[i]:grad(), t(c["d_" .. k], "float32"), 1e-5) end
    end
  end)

  it("qk + softmax + valatt equals PyTorch's bmm attention (self and encoder-decoder)", function()
    local P = dofile("spec/fixtures/attn_torch.lua")
    local c = P.selfatt
    local qkv = t(c.qkv)
    qkv:attach_grad()
    local y
    mx.autograd.record(function()
      local s = nd.interleaved_matmul_selfatt_qk(qkv, { heads = 2 })
      y = nd.interleaved_matmul_selfatt_valatt(qkv, nd.softmax(s, { axis = -1 }), { heads = 2 })
    end)
    y:backward(t(c.w))
    close(y, t(c.out), 1e-10)
    close(qkv:grad(), t(c.d_qkv), 1e-10)
    c = P.encdec
    local q, kv = t(c.q), t(c.kv)
    q:attach_grad()
    kv:attach_grad()
    mx.autograd.record(function()
      local s = nd.interleaved_matmul_encdec_qk(q, kv, { heads = 2 })
      y = nd.interleaved_matmul_encdec_valatt(kv, nd.softmax(s, { axis = -1 }), { heads = 2 })
    end)
    y:backward(t(c.w))
    close(y, t(c.out), 1e-10)
    close(q:grad(), t(c.d_q), 1e-10)
    close(kv:grad(), t(c.d_kv), 1e-10)
  end)

  it("errors name the op, the input and its shape, at the caller's line", function()
    local qkv, a443, q, kv, bad = nd.ones({ 4, 2, 18 }), nd.ones({ 4, 4, 3 }), nd.ones({ 3, 2, 6 }),
      nd.ones({ 4, 2, 6 }), nd.ones({ 4, 18 })
    local f, g, h = nd.interleaved_matmul_selfatt_qk, nd.interleaved_matmul_selfatt_valatt,
      nd.interleaved_matmul_encdec_qk
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = f(qkv, { heads = 4 }) return r end, line)
    assert.is_truthy(msg:find("interleaved_matmul_selfatt_qk: queries_keys_values (4, 2, 18): its "
      .. "last dim must be a multiple of 12", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.interleaved_matmul_selfatt_qk(qkv) return r end, line)
    assert.is_truthy(msg:find("heads must be given", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = g(qkv, a443, { heads = 2 }) return r end, line)
    assert.is_truthy(msg:find("attention (4, 4, 3) must have shape (4, T, 4)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = h(q, kv, { heads = 2 }) return r end, line)
    assert.is_truthy(msg:find("keys_values (4, 2, 6) must have shape (Tk, 2, 12)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = f(bad, { heads = 2 }) return r end, line)
    assert.is_truthy(msg:find("queries_keys_values must be 3-d", 1, true), msg)
  end)
end)
