/* onnx_ops_extra.c — ONNX ops that are compositions here: the losses a deployed model
 * may keep (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), LayerNormalization's
 * statistics outputs, Trilu, quantisation (QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear), the signal windows (computed at import: their size is a
 * constant), Det, the scatters, Einsum, the softmax family (Softmax and LogSoftmax of
 * opsets before 13 flatten; Hardmax) and TopK. */
#include "onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* round half to even, as ONNX's Round and the quantisers: f = floor(x + 0.5), less 1
 * where x + 0.5 is a whole odd number */
ox_val *ox_round_even(ox *X, ox_val *x) {
  ox_val *h = ox_op1(X, "_plus_scalar", x, KV("scalar", "0.5"));
  ox_val *f = ox_op1(X, "floor", h, NULL);
  ox_val *tie = ox_op2(X, "equal", h, f, NULL);
  ox_val *m2 = ox_op1(X, "abs", ox_op1(X, "_mod_scalar", f, KV("scalar", "2")), NULL);
  ox_val *odd = ox_op1(X, "_equal_scalar", m2, KV("scalar", "1"));
  return ox_op2(X, "sub", f, ox_op2(X, "mul", tie, odd, NULL), NULL);
}

/* ---- losses ---------------------------------------------------------------------------- */

/* NLL of log-probabilities lp (N, C, d...) at target (N, d...): -lp[n, t, d] * w[t], 0 where
 * t == ignore_index; reduced as ONNX (mean divides by the sum of the weights used). */
static int nll(ox *X, ox_val *lp, ox_val *target, ox_val *weight, ox_val **out) {
  const mx_desc *d = &lp->d;
  int r = d->ndim;
  if (r < 2 || d->shape[1] < 0) return ox_unsupported(X, "input of unknown class count");
  int64_t c = d->shape[1];
  char rb[16];
  const char *red = ox_attr_s(X, "reduction", "mean", rb, sizeof rb);
  const Onnx__AttributeProto *ia = ox_attr(X, "ignore_index");
  const char *dt = mx_dtype_name(d->dtype);
  ox_val *t = ox_cast(X, target, MX_I64);
  ox_val *oh = ox_op1(X, "one_hot", ox_op1(X, "_plus_scalar", t, KV("scalar", "1")),
                      KV("depth", ox_str(X, "%lld", (long long)c), "dtype", dt));
  if (!oh) return MX_EINVAL;
  if (r > 2) { /* (N, d..., C) -> (N, C, d...) */
    int64_t perm[MX_MAX_DIM];
    perm[0] = 0, perm[1] = r - 1;
    for (int i = 2; i < r; i++) perm[i] = i - 1;
    oh = ox_op1(X, "transpose", oh, KV("axes", ox_tup(X, r, perm)));
  }
  ox_val *picked = ox_op1(X, "sum", ox_op2(X, "mul", lp, oh, NULL), KV("axis", "1"));
  ox_val *w = NULL; /* the weight each element counts with */
  if (weight) {
    int64_t s[MX_MAX_DIM];
    s[0] = 1, s[1] = c;
    for (int i = 2; i < r; i++) s[i] = 1;
    ox_val *wr = ox_op1(X, "reshape", ox_cast(X, weight, d->dtype), KV("shape", ox_tup(X, r, s)));
    w = ox_op1(X, "sum", ox_op2(X, "mul", oh, wr, NULL), KV("axis", "1"));
  }
  if (ia && ia->has_i) {
    ox_val *valid = ox_cast(X, ox_op1(X, "_not_equal_scalar", t, KV("scalar",
                            ox_str(X, "%lld", (long long)ia->i))), d->dtype);
    w = w ? ox_op2(X, "mul", w, valid, NULL) : valid;
  }
  ox_val *loss = ox_op1(X, "negative", w ? ox_op2(X, "mul", picked, w, NULL) : picked, NULL);
  if (!loss) return MX_EINVAL;
  if (strcmp(red, "none") == 0) return ox_done(X, loss, out);
  ox_val *sum = ox_op1(X, "sum", loss, NULL);
  if (strcmp(red, "sum") == 0) return ox_done(X, sum, out);
  if (strcmp(red, "mean") != 0) return ox_fail(X, "reduction '%s'", red);
  if (w) return ox_done(X, ox_op2(X, "div", sum, ox_op1(X, "sum", w, NULL), NULL), out);
  if (!ox_known(&loss->d)) return ox_unsupported(X, "mean over unknown dims");
  double n = 1;
  for (int i = 0; i < loss->d.ndim; i++) n *= (double)loss->d.shape[i];
  return ox_done(X, ox_op1(X, "_div_scalar", sum, KV("scalar", ox_f2s(X, n))), out);
}

