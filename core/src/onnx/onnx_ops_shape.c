/* onnx_ops_shape.c — ONNX's shape and tensor ops (Reshape, Slice, Gather, Pad, Shape,
 * Constant...) in terms of the op table's shape and indexing ops. Values that luamx takes
 * as attributes (shapes, starts, pads) must be constants here; Shape of a value whose
 * dims are known is one. */
#include "onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* axis a (may be negative) of a rank-n value, 0-based; -1 when out of range */
static int norm_axis(int64_t a, int n) {
  if (a < 0) a += n;
  return a >= 0 && a < n ? (int)a : -1;
}

static ox_val *reshape(ox *X, ox_val *v, int n, const int64_t *shape) {
  return ox_op1(X, "reshape", v, KV("shape", ox_tup(X, n, shape)));
}

/* ---- reshaping ---------------------------------------------------------------------- */

static int cv_reshape(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  int n;
  if (X->opset < 5) n = ox_attr_ints(X, "shape", MX_MAX_DIM, s);
  else if ((rc = ox_ints(X, IN_OR(1, nin, in), "the shape (input 2)", MX_MAX_DIM, s, &n))) return rc;
  if (n < 0) return ox_fail(X, "no shape");
  bool allowzero = ox_attr_i(X, "allowzero", 0) != 0;
  /* ONNX 0 copies the dim, -1 infers one: MXNet's codes 0 and -1 */
  for (int i = 0; i < n; i++)
    if (s[i] == 0 && allowzero) return ox_unsupported(X, "allowzero = 1 with a 0 in the shape");
  return ox_done(X, reshape(X, in[0], n, s), out);
}

static int cv_flatten(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  const mx_desc *d = &in[0]->d;
  if (d->ndim < 0) return ox_unsupported(X, "an input of unknown rank");
  int64_t axis = ox_attr_i(X, "axis", 1);
  if (axis < 0) axis += d->ndim;
  if (axis < 0 || axis > d->ndim) return ox_fail(X, "axis %lld out of range", (long long)axis);
  int64_t a = 1, b = 1;
  bool ka = true, kb = true;
  for (int i = 0; i < d->ndim; i++) {
    if (i < axis) { if (d->shape[i] < 0) ka = false; else a *= d->shape[i]; }
    else { if (d->shape[i] < 0) kb = false; else b *= d->shape[i]; }
  }
  if (!ka && !kb) return ox_unsupported(X, "Flatten of a value with unknown dims on both sides");
  int64_t s[2] = {ka ? a : -1, kb ? b : -1};
  return ox_done(X, reshape(X, in[0], 2, s), out);
}

static int cv_transpose(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t perm[MX_MAX_DIM];
  int n = ox_attr_ints(X, "perm", MX_MAX_DIM, perm);
  if (n == -2) return MX_EINVAL;
  if (n < 0) return ox_done(X, ox_op1(X, "transpose", in[0], NULL), out);
  return ox_done(X, ox_op1(X, "transpose", in[0], KV("axes", ox_tup(X, n, perm))), out);
}

static int axes_of(ox *X, int nin, ox_val **in, int64_t opset_input, int64_t *axes, int *n) {
  *n = ox_attr_ints(X, "axes", MX_MAX_DIM, axes);
  if (*n == -2) return MX_EINVAL;
  if (X->opset >= opset_input && IN_OR(1, nin, in))
    return ox_ints(X, in[1], "axes (input 2)", MX_MAX_DIM, axes, n);
  return MX_OK;
}

