/* rnn.h — the rnn family's geometry: one reading of rnn/rnn_backward params and input
 * shapes (core/ops/rnn.c) that inference and the kernels share, and the offsets of
 * MXNet's packed parameter vector (docs/rnn.md). */
#ifndef MX_OPS_RNN_H
#define MX_OPS_RNN_H
#include "internal.h"
#include "mx_ops_gen.h"

typedef struct mx_rnn_geom {
  int64_t T, N, I, H;   /* steps, batch, input size, state size */
  int64_t R;            /* the recurrent state's and output's size: projection_size
                         * (LSTMP: r = W_hr h is the state and the output), else H */
  bool proj;            /* projection_size given */
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
  return l == 0 ? g->I : g->D * g->R;
}
/* The weights of layer and direction k = l*D + d: i2h (G*H, in), h2h (G*H, R), with a
 * projection h2r (R, H) (MXNet's order: Gluon packs i2h, h2h, h2r per layer and
 * direction, then the biases). */
static inline int64_t mx_rnn_wblock(const mx_rnn_geom *g, int k) {
  return (int64_t)g->G * g->H * (mx_rnn_in(g, k / g->D) + g->R) + (g->proj ? g->R * g->H : 0);
}
/* Offsets (elements) into the packed vector of layer l, direction d: i2h weight
 * (G*H, in), h2h weight (G*H, R), i2h bias (G*H), h2h bias (G*H); the h2r weight (R, H)
 * follows the h2h weight (mx_rnn_offset_r). */
static inline void mx_rnn_offsets(const mx_rnn_geom *g, int l, int d, int64_t *wx,
                                  int64_t *wh, int64_t *bx, int64_t *bh) {
  int64_t GH = (int64_t)g->G * g->H, off = 0, boff = 0;
  for (int k = 0; k < l * g->D + d; k++) off += mx_rnn_wblock(g, k);
  int64_t wtot = 0;
  for (int k = 0; k < g->L * g->D; k++) wtot += mx_rnn_wblock(g, k);
  boff = wtot + (int64_t)(l * g->D + d) * 2 * GH;
  *wx = off;
  *wh = off + GH * mx_rnn_in(g, l);
  *bx = boff;
  *bh = boff + GH;
}
/* The h2r weight's offset of layer l, direction d (projection only). */
static inline int64_t mx_rnn_offset_r(const mx_rnn_geom *g, int l, int d) {
  int64_t wx, wh, bx, bh;
  mx_rnn_offsets(g, l, d, &wx, &wh, &bx, &bh);
  return wh + (int64_t)g->G * g->H * g->R;
}

/* The training reserve (rnn's last output in training, rnn_backward's `reserve`): per
 * layer and direction k = l*D + d at k * mx_rnn_hist_len: the gate activations (T*N, G*H;
 * lstm i,f,g,o, gru r,z,n, rnn h'), the state before each step (T*N, H), then for lstm
 * the cell before each step and tanh of the cell after it, for gru W_hn h + b_hn (T*N, H
 * each), with a projection h before it (T*N, H); rows t*N + n (the state before each step
 * has R columns). After them layer l's input (T*N, D*R) for l = 1..L-1 (after the dropout
 * mask). Rows of padded steps are unspecified. */
static inline int64_t mx_rnn_hist_len(const mx_rnn_geom *g) {
  int64_t TN = g->T * g->N, H = g->H;
  int extra = g->mode == MX_RNN_MODE_LSTM ? 2 : g->mode == MX_RNN_MODE_GRU ? 1 : 0;
  return TN * ((int64_t)g->G * H + g->R + H * (extra + (g->proj ? 1 : 0)));
}
static inline int64_t mx_rnn_reserve_len(const mx_rnn_geom *g) {
  return (int64_t)g->L * g->D * mx_rnn_hist_len(g) +
         (int64_t)(g->L - 1) * g->T * g->N * g->D * g->R;
}

/* The geometry of a call from its params (rnn's or rnn_backward's struct) and data's
 * shape (T, N, I); validates the params (messages name op). */
int mx_rnn_geom_fwd(const char *op, const struct mx_params_rnn *P, const int64_t *dshape,
                    mx_rnn_geom *g);
int mx_rnn_geom_bwd(const char *op, const struct mx_params_rnn_backward *P,
                    const int64_t *dshape, mx_rnn_geom *g);
#endif