static int cv_nll(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  return rc ? rc : nll(X, in[0], in[1], IN_OR(2, nin, in), out);
}

static int cv_sce(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *lp = ox_op1(X, "log_softmax", in[0], KV("axis", "1"));
  if (!lp) return MX_EINVAL;
  if ((rc = nll(X, lp, in[1], IN_OR(2, nin, in), out))) return rc;
  if (nout > 1) out[1] = lp;
  return MX_OK;
}

/* ---- LayerNormalization with its Mean and InvStdDev outputs ------------------------------- */

static int cv_layernorm_stats(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *x = in[0], *g = in[1], *b = IN_OR(2, nin, in);
  int r = x->d.ndim;
  int64_t axis = ox_attr_i(X, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return ox_fail(X, "axis out of range");
  int64_t axes[MX_MAX_DIM];
  int na = 0;
  for (int i = (int)axis; i < r; i++) axes[na++] = i;
  const char *ax = ox_tup(X, na, axes);
  double eps = ox_attr_f(X, "epsilon", 1e-5);
  int dt = x->d.dtype;
  /* stash_type 1 (default): the statistics in float32 */
  ox_val *xf = ox_attr_i(X, "stash_type", 1) == 1 ? ox_cast(X, x, MX_F32) : x;
  ox_val *mean = ox_op1(X, "mean", xf, KV("axis", ax, "keepdims", "True"));
  ox_val *dv = ox_op2(X, "sub", xf, mean, NULL);
  ox_val *var = ox_op1(X, "mean", ox_op1(X, "square", dv, NULL), KV("axis", ax, "keepdims", "True"));
  ox_val *inv = ox_op1(X, "rsqrt", ox_op1(X, "_plus_scalar", var, KV("scalar", ox_f2s(X, eps))), NULL);
  ox_val *y = ox_cast(X, ox_op2(X, "mul", dv, inv, NULL), dt);
  y = ox_op2(X, "mul", y, g, NULL);
  if (b) y = ox_op2(X, "add", y, b, NULL);
  if (!y) return MX_EINVAL;
  out[0] = y;
  if (nout > 1) out[1] = mean;
  if (nout > 2) out[2] = inv;
  return MX_OK;
}

/* ---- Trilu ------------------------------------------------------------------------------- */

static int cv_trilu(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  ox_val *x = in[0];
  const mx_desc *d = &x->d;
  if (d->ndim < 2 || d->shape[d->ndim - 1] < 0 || d->shape[d->ndim - 2] < 0)
    return ox_unsupported(X, "Trilu over unknown dims");
  int64_t k = 0;
  int n;
  if (IN_OR(1, nin, in) && (rc = ox_ints(X, in[1], "k", 1, &k, &n))) return rc;
  bool upper = ox_attr_i(X, "upper", 1) != 0;
  for (int i = 0; i < d->ndim; i++)
    if (d->shape[i] == 0) return ox_done(X, ox_op1(X, "copy", x, NULL), out); /* nothing to mask */
  int64_t rows = d->shape[d->ndim - 2], cols = d->shape[d->ndim - 1], s[2] = {rows, cols};
  mx_tensor *m;
  if ((rc = mx_tensor_new(2, s, MX_BOOL, MX_CPU, 0, &m))) return rc;
  uint8_t *p = mx_ptr(m);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) p[i * cols + j] = upper ? j - i >= k : j - i <= k;
  ox_val *mask = ox_const(X, m);
  ox_val *zero = ox_op1(X, "zeros_like", x, NULL);
  ox_val *ins[3] = {ox_bcast_to(X, mask, d), x, zero};
  if (!ins[0]) return MX_EINVAL;
  return ox_done(X, ox_op(X, "where", 3, ins, NULL), out);
}