static int cv_squeeze(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t axes[MX_MAX_DIM];
  int n;
  if ((rc = axes_of(X, nin, in, 13, axes, &n))) return rc;
  if (n < 0) {
    if (!ox_known(&in[0]->d) && in[0]->d.ndim < 0) return ox_unsupported(X, "unknown rank");
    return ox_done(X, ox_op1(X, "squeeze", in[0], NULL), out);
  }
  if (n == 0) return ox_done(X, ox_op1(X, "copy", in[0], NULL), out);
  return ox_done(X, ox_op1(X, "squeeze", in[0], KV("axis", ox_tup(X, n, axes))), out);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int cv_unsqueeze(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t axes[MX_MAX_DIM];
  int n;
  if ((rc = axes_of(X, nin, in, 13, axes, &n))) return rc;
  if (n <= 0) return ox_fail(X, "no axes");
  int r = in[0]->d.ndim;
  if (r < 0) return ox_unsupported(X, "unknown rank");
  int outr = r + n;
  for (int i = 0; i < n; i++) {
    if (axes[i] < 0) axes[i] += outr;
    if (axes[i] < 0 || axes[i] >= outr) return ox_fail(X, "axis out of range");
  }
  qsort(axes, (size_t)n, sizeof *axes, cmp_i64);
  ox_val *v = in[0];
  for (int i = 0; i < n && v; i++)
    v = ox_op1(X, "expand_dims", v, KV("axis", ox_str(X, "%lld", (long long)axes[i])));
  return ox_done(X, v, out);
}

static int cv_concat(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 1) return ox_fail(X, "no inputs");
  ox_val *vs[64];
  int k = 0;
  for (int i = 0; i < nin; i++) {
    if (!in[i]) continue;
    /* an empty input adds nothing (ONNX allows a 0-length part) */
    if (in[i]->c && mx_tensor_size(in[i]->c) == 0 && nin > 1) continue;
    vs[k++] = in[i];
  }
  if (k == 0) vs[k++] = in[0];
  int r = vs[0]->d.ndim;
  int64_t axis = ox_attr_i(X, "axis", 0);
  if (r >= 0 && axis < 0) axis += r;
  if (k == 1) return ox_done(X, ox_op1(X, "copy", vs[0], NULL), out);
  return ox_done(X, ox_op(X, "concat", k, vs, KV("dim", ox_str(X, "%lld", (long long)axis),
                                               "num_args", ox_str(X, "%d", k))), out);
}

static int cv_split(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  const mx_desc *d = &in[0]->d;
  int axis = norm_axis(ox_attr_i(X, "axis", 0), d->ndim);
  if (axis < 0) return ox_fail(X, "axis out of range");
  int64_t sp[32];
  int n = ox_attr_ints(X, "split", 32, sp);
  if (n == -2) return MX_EINVAL;
  if (X->opset >= 13 && IN_OR(1, nin, in) && (rc = ox_ints(X, in[1], "split (input 2)", 32, sp, &n)))
    return rc;
  int64_t dim = d->shape[axis];
  if (nout < 1) return ox_fail(X, "a Split without outputs");
  if (n < 0) { /* equal parts (the last smaller with num_outputs, opset 18) */
    if (dim < 0) return ox_unsupported(X, "an unknown dim to split");
    int64_t parts = nout, each = (dim + parts - 1) / parts;
    n = nout;
    for (int i = 0; i < n; i++) sp[i] = i < n - 1 ? each : dim - each * (n - 1);
  }
  if (n != nout) return ox_fail(X, "%d split sizes for %d outputs", n, nout);
  int64_t begin = 0;
  for (int i = 0; i < n; i++) {
    ox_val *v = ox_op1(X, "slice_axis", in[0], KV("axis", ox_str(X, "%d", axis),
        "begin", ox_str(X, "%lld", (long long)begin), "end", ox_str(X, "%lld", (long long)(begin + sp[i]))));
    if (!v) return MX_EINVAL;
    out[i] = v;
    begin += sp[i];
  }
  return MX_OK;
}

