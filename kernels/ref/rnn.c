/* kernels/ref/rnn.c — reference kernels of the rnn family: a plain loop over time steps,
 * one sample and one unit at a time, in double. The backward recomputes the forward
 * (keeping every step's gates) and runs back-propagation through time. The oracle of the
 * fast kernels in kernels/cpu/rnn.c, which share none of this code. With a projection
 * (LSTMP) the recurrent state and the output are r = W_hr h (R values), the cell H. */
#include "ref.h"
#include "mx_kernels_gen.h"
#include "rnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double sigm(double v) { return 1.0 / (1.0 + exp(-v)); }

/* One layer and direction's history: per time t and sample n (indices [t*N + n]). */
typedef struct hist {
  double *hp, *cp;   /* state before step t (R and H) */
  double *hf;        /* projection: h = o tanh(c) before W_hr (H) */
  double *act;       /* gate activations (G*H): lstm i,f,g,o; gru r,z,n; rnn h' */
  double *hn;        /* gru: W_hn h + b_hn (H) */
  double *cn;        /* lstm: the cell after step t, clipped */
  double *cpass;     /* lstm: 1 where the clip let the cell through, else 0 */
} hist;

typedef struct run {
  mx_rnn_geom g;
  double *x, *w, *h0, *c0, *mask; /* mask: (L-1, T, N, D*H) or NULL */
  int64_t *len;                   /* (N) valid steps, T without use_sequence_length */
  double **in;                    /* in[l]: layer l's input (T, N, in_l) */
  double **y;                     /* y[l]: layer l's output (T, N, D*H), before dropout */
  hist *h;                        /* [l*D + d] */
  double *hy, *cy;                /* (L*D, N, R), (L*D, N, H) */
} run;

static double *zalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

static void run_free(run *r) {
  int LD = r->g.L * r->g.D;
  for (int l = 0; r->in && l < r->g.L; l++) { free(r->in[l]); free(r->y[l]); }
  for (int k = 0; r->h && k < LD; k++) {
    hist *q = &r->h[k];
    free(q->hp); free(q->cp); free(q->act); free(q->hn); free(q->cn); free(q->cpass);
    free(q->hf);
  }
  free(r->in); free(r->y); free(r->h);
  free(r->x); free(r->w); free(r->h0); free(r->c0); free(r->mask); free(r->len);
  free(r->hy); free(r->cy);
}

static double *load(const mx_tensor *t) {
  double *v = zalloc(t->size);
  if (v) for (int64_t i = 0; i < t->size; i++) v[i] = mx_load_f64(mx_ptr(t), t->dtype, i);
  return v;
}