/* ---- quantisation ---------------------------------------------------------------------------- */

/* a per-axis (1-D) parameter shaped to broadcast along axis of a rank-r value */
static ox_val *along(ox *X, ox_val *p, int64_t axis, int r) {
  if (!p || p->d.ndim != 1 || r < 2) return p;
  if (axis < 0) axis += r;
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < r; i++) s[i] = i == axis ? -1 : 1;
  return ox_op1(X, "reshape", p, KV("shape", ox_tup(X, r, s)));
}

static int cv_quantize(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *zp = IN_OR(2, nin, in);
  int qt = zp ? zp->d.dtype : MX_U8;
  if (qt != MX_U8 && qt != MX_I8) return ox_unsupported(X, "quantising to %s", mx_dtype_name(qt));
  int64_t axis = ox_attr_i(X, "axis", 1);
  int r = in[0]->d.ndim;
  ox_val *q = ox_round_even(X, ox_op2(X, "div", ox_cast(X, in[0], MX_F32),
                                      along(X, ox_cast(X, in[1], MX_F32), axis, r), NULL));
  if (zp) q = ox_op2(X, "add", q, along(X, ox_cast(X, zp, MX_F32), axis, r), NULL);
  q = ox_op1(X, "clip", q, KV("a_min", qt == MX_U8 ? "0" : "-128", "a_max", qt == MX_U8 ? "255" : "127"));
  return ox_done(X, ox_cast(X, q, qt), out);
}

static int cv_dequantize(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int64_t axis = ox_attr_i(X, "axis", 1);
  int r = in[0]->d.ndim;
  ox_val *x = ox_cast(X, in[0], MX_F32);
  ox_val *zp = IN_OR(2, nin, in);
  if (zp) x = ox_op2(X, "sub", x, along(X, ox_cast(X, zp, MX_F32), axis, r), NULL);
  return ox_done(X, ox_op2(X, "mul", x, along(X, ox_cast(X, in[1], MX_F32), axis, r), NULL), out);
}

static int cv_dynamic_quantize(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  ox_val *x = ox_cast(X, in[0], MX_F32);
  ox_val *lo = ox_op1(X, "_minimum_scalar", ox_op1(X, "min", x, NULL), KV("scalar", "0"));
  ox_val *hi = ox_op1(X, "_maximum_scalar", ox_op1(X, "max", x, NULL), KV("scalar", "0"));
  ox_val *scale = ox_op1(X, "_div_scalar", ox_op2(X, "sub", hi, lo, NULL), KV("scalar", "255"));
  ox_val *zpf = ox_op1(X, "clip", ox_round_even(X, ox_op1(X, "negative", ox_op2(X, "div", lo, scale, NULL), NULL)),
                       KV("a_min", "0", "a_max", "255"));
  ox_val *q = ox_op2(X, "add", ox_round_even(X, ox_op2(X, "div", x, scale, NULL)), zpf, NULL);
  q = ox_op1(X, "clip", q, KV("a_min", "0", "a_max", "255"));
  if (!(out[0] = ox_cast(X, q, MX_U8))) return MX_EINVAL;
  if (nout > 1) out[1] = scale;
  if (nout > 2 && !(out[2] = ox_cast(X, zpf, MX_U8))) return MX_EINVAL;
  return MX_OK;
}

/* ---- windows ------------------------------------------------------------------------------- */

