/* kernels/ref/indexing.c — reference pick/take/one_hot, gather_nd/scatter_nd, slice_like,
 * diag (+ backward). Index tensors
 * hold 1-based positions (any numeric dtype, truncated toward zero); mode clip
 * clamps them to the axis, wrap takes them modulo its length, raise (take) fails. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <string.h>
#include <stdlib.h>

enum { MODE_CLIP, MODE_WRAP, MODE_RAISE };

#define I64_LIM 9223372036854775808.0 /* 2^63, exact in double */

/* 1-based index value -> 0-based position in [0, n); -1 for raise out of range.
 * NaN is index 1; values beyond int64 (Inf included) are out of range for raise, the
 * nearest end for clip, and for wrap (finite) taken modulo n exactly with fmod, Inf
 * giving position 0 (as NaN). Never converts an out-of-range double (undefined). */
static int64_t position(double v, int64_t n, int mode) {
  double t = v != v ? 1 : trunc(v);
  if (!(t > -I64_LIM && t < I64_LIM)) {
    if (mode == MODE_RAISE) return -1;
    if (mode == MODE_CLIP) t = t < 0 ? 1 : (double)n; /* clamped below */
    else if (n == 0 || isinf(t)) t = 1;
    else t = fmod(t, (double)n); /* exact; |t| < n, so the conversion below is in range */
  }
  int64_t i = (int64_t)t - 1; /* t > -2^63: no overflow */
  if (mode == MODE_WRAP) return n ? ((i % n) + n) % n : 0;
  if (mode == MODE_RAISE) return i >= 0 && i < n ? i : -1;
  return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* data viewed as (outer, n, inner) around axis a */
static void split3(const mx_tensor *d, int a, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < a; i++) *outer *= d->shape[i];
  for (int i = a + 1; i < d->ndim; i++) *inner *= d->shape[i];
  *n = d->shape[a];
}

static int norm(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

/* pick: out[o, i] = data[o, pos(index[o, i]), i] */
int mx_ref_pick(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_pick *P = p;
  const mx_tensor *d = in[0], *idx = in[1];
  int64_t outer, n, inner;
  split3(d, norm(P->axis, d->ndim), &outer, &n, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t k = o * inner + i;
      int64_t j = position(mx_load_f64(mx_ptr(idx), idx->dtype, k), n, P->mode);
      mx_store_f64(mx_ptr(out[0]), out[0]->dtype, k,
                   n ? mx_load_f64(mx_ptr(d), d->dtype, (o * n + j) * inner + i) : 0);
    }
  return MX_OK;
}

/* pick_backward: zeros of data's shape with ograd at the picked positions */
int mx_ref_pick_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                         mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_pick_backward *P = p;
  const mx_tensor *d = in[0], *idx = in[1], *g = in[2];
  mx_tensor *r = out[0];
  int64_t outer, n, inner;
  split3(d, norm(P->axis, d->ndim), &outer, &n, &inner);
  for (int64_t i = 0; i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
  if (n == 0) return MX_OK;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t k = o * inner + i;
      int64_t j = position(mx_load_f64(mx_ptr(idx), idx->dtype, k), n, P->mode);
      int64_t at = (o * n + j) * inner + i;
      mx_store_f64(mx_ptr(r), r->dtype, at,
                   mx_load_f64(mx_ptr(r), r->dtype, at) + mx_load_f64(mx_ptr(g), g->dtype, k));
    }
  return MX_OK;
}

