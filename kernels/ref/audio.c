/* kernels/ref/audio.c — reference stft / istft and their gradients: the DFT as its
 * definition, one output value at a time in double (O(n_fft) per bin). The geometry
 * (padding, frames, window placement) is audio.h's. Layouts: signals (N, L) row-major,
 * spectra (N, F, T, 2) (real, imaginary); a 1-d signal is N = 1. */
#include "audio.h"
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>

static const double TWO_PI = 6.283185307179586476925286766559;

static double win_at(const mx_tensor *w, const mx_stft_geom *g, int64_t k) {
  int64_t i = k - g->woff;
  return (i >= 0 && i < g->W) ? mx_load_f64(mx_ptr(w), w->dtype, i) : 0.0;
}

/* the (centre-padded) signal n's sample j */
static double padded_at(const mx_tensor *x, const mx_stft_geom *g, int64_t n, int64_t j) {
  int64_t i = mx_stft_src(g, j);
  return i < 0 ? 0.0 : mx_load_f64(mx_ptr(x), x->dtype, n * g->L + i);
}

#define GEOM_FWD(P, PADENUM, X, W)                                                             \
  mx_stft_geom_fwd(ctx->def->name, P->has_n_fft, P->n_fft, P->has_hop_length, P->hop_length,   \
                   P->center, P->pad_mode == PADENUM, P->normalized, P->onesided, X->ndim,     \
                   X->shape, W->ndim, W->shape, &g)
#define GEOM_INV(P, S, W)                                                                      \
  mx_stft_geom_inv(ctx->def->name, P->has_n_fft, P->n_fft, P->has_hop_length, P->hop_length,   \
                   P->center, P->normalized, P->onesided, P->has_length, P->length, S->ndim,   \
                   S->shape, W->ndim, W->shape, &g)

int mx_ref_stft(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_stft *P = p;
  mx_stft_geom g;
  int rc = GEOM_FWD(P, MX_STFT_PAD_MODE_REFLECT, in[0], in[1]);
  if (rc) return rc;
  double scale = g.normalized ? 1.0 / sqrt((double)g.n_fft) : 1.0;
  void *o = mx_ptr(out[0]);
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t f = 0; f < g.F; f++)
      for (int64_t t = 0; t < g.T; t++) {
        double re = 0, im = 0;
        for (int64_t k = 0; k < g.n_fft; k++) {
          double v = win_at(in[1], &g, k) * padded_at(in[0], &g, n, t * g.hop + k);
          double a = TWO_PI * (double)((f * k) % g.n_fft) / (double)g.n_fft;
          re += v * cos(a);
          im -= v * sin(a);
        }
        int64_t at = ((n * g.F + f) * g.T + t) * 2;
        mx_store_f64(o, out[0]->dtype, at, re * scale);
        mx_store_f64(o, out[0]->dtype, at + 1, im * scale);
      }
  return MX_OK;
}

/* d loss / d x[n, i] = sum over the padded positions j that read x[n, i], the frames t and
 * offsets k with t * hop + k = j, and the bins f of w[k] (g_re cos - g_im sin)(2 pi f k / n_fft) */
int mx_ref_stft_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_stft_backward *P = p;
  mx_stft_geom g;
  int rc = GEOM_FWD(P, MX_STFT_BACKWARD_PAD_MODE_REFLECT, in[1], in[2]);
  if (rc) return rc;
  double scale = g.normalized ? 1.0 / sqrt((double)g.n_fft) : 1.0;
  const mx_tensor *go = in[0];
  void *o = mx_ptr(out[0]);
  int64_t padded = g.L + 2 * g.pad;
  double *acc = calloc((size_t)(g.N * g.L), sizeof(double));
  if (!acc) return mx_err(MX_ENOMEM, "%s: out of memory", ctx->def->name);
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t j = 0; j < padded; j++) {
      int64_t i = mx_stft_src(&g, j);
      if (i < 0) continue;
      double s = 0;
      for (int64_t t = 0; t < g.T; t++) {
        int64_t k = j - t * g.hop;
        if (k < 0 || k >= g.n_fft) continue;
        double w = win_at(in[2], &g, k);
        for (int64_t f = 0; f < g.F; f++) {
          int64_t at = ((n * g.F + f) * g.T + t) * 2;
          double a = TWO_PI * (double)((f * k) % g.n_fft) / (double)g.n_fft;
          s += w * (mx_load_f64(mx_ptr(go), go->dtype, at) * cos(a) -
                    mx_load_f64(mx_ptr(go), go->dtype, at + 1) * sin(a));
        }
      }
      acc[n * g.L + i] += s * scale;
    }
  for (int64_t i = 0; i < g.N * g.L; i++) mx_store_f64(o, out[0]->dtype, i, acc[i]);
  free(acc);
  return MX_OK;
}