static int cv_slice(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t st[MX_MAX_DIM], en[MX_MAX_DIM], ax[MX_MAX_DIM], sp[MX_MAX_DIM];
  int ns, ne, na = -1, np = -1;
  if (X->opset < 10) {
    ns = ox_attr_ints(X, "starts", MX_MAX_DIM, st);
    ne = ox_attr_ints(X, "ends", MX_MAX_DIM, en);
    na = ox_attr_ints(X, "axes", MX_MAX_DIM, ax);
    if (ns < 0 || ne < 0) return ox_fail(X, "starts and ends are required");
  } else {
    if ((rc = ox_ints(X, IN_OR(1, nin, in), "starts", MX_MAX_DIM, st, &ns)) ||
        (rc = ox_ints(X, IN_OR(2, nin, in), "ends", MX_MAX_DIM, en, &ne)))
      return rc;
    if (IN_OR(3, nin, in) && (rc = ox_ints(X, in[3], "axes", MX_MAX_DIM, ax, &na))) return rc;
    if (IN_OR(4, nin, in) && (rc = ox_ints(X, in[4], "steps", MX_MAX_DIM, sp, &np))) return rc;
  }
  if (ns != ne) return ox_fail(X, "starts and ends differ in length");
  int r = in[0]->d.ndim;
  if (r < 0) return ox_unsupported(X, "unknown rank");
  char bb[512], eb[512], sb[512];
  size_t kb = 0, ke = 0, ks = 0;
  /* MXNet's slice: one (begin, end, step) per axis from the first, None for "whole" */
  int64_t B[MX_MAX_DIM], E[MX_MAX_DIM], S[MX_MAX_DIM];
  bool hasB[MX_MAX_DIM] = {0}, hasE[MX_MAX_DIM] = {0};
  for (int i = 0; i < r; i++) S[i] = 1;
  int last = -1;
  for (int i = 0; i < ns; i++) {
    int a = norm_axis(na >= 0 ? ax[i] : i, r);
    if (a < 0) return ox_fail(X, "axis out of range");
    int64_t step = np >= 0 ? sp[i] : 1;
    if (step == 0) return ox_fail(X, "a step of 0");
    S[a] = step;
    int64_t dim = in[0]->d.shape[a];
    /* the sentinels ONNX exporters write for "to the end" (INT64_MAX, INT64_MIN, INT32_MAX) */
    bool big_e = en[i] >= INT32_MAX || en[i] <= -(int64_t)INT32_MAX;
    if (dim >= 0 && en[i] < -dim && step < 0) big_e = true;
    B[a] = st[i], hasB[a] = true;
    if (dim >= 0) { /* clamp as ONNX: to [0, dim] (positive step) or [-1, dim-1] */
      int64_t b = st[i] < 0 ? st[i] + dim : st[i];
      if (step > 0) b = b < 0 ? 0 : b > dim ? dim : b;
      else b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
      if (b < 0 && step < 0) { /* an empty result: begin before the first element */
        B[a] = 0, E[a] = 0, hasE[a] = true, S[a] = 1;
        if (a > last) last = a;
        continue;
      }
      B[a] = b;
    }
    if (!big_e) E[a] = en[i], hasE[a] = true;
    if (a > last) last = a;
  }
  for (int a = 0; a <= last; a++) {
    kb += (size_t)snprintf(bb + kb, sizeof bb - kb, a ? ", %s" : "(%s", hasB[a] ? ox_str(X, "%lld", (long long)B[a]) : "None");
    ke += (size_t)snprintf(eb + ke, sizeof eb - ke, a ? ", %s" : "(%s", hasE[a] ? ox_str(X, "%lld", (long long)E[a]) : "None");
    ks += (size_t)snprintf(sb + ks, sizeof sb - ks, a ? ", %lld" : "(%lld", (long long)S[a]);
  }
  if (last < 0) return ox_done(X, ox_op1(X, "copy", in[0], NULL), out);
  snprintf(bb + kb, sizeof bb - kb, ")");
  snprintf(eb + ke, sizeof eb - ke, ")");
  snprintf(sb + ks, sizeof sb - ks, ")");
  return ox_done(X, ox_op1(X, "slice", in[0], KV("begin", ox_str(X, "%s", bb),
      "end", ox_str(X, "%s", eb), "step", ox_str(X, "%s", sb))), out);
}

/* ONNX indices (0-based, negative from the end) as luamx's 1-based positions along a dim:
 * idx + 1, and take's "wrap" mode maps 0 (that is, -1 + 1) to the last. */
static ox_val *positions(ox *X, ox_val *idx) {
  ox_val *i64 = ox_cast(X, idx, MX_I64);
  return ox_op1(X, "_plus_scalar", i64, KV("scalar", "1"));
}

static int cv_gather(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int r = in[0]->d.ndim;
  int axis = norm_axis(ox_attr_i(X, "axis", 0), r);
  if (axis < 0) return ox_fail(X, "axis out of range");
  ox_val *p = positions(X, in[1]);
  return ox_done(X, ox_op2(X, "take", in[0], p, KV("axis", ox_str(X, "%d", axis), "mode", "wrap")), out);
}

static int cv_gathernd(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int64_t bd = ox_attr_i(X, "batch_dims", 0);
  /* MXNet's gather_nd indexes with the FIRST axis of indices, ONNX with the last */
  ox_val *idx = in[1];
  int r = idx->d.ndim;
  if (r < 1) return ox_unsupported(X, "indices of unknown rank");
  int64_t perm[MX_MAX_DIM];
  perm[0] = r - 1;
  for (int i = 1; i < r; i++) perm[i] = i - 1;
  ox_val *t = ox_op1(X, "transpose", idx, KV("axes", ox_tup(X, r, perm)));
  ox_val *p = positions(X, t); /* 1-based */
  if (bd > 0) { /* the batch axes' own coordinates first: grids over indices' batch shape */
    if (bd >= r || !ox_known(&idx->d)) return ox_unsupported(X, "batch_dims over unknown dims");
    mx_desc g = idx->d;
    g.ndim = r - 1; /* the shape of one coordinate row: indices' shape without the last */
    ox_val *rows[MX_MAX_DIM + 1];
    int nr = 0;
    for (int a = 0; a < bd; a++) {
      ox_val *gr = ox_coord_grid(X, &g, a);
      if (!(rows[nr++] = gr ? ox_op1(X, "expand_dims", gr, KV("axis", "0")) : NULL)) return MX_EINVAL;
    }
    rows[nr++] = p;
    p = ox_op(X, "concat", nr, rows, KV("dim", "0", "num_args", ox_str(X, "%d", nr)));
  }
  return ox_done(X, ox_op2(X, "gather_nd", in[0], p, NULL), out);
}