static int window(ox *X, int nin, ox_val **in, ox_val **out, const double *a, int na) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t size;
  int n;
  if ((rc = ox_ints(X, in[0], "size", 1, &size, &n))) return rc;
  if (size < 0 || size > (1 << 24)) return ox_fail(X, "window size %lld", (long long)size);
  const char *why = "";
  int dt = ox_dtype((int32_t)ox_attr_i(X, "output_datatype", 1), &why);
  if (dt < 0) return ox_unsupported(X, "output_datatype %s", why);
  bool periodic = ox_attr_i(X, "periodic", 1) != 0;
  double den = periodic ? (double)size : (double)(size - 1);
  int64_t s[1] = {size};
  mx_tensor *t;
  if ((rc = mx_tensor_new(1, s, dt, MX_CPU, 0, &t))) return rc;
  for (int64_t i = 0; i < size; i++) { /* a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N) */
    double v = a[0];
    for (int k = 1; k < na; k++)
      v += (k % 2 ? -a[k] : a[k]) * cos(2.0 * M_PI * (double)k * (double)i / den);
    mx_store_f64(mx_ptr(t), dt, i, v);
  }
  return ox_done(X, ox_const(X, t), out);
}
static int cv_hann(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  static const double a[] = {0.5, 0.5};
  return window(X, nin, in, out, a, 2);
}
static int cv_hamming(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  static const double a[] = {25.0 / 46.0, 21.0 / 46.0};
  return window(X, nin, in, out, a, 2);
}
static int cv_blackman(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  static const double a[] = {0.42, 0.5, 0.08};
  return window(X, nin, in, out, a, 3);
}

static int cv_det(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  ox_val *d = ox_op1(X, "_linalg_det", in[0], NULL);
  if (d && in[0]->d.ndim == 2) d = ox_op1(X, "reshape", d, KV("shape", "()"));
  return ox_done(X, d, out);
}

const ox_conv_entry ox_ops_extra[] = {
    {"NegativeLogLikelihoodLoss", cv_nll}, {"SoftmaxCrossEntropyLoss", cv_sce},
    {"Trilu", cv_trilu}, {"QuantizeLinear", cv_quantize}, {"DequantizeLinear", cv_dequantize},
    {"DynamicQuantizeLinear", cv_dynamic_quantize}, {"HannWindow", cv_hann},
    {"HammingWindow", cv_hamming}, {"BlackmanWindow", cv_blackman}, {"Det", cv_det},
    {NULL, NULL}};

/* LayerNormalization asked for its statistics (onnx_ops_nn.c hands over) */
int ox_layernorm_stats(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return cv_layernorm_stats(X, nin, in, nout, out);
}

/* ---- scatters, einsum, MVN, ReverseSequence ------------------------------------------------ */

/* data with updates written at the 1-based coordinates coords (M, Y...): luamx's scatter_nd
 * makes zeros with the updates; a scattered mask of ones says where to take them */
static ox_val *scatter_into(ox *X, ox_val *data, ox_val *coords, ox_val *updates) {
  const mx_desc *d = &data->d;
  if (!ox_known(d)) {
    ox_unsupported(X, "scattering into a value with unknown dims");
    return NULL;
  }
  const char *shape = ox_tup(X, d->ndim, d->shape);
  ox_val *u = ox_cast(X, updates, d->dtype);
  ox_val *sc = ox_op2(X, "scatter_nd", u, coords, KV("shape", shape));
  ox_val *ones = ox_op1(X, "ones_like", u, NULL);
  ox_val *mask = ox_op2(X, "scatter_nd", ones, coords, KV("shape", shape));
  ox_val *keep = ox_op1(X, "_rminus_scalar", mask, KV("scalar", "1"));
  return ox_op2(X, "add", ox_op2(X, "mul", data, keep, NULL), sc, NULL);
}

static int cv_scatternd(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 3);
  if (rc) return rc;
  char rb[8];
  if (strcmp(ox_attr_s(X, "reduction", "none", rb, sizeof rb), "none"))
    return ox_unsupported(X, "reduction other than none");
  ox_val *idx = in[1];
  int r = idx->d.ndim;
  if (r < 1 || idx->d.shape[r - 1] < 0) return ox_unsupported(X, "indices of unknown shape");
  /* ONNX's indices (..., k) -> luamx's (k, ...), 1-based, negatives from the end */
  int64_t perm[MX_MAX_DIM];
  perm[0] = r - 1;
  for (int i = 1; i < r; i++) perm[i] = i - 1;
  ox_val *t = ox_op1(X, "transpose", ox_cast(X, idx, MX_I64), KV("axes", ox_tup(X, r, perm)));
  ox_val *pos = ox_op1(X, "_plus_scalar", t, KV("scalar", "1"));
  return ox_done(X, scatter_into(X, in[0], pos, in[2]), out);
}