/* the inverse DFT's weight of bin f (onesided: the bins with a mirror count twice; the
 * imaginary parts of bin 0 and of n_fft / 2 do not count) */
static double bin_weight(const mx_stft_geom *g, int64_t f) {
  if (!g->onesided) return 1.0;
  if (f == 0 || (g->n_fft % 2 == 0 && f == g->n_fft / 2)) return 1.0;
  return 2.0;
}
static int imag_counts(const mx_stft_geom *g, int64_t f) {
  return !(g->onesided && (f == 0 || (g->n_fft % 2 == 0 && f == g->n_fft / 2)));
}

/* frame t's inverse DFT at offset k (the real part) */
static double frame_at(const mx_tensor *s, const mx_stft_geom *g, int64_t n, int64_t t, int64_t k) {
  double v = 0;
  for (int64_t f = 0; f < g->F; f++) {
    int64_t at = ((n * g->F + f) * g->T + t) * 2;
    double a = TWO_PI * (double)((f * k) % g->n_fft) / (double)g->n_fft;
    double re = mx_load_f64(mx_ptr(s), s->dtype, at);
    double im = imag_counts(g, f) ? mx_load_f64(mx_ptr(s), s->dtype, at + 1) : 0.0;
    v += bin_weight(g, f) * (re * cos(a) - im * sin(a));
  }
  return v / (double)g->n_fft;
}

/* the overlap-added squared window at full-span position m */
static double envelope(const mx_tensor *w, const mx_stft_geom *g, int64_t m) {
  double e = 0;
  for (int64_t t = 0; t < g->T; t++) {
    int64_t k = m - t * g->hop;
    if (k >= 0 && k < g->n_fft) {
      double v = win_at(w, g, k);
      e += v * v;
    }
  }
  return e;
}

int mx_ref_istft(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_istft *P = p;
  mx_stft_geom g;
  int rc = GEOM_INV(P, in[0], in[1]);
  if (rc) return rc;
  double scale = g.normalized ? sqrt((double)g.n_fft) : 1.0;
  void *o = mx_ptr(out[0]);
  for (int64_t i = 0; i < g.out_len; i++) {
    int64_t m = i + g.pad;
    double env = m < g.full ? envelope(in[1], &g, m) : 0.0;
    if (m < g.full && env < MX_ISTFT_MIN_ENVELOPE)
      return mx_err(MX_EINVAL, "%s: the window's overlap-added square is %g at output sample "
                    "%lld (below 1e-11): this window and hop_length cannot be inverted (NOLA)",
                    ctx->def->name, env, (long long)i + 1);
    for (int64_t n = 0; n < g.N; n++) {
      double v = 0;
      if (m < g.full) {
        for (int64_t t = 0; t < g.T; t++) {
          int64_t k = m - t * g.hop;
          if (k >= 0 && k < g.n_fft) v += win_at(in[1], &g, k) * frame_at(in[0], &g, n, t, k);
        }
        v = v * scale / env;
      }
      mx_store_f64(o, out[0]->dtype, n * g.out_len + i, v);
    }
  }
  return MX_OK;
}

/* d loss / d spec[n, f, t] = sum over the output samples i (full-span m = i + pad) of
 * ograd[n, i] / env[m] * w[k] * d frame_t[k] / d spec, k = m - t * hop */
int mx_ref_istft_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_istft_backward *P = p;
  mx_stft_geom g;
  int rc = GEOM_INV(P, in[1], in[2]);
  if (rc) return rc;
  double scale = g.normalized ? sqrt((double)g.n_fft) : 1.0;
  const mx_tensor *go = in[0];
  void *o = mx_ptr(out[0]);
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t f = 0; f < g.F; f++)
      for (int64_t t = 0; t < g.T; t++) {
        double dre = 0, dim = 0;
        for (int64_t k = 0; k < g.n_fft; k++) {
          int64_t m = t * g.hop + k, i = m - g.pad;
          if (i < 0 || i >= g.out_len) continue;
          double env = envelope(in[2], &g, m);
          if (env < MX_ISTFT_MIN_ENVELOPE)
            return mx_err(MX_EINVAL, "%s: the window's overlap-added square is below 1e-11 at "
                          "output sample %lld (NOLA)", ctx->def->name, (long long)i + 1);
          double c = mx_load_f64(mx_ptr(go), go->dtype, n * g.out_len + i) / env *
                     win_at(in[2], &g, k) * scale * bin_weight(&g, f) / (double)g.n_fft;
          double a = TWO_PI * (double)((f * k) % g.n_fft) / (double)g.n_fft;
          dre += c * cos(a);
          dim -= c * sin(a);
        }
        int64_t at = ((n * g.F + f) * g.T + t) * 2;
        mx_store_f64(o, out[0]->dtype, at, dre);
        mx_store_f64(o, out[0]->dtype, at + 1, imag_counts(&g, f) ? dim : 0.0);
      }
  return MX_OK;
}
