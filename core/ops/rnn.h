/* rnn.h — the rnn family's geometry: one reading of rnn/rnn_backward params and input
 * shapes (core/ops/rnn.c) that inference and the kernels share, and the offsets of
 * MXNet's packed parameter vector (docs/rnn.md). */
#ifndef MX_OPS_RNN_H
#define MX_OPS_RNN_H
#include "internal.h"
#include "mx_ops_gen.h"

typedef struct mx_rnn_geom {
  int64_t T, N, I, H;   /* steps, batch, input size, state size */
  int L, D, G;          /* layers, directions (1|2), gates (1 rnn, 4 lstm, 3 gru) */
  int mode;             /* MX_RNN_MODE_* */
  bool seqlen;          /* use_sequence_length */
  bool clip;            /* lstm state clipping on */
  double clip_min, clip_max;
  bool clip_nan;
  double p;             /* dropout between layers */
  int64_t nparam;       /* the packed vector's length */
} mx_rnn_geom;

/* Input size of layer l. */
static inline int64_t mx_rnn_in(const mx_rnn_geom *g, int l) {
  return l == 0 ? g->I : g->D * g->H;
}
/* Offsets (elements) into the packed vector of layer l, direction d: i2h weight
 * (G*H, in), h2h weight (G*H, H), i2h bias (G*H), h2h bias (G*H). */
static inline void mx_rnn_offsets(const mx_rnn_geom *g, int l, int d, int64_t *wx,
                                  int64_t *wh, int64_t *bx, int64_t *bh) {
  int64_t GH = (int64_t)g->G * g->H, off = 0, boff = 0;
  for (int k = 0; k < l * g->D + d; k++) {
    off += GH * (mx_rnn_in(g, k / g->D) + g->H);
  }
  int64_t wtot = 0;
  for (int k = 0; k < g->L * g->D; k++) wtot += GH * (mx_rnn_in(g, k / g->D) + g->H);
  boff = wtot + (int64_t)(l * g->D + d) * 2 * GH;
  *wx = off;
  *wh = off + GH * mx_rnn_in(g, l);
  *bx = boff;
  *bh = boff + GH;
}

/* The training reserve (rnn's last output in training, rnn_backward's `reserve`): per
 * layer and direction k = l*D + d at k * mx_rnn_hist_len: the gate activations (T*N, G*H;
 * lstm i,f,g,o, gru r,z,n, rnn h'), the state before each step (T*N, H), then for lstm
 * the cell before each step and tanh of the cell after it, for gru W_hn h + b_hn (T*N, H
 * each); rows t*N + n. After them layer l's input (T*N, D*H) for l = 1..L-1 (after the
 * dropout mask). Rows of padded steps are unspecified. */
static inline int64_t mx_rnn_hist_len(const mx_rnn_geom *g) {
  int64_t TN = g->T * g->N, H = g->H;
  int extra = g->mode == MX_RNN_MODE_LSTM ? 2 : g->mode == MX_RNN_MODE_GRU ? 1 : 0;
  return TN * ((int64_t)g->G * H + H * (1 + extra));
}
static inline int64_t mx_rnn_reserve_len(const mx_rnn_geom *g) {
  return (int64_t)g->L * g->D * mx_rnn_hist_len(g) +
         (int64_t)(g->L - 1) * g->T * g->N * g->D * g->H;
}

/* The geometry of a call from its params (rnn's or rnn_backward's struct) and data's
 * shape (T, N, I); validates the params (messages name op). */
int mx_rnn_geom_fwd(const char *op, const struct mx_params_rnn *P, const int64_t *dshape,
                    mx_rnn_geom *g);
int mx_rnn_geom_bwd(const char *op, const struct mx_params_rnn_backward *P,
                    const int64_t *dshape, mx_rnn_geom *g);
#endif
