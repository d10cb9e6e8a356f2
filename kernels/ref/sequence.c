/* kernels/ref/sequence.c — reference sequence_mask / sequence_last / sequence_reverse and
 * ctc_loss: plain loops, one element at a time. Data is (T, N, R...) (time axis 0) or
 * (N, T, R...) (axis 1), R the product of the trailing dims; elements are copied bytewise
 * (exact for every dtype), computed values go through double. CTC: the alpha / beta
 * recursion of Graves et al. (2006) in log space over the label with blanks. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Element offset of (t, n, r) in data of time axis ax. */
static int64_t seq_at(int ax, int64_t T, int64_t N, int64_t R, int64_t t, int64_t n, int64_t r) {
  return (ax == 0 ? t * N + n : n * T + t) * R + r;
}

/* sequence lengths (T for every sequence without one); lo: the least length allowed. */
static int seq_lengths(const char *op, const mx_tensor *l, int64_t N, int64_t T, int64_t lo,
                       int64_t *len) {
  for (int64_t n = 0; n < N; n++) {
    if (!l) { len[n] = T; continue; }
    double v = mx_load_f64(mx_ptr(l), l->dtype, n);
    if (!(v >= (double)lo && v <= (double)T) || v != floor(v))
      return mx_err(MX_EINVAL, "%s: sequence_length[%lld] is %g, expected an integer in "
                    "%lld..%lld (T = %lld)", op, (long long)n + 1, v, (long long)lo,
                    (long long)T, (long long)T);
    len[n] = (int64_t)v;
  }
  return MX_OK;
}

typedef struct { int ax; int64_t T, N, R; size_t es; int64_t *len; } seq_geom;

static int seq_setup(const char *op, const mx_kctx *ctx, bool use, const mx_tensor *x,
                     const mx_tensor *l, int64_t lo, seq_geom *g) {
  g->ax = ctx->info.axis;
  g->T = x->shape[g->ax];
  g->N = x->shape[1 - g->ax];
  g->R = 1;
  for (int d = 2; d < x->ndim; d++) g->R *= x->shape[d];
  g->es = mx_dtype_size(x->dtype);
  g->len = malloc(sizeof(int64_t) * (size_t)(g->N ? g->N : 1));
  if (!g->len) return mx_err(MX_ENOMEM, "%s: out of memory", op);
  int rc = seq_lengths(op, use ? l : NULL, g->N, g->T, lo, g->len);
  if (rc) free(g->len);
  return rc;
}

int mx_ref_sequence_mask(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_sequence_mask *sp = p;
  seq_geom g;
  int rc = seq_setup("sequence_mask", ctx, sp->use_sequence_length, in[0],
                     nin > 1 ? in[1] : NULL, 0, &g);
  if (rc) return rc;
  const char *x = mx_ptr(in[0]);
  char *o = mx_ptr(out[0]);
  for (int64_t t = 0; t < g.T; t++)
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t r = 0; r < g.R; r++) {
        int64_t i = seq_at(g.ax, g.T, g.N, g.R, t, n, r);
        if (t < g.len[n]) memmove(o + i * g.es, x + i * g.es, g.es);
        else mx_store_f64(o, out[0]->dtype, i, sp->value);
      }
  free(g.len);
  return MX_OK;
}

int mx_ref_sequence_last(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_sequence_last *sp = p;
  seq_geom g;
  int rc = seq_setup("sequence_last", ctx, sp->use_sequence_length, in[0],
                     nin > 1 ? in[1] : NULL, 1, &g);
  if (rc) return rc;
  const char *x = mx_ptr(in[0]);
  char *o = mx_ptr(out[0]);
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t r = 0; r < g.R; r++)
      memcpy(o + (n * g.R + r) * g.es, x + seq_at(g.ax, g.T, g.N, g.R, g.len[n] - 1, n, r) * g.es,
             g.es);
  free(g.len);
  return MX_OK;
}

int mx_ref_sequence_last_backward(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_sequence_last_backward *sp = p;
  seq_geom g;
  int rc = seq_setup("sequence_last_backward", ctx, sp->use_sequence_length, in[1],
                     nin > 2 ? in[2] : NULL, 1, &g);
  if (rc) return rc;
  const mx_tensor *gr = in[0], *o = out[0];
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, 0);
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t r = 0; r < g.R; r++)
      mx_store_f64(mx_ptr(o), o->dtype, seq_at(g.ax, g.T, g.N, g.R, g.len[n] - 1, n, r),
                   mx_load_f64(mx_ptr(gr), gr->dtype, n * g.R + r));
  free(g.len);
  return MX_OK;
}

