/* audio.h — the audio family's geometry: one reading of stft/istft params and shapes
 * (core/ops/audio.c) that inference and the kernels share.
 *
 * stft: a signal (L) or (N, L) is padded by `pad` = n_fft / 2 on both sides when centred
 * (reflect or zeros), cut into T = 1 + (L + 2 pad - n_fft) / hop frames of n_fft samples
 * (frame t starts at padded sample t * hop), each multiplied by the window (W <= n_fft
 * samples placed at offset woff = (n_fft - W) / 2 of the frame, zeros around it) and
 * transformed: F = n_fft / 2 + 1 bins (onesided) or n_fft.
 * istft: the inverse; the frames span full = n_fft + hop (T - 1) samples, of which the
 * output keeps out_len starting at pad (centred) or 0. */
#ifndef MX_OPS_AUDIO_H
#define MX_OPS_AUDIO_H
#include "internal.h"

typedef struct mx_stft_geom {
  int64_t N, L;          /* signals (1 for a 1-d one) and their length */
  int64_t n_fft, hop, W, woff, F, T, pad;
  int64_t full, out_len; /* istft: the overlap-added span and the output length */
  bool batched, center, reflect, normalized, onesided;
} mx_stft_geom;

/* stft: dshape/dndim the signal's shape, W the window's length */
int mx_stft_geom_fwd(const char *op, bool has_n_fft, int64_t n_fft, bool has_hop, int64_t hop,
                     bool center, bool reflect, bool normalized, bool onesided, int dndim,
                     const int64_t *dshape, int wndim, const int64_t *wshape, mx_stft_geom *g);
/* istft: sshape/sndim the spectrum's shape ((N,) F, T, 2) */
int mx_stft_geom_inv(const char *op, bool has_n_fft, int64_t n_fft, bool has_hop, int64_t hop,
                     bool center, bool normalized, bool onesided, bool has_length, int64_t length,
                     int sndim, const int64_t *sshape, int wndim, const int64_t *wshape,
                     mx_stft_geom *g);

/* the padded signal's sample j (0 <= j < L + 2 pad) as an index into the signal, or -1
 * for a zero (constant padding) */
static inline int64_t mx_stft_src(const mx_stft_geom *g, int64_t j) {
  int64_t i = j - g->pad;
  if (i >= 0 && i < g->L) return i;
  if (!g->reflect) return -1;
  if (i < 0) return -i;
  return 2 * (g->L - 1) - i;
}
/* the istft envelope below which the inverse is refused (torch's NOLA bound) */
#define MX_ISTFT_MIN_ENVELOPE 1e-11
#endif