/* take: out[o, m, i] = data[o, pos(indices[m]), i] */
int mx_ref_take(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_take *P = p;
  const mx_tensor *d = in[0], *idx = in[1];
  int64_t outer, n, inner;
  split3(d, norm(P->axis, d->ndim), &outer, &n, &inner);
  for (int64_t m = 0; m < idx->size; m++) {
    double v = mx_load_f64(mx_ptr(idx), idx->dtype, m);
    if (position(v, n, P->mode) < 0)
      return mx_err(MX_EINVAL, "take: index %g is out of range 1..%lld (mode raise)", v,
                    (long long)n);
  }
  /* elements are copied as bytes (exact for every dtype, int64 above 2^53 included);
   * converted through double only where out's dtype is not data's */
  size_t es = mx_dtype_size(d->dtype);
  bool same = out[0]->dtype == d->dtype;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t m = 0; m < idx->size; m++) {
      int64_t j = position(mx_load_f64(mx_ptr(idx), idx->dtype, m), n, P->mode);
      for (int64_t i = 0; i < inner; i++) {
        int64_t to = (o * idx->size + m) * inner + i, from = (o * n + j) * inner + i;
        if (same)
          memcpy((char *)mx_ptr(out[0]) + (size_t)to * es, (const char *)mx_ptr(d) + (size_t)from * es, es);
        else
          mx_store_f64(mx_ptr(out[0]), out[0]->dtype, to, mx_load_f64(mx_ptr(d), d->dtype, from));
      }
    }
  return MX_OK;
}

/* take_backward: zeros of data's shape, ograd rows added at their positions */
int mx_ref_take_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                         mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_take_backward *P = p;
  const mx_tensor *d = in[0], *idx = in[1], *g = in[2];
  mx_tensor *r = out[0];
  int64_t outer, n, inner;
  split3(d, norm(P->axis, d->ndim), &outer, &n, &inner);
  for (int64_t i = 0; i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t m = 0; m < idx->size; m++) {
      int64_t j = position(mx_load_f64(mx_ptr(idx), idx->dtype, m), n, P->mode);
      if (j < 0) continue;
      for (int64_t i = 0; i < inner; i++) {
        int64_t at = (o * n + j) * inner + i;
        mx_store_f64(mx_ptr(r), r->dtype, at,
                     mx_load_f64(mx_ptr(r), r->dtype, at) +
                         mx_load_f64(mx_ptr(g), g->dtype, (o * idx->size + m) * inner + i));
      }
    }
  return MX_OK;
}

/* one_hot: out[k, c] = on if c == indices[k] - 1 else off (out-of-range: all off) */
int mx_ref_one_hot(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_one_hot *P = p;
  const mx_tensor *idx = in[0];
  for (int64_t k = 0; k < idx->size; k++) {
    double v = trunc(mx_load_f64(mx_ptr(idx), idx->dtype, k)) - 1;
    for (int64_t c = 0; c < P->depth; c++)
      mx_store_f64(mx_ptr(out[0]), out[0]->dtype, k * P->depth + c,
                   (double)c == v ? P->on_value : P->off_value);
  }
  return MX_OK;
}

/* ---- gather_nd, scatter_nd, slice_like, diag ---- */

/* one element copied as bytes (exact for every dtype) when the dtypes agree, else
 * converted through double */
static void copy_elem(mx_tensor *to, int64_t t, const mx_tensor *from, int64_t f) {
  if (to->dtype == from->dtype) {
    size_t es = mx_dtype_size(to->dtype);
    memcpy((char *)mx_ptr(to) + (size_t)t * es, (const char *)mx_ptr(from) + (size_t)f * es, es);
  } else {
    mx_store_f64(mx_ptr(to), to->dtype, t, mx_load_f64(mx_ptr(from), from->dtype, f));
  }
}

/* Offsets (in elements of a rank-nd shape `sh`) of the Y = idx.size / M points that
 * indices (M, Y...) address, 1-based values; with neg, -n..-1 count from the end (-1 the
 * last, MXNet's gather_nd wraps negatives); an error naming op for one out of range. */
static int nd_offsets(const char *op, const mx_tensor *idx, int nd, const int64_t *sh,
                      bool neg, int64_t *off) {
  int64_t m = idx->shape[0], ny = m ? idx->size / m : 0;
  for (int64_t y = 0; y < ny; y++) {
    int64_t o = 0;
    for (int64_t j = 0; j < m; j++) {
      double v = mx_load_f64(mx_ptr(idx), idx->dtype, j * ny + y);
      double t = trunc(v);
      if (neg && t < 0 && t >= -(double)sh[j]) t += (double)sh[j] + 1;
      if (!(t >= 1 && t <= (double)sh[j]))
        return mx_err(MX_EINVAL, neg ? "%s: index %g on axis %lld is out of range 1..%lld "
                                       "(or -%lld..-1 from the end)"
                                     : "%s: index %g on axis %lld is out of range 1..%lld",
                      op, v, (long long)j + 1, (long long)sh[j], (long long)sh[j]);
      o = o * sh[j] + (int64_t)t - 1;
    }
    for (int j = (int)m; j < nd; j++) o *= sh[j];
    off[y] = o;
  }
  return MX_OK;
}