ox_val *ox_coord_grid(ox *X, const mx_desc *d, int axis) {
  mx_tensor *t;
  if (mx_tensor_new(d->ndim, d->shape, MX_I64, MX_CPU, 0, &t)) return NULL;
  int64_t n = mx_tensor_size(t), inner = 1, *p = mx_ptr(t);
  for (int i = axis + 1; i < d->ndim; i++) inner *= d->shape[i];
  for (int64_t k = 0; k < n; k++) p[k] = (k / inner) % d->shape[axis] + 1;
  return ox_const(X, t);
}

/* out[..., j, ...] = data[..., indices[..., j, ...], ...] along axis: gather_nd with the
 * full coordinates, the other axes' from constant grids */
static int cv_gather_elements(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *data = in[0], *idx = in[1];
  int r = data->d.ndim;
  int axis = norm_axis(ox_attr_i(X, "axis", 0), r);
  if (axis < 0 || idx->d.ndim != r) return ox_fail(X, "axis out of range or ranks differ");
  if (!ox_known(&idx->d) || data->d.shape[axis] < 0)
    return ox_unsupported(X, "GatherElements over unknown dims");
  ox_val *i64 = ox_cast(X, idx, MX_I64);
  /* negative indices count from the end; then 1-based */
  ox_val *neg = ox_op1(X, "_lesser_scalar", i64, KV("scalar", "0"));
  ox_val *fixd = ox_op2(X, "add", i64, ox_op1(X, "_mul_scalar", neg, KV("scalar",
                        ox_str(X, "%lld", (long long)data->d.shape[axis]))), NULL);
  ox_val *pos = ox_op1(X, "_plus_scalar", fixd, KV("scalar", "1"));
  ox_val *parts[MX_MAX_DIM];
  for (int a = 0; a < r; a++)
    if (!(parts[a] = a == axis ? pos : ox_coord_grid(X, &idx->d, a))) return MX_EINVAL;
  ox_val *coords = ox_op(X, "stack", r, parts, KV("axis", "0", "num_args", ox_str(X, "%d", r)));
  return ox_done(X, ox_op2(X, "gather_nd", data, coords, NULL), out);
}

/* Compress with a constant condition: take of the positions where it holds */
static int cv_compress(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *x = in[0];
  if (!in[1]->c) return ox_unsupported(X, "the condition must be a constant (its count of true "
                                       "values is the output's shape)");
  int64_t n = mx_tensor_size(in[1]->c);
  double *pos = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!pos) return mx_err(MX_ENOMEM, "onnx: out of memory");
  int k = 0;
  for (int64_t i = 0; i < n; i++) {
    double v;
    mx_tensor_get_f64(in[1]->c, i, &v);
    if (v != 0) pos[k++] = (double)(i + 1);
  }
  const Onnx__AttributeProto *a = ox_attr(X, "axis");
  int axis = 0;
  if (a && a->has_i) {
    if ((axis = norm_axis(a->i, x->d.ndim)) < 0) { free(pos); return ox_fail(X, "axis out of range"); }
  } else {
    x = ox_op1(X, "reshape", x, KV("shape", "(-1,)"));
  }
  ox_val *p = ox_const_vec(X, MX_I64, k, pos);
  free(pos);
  return ox_done(X, ox_op2(X, "take", x, p, KV("axis", ox_str(X, "%d", axis))), out);
}

static int cv_tile(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int64_t reps[MX_MAX_DIM];
  int n;
  if ((rc = ox_ints(X, in[1], "repeats", MX_MAX_DIM, reps, &n))) return rc;
  return ox_done(X, ox_op1(X, "tile", in[0], KV("reps", ox_tup(X, n, reps))), out);
}

static int cv_expand(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  int n;
  if ((rc = ox_ints(X, in[1], "shape", MX_MAX_DIM, s, &n))) return rc;
  ox_val *shape_v = ox_new(X);
  if (!shape_v) return mx_err(MX_ENOMEM, "onnx: out of memory");
  shape_v->d.ndim = n;
  for (int i = 0; i < n; i++) shape_v->d.shape[i] = s[i];
  ox_val *both[2] = {in[0], shape_v};
  mx_desc d;
  if ((rc = ox_bshape(X, 2, both, &d))) return rc;
  ox_val *v = ox_bcast_to(X, in[0], &d);
  if (v == in[0]) v = ox_op1(X, "copy", v, NULL);
  return ox_done(X, v, out);
}

