/* kernels/cpu/sequence.c — fast sequence ops and CTC loss.
 * sequence_mask / last / reverse move whole contiguous blocks of R elements (the trailing
 * dims) with memcpy, the batch split over the intra-op pool; mask's fill value is written
 * in the data's dtype (f32/f64/int32/int64/uint8/int8; f16/bf16 run the reference).
 * ctc_loss: the alpha/beta recursion in log space (probability space with per-step
 * rescaling loses paths for long, peaked sequences: ratios within one step underflow),
 * over the label symbols' log-probabilities gathered once per step into a (T, S) table,
 * the posterior summed linearly (exp(alpha + beta - log p) <= 1). Sequences run in
 * parallel, each with its own workspace. Lengths and labels are checked before
 * any work starts (one pass, on the calling thread). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* Reads and checks the N lengths (or fills T): integral in lo..T. */
static int read_lengths(const char *op, const char *what, const mx_tensor *l, int64_t N,
                        int64_t lo, int64_t T, int64_t *len) {
  if (!l) {
    for (int64_t n = 0; n < N; n++) len[n] = T;
    return MX_OK;
  }
  const void *lp = mx_ptr(l);
  for (int64_t n = 0; n < N; n++) {
    double v = l->dtype == MX_I64 ? (double)((const int64_t *)lp)[n]
             : l->dtype == MX_I32 ? (double)((const int32_t *)lp)[n]
             : l->dtype == MX_F32 ? (double)((const float *)lp)[n]
             : mx_load_f64(lp, l->dtype, n);
    int64_t k = (int64_t)v;
    if (!(v >= (double)lo && v <= (double)T) || (double)k != v)
      return mx_err(MX_EINVAL, "%s: %s[%lld] is %g, expected an integer in %lld..%lld "
                    "(T = %lld)", op, what, (long long)n + 1, v, (long long)lo, (long long)T,
                    (long long)T);
    len[n] = k;
  }
  return MX_OK;
}

typedef struct {
  int ax;
  int64_t T, N, R;
  size_t es, blk; /* element size, bytes of one (t, n) block */
  const char *x;
  char *o;
  const int64_t *len;
  const void *fill; /* one element of the mask value */
  int kind;         /* 0 mask, 1 reverse */
} sq_job;

static size_t blk_off(const sq_job *j, int64_t t, int64_t n) {
  return (size_t)(j->ax == 0 ? t * j->N + n : n * j->T + t) * j->blk;
}

static void sq_range(int64_t b, int64_t e, void *vctx) {
  const sq_job *j = vctx;
  for (int64_t n = b; n < e; n++) {
    int64_t L = j->len[n];
    if (j->kind == 0) {
      for (int64_t t = 0; t < L; t++)
        if (j->o != j->x) memcpy(j->o + blk_off(j, t, n), j->x + blk_off(j, t, n), j->blk);
      for (int64_t t = L; t < j->T; t++) {
        char *d = j->o + blk_off(j, t, n);
        for (int64_t r = 0; r < j->R; r++) memcpy(d + (size_t)r * j->es, j->fill, j->es);
      }
    } else { /* reverse: x and o never alias here (a copy is made for out= data) */
      for (int64_t t = 0; t < L; t++)
        memcpy(j->o + blk_off(j, t, n), j->x + blk_off(j, L - 1 - t, n), j->blk);
      for (int64_t t = L; t < j->T; t++)
        memcpy(j->o + blk_off(j, t, n), j->x + blk_off(j, t, n), j->blk);
    }
  }
}

static int sq_run(const char *op, const mx_kctx *ctx, bool use, mx_tensor *const *in, int nin,
                  const mx_tensor *o, int kind, const void *fill) {
  const mx_tensor *x = in[0];
  sq_job j;
  j.ax = ctx->info.axis;
  j.T = x->shape[j.ax];
  j.N = x->shape[1 - j.ax];
  j.R = 1;
  for (int d = 2; d < x->ndim; d++) j.R *= x->shape[d];
  j.es = mx_dtype_size(x->dtype);
  j.blk = (size_t)j.R * j.es;
  j.kind = kind;
  j.fill = fill;
  int64_t *len = malloc(sizeof(int64_t) * (size_t)(j.N + 1));
  if (!len) return mx_err(MX_ENOMEM, "%s: out of memory", op);
  int rc = read_lengths(op, "sequence_length", use && nin > 1 ? in[1] : NULL, j.N, 0, j.T, len);
  void *copy = NULL;
  if (!rc && kind == 1 && mx_ptr(x) == mx_ptr(o) && x->size) {
    copy = malloc(mx_nbytes(x));
    if (!copy) rc = mx_err(MX_ENOMEM, "%s: out of memory", op);
    else memcpy(copy, mx_ptr(x), mx_nbytes(x));
  }
  if (!rc && x->size) {
    j.x = copy ? copy : mx_ptr(x);
    j.o = mx_ptr(o);
    j.len = len;
    int64_t per = j.T * j.R;
    mx_parallel_for(j.N, per >= 4096 ? 1 : 4096 / (per ? per : 1), sq_range, &j);
  }
  free(copy);
  free(len);
  return rc;
}