static int64_t *nd_alloc(const mx_tensor *idx) {
  int64_t m = idx->shape[0], ny = m ? idx->size / m : 0;
  return malloc(sizeof(int64_t) * (size_t)(ny ? ny : 1));
}

/* gather_nd: out[y, i] = data[off(y) + i] for i in the trailing block */
int mx_ref_gather_nd(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *d = in[0], *idx = in[1];
  int64_t *off = nd_alloc(idx);
  if (!off) return mx_err(MX_ENOMEM, "gather_nd: out of memory");
  int rc = nd_offsets("gather_nd", idx, d->ndim, d->shape, true, off);
  int64_t ny = idx->size / idx->shape[0], inner = ny ? out[0]->size / ny : 0;
  for (int64_t y = 0; !rc && y < ny; y++)
    for (int64_t i = 0; i < inner; i++)
      copy_elem(out[0], y * inner + i, d, off[y] + i);
  free(off);
  return rc;
}

/* gather_nd_backward: zeros of data's shape, ograd blocks added at their offsets */
int mx_ref_gather_nd_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *d = in[0], *idx = in[1], *g = in[2];
  mx_tensor *r = out[0];
  int64_t *off = nd_alloc(idx);
  if (!off) return mx_err(MX_ENOMEM, "gather_nd_backward: out of memory");
  int rc = nd_offsets("gather_nd_backward", idx, d->ndim, d->shape, true, off);
  for (int64_t i = 0; !rc && i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
  int64_t ny = idx->size / idx->shape[0], inner = ny ? g->size / ny : 0;
  for (int64_t y = 0; !rc && y < ny; y++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t at = off[y] + i;
      mx_store_f64(mx_ptr(r), r->dtype, at, mx_load_f64(mx_ptr(r), r->dtype, at) +
                   mx_load_f64(mx_ptr(g), g->dtype, y * inner + i));
    }
  free(off);
  return rc;
}

/* scatter_nd: zeros of shape, data blocks written at their offsets (the last one wins) */
int mx_ref_scatter_nd(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *d = in[0], *idx = in[1];
  mx_tensor *r = out[0];
  int64_t *off = nd_alloc(idx);
  if (!off) return mx_err(MX_ENOMEM, "scatter_nd: out of memory");
  int rc = nd_offsets("scatter_nd", idx, r->ndim, r->shape, false, off);
  for (int64_t i = 0; !rc && i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
  int64_t ny = idx->size / idx->shape[0], inner = ny ? d->size / ny : 0;
  for (int64_t y = 0; !rc && y < ny; y++)
    for (int64_t i = 0; i < inner; i++) copy_elem(r, off[y] + i, d, y * inner + i);
  free(off);
  return rc;
}

/* slice_like: out is a prefix box of data (same rank): out[k] = data[same multi-index] */
int mx_ref_slice_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *d = in[0];
  mx_tensor *r = out[0];
  for (int64_t k = 0; k < r->size; k++) {
    int64_t rest = k, from = 0, stride = 1;
    for (int i = r->ndim - 1; i >= 0; i--) {
      from += (rest % r->shape[i]) * stride;
      rest /= r->shape[i];
      stride *= d->shape[i];
    }
    copy_elem(r, k, d, from);
  }
  return MX_OK;
}