ox_val *ox_pad(ox *X, ox_val *x, const char *mode, int64_t *pads, double value) {
  int r = x->d.ndim;
  if (r < 0) { ox_unsupported(X, "padding a value of unknown rank"); return NULL; }
  if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect"))
    { ox_unsupported(X, "mode '%s'", mode); return NULL; }
  /* negative pads crop: slice first */
  bool crop = false, any = false;
  for (int i = 0; i < 2 * r; i++) {
    if (pads[i] < 0) crop = true;
    if (pads[i] > 0) any = true;
  }
  if (crop) {
    if (!ox_known(&x->d)) { ox_unsupported(X, "negative pads on unknown dims"); return NULL; }
    int64_t b[MX_MAX_DIM], e[MX_MAX_DIM];
    for (int i = 0; i < r; i++) {
      b[i] = pads[i] < 0 ? -pads[i] : 0;
      e[i] = x->d.shape[i] - (pads[r + i] < 0 ? -pads[r + i] : 0);
      if (pads[i] < 0) pads[i] = 0;
      if (pads[r + i] < 0) pads[r + i] = 0;
    }
    x = ox_op1(X, "slice", x, KV("begin", ox_tup(X, r, b), "end", ox_tup(X, r, e)));
    if (!x) return NULL;
  }
  if (!any) return crop ? x : ox_op1(X, "copy", x, NULL);
  /* MXNet's Pad pads 4-D/5-D data on axes 3.. only: put the padded axes last, in a 4-D or
   * 5-D view with two leading unpadded axes */
  int first = r;
  for (int i = 0; i < r; i++)
    if (pads[i] || pads[r + i]) { first = i; break; }
  int k = r - first; /* padded tail: axes first..r-1 */
  if (k > 3) { ox_unsupported(X, "padding more than the last 3 axes"); return NULL; }
  if (!ox_known(&x->d)) { ox_unsupported(X, "padding a value with unknown dims"); return NULL; }
  int tailn = k == 3 ? 3 : 2, vr = tailn + 2;
  int64_t vs[5], pw[10] = {0}, lead = 1;
  for (int i = 0; i < r - tailn; i++) lead *= x->d.shape[i];
  vs[0] = lead, vs[1] = 1;
  for (int i = 0; i < tailn; i++) {
    int src = r - tailn + i;
    vs[2 + i] = src >= 0 ? x->d.shape[src] : 1;
    if (src >= 0) pw[4 + 2 * i] = pads[src], pw[5 + 2 * i] = pads[r + src];
  }
  ox_val *v = reshape(X, x, vr, vs);
  v = ox_op1(X, "pad", v, KV("mode", mode, "pad_width", ox_tup(X, 2 * vr, pw),
                              "constant_value", isinf(value) ? (value > 0 ? "inf" : "-inf") : ox_str(X, "%.17g", value)));
  int64_t os[MX_MAX_DIM];
  for (int i = 0; i < r; i++) os[i] = x->d.shape[i] + pads[i] + pads[r + i];
  return v ? reshape(X, v, r, os) : NULL;
}

static int cv_pad(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  char mb[16];
  const char *mode = ox_attr_s(X, "mode", "constant", mb, sizeof mb);
  int64_t pads[2 * MX_MAX_DIM];
  int n;
  double value = 0;
  if (X->opset < 11) {
    n = ox_attr_ints(X, "pads", 2 * MX_MAX_DIM, pads);
    if (n == -2) n = -1;
    value = ox_attr_f(X, "value", 0);
  } else {
    if ((rc = ox_ints(X, IN_OR(1, nin, in), "pads", 2 * MX_MAX_DIM, pads, &n))) return rc;
    int k;
    if (IN_OR(2, nin, in) && (rc = ox_f64s(X, in[2], "constant_value", 1, &value, &k))) return rc;
    if (IN_OR(3, nin, in)) return ox_unsupported(X, "the axes input");
  }
  ox_val *x = in[0];
  int r = x->d.ndim;
  if (r < 0 || n != 2 * r) return ox_fail(X, "pads has %d values for a rank-%d input", n, r);
  return ox_done(X, ox_pad(X, x, mode, pads, value), out);
}

/* ---- values -------------------------------------------------------------------------- */

static int cv_shape(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  const mx_desc *d = &in[0]->d;
  if (d->ndim < 0) return ox_unsupported(X, "Shape of a value of unknown rank");
  int64_t start = ox_attr_i(X, "start", 0), end = ox_attr_i(X, "end", d->ndim);
  if (start < 0) start += d->ndim;
  if (end < 0) end += d->ndim;
  if (start < 0) start = 0;
  if (end > d->ndim) end = d->ndim;
  double v[MX_MAX_DIM];
  int n = 0;
  for (int64_t i = start; i < end; i++) {
    if (d->shape[i] < 0)
      return ox_unsupported(X, "Shape of '%s' whose dim %lld is not known at import (give the "
                            "input's shape)", X->node->input[0], (long long)(i + 1));
    v[n++] = (double)d->shape[i];
  }
  return ox_done(X, ox_const_vec(X, MX_I64, n, v), out);
}

