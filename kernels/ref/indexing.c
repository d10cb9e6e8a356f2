/* kernels/ref/indexing.c — reference pick/take/one_hot (+ backward). Index tensors
 * hold 1-based positions (any numeric dtype, truncated toward zero); mode clip
 * clamps them to the axis, wrap takes them modulo its length, raise (take) fails. */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>
#include <string.h>

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
