/* audio.c — shape/dtype inference of the audio family (stft, istft and their
 * gradients) and the geometry they share with the kernels (audio.h). */
#include "audio.h"

#include <string.h>

#include "infer.h"
#include "mx_ops_gen.h"

static int window_len(const char *op, int wndim, const int64_t *ws, int64_t n_fft, int64_t *W) {
  char b[MX_SHAPE_BUF];
  if (wndim != 1 || ws[0] < 1 || ws[0] > n_fft)
    return mx_err(MX_EINVAL, "%s: window must be 1-d with 1..n_fft (%lld) samples, got shape %s",
                  op, (long long)n_fft, mx_shape_str(b, wndim, ws));
  *W = ws[0];
  return MX_OK;
}

static int common(const char *op, bool has_n_fft, int64_t n_fft, bool has_hop, int64_t hop,
                  mx_stft_geom *g) {
  if (!has_n_fft || n_fft < 1)
    return mx_err(MX_EINVAL, "%s: n_fft must be given, a positive integer (got %lld)", op,
                  has_n_fft ? (long long)n_fft : 0LL);
  if (n_fft > (1 << 24))
    return mx_err(MX_EINVAL, "%s: n_fft %lld is over 2^24", op, (long long)n_fft);
  g->n_fft = n_fft;
  g->hop = has_hop ? hop : n_fft / 4;
  if (g->hop < 1)
    return mx_err(MX_EINVAL, "%s: hop_length must be >= 1, got %lld%s", op, (long long)g->hop,
                  has_hop ? "" : " (n_fft / 4: give hop_length)");
  return MX_OK;
}

int mx_stft_geom_fwd(const char *op, bool has_n_fft, int64_t n_fft, bool has_hop, int64_t hop,
                     bool center, bool reflect, bool normalized, bool onesided, int dndim,
                     const int64_t *ds, int wndim, const int64_t *ws, mx_stft_geom *g) {
  char b[MX_SHAPE_BUF];
  int rc = common(op, has_n_fft, n_fft, has_hop, hop, g);
  if (rc) return rc;
  if ((rc = window_len(op, wndim, ws, n_fft, &g->W))) return rc;
  if (dndim != 1 && dndim != 2)
    return mx_err(MX_EINVAL, "%s: data must be a signal (L) or a batch of them (N, L), got shape %s",
                  op, mx_shape_str(b, dndim, ds));
  g->batched = dndim == 2;
  g->N = g->batched ? ds[0] : 1;
  g->L = ds[dndim - 1];
  g->center = center;
  g->reflect = reflect;
  g->normalized = normalized;
  g->onesided = onesided;
  g->woff = (n_fft - g->W) / 2;
  g->pad = center ? n_fft / 2 : 0;
  if (center && reflect && g->pad >= g->L)
    return mx_err(MX_EINVAL, "%s: reflect padding of %lld needs a signal longer than that, got "
                  "%lld samples (use pad_mode='constant' or a shorter n_fft)", op,
                  (long long)g->pad, (long long)g->L);
  int64_t padded = g->L + 2 * g->pad;
  if (padded < n_fft)
    return mx_err(MX_EINVAL, "%s: %lld samples%s are fewer than n_fft (%lld): no frame", op,
                  (long long)padded, center ? " after padding" : "", (long long)n_fft);
  g->T = 1 + (padded - n_fft) / g->hop;
  g->F = onesided ? n_fft / 2 + 1 : n_fft;
  g->full = n_fft + g->hop * (g->T - 1);
  g->out_len = g->L;
  return MX_OK;
}

int mx_stft_geom_inv(const char *op, bool has_n_fft, int64_t n_fft, bool has_hop, int64_t hop,
                     bool center, bool normalized, bool onesided, bool has_length, int64_t length,
                     int sndim, const int64_t *ss, int wndim, const int64_t *ws,
                     mx_stft_geom *g) {
  char b[MX_SHAPE_BUF];
  int rc = common(op, has_n_fft, n_fft, has_hop, hop, g);
  if (rc) return rc;
  if ((rc = window_len(op, wndim, ws, n_fft, &g->W))) return rc;
  if ((sndim != 3 && sndim != 4) || ss[sndim - 1] != 2)
    return mx_err(MX_EINVAL, "%s: data must be ((N,) F, T, 2) real/imaginary pairs, got shape %s",
                  op, mx_shape_str(b, sndim, ss));
  g->batched = sndim == 4;
  g->N = g->batched ? ss[0] : 1;
  g->F = ss[sndim - 3];
  g->T = ss[sndim - 2];
  int64_t want = onesided ? n_fft / 2 + 1 : n_fft;
  if (g->F != want)
    return mx_err(MX_EINVAL, "%s: data has %lld frequency bins, n_fft %lld%s needs %lld", op,
                  (long long)g->F, (long long)n_fft, onesided ? " (onesided)" : "",
                  (long long)want);
  if (g->T < 1) return mx_err(MX_EINVAL, "%s: data has no frames", op);
  g->center = center;
  g->reflect = false;
  g->normalized = normalized;
  g->onesided = onesided;
  g->woff = (n_fft - g->W) / 2;
  g->pad = center ? n_fft / 2 : 0;
  g->full = n_fft + g->hop * (g->T - 1);
  int64_t natural = g->full - 2 * g->pad;
  if (has_length && length < 0)
    return mx_err(MX_EINVAL, "%s: length must be >= 0, got %lld", op, (long long)length);
  g->out_len = has_length ? length : natural;
  if (g->out_len < 0)
    return mx_err(MX_EINVAL, "%s: %lld frames of hop %lld span fewer samples than the centre "
                  "padding", op, (long long)g->T, (long long)g->hop);
  g->L = g->out_len;
  return MX_OK;
}

