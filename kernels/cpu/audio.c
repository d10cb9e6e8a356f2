/* kernels/cpu/audio.c — fast stft / istft and their gradients.
 * Each frame's transform is an FFT (Debian's kissfft, float32: kiss_fftr for real
 * signals of even length, kiss_fft otherwise); float64 runs a table DFT (cos/sin of the
 * n_fft roots, O(F n_fft) a frame), and so does a float32 frame holding a non-finite
 * value. Frames are independent: they run on the intra-op pool into a (frames, n_fft)
 * scratch, and the overlap-add that joins them runs over output positions (each sums its
 * <= n_fft / hop frames in order: no races, the same result whatever the thread count).
 * Layouts as kernels/ref/audio.c: signals (N, L), spectra (N, F, T, 2). */
#include "audio.h"
#include "internal.h"
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"

#include <float.h>
#include <kiss_fft.h>
#include <kiss_fftr.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double TWO_PI = 6.283185307179586476925286766559;

/* ---- one frame's transforms ------------------------------------------------------- */
typedef struct plan {
  int64_t n, F;
  bool f64, onesided, real; /* real: kiss_fftr applies (float32, even n) */
  kiss_fftr_cfg rf, ri;
  kiss_fft_cfg cf, ci;
  kiss_fft_scalar *rbuf;
  kiss_fft_cpx *cin, *cout;
  const double *cs, *sn; /* f64: the roots' cos / sin (shared, read-only) */
} plan;

static void plan_free(plan *p) {
  kiss_fftr_free(p->rf);
  kiss_fftr_free(p->ri);
  kiss_fft_free(p->cf);
  kiss_fft_free(p->ci);
  free(p->rbuf);
  free(p->cin);
  free(p->cout);
}

static int plan_init(plan *p, int64_t n, int64_t F, bool f64, bool onesided, const double *cs,
                     const double *sn) {
  memset(p, 0, sizeof *p);
  p->n = n, p->F = F, p->f64 = f64, p->onesided = onesided, p->cs = cs, p->sn = sn;
  if (f64) return 0;
  p->real = onesided && n % 2 == 0;
  int ni = (int)n;
  p->rbuf = malloc(sizeof(kiss_fft_scalar) * (size_t)n);
  p->cin = malloc(sizeof(kiss_fft_cpx) * (size_t)n);
  p->cout = malloc(sizeof(kiss_fft_cpx) * (size_t)n);
  if (p->real) {
    p->rf = kiss_fftr_alloc(ni, 0, NULL, NULL);
    p->ri = kiss_fftr_alloc(ni, 1, NULL, NULL);
  }
  p->cf = kiss_fft_alloc(ni, 0, NULL, NULL);
  p->ci = kiss_fft_alloc(ni, 1, NULL, NULL);
  if (!p->rbuf || !p->cin || !p->cout || !p->cf || !p->ci || (p->real && (!p->rf || !p->ri))) {
    plan_free(p);
    return -1;
  }
  return 0;
}

/* forward by the direct sum over the roots' table (float64, and frames holding an inf, a
 * NaN or a value beyond float's range: kissfft's butterflies multiply them by twiddles' exact zeros, making NaN of bins the
 * sum keeps infinite) */
static void fwd_direct(const plan *p, const double *x, double *re, double *im) {
  int64_t n = p->n;
  for (int64_t f = 0; f < p->F; f++) {
    double a = 0, b = 0;
    int64_t idx = 0;
    for (int64_t k = 0; k < n; k++) {
      a += x[k] * p->cs[idx];
      b -= x[k] * p->sn[idx];
      idx += f;
      if (idx >= n) idx -= n;
    }
    re[f] = a, im[f] = b;
  }
}

/* forward: x (n real) -> re, im of bins 0..F-1 (sum x[k] e^{-2 pi i f k / n}) */
static void fwd(plan *p, const double *x, double *re, double *im) {
  int64_t n = p->n;
  bool direct = p->f64;
  for (int64_t k = 0; k < n && !direct; k++) direct = !(fabs(x[k]) <= FLT_MAX);
  if (direct) {
    fwd_direct(p, x, re, im);
    return;
  }
  if (p->real) {
    for (int64_t k = 0; k < n; k++) p->rbuf[k] = (float)x[k];
    kiss_fftr(p->rf, p->rbuf, p->cout);
  } else {
    for (int64_t k = 0; k < n; k++) p->cin[k].r = (float)x[k], p->cin[k].i = 0;
    kiss_fft(p->cf, p->cin, p->cout);
  }
  for (int64_t f = 0; f < p->F; f++) re[f] = p->cout[f].r, im[f] = p->cout[f].i;
}

