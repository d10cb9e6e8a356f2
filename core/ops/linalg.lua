-- core/ops/linalg.lua — the matrix products: the op table's linalg family
-- (kernels/*/linalg.c and spec/linalg_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- linalg
-- Shapes of an NDArray operand (eager F); the formulas reshape N-d operands to the
-- matrices the kernel sees and reshape the gradients back with reshape_like.
local function mat(F, t, rows, cols) return F.reshape(t, { shape = { rows, cols } }) end
local function prod(s, i, j)
  local n = 1
  for k = i, j do n = n * s[k] end
  return n
end
-- dot on the stored matrices A2 (M, K) or (K, M), B2 (K, N) or (N, K), G2 (M, N); need
-- (autograd's): which operands take a gradient (a csr input's would densify the weight)
local ALL = { true, true }
local function dot_grads(F, A2, B2, G2, ta, tb, name, need)
  need = need or ALL
  local dA, dB
  local a, b = need[1] ~= false, need[2] ~= false
  if not ta and not tb then
    dA = a and F[name](G2, B2, { transpose_b = true })
    dB = b and F[name](A2, G2, { transpose_a = true })
  elseif ta and not tb then
    dA = a and F[name](B2, G2, { transpose_b = true }); dB = b and F[name](A2, G2)
  elseif tb and not ta then
    dA = a and F[name](G2, B2); dB = b and F[name](G2, A2, { transpose_a = true })
  else
    dA = a and F[name](B2, G2, { transpose_a = true, transpose_b = true })
    dB = b and F[name](G2, A2, { transpose_a = true, transpose_b = true })
  end
  return dA or nil, dB or nil
end
local TRANSPOSE_FLAGS = { { "transpose_a", "bool", false, doc = "use lhs transposed" },
  { "transpose_b", "bool", false, doc = "use rhs transposed" } }

op { name = "dot", family = "linalg", amp = "target", inputs = { "lhs", "rhs" }, infer = "dot",
  cpu = { supports = true },
  dtypes = "numeric", params = TRANSPOSE_FLAGS,
  grad = function(F, x, y, g, p, need)
    p = p or {}
    local A, B, G = x[1], x[2], g[1]
    local ta, tb = p.transpose_a or false, p.transpose_b or false
    -- a row_sparse head (what dot(csr^T, .) passes back through a chain of products)
    -- goes dense: the products below have no kernels for it
    if G.stype and G:stype() ~= "default" then G = F.cast_storage(G) end
    if A:ndim() == 2 and B:ndim() == 2 then
      local dA, dB = dot_grads(F, A, B, G, ta, tb, "dot", need)
      return { dA, dB }
    end
    local sa, sb = A:shape(), B:shape()
    local K = ta and sa[1] or sa[#sa]
    local M, N = prod(sa, 1, #sa) / K, prod(sb, 1, #sb) / K
    local A2 = ta and mat(F, A, K, M) or mat(F, A, M, K)
    local B2 = tb and mat(F, B, N, K) or mat(F, B, K, N)
    local dA, dB = dot_grads(F, A2, B2, mat(F, G, M, N), ta, tb, "dot")
    return { F.reshape_like(dA, A), F.reshape_like(dB, B) }
  end,
  doc = "MXNet's dot: contracts lhs's last axis (first with transpose_a) with rhs's first "
    .. "axis (last with transpose_b); N-d operands act as matrices of their other dims. "
    .. "Two 1-d operands give a (1,) tensor." }
op { name = "batch_dot", family = "linalg", amp = "target", inputs = { "lhs", "rhs" }, infer = "batch_dot",
  cpu = { supports = true }, dtypes = "numeric", params = TRANSPOSE_FLAGS,
  grad = function(F, x, y, g, p)
    p = p or {}
    local dA, dB = dot_grads(F, x[1], x[2], g[1], p.transpose_a or false, p.transpose_b or false,
      "batch_dot")
    return { dA, dB }
  end,
  doc = "Batched matrix product: (B..., M, K) x (B..., K, N) -> (B..., M, N); the flags "
    .. "transpose the last two axes of an operand. Batch dims must be equal." }
op { name = "matmul", family = "linalg", amp = "target", inputs = { "lhs", "rhs" }, infer = "matmul",
  cpu = { supports = true },
  dtypes = "numeric",
  grad = function(F, x, y, g)
    local A, B, G = x[1], x[2], g[1]
    local a1, b1 = A:ndim() == 1, B:ndim() == 1
    local A2 = a1 and F.expand_dims(A, { axis = 1 }) or A
    local B2 = b1 and F.expand_dims(B, { axis = 2 }) or B
    local G2 = G
    if a1 and b1 then G2 = F.reshape(G, { shape = { 1, 1 } })
    elseif a1 then G2 = F.expand_dims(G, { axis = -2 })
    elseif b1 then G2 = F.expand_dims(G, { axis = -1 }) end
    local dA = F.reduce_to(F.matmul(G2, F.swapaxes(B2, { dim1 = -1, dim2 = -2 })), A2)
    local dB = F.reduce_to(F.matmul(F.swapaxes(A2, { dim1 = -1, dim2 = -2 }), G2), B2)
    if a1 then dA = F.reshape_like(dA, A) end
    if b1 then dB = F.reshape_like(dB, B) end
    return { dA, dB }
  end,
  doc = "NumPy's matmul: (..., M, K) x (..., K, N) -> (..., M, N) with broadcast batch dims; "
    .. "a 1-d operand gains a unit axis that the result drops again." }
op { name = "fully_connected", family = "linalg", amp = "target", inputs = { "data", "weight", "bias?" },
  infer = "fully_connected", partial = true, cpu = { supports = true },
  dnnl = { supports = true }, dtypes = "numeric",
  params = { { "num_hidden", "int", nil, doc = "output units (checked against weight)" },
    { "no_bias", "bool", false, doc = "no bias input" },
    { "flatten", "bool", true, doc = "collapse all but the first axis of data" },
    { "act_type", "enum", "none", values = { "none", "relu", "gelu", "gelu_tanh" },
      doc = "activation applied in the same pass: relu (Dense's activation='relu'), gelu "
        .. "(erf form) or gelu_tanh (gelu's tanh approximation)" } },
  grad = function(F, x, y, g, p, need, into)
    local X, W, G = x[1], x[2], g[1]
    -- relu(z) > 0 exactly where z > 0: the output masks the gradient
    if p.act_type == "relu" then G = F.relu_backward(G, y[1]) end
    if p.act_type == "gelu" or p.act_type == "gelu_tanh" then
      -- gelu's slope needs its input: the product again, without the activation
      local q = { num_hidden = p.num_hidden, no_bias = p.no_bias, flatten = p.flatten }
      local z = p.no_bias and F.fully_connected(X, W, q) or F.fully_connected(X, W, x[3], q)
      G = F.gelu_backward(G, z, { approximation = p.act_type == "gelu" and "erf" or "tanh" })
    end
    local X2, G2
    -- a 2-d eager input is already the matrix: no reshape copies (Dense's case)
    local plain = type(X.ndim) == "function" and X:ndim() == 2
    if plain then
      X2, G2 = X, G
    elseif p.flatten == false then
      X2 = F.reshape(X, { shape = { -1, 0 }, reverse = true })
      G2 = F.reshape(G, { shape = { -1, 0 }, reverse = true })
    else
      X2, G2 = F.flatten(X), G
    end
    local dX -- the first layer's data gradient is as costly as the weight's: skip it
    if not need or need[1] then
      dX = F.dot(G2, W)
      if not plain then dX = F.reshape_like(dX, X) end
    end
    -- into (eager backward only): write the parameters' gradients straight into
    -- their buffers, sparing autograd a copy of each
    local dW, db = into and into[2], into and into[3]
    local r = { dX, F.dot(G2, X2, { transpose_a = true, out = dW }) }
    if not p.no_bias then r[3] = F.sum(G2, { axis = 1, out = db }) end
    return r
  end,
  doc = "MXNet's FullyConnected: out = data . weight^T + bias with weight (num_hidden, "
    .. "in_units). flatten=true reshapes data to (batch, -1) first; flatten=false applies "
    .. "to the last axis. Inputs: data, weight[, bias] (no bias with no_bias=true). "
    .. "act_type='relu' (or 'gelu', 'gelu_tanh') applies the activation to the result in "
    .. "the same pass (an extension: MXNet fuses it in its oneDNN subgraph backend)." }

---------------------------------------------------------------- linalg_* (MXNet 1.9's la_op)
-- Batched over the leading dims: every op works on the trailing two axes. f32/f64 only
-- (LAPACK's types, as MXNet). The cpu kernels call OpenBLAS's BLAS/LAPACK.
local LA_DT = { 0, 1 }
-- the gemm2 product's gradients, alpha applied to each
local function gemm2_grads(F, A, B, G, ta, tb, alpha)
  local dA, dB = dot_grads(F, A, B, G, ta, tb, "linalg_gemm2")
  if alpha ~= 1 then
    dA, dB = F.mul_scalar(dA, { scalar = alpha }), F.mul_scalar(dB, { scalar = alpha })
  end
  return dA, dB
end
-- A^-T of the inverse Y (batched): swap the trailing axes
local function tr(F, Y) return F.swapaxes(Y, { dim1 = -1, dim2 = -2 }) end
-- a per-matrix value v (batch dims, (1,) for one matrix) as (..., 1, 1) beside A
local function per_matrix(F, v, A)
  if A:ndim() == 2 then return F.reshape(v, { shape = { 1, 1 } }) end
  return F.expand_dims(F.expand_dims(v, { axis = -1 }), { axis = -1 })
end
local GEMM_FLAGS = { { "transpose_a", "bool", false, doc = "use A transposed (last two axes)" },
  { "transpose_b", "bool", false, doc = "use B transposed (last two axes)" },
  { "alpha", "float", 1, doc = "scale of the product" } }
op { name = "linalg_gemm2", family = "linalg", inputs = { "A", "B" }, infer = "linalg_gemm2",
  cpu = true, dtypes = LA_DT, params = GEMM_FLAGS,
  grad = function(F, x, y, g, p)
    local dA, dB = gemm2_grads(F, x[1], x[2], g[1], p.transpose_a or false,
      p.transpose_b or false, p.alpha or 1)
    return { dA, dB }
  end,
  doc = "MXNet's linalg.gemm2: out = alpha * op(A) . op(B) on the trailing two axes, "
    .. "batched over equal leading dims; op transposes with transpose_a/transpose_b." }
op { name = "linalg_gemm", family = "linalg", inputs = { "A", "B", "C" }, infer = "linalg_gemm",
  cpu = true, dtypes = LA_DT,
  params = { GEMM_FLAGS[1], GEMM_FLAGS[2], GEMM_FLAGS[3],
    { "beta", "float", 1, doc = "scale of C" } },
  grad = function(F, x, y, g, p)
    local dA, dB = gemm2_grads(F, x[1], x[2], g[1], p.transpose_a or false,
      p.transpose_b or false, p.alpha or 1)
    local beta = p.beta or 1
    return { dA, dB, beta == 1 and g[1] or F.mul_scalar(g[1], { scalar = beta }) }
  end,
  doc = "MXNet's linalg.gemm: out = alpha * op(A) . op(B) + beta * C (C of the result's "
    .. "shape), batched over the leading dims." }
op { name = "linalg_potrf", family = "linalg", inputs = { "A" }, infer = "linalg_square",
  cpu = true, dtypes = LA_DT,
  grad = function(F, x, y, g) return { F.linalg_potrf_backward(y[1], g[1]) } end,
  doc = "MXNet's linalg.potrf: the Cholesky factor L (lower, A = L . L^T) of symmetric "
    .. "positive-definite matrices; only A's lower triangle is read, L's upper is zero. A "
    .. "matrix that is not positive definite is an error naming its batch element." }
op { name = "linalg_potrf_backward", family = "linalg", inputs = { "L", "ograd" },
  infer = "linalg_potrf_backward", dtypes = LA_DT, nondiff = true,
  doc = "potrf's gradient (MXNet's formula): 0.5 * L^-T . copyLTU(L^T . dL) . L^-1, "
    .. "symmetric." }
op { name = "linalg_inverse", family = "linalg", inputs = { "A" }, infer = "linalg_square",
  cpu = true, dtypes = LA_DT,
  grad = function(F, x, y, g)
    local Y = y[1]
    return { F.linalg_gemm2(F.linalg_gemm2(Y, g[1], { transpose_a = true }), Y,
      { transpose_b = true, alpha = -1 }) }
  end,
  doc = "MXNet's linalg.inverse: the inverses of square matrices (LU with partial "
    .. "pivoting); a singular matrix is an error naming its batch element." }
op { name = "linalg_det", family = "linalg", inputs = { "A" }, infer = "linalg_det", cpu = true,
  dtypes = LA_DT,
  grad = function(F, x, y, g)
    local A = x[1]
    return { F.mul(per_matrix(F, F.mul(g[1], y[1]), A), tr(F, F.linalg_inverse(A))) }
  end,
  doc = "MXNet's linalg.det: determinants of square matrices, shape A's leading dims "
    .. "((1,) for one matrix). The gradient det * A^-T needs an invertible A." }
op { name = "linalg_slogdet", family = "linalg", inputs = { "A" }, outputs = { "sign", "logabsdet" },
  infer = "linalg_det", cpu = true, dtypes = LA_DT,
  grad = function(F, x, y, g)
    local A = x[1]
    return { F.mul(per_matrix(F, g[2], A), tr(F, F.linalg_inverse(A))) }
  end,
  doc = "MXNet's linalg.slogdet: sign and log|det| of square matrices (sign 0 and "
    .. "logabsdet -inf for a singular one); the gradient of logabsdet is A^-T." }

op { name = "linalg_syrk", family = "linalg", inputs = { "A" }, infer = "linalg_syrk", cpu = true,
  dtypes = LA_DT,
  params = { { "transpose", "bool", false, doc = "A^T . A instead of A . A^T" },
    { "alpha", "float", 1, doc = "scale of the product" } },
  grad = function(F, x, y, g, p)
    local S = F.add(g[1], tr(F, g[1])) -- the output is symmetric: both halves count
    local o = { alpha = p.alpha or 1 }
    if p.transpose then return { F.linalg_gemm2(x[1], S, o) } end
    return { F.linalg_gemm2(S, x[1], o) }
  end,
  doc = "MXNet's linalg.syrk: alpha * A . A^T ((..., m, m) from (..., m, n)), or alpha * "
    .. "A^T . A with transpose=true." }
local OFFSET = { { "offset", "int", 0, doc = "the diagonal: 0 main, > 0 above, < 0 below" } }
op { name = "linalg_extractdiag", family = "linalg", inputs = { "A" }, infer = "linalg_extractdiag",
  dtypes = LA_DT, params = OFFSET,
  grad = function(F, x, y, g, p) return { F.linalg_makediag(g[1], { offset = p.offset or 0 }) } end,
  doc = "MXNet's linalg.extractdiag: the offset diagonal of square matrices, (..., n, n) -> "
    .. "(..., n - |offset|)." }
op { name = "linalg_makediag", family = "linalg", inputs = { "A" }, infer = "linalg_makediag",
  dtypes = LA_DT, params = OFFSET,
  grad = function(F, x, y, g, p) return { F.linalg_extractdiag(g[1], { offset = p.offset or 0 }) } end,
  doc = "MXNet's linalg.makediag: square matrices with A's last axis on the offset "
    .. "diagonal and zeros elsewhere, (..., n) -> (..., n + |offset|, n + |offset|)." }

---------------------------------------------------------------- linalg_extracttrian / maketrian
-- The triangle: offset < 0 lower (below the main diagonal by |offset|), offset > 0 upper,
-- offset 0 lower or upper by `lower`; packed row by row, k (k + 1) / 2 values for
-- k = n - |offset|.
local TRIAN = { OFFSET[1], { "lower", "bool", true, doc = "the lower triangle (offset 0 only)" } }
op { name = "linalg_extracttrian", family = "linalg", inputs = { "A" },
  infer = "linalg_extracttrian", dtypes = LA_DT, params = TRIAN,
  grad = function(F, x, y, g, p)
    return { F.linalg_maketrian(g[1], { offset = p.offset or 0, lower = p.lower ~= false }) }
  end,
  doc = "MXNet's linalg.extracttrian: the offset triangle of square matrices packed row by "
    .. "row, (..., n, n) -> (..., k (k + 1) / 2) with k = n - |offset|; offset < 0 is a lower, "
    .. "offset > 0 an upper triangle, offset 0 the one `lower` names." }
op { name = "linalg_maketrian", family = "linalg", inputs = { "A" }, infer = "linalg_maketrian",
  dtypes = LA_DT, params = TRIAN,
  grad = function(F, x, y, g, p)
    return { F.linalg_extracttrian(g[1], { offset = p.offset or 0, lower = p.lower ~= false }) }
  end,
  doc = "MXNet's linalg.maketrian: extracttrian's inverse, (..., k (k + 1) / 2) -> (..., n, n) "
    .. "with n = k + |offset|, zeros outside the triangle." }

---------------------------------------------------------------- linalg_trsm
-- only A's `lower` triangle counts: its gradient is masked to it
local function trian_mask(F, X, lower)
  local o = { lower = lower }
  return F.linalg_maketrian(F.linalg_extracttrian(X, o), o)
end
op { name = "linalg_trsm", family = "linalg", inputs = { "A", "B" }, infer = "linalg_trsm",
  cpu = true, dtypes = LA_DT,
  params = { { "transpose", "bool", false, doc = "use A transposed" },
    { "rightside", "bool", false, doc = "solve X . op(A) = alpha B instead" },
    { "lower", "bool", true, doc = "A is lower triangular (else upper)" },
    { "alpha", "float", 1, doc = "scale of B" } },
  grad = function(F, x, y, g, p)
    -- MXNet's trsm_backward: dB = trsm(A, dX) with the other transpose, dA from dB and X
    local tp, rs, lower, alpha = p.transpose or false, p.rightside or false, p.lower ~= false,
      p.alpha or 1
    local dB = F.linalg_trsm(x[1], g[1], { transpose = not tp, rightside = rs, lower = lower,
      alpha = alpha })
    local dA
    if rs == tp then
      dA = F.linalg_gemm2(dB, y[1], { transpose_a = tp, transpose_b = not tp, alpha = -1 / alpha })
    else
      dA = F.linalg_gemm2(y[1], dB, { transpose_a = not tp, transpose_b = tp, alpha = -1 / alpha })
    end
    return { trian_mask(F, dA, lower), dB }
  end,
  doc = "MXNet's linalg.trsm: solves op(A) . X = alpha B (X . op(A) = alpha B with "
    .. "rightside) for triangular A, batched; only A's `lower` (or upper) triangle is read. "
    .. "A zero on A's diagonal gives Inf/NaN, as BLAS; the gradient needs alpha ~= 0." }

op { name = "linalg_potri", family = "linalg", inputs = { "A" }, infer = "linalg_square",
  cpu = true, dtypes = LA_DT,
  grad = function(F, x, y, g)
    -- out = (L L^T)^-1: dL = -tril(out . (G + G^T) . L^-T), the last factor by trsm
    local T = F.linalg_gemm2(y[1], F.add(g[1], tr(F, g[1])), { alpha = -1 })
    return { trian_mask(F, F.linalg_trsm(x[1], T, { rightside = true, transpose = true }), true) }
  end,
  doc = "MXNet's linalg.potri: (L . L^T)^-1 from a Cholesky factor L (lower, as potrf "
    .. "gives), the full symmetric inverse; only L's lower triangle is read. A zero on L's "
    .. "diagonal is an error naming its batch element." }

---------------------------------------------------------------- trmm, gelqf, syevd
op { name = "linalg_trmm", family = "linalg", inputs = { "A", "B" }, infer = "linalg_trmm",
  cpu = true, dtypes = LA_DT,
  params = { { "transpose", "bool", false, doc = "use A transposed" },
    { "rightside", "bool", false, doc = "alpha B . op(A) instead" },
    { "lower", "bool", true, doc = "A is lower triangular (else upper)" },
    { "alpha", "float", 1, doc = "scale of the product" } },
  grad = function(F, x, y, g, p, need)
    -- MXNet's trmm_backward: dA = alpha (dC . B^T or its variants) on A's triangle,
    -- dB = trmm(A, dC) with the other transpose
    local tp, rs, lower, alpha = p.transpose or false, p.rightside or false, p.lower ~= false,
      p.alpha or 1
    local dA, dB
    if not need or need[1] then
      if rs == tp then
        dA = F.linalg_gemm2(g[1], x[2], { transpose_a = tp, transpose_b = not tp, alpha = alpha })
      else
        dA = F.linalg_gemm2(x[2], g[1], { transpose_a = not tp, transpose_b = tp, alpha = alpha })
      end
      dA = trian_mask(F, dA, lower)
    end
    if not need or need[2] then
      dB = F.linalg_trmm(x[1], g[1], { transpose = not tp, rightside = rs, lower = lower,
        alpha = alpha })
    end
    return { dA, dB }
  end,
  doc = "MXNet's linalg.trmm: alpha op(A) . B (alpha B . op(A) with rightside) for "
    .. "triangular A, batched; only A's `lower` (or upper) triangle is read." }
-- copyLTU(M): M's lower triangle and diagonal, mirrored onto the upper triangle
local function copy_ltu(F, M)
  local lt = trian_mask(F, M, true)
  return F.sub(F.add(lt, tr(F, lt)), F.linalg_makediag(F.linalg_extractdiag(M)))
end
op { name = "linalg_gelqf", family = "linalg", inputs = { "A" }, outputs = { "Q", "L" },
  infer = "linalg_gelqf", cpu = true, dtypes = LA_DT,
  grad = function(F, x, y, g)
    -- MXNet's gelqf_backward: dA = L^-T (dQ + copyLTU(M) Q), M = L^T dL - dQ Q^T
    local Q, L, dQ, dL = y[1], y[2], g[1], g[2]
    local M = F.linalg_gemm(dQ, Q, F.linalg_gemm2(L, dL, { transpose_a = true }),
      { transpose_b = true, alpha = -1 })
    local R = F.linalg_gemm(copy_ltu(F, M), Q, dQ)
    return { F.linalg_trsm(L, R, { transpose = true }) }
  end,
  doc = "MXNet's linalg.gelqf: the LQ factorisation A = L . Q of (..., m, n) matrices with "
    .. "m <= n: Q (..., m, n) with orthonormal rows, L (..., m, m) lower triangular. Signs "
    .. "are LAPACK's Householder convention (L's diagonal may be negative), as MXNet. A "
    .. "rank-deficient A gives a singular L, whose gradient is Inf/NaN." }
op { name = "linalg_syevd", family = "linalg", inputs = { "A" }, outputs = { "U", "lambda" },
  infer = "linalg_syevd", cpu = true, dtypes = LA_DT,
  grad = function(F, x, y, g)
    return { F.linalg_syevd_backward(y[1], y[2], g[1], g[2]) }
  end,
  doc = "MXNet's linalg.syevd: the eigendecomposition A = U^T . diag(lambda) . U of "
    .. "symmetric (..., n, n) matrices (only A's lower triangle is read): the rows of U are "
    .. "the eigenvectors, lambda ascending, each row's largest-magnitude entry (the first on "
    .. "a tie) positive. The gradient assumes distinct eigenvalues (MXNet's formula: "
    .. "differences below 1e-100 (1e-30 f32) are clamped)." }
op { name = "linalg_syevd_backward", family = "linalg",
  inputs = { "U", "lambda", "dU", "dlambda" }, infer = "linalg_syevd_backward", dtypes = LA_DT,
  nondiff = true,
  doc = "syevd's gradient (MXNet's formula): U^T . Y . U with Y's diagonal dlambda and Y_ij "
    .. "= (X_ij - X_ji) / (2 (lambda_i - lambda_j)) off it, X = dU . U^T." }

---------------------------------------------------------------- attention
-- MXNet's interleaved attention matmuls (src/operator/contrib/transformer.cc), time-major:
-- qkv (T, N, 3*H*D) holds each head's query, key and value side by side ((T, N, H, 3, D));
-- q (Tq, N, H*D); kv (Tk, N, 2*H*D) as (Tk, N, H, 2, D); attention (N*H, Tq, Tk) with batch
-- index n*H + h. The qk ops scale by 1/sqrt(D). Their backward ops return one gradient per
-- forward input (zeros in the parts an op does not read).
local HEADS = { { "heads", "int", nil, doc = "the number of attention heads (required)" } }
local function att_op(name, inputs, doc, grad)
  op { name = name, family = "linalg", inputs = inputs, infer = name, cpu = true,
    dtypes = "f32f64", promote = { 1, 2 }, params = HEADS, grad = grad, doc = doc }
end
local function att_bwd_op(name, inputs, outputs, doc)
  op { name = name, family = "linalg", inputs = inputs, outputs = outputs, infer = name,
    cpu = true, dtypes = "f32f64", promote = { 1, 2, 3 }, params = HEADS, nondiff = true,
    doc = doc }
end
att_op("interleaved_matmul_selfatt_qk", { "queries_keys_values" },
  "MXNet's _contrib_interleaved_matmul_selfatt_qk: (N*heads, T, T) = q . k^T / sqrt(D) "
    .. "per (sequence, head) from the interleaved qkv (T, N, 3*heads*D).",
  function(F, x, y, g, p)
    return { F.interleaved_matmul_selfatt_qk_backward(g[1], x[1], { heads = p.heads }) }
  end)
att_op("interleaved_matmul_selfatt_valatt", { "queries_keys_values", "attention" },
  "MXNet's _contrib_interleaved_matmul_selfatt_valatt: (T, N, heads*D) = attention . v per "
    .. "(sequence, head), v read from the interleaved qkv (T, N, 3*heads*D).",
  function(F, x, y, g, p, need)
    if need and not need[1] and not need[2] then return {} end
    local dqkv, datt = F.interleaved_matmul_selfatt_valatt_backward(g[1], x[1], x[2],
      { heads = p.heads })
    return { dqkv, datt }
  end)
att_op("interleaved_matmul_encdec_qk", { "queries", "keys_values" },
  "MXNet's _contrib_interleaved_matmul_encdec_qk: (N*heads, Tq, Tk) = q . k^T / sqrt(D) from "
    .. "queries (Tq, N, heads*D) and the interleaved keys_values (Tk, N, 2*heads*D).",
  function(F, x, y, g, p, need)
    if need and not need[1] and not need[2] then return {} end
    local dq, dkv = F.interleaved_matmul_encdec_qk_backward(g[1], x[1], x[2], { heads = p.heads })
    return { dq, dkv }
  end)
att_op("interleaved_matmul_encdec_valatt", { "keys_values", "attention" },
  "MXNet's _contrib_interleaved_matmul_encdec_valatt: (Tq, N, heads*D) = attention . v with "
    .. "attention (N*heads, Tq, Tk) and v from keys_values (Tk, N, 2*heads*D).",
  function(F, x, y, g, p, need)
    if need and not need[1] and not need[2] then return {} end
    local dkv, datt = F.interleaved_matmul_encdec_valatt_backward(g[1], x[1], x[2],
      { heads = p.heads })
    return { dkv, datt }
  end)
att_bwd_op("interleaved_matmul_selfatt_qk_backward", { "ograd", "queries_keys_values" },
  { "dqkv" }, "interleaved_matmul_selfatt_qk's gradient: the query and key parts of dqkv "
    .. "(values' part zero).")
att_bwd_op("interleaved_matmul_selfatt_valatt_backward",
  { "ograd", "queries_keys_values", "attention" }, { "dqkv", "dattention" },
  "interleaved_matmul_selfatt_valatt's gradients: dqkv (values' part; queries' and keys' "
    .. "zero) and dattention = ograd . v^T.")
att_bwd_op("interleaved_matmul_encdec_qk_backward", { "ograd", "queries", "keys_values" },
  { "dqueries", "dkeys_values" }, "interleaved_matmul_encdec_qk's gradients: dqueries and "
    .. "the keys' part of dkeys_values (values' part zero).")
att_bwd_op("interleaved_matmul_encdec_valatt_backward", { "ograd", "keys_values", "attention" },
  { "dkeys_values", "dattention" }, "interleaved_matmul_encdec_valatt's gradients: the values' "
    .. "part of dkeys_values (keys' part zero) and dattention.")

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  dot = { "dot" }, batch_dot = { "batch_dot" }, fully_connected = { "FullyConnected" },
  linalg_gemm2 = { "_linalg_gemm2" }, linalg_gemm = { "_linalg_gemm" },
  linalg_potrf = { "_linalg_potrf" }, linalg_inverse = { "_linalg_inverse" },
  linalg_det = { "_linalg_det" }, linalg_slogdet = { "_linalg_slogdet" },
  linalg_syrk = { "_linalg_syrk" }, linalg_extractdiag = { "_linalg_extractdiag" },
  linalg_makediag = { "_linalg_makediag" },
  linalg_extracttrian = { "_linalg_extracttrian" }, linalg_maketrian = { "_linalg_maketrian" },
  linalg_trsm = { "_linalg_trsm" }, linalg_potri = { "_linalg_potri" },
  linalg_trmm = { "_linalg_trmm" }, linalg_gelqf = { "_linalg_gelqf" },
  linalg_syevd = { "_linalg_syevd" },
}
for _, n in ipairs({ "selfatt_qk", "selfatt_valatt", "encdec_qk", "encdec_valatt" }) do
  MXNET["interleaved_matmul_" .. n] = { "_contrib_interleaved_matmul_" .. n }
end

return ops, MXNET
