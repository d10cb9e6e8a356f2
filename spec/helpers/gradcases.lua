-- spec/helpers/gradcases.lua — gradient-check cases, one entry per differentiable op (the
-- nn-side ops' entries: spec/helpers/gradcases_nn.lua).
--
-- spec/gradcheck_spec.lua runs spec/helpers/gradcheck.lua over every op of the op table
-- that has a `grad` formula, and FAILS for an op with a grad but no entry here. Add the
-- entry in the same change as the op's grad formula.
--
-- Format:  cases.<opname> = { case, case, ... }   (or a single case table)
--   case.inputs  list, one entry per tensor input of the op. An entry is
--                  * a shape: {2, 3}; {} is a 0-d tensor. Random float64 values, uniform in
--                    the case's domain, differentiated.
--                  * a shape with options in its hash part:
--                      {2, 3, domain = {lo, hi}}   this input's own range
--                      {2, 3, nograd = true}       constant (not differentiated, not perturbed)
--                      {4, int = true, domain = {1, 3}, nograd = true}   integer values
--                        in [lo, hi] (index tensors: 1-based, docs/ops-notes.md)
--                      {2, 3, dtype = "int64"}     dtype of a nograd input (default float64)
--                  * a function(mx) returning an NDArray: a constant input (not differentiated).
--   case.opts    options table passed to the op: F.op(x1, x2, opts). Default none.
--   case.domain  {lo, hi}: default range of the random inputs (default {-1, 1}).
--   case.away    list of kink points: every sampled value stays >= 0.05 away from each
--                (abs, relu at 0, ...). `gap = true`: the values of all differentiated
--                inputs are drawn from disjoint cells, so no two are within 0.05 (max/min).
--   case.call    function(F, inputs, opts) -> output(s): how to call the op when
--                F.op(inputs..., opts) is not right (variadic list ops: F.concat(inputs, opts)).
--   case.noview  true: skip the automatic variant in which every differentiated input is
--                a leading-axis view x[2] of a bigger base (3, ...shape).
--   case.dtype   dtype of the differentiated inputs (default "float64"); float32 cases need
--                looser eps/atol/rtol.
--   case.eps, case.atol, case.rtol   overrides of 1e-6 / 1e-5 / 1e-3 (PyTorch's defaults).
--   case.name    label shown in the spec output (default: the input shapes).
--   case.surrogate  function(F, inputs, opts) -> the loss whose gradient the op's backward
--                returns whatever the head gradient (MXNet's loss heads: SoftmaxOutput...);
--                the numeric gradient is that of sum(surrogate) (gradcheck.lua).
-- Broadcasting is tested by listing cases with broadcastable shapes ({2,3} with {3}, {2,1}).
local cases = {}

local B2 = { -- the shapes every broadcasting binary op is checked at
  { inputs = { { 2, 3 }, { 2, 3 } } },
  { inputs = { { 2, 3 }, { 3 } } },
  { inputs = { { 2, 1, 3 }, { 4, 1 } } },
  { inputs = { {}, { 2, 2 } } },
}
local function with(base, extra)
  local out = {}
  for i, c in ipairs(base) do
    local t = {}
    for k, v in pairs(c) do t[k] = v end
    for k, v in pairs(extra or {}) do t[k] = v end
    out[i] = t
  end
  return out
end

---------------------------------------------------------------- autograd (ag)
-- stop_gradient is nondiff: no case.

---------------------------------------------------------------- elementwise (ew)
local U = { { inputs = { { 2, 3 } } }, { inputs = { {} } }, { inputs = { { 4 } } } }
cases.neg = U
cases.abs = with(U, { away = { 0 } })
cases.exp = U
cases.log = with(U, { domain = { 0.5, 2 } })
cases.sqrt = with(U, { domain = { 0.5, 2 } })
cases.square = U
cases.tanh = U
cases.sigmoid = U
cases.relu = with(U, { away = { 0 } })
-- (ograd, data): differentiable in ograd; data stays away from relu's kink
cases.relu_backward = { { inputs = { { 2, 3 }, { 2, 3 } }, away = { 0 } },
  { inputs = { { 2, 3 }, { 3 } }, away = { 0 } } }

cases.add = B2
cases.sub = B2
cases.mul = B2
cases.div = with(B2, { domain = { 0.5, 2 } })
cases.pow = with(B2, { domain = { 0.5, 2 } })
-- mod away from its jumps (lhs / rhs stays in (2.09, 2.8),
-- so floor(lhs / rhs) = 2 throughout); hypot/arctan2 away from the origin
local ML, MR = { 2.2, 2.8 }, { 1, 1.05 }
cases.mod = { { inputs = { { 2, 3, domain = ML }, { 2, 3, domain = MR } } },
  { inputs = { { 2, 3, domain = ML }, { 3, domain = MR } } },
  { inputs = { { 2, 1, 3, domain = ML }, { 4, 1, domain = MR } } },
  { inputs = { { domain = ML }, { 2, 2, domain = MR } } } }
cases.hypot = with(B2, { domain = { 0.5, 2 } })
cases.arctan2 = with(B2, { domain = { 0.5, 2 } })
cases.ldexp = B2
cases.mod_scalar = { { inputs = { { 2, 3 } }, opts = { scalar = 2.5 }, domain = { 0.1, 2.4 } },
  { inputs = { {} }, opts = { scalar = -2.5 }, domain = { 0.1, 2.4 } } }
cases.rmod_scalar = { { inputs = { { 2, 3 } }, opts = { scalar = 5 }, domain = { 2.1, 2.4 } } }
cases.hypot_scalar = { { inputs = { { 2, 3 } }, opts = { scalar = 1.5 } },
  { inputs = { {} }, opts = { scalar = 0.5 } } }
cases.smooth_l1 = { { inputs = { { 2, 3 } }, opts = { scalar = 2 }, domain = { -1, 1 },
  away = { -0.25, 0.25 } },
  { inputs = { { 4 } }, opts = { scalar = 0.5 }, domain = { -6, 6 }, away = { -4, 4 } } }
cases.add_n = {
  { inputs = { { 2, 3 } }, call = function(F, x, o) return F.add_n(x, o) end },
  { inputs = { { 2, 3 }, { 2, 3 }, { 2, 3 } }, call = function(F, x, o) return F.add_n(x, o) end },
}
cases.maximum = with(B2, { gap = true })
cases.minimum = with(B2, { gap = true })

local S = { { inputs = { { 2, 3 } }, opts = { scalar = 1.5 } },
  { inputs = { {} }, opts = { scalar = -0.5 } } }
cases.add_scalar = S
cases.sub_scalar = S
cases.rsub_scalar = S
cases.mul_scalar = S
cases.div_scalar = S
cases.rdiv_scalar = with(S, { domain = { 0.5, 2 } })
cases.pow_scalar = with(S, { domain = { 0.5, 2 } })
cases.rpow_scalar = { { inputs = { { 2, 3 } }, opts = { scalar = 1.5 } },
  { inputs = { {} }, opts = { scalar = 0.7 } } }
cases.maximum_scalar = with(S, { away = { 1.5, -0.5 } })
cases.minimum_scalar = with(S, { away = { 1.5, -0.5 } })
cases.sin = U
cases.cos = U
cases.log1p = with(U, { domain = { -0.5, 2 } })
cases.expm1 = U
cases.reciprocal = with(U, { domain = { 0.5, 2 } })
cases.rsqrt = with(U, { domain = { 0.5, 2 } })
cases.softrelu = with(U, { domain = { -3, 3 } })
cases.softsign = with(U, { away = { 0 } })
cases.erf = U
-- trigonometric, hyperbolic and special unary ops
cases.tan = U
cases.arcsin = with(U, { domain = { -0.8, 0.8 } })
cases.arccos = with(U, { domain = { -0.8, 0.8 } })
cases.arctan = with(U, { domain = { -3, 3 } })
cases.sinh = U
cases.cosh = U
cases.arcsinh = with(U, { domain = { -3, 3 } })
cases.arccosh = with(U, { domain = { 1.2, 4 } })
cases.arctanh = with(U, { domain = { -0.8, 0.8 } })
cases.degrees = U
cases.radians = U
cases.log2 = with(U, { domain = { 0.3, 3 } })
cases.log10 = with(U, { domain = { 0.3, 3 } })
cases.cbrt = with(U, { domain = { -3, 3 }, away = { 0 } })
cases.rcbrt = with(U, { domain = { -3, 3 }, away = { 0 } })
cases.clip = { { inputs = { { 2, 3 } }, opts = { a_min = -0.5, a_max = 0.5 }, away = { -0.5, 0.5 } },
  { inputs = { { 4 } }, opts = { a_min = 0 }, away = { 0 } },
  { inputs = { {} }, opts = { a_max = 0.2 }, away = { 0.2 } } }
cases.where = {
  { inputs = { function(mx) return mx.nd.array({ { 1, 0, 1 }, { 0, 0, 1 } }, { dtype = "float64" }) end,
    { 2, 3 }, { 2, 3 } } },
  -- a 1-D condition of x's first dim picks whole rows (MXNet's rule)
  { inputs = { function(mx) return mx.nd.array({ 1, 0 }, { dtype = "float64" }) end,
    { 2, 3 }, { 2, 3 } } },
  { inputs = { function(mx) return mx.nd.array({ 0, 1, 1 }, { dtype = "float64" }) end,
    { 3, 2, 2 }, { 3, 2, 2 } } },
}
cases.broadcast_to = { { inputs = { { 3, 1 } }, opts = { shape = { 2, 3, 4 } } },
  { inputs = { {} }, opts = { shape = { 2, 2 } } } }
cases.broadcast_like = {
  { inputs = { { 3, 1 }, { 2, 3, 4, nograd = true } } },
  { inputs = { { 3 }, { 3, 4, nograd = true } }, opts = { axis = 2 } },
}
cases.reduce_to = {
  { inputs = { { 2, 3 }, { 3, nograd = true } } },
  { inputs = { { 2, 3, 4 }, { 2, 1, 4, nograd = true } } },
  { inputs = { { 2, 3 }, { 2, nograd = true } }, opts = { axis = 2 } },
}
-- nansum/nanprod: in the "NaN elements" cases the op sees x with NaN put at
-- fixed places (where with a constant mask and a constant NaN tensor): those elements of
-- x must take a zero gradient, as the numeric one is
local function nan_mask(mx) return mx.nd.array({ { 1, 0, 1 }, { 0, 1, 1 } }, { dtype = "float64" }) end
local function nans(mx) return mx.nd.full({ 2, 3 }, 0 / 0, { dtype = "float64" }) end
local function nan_case(op, opts, domain)
  return { inputs = { { 2, 3 }, nan_mask, nans }, opts = opts, domain = domain, noview = true,
    name = "NaN among the elements",
    call = function(F, x, o) return F[op](F.where(x[2], x[1], x[3]), o) end }
end
cases.nansum = { { inputs = { { 2, 3, 4 } } }, { inputs = { { 2, 3, 4 } }, opts = { axis = 2 } },
  { inputs = { { 2, 3, 4 } }, opts = { axis = { 1, 3 }, keepdims = true } },
  nan_case("nansum", { axis = 2 }), nan_case("nansum", {}) }
cases.nanprod = { { inputs = { { 2, 3, 4 } }, domain = { 0.5, 1.5 } },
  { inputs = { { 2, 3, 4 } }, opts = { axis = 2 }, domain = { 0.5, 1.5 } },
  { inputs = { { 2, 3, 4 } }, opts = { axis = { 1, 3 }, keepdims = true }, domain = { 0.5, 1.5 } },
  nan_case("nanprod", { axis = 1 }, { 0.5, 1.5 }), nan_case("nanprod", {}, { 0.5, 1.5 }) }
cases.cumsum = { { inputs = { { 2, 3, 4 } } }, { inputs = { { 2, 3, 4 } }, opts = { axis = 2 } },
  { inputs = { { 5 } }, opts = { axis = -1 } }, { inputs = { {} } },
  { inputs = { { 2, 3 } }, opts = { axis = 1, dtype = "float32" }, dtype = "float32",
    eps = 1e-2, atol = 1e-2, rtol = 1e-2 } }
cases.moments = { { inputs = { { 2, 3, 4 } } }, { inputs = { { 2, 3, 4 } }, opts = { axes = 2 } },
  { inputs = { { 2, 3, 4 } }, opts = { axes = { 1, 3 }, keepdims = true } } }
local R = { { inputs = { { 2, 3, 4 } } }, { inputs = { { 2, 3, 4 } }, opts = { axis = 2 } },
  { inputs = { { 2, 3, 4 } }, opts = { axis = { 1, 3 }, keepdims = true } },
  { inputs = { { 3 } }, opts = { axis = -1 } }, { inputs = { {} } } }
cases.sum = R
-- index_copy (distinct positions: with repeats the last row wins and
-- new's gradient is undefined, as in MXNet)
cases.index_copy = {
  { inputs = { { 4, 3 }, function(mx) return mx.nd.array({ 3, 1 }) end, { 2, 3 } } },
  { inputs = { { 3 }, function(mx) return mx.nd.array({ 2 }, { dtype = "int64" }) end, { 1 } },
    name = "1-D, int64 index" },
}
cases.mean = R
cases.prod = with(R, { domain = { 0.5, 1.5 } })
cases.max = with(R, { gap = true })
cases.min = with(R, { gap = true })
cases.norm = { { inputs = { { 2, 3, 4 } }, domain = { 0.2, 1 } },
  { inputs = { { 2, 3, 4 } }, opts = { axis = 2 }, domain = { 0.2, 1 } },
  { inputs = { { 2, 3 } }, opts = { axis = 1, ord = 1, keepdims = true }, away = { 0 } } }
cases.softmax = { { inputs = { { 2, 5 } } }, { inputs = { { 3, 4 } }, opts = { axis = 1 } },
  { inputs = { { 2, 3, 4 } }, opts = { axis = 2, temperature = 2 } } }
-- softmin, erfinv, gamma, gammaln, nan_to_num (rint, fix: nondiff)
cases.softmin = cases.softmax
cases.erfinv = { { inputs = { { 2, 3 } }, domain = { -0.8, 0.8 } } }
cases.gamma = { { inputs = { { 2, 3 } }, domain = { 0.5, 4 } } }
cases.gammaln = { { inputs = { { 2, 3 } }, domain = { 0.5, 6 } } }
cases.nan_to_num = { { inputs = { { 2, 3 } } }, { inputs = { { 4 } }, opts = { nan = 1 } } }
cases.log_softmax = cases.softmax

---------------------------------------------------------------- linalg/shape/indexing (la)
cases.dot = {
  { inputs = { { 2, 3 }, { 3, 4 } } },
  { inputs = { { 3, 2 }, { 3, 4 } }, opts = { transpose_a = true } },
  { inputs = { { 2, 3 }, { 4, 3 } }, opts = { transpose_b = true } },
  { inputs = { { 3, 2 }, { 4, 3 } }, opts = { transpose_a = true, transpose_b = true } },
  { inputs = { { 2, 2, 3 }, { 3, 2 } }, name = "3-d lhs" },
  { inputs = { { 3 }, { 3 } }, name = "1-d . 1-d" },
  { inputs = { { 3 }, { 3, 2 } }, name = "1-d . 2-d" },
}
-- linalg_* (la): well-conditioned inputs: a random x plus a constant c * I (the second,
-- constant input), and for potrf the SPD x . x^T + 3 I built by linalg_gemm in the call
local function la_eye(n, c, batch)
  return function(mx)
    local e = mx.nd.mul_scalar(mx.nd.eye(n, { dtype = "float64" }), { scalar = c })
    if batch then e = mx.nd.broadcast_to(e, { shape = { batch, n, n } }) end
    return e
  end
end
local function la_shift(name)
  return function(F, x)
    local r1, r2 = F[name](F.add(x[1], x[2]))
    return r2 or r1
  end
end
cases.linalg_gemm2 = {
  { inputs = { { 2, 3 }, { 3, 4 } } },
  { inputs = { { 3, 2 }, { 4, 3 } }, opts = { transpose_a = true, transpose_b = true, alpha = 0.5 } },
  { inputs = { { 2, 2, 3 }, { 2, 3, 2 } }, opts = { alpha = -2 } },
  { inputs = { { 2, 3, 2 }, { 2, 3, 4 } }, opts = { transpose_a = true } },
}
cases.linalg_extracttrian = {
  { inputs = { { 3, 3 } } },
  { inputs = { { 2, 4, 4 } }, opts = { offset = 1 } },
  { inputs = { { 3, 3 } }, opts = { offset = -1 } },
  { inputs = { { 3, 3 } }, opts = { lower = false } },
}
cases.linalg_maketrian = {
  { inputs = { { 6 } } },
  { inputs = { { 2, 3 } }, opts = { offset = -1 } },
  { inputs = { { 6 } }, opts = { offset = 2, lower = false } },
}
-- trsm: A = x + 3I keeps the triangle's diagonal away from 0
local function la_trsm(F, x, o) return F.linalg_trsm(F.add(x[1], x[2]), x[3], o) end
cases.linalg_trsm = {
  { inputs = { { 3, 3 }, la_eye(3, 3), { 3, 2 } }, name = "x + 3I, lower", call = la_trsm },
  { inputs = { { 3, 3 }, la_eye(3, 3), { 3, 2 } }, name = "upper, transpose, alpha",
    opts = { lower = false, transpose = true, alpha = 0.5 }, call = la_trsm },
  { inputs = { { 2, 3, 3 }, la_eye(3, -3, 2), { 2, 2, 3 } }, name = "batched rightside",
    opts = { rightside = true }, call = la_trsm },
  { inputs = { { 3, 3 }, la_eye(3, 3), { 2, 3 } }, name = "rightside, upper, transpose",
    opts = { rightside = true, lower = false, transpose = true, alpha = -2 }, call = la_trsm },
}
cases.linalg_potri = {
  { inputs = { { 3, 3 }, la_eye(3, 3) }, name = "L = x + 3I (upper ignored)",
    call = la_shift("linalg_potri") },
  { inputs = { { 2, 3, 4 }, la_eye(3, 3, 2) }, name = "batched potri(potrf(x x^T + 3I))",
    call = function(F, x)
      return F.linalg_potri(F.linalg_potrf(F.linalg_gemm(x[1], x[1], x[2], { transpose_b = true })))
    end },
}
cases.linalg_gemm = {
  { inputs = { { 2, 3 }, { 3, 4 }, { 2, 4 } }, opts = { alpha = 0.5, beta = 2 } },
  { inputs = { { 2, 3, 2 }, { 2, 4, 3 }, { 2, 2, 4 } }, opts = { transpose_a = true, transpose_b = true } },
}
local function la_chol(F, x)
  return F.linalg_potrf(F.linalg_gemm(x[1], x[1], x[2], { transpose_b = true }))
end
cases.linalg_potrf = {
  { inputs = { { 3, 5 }, la_eye(3, 3) }, name = "x x^T + 3I (3x3)",
    call = function(F, x) return la_chol(F, x) end },
  { inputs = { { 2, 3, 4 }, la_eye(3, 3, 2) }, name = "batched x x^T + 3I (2x3x3)",
    call = function(F, x) return la_chol(F, x) end },
}
cases.linalg_inverse = {
  { inputs = { { 3, 3 }, la_eye(3, 3) }, name = "x + 3I", call = la_shift("linalg_inverse") },
  { inputs = { { 2, 3, 3 }, la_eye(3, -3) }, name = "batched x - 3I", call = la_shift("linalg_inverse") },
}
cases.linalg_det = {
  { inputs = { { 3, 3 }, la_eye(3, 3) }, name = "x + 3I", call = la_shift("linalg_det") },
  { inputs = { { 2, 3, 3 }, la_eye(3, -3) }, name = "batched x - 3I (negative det)",
    call = la_shift("linalg_det") },
}
cases.linalg_syrk = {
  { inputs = { { 2, 3 } }, opts = { alpha = 0.5 } },
  { inputs = { { 2, 3, 2 } }, opts = { transpose = true, alpha = -1 } },
}
cases.linalg_extractdiag = {
  { inputs = { { 3, 3 } } },
  { inputs = { { 2, 4, 4 } }, opts = { offset = -1 } },
  { inputs = { { 3, 3 } }, opts = { offset = 2 } },
}
cases.linalg_makediag = {
  { inputs = { { 3 } } },
  { inputs = { { 2, 3 } }, opts = { offset = 1 } },
  { inputs = { { 2 } }, opts = { offset = -2 } },
}
cases.linalg_slogdet = {
  { inputs = { { 3, 3 }, la_eye(3, 3) }, name = "logabsdet of x + 3I", call = la_shift("linalg_slogdet") },
  { inputs = { { 2, 3, 3 }, la_eye(3, -3) }, name = "logabsdet of batched x - 3I",
    call = la_shift("linalg_slogdet") },
}
cases.batch_dot = {
  { inputs = { { 2, 2, 3 }, { 2, 3, 4 } } },
  { inputs = { { 2, 3, 2 }, { 2, 4, 3 } }, opts = { transpose_a = true, transpose_b = true } },
}
cases.matmul = {
  { inputs = { { 2, 3 }, { 3, 2 } } },
  { inputs = { { 2, 2, 3 }, { 3, 4 } }, name = "broadcast rhs" },
  { inputs = { { 2, 1, 2, 3 }, { 3, 3, 2 } }, name = "broadcast both" },
  { inputs = { { 3 }, { 2, 3, 2 } }, name = "1-d lhs" },
  { inputs = { { 2, 3 }, { 3 } }, name = "1-d rhs" },
}
cases.fully_connected = {
  { inputs = { { 2, 3 }, { 4, 3 }, { 4 } } },
  { inputs = { { 2, 3, 2 }, { 4, 6 }, { 4 } }, name = "flatten" },
  { inputs = { { 2, 3, 2 }, { 4, 2 }, { 4 } }, opts = { flatten = false },
    name = "flatten=false" },
  { inputs = { { 2, 3 }, { 4, 3 } }, opts = { no_bias = true }, name = "no_bias" },
  { inputs = { { 3, 5 }, { 4, 5 }, { 4 } }, opts = { act_type = "relu" }, name = "act relu" },
  { inputs = { { 2, 3, 2 }, { 4, 2 } }, opts = { act_type = "relu", flatten = false, no_bias = true },
    name = "act relu, flatten=false" },
  { inputs = { { 3, 5 }, { 4, 5 }, { 4 } }, opts = { act_type = "gelu" }, name = "act gelu" },
  { inputs = { { 2, 3, 2 }, { 4, 2 } }, opts = { act_type = "gelu_tanh", flatten = false, no_bias = true },
    name = "act gelu_tanh, flatten=false" },
}
cases.reshape = { { inputs = { { 2, 3 } }, opts = { shape = { 3, 2 } } },
  { inputs = { { 2, 3, 2 } }, opts = { shape = { -1, 0 }, reverse = true } } }
cases.reshape_like = { { inputs = { { 2, 3 }, { 6, nograd = true } } } }
cases.transpose = { { inputs = { { 2, 3, 4 } } },
  { inputs = { { 2, 3, 4 } }, opts = { axes = { 2, -1, 1 } } } }
-- pad per mode, moveaxis, depth_to_space/space_to_depth, broadcast_axis
cases.pad = { { inputs = { { 1, 2, 3, 4 } }, opts = { pad_width = { 0, 0, 0, 0, 1, 2, 2, 0 },
    constant_value = 1.5 } },
  { inputs = { { 1, 2, 3, 4 } }, opts = { mode = "edge", pad_width = { 0, 0, 0, 0, 2, 1, 3, 2 } } },
  { inputs = { { 1, 2, 3, 4 } }, opts = { mode = "reflect", pad_width = { 0, 0, 0, 0, 2, 1, 3, 2 } } } }
cases.moveaxis = { { inputs = { { 2, 3, 4 } }, opts = { source = 1, destination = -1 } },
  { inputs = { { 2, 3, 4 } }, opts = { source = { 1, 3 }, destination = { 2, 1 } } } }
cases.depth_to_space = { { inputs = { { 1, 8, 2, 3 } }, opts = { block_size = 2 } } }
cases.space_to_depth = { { inputs = { { 1, 2, 4, 6 } }, opts = { block_size = 2 } } }
cases.broadcast_axis = { { inputs = { { 2, 1, 3, 1 } }, opts = { axis = { 2, 4 }, size = { 3, 2 } } } }
cases.swapaxes = { { inputs = { { 2, 3, 4 } }, opts = { dim1 = 1, dim2 = 3 } } }
cases.expand_dims = { { inputs = { { 2, 3 } }, opts = { axis = 2 } },
  { inputs = { { 2, 3 } }, opts = { axis = -1 } } }
cases.squeeze = { { inputs = { { 2, 1, 3 } } }, { inputs = { { 1, 3, 1 } }, opts = { axis = 1 } } }
cases.flatten = { { inputs = { { 2, 3, 2 } } } }
cases.concat = {
  { inputs = { { 2, 3 }, { 2, 2 } }, opts = { dim = 2 }, call = function(F, x, o) return F.concat(x, o) end },
  { inputs = { { 1, 3 }, { 2, 3 }, { 1, 3 } }, opts = { dim = 1 },
    call = function(F, x, o) return F.concat(x, o) end },
}
-- split: several outputs, each weighted in the loss; the last case uses only some of
-- them (backward gives the unused outputs zero gradients).
cases.split = {
  { inputs = { { 2, 6 } }, opts = { num_outputs = 3 } },
  { inputs = { { 4, 3, 2 } }, opts = { num_outputs = 2, axis = 1 } },
  { inputs = { { 2, 3, 4 } }, opts = { num_outputs = 4, axis = -1 } },
  { inputs = { { 3, 2 } }, opts = { num_outputs = 3, axis = 1, squeeze_axis = true } },
  { inputs = { { 2, 6 } }, opts = { num_outputs = 3 }, name = "outputs 1 and 3 only",
    call = function(F, x, o)
      local a, _, c = F.split(x[1], o)
      return a, c
    end },
}
cases.stack = { { inputs = { { 2, 3 }, { 2, 3 } }, opts = { axis = 2 },
  call = function(F, x, o) return F.stack(x, o) end } }
cases.slice = {
  { inputs = { { 3, 4 } }, opts = { begin = { 2, 1 }, ["end"] = { 3, -2 } } },
  { inputs = { { 3, 4 } }, opts = { begin = { false, -1 }, ["end"] = { false, 1 }, step = { 1, -2 } },
    name = "negative step" },
}
cases.slice_axis = { { inputs = { { 3, 4 } }, opts = { axis = 2, begin = 2, ["end"] = 3 } },
  { inputs = { { 3, 4 } }, opts = { axis = -2, begin = -2 } } }
cases.slice_assign = {
  { inputs = { { 3, 4 }, { 2, 2 } }, opts = { begin = { 2, 2 }, ["end"] = { 3, 3 } } },
  { inputs = { { 3, 4 }, { 2 } }, opts = { begin = { 1, 3 }, ["end"] = { 2, 4 } },
    name = "broadcast value" },
}
-- gather_nd (repeated positions: the gradient sums), scatter_nd
-- (distinct positions: with repeats the last write wins and data's gradient is undefined,
-- as in MXNet), slice_like, diag (1-D and 2-D, k on both sides).
cases.gather_nd = {
  { inputs = { { 3, 4 }, { 2, 5, int = true, domain = { 1, 3 }, nograd = true } } },
  { inputs = { { 3, 4, 2 }, function(mx) return mx.nd.array({ { 1, 3, 1 } }) end },
    name = "M=1, trailing block, repeated row" },
}
cases.scatter_nd = {
  { inputs = { { 3 }, function(mx) return mx.nd.array({ { 1, 3, 2 }, { 4, 1, 2 } }) end },
    opts = { shape = { 3, 4 } } },
  { inputs = { { 2, 3 }, function(mx) return mx.nd.array({ { 2, 1 } }) end },
    opts = { shape = { 2, 3 } }, name = "M=1 rows" },
}
cases.slice_like = {
  { inputs = { { 3, 4 }, { 2, 3, nograd = true } } },
  { inputs = { { 3, 4, 2 }, { 5, 2, nograd = true } }, opts = { axes = { 2 } }, name = "axes={2}" },
}
cases.diag = {
  { inputs = { { 3 } }, opts = { k = 1 } },
  { inputs = { { 3, 4 } }, opts = { k = -1 } },
  { inputs = { { 3, 4 } } },
}
cases.slice_assign_scalar = { { inputs = { { 3, 4 } },
  opts = { scalar = 2, begin = { 2 }, ["end"] = { 3 } } } }
cases.tile = { { inputs = { { 2, 3 } }, opts = { reps = { 2, 1 } } },
  { inputs = { { 3 } }, opts = { reps = { 2, 2 } } } }
cases["repeat"] = { { inputs = { { 2, 3 } }, opts = { repeats = 2, axis = 2 } },
  { inputs = { { 2, 3 } }, opts = { repeats = 3 } } }
cases.flip = { { inputs = { { 2, 3 } }, opts = { axis = 2 } }, { inputs = { { 2, 3 } } } }
cases.cast = { { inputs = { { 2, 3 } }, opts = { dtype = "float64" } } }
cases.copy = { { inputs = { { 2, 3 } } } }
cases.pick = {
  { inputs = { { 3, 4 }, { 3, int = true, domain = { 1, 4 }, nograd = true } } },
  { inputs = { { 3, 4 }, { 4, int = true, domain = { 1, 3 }, nograd = true } }, opts = { axis = 1 } },
}
cases.take = {
  { inputs = { { 4, 3 }, { 5, int = true, domain = { 1, 4 }, nograd = true } } },
  { inputs = { { 2, 4 }, { 2, 2, int = true, domain = { 1, 4 }, nograd = true } }, opts = { axis = 2 } },
}
-- sort family: gap keeps values apart so the perturbations keep the order
cases.sort = {
  { inputs = { { 3, 4 } }, gap = true },
  { inputs = { { 3, 4 } }, gap = true, opts = { axis = 1, is_ascend = false } },
}
cases.topk = {
  { inputs = { { 3, 5 } }, gap = true, opts = { k = 2, ret_typ = "value" } },
  { inputs = { { 4, 3 } }, gap = true, opts = { axis = 1, k = 3, ret_typ = "value", is_ascend = true } },
  { inputs = { { 2, 4 } }, gap = true, name = "ret_typ=both (value output)",
    call = function(F, x) local v = F.topk(x[1], { k = 3, ret_typ = "both" }); return v end },
}

-- nn. dropout reseeds before each call so the mask is the same for the
-- analytic and every numeric evaluation.
cases.dropout = {
  { inputs = { { 3, 4 } }, name = "mode=always p=0.3",
    call = function(F, x)
      require("mx").random.seed(11)
      local y = F.dropout(x[1], { p = 0.3, mode = "always" })
      return y
    end },
  { inputs = { { 2, 3, 4 } }, name = "shared mask axes={2}",
    call = function(F, x)
      require("mx").random.seed(12)
      local y = F.dropout(x[1], { p = 0.5, mode = "always", axes = { 2 } })
      return y
    end },
  { inputs = { { 3, 4 } }, name = "training=false: identity", opts = { p = 0.5, training = false } },
}
cases.activation = {
  { inputs = { { 3, 4 } }, opts = { act_type = "relu" }, away = { 0 } },
  { inputs = { { 3, 4 } }, opts = { act_type = "sigmoid" } },
  { inputs = { { 3, 4 } }, opts = { act_type = "tanh" } },
  { inputs = { { 3, 4 } }, opts = { act_type = "softrelu" }, domain = { -5, 5 } },
  { inputs = { { 3, 4 } }, opts = { act_type = "softsign" }, away = { 0 } },
}

---------------------------------------------------------------- linalg, shape, random, optimizer, indexing
-- linalg/shape (trmm, gelqf, syevd, split_v2, broadcast_like axes, pad 5-D)
cases.linalg_trmm = {
  { inputs = { { 3, 3 }, { 3, 2 } }, name = "lower" },
  { inputs = { { 3, 3 }, { 3, 2 } }, name = "upper, transpose, alpha",
    opts = { lower = false, transpose = true, alpha = 0.5 } },
  { inputs = { { 2, 3, 3 }, { 2, 2, 3 } }, name = "batched rightside", opts = { rightside = true } },
  { inputs = { { 3, 3 }, { 2, 3 } }, name = "rightside, upper, transpose",
    opts = { rightside = true, lower = false, transpose = true, alpha = -2 } },
}
cases.linalg_gelqf = {
  { inputs = { { 2, 3 } }, domain = { 0.2, 1 } },
  { inputs = { { 2, 3, 3 } }, domain = { 0.2, 1 } },
}
-- syevd: A = x + x^T + diag(0, 3, 6) keeps the eigenvalues apart (the gradient divides
-- by their differences) and the eigenvectors' signs steady
local function la_spread(batch)
  return function(mx)
    local d = mx.nd.array({ 0, 3, 6 }, { dtype = "float64" })
    if batch then d = mx.nd.broadcast_to(d, { shape = { batch, 3 } }) end
    return mx.nd.linalg_makediag(d)
  end
end
local function la_sym(F, x)
  return F.linalg_syevd(F.add(F.add(x[1], F.swapaxes(x[1], { dim1 = -1, dim2 = -2 })), x[2]))
end
cases.split_v2 = {
  { inputs = { { 4, 3 } }, opts = { sections = 2, axis = 1 } },
  { inputs = { { 2, 5 } }, opts = { indices = { 0, 1, 1, 3 } }, name = "cut points, an empty piece" },
  { inputs = { { 2, 5 } }, opts = { indices = { 2, 4 } }, name = "elements before the first start" },
  { inputs = { { 2, 3 } }, opts = { sections = 3, squeeze_axis = true } },
}
-- broadcast_like with MXNet's lhs_axes/rhs_axes, added to the elemwise section's list
local bl = cases.broadcast_like
bl[#bl + 1] = { inputs = { { 2, 1 }, { 3, 4, 5, nograd = true } },
  opts = { lhs_axes = { 2 }, rhs_axes = { 3 } }, name = "lhs_axes 2 <- rhs_axes 3" }
bl[#bl + 1] = { inputs = { { 1, 3, 1 }, { 4, 2, nograd = true } },
  opts = { lhs_axes = { 1, -1 }, rhs_axes = { 1, 2 } }, name = "two axes, ranks differ" }
-- digamma's gradient is trigamma (nondiff itself); kept away from the poles
cases.digamma = {
  { inputs = { { 2, 3 } }, domain = { 0.2, 5 } },
  { inputs = { { 4 } }, domain = { -2.8, -2.2 }, name = "between the poles -3 and -2" },
}
cases.linalg_syevd = {
  { inputs = { { 3, 3 }, la_spread() }, domain = { -0.5, 0.5 }, call = la_sym,
    name = "x + x^T + diag(0, 3, 6)" },
  { inputs = { { 2, 3, 3 }, la_spread(2) }, domain = { -0.5, 0.5 }, call = la_sym,
    name = "batched" },
}

-- random/optimizer/indexing (sample_*, multinomial, boolean_mask, mp updates)
-- sample_multinomial: the log-probability output, under a fixed seed so every
-- evaluation draws the same categories (domain keeps the running sum below 1: the
-- perturbations never move a draw across a category boundary)
cases.sample_multinomial = {
  { inputs = { { 2, 3 } }, domain = { 0.2, 0.3 }, name = "get_prob (2, 3) x 5",
    call = function(F, inputs)
      require("mx").random.seed(3)
      local _, lp = F.sample_multinomial(inputs[1], { get_prob = true, shape = { 5 } })
      return lp
    end },
}

-- the nn-family ops (cnn, pooling, norm, activations, sequence, embedding/attention,
-- rnn, graph): their own file
require("helpers.gradcases_nn")(cases, with)

---------------------------------------------------------------- special (gammainc, betainc)
-- the gradient flows to x only: the parameters are constants here
cases.gammainc = {
  { inputs = { { 2, 3, domain = { 0.5, 4 }, nograd = true }, { 2, 3 } }, domain = { 0.2, 5 } },
  { inputs = { { 3, domain = { 0.5, 4 }, nograd = true }, { 2, 3 } }, domain = { 0.2, 5 },
    name = "a broadcast" },
}
cases.gammaincc = {
  { inputs = { { 2, 3, domain = { 0.5, 4 }, nograd = true }, { 2, 3 } }, domain = { 0.2, 5 } },
}
cases.betainc = {
  { inputs = { { 2, 3, domain = { 0.5, 4 }, nograd = true }, { 2, 3, domain = { 0.5, 4 },
    nograd = true }, { 2, 3 } }, domain = { 0.05, 0.95 } },
  { inputs = { { 1, domain = { 1.5, 3 }, nograd = true }, { 3, domain = { 0.7, 2 },
    nograd = true }, { 2, 3 } }, domain = { 0.05, 0.95 }, name = "a, b broadcast" },
}

---------------------------------------------------------------- loss heads (MXNet 1.x)
-- Their backward is the gradient of the loss they stand for, not of their output: the
-- surrogate is that loss (gradcheck.lua), the class ids constants.
do
  local function labels(vals)
    return function(mx) return mx.nd.array(vals, { dtype = "float64" }) end
  end
  -- cross-entropy of softmax(data) with class ids (rows of data as the op sees them)
  local function ce(F, x, l, o)
    local ls = F.log_softmax(x, { axis = o.axis })
    local oh = F.one_hot(F.add_scalar(l, { scalar = 1 }), { depth = o.k, dtype = "float64" })
    if o.axis == 2 and x:ndim() == 3 then oh = F.transpose(oh, { axes = { 1, 3, 2 } }) end
    return F.mul_scalar(F.neg(F.sum(F.mul(ls, oh))), { scalar = o.scale })
  end
  cases.softmax_output = {
    { inputs = { { 3, 4 }, labels { 2, 0, 3 } }, name = "(3,4) default",
      surrogate = function(F, xs) return ce(F, xs[1], xs[2], { axis = -1, k = 4, scale = 1 }) end },
    { inputs = { { 3, 4 }, labels { 2, 0, 3 } }, opts = { grad_scale = 2, normalization = "batch" },
      name = "(3,4) grad_scale 2, batch",
      surrogate = function(F, xs) return ce(F, xs[1], xs[2], { axis = -1, k = 4, scale = 2 / 3 }) end },
    { inputs = { { 2, 3, 4 }, labels { 0, 1, 2, 1, 2, 0, 0, 1 } }, name = "multi_output (2,3,4)",
      opts = { multi_output = true }, noview = true,
      call = function(F, xs, o) return F.softmax_output(xs[1], xs[2]:reshape(2, 4), o) end,
      surrogate = function(F, xs)
        return ce(F, xs[1], xs[2]:reshape(2, 4), { axis = 2, k = 3, scale = 1 / 4 })
      end },
  }
  local function sq(F, xs, scale)
    local d = F.sub(xs[1], F.reshape_like(xs[2], xs[1]))
    return F.mul_scalar(F.sum(F.square(d)), { scalar = scale / 2 })
  end
  cases.linear_regression_output = {
    { inputs = { { 3, 2 }, { 3, 2, nograd = true } }, opts = { grad_scale = 3 },
      surrogate = function(F, xs) return sq(F, xs, 3 / 2) end },
    { inputs = { { 3, 1 }, { 3, nograd = true } },
      surrogate = function(F, xs) return sq(F, xs, 1) end },
  }
  cases.logistic_regression_output = {
    { inputs = { { 3, 2 }, { 3, 2, nograd = true, domain = { 0, 1 } } },
      surrogate = function(F, xs)
        -- the logistic loss -(z log s + (1 - z) log(1 - s)) / m, s = sigmoid(x), m = 2
        local sg = F.sigmoid(xs[1])
        local z = xs[2]
        local l = F.add(F.mul(z, F.log(sg)), F.mul(F.rsub_scalar(z, { scalar = 1 }),
          F.log(F.rsub_scalar(sg, { scalar = 1 }))))
        return F.mul_scalar(F.sum(l), { scalar = -1 / 2 })
      end },
  }
  cases.mae_regression_output = {
    { inputs = { { 3, 2 }, { 3, 2, nograd = true } }, away = { 0 }, domain = { 0.2, 1 },
      call = function(F, xs) return F.mae_regression_output(xs[1], F.neg(xs[2])) end,
      surrogate = function(F, xs)
        return F.div_scalar(F.sum(F.abs(F.add(xs[1], xs[2]))), { scalar = 2 })
      end },
  }
  cases.make_loss = {
    { inputs = { { 3, 2 } }, opts = { grad_scale = 2 },
      surrogate = function(F, xs) return F.mul_scalar(F.sum(xs[1]), { scalar = 2 }) end },
    { inputs = { { 3, 2 } }, opts = { normalization = "batch" },
      surrogate = function(F, xs) return F.div_scalar(F.sum(xs[1]), { scalar = 3 }) end },
  }
end

-- box family: box_nms's gradient routes each kept row's ograd back (the selection is
-- piecewise constant: random scores and boxes stay clear of ties and IoU edges); roi_align
-- is linear in data (the rois are constant boxes)
cases.box_nms = {
  { inputs = { { 1, 6, 6, domain = { 0, 1 } } }, opts = { overlap_thresh = 0.3 }, noview = true,
    call = function(F, x, opts) return (F.box_nms(x[1], opts)) end, name = "(1, 6, 6)" },
}
cases.roi_pooling = {
  { inputs = { { 1, 2, 6, 6 }, function(mx)
    return mx.nd.array({ { 0, 0.4, 0.6, 3.2, 4.1 }, { 0, 1, 1, 5, 5 } }, { dtype = "float64" })
  end }, opts = { pooled_size = { 2, 2 }, spatial_scale = 1 },
    call = function(F, x, opts) return (F.roi_pooling(x[1], x[2], opts)) end, gap = true },
}
cases.roi_align = {
  { inputs = { { 2, 2, 5, 5 }, function(mx)
    return mx.nd.array({ { 0, 0.5, 0.5, 3.5, 3 }, { 1, 1, 0, 4, 4.5 } }, { dtype = "float64" })
  end }, opts = { pooled_size = { 2, 2 }, spatial_scale = 1, sample_ratio = 2 } },
}

-- amp family: casts between float dtypes (float64 to float64 here: gradcheck's dtype) are
-- the identity, the gradient the cast back
cases.amp_cast = { { inputs = { { 2, 3 } }, opts = { dtype = "float64" } } }
cases.amp_multicast = {
  { inputs = { { 2, 3 }, { 3 } }, opts = { num_outputs = 2 }, name = "two inputs",
    call = function(F, x, opts)
      local a, b = F.amp_multicast(x[1], x[2], opts)
      return F.add(a, b)
    end },
}

-- audio (stft / istft): the data's gradient, the window a constant (Hann; Hamming, which
-- is nowhere zero, where frames are not centred)
do
  local function win(n, a)
    return function(mx)
      local t = {}
      for i = 0, n - 1 do t[i + 1] = a - (1 - a) * math.cos(2 * math.pi * i / n) end
      return mx.nd.array(t, { dtype = "float64" })
    end
  end
  local function hann(n) return win(n, 0.5) end
  cases.stft = {
    { inputs = { { 20 }, hann(8) }, opts = { n_fft = 8, hop_length = 3 }, name = "reflect" },
    { inputs = { { 2, 13 }, hann(5) }, opts = { n_fft = 7, hop_length = 2, pad_mode = "constant",
      normalized = true }, name = "odd n_fft, constant, normalized" },
    { inputs = { { 11 }, hann(6) }, opts = { n_fft = 6, hop_length = 2, center = false,
      onesided = false }, name = "two-sided, not centred" },
  }
  cases.istft = {
    { inputs = { { 5, 7, 2 }, hann(8) }, opts = { n_fft = 8, hop_length = 2 }, name = "onesided" },
    { inputs = { { 2, 4, 6, 2 }, hann(7) }, opts = { n_fft = 7, hop_length = 2, normalized = true,
      length = 9 }, name = "odd n_fft, length" },
    { inputs = { { 6, 5, 2 }, win(6, 0.54) }, opts = { n_fft = 6, hop_length = 2, onesided = false,
      center = false }, name = "two-sided" },
  }
end

-- sparse family: dense inputs through sparse storage and back
cases.cast_storage = {
  { inputs = { { 3, 4 } }, name = "through csr",
    call = function(F, x) return F.cast_storage(F.cast_storage(x[1], { stype = "csr" })) end },
  { inputs = { { 3, 2, 2 } }, name = "through row_sparse",
    call = function(F, x) return F.cast_storage(F.cast_storage(x[1], { stype = "row_sparse" })) end },
}
cases.sparse_retain = {
  { inputs = { { 4, 3 }, function(mx) return mx.nd.array({ 0, 2 }, { dtype = "int64" }) end } },
}
cases.square_sum = {
  { inputs = { { 3, 4 } }, opts = { axis = 2 } },
  { inputs = { { 3, 4 } }, opts = { axis = 2, keepdims = true }, name = "keepdims" },
  { inputs = { { 2, 3 } }, name = "all axes" },
}


-- gnn family: a 4-node graph (edges 0->1, 0->2, 1->2, 3->0, 3->2, 2->3) as its
-- destination-sorted csr
local function i64(t) return function(mx) return mx.nd.array(t, { dtype = "int64" }) end end
local GIP, GIX, GEI = i64({ 0, 1, 2, 5, 6 }), i64({ 3, 0, 0, 1, 3, 2 }), i64({ 3, 0, 1, 2, 4, 5 })
local POS = { 0.5, 1.5 }
cases.gspmm = {
  { inputs = { GIP, GIX, GEI, { 4, 3 }, { 6, 3 } }, opts = { binary_op = "mul" }, name = "u_mul_e_sum" },
  { inputs = { GIP, GIX, GEI, { 4, 2, 1 }, { 6, 3 } }, opts = { binary_op = "add",
    reduce_op = "mean" }, name = "u_add_e_mean broadcast" },
  { inputs = { GIP, GIX, GEI, { 4, 2 }, { 6, 2, domain = POS } }, opts = { binary_op = "div" },
    name = "u_div_e_sum" },
  { inputs = { GIP, GIX, GEI, { 4, 2, 3 }, { 6, 1, 3 } }, opts = { binary_op = "dot" },
    name = "u_dot_e_sum" },
  { inputs = { GIP, GIX, GEI, { 4, 2 }, { 4, 2 } }, opts = { binary_op = "sub", lhs_target = "v",
    rhs_target = "u" }, name = "v_sub_u_sum" },
  { inputs = { GIP, GIX, GEI, { 6, 2 } }, opts = { binary_op = "copy", reduce_op = "max",
    lhs_target = "e" }, gap = true, name = "copy_e_max" },
  { inputs = { GIP, GIX, GEI, { 4, 2 } }, opts = { binary_op = "copy", reduce_op = "min" },
    gap = true, name = "copy_u_min" },
}
cases.gsddmm = {
  { inputs = { GIP, GIX, GEI, { 4, 3 }, { 4, 3 } }, opts = { binary_op = "dot" }, name = "u_dot_v" },
  { inputs = { GIP, GIX, GEI, { 4, 2, 1 }, { 4, 3 } }, opts = { binary_op = "add" },
    name = "u_add_v broadcast" },
  { inputs = { GIP, GIX, GEI, { 6, 2 }, { 4, 2, domain = POS } }, opts = { binary_op = "div",
    lhs_target = "e" }, name = "e_div_v" },
  { inputs = { GIP, GIX, GEI, { 4, 2 }, { 6, 1 } }, opts = { binary_op = "mul", rhs_target = "e" },
    name = "u_mul_e" },
  { inputs = { GIP, GIX, GEI, { 4, 2 } }, opts = { binary_op = "copy", lhs_target = "v" },
    name = "copy_v" },
}
cases.edge_softmax = { { inputs = { GIP, GEI, { 6, 2 } } }, { inputs = { GIP, GEI, { 6, 2, 2 } } } }

return cases