static bool mirrored(const plan *p, int64_t f) {
  return p->onesided && f != 0 && !(p->n % 2 == 0 && f == p->n / 2);
}

/* inverse: bins 0..F-1 -> y (n real) = (1/n) Re sum over the full spectrum (onesided: the
 * mirrored bins conjugated; bin 0's and n/2's imaginary parts dropped) */
static void inv(plan *p, const double *re, const double *im, double *y) {
  int64_t n = p->n;
  if (p->f64) {
    for (int64_t k = 0; k < n; k++) {
      double v = 0;
      for (int64_t f = 0; f < p->F; f++) {
        int64_t idx = (f * k) % n;
        double w = mirrored(p, f) ? 2.0 : 1.0;
        double b = (p->onesided && !mirrored(p, f)) ? 0.0 : im[f];
        v += w * (re[f] * p->cs[idx] - b * p->sn[idx]);
      }
      y[k] = v / (double)n;
    }
    return;
  }
  if (p->real) {
    for (int64_t f = 0; f < p->F; f++) {
      p->cin[f].r = (float)re[f];
      p->cin[f].i = mirrored(p, f) ? (float)im[f] : 0.0f;
    }
    kiss_fftri(p->ri, p->cin, p->rbuf);
    for (int64_t k = 0; k < n; k++) y[k] = p->rbuf[k] / (double)n;
    return;
  }
  for (int64_t f = 0; f < n; f++) p->cin[f].r = 0, p->cin[f].i = 0;
  for (int64_t f = 0; f < p->F; f++) {
    p->cin[f].r = (float)re[f];
    p->cin[f].i = (p->onesided && !mirrored(p, f)) ? 0.0f : (float)im[f];
    if (mirrored(p, f)) {
      p->cin[n - f].r = (float)re[f];
      p->cin[n - f].i = -(float)im[f];
    }
  }
  kiss_fft(p->ci, p->cin, p->cout);
  for (int64_t k = 0; k < n; k++) y[k] = p->cout[k].r / (double)n;
}

/* the adjoint of fwd: y[k] = sum_f (gre[f] cos - gim[f] sin)(2 pi f k / n), bins 0..F-1 */
static void fwd_adj(plan *p, const double *gre, const double *gim, double *y) {
  int64_t n = p->n;
  if (p->f64) {
    for (int64_t k = 0; k < n; k++) {
      double v = 0;
      int64_t idx = 0;
      for (int64_t f = 0; f < p->F; f++) {
        v += gre[f] * p->cs[idx] - gim[f] * p->sn[idx];
        idx += k;
        if (idx >= n) idx -= n;
      }
      y[k] = v;
    }
    return;
  }
  for (int64_t f = 0; f < n; f++) p->cin[f].r = 0, p->cin[f].i = 0;
  for (int64_t f = 0; f < p->F; f++) p->cin[f].r = (float)gre[f], p->cin[f].i = (float)gim[f];
  kiss_fft(p->ci, p->cin, p->cout);
  for (int64_t k = 0; k < n; k++) y[k] = p->cout[k].r;
}

/* ---- shared state of a call ---------------------------------------------------------- */
typedef struct job {
  mx_stft_geom g;
  const mx_tensor *x, *w, *s, *go; /* signal, window, spectrum, ograd (as the op has them) */
  mx_tensor *out;
  double *win;    /* the window placed in an n_fft frame */
  double *cs, *sn;
  double *frames; /* (N*T, n_fft) scratch */
  double *env;    /* istft: the overlap-added squared window over the full span */
  double scale;
  int failed;     /* a plan could not be allocated */
} job;

static double ld(const mx_tensor *t, int64_t i) {
  return t->dtype == MX_F32 ? (double)((const float *)mx_ptr(t))[i] : ((const double *)mx_ptr(t))[i];
}
static void st(mx_tensor *t, int64_t i, double v) {
  if (t->dtype == MX_F32) ((float *)mx_ptr(t))[i] = (float)v;
  else ((double *)mx_ptr(t))[i] = v;
}