int mx_cpu_sequence_mask(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  const struct mx_params_sequence_mask *sp = p;
  union { float f; double d; int32_t i; int64_t l; uint8_t u; int8_t c; } v;
  double val = sp->value;
  switch (in[0]->dtype) {
  case MX_F32: v.f = (float)val; break;
  case MX_F64: v.d = val; break;
  /* integer data: the value converted as the reference's store does (truncation) */
  case MX_I32: case MX_I64: case MX_U8: case MX_I8: {
    char one[8];
    mx_store_f64(one, in[0]->dtype, 0, val);
    memcpy(&v, one, mx_dtype_size(in[0]->dtype));
    break;
  }
  default: return MX_DECLINE;
  }
  return sq_run("sequence_mask", ctx, sp->use_sequence_length, in, nin, out[0], 0, &v);
}

int mx_cpu_sequence_reverse(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_sequence_reverse *sp = p;
  return sq_run("sequence_reverse", ctx, sp->use_sequence_length, in, nin, out[0], 1, NULL);
}

int mx_cpu_sequence_last(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_sequence_last *sp = p;
  const mx_tensor *x = in[0];
  int ax = ctx->info.axis;
  int64_t T = x->shape[ax], N = x->shape[1 - ax], R = 1;
  for (int d = 2; d < x->ndim; d++) R *= x->shape[d];
  size_t blk = (size_t)R * mx_dtype_size(x->dtype);
  int64_t *len = malloc(sizeof(int64_t) * (size_t)(N + 1));
  if (!len) return mx_err(MX_ENOMEM, "sequence_last: out of memory");
  int rc = read_lengths("sequence_last", "sequence_length",
                        sp->use_sequence_length && nin > 1 ? in[1] : NULL, N, 1, T, len);
  if (!rc && x->size) {
    const char *src = mx_ptr(x);
    char *dst = mx_ptr(out[0]);
    for (int64_t n = 0; n < N; n++) { /* one block per sequence: memory bound, no threads */
      int64_t t = len[n] - 1;
      memcpy(dst + (size_t)n * blk, src + (size_t)(ax == 0 ? t * N + n : n * T + t) * blk, blk);
    }
  }
  free(len);
  return rc;
}

/* ---------------------------------------------------------------- ctc_loss */
typedef struct {
  const struct mx_params_ctc_loss *sp;
  const mx_tensor *x, *og, *out;
  int64_t T, N, C, Lmax, blank;
  const int64_t *Tn, *Ln, *lab; /* per sequence; lab (N, Lmax) */
  int failed;                   /* a worker's allocation failed */
} ctc_job;

/* Label with blanks at s. */
#define EXT(s) ((s) & 1 ? lab[(s) >> 1] : blank)

/* log(e^x + e^y) and log(e^x + e^y + e^z), -inf safe: the largest term factored out, so
 * one exp fewer than terms (and log1p). */
static inline double lse2(double x, double y) {
  double m = x > y ? x : y, d = x > y ? y - x : x - y;
  if (m == -INFINITY) return m;
  return m + log1p(exp(d));
}
static inline double lse3(double x, double y, double z) {
  double m, u, v;
  if (x >= y && x >= z) { m = x; u = y; v = z; }
  else if (y >= z) { m = y; u = x; v = z; }
  else { m = z; u = x; v = y; }
  if (m == -INFINITY || m != m) return m + u + v; /* -inf, or NaN propagated */
  return m + log1p(exp(u - m) + exp(v - m));
}

/* One sequence. y: (T, C) log-softmax of each step; lq: (T, S) the log-probability of the
 * label-with-blanks symbol s at t (gathered once, so the recursions read one row); a, b:
 * (T, S) log alpha (emission at t included) / log beta (excluded); post: C doubles. */