static int cv_scatter_elements(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 3);
  if (rc) return rc;
  char rb[8];
  if (strcmp(ox_attr_s(X, "reduction", "none", rb, sizeof rb), "none"))
    return ox_unsupported(X, "reduction other than none");
  ox_val *data = in[0], *idx = in[1];
  int r = data->d.ndim;
  int64_t axis = ox_attr_i(X, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || idx->d.ndim != r || !ox_known(&idx->d) || !ox_known(&data->d))
    return ox_unsupported(X, "ScatterElements over unknown dims");
  ox_val *i64 = ox_cast(X, idx, MX_I64);
  ox_val *neg = ox_op1(X, "_lesser_scalar", i64, KV("scalar", "0"));
  ox_val *fixd = ox_op2(X, "add", i64, ox_op1(X, "_mul_scalar", neg, KV("scalar",
                        ox_str(X, "%lld", (long long)data->d.shape[axis]))), NULL);
  ox_val *parts[MX_MAX_DIM];
  for (int a = 0; a < r; a++)
    if (!(parts[a] = a == axis ? ox_op1(X, "_plus_scalar", fixd, KV("scalar", "1"))
                               : ox_coord_grid(X, &idx->d, a)))
      return MX_EINVAL;
  ox_val *coords = ox_op(X, "stack", r, parts, KV("axis", "0", "num_args", ox_str(X, "%d", r)));
  return ox_done(X, scatter_into(X, data, coords, in[2]), out);
}

/* Einsum of one or two operands without ellipses or repeated letters in an operand: each
 * operand laid out over every letter (transposed, then 1-sized axes for the letters it
 * lacks), multiplied with broadcasting, summed over the letters the output drops */
static int cv_einsum(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  char eq[128];
  const char *e = ox_attr_s(X, "equation", "", eq, sizeof eq);
  if (strstr(e, "...")) return ox_unsupported(X, "einsum with an ellipsis");
  char ops[2][16] = {{0}}, outl[16] = {0}, letters[16] = {0};
  int nops = 0, nl = 0, k = 0;
  bool explicit_out = false;
  for (const char *p = e; *p; p++) {
    if (*p == ' ') continue;
    if (*p == ',') { if (++nops >= 2) return ox_unsupported(X, "einsum of more than 2 operands"); k = 0; continue; }
    if (*p == '-' && p[1] == '>') { explicit_out = true; p++; k = 0; continue; }
    if (*p < 'A' || (*p > 'Z' && *p < 'a') || *p > 'z' || k >= 8) return ox_fail(X, "equation '%s'", e);
    char *dst = explicit_out ? outl : ops[nops];
    if (strchr(dst, *p)) return ox_unsupported(X, "einsum with a repeated letter (a diagonal)");
    dst[k++] = *p;
    if (!explicit_out && !strchr(letters, *p)) letters[nl++] = *p;
  }
  nops++;
  if (nops != nin) return ox_fail(X, "%d operands in the equation, %d inputs", nops, nin);
  if (!explicit_out) { /* letters that appear once, in order */
    int m = 0;
    for (char c = 'A'; c <= 'z'; c++) {
      int cnt = 0;
      for (int i = 0; i < nops; i++) cnt += strchr(ops[i], c) != NULL && c;
      if (cnt == 1 && strchr(letters, c)) outl[m++] = c;
    }
  }
  int64_t dims[16];
  ox_val *full[2];
  for (int i = 0; i < nops; i++) {
    ox_val *v = in[i];
    int r = (int)strlen(ops[i]);
    if (!v || v->d.ndim != r || !ox_known(&v->d)) return ox_unsupported(X, "einsum operand of unknown shape");
    int64_t perm[16], shape[16];
    int pk = 0;
    for (int l = 0; l < nl; l++) {
      const char *at = strchr(ops[i], letters[l]);
      if (at) {
        perm[pk++] = at - ops[i];
        dims[l] = v->d.shape[at - ops[i]];
      }
    }
    v = ox_op1(X, "transpose", v, KV("axes", ox_tup(X, pk, perm)));
    for (int l = 0; l < nl; l++) shape[l] = strchr(ops[i], letters[l]) ? dims[l] : 1;
    if (!(full[i] = ox_op1(X, "reshape", v, KV("shape", ox_tup(X, nl, shape))))) return MX_EINVAL;
  }
  ox_val *prod = nops == 2 ? ox_op2(X, "mul", full[0], full[1], NULL) : full[0];
  int64_t sum_axes[16], keep[16];
  int ns = 0, nk = 0;
  for (int l = 0; l < nl; l++) {
    if (strchr(outl, letters[l])) keep[nk++] = letters[l];
    else sum_axes[ns++] = l;
  }
  if (ns) prod = ox_op1(X, "sum", prod, KV("axis", ox_tup(X, ns, sum_axes)));
  int no = (int)strlen(outl);
  int64_t perm[16];
  for (int i = 0; i < no; i++)
    for (int j = 0; j < nk; j++)
      if (keep[j] == outl[i]) perm[i] = j;
  if (no > 1) prod = ox_op1(X, "transpose", prod, KV("axes", ox_tup(X, no, perm)));
  else if (prod == full[0]) prod = ox_op1(X, "copy", prod, NULL);
  return ox_done(X, prod, out);
}