static int job_init(job *j, const char *op, const mx_tensor *w) {
  const mx_stft_geom *g = &j->g;
  int64_t n = g->n_fft;
  j->win = calloc((size_t)n, sizeof(double));
  j->cs = malloc(sizeof(double) * (size_t)n);
  j->sn = malloc(sizeof(double) * (size_t)n);
  j->frames = malloc(sizeof(double) * (size_t)(g->N * g->T * n));
  if (!j->win || !j->cs || !j->sn || !j->frames)
    return mx_err(MX_ENOMEM, "%s: out of memory for %lld frames of %lld", op,
                  (long long)(g->N * g->T), (long long)n);
  for (int64_t i = 0; i < g->W; i++) j->win[g->woff + i] = ld(w, i);
  for (int64_t k = 0; k < n; k++) {
    j->cs[k] = cos(TWO_PI * (double)k / (double)n);
    j->sn[k] = sin(TWO_PI * (double)k / (double)n);
  }
  return MX_OK;
}
static void job_free(job *j) {
  free(j->win);
  free(j->cs);
  free(j->sn);
  free(j->frames);
  free(j->env);
}

static int env_init(job *j, const char *op) {
  const mx_stft_geom *g = &j->g;
  j->env = calloc((size_t)g->full, sizeof(double));
  if (!j->env) return mx_err(MX_ENOMEM, "%s: out of memory", op);
  for (int64_t t = 0; t < g->T; t++)
    for (int64_t k = 0; k < g->n_fft; k++) j->env[t * g->hop + k] += j->win[k] * j->win[k];
  for (int64_t i = 0; i < g->out_len; i++) {
    int64_t m = i + g->pad;
    if (m < g->full && j->env[m] < MX_ISTFT_MIN_ENVELOPE)
      return mx_err(MX_EINVAL, "%s: the window's overlap-added square is %g at output sample "
                    "%lld (below 1e-11): this window and hop_length cannot be inverted (NOLA)",
                    op, j->env[m], (long long)i + 1);
  }
  return MX_OK;
}

static int64_t grain_for(int64_t per_item) { return per_item >= 16384 ? 1 : 16384 / (per_item ? per_item : 1); }

/* Each range of frames makes its own plan (kissfft configs keep scratch: one per thread)
 * and a buffer of 4 n_fft doubles; false (and j->failed set) when out of memory. */
static bool range_begin(job *j, plan *p, double **buf) {
  *buf = malloc(sizeof(double) * (size_t)(4 * j->g.n_fft + 4));
  if (!*buf || plan_init(p, j->g.n_fft, j->g.F, j->out->dtype == MX_F64, j->g.onesided, j->cs,
                         j->sn) != 0) {
    free(*buf);
    j->failed = 1;
    return false;
  }
  return true;
}
static void range_end(plan *p, double *buf) {
  plan_free(p);
  free(buf);
}

/* ---- stft ---------------------------------------------------------------------------- */
static void stft_range(int64_t b, int64_t e, void *vj) {
  job *j = vj;
  const mx_stft_geom *g = &j->g;
  plan P;
  double *buf;
  if (!range_begin(j, &P, &buf)) return;
  double *x = buf, *re = buf + g->n_fft, *im = re + g->n_fft;
  for (int64_t q = b; q < e; q++) {
    int64_t n = q / g->T, t = q % g->T;
    for (int64_t k = 0; k < g->n_fft; k++) {
      int64_t i = mx_stft_src(g, t * g->hop + k);
      x[k] = i < 0 ? 0.0 : j->win[k] * ld(j->x, n * g->L + i);
    }
    fwd(&P, x, re, im);
    for (int64_t f = 0; f < g->F; f++) {
      int64_t at = ((n * g->F + f) * g->T + t) * 2;
      st(j->out, at, re[f] * j->scale);
      st(j->out, at + 1, im[f] * j->scale);
    }
  }
  range_end(&P, buf);
}

int mx_cpu_stft(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_stft *P = p;
  job j = {0};
  int rc = mx_stft_geom_fwd(ctx->def->name, P->has_n_fft, P->n_fft, P->has_hop_length,
                            P->hop_length, P->center, P->pad_mode == MX_STFT_PAD_MODE_REFLECT,
                            P->normalized, P->onesided, in[0]->ndim, in[0]->shape, in[1]->ndim,
                            in[1]->shape, &j.g);
  if (rc) return rc;
  j.x = in[0], j.out = out[0];
  j.scale = j.g.normalized ? 1.0 / sqrt((double)j.g.n_fft) : 1.0;
  if ((rc = job_init(&j, ctx->def->name, in[1])) == MX_OK) {
    mx_parallel_for(j.g.N * j.g.T, grain_for(j.g.n_fft * 8), stft_range, &j);
    if (j.failed) rc = mx_err(MX_ENOMEM, "%s: out of memory for an FFT plan", ctx->def->name);
  }
  job_free(&j);
  return rc;
}

