-- spec/linalg_spec.lua — the linalg_* ops (MXNet's la_op: gemm, potrf/potri, inverse,
-- det/slogdet, syrk, trsm/trmm, extract/make diag and trian, gelqf, syevd): against
-- the reference kernels and identities computed here, shapes and error messages
-- (the products dot/batch_dot/matmul/fully_connected: linalg_products_spec.lua).
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "linalg_spec.lua"

---------------------------------------------------------------- linalg_* (MXNet's la_op)
-- a well-conditioned SPD batch: x . x^T + n I, x (batch..., n, n + 2)
local function spd(shape, seed, dtype)
  local n = shape[#shape]
  local xs = {}
  for i = 1, #shape - 1 do xs[i] = shape[i] end
  xs[#shape] = n + 2
  local x = H.rand(mx, xs, { seed = seed })
  local e = nd.mul_scalar(nd.eye(n, { dtype = "float64" }), { scalar = n })
  local a = nd.add(nd.linalg_gemm2(x, x, { transpose_b = true }), e)
  return dtype and a:astype(dtype) or a
end
local function shifted(shape, seed, c, dtype)
  local n = shape[#shape]
  local a = nd.add(H.rand(mx, shape, { seed = seed }),
    nd.mul_scalar(nd.eye(n, { dtype = "float64" }), { scalar = c }))
  return dtype and a:astype(dtype) or a
end

describe("linalg_gemm2 / linalg_gemm", function()
  for _, dt in ipairs { "float32", "float64" } do
    it("matches the reference and batch_dot with flags and alpha (" .. dt .. ")", function()
      local tol = dt == "float32" and 1e-5 or 1e-12
      for _, f in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
        local ta, tb = f[1], f[2]
        local a = H.rand(mx, ta and { 2, 4, 3 } or { 2, 3, 4 }, { seed = 31, dtype = dt })
        local b = H.rand(mx, tb and { 2, 5, 4 } or { 2, 4, 5 }, { seed = 32, dtype = dt })
        local o = { transpose_a = ta, transpose_b = tb, alpha = -1.5 }
        local y = nd.linalg_gemm2(a, b, o)
        assert.is_true(H.same_shape(y, { 2, 3, 5 }))
        assert.is_true(H.maxdiff(y, nd._ref.linalg_gemm2(a, b, o)) < tol)
        local want = nd.mul_scalar(nd.batch_dot(a, b, { transpose_a = ta, transpose_b = tb }),
          { scalar = -1.5 })
        assert.is_true(H.maxdiff(y, want) < tol * 10)
        local c = H.rand(mx, { 2, 3, 5 }, { seed = 33, dtype = dt })
        local og = { transpose_a = ta, transpose_b = tb, alpha = 2, beta = -0.5 }
        local z = nd.linalg_gemm(a, b, c, og)
        assert.is_true(H.maxdiff(z, nd._ref.linalg_gemm(a, b, c, og)) < tol * 10)
        local zw = nd.add(nd.linalg_gemm2(a, b, { transpose_a = ta, transpose_b = tb, alpha = 2 }),
          nd.mul_scalar(c, { scalar = -0.5 }))
        assert.is_true(H.maxdiff(z, zw) < tol * 10)
      end
    end)
  end

  it("rejects mismatched shapes, batches, ranks and dtypes", function()
    H.assert_error(function(mark) mark() nd.linalg_gemm2(nd.ones { 2, 3 }, nd.ones { 2, 3 }) end,
      FILE, "linalg_gemm2", "(2, 3)", "3 vs 2")
    H.assert_error(function(mark) mark() nd.linalg_gemm2(nd.ones { 2, 2, 3 }, nd.ones { 3, 3, 2 }) end,
      FILE, "batch dims differ")
    H.assert_error(function(mark) mark() nd.linalg_gemm2(nd.ones { 3 }, nd.ones { 3, 2 }) end,
      FILE, "at least 2 dims")
    H.assert_error(function(mark)
      mark() nd.linalg_gemm(nd.ones { 2, 3 }, nd.ones { 3, 4 }, nd.ones { 4, 2 })
    end, FILE, "linalg_gemm", "C must have the product's shape (2, 4)")
    H.assert_error(function(mark) mark() nd.linalg_gemm2(nd.ones({ 2, 2 }, { dtype = "int32" }),
      nd.ones({ 2, 2 }, { dtype = "int32" })) end, FILE, "linalg_gemm2")
  end)
end)

describe("linalg_potrf", function()
  for _, dt in ipairs { "float32", "float64" } do
    it("gives lower L with L L^T = A, as the reference (" .. dt .. ")", function()
      local tol = dt == "float32" and 1e-4 or 1e-10
      local a = spd({ 2, 3, 4, 4 }, 41, dt)
      local L = nd.linalg_potrf(a)
      assert.is_true(H.same_shape(L, { 2, 3, 4, 4 }))
      assert.is_true(H.maxdiff(nd.linalg_gemm2(L, L, { transpose_b = true }), a) < tol * 10)
      assert.is_true(H.maxdiff(L, nd._ref.linalg_potrf(a)) < tol)
      local v = L:tolist() -- the upper triangle is exactly zero, the diagonal positive
      for m = 0, 5 do
        for i = 1, 4 do
          assert.is_true(v[m * 16 + (i - 1) * 4 + i] > 0)
          for j = i + 1, 4 do assert.are.equal(0, v[m * 16 + (i - 1) * 4 + j]) end
        end
      end
    end)
  end

  it("names the batch element that is not positive definite", function()
    local a = spd({ 3, 3, 3 }, 42)
    local bad = nd.concat({ a, nd.mul_scalar(nd.eye(3, { dtype = "float64" }), { scalar = -1 })
      :reshape { 1, 3, 3 } }, { dim = 1 })
    for _, f in ipairs { nd.linalg_potrf, nd._ref.linalg_potrf } do
      H.assert_error(function(mark) mark() f(bad):wait_to_read() end, FILE, "linalg_potrf",
        "matrix 3", "not positive definite")
    end
    H.assert_error(function(mark) mark() nd.linalg_potrf(nd.ones { 2, 3 }) end, FILE,
      "linalg_potrf", "square", "(2, 3)")
  end)
end)

describe("linalg_inverse / linalg_det / linalg_slogdet", function()
  for _, dt in ipairs { "float32", "float64" } do
    it("A . inverse(A) = I and matches the reference (" .. dt .. ")", function()
      local tol = dt == "float32" and 1e-4 or 1e-10
      local a = shifted({ 2, 5, 5 }, 51, 3, dt)
      local y = nd.linalg_inverse(a)
      local eye = nd.broadcast_to(nd.eye(5, { dtype = dt }), { shape = { 2, 5, 5 } })
      assert.is_true(H.maxdiff(nd.linalg_gemm2(a, y), eye) < tol)
      assert.is_true(H.maxdiff(y, nd._ref.linalg_inverse(a)) < tol)
    end)

    it("det of a triangular matrix is its diagonal's product; slogdet agrees (" .. dt .. ")", function()
      local tol = dt == "float32" and 1e-4 or 1e-10
      local L = nd.linalg_potrf(spd({ 4, 4 }, 52, dt))
      local v, want = L:tolist(), 1
      for i = 0, 3 do want = want * v[i * 4 + i + 1] end
      local d = nd.linalg_det(L)
      assert.is_true(H.same_shape(d, { 1 }))
      assert.is_true(math.abs(d:tolist()[1] - want) < math.abs(want) * 1e-5)
      local a = shifted({ 3, 2, 4, 4 }, 53, -2, dt) -- x - 2I, some dets negative
      local det = nd.linalg_det(a)
      assert.is_true(H.same_shape(det, { 3, 2 }))
      local rd = nd._ref.linalg_det(a)
      assert.is_true(H.maxdiff(det, rd) < (dt == "float32" and 1e-3 or 1e-10))
      local s, l = nd.linalg_slogdet(a)
      local rs, rl = nd._ref.linalg_slogdet(a)
      assert.are.same(rs:tolist(), s:tolist())
      assert.is_true(H.maxdiff(l, rl) < tol)
      local dv, sv, lv = det:tolist(), s:tolist(), l:tolist()
      for i = 1, #dv do
        assert.is_true(math.abs(sv[i] * math.exp(lv[i]) - dv[i]) < math.abs(dv[i]) * 1e-4)
      end
    end)
  end

  it("gives det 0 and slogdet (0, -inf) for a singular matrix; inverse names it", function()
    local z = nd.array({ { { 1, 2 }, { 3, 4 } }, { { 1, 2 }, { 2, 4 } } }, { dtype = "float64" })
    for _, ns in ipairs { nd, nd._ref } do
      assert.are.same({ -2, 0 }, ns.linalg_det(z):tolist())
      local s, l = ns.linalg_slogdet(z)
      assert.are.same({ -1, 0 }, s:tolist())
      assert.are.equal(-math.huge, l:tolist()[2])
      H.assert_error(function(mark) mark() ns.linalg_inverse(z):wait_to_read() end, FILE,
        "linalg_inverse", "matrix 1", "singular")
    end
    H.assert_error(function(mark) mark() nd.linalg_det(nd.ones { 2, 3, 4 }) end, FILE,
      "linalg_det", "square")
  end)

  it("are known by MXNet's names", function()
    local C = require("mx.core.lib").C
    for _, n in ipairs { "_linalg_gemm2", "_linalg_gemm", "_linalg_potrf", "_linalg_inverse",
      "_linalg_det", "_linalg_slogdet", "_linalg_syrk", "_linalg_extractdiag", "_linalg_makediag" } do
      assert.is_true(C.mx_op_find(n) >= 0, n)
    end
  end)
end)

describe("linalg_potrf_backward", function()
  it("is symmetric and gives <G, dL> for symmetric perturbations (central differences)", function()
    local a = spd({ 4, 4 }, 61)
    local L = nd.linalg_potrf(a)
    local G = H.rand(mx, { 4, 4 }, { seed = 62 })
    local dA = nd.linalg_potrf_backward(L, G)
    assert.is_true(H.maxdiff(dA, nd.swapaxes(dA, { dim1 = 1, dim2 = 2 })) < 1e-12)
    local e = H.rand(mx, { 4, 4 }, { seed = 63 })
    local E = nd.add(e, nd.swapaxes(e, { dim1 = 1, dim2 = 2 })) -- symmetric direction
    local eps = 1e-6
    local lp = nd.linalg_potrf(nd.add(a, nd.mul_scalar(E, { scalar = eps })))
    local lm = nd.linalg_potrf(nd.sub(a, nd.mul_scalar(E, { scalar = eps })))
    local num = nd.sum(nd.mul(G, nd.sub(lp, lm))):item() / (2 * eps)
    local ana = nd.sum(nd.mul(dA, E)):item()
    assert.is_true(math.abs(num - ana) < 1e-6 * math.max(1, math.abs(ana)))
  end)
end)

describe("linalg_syrk / linalg_extractdiag / linalg_makediag", function()
  for _, dt in ipairs { "float32", "float64" } do
    it("syrk is alpha A A^T (A^T A with transpose), as gemm2 and the reference (" .. dt .. ")", function()
      local tol = dt == "float32" and 1e-5 or 1e-12
      local a = H.rand(mx, { 2, 3, 5 }, { seed = 71, dtype = dt })
      local y = nd.linalg_syrk(a, { alpha = 2 })
      assert.is_true(H.same_shape(y, { 2, 3, 3 }))
      assert.is_true(H.maxdiff(y, nd.linalg_gemm2(a, a, { transpose_b = true, alpha = 2 })) < tol)
      local yt = nd.linalg_syrk(a, { transpose = true })
      assert.is_true(H.same_shape(yt, { 2, 5, 5 }))
      assert.is_true(H.maxdiff(yt, nd.linalg_gemm2(a, a, { transpose_a = true })) < tol)
      assert.is_true(H.maxdiff(yt, nd._ref.linalg_syrk(a, { transpose = true })) < tol)
    end)
  end

  it("extractdiag and makediag place the offset diagonal (MXNet's examples)", function()
    local a = nd.array({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }, { dtype = "float64" })
    assert.are.same({ 1, 5, 9 }, nd.linalg_extractdiag(a):tolist())
    assert.are.same({ 2, 6 }, nd.linalg_extractdiag(a, { offset = 1 }):tolist())
    assert.are.same({ 7 }, nd.linalg_extractdiag(a, { offset = -2 }):tolist())
    local d = nd.linalg_makediag(nd.array({ { 1, 2 }, { 3, 4 } }, { dtype = "float64" }), { offset = -1 })
    assert.is_true(H.same_shape(d, { 2, 3, 3 }))
    assert.are.same({ 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 4, 0 }, d:tolist())
    -- round trip, batched
    local v = H.rand(mx, { 2, 3, 4 }, { seed = 72 })
    assert.is_true(H.maxdiff(nd.linalg_extractdiag(nd.linalg_makediag(v, { offset = 2 }),
      { offset = 2 }), v) == 0)
    H.assert_error(function(mark) mark() nd.linalg_extractdiag(a, { offset = 3 }) end, FILE,
      "linalg_extractdiag", "offset 3")
    H.assert_error(function(mark) mark() nd.linalg_extractdiag(nd.ones { 2, 3 }) end, FILE,
      "linalg_extractdiag", "square")
  end)
end)

describe("linalg_extracttrian / linalg_maketrian", function()
  local a = nd.array({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }, { dtype = "float64" })
  it("extract the offset triangle row by row (MXNet's examples)", function()
    local a2 = nd.array({ { 1, 2 }, { 3, 4 } }, { dtype = "float64" })
    assert.are.same({ 1, 3, 4 }, nd.linalg_extracttrian(a2):tolist())
    assert.are.same({ 1, 2, 4 }, nd.linalg_extracttrian(a2, { lower = false }):tolist())
    assert.are.same({ 2 }, nd.linalg_extracttrian(a2, { offset = 1 }):tolist())
    assert.are.same({ 3 }, nd.linalg_extracttrian(a2, { offset = -1 }):tolist())
    assert.are.same({ 1, 4, 5, 7, 8, 9 }, nd.linalg_extracttrian(a):tolist())
    assert.are.same({ 1, 2, 3, 5, 6, 9 }, nd.linalg_extracttrian(a, { lower = false }):tolist())
    assert.are.same({ 4, 7, 8 }, nd.linalg_extracttrian(a, { offset = -1 }):tolist())
    -- offset != 0 decides the triangle itself: lower is ignored
    assert.are.same({ 2, 3, 6 }, nd.linalg_extracttrian(a, { offset = 1, lower = true }):tolist())
  end)

  it("maketrian is extracttrian's inverse, batched, and zero outside the triangle", function()
    local m = nd.linalg_maketrian(nd.array({ 1, 2, 3 }, { dtype = "float64" }), { offset = -1 })
    assert.is_true(H.same_shape(m, { 3, 3 }))
    assert.are.same({ 0, 0, 0, 1, 0, 0, 2, 3, 0 }, m:tolist())
    local mu = nd.linalg_maketrian(nd.array({ 1, 2, 3 }, { dtype = "float64" }), { lower = false })
    assert.are.same({ 1, 2, 0, 3 }, mu:tolist())
    for _, o in ipairs { -2, -1, 0, 1, 2 } do
      for _, lower in ipairs { true, false } do
        local opts = { offset = o, lower = lower }
        local x = H.rand(mx, { 2, 3, 4, 4 }, { seed = 80 + o })
        local t = nd.linalg_extracttrian(x, opts)
        local k = 4 - math.abs(o)
        assert.is_true(H.same_shape(t, { 2, 3, k * (k + 1) / 2 }))
        local back = nd.linalg_maketrian(t, opts)
        assert.is_true(H.same_shape(back, { 2, 3, 4, 4 }))
        assert.is_true(H.maxdiff(nd.linalg_extracttrian(back, opts), t) == 0)
        -- the kept entries and only they: the rest of back is zero
        local bl, xl, kept = back:tolist(), x:tolist(), 0
        for i = 1, #bl do
          if bl[i] ~= 0 then
            assert.are.equal(xl[i], bl[i]); kept = kept + 1
          end
        end
        assert.are.equal(2 * 3 * k * (k + 1) / 2, kept)
      end
    end
  end)

  it("name the op and the argument in errors", function()
    H.assert_error(function(mark) mark() nd.linalg_extracttrian(a, { offset = 3 }) end, FILE,
      "linalg_extracttrian", "offset 3")
    H.assert_error(function(mark) mark() nd.linalg_extracttrian(nd.ones { 2, 3 }) end, FILE,
      "linalg_extracttrian", "square")
    H.assert_error(function(mark) mark() nd.linalg_maketrian(nd.ones { 4 }) end, FILE,
      "linalg_maketrian", "triangle")
  end)

  it("are found under MXNet's names", function()
    local C = require("mx.core.lib").C
    assert.is_true(C.mx_op_find("_linalg_extracttrian") >= 0)
    assert.is_true(C.mx_op_find("_linalg_maketrian") >= 0)
  end)
end)

describe("linalg_trsm", function()
  -- a triangular-friendly A: random plus 3 I (the diagonal far from 0), batch (2, ...)
  local function tri_a(dt, seed)
    local e = nd.linalg_makediag(nd.ones({ 2, 4 }, { dtype = dt }), { offset = 0 })
    return nd.add(H.rand(mx, { 2, 4, 4 }, { seed = seed, dtype = dt }), nd.mul_scalar(e, { scalar = 3 }))
  end
  for _, dt in ipairs { "float32", "float64" } do
    local tol = dt == "float32" and 1e-4 or 1e-11
    for _, rs in ipairs { false, true } do
      for _, tp in ipairs { false, true } do
        for _, lower in ipairs { true, false } do
          local o = { rightside = rs, transpose = tp, lower = lower, alpha = 0.5 }
          it(string.format("solves op(A) X = alpha B (%s, rightside=%s, transpose=%s, lower=%s)",
            dt, rs, tp, lower), function()
            local a = tri_a(dt, 90)
            local b = H.rand(mx, rs and { 2, 3, 4 } or { 2, 4, 3 }, { seed = 91, dtype = dt })
            local x = nd.linalg_trsm(a, b, o)
            assert.is_true(H.same_shape(x, b:shape()))
            assert.is_true(H.maxdiff(x, nd._ref.linalg_trsm(a, b, o)) < tol)
            -- identity: only A's triangle is used, so multiply by that triangle back
            local t = nd.linalg_maketrian(nd.linalg_extracttrian(a, { lower = lower }),
              { lower = lower })
            local back = rs and nd.linalg_gemm2(x, t, { transpose_b = tp, alpha = 2 })
              or nd.linalg_gemm2(t, x, { transpose_a = tp, alpha = 2 })
            assert.is_true(H.maxdiff(back, b) < tol * 10)
            -- the other triangle is not read
            assert.is_true(H.maxdiff(nd.linalg_trsm(t, b, o), x) < tol)
          end)
        end
      end
    end
  end

  it("names the op and the mismatch in errors; found as _linalg_trsm", function()
    local a, b = nd.ones { 3, 3 }, nd.ones { 2, 3 }
    H.assert_error(function(mark) mark() nd.linalg_trsm(a, b) end, FILE, "linalg_trsm", "rows")
    H.assert_error(function(mark) mark() nd.linalg_trsm(b, b) end, FILE, "linalg_trsm", "square")
    H.assert_error(function(mark) mark() nd.linalg_trsm(nd.ones { 2, 3, 3 }, nd.ones { 3, 3, 3 }) end,
      FILE, "linalg_trsm", "batch dims")
    assert.is_true(require("mx.core.lib").C.mx_op_find("_linalg_trsm") >= 0)
  end)
end)

describe("linalg_potri", function()
  for _, dt in ipairs { "float32", "float64" } do
    it("gives (L L^T)^-1: potri(potrf(A)) = inverse(A), symmetric, as the reference (" .. dt .. ")",
      function()
        local tol = dt == "float32" and 1e-4 or 1e-11
        local x = H.rand(mx, { 2, 4, 5 }, { seed = 95, dtype = dt })
        local e = nd.linalg_makediag(nd.ones({ 2, 4 }, { dtype = dt }), { offset = 0 })
        local a = nd.linalg_gemm(x, x, nd.mul_scalar(e, { scalar = 2 }), { transpose_b = true })
        local L = nd.linalg_potrf(a)
        local y = nd.linalg_potri(L)
        assert.is_true(H.maxdiff(y, nd.linalg_inverse(a)) < tol * 10)
        assert.is_true(H.maxdiff(y, nd.swapaxes(y, { dim1 = 2, dim2 = 3 })) == 0)
        assert.is_true(H.maxdiff(y, nd._ref.linalg_potri(L)) < tol)
        -- L's upper triangle is not read
        assert.is_true(H.maxdiff(nd.linalg_potri(nd.add(L, nd.swapaxes(L, { dim1 = 2, dim2 = 3 }))),
          nd.linalg_potri(nd.add(L, nd.linalg_makediag(nd.linalg_extractdiag(L))))) < tol)
      end)
  end

  it("names the op and the batch element of a zero diagonal; found as _linalg_potri", function()
    local L = nd.array({ { { 1, 0 }, { 2, 3 } }, { { 1, 0 }, { 2, 0 } } }, { dtype = "float64" })
    H.assert_error(function(mark) mark() nd.linalg_potri(L) end, FILE, "linalg_potri", "matrix 1")
    H.assert_error(function(mark) mark() nd._ref.linalg_potri(L) end, FILE, "linalg_potri", "matrix 1")
    H.assert_error(function(mark) mark() nd.linalg_potri(nd.ones { 2, 3 }) end, FILE,
      "linalg_potri", "square")
    assert.is_true(require("mx.core.lib").C.mx_op_find("_linalg_potri") >= 0)
    -- NaN in the triangle: a NaN matrix (as inverse); NaN above it is not read
    local n = nd.linalg_potri(nd.array({ { 1, 0 }, { 0 / 0, 2 } }, { dtype = "float64" })):tolist()
    for i = 1, 4 do assert.is_true(n[i] ~= n[i]) end
    assert.are.same({ 1, 0, 0, 0.25 },
      nd.linalg_potri(nd.array({ { 1, 0 / 0 }, { 0, 2 } }, { dtype = "float64" })):tolist())
  end)
end)

---------------------------------------------------------------- trmm, gelqf, syevd
local function tr_last(x) return nd.swapaxes(x, { dim1 = -1, dim2 = -2 }) end

describe("linalg_trmm", function()
  for _, dt in ipairs { "float32", "float64" } do
    local tol = dt == "float32" and 1e-4 or 1e-11
    for _, rs in ipairs { false, true } do
      for _, tp in ipairs { false, true } do
        for _, lower in ipairs { true, false } do
          local o = { rightside = rs, transpose = tp, lower = lower, alpha = -1.5 }
          it(string.format("is alpha op(tri(A)) B (%s, rightside=%s, transpose=%s, lower=%s)",
            dt, rs, tp, lower), function()
            local a = H.rand(mx, { 2, 4, 4 }, { seed = 120, dtype = dt })
            local b = H.rand(mx, rs and { 2, 3, 4 } or { 2, 4, 3 }, { seed = 121, dtype = dt })
            local y = nd.linalg_trmm(a, b, o)
            assert.is_true(H.same_shape(y, b:shape()))
            assert.is_true(H.maxdiff(y, nd._ref.linalg_trmm(a, b, o)) < tol)
            local t = nd.linalg_maketrian(nd.linalg_extracttrian(a, { lower = lower }),
              { lower = lower })
            local want = rs and nd.linalg_gemm2(b, t, { transpose_b = tp, alpha = -1.5 })
              or nd.linalg_gemm2(t, b, { transpose_a = tp, alpha = -1.5 })
            assert.is_true(H.maxdiff(y, want) < tol)
            -- trsm with 1 / alpha undoes it (t + 3I: a diagonal far from 0)
            local t3 = nd.add(t, nd.linalg_makediag(nd.full({ 2, 4 }, 3, { dtype = dt })))
            local oi = { rightside = rs, transpose = tp, lower = lower, alpha = -1 / 1.5 }
            local back = nd.linalg_trsm(t3, nd.linalg_trmm(t3, b, o), oi)
            assert.is_true(H.maxdiff(back, b) < tol * 10)
          end)
        end
      end
    end
  end

  it("names the op and the mismatch in errors; found as _linalg_trmm", function()
    local a, b = nd.ones { 3, 3 }, nd.ones { 2, 3 }
    H.assert_error(function(mark) mark() nd.linalg_trmm(a, b) end, FILE, "linalg_trmm", "rows")
    H.assert_error(function(mark) mark() nd.linalg_trmm(a, nd.ones { 3, 2 }, { rightside = true }) end,
      FILE, "linalg_trmm", "columns")
    H.assert_error(function(mark) mark() nd.linalg_trmm(b, b) end, FILE, "linalg_trmm", "square")
    H.assert_error(function(mark) mark() nd.linalg_trmm(nd.ones { 2, 3, 3 }, nd.ones { 3, 3, 3 }) end,
      FILE, "linalg_trmm", "batch dims")
    assert.is_true(require("mx.core.lib").C.mx_op_find("_linalg_trmm") >= 0)
  end)
end)

describe("linalg_gelqf", function()
  it("gives MXNet's documented Q and L for [[1, 2, 3], [4, 5, 6]]", function()
    for _, ns in ipairs { nd, nd._ref } do
      local q, l = ns.linalg_gelqf(nd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float64" }))
      assert.is_true(H.maxdiff(q, { -0.26726124, -0.53452248, -0.80178373,
        0.87287156, 0.21821789, -0.43643578 }) < 1e-7)
      assert.is_true(H.maxdiff(l, { -3.74165739, 0, -8.55235974, 1.96396101 }) < 1e-7)
    end
  end)
  for _, dt in ipairs { "float32", "float64" } do
    it("factors A = L Q with orthonormal rows of Q, L lower, as the reference (" .. dt .. ")", function()
      local tol = dt == "float32" and 1e-5 or 1e-12
      local a = H.rand(mx, { 2, 3, 5 }, { seed = 122, dtype = dt })
      local q, l = nd.linalg_gelqf(a)
      assert.is_true(H.same_shape(q, { 2, 3, 5 }) and H.same_shape(l, { 2, 3, 3 }))
      assert.are.equal(dt, q:dtype())
      assert.is_true(H.maxdiff(nd.linalg_gemm2(l, q), a) < tol * 10)
      local e = nd.linalg_makediag(nd.ones({ 2, 3 }, { dtype = dt }))
      assert.is_true(H.maxdiff(nd.linalg_gemm2(q, q, { transpose_b = true }), e) < tol * 10)
      assert.is_true(H.maxdiff(nd.linalg_extracttrian(l, { offset = 1 }), nd.zeros { 2, 3 }) == 0)
      local rq, rl = nd._ref.linalg_gelqf(a)
      assert.is_true(H.maxdiff(q, rq) < tol * 10 and H.maxdiff(l, rl) < tol * 10)
    end)
  end
  it("takes square and single-row matrices; rejects m > n naming the shape", function()
    local q, l = nd.linalg_gelqf(nd.array({ { 3, 4 } }, { dtype = "float64" }))
    assert.is_true(H.maxdiff(q, { -0.6, -0.8 }) < 1e-12 and H.maxdiff(l, { -5 }) < 1e-12)
    local a = H.rand(mx, { 4, 4 }, { seed = 123 })
    q, l = nd.linalg_gelqf(a)
    assert.is_true(H.maxdiff(nd.linalg_gemm2(l, q), a) < 1e-12)
    H.assert_error(function(mark) mark() nd.linalg_gelqf(nd.ones { 3, 2 }) end, FILE,
      "linalg_gelqf", "m <= n")
    H.assert_error(function(mark) mark() nd.linalg_gelqf(nd.ones { 3 }) end, FILE,
      "linalg_gelqf", "2 dims")
    assert.is_true(require("mx.core.lib").C.mx_op_find("_linalg_gelqf") >= 0)
  end)
end)

describe("linalg_syevd", function()
  it("gives MXNet's documented U and lambda for [[1, 2], [2, 4]]", function()
    for _, ns in ipairs { nd, nd._ref } do
      local u, lam = ns.linalg_syevd(nd.array({ { 1, 2 }, { 2, 4 } }, { dtype = "float64" }))
      assert.is_true(H.maxdiff(u, { 0.89442719, -0.4472136, 0.4472136, 0.89442719 }) < 1e-7)
      assert.is_true(H.maxdiff(lam, { 0, 5 }) < 1e-12)
      assert.is_true(H.same_shape(lam, { 2 }))
    end
  end)
  for _, dt in ipairs { "float32", "float64" } do
    it("A = U^T diag(lambda) U, rows orthonormal, ascending, MXNet's signs, as the reference ("
      .. dt .. ")", function()
      local tol = dt == "float32" and 1e-5 or 1e-12
      local x = H.rand(mx, { 2, 4, 4 }, { seed = 124, dtype = dt })
      local a = nd.add(x, tr_last(x))
      local u, lam = nd.linalg_syevd(a)
      assert.is_true(H.same_shape(u, { 2, 4, 4 }) and H.same_shape(lam, { 2, 4 }))
      local back = nd.linalg_gemm2(u, nd.linalg_gemm2(nd.linalg_makediag(lam), u), { transpose_a = true })
      assert.is_true(H.maxdiff(back, a) < tol * 10)
      local e = nd.linalg_makediag(nd.ones({ 2, 4 }, { dtype = dt }))
      assert.is_true(H.maxdiff(nd.linalg_gemm2(u, u, { transpose_b = true }), e) < tol * 10)
      local lv, uv = lam:tolist(), u:tolist()
      for b = 0, 1 do
        for i = 1, 3 do assert.is_true(lv[b * 4 + i] <= lv[b * 4 + i + 1]) end
        for r = 0, 3 do
          local best, k = -1, 0
          for j = 1, 4 do
            local v = math.abs(uv[b * 16 + r * 4 + j])
            if v > best then best, k = v, j end
          end
          assert.is_true(uv[b * 16 + r * 4 + k] > 0)
        end
      end
      local ru, rl = nd._ref.linalg_syevd(a)
      assert.is_true(H.maxdiff(u, ru) < tol * 100 and H.maxdiff(lam, rl) < tol * 10)
      -- only the lower triangle is read
      local lo = nd.linalg_maketrian(nd.linalg_extracttrian(a))
      local u2, l2 = nd.linalg_syevd(lo)
      assert.is_true(H.maxdiff(u2, u) < tol * 10 and H.maxdiff(l2, lam) < tol * 10)
    end)
  end
  it("gives NaN outputs for NaN in the triangle; names the op in errors", function()
    for _, ns in ipairs { nd, nd._ref } do
      local u, lam = ns.linalg_syevd(nd.array({ { 1, 0 }, { 0 / 0, 2 } }, { dtype = "float64" }))
      local uv, lv = u:tolist(), lam:tolist()
      for i = 1, 4 do assert.is_true(uv[i] ~= uv[i]) end
      for i = 1, 2 do assert.is_true(lv[i] ~= lv[i]) end
    end
    H.assert_error(function(mark) mark() nd.linalg_syevd(nd.ones { 2, 3 }) end, FILE,
      "linalg_syevd", "square")
    H.assert_error(function(mark) mark() nd.linalg_syevd_backward(nd.ones { 2, 2 }, nd.ones { 3 },
      nd.ones { 2, 2 }, nd.ones { 2 }) end, FILE, "linalg_syevd_backward", "lambda")
    assert.is_true(require("mx.core.lib").C.mx_op_find("_linalg_syevd") >= 0)
  end)
end)

describe("linalg_syevd / linalg_gelqf on degenerate inputs", function()
  it("repeated eigenvalues and rank-deficient A: a valid answer, the same on both kernels", function()
    local a = nd.array({ { 2, 0, 0 }, { 0, 2, 0 }, { 0, 0, 3 } }, { dtype = "float64" })
    local u, lam = nd.linalg_syevd(a)
    local ru, rl = nd._ref.linalg_syevd(a)
    assert.is_true(H.maxdiff(u, ru) == 0 and H.maxdiff(lam, rl) == 0)
    assert.is_true(H.maxdiff(lam, { 2, 2, 3 }) < 1e-14)
    local back = nd.linalg_gemm2(u, nd.linalg_gemm2(nd.linalg_makediag(lam), u), { transpose_a = true })
    assert.is_true(H.maxdiff(back, a) < 1e-14)
    local r = nd.full({ 2, 3 }, -1e9, { dtype = "float64" }) -- rank 1
    local q, l = nd.linalg_gelqf(r)
    local rq, rl2 = nd._ref.linalg_gelqf(r)
    assert.is_true(H.maxdiff(q, rq) == 0 and H.maxdiff(l, rl2) == 0)
    assert.is_true(H.maxdiff(nd.linalg_gemm2(l, q), r) < 1e-5)
    assert.is_true(H.maxdiff(nd.linalg_gemm2(q, q, { transpose_b = true }), { 1, 0, 0, 1 }) < 1e-12)
  end)
end)