static int cv_size(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  if (!ox_known(&in[0]->d)) return ox_unsupported(X, "Size of a value with unknown dims");
  double n = 1;
  for (int i = 0; i < in[0]->d.ndim; i++) n *= (double)in[0]->d.shape[i];
  return ox_done(X, ox_scalar(X, MX_I64, n), out);
}

static int cv_constant(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nin, (void)in, (void)nout;
  const Onnx__AttributeProto *a;
  if ((a = ox_attr(X, "value")) && a->t) {
    mx_tensor *t;
    int rc = ox_tensor_from_proto(a->t, X->dir, X->file, &t);
    return rc ? rc : ox_done(X, ox_const(X, t), out);
  }
  if ((a = ox_attr(X, "value_float")) && a->has_f) return ox_done(X, ox_scalar(X, MX_F32, a->f), out);
  if ((a = ox_attr(X, "value_int")) && a->has_i) return ox_done(X, ox_scalar(X, MX_I64, (double)a->i), out);
  if ((a = ox_attr(X, "value_floats"))) {
    double v[4096];
    if (a->n_floats > 4096) return ox_unsupported(X, "value_floats longer than 4096");
    for (size_t i = 0; i < a->n_floats; i++) v[i] = a->floats[i];
    return ox_done(X, ox_const_vec(X, MX_F32, (int)a->n_floats, v), out);
  }
  if ((a = ox_attr(X, "value_ints"))) {
    double v[4096];
    if (a->n_ints > 4096) return ox_unsupported(X, "value_ints longer than 4096");
    for (size_t i = 0; i < a->n_ints; i++) v[i] = (double)a->ints[i];
    return ox_done(X, ox_const_vec(X, MX_I64, (int)a->n_ints, v), out);
  }
  return ox_unsupported(X, "a Constant of this kind (sparse or string)");
}

static int cv_constant_of_shape(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int64_t s[MX_MAX_DIM];
  int n, rc;
  if ((rc = ox_ints(X, IN_OR(0, nin, in), "shape", MX_MAX_DIM, s, &n))) return rc;
  const Onnx__AttributeProto *a = ox_attr(X, "value");
  int dt = MX_F32;
  double v = 0;
  if (a && a->t) {
    mx_tensor *t;
    if ((rc = ox_tensor_from_proto(a->t, X->dir, X->file, &t))) return rc;
    dt = mx_tensor_dtype(t);
    if (mx_tensor_size(t) != 1) {
      mx_tensor_release(t);
      return ox_fail(X, "value must hold one element");
    }
    mx_tensor_get_f64(t, 0, &v);
    mx_tensor_release(t);
  }
  return ox_done(X, ox_op(X, "full", 0, NULL, KV("shape", ox_tup(X, n, s), "dtype", mx_dtype_name(dt),
                                              "value", ox_str(X, "%.17g", v))), out);
}

static int cv_range(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 3);
  if (rc) return rc;
  double a, b, d;
  int n;
  if ((rc = ox_f64s(X, in[0], "start", 1, &a, &n)) || (rc = ox_f64s(X, in[1], "limit", 1, &b, &n)) ||
      (rc = ox_f64s(X, in[2], "delta", 1, &d, &n)))
    return rc;
  if (d == 0) return ox_fail(X, "delta is 0");
  int64_t cnt = (int64_t)ceil((b - a) / d);
  if (cnt < 0) cnt = 0;
  if (cnt > (1 << 24)) return ox_unsupported(X, "a range of %lld elements", (long long)cnt);
  int dt = in[0]->d.dtype;
  int64_t shape[1] = {cnt};
  mx_tensor *t;
  if ((rc = mx_tensor_new(1, shape, dt, MX_CPU, 0, &t))) return rc;
  for (int64_t i = 0; i < cnt; i++) mx_store_f64(mx_ptr(t), dt, i, a + (double)i * d);
  return ox_done(X, ox_const(X, t), out);
}

static int cv_cast(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  const char *why = "";
  int dt = ox_dtype((int32_t)ox_attr_i(X, "to", 0), &why);
  if (dt < 0) return ox_unsupported(X, "cast to %s", why);
  ox_val *v = ox_cast(X, in[0], dt);
  if (v == in[0]) v = ox_op1(X, "copy", v, NULL);
  return ox_done(X, v, out);
}

static int cv_castlike(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *v = ox_cast(X, in[0], in[1]->d.dtype);
  if (v == in[0]) v = ox_op1(X, "copy", v, NULL);
  return ox_done(X, v, out);
}