static int cv_mvn(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t axes[MX_MAX_DIM] = {0, 2, 3};
  int n = ox_attr_ints(X, "axes", MX_MAX_DIM, axes);
  if (n == -2) return MX_EINVAL;
  if (n < 0) n = 3;
  const char *ax = ox_tup(X, n, axes);
  ox_val *mean = ox_op1(X, "mean", in[0], KV("axis", ax, "keepdims", "True"));
  ox_val *dv = ox_op2(X, "sub", in[0], mean, NULL);
  ox_val *var = ox_op1(X, "mean", ox_op1(X, "square", dv, NULL), KV("axis", ax, "keepdims", "True"));
  ox_val *sd = ox_op1(X, "_plus_scalar", ox_op1(X, "sqrt", var, NULL), KV("scalar", "1e-9"));
  return ox_done(X, ox_op2(X, "div", dv, sd, NULL), out);
}

static int cv_reverse_sequence(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int64_t ta = ox_attr_i(X, "time_axis", 0), ba = ox_attr_i(X, "batch_axis", 1);
  ox_val *x = in[0];
  int r = x->d.ndim;
  if (r < 2) return ox_fail(X, "input of rank < 2");
  /* luamx's SequenceReverse: time axis 0, batch axis 1 */
  bool swap = ta == 1 && ba == 0;
  if (!swap && !(ta == 0 && ba == 1)) return ox_fail(X, "time_axis/batch_axis must be 0/1 or 1/0");
  if (swap) x = ox_op1(X, "SwapAxis", x, KV("dim1", "0", "dim2", "1"));
  ox_val *ins[2] = {x, ox_cast(X, in[1], x ? x->d.dtype : MX_F32)};
  ox_val *y = ox_op(X, "SequenceReverse", 2, ins, KV("use_sequence_length", "True", "axis", "0"));
  if (y && swap) y = ox_op1(X, "SwapAxis", y, KV("dim1", "0", "dim2", "1"));
  return ox_done(X, y, out);
}

/* ---- softmax family -------------------------------------------------------------------------- */

static int softmax(ox *X, int nin, ox_val **in, ox_val **out, const char *op) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  ox_val *x = in[0];
  int r = x->d.ndim;
  if (r < 0) return ox_unsupported(X, "unknown rank");
  int64_t axis = ox_attr_i(X, "axis", X->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  if (X->opset >= 13 || axis == r - 1)
    return ox_done(X, ox_op1(X, op, x, KV("axis", ox_str(X, "%lld", (long long)axis))), out);
  /* opset < 13: over the flattened axes [axis, r) */
  if (!ox_known(&x->d)) return ox_unsupported(X, "opset < 13 softmax over unknown dims");
  int64_t s[2] = {1, 1};
  for (int i = 0; i < r; i++) s[i < axis ? 0 : 1] *= x->d.shape[i];
  ox_val *v = ox_op1(X, "reshape", x, KV("shape", ox_tup(X, 2, s)));
  v = ox_op1(X, op, v, KV("axis", "-1"));
  return ox_done(X, v ? ox_op1(X, "reshape", v, KV("shape", ox_tup(X, r, x->d.shape))) : NULL, out);
}
static int cv_softmax(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return softmax(X, nin, in, out, "softmax");
}
static int cv_logsoftmax(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return softmax(X, nin, in, out, "log_softmax");
}

