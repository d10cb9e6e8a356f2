/* kernels/ref/shape.c — reference layout kernels (element by element through
 * mx_load_f64/mx_store_f64) and the view builders the cpu kernels share.
 * Each op is "out = in gathered through a view" (see shape.h) except concat, stack
 * and the slice assignments, written out below. */
#include "mx_ops_gen.h"
#include "ref.h"
#include "shape.h"

#include <string.h>

void mx_view_contig(mx_view *v, int ndim, const int64_t *shape) {
  v->ndim = ndim;
  v->base = 0;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v->shape[d] = shape[d];
    v->stride[d] = st;
    st *= shape[d];
  }
}

static void strides_of(const mx_tensor *x, int64_t *st) {
  int64_t s = 1;
  for (int d = x->ndim - 1; d >= 0; d--) { st[d] = s; s *= x->shape[d]; }
}

static int view_transpose(const mx_tensor *x, const int *perm, mx_view *v) {
  int64_t st[MX_MAX_DIM];
  strides_of(x, st);
  v->ndim = x->ndim;
  v->base = 0;
  for (int d = 0; d < x->ndim; d++) { v->shape[d] = x->shape[perm[d]]; v->stride[d] = st[perm[d]]; }
  return MX_OK;
}

static void view_slice(const mx_tensor *x, const int64_t *begin, const int64_t *step,
                       const int64_t *shape, mx_view *v) {
  int64_t st[MX_MAX_DIM];
  strides_of(x, st);
  v->ndim = x->ndim;
  v->base = 0;
  for (int d = 0; d < x->ndim; d++) {
    v->shape[d] = shape[d];
    v->stride[d] = st[d] * step[d];
    if (shape[d]) v->base += begin[d] * st[d];
  }
}

int mx_view_slice_region(const char *op, const mx_tensor *x, const mx_tuple *B, const mx_tuple *E,
                         const mx_tuple *S, mx_view *v) {
  int64_t b[MX_MAX_DIM], st[MX_MAX_DIM], s[MX_MAX_DIM];
  mx_desc xd;
  mx_desc_from(&xd, x);
  int rc = mx_slice_resolve(op, &xd, B, E, S, b, st, s);
  if (rc) return rc;
  view_slice(x, b, st, s, v);
  return MX_OK;
}

void mx_view_bcast(mx_view *v, const mx_tensor *value, const mx_view *region) {
  int64_t st[MX_MAX_DIM];
  strides_of(value, st);
  v->ndim = region->ndim;
  v->base = 0;
  for (int d = 0; d < region->ndim; d++) {
    int iv = d - (region->ndim - value->ndim);
    v->shape[d] = region->shape[d];
    v->stride[d] = iv >= 0 && value->shape[iv] != 1 ? st[iv] : 0;
  }
}