int mx_ref_sequence_reverse(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)nout;
  const struct mx_params_sequence_reverse *sp = p;
  seq_geom g;
  int rc = seq_setup("sequence_reverse", ctx, sp->use_sequence_length, in[0],
                     nin > 1 ? in[1] : NULL, 0, &g);
  if (rc) return rc;
  /* out= data would overwrite steps still to be read: build the result aside */
  size_t nb = mx_nbytes(in[0]);
  char *tmp = malloc(nb ? nb : 1);
  if (!tmp) { free(g.len); return mx_err(MX_ENOMEM, "sequence_reverse: out of memory"); }
  const char *x = mx_ptr(in[0]);
  for (int64_t t = 0; t < g.T; t++)
    for (int64_t n = 0; n < g.N; n++) {
      int64_t src = t < g.len[n] ? g.len[n] - 1 - t : t;
      for (int64_t r = 0; r < g.R; r++)
        memcpy(tmp + seq_at(g.ax, g.T, g.N, g.R, t, n, r) * g.es,
               x + seq_at(g.ax, g.T, g.N, g.R, src, n, r) * g.es, g.es);
    }
  memcpy(mx_ptr(out[0]), tmp, nb);
  free(tmp);
  free(g.len);
  return MX_OK;
}

/* ---------------------------------------------------------------- ctc_loss */
static double lse(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* The inputs and sizes; the blank's class. */
typedef struct {
  int64_t T, N, C, Lmax, blank;
  const mx_tensor *x, *lab, *dl, *ll;
} ctc_in;

static void ctc_inputs(const struct mx_params_ctc_loss *sp, mx_tensor *const *in, ctc_in *c) {
  c->x = in[0];
  c->lab = in[1];
  c->T = c->x->shape[0];
  c->N = c->x->shape[1];
  c->C = c->x->shape[2];
  c->Lmax = c->lab->shape[1];
  c->blank = sp->blank_label == MX_CTC_LOSS_BLANK_LABEL_FIRST ? 0 : c->C - 1;
  int k = 2;
  c->dl = sp->use_data_lengths ? in[k++] : NULL;
  c->ll = sp->use_label_lengths ? in[k++] : NULL;
}

/* Sequence n's steps Tn, label length Ln and labels lab[0..Ln). */
static int ctc_sample(const char *op, const ctc_in *c, int64_t n, int64_t *Tn, int64_t *Ln,
                      int64_t *lab) {
  *Tn = c->T;
  if (c->dl) {
    double v = mx_load_f64(mx_ptr(c->dl), c->dl->dtype, n);
    if (!(v >= 0 && v <= (double)c->T) || v != floor(v))
      return mx_err(MX_EINVAL, "%s: data_lengths[%lld] is %g, expected an integer in 0..%lld",
                    op, (long long)n + 1, v, (long long)c->T);
    *Tn = (int64_t)v;
  }
  double pad = c->blank == 0 ? 0 : -1;
  *Ln = c->Lmax;
  if (c->ll) {
    double v = mx_load_f64(mx_ptr(c->ll), c->ll->dtype, n);
    if (!(v >= 0 && v <= (double)c->Lmax) || v != floor(v))
      return mx_err(MX_EINVAL, "%s: label_lengths[%lld] is %g, expected an integer in 0..%lld",
                    op, (long long)n + 1, v, (long long)c->Lmax);
    *Ln = (int64_t)v;
  } else {
    for (int64_t j = 0; j < c->Lmax; j++)
      if (mx_load_f64(mx_ptr(c->lab), c->lab->dtype, n * c->Lmax + j) == pad) { *Ln = j; break; }
  }
  for (int64_t j = 0; j < *Ln; j++) {
    double v = mx_load_f64(mx_ptr(c->lab), c->lab->dtype, n * c->Lmax + j);
    if (!(v >= 0 && v < (double)c->C) || v != floor(v))
      return mx_err(MX_EINVAL, "%s: label[%lld][%lld] is %g, expected a class in 0..%lld", op,
                    (long long)n + 1, (long long)j + 1, v, (long long)c->C - 1);
    if ((int64_t)v == c->blank)
      return mx_err(MX_EINVAL, "%s: label[%lld][%lld] is %g, the blank (blank_label = %s)",
                    op, (long long)n + 1, (long long)j + 1, v, c->blank == 0 ? "first" : "last");
    lab[j] = (int64_t)v;
  }
  return MX_OK;
}

/* log-softmax of sequence n's steps into lp (Tn, C). */
static void ctc_logsoftmax(const ctc_in *c, int64_t n, int64_t Tn, double *lp) {
  for (int64_t t = 0; t < Tn; t++) {
    double m = -INFINITY, s = 0;
    int64_t base = (t * c->N + n) * c->C;
    for (int64_t k = 0; k < c->C; k++) {
      double v = mx_load_f64(mx_ptr(c->x), c->x->dtype, base + k);
      if (v > m || v != v) m = v;
    }
    for (int64_t k = 0; k < c->C; k++) s += exp(mx_load_f64(mx_ptr(c->x), c->x->dtype, base + k) - m);
    for (int64_t k = 0; k < c->C; k++)
      lp[t * c->C + k] = mx_load_f64(mx_ptr(c->x), c->x->dtype, base + k) - m - log(s);
  }
}

/* The label with blanks: ext[s] = blank for even s, lab[s/2] for odd. */
static int64_t ctc_ext(const int64_t *lab, int64_t blank, int64_t s) {
  return s % 2 ? lab[s / 2] : blank;
}

/* alpha (Tn, S) in log space, the emission at t included; returns log p(label). */
static double ctc_alpha(const double *lp, int64_t C, int64_t Tn, const int64_t *lab, int64_t L,
                        int64_t blank, double *al) {
  int64_t S = 2 * L + 1;
  if (Tn == 0) return L == 0 ? 0 : -INFINITY;
  for (int64_t s = 0; s < S; s++)
    al[s] = s < 2 ? lp[ctc_ext(lab, blank, s)] : -INFINITY;
  for (int64_t t = 1; t < Tn; t++)
    for (int64_t s = 0; s < S; s++) {
      int64_t k = ctc_ext(lab, blank, s);
      double a = al[(t - 1) * S + s];
      if (s >= 1) a = lse(a, al[(t - 1) * S + s - 1]);
      if (s >= 2 && k != blank && k != ctc_ext(lab, blank, s - 2)) a = lse(a, al[(t - 1) * S + s - 2]);
      al[t * S + s] = a + lp[t * C + k];
    }
  double r = al[(Tn - 1) * S + S - 1];
  if (S > 1) r = lse(r, al[(Tn - 1) * S + S - 2]);
  return r;
}

/* beta (Tn, S): log prob of the rest after step t from s (emission at t excluded). */
static void ctc_beta(const double *lp, int64_t C, int64_t Tn, const int64_t *lab, int64_t L,
                     int64_t blank, double *be) {
  int64_t S = 2 * L + 1;
  for (int64_t s = 0; s < S; s++) be[(Tn - 1) * S + s] = s >= S - 2 ? 0 : -INFINITY;
  for (int64_t t = Tn - 2; t >= 0; t--)
    for (int64_t s = 0; s < S; s++) {
      int64_t k = ctc_ext(lab, blank, s);
      double b = be[(t + 1) * S + s] + lp[(t + 1) * C + k];
      if (s + 1 < S)
        b = lse(b, be[(t + 1) * S + s + 1] + lp[(t + 1) * C + ctc_ext(lab, blank, s + 1)]);
      if (s + 2 < S) {
        int64_t k2 = ctc_ext(lab, blank, s + 2);
        if (k2 != blank && k2 != k) b = lse(b, be[(t + 1) * S + s + 2] + lp[(t + 1) * C + k2]);
      }
      be[t * S + s] = b;
    }
}

static int ctc_run(const char *op, const struct mx_params_ctc_loss *sp, mx_tensor *const *in,
                   const mx_tensor *og, const mx_tensor *out) {
  ctc_in c;
  ctc_inputs(sp, in, &c);
  int64_t S = 2 * c.Lmax + 1, T1 = c.T ? c.T : 1;
  double *lp = malloc(sizeof(double) * (size_t)(T1 * c.C));
  double *al = malloc(sizeof(double) * (size_t)(T1 * S));
  double *be = og ? malloc(sizeof(double) * (size_t)(T1 * S)) : NULL;
  int64_t *lab = malloc(sizeof(int64_t) * (size_t)(c.Lmax + 1));
  int rc = MX_OK;
  if (!lp || !al || !lab || (og && !be)) { rc = mx_err(MX_ENOMEM, "%s: out of memory", op); goto done; }
  if (og)
    for (int64_t i = 0; i < out->size; i++) mx_store_f64(mx_ptr(out), out->dtype, i, 0);
  for (int64_t n = 0; n < c.N; n++) {
    int64_t Tn = 0, Ln = 0;
    rc = ctc_sample(op, &c, n, &Tn, &Ln, lab);
    if (rc) goto done;
    ctc_logsoftmax(&c, n, Tn, lp);
    double ll = ctc_alpha(lp, c.C, Tn, lab, Ln, c.blank, al);
    if (!og) { mx_store_f64(mx_ptr(out), out->dtype, n, -ll); continue; }
    if (ll == -INFINITY || Tn == 0) continue; /* no path: the gradient stays 0 */
    double gn = mx_load_f64(mx_ptr(og), og->dtype, n);
    int64_t Sn = 2 * Ln + 1;
    ctc_beta(lp, c.C, Tn, lab, Ln, c.blank, be);
    for (int64_t t = 0; t < Tn; t++)
      for (int64_t k = 0; k < c.C; k++) {
        double post = -INFINITY; /* log of sum over s with ext[s] = k of alpha beta / p */
        for (int64_t s = 0; s < Sn; s++)
          if (ctc_ext(lab, c.blank, s) == k) post = lse(post, al[t * Sn + s] + be[t * Sn + s]);
        double d = exp(lp[t * c.C + k]) - exp(post - ll);
        mx_store_f64(mx_ptr(out), out->dtype, (t * c.N + n) * c.C + k, gn * d);
      }
  }
done:
  free(lp);
  free(al);
  free(be);
  free(lab);
  return rc;
}

int mx_ref_ctc_loss(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)ctx; (void)nout;
  (void)nin;
  return ctc_run("ctc_loss", p, in, NULL, out[0]);
}

int mx_ref_ctc_loss_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  (void)ctx; (void)nout;
  (void)nin;
  return ctc_run("ctc_loss_backward", p, in + 1, in[0], out[0]);
}