static int cv_hardmax(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  ox_val *x = in[0];
  int r = x->d.ndim;
  if (!ox_known(&x->d)) return ox_unsupported(X, "Hardmax over unknown dims");
  int64_t axis = ox_attr_i(X, "axis", X->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  if (r < 1 || axis < 0 || axis >= r)
    return ox_fail(X, "axis %lld out of range for rank %d", (long long)axis, r);
  ox_val *v = x;
  int64_t s[2] = {1, 1};
  int a = (int)axis;
  if (X->opset < 13) {
    for (int i = 0; i < r; i++) s[i < axis ? 0 : 1] *= x->d.shape[i];
    v = ox_op1(X, "reshape", x, KV("shape", ox_tup(X, 2, s)));
    a = 1;
  }
  if (!v) return MX_EINVAL;
  int vr = v->d.ndim;
  if (vr <= a) return ox_unsupported(X, "Hardmax of a value of unknown shape");
  int64_t depth = v->d.shape[a];
  /* one_hot(argmax) along the last axis; argmax gives luamx's 1-based position */
  ox_val *t = v;
  int64_t perm[MX_MAX_DIM];
  if (a != vr - 1) {
    for (int i = 0, k = 0; i < vr; i++) if (i != a) perm[k++] = i;
    perm[vr - 1] = a;
    t = ox_op1(X, "transpose", v, KV("axes", ox_tup(X, vr, perm)));
  }
  ox_val *am = ox_op1(X, "argmax", t, KV("axis", "-1"));
  ox_val *oh = ox_op1(X, "one_hot", am, KV("depth", ox_str(X, "%lld", (long long)depth),
                                           "dtype", mx_dtype_name(x->d.dtype)));
  if (oh && a != vr - 1) {
    int64_t inv[MX_MAX_DIM];
    for (int i = 0; i < vr; i++) inv[perm[i]] = i;
    oh = ox_op1(X, "transpose", oh, KV("axes", ox_tup(X, vr, inv)));
  }
  if (oh && X->opset < 13) oh = ox_op1(X, "reshape", oh, KV("shape", ox_tup(X, r, x->d.shape)));
  return ox_done(X, oh, out);
}

/* ---- TopK ---------------------------------------------------------------------------------- */

static int cv_topk(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t k;
  int n;
  if (X->opset < 10) k = ox_attr_i(X, "k", 1);
  else if ((rc = ox_ints(X, IN_OR(1, nin, in), "k", 1, &k, &n))) return rc;
  int64_t axis = ox_attr_i(X, "axis", -1);
  bool largest = ox_attr_i(X, "largest", 1) != 0;
  ox_val *o[2];
  if ((rc = ox_emit(X, "topk", 1, in, KV("axis", ox_str(X, "%lld", (long long)axis),
      "k", ox_str(X, "%lld", (long long)k), "ret_typ", "both", "is_ascend", largest ? "False" : "True",
      "dtype", "int64"), 2, o)))
    return rc;
  out[0] = o[0];
  if (nout > 1 && !(out[1] = ox_op1(X, "_minus_scalar", ox_cast(X, o[1], MX_I64), KV("scalar", "1"))))
    return MX_EINVAL;
  return MX_OK;
}

const ox_conv_entry ox_ops_extra2[] = {
    {"ScatterND", cv_scatternd}, {"ScatterElements", cv_scatter_elements},
    {"Scatter", cv_scatter_elements}, {"Einsum", cv_einsum},
    {"MeanVarianceNormalization", cv_mvn}, {"ReverseSequence", cv_reverse_sequence},
    {"Softmax", cv_softmax}, {"LogSoftmax", cv_logsoftmax}, {"Hardmax", cv_hardmax},
    {"TopK", cv_topk},
    {NULL, NULL}};