/* The gather view of x for the single-input layout ops. */
int mx_view_for(const char *op, const void *p, const mx_tensor *x, const mx_tensor *out,
                mx_view *v) {
  int64_t st[MX_MAX_DIM];
  strides_of(x, st);
  if (!strcmp(op, "transpose")) {
    int perm[MX_MAX_DIM];
    int rc = mx_shape_perm(op, &((const struct mx_params_transpose *)p)->axes, x->ndim, perm);
    if (rc) return rc;
    return view_transpose(x, perm, v);
  }
  if (!strcmp(op, "swapaxes")) {
    const struct mx_params_swapaxes *P = p;
    int perm[MX_MAX_DIM];
    for (int d = 0; d < x->ndim; d++) perm[d] = d;
    int64_t a = P->dim1 < 0 ? P->dim1 + x->ndim : P->dim1, b = P->dim2 < 0 ? P->dim2 + x->ndim : P->dim2;
    perm[a] = (int)b;
    perm[b] = (int)a;
    return view_transpose(x, perm, v);
  }
  if (!strcmp(op, "slice")) {
    const struct mx_params_slice *P = p;
    return mx_view_slice_region(op, x, &P->begin, &P->end, &P->step, v);
  }
  if (!strcmp(op, "slice_axis")) {
    const struct mx_params_slice_axis *P = p;
    int64_t a = P->axis < 0 ? P->axis + x->ndim : P->axis;
    int64_t b[MX_MAX_DIM] = { 0 }, s1[MX_MAX_DIM];
    for (int d = 0; d < x->ndim; d++) s1[d] = 1;
    int64_t len;
    mx_slice_axis_bounds(x->shape[a], P->begin, P->has_end ? P->end : MX_SLICE_NONE, 1, &b[a], &len);
    view_slice(x, b, s1, out->shape, v);
    return MX_OK;
  }
  if (!strcmp(op, "flip")) {
    const struct mx_params_flip *P = p;
    mx_view_contig(v, x->ndim, x->shape);
    int n = P->axis.n < 0 ? x->ndim : P->axis.n; /* no axis: every axis (NumPy) */
    for (int i = 0; i < n; i++) {
      int64_t a = P->axis.n < 0 ? i : P->axis.v[i] < 0 ? P->axis.v[i] + x->ndim : P->axis.v[i];
      if (x->shape[a] == 0) continue;
      v->base += (x->shape[a] - 1) * v->stride[a];
      v->stride[a] = -v->stride[a];
    }
    return MX_OK;
  }
  if (!strcmp(op, "tile")) { /* out axis i = (reps_i, dim_i): the rep index has stride 0 */
    int n = out->ndim;
    v->ndim = 2 * n;
    v->base = 0;
    for (int i = 0; i < n; i++) {
      int ix = i - (n - x->ndim);
      int64_t dim = ix >= 0 ? x->shape[ix] : 1;
      v->shape[2 * i] = dim ? out->shape[i] / dim : 0;
      v->stride[2 * i] = 0;
      v->shape[2 * i + 1] = dim;
      v->stride[2 * i + 1] = ix >= 0 ? st[ix] : 0;
    }
    return MX_OK;
  }
  if (!strcmp(op, "repeat")) { /* axis a = (dim_a, repeats): the repeat index has stride 0 */
    const struct mx_params_repeat *P = p;
    if (!P->has_axis) {
      v->ndim = 2;
      v->base = 0;
      v->shape[0] = x->size; v->stride[0] = 1;
      v->shape[1] = P->repeats; v->stride[1] = 0;
      return MX_OK;
    }
    int64_t a = P->axis < 0 ? P->axis + x->ndim : P->axis;
    v->ndim = x->ndim + 1;
    v->base = 0;
    for (int d = 0, j = 0; d < x->ndim; d++) {
      v->shape[j] = x->shape[d]; v->stride[j++] = st[d];
      if (d == a) { v->shape[j] = P->repeats; v->stride[j++] = 0; }
    }
    return MX_OK;
  }
  /* reshape, reshape_like, flatten, expand_dims, squeeze, copy, cast: same order */
  mx_view_contig(v, x->ndim, x->shape);
  return MX_OK;
}

/* out[i] = x[view(i)], converting dtype */
static int gather(const char *op, const void *p, const mx_tensor *x, mx_tensor *o) {
  mx_view v;
  int rc = mx_view_for(op, p, x, o, &v);
  if (rc) return rc;
  const void *px = mx_ptr(x);
  void *po = mx_ptr(o);
  for (int64_t i = 0; i < o->size; i++) {
    int64_t r = i, off = v.base;
    for (int d = v.ndim - 1; d >= 0; d--) {
      off += (r % v.shape[d]) * v.stride[d];
      r /= v.shape[d];
    }
    mx_store_f64(po, o->dtype, i, mx_load_f64(px, x->dtype, off));
  }
  return MX_OK;
}

#define GATHER(name)                                                                     \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)nin; (void)nout;                                                               \
    return gather(#name, p, in[0], out[0]);                                              \
  }
GATHER(reshape)
GATHER(reshape_like)
GATHER(flatten)
GATHER(expand_dims)
GATHER(squeeze)
GATHER(copy)
GATHER(cast)
GATHER(transpose)
GATHER(swapaxes)
GATHER(slice)
GATHER(slice_axis)
GATHER(flip)
GATHER(tile)
GATHER(repeat)