/* Sets up r and runs the forward, keeping the history. */
static int forward(run *r, const mx_tensor *x, const mx_tensor *w, const mx_tensor *h0,
                   const mx_tensor *c0, const mx_tensor *sl, const mx_tensor *mask) {
  mx_rnn_geom *g = &r->g;
  int64_t T = g->T, N = g->N, H = g->H, GH = (int64_t)g->G * H, R = g->R;
  int64_t DH = (int64_t)g->D * R; /* a layer's output width */
  int L = g->L, D = g->D, LD = L * D;
  bool lstm = g->mode == MX_RNN_MODE_LSTM, gru = g->mode == MX_RNN_MODE_GRU;
  r->x = load(x); r->w = load(w); r->h0 = load(h0);
  r->c0 = c0 ? load(c0) : zalloc(LD * N * H);
  r->mask = mask ? load(mask) : NULL;
  r->len = calloc((size_t)(N > 0 ? N : 1), sizeof(int64_t));
  r->in = calloc((size_t)L, sizeof(double *));
  r->y = calloc((size_t)L, sizeof(double *));
  r->h = calloc((size_t)LD, sizeof(hist));
  r->hy = zalloc(LD * N * R); r->cy = zalloc(LD * N * H);
  if (!r->x || !r->w || !r->h0 || !r->c0 || (mask && !r->mask) || !r->len || !r->in ||
      !r->y || !r->h || !r->hy || !r->cy)
    return mx_err(MX_ENOMEM, "rnn: out of memory");
  for (int64_t n = 0; n < N; n++) {
    int64_t v = T;
    if (sl) {
      double d = mx_load_f64(mx_ptr(sl), sl->dtype, n);
      if (!(d >= 0 && d <= (double)T) || d != floor(d))
        return mx_err(MX_EINVAL, "rnn: sequence_length[%lld] = %g must be an integer in "
                      "0..%lld (seq_len)", (long long)n + 1, d, (long long)T);
      v = (int64_t)d;
    }
    r->len[n] = v;
  }
  for (int l = 0; l < L; l++) {
    int64_t in = mx_rnn_in(g, l);
    r->in[l] = zalloc(T * N * in);
    r->y[l] = zalloc(T * N * DH);
    if (!r->in[l] || !r->y[l]) return mx_err(MX_ENOMEM, "rnn: out of memory");
    if (l == 0) memcpy(r->in[0], r->x, sizeof(double) * (size_t)(T * N * in));
    else
      for (int64_t i = 0; i < T * N * in; i++)
        r->in[l][i] = r->y[l - 1][i] * (r->mask ? r->mask[(l - 1) * T * N * DH + i] : 1.0);
    for (int d = 0; d < D; d++) {
      hist *q = &r->h[l * D + d];
      q->hp = zalloc(T * N * R); q->cp = zalloc(T * N * H); q->act = zalloc(T * N * GH);
      q->hn = zalloc(T * N * H); q->cn = zalloc(T * N * H); q->cpass = zalloc(T * N * H);
      q->hf = zalloc(T * N * H);
      if (!q->hp || !q->cp || !q->act || !q->hn || !q->cn || !q->cpass || !q->hf)
        return mx_err(MX_ENOMEM, "rnn: out of memory");
      int64_t owx, owh, obx, obh;
      mx_rnn_offsets(g, l, d, &owx, &owh, &obx, &obh);
      const double *Wx = r->w + owx, *Wh = r->w + owh, *bx = r->w + obx, *bh = r->w + obh;
      const double *Wr = g->proj ? r->w + mx_rnn_offset_r(g, l, d) : NULL;
      for (int64_t n = 0; n < N; n++) {
        double *h = r->hy + ((int64_t)(l * D + d) * N + n) * R;
        double *c = r->cy + ((int64_t)(l * D + d) * N + n) * H;
        memcpy(h, r->h0 + ((int64_t)(l * D + d) * N + n) * R, sizeof(double) * (size_t)R);
        memcpy(c, r->c0 + ((int64_t)(l * D + d) * N + n) * H, sizeof(double) * (size_t)H);
        int64_t len = r->len[n];
        for (int64_t s = 0; s < len; s++) {
          int64_t t = d == 0 ? s : len - 1 - s;
          const double *xt = r->in[l] + (t * N + n) * in;
          int64_t tn = t * N + n;
          double *a = q->act + tn * GH;
          memcpy(q->hp + tn * R, h, sizeof(double) * (size_t)R);
          memcpy(q->cp + tn * H, c, sizeof(double) * (size_t)H);
          for (int64_t j = 0; j < GH; j++) { /* pre-activations */
            double sx = bx[j], sh = bh[j];
            for (int64_t k = 0; k < in; k++) sx += Wx[j * in + k] * xt[k];
            for (int64_t k = 0; k < R; k++) sh += Wh[j * R + k] * h[k];
            if (gru && j >= 2 * H) { a[j] = sx; q->hn[tn * H + j - 2 * H] = sh; }
            else a[j] = sx + sh;
          }
          double *yt = r->y[l] + tn * DH + d * R;
          double *hf = Wr ? q->hf + tn * H : yt; /* h before the projection */
          for (int64_t u = 0; u < H; u++) {
            double hnew;
            if (lstm) {
              double ig = sigm(a[u]), fg = sigm(a[H + u]), gg = tanh(a[2 * H + u]),
                     og = sigm(a[3 * H + u]);
              double cn = fg * c[u] + ig * gg, pass = 1;
              if (g->clip) {
                if (isnan(cn) && g->clip_nan) { cn = g->clip_min; pass = 0; }
                else if (cn < g->clip_min) { cn = g->clip_min; pass = 0; }
                else if (cn > g->clip_max) { cn = g->clip_max; pass = 0; }
              }
              a[u] = ig; a[H + u] = fg; a[2 * H + u] = gg; a[3 * H + u] = og;
              q->cn[tn * H + u] = cn; q->cpass[tn * H + u] = pass;
              c[u] = cn;
              hnew = og * tanh(cn);
            } else if (gru) {
              double rg = sigm(a[u]), zg = sigm(a[H + u]);
              double ng = tanh(a[2 * H + u] + rg * q->hn[tn * H + u]);
              a[u] = rg; a[H + u] = zg; a[2 * H + u] = ng;
              hnew = (1 - zg) * ng + zg * h[u];
            } else {
              hnew = g->mode == MX_RNN_MODE_RNN_TANH ? tanh(a[u]) : (a[u] > 0 ? a[u] : 0);
              a[u] = hnew;
            }
            hf[u] = hnew;
          }
          for (int64_t k = 0; Wr && k < R; k++) { /* r = W_hr h */
            double v = 0;
            for (int64_t u = 0; u < H; u++) v += Wr[k * H + u] * hf[u];
            yt[k] = v;
          }
          for (int64_t u = 0; u < R; u++) h[u] = yt[u];
        }
      }
    }
  }
  return MX_OK;
}