/* ---- stft_backward: per frame the adjoint DFT times the window into the scratch, then
 * each signal sample gathers the padded positions that read it ----------------------- */
/* frames b..e of spectrum src (N, F, T, 2) through a per-frame transform to signals,
 * times the window and scale, into the (frames, n_fft) scratch: stft_backward's adjoint
 * and istft's inverse */
static void spectrum_frames(job *j, int64_t b, int64_t e, const mx_tensor *src,
                            void (*transform)(plan *, const double *, const double *, double *)) {
  const mx_stft_geom *g = &j->g;
  plan P;
  double *buf;
  if (!range_begin(j, &P, &buf)) return;
  double *re = buf, *im = buf + g->n_fft, *y = im + g->n_fft;
  for (int64_t q = b; q < e; q++) {
    int64_t n = q / g->T, t = q % g->T;
    for (int64_t f = 0; f < g->F; f++) {
      int64_t at = ((n * g->F + f) * g->T + t) * 2;
      re[f] = ld(src, at), im[f] = ld(src, at + 1);
    }
    transform(&P, re, im, y);
    double *fr = j->frames + q * g->n_fft;
    for (int64_t k = 0; k < g->n_fft; k++) fr[k] = y[k] * j->win[k] * j->scale;
  }
  range_end(&P, buf);
}
static void stftb_frames(int64_t b, int64_t e, void *vj) {
  job *j = vj;
  spectrum_frames(j, b, e, j->go, fwd_adj);
}

/* the padded position jp's gradient: the frames covering it, in order */
static double padded_grad(const job *j, int64_t n, int64_t jp) {
  const mx_stft_geom *g = &j->g;
  int64_t t_hi = jp / g->hop;
  if (t_hi > g->T - 1) t_hi = g->T - 1;
  double s = 0;
  for (int64_t t = t_hi; t >= 0; t--) {
    int64_t k = jp - t * g->hop;
    if (k >= g->n_fft) break;
    s += j->frames[(n * g->T + t) * g->n_fft + k];
  }
  return s;
}

static void stftb_gather(int64_t b, int64_t e, void *vj) {
  job *j = vj;
  const mx_stft_geom *g = &j->g;
  for (int64_t q = b; q < e; q++) {
    int64_t n = q / g->L, i = q % g->L;
    double s = padded_grad(j, n, i + g->pad);
    if (g->reflect && g->pad > 0) { /* the mirrored copies of sample i */
      int64_t jl = g->pad - i;                /* left: padded index of x[i] mirrored */
      if (i >= 1 && i <= g->pad) s += padded_grad(j, n, jl);
      int64_t jr = g->pad + 2 * (g->L - 1) - i; /* right mirror */
      if (i >= g->L - 1 - g->pad && i <= g->L - 2) s += padded_grad(j, n, jr);
    }
    st(j->out, q, s);
  }
}

int mx_cpu_stft_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_stft_backward *P = p;
  job j = {0};
  int rc = mx_stft_geom_fwd(ctx->def->name, P->has_n_fft, P->n_fft, P->has_hop_length,
                            P->hop_length, P->center,
                            P->pad_mode == MX_STFT_BACKWARD_PAD_MODE_REFLECT, P->normalized,
                            P->onesided, in[1]->ndim, in[1]->shape, in[2]->ndim, in[2]->shape,
                            &j.g);
  if (rc) return rc;
  j.go = in[0], j.x = in[1], j.out = out[0];
  j.scale = j.g.normalized ? 1.0 / sqrt((double)j.g.n_fft) : 1.0;
  if ((rc = job_init(&j, ctx->def->name, in[2])) == MX_OK) {
    mx_parallel_for(j.g.N * j.g.T, grain_for(j.g.n_fft * 8), stftb_frames, &j);
    if (j.failed) rc = mx_err(MX_ENOMEM, "%s: out of memory for an FFT plan", ctx->def->name);
    else mx_parallel_for(j.g.N * j.g.L, grain_for(j.g.n_fft / j.g.hop + 1), stftb_gather, &j);
  }
  job_free(&j);
  return rc;
}