static void ctc_one(const ctc_job *j, int64_t n, double *y, double *lq, double *a, double *b,
                    double *post) {
  const int64_t C = j->C, N = j->N, blank = j->blank, T = j->Tn[n], L = j->Ln[n];
  const int64_t S = 2 * L + 1, *lab = j->lab + n * j->Lmax;
  const bool f32 = j->x->dtype == MX_F32;
  const float *xf = mx_ptr(j->x);
  const double *xd = mx_ptr(j->x);
  bool nan = false;
  for (int64_t t = 0; t < T; t++) {
    const int64_t base = (t * N + n) * C;
    double m = -INFINITY, sum = 0, *yt = y + t * C;
    for (int64_t k = 0; k < C; k++) {
      yt[k] = f32 ? xf[base + k] : xd[base + k];
      m = yt[k] > m || yt[k] != yt[k] ? yt[k] : m;
    }
    for (int64_t k = 0; k < C; k++) sum += exp(yt[k] - m);
    double lz = m + log(sum);
    for (int64_t k = 0; k < C; k++) yt[k] -= lz;
    nan |= lz != lz || lz == INFINITY; /* a NaN or Inf activation: NaN, as the reference */
    for (int64_t s = 0; s < S; s++) lq[t * S + s] = yt[EXT(s)];
  }
  /* forward */
  double ll;
  if (nan) ll = NAN;
  else if (T == 0) ll = L == 0 ? 0 : -INFINITY;
  else {
    /* only the states that the start reaches by t (s <= 2t + 1) and that still reach
     * the end (s >= S - 2(T - t)) are computed; the others are -inf */
    for (int64_t s = 0; s < S; s++) a[s] = s < 2 ? lq[s] : -INFINITY;
    for (int64_t t = 1; t < T; t++) {
      const double *ap = a + (t - 1) * S, *q = lq + t * S;
      double *at = a + t * S;
      int64_t lo = S - 2 * (T - t), hi = 2 * t + 1;
      lo = lo < 0 ? 0 : lo;
      hi = hi > S - 1 ? S - 1 : hi;
      for (int64_t s = 0; s < lo; s++) at[s] = -INFINITY;
      for (int64_t s = hi + 1; s < S; s++) at[s] = -INFINITY;
      for (int64_t s = lo; s <= hi; s++) {
        double v;
        if (s == 0) v = ap[0];
        else if ((s & 1) && s >= 3 && lab[s >> 1] != lab[(s >> 1) - 1])
          v = lse3(ap[s], ap[s - 1], ap[s - 2]);
        else v = lse2(ap[s], ap[s - 1]);
        at[s] = v + q[s];
      }
    }
    const double *al = a + (T - 1) * S;
    ll = S > 1 ? lse2(al[S - 1], al[S - 2]) : al[0];
  }
  if (!j->og) {
    double v = -ll;
    if (j->out->dtype == MX_F32) ((float *)mx_ptr(j->out))[n] = (float)v;
    else ((double *)mx_ptr(j->out))[n] = v;
    return;
  }
  /* the gradient: zero past T and for a label without a path; NaN for a NaN loss */
  const double g = mx_load_f64(mx_ptr(j->og), j->og->dtype, n);
  float *gf = mx_ptr(j->out);
  double *gd = mx_ptr(j->out);
  for (int64_t t = 0; t < j->T; t++) {
    const int64_t base = (t * N + n) * C;
    const double fill = t < T && nan ? NAN : 0;
    for (int64_t k = 0; k < C; k++) {
      if (f32) gf[base + k] = (float)fill;
      else gd[base + k] = fill;
    }
  }
  if (nan || T == 0 || ll == -INFINITY) return;
  /* beta: only the states that still reach the end (s >= S - 2 - 2(T - 1 - t)) */
  for (int64_t s = 0; s < S; s++) b[(T - 1) * S + s] = s >= S - 2 ? 0 : -INFINITY;
  for (int64_t t = T - 2; t >= 0; t--) {
    const double *bn = b + (t + 1) * S, *q = lq + (t + 1) * S;
    double *bt = b + t * S;
    int64_t lo = S - 2 - 2 * (T - 1 - t);
    lo = lo < 0 ? 0 : lo;
    for (int64_t s = 0; s < lo; s++) bt[s] = -INFINITY;
    for (int64_t s = lo; s < S; s++) {
      double u = bn[s] + q[s];
      double v = s + 1 < S ? bn[s + 1] + q[s + 1] : -INFINITY;
      bt[s] = (s & 1) && s + 2 < S && lab[(s >> 1) + 1] != lab[s >> 1]
              ? lse3(u, v, bn[s + 2] + q[s + 2]) : lse2(u, v);
    }
  }
  /* d loss / d activation = softmax - the posterior of the class: the sum over the
   * symbols s of class k of alpha beta / p */
  for (int64_t t = 0; t < T; t++) {
    const int64_t base = (t * N + n) * C;
    const double *at = a + t * S, *bt = b + t * S, *yt = y + t * C;
    for (int64_t k = 0; k < C; k++) post[k] = 0;
    for (int64_t s = 0; s < S; s++) post[EXT(s)] += exp(at[s] + bt[s] - ll);
    for (int64_t k = 0; k < C; k++) {
      double d = g * (exp(yt[k]) - post[k]);
      if (f32) gf[base + k] = (float)d;
      else gd[base + k] = d;
    }
  }
}