static void store(const mx_tensor *t, const double *v) {
  for (int64_t i = 0; i < t->size; i++) mx_store_f64(mx_ptr(t), t->dtype, i, v[i]);
}

/* The training reserve in rnn.h's layout (the fast backward reads it; the ref backward
 * recomputes instead). */
static void store_reserve(const run *r, const mx_tensor *t) {
  const mx_rnn_geom *g = &r->g;
  int64_t TN = g->T * g->N, H = g->H, GH = (int64_t)g->G * H, DH = (int64_t)g->D * g->R;
  bool lstm = g->mode == MX_RNN_MODE_LSTM, gru = g->mode == MX_RNN_MODE_GRU;
  void *p = mx_ptr(t);
  int64_t o = 0;
  for (int k = 0; k < g->L * g->D; k++) {
    const hist *q = &r->h[k];
    for (int64_t i = 0; i < TN * GH; i++) mx_store_f64(p, t->dtype, o++, q->act[i]);
    for (int64_t i = 0; i < TN * g->R; i++) mx_store_f64(p, t->dtype, o++, q->hp[i]);
    if (lstm) {
      for (int64_t i = 0; i < TN * H; i++) mx_store_f64(p, t->dtype, o++, q->cp[i]);
      for (int64_t i = 0; i < TN * H; i++) mx_store_f64(p, t->dtype, o++, tanh(q->cn[i]));
    }
    if (gru)
      for (int64_t i = 0; i < TN * H; i++) mx_store_f64(p, t->dtype, o++, q->hn[i]);
    if (g->proj)
      for (int64_t i = 0; i < TN * H; i++) mx_store_f64(p, t->dtype, o++, q->hf[i]);
  }
  for (int l = 1; l < g->L; l++)
    for (int64_t i = 0; i < TN * DH; i++) mx_store_f64(p, t->dtype, o++, r->in[l][i]);
}

static int draw_masks(const mx_kctx *ctx, const mx_rnn_geom *g, const mx_tensor *m) {
  double keep = 1.0 / (1.0 - g->p);
  for (int64_t i = 0; i < m->size; i++) {
    double u = mx_random_unit(mx_random_bits(ctx->rng_seed, ctx->rng_first + (uint64_t)i));
    mx_store_f64(mx_ptr(m), m->dtype, i, u >= g->p ? keep : 0.0);
  }
  return MX_OK;
}

int mx_ref_rnn(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  const struct mx_params_rnn *P = params;
  run r;
  memset(&r, 0, sizeof r);
  int rc = mx_rnn_geom_fwd("rnn", P, in[0]->shape, &r.g);
  if (rc) return rc;
  bool lstm = r.g.mode == MX_RNN_MODE_LSTM;
  const mx_tensor *c0 = lstm ? in[3] : NULL;
  const mx_tensor *sl = r.g.seqlen ? in[nin - 1] : NULL;
  int k = P->state_outputs ? (lstm ? 3 : 2) : 1;
  bool dropout = P->training && r.g.p > 0 && r.g.L > 1;
  const mx_tensor *mask = dropout ? out[k] : NULL;
  const mx_tensor *reserve = P->training ? out[nout - 1] : NULL;
  if (mask && (rc = draw_masks(ctx, &r.g, mask))) return rc;
  if ((rc = forward(&r, in[0], in[1], in[2], c0, sl, mask)) == MX_OK) {
    store(out[0], r.y[r.g.L - 1]);
    if (P->state_outputs) {
      store(out[1], r.hy);
      if (lstm) store(out[2], r.cy);
    }
    if (reserve) store_reserve(&r, reserve);
  }
  run_free(&r);
  return rc;
}