static void set_signal(mx_desc *o, const mx_stft_geom *g, int dtype) {
  int64_t s[2] = {g->N, g->L};
  if (g->batched) mx_out_set(o, 2, s, dtype);
  else mx_out_set(o, 1, s + 1, dtype);
}
static void set_spec(mx_desc *o, const mx_stft_geom *g, int dtype) {
  int64_t s[4] = {g->N, g->F, g->T, 2};
  if (g->batched) mx_out_set(o, 4, s, dtype);
  else mx_out_set(o, 3, s + 1, dtype);
}

static int same_dtype(const char *op, const mx_desc *a, const mx_desc *w) {
  if (a->dtype != w->dtype)
    return mx_err(MX_EINVAL, "%s: the window's dtype (%s) must be data's (%s)", op,
                  mx_dtype_name(w->dtype), mx_dtype_name(a->dtype));
  return MX_OK;
}

int mx_infer_stft(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                  mx_desc *out, mx_op_info *info) {
  (void)nin, (void)nout, (void)info;
  const struct mx_params_stft *P = p;
  mx_stft_geom g;
  int rc = mx_stft_geom_fwd(def->name, P->has_n_fft, P->n_fft, P->has_hop_length, P->hop_length,
                            P->center, P->pad_mode == MX_STFT_PAD_MODE_REFLECT, P->normalized,
                            P->onesided, in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &g);
  if (rc || (rc = same_dtype(def->name, in[0], in[1]))) return rc;
  set_spec(&out[0], &g, in[0]->dtype);
  return MX_OK;
}

int mx_infer_stft_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                           int nout, mx_desc *out, mx_op_info *info) {
  (void)nin, (void)nout, (void)info;
  const struct mx_params_stft_backward *P = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  mx_stft_geom g;
  int rc = mx_stft_geom_fwd(def->name, P->has_n_fft, P->n_fft, P->has_hop_length, P->hop_length,
                            P->center, P->pad_mode == MX_STFT_BACKWARD_PAD_MODE_REFLECT,
                            P->normalized, P->onesided, in[1]->ndim, in[1]->shape, in[2]->ndim,
                            in[2]->shape, &g);
  if (rc || (rc = same_dtype(def->name, in[1], in[2]))) return rc;
  mx_desc want;
  set_spec(&want, &g, in[1]->dtype);
  if (in[0]->ndim != want.ndim || memcmp(in[0]->shape, want.shape, sizeof(int64_t) * (size_t)want.ndim))
    return mx_err(MX_EINVAL, "%s: ograd must be stft's output shape %s, got %s", def->name,
                  mx_shape_str(b, want.ndim, want.shape), mx_shape_str(c, in[0]->ndim, in[0]->shape));
  if (in[0]->dtype != in[1]->dtype)
    return mx_err(MX_EINVAL, "%s: ograd's dtype must be data's", def->name);
  mx_out_set(&out[0], in[1]->ndim, in[1]->shape, in[1]->dtype);
  return MX_OK;
}

int mx_infer_istft(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                   mx_desc *out, mx_op_info *info) {
  (void)nin, (void)nout, (void)info;
  const struct mx_params_istft *P = p;
  mx_stft_geom g;
  int rc = mx_stft_geom_inv(def->name, P->has_n_fft, P->n_fft, P->has_hop_length, P->hop_length,
                            P->center, P->normalized, P->onesided, P->has_length, P->length,
                            in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &g);
  if (rc || (rc = same_dtype(def->name, in[0], in[1]))) return rc;
  set_signal(&out[0], &g, in[0]->dtype);
  return MX_OK;
}

int mx_infer_istft_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                            int nout, mx_desc *out, mx_op_info *info) {
  (void)nin, (void)nout, (void)info;
  const struct mx_params_istft_backward *P = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  mx_stft_geom g;
  int rc = mx_stft_geom_inv(def->name, P->has_n_fft, P->n_fft, P->has_hop_length, P->hop_length,
                            P->center, P->normalized, P->onesided, P->has_length, P->length,
                            in[1]->ndim, in[1]->shape, in[2]->ndim, in[2]->shape, &g);
  if (rc || (rc = same_dtype(def->name, in[1], in[2]))) return rc;
  mx_desc want;
  set_signal(&want, &g, in[1]->dtype);
  if (in[0]->ndim != want.ndim || memcmp(in[0]->shape, want.shape, sizeof(int64_t) * (size_t)want.ndim))
    return mx_err(MX_EINVAL, "%s: ograd must be istft's output shape %s, got %s", def->name,
                  mx_shape_str(b, want.ndim, want.shape), mx_shape_str(c, in[0]->ndim, in[0]->shape));
  if (in[0]->dtype != in[1]->dtype)
    return mx_err(MX_EINVAL, "%s: ograd's dtype must be data's", def->name);
  mx_out_set(&out[0], in[1]->ndim, in[1]->shape, in[1]->dtype);
  return MX_OK;
}