/* diag: 1-D data onto the k-th diagonal of zeros, or a 2-D matrix's k-th diagonal */
int mx_ref_diag(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_diag *P = p;
  const mx_tensor *d = in[0];
  mx_tensor *r = out[0];
  int64_t k = P->k, r0 = k < 0 ? -k : 0, c0 = k > 0 ? k : 0;
  if (d->ndim == 1) {
    for (int64_t i = 0; i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
    for (int64_t i = 0; i < d->size; i++)
      copy_elem(r, (r0 + i) * r->shape[1] + c0 + i, d, i);
    return MX_OK;
  }
  for (int64_t i = 0; i < r->size; i++) copy_elem(r, i, d, (r0 + i) * d->shape[1] + c0 + i);
  return MX_OK;
}

/* diag_backward: zeros of data's (2-D) shape with ograd on the k-th diagonal */
int mx_ref_diag_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_diag_backward *P = p;
  const mx_tensor *g = in[1];
  mx_tensor *r = out[0];
  int64_t k = P->k, r0 = k < 0 ? -k : 0, c0 = k > 0 ? k : 0;
  for (int64_t i = 0; i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
  for (int64_t i = 0; i < g->size; i++)
    copy_elem(r, (r0 + i) * r->shape[1] + c0 + i, g, i);
  return MX_OK;
}

/* ---------------------------------------------------------------- index_copy */

/* out = old with row index[i] (1-based) replaced by new's row i, in index order (the last
 * of repeated positions wins). Positions are checked before anything is written. */
int mx_ref_index_copy(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *old = in[0], *idx = in[1], *nw = in[2];
  mx_tensor *r = out[0];
  int64_t rows = old->shape[0], inner = rows ? old->size / rows : 0;
  for (int64_t i = 0; i < idx->size; i++) {
    double v = mx_load_f64(mx_ptr(idx), idx->dtype, i), t = trunc(v);
    if (!(t >= 1 && t <= (double)rows))
      return mx_err(MX_EINVAL, "index_copy: index %g (position %lld) is out of range 1..%lld",
                    v, (long long)i + 1, (long long)rows);
  }
  for (int64_t i = 0; i < old->size; i++) copy_elem(r, i, old, i);
  for (int64_t i = 0; i < idx->size; i++) {
    int64_t row = (int64_t)trunc(mx_load_f64(mx_ptr(idx), idx->dtype, i)) - 1;
    for (int64_t k = 0; k < inner; k++) copy_elem(r, row * inner + k, nw, i * inner + k);
  }
  return MX_OK;
}

/* ---- embedding ----------------------------------------------
 * Token ids are 0-based data (vocabularies, MXNet's Embedding), not 1-based positions:
 * an id outside [0, input_dim) (or NaN) is an error naming it (MXNet clips it silently). */
static int emb_row(const char *op, const mx_tensor *d, int64_t m, int64_t rows, int64_t *r) {
  double v = mx_load_f64(mx_ptr(d), d->dtype, m);
  double t = trunc(v);
  if (!(t >= 0 && t < (double)rows))
    return mx_err(MX_EINVAL, "%s: data[%lld] = %g is not a token id in [0, %lld) (input_dim "
                  "%lld; ids are 0-based)", op, (long long)m, v, (long long)rows, (long long)rows);
  *r = (int64_t)t;
  return MX_OK;
}

int mx_ref_embedding(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *d = in[0], *w = in[1];
  int64_t rows = w->shape[0], cols = w->shape[1];
  size_t row = (size_t)cols * mx_dtype_size(w->dtype); /* a byte copy: exact for int64 too */
  for (int64_t m = 0; m < d->size; m++) {
    int64_t r = 0;
    int rc = emb_row("embedding", d, m, rows, &r);
    if (rc) return rc;
    memcpy((char *)mx_ptr(out[0]) + (size_t)m * row, (const char *)mx_ptr(w) + (size_t)r * row, row);
  }
  return MX_OK;
}

int mx_ref_embedding_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *d = in[0], *g = in[2];
  mx_tensor *o = out[0];
  int64_t rows = o->shape[0], cols = o->shape[1];
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, 0);
  for (int64_t m = 0; m < d->size; m++) {
    int64_t r = 0;
    int rc = emb_row("embedding_backward", d, m, rows, &r);
    if (rc) return rc;
    for (int64_t j = 0; j < cols; j++)
      mx_store_f64(mx_ptr(o), o->dtype, r * cols + j,
                   mx_load_f64(mx_ptr(o), o->dtype, r * cols + j) +
                       mx_load_f64(mx_ptr(g), g->dtype, m * cols + j));
  }
  return MX_OK;
}