/* Back-propagation through time, layer by layer from the top. */
static int backward(run *r, const mx_tensor *dout, const mx_tensor *dhy, const mx_tensor *dcy,
                    double *dx, double *dw, double *dh0, double *dc0) {
  mx_rnn_geom *g = &r->g;
  int64_t T = g->T, N = g->N, H = g->H, GH = (int64_t)g->G * H, R = g->R;
  int64_t DH = (int64_t)g->D * R;
  int L = g->L, D = g->D;
  bool lstm = g->mode == MX_RNN_MODE_LSTM, gru = g->mode == MX_RNN_MODE_GRU;
  double *dy = load(dout), *dhyv = load(dhy);
  double *dcyv = lstm ? load(dcy) : zalloc((int64_t)L * D * N * H);
  /* dh: the recurrent state's gradient (R); dhf: h's before the projection (H) */
  double *dh = zalloc(R), *dhf = zalloc(H), *dc = zalloc(H), *da = zalloc(GH), *dhh = zalloc(GH);
  double *din = NULL;
  int rc = MX_OK;
  if (!dy || !dhyv || !dcyv || !dh || !dhf || !dc || !da || !dhh) { rc = MX_ENOMEM; goto done; }
  for (int l = L - 1; l >= 0; l--) {
    int64_t in = mx_rnn_in(g, l);
    din = zalloc(T * N * in);
    if (!din) { rc = MX_ENOMEM; goto done; }
    for (int d = 0; d < D; d++) {
      hist *q = &r->h[l * D + d];
      int64_t owx, owh, obx, obh;
      mx_rnn_offsets(g, l, d, &owx, &owh, &obx, &obh);
      const double *Wx = r->w + owx, *Wh = r->w + owh;
      int64_t owr = g->proj ? mx_rnn_offset_r(g, l, d) : 0;
      for (int64_t n = 0; n < N; n++) {
        int64_t sidx = ((int64_t)(l * D + d) * N + n) * R, cidx = sidx / R * H;
        for (int64_t u = 0; u < R; u++) dh[u] = dhyv[sidx + u];
        for (int64_t u = 0; u < H; u++) dc[u] = dcyv[cidx + u];
        int64_t len = r->len[n];
        for (int64_t s = len - 1; s >= 0; s--) {
          int64_t t = d == 0 ? s : len - 1 - s, tn = t * N + n;
          const double *a = q->act + tn * GH, *hp = q->hp + tn * R, *xt = r->in[l] + tn * in;
          for (int64_t u = 0; u < R; u++) dh[u] += dy[tn * DH + d * R + u];
          if (g->proj) { /* through r = W_hr h: dh (R) -> dhf (H), W_hr's gradient */
            const double *Wr = r->w + owr, *hf = q->hf + tn * H;
            double *gwr = dw + owr;
            for (int64_t u = 0; u < H; u++) {
              double v = 0;
              for (int64_t k = 0; k < R; k++) v += Wr[k * H + u] * dh[k];
              dhf[u] = v;
            }
            for (int64_t k = 0; k < R; k++)
              for (int64_t u = 0; u < H; u++) gwr[k * H + u] += dh[k] * hf[u];
            for (int64_t k = 0; k < R; k++) dh[k] = 0;
          } else {
            memcpy(dhf, dh, sizeof(double) * (size_t)H);
          }
          for (int64_t u = 0; u < H; u++) {
            if (lstm) {
              double ig = a[u], fg = a[H + u], gg = a[2 * H + u], og = a[3 * H + u];
              double tc = tanh(q->cn[tn * H + u]);
              double dcn = (dc[u] + dhf[u] * og * (1 - tc * tc)) * q->cpass[tn * H + u];
              da[u] = dcn * gg * ig * (1 - ig);
              da[H + u] = dcn * q->cp[tn * H + u] * fg * (1 - fg);
              da[2 * H + u] = dcn * ig * (1 - gg * gg);
              da[3 * H + u] = dhf[u] * tc * og * (1 - og);
              dc[u] = dcn * fg;
              if (!g->proj) dh[u] = 0;
            } else if (gru) {
              double rg = a[u], zg = a[H + u], ng = a[2 * H + u];
              double dn = dh[u] * (1 - zg), dz = dh[u] * (hp[u] - ng);
              double dan = dn * (1 - ng * ng);
              da[u] = dan * q->hn[tn * H + u] * rg * (1 - rg);
              da[H + u] = dz * zg * (1 - zg);
              da[2 * H + u] = dan;
              dh[u] = dh[u] * zg;
            } else {
              double hv = a[u];
              da[u] = dh[u] * (g->mode == MX_RNN_MODE_RNN_TANH ? 1 - hv * hv : (hv > 0 ? 1 : 0));
              dh[u] = 0;
            }
          }
          /* the h2h path's pre-activation gradient (gru: n's is scaled by r) */
          for (int64_t j = 0; j < GH; j++)
            dhh[j] = gru && j >= 2 * H ? da[j] * a[j - 2 * H] : da[j];
          double *gwx = dw + owx, *gwh = dw + owh, *gbx = dw + obx, *gbh = dw + obh;
          for (int64_t j = 0; j < GH; j++) {
            gbx[j] += da[j];
            gbh[j] += dhh[j];
            for (int64_t k = 0; k < in; k++) gwx[j * in + k] += da[j] * xt[k];
            for (int64_t k = 0; k < R; k++) gwh[j * R + k] += dhh[j] * hp[k];
          }
          for (int64_t k = 0; k < in; k++) {
            double s2 = 0;
            for (int64_t j = 0; j < GH; j++) s2 += Wx[j * in + k] * da[j];
            din[tn * in + k] += s2;
          }
          for (int64_t k = 0; k < R; k++) {
            double s2 = 0;
            for (int64_t j = 0; j < GH; j++) s2 += Wh[j * R + k] * dhh[j];
            dh[k] += s2;
          }
        }
        for (int64_t u = 0; u < R; u++) dh0[sidx + u] = dh[u];
        for (int64_t u = 0; u < H; u++) dc0[cidx + u] = dc[u];
      }
    }
    if (l == 0) memcpy(dx, din, sizeof(double) * (size_t)(T * N * in));
    else {
      /* the layer below's output gradient: through the dropout mask */
      for (int64_t i = 0; i < T * N * DH; i++)
        dy[i] = din[i] * (r->mask ? r->mask[(int64_t)(l - 1) * T * N * DH + i] : 1.0);
    }
    free(din);
    din = NULL;
  }
done:
  free(dy); free(dhyv); free(dcyv); free(dh); free(dhf); free(dc); free(da); free(dhh);
  free(din);
  return rc == MX_ENOMEM ? mx_err(MX_ENOMEM, "rnn_backward: out of memory") : rc;
}