/* ---- istft: per frame the inverse DFT times the window, then each output sample sums
 * its frames and divides by the envelope --------------------------------------------- */
static void istft_frames(int64_t b, int64_t e, void *vj) {
  job *j = vj;
  spectrum_frames(j, b, e, j->s, inv);
}

static void istft_gather(int64_t b, int64_t e, void *vj) {
  job *j = vj;
  const mx_stft_geom *g = &j->g;
  for (int64_t q = b; q < e; q++) {
    int64_t n = q / g->out_len, i = q % g->out_len, m = i + g->pad;
    st(j->out, q, m < g->full ? padded_grad(j, n, m) / j->env[m] : 0.0);
  }
}

int mx_cpu_istft(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_istft *P = p;
  job j = {0};
  int rc = mx_stft_geom_inv(ctx->def->name, P->has_n_fft, P->n_fft, P->has_hop_length,
                            P->hop_length, P->center, P->normalized, P->onesided, P->has_length,
                            P->length, in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &j.g);
  if (rc) return rc;
  j.s = in[0], j.out = out[0];
  j.scale = j.g.normalized ? sqrt((double)j.g.n_fft) : 1.0;
  if ((rc = job_init(&j, ctx->def->name, in[1])) == MX_OK &&
      (rc = env_init(&j, ctx->def->name)) == MX_OK) {
    mx_parallel_for(j.g.N * j.g.T, grain_for(j.g.n_fft * 8), istft_frames, &j);
    if (j.failed) rc = mx_err(MX_ENOMEM, "%s: out of memory for an FFT plan", ctx->def->name);
    else mx_parallel_for(j.g.N * j.g.out_len, grain_for(j.g.n_fft / j.g.hop + 1), istft_gather, &j);
  }
  job_free(&j);
  return rc;
}

/* ---- istft_backward: per frame, the ograd over the envelope times the window, through
 * the forward DFT: the adjoint of the inverse ------------------------------------------ */
static void istftb_range(int64_t b, int64_t e, void *vj) {
  job *j = vj;
  const mx_stft_geom *g = &j->g;
  plan P;
  double *buf;
  if (!range_begin(j, &P, &buf)) return;
  double *x = buf, *re = buf + g->n_fft, *im = re + g->n_fft;
  for (int64_t q = b; q < e; q++) {
    int64_t n = q / g->T, t = q % g->T;
    for (int64_t k = 0; k < g->n_fft; k++) {
      int64_t m = t * g->hop + k, i = m - g->pad;
      x[k] = (i >= 0 && i < g->out_len) ? ld(j->go, n * g->out_len + i) / j->env[m] * j->win[k] : 0.0;
    }
    fwd(&P, x, re, im);
    for (int64_t f = 0; f < g->F; f++) {
      double c = j->scale * (mirrored(&P, f) ? 2.0 : 1.0) / (double)g->n_fft;
      int64_t at = ((n * g->F + f) * g->T + t) * 2;
      st(j->out, at, re[f] * c);
      st(j->out, at + 1, (g->onesided && !mirrored(&P, f)) ? 0.0 : im[f] * c);
    }
  }
  range_end(&P, buf);
}

int mx_cpu_istft_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_istft_backward *P = p;
  job j = {0};
  int rc = mx_stft_geom_inv(ctx->def->name, P->has_n_fft, P->n_fft, P->has_hop_length,
                            P->hop_length, P->center, P->normalized, P->onesided, P->has_length,
                            P->length, in[1]->ndim, in[1]->shape, in[2]->ndim, in[2]->shape, &j.g);
  if (rc) return rc;
  j.go = in[0], j.s = in[1], j.out = out[0];
  j.scale = j.g.normalized ? sqrt((double)j.g.n_fft) : 1.0;
  if ((rc = job_init(&j, ctx->def->name, in[2])) == MX_OK &&
      (rc = env_init(&j, ctx->def->name)) == MX_OK) {
    mx_parallel_for(j.g.N * j.g.T, grain_for(j.g.n_fft * 8), istftb_range, &j);
    if (j.failed) rc = mx_err(MX_ENOMEM, "%s: out of memory for an FFT plan", ctx->def->name);
  }
  job_free(&j);
  return rc;
}