static int cv_dropout(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  /* inference: the identity, and a mask of ones */
  if (X->opset >= 12 && IN_OR(2, nin, in)) {
    double tm = 1, ratio = 0.5;
    int n;
    if (in[2]->c) ox_f64s(X, in[2], "training_mode", 1, &tm, &n);
    if (tm != 0 && IN_OR(1, nin, in) && !in[1]->c)
      return ox_unsupported(X, "the ratio must be a constant in training mode");
    if (IN_OR(1, nin, in)) ox_f64s(X, in[1], "ratio", 1, &ratio, &n);
    if (tm != 0 && ratio != 0) return ox_unsupported(X, "training_mode with a ratio > 0 (random masks)");
  }
  out[0] = in[0];
  if (nout > 1) {
    ox_val *m = ox_op1(X, "ones_like", in[0], NULL);
    if (!(out[1] = ox_cast(X, m, MX_BOOL))) return MX_EINVAL;
  }
  return MX_OK;
}

static int cv_cumsum(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  int64_t axis;
  int n;
  if ((rc = ox_ints(X, in[1], "axis", 1, &axis, &n))) return rc;
  int a = norm_axis(axis, in[0]->d.ndim);
  if (a < 0) return ox_fail(X, "axis out of range");
  const char *as = ox_str(X, "%d", a);
  ox_val *x = in[0];
  bool rev = ox_attr_i(X, "reverse", 0) != 0, excl = ox_attr_i(X, "exclusive", 0) != 0;
  if (rev) x = ox_op1(X, "reverse", x, KV("axis", ox_str(X, "(%d,)", a)));
  ox_val *c = ox_op1(X, "cumsum", x, KV("axis", as, "dtype", mx_dtype_name(x ? x->d.dtype : 0)));
  if (c && excl) c = ox_op2(X, "sub", c, x, NULL);
  if (c && rev) c = ox_op1(X, "reverse", c, KV("axis", ox_str(X, "(%d,)", a)));
  return ox_done(X, c, out);
}

static int cv_depth_to_space(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t b = ox_attr_i(X, "blocksize", 0);
  if (b < 1) return ox_fail(X, "blocksize %lld", (long long)b);
  char mb[8];
  const char *mode = ox_attr_s(X, "mode", "DCR", mb, sizeof mb);
  if (strcmp(mode, "DCR") == 0)
    return ox_done(X, ox_op1(X, "depth_to_space", in[0], KV("block_size", ox_str(X, "%lld", (long long)b))), out);
  /* CRD: (N, C/b², b, b, H, W) -> (N, C/b², H, b, W, b) */
  const mx_desc *d = &in[0]->d;
  if (d->ndim != 4 || !ox_known(d)) return ox_unsupported(X, "CRD mode on unknown dims");
  int64_t c = d->shape[1] / (b * b);
  int64_t s6[6] = {d->shape[0], c, b, b, d->shape[2], d->shape[3]}, p[6] = {0, 1, 4, 2, 5, 3};
  int64_t s4[4] = {d->shape[0], c, d->shape[2] * b, d->shape[3] * b};
  ox_val *v = reshape(X, in[0], 6, s6);
  v = ox_op1(X, "transpose", v, KV("axes", ox_tup(X, 6, p)));
  return ox_done(X, v ? reshape(X, v, 4, s4) : NULL, out);
}

static int cv_space_to_depth(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  return ox_done(X, ox_op1(X, "space_to_depth", in[0], KV("block_size",
      ox_str(X, "%lld", (long long)ox_attr_i(X, "blocksize", 0)))), out);
}

static int cv_onehot(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 3);
  if (rc) return rc;
  double depth, vals[2];
  int n;
  if ((rc = ox_f64s(X, in[1], "depth", 1, &depth, &n)) || (rc = ox_f64s(X, in[2], "values", 2, vals, &n)))
    return rc;
  if (n != 2) return ox_fail(X, "values must hold (off, on)");
  int r = in[0]->d.ndim;
  if (r < 0 || r >= MX_MAX_DIM) return ox_unsupported(X, "OneHot of an input of rank %d", r);
  int64_t axis = ox_attr_i(X, "axis", -1);
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) return ox_fail(X, "axis out of range");
  /* negative indices count from depth; positions are 1-based here */
  ox_val *i = ox_cast(X, in[0], MX_I64);
  ox_val *neg = ox_op1(X, "_lesser_scalar", i, KV("scalar", "0"));
  ox_val *fix = ox_op2(X, "add", i, ox_op1(X, "_mul_scalar", neg, KV("scalar", ox_str(X, "%.17g", depth))), NULL);
  ox_val *p = ox_op1(X, "_plus_scalar", fix, KV("scalar", "1"));
  ox_val *v = ox_op1(X, "one_hot", p, KV("depth", ox_str(X, "%lld", (long long)depth),
      "on_value", ox_str(X, "%.17g", vals[1]), "off_value", ox_str(X, "%.17g", vals[0]),
      "dtype", mx_dtype_name(in[2]->d.dtype)));
  if (v && axis != r) {
    int64_t perm[MX_MAX_DIM];
    int k = 0;
    for (int j = 0; j <= r; j++) {
      if (j == axis) perm[j] = r;
      else perm[j] = k++;
    }
    v = ox_op1(X, "transpose", v, KV("axes", ox_tup(X, r + 1, perm)));
  }
  return ox_done(X, v, out);
}