/* concat: input k fills out[..., off_k : off_k + dim_k, ...] along axis dim */
int mx_ref_concat(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_concat *P = p;
  mx_tensor *o = out[0];
  int a = (int)(P->dim < 0 ? P->dim + o->ndim : P->dim);
  int64_t inner = 1;
  for (int d = a + 1; d < o->ndim; d++) inner *= o->shape[d];
  int64_t off = 0;
  for (int k = 0; k < nin; k++) {
    const mx_tensor *x = in[k];
    int64_t blk = x->shape[a] * inner; /* contiguous run of x per outer index */
    for (int64_t i = 0; i < x->size; i++) {
      int64_t outer = i / blk, r = i % blk;
      mx_store_f64(mx_ptr(o), o->dtype, outer * o->shape[a] * inner + off * inner + r,
                   mx_load_f64(mx_ptr(x), x->dtype, i));
    }
    off += x->shape[a];
  }
  return MX_OK;
}

/* stack: input k becomes index k of the new axis */
int mx_ref_stack(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_stack *P = p;
  mx_tensor *o = out[0];
  int a = (int)(P->axis < 0 ? P->axis + o->ndim : P->axis);
  int64_t inner = 1;
  for (int d = a + 1; d < o->ndim; d++) inner *= o->shape[d];
  for (int k = 0; k < nin; k++)
    for (int64_t i = 0; i < in[k]->size; i++)
      mx_store_f64(mx_ptr(o), o->dtype, (i / inner) * nin * inner + k * inner + i % inner,
                   mx_load_f64(mx_ptr(in[k]), in[k]->dtype, i));
  return MX_OK;
}

static int64_t view_off(const mx_view *v, int64_t i) {
  int64_t off = v->base;
  for (int d = v->ndim - 1; d >= 0; d--) {
    off += (i % v->shape[d]) * v->stride[d];
    i /= v->shape[d];
  }
  return off;
}

/* out = data with the selected region replaced by value (broadcast) or a scalar */
static int assign(const char *op, const mx_tuple *B, const mx_tuple *E, const mx_tuple *S,
                  const mx_tensor *x, const mx_tensor *value, double scalar, mx_tensor *o) {
  mx_view r, vv;
  int rc = mx_view_slice_region(op, x, B, E, S, &r);
  if (rc) return rc;
  if (o->storage != x->storage || o->offset != x->offset)
    for (int64_t i = 0; i < x->size; i++)
      mx_store_f64(mx_ptr(o), o->dtype, i, mx_load_f64(mx_ptr(x), x->dtype, i));
  if (value) mx_view_bcast(&vv, value, &r);
  int64_t n = mx_shape_prod(r.ndim, r.shape);
  for (int64_t i = 0; i < n; i++) {
    double v = value ? mx_load_f64(mx_ptr(value), value->dtype, view_off(&vv, i)) : scalar;
    mx_store_f64(mx_ptr(o), o->dtype, view_off(&r, i), v);
  }
  return MX_OK;
}

int mx_ref_slice_assign(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_slice_assign *P = p;
  return assign("slice_assign", &P->begin, &P->end, &P->step, in[0], in[1], 0, out[0]);
}

int mx_ref_slice_assign_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                               mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_slice_assign_scalar *P = p;
  return assign("slice_assign_scalar", &P->begin, &P->end, &P->step, in[0], NULL, P->scalar,
                out[0]);
}

/* split: element i of piece k (row-major over the piece, squeezed or not: same order)
 * is element (outer, k * piece + j, inner) of the input, written out index by index. */
int mx_ref_split(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)p; (void)nin;
  const mx_tensor *x = in[0];
  int a = ctx->info.axis; /* normalised by inference */
  int64_t inner = 1;
  for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t piece = x->shape[a] / nout;
  for (int k = 0; k < nout; k++) {
    mx_tensor *o = out[k];
    for (int64_t i = 0; i < o->size; i++) {
      int64_t outer = i / (piece * inner), j = (i / inner) % piece, r = i % inner;
      int64_t src = (outer * x->shape[a] + k * piece + j) * inner + r;
      mx_store_f64(mx_ptr(o), o->dtype, i, mx_load_f64(mx_ptr(x), x->dtype, src));
    }
  }
  return MX_OK;
}