static void ctc_range(int64_t b, int64_t e, void *vctx) {
  ctc_job *j = vctx;
  int64_t S = 2 * j->Lmax + 1, T1 = j->T ? j->T : 1;
  double *w = malloc(sizeof(double) * (size_t)(T1 * j->C + 3 * T1 * S + j->C));
  if (!w) { __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED); return; }
  double *lq = w + T1 * j->C, *a = lq + T1 * S, *bb = a + T1 * S, *post = bb + T1 * S;
  for (int64_t n = b; n < e; n++) ctc_one(j, n, w, lq, a, bb, post);
  free(w);
}

static int ctc_cpu(const char *op, const struct mx_params_ctc_loss *sp, mx_tensor *const *in,
                   const mx_tensor *og, const mx_tensor *out) {
  ctc_job j = {sp, in[0], og, out, in[0]->shape[0], in[0]->shape[1], in[0]->shape[2],
               in[1]->shape[1], 0, NULL, NULL, NULL, 0};
  if ((j.x->dtype != MX_F32 && j.x->dtype != MX_F64) || out->dtype != j.x->dtype)
    return MX_DECLINE;
  j.blank = sp->blank_label == MX_CTC_LOSS_BLANK_LABEL_FIRST ? 0 : j.C - 1;
  int k = 2;
  const mx_tensor *dl = sp->use_data_lengths ? in[k++] : NULL;
  const mx_tensor *ll = sp->use_label_lengths ? in[k++] : NULL;
  int64_t *Tn = malloc(sizeof(int64_t) * (size_t)(2 * j.N + j.N * j.Lmax + 1));
  if (!Tn) return mx_err(MX_ENOMEM, "%s: out of memory", op);
  int64_t *Ln = Tn + j.N, *lab = Ln + j.N;
  int rc = read_lengths(op, "data_lengths", dl, j.N, 0, j.T, Tn);
  if (!rc && ll) rc = read_lengths(op, "label_lengths", ll, j.N, 0, j.Lmax, Ln);
  const mx_tensor *lt = in[1];
  const double pad = j.blank == 0 ? 0 : -1;
  for (int64_t n = 0; !rc && n < j.N; n++) {
    if (!ll) Ln[n] = j.Lmax;
    for (int64_t i = 0; i < j.Lmax; i++) {
      double v = mx_load_f64(mx_ptr(lt), lt->dtype, n * j.Lmax + i);
      if (!ll && v == pad) { Ln[n] = i; break; }
      if (i >= Ln[n]) break;
      int64_t c = (int64_t)v;
      if (!(v >= 0 && v < (double)j.C) || (double)c != v) {
        rc = mx_err(MX_EINVAL, "%s: label[%lld][%lld] is %g, expected a class in 0..%lld", op,
                    (long long)n + 1, (long long)i + 1, v, (long long)j.C - 1);
        break;
      }
      if (c == j.blank) {
        rc = mx_err(MX_EINVAL, "%s: label[%lld][%lld] is %g, the blank (blank_label = %s)", op,
                    (long long)n + 1, (long long)i + 1, v, j.blank == 0 ? "first" : "last");
        break;
      }
      lab[n * j.Lmax + i] = c;
    }
  }
  if (!rc && j.N) {
    j.Tn = Tn;
    j.Ln = Ln;
    j.lab = lab;
    int64_t work = j.T * j.C + j.T * (2 * j.Lmax + 1);
    mx_parallel_for(j.N, work >= 8192 ? 1 : 8192 / (work ? work : 1), ctc_range, &j);
    if (j.failed) rc = mx_err(MX_ENOMEM, "%s: out of memory", op);
  }
  free(Tn);
  return rc;
}


int mx_cpu_ctc_loss(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)nout;
  return ctc_cpu("ctc_loss", p, in, NULL, out[0]);
}

int mx_cpu_ctc_loss_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  (void)nout;
  return ctc_cpu("ctc_loss_backward", p, in + 1, in[0], out[0]);
}