static int cv_eyelike(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  const mx_desc *d = &in[0]->d;
  if (d->ndim != 2 || !ox_known(d)) return ox_unsupported(X, "EyeLike of unknown dims");
  int dt = d->dtype;
  const Onnx__AttributeProto *a = ox_attr(X, "dtype");
  if (a && a->has_i) {
    const char *why;
    if ((dt = ox_dtype((int32_t)a->i, &why)) < 0) return ox_unsupported(X, "dtype %s", why);
  }
  return ox_done(X, ox_op(X, "eye", 0, NULL, KV("N", ox_str(X, "%lld", (long long)d->shape[0]),
      "M", ox_str(X, "%lld", (long long)d->shape[1]), "k", ox_str(X, "%lld", (long long)ox_attr_i(X, "k", 0)),
      "dtype", mx_dtype_name(dt))), out);
}

static int cv_if(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  double c;
  int n;
  const Onnx__AttributeProto *tb = ox_attr(X, "then_branch"), *eb = ox_attr(X, "else_branch");
  if (!tb || !tb->g || !eb || !eb->g) return ox_fail(X, "a branch is missing");
  if (in[0]->c) {
    if ((rc = ox_f64s(X, in[0], "cond", 1, &c, &n))) return rc;
    return ox_subgraph(X, c != 0 ? tb->g : eb->g, nout, out);
  }
  /* a condition known at run time: both branches (they have no side effects), then a
   * selection, when they give values of one shape and type */
  if (nout > 32) return ox_unsupported(X, "If with more than 32 outputs");
  ox_val *t[32], *e[32];
  const Onnx__NodeProto *self = X->node;
  if ((rc = ox_subgraph(X, tb->g, nout, t))) return rc;
  X->node = self;
  if ((rc = ox_subgraph(X, eb->g, nout, e))) return rc;
  X->node = self;
  for (int k = 0; k < nout; k++) {
    if (t[k]->d.dtype != e[k]->d.dtype || t[k]->d.ndim != e[k]->d.ndim || !ox_known(&t[k]->d))
      return ox_unsupported(X, "If on a run-time condition whose branches differ in shape or type");
    for (int i = 0; i < t[k]->d.ndim; i++)
      if (t[k]->d.shape[i] != e[k]->d.shape[i])
        return ox_unsupported(X, "If on a run-time condition whose branches differ in shape");
    ox_val *cond = ox_bcast_to(X, ox_cast(X, in[0], t[k]->d.dtype), &t[k]->d);
    ox_val *ins[3] = {cond, t[k], e[k]};
    if (!cond || !(out[k] = ox_op(X, "where", 3, ins, NULL))) return MX_EINVAL;
  }
  return MX_OK;
}

const ox_conv_entry ox_ops_shape[] = {
    {"Reshape", cv_reshape}, {"Flatten", cv_flatten}, {"Transpose", cv_transpose},
    {"Squeeze", cv_squeeze}, {"Unsqueeze", cv_unsqueeze}, {"Concat", cv_concat},
    {"Split", cv_split}, {"Slice", cv_slice}, {"Gather", cv_gather}, {"GatherND", cv_gathernd},
    {"GatherElements", cv_gather_elements}, {"Compress", cv_compress},
    {"Tile", cv_tile}, {"Expand", cv_expand}, {"Pad", cv_pad}, {"Shape", cv_shape},
    {"Size", cv_size}, {"Constant", cv_constant}, {"ConstantOfShape", cv_constant_of_shape},
    {"Range", cv_range}, {"Cast", cv_cast}, {"CastLike", cv_castlike}, {"Dropout", cv_dropout},
    {"CumSum", cv_cumsum}, {"DepthToSpace", cv_depth_to_space},
    {"SpaceToDepth", cv_space_to_depth}, {"OneHot", cv_onehot}, {"EyeLike", cv_eyelike},
    {"If", cv_if},
    {NULL, NULL}};