int mx_ref_rnn_backward(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx, (void)nin, (void)nout;
  const struct mx_params_rnn_backward *P = params;
  run r;
  memset(&r, 0, sizeof r);
  int rc = mx_rnn_geom_bwd("rnn_backward", P, in[0]->shape, &r.g);
  if (rc) return rc;
  bool lstm = r.g.mode == MX_RNN_MODE_LSTM;
  double *dx = zalloc(in[0]->size), *dw = zalloc(r.g.nparam), *dh0 = zalloc(in[2]->size),
         *dc0 = zalloc(out[3]->size);
  if (!dx || !dw || !dh0 || !dc0) rc = mx_err(MX_ENOMEM, "rnn_backward: out of memory");
  if (!rc) rc = forward(&r, in[0], in[1], in[2], lstm ? in[3] : NULL,
                        r.g.seqlen ? in[4] : NULL, P->use_mask ? in[5] : NULL);
  if (!rc) rc = backward(&r, in[6], in[7], in[8], dx, dw, dh0, dc0);
  if (!rc) {
    store(out[0], dx); store(out[1], dw); store(out[2], dh0);
    if (!lstm) memset(dc0, 0, sizeof(double) * (size_t)out[3]->size);
    store(out[3], dc0);
  }
  free(dx); free(dw); free(dh0); free(dc0);
  run_free(&r);
  return rc;
}
