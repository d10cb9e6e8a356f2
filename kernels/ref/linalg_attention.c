/* kernels/ref/linalg_attention.c — reference kernels of the linalg family's interleaved
 * attention matmuls (MXNet's contrib interleaved_matmul_*: GluonNLP's multi-head attention on
 * packed q/k/v), plain loops in double. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>

/* ---- MXNet's interleaved attention matmuls ------------------
 * A "sequence operand" S(t, b, d) is element t*rs + b*bs + off + d of its tensor: qkv
 * (T, N, H*3*D): rs = N*H*3*D, bs = 3*D, off 0/D/2*D for q/k/v; q (T, N, H*D): rs = N*H*D,
 * bs = D; kv: rs = N*H*2*D, bs = 2*D, off 0/D. Attention A(b, i, j) is (b*Tq + i)*Tk + j,
 * b = n*H + h. qk: A = scale * Q . K^T (scale 1/sqrt(D)); valatt: O = A . V. */

typedef struct { mx_tensor *t; int64_t rs, bs, off; } ref_seq;
static int64_t seq_at(const ref_seq *s, int64_t t, int64_t b, int64_t d) {
  return t * s->rs + b * s->bs + s->off + d;
}
typedef struct { int64_t B, Tq, Tk, D; double scale; } ref_att;

static void ref_zero(mx_tensor *t) {
  for (int64_t i = 0; i < t->size; i++) mx_store_f64(mx_ptr(t), t->dtype, i, 0);
}
static double ld(const ref_seq *s, int64_t t, int64_t b, int64_t d) {
  return mx_load_f64(mx_ptr(s->t), s->t->dtype, seq_at(s, t, b, d));
}

static void ref_qk(const ref_att *g, const ref_seq *q, const ref_seq *k, mx_tensor *a) {
  for (int64_t b = 0; b < g->B; b++)
    for (int64_t i = 0; i < g->Tq; i++)
      for (int64_t j = 0; j < g->Tk; j++) {
        double s = 0;
        for (int64_t d = 0; d < g->D; d++) s += ld(q, i, b, d) * ld(k, j, b, d);
        mx_store_f64(mx_ptr(a), a->dtype, (b * g->Tq + i) * g->Tk + j, s * g->scale);
      }
}
static void ref_av(const ref_att *g, const mx_tensor *a, const ref_seq *v, const ref_seq *o) {
  for (int64_t b = 0; b < g->B; b++)
    for (int64_t i = 0; i < g->Tq; i++)
      for (int64_t d = 0; d < g->D; d++) {
        double s = 0;
        for (int64_t j = 0; j < g->Tk; j++)
          s += mx_load_f64(mx_ptr(a), a->dtype, (b * g->Tq + i) * g->Tk + j) * ld(v, j, b, d);
        mx_store_f64(mx_ptr(o->t), o->t->dtype, seq_at(o, i, b, d), s);
      }
}
/* dQ = scale * G . K, dK = scale * G^T . Q */
static void ref_qk_bwd(const ref_att *g, const mx_tensor *G, const ref_seq *q, const ref_seq *k,
                       const ref_seq *dq, const ref_seq *dk) {
  for (int64_t b = 0; b < g->B; b++)
    for (int64_t d = 0; d < g->D; d++) {
      for (int64_t i = 0; i < g->Tq; i++) {
        double s = 0;
        for (int64_t j = 0; j < g->Tk; j++)
          s += mx_load_f64(mx_ptr(G), G->dtype, (b * g->Tq + i) * g->Tk + j) * ld(k, j, b, d);
        mx_store_f64(mx_ptr(dq->t), dq->t->dtype, seq_at(dq, i, b, d), s * g->scale);
      }
      for (int64_t j = 0; j < g->Tk; j++) {
        double s = 0;
        for (int64_t i = 0; i < g->Tq; i++)
          s += mx_load_f64(mx_ptr(G), G->dtype, (b * g->Tq + i) * g->Tk + j) * ld(q, i, b, d);
        mx_store_f64(mx_ptr(dk->t), dk->t->dtype, seq_at(dk, j, b, d), s * g->scale);
      }
    }
}
/* dA = G . V^T, dV = A^T . G (G: the output's gradient as a sequence operand) */
static void ref_av_bwd(const ref_att *g, const ref_seq *G, const mx_tensor *a, const ref_seq *v,
                       mx_tensor *da, const ref_seq *dv) {
  for (int64_t b = 0; b < g->B; b++) {
    for (int64_t i = 0; i < g->Tq; i++)
      for (int64_t j = 0; j < g->Tk; j++) {
        double s = 0;
        for (int64_t d = 0; d < g->D; d++) s += ld(G, i, b, d) * ld(v, j, b, d);
        mx_store_f64(mx_ptr(da), da->dtype, (b * g->Tq + i) * g->Tk + j, s);
      }
    for (int64_t j = 0; j < g->Tk; j++)
      for (int64_t d = 0; d < g->D; d++) {
        double s = 0;
        for (int64_t i = 0; i < g->Tq; i++)
          s += mx_load_f64(mx_ptr(a), a->dtype, (b * g->Tq + i) * g->Tk + j) * ld(G, i, b, d);
        mx_store_f64(mx_ptr(dv->t), dv->t->dtype, seq_at(dv, j, b, d), s);
      }
  }
}

/* geometry of qkv (self) or q + kv (encdec) for `heads`; NULL tensors are skipped */
static ref_att ref_geom(const mx_tensor *lead, int64_t Tk, int64_t per, int64_t heads) {
  ref_att g;
  g.B = lead->shape[1] * heads;
  g.D = lead->shape[2] / (per * heads);
  g.Tq = lead->shape[0];
  g.Tk = Tk;
  g.scale = g.D ? 1 / sqrt((double)g.D) : 1;
  return g;
}
static ref_seq rseq(mx_tensor *t, int64_t per, const ref_att *g, int64_t which) {
  ref_seq s = { t, g->B * per * g->D, per * g->D, which * g->D };
  return s;
}
#define CT(x) ((mx_tensor *)(x)) /* read-only operands in the shared seq struct */

int mx_ref_interleaved_matmul_selfatt_qk(const mx_kctx *ctx, const void *p, int nin,
                                         mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_selfatt_qk *P = p;
  ref_att g = ref_geom(in[0], in[0]->shape[0], 3, P->heads);
  ref_seq q = rseq(CT(in[0]), 3, &g, 0), k = rseq(CT(in[0]), 3, &g, 1);
  ref_qk(&g, &q, &k, out[0]);
  return MX_OK;
}
int mx_ref_interleaved_matmul_selfatt_valatt(const mx_kctx *ctx, const void *p, int nin,
                                             mx_tensor *const *in, int nout,
                                             mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_selfatt_valatt *P = p;
  ref_att g = ref_geom(in[0], in[0]->shape[0], 3, P->heads);
  ref_seq v = rseq(CT(in[0]), 3, &g, 2), o = rseq(out[0], 1, &g, 0);
  ref_av(&g, in[1], &v, &o);
  return MX_OK;
}
int mx_ref_interleaved_matmul_encdec_qk(const mx_kctx *ctx, const void *p, int nin,
                                        mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_encdec_qk *P = p;
  ref_att g = ref_geom(in[0], in[1]->shape[0], 1, P->heads);
  ref_seq q = rseq(CT(in[0]), 1, &g, 0), k = rseq(CT(in[1]), 2, &g, 0);
  ref_qk(&g, &q, &k, out[0]);
  return MX_OK;
}
int mx_ref_interleaved_matmul_encdec_valatt(const mx_kctx *ctx, const void *p, int nin,
                                            mx_tensor *const *in, int nout,
                                            mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_encdec_valatt *P = p;
  /* kv (Tk, N, 2HD), attention (NH, Tq, Tk): Tq from attention */
  ref_att g = ref_geom(in[0], in[0]->shape[0], 2, P->heads);
  g.Tq = in[1]->shape[1];
  ref_seq v = rseq(CT(in[0]), 2, &g, 1), o = rseq(out[0], 1, &g, 0);
  ref_av(&g, in[1], &v, &o);
  return MX_OK;
}

/* backward ops: in = (ograd, forward inputs...), out = their gradients */
int mx_ref_interleaved_matmul_selfatt_qk_backward(const mx_kctx *ctx, const void *p, int nin,
                                                  mx_tensor *const *in, int nout,
                                                  mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_selfatt_qk_backward *P = p;
  ref_att g = ref_geom(in[1], in[1]->shape[0], 3, P->heads);
  ref_seq q = rseq(CT(in[1]), 3, &g, 0), k = rseq(CT(in[1]), 3, &g, 1);
  ref_seq dq = rseq(out[0], 3, &g, 0), dk = rseq(out[0], 3, &g, 1);
  ref_zero(out[0]); /* the values' part */
  ref_qk_bwd(&g, in[0], &q, &k, &dq, &dk);
  return MX_OK;
}
int mx_ref_interleaved_matmul_selfatt_valatt_backward(const mx_kctx *ctx, const void *p, int nin,
                                                      mx_tensor *const *in, int nout,
                                                      mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_selfatt_valatt_backward *P = p;
  ref_att g = ref_geom(in[1], in[1]->shape[0], 3, P->heads);
  ref_seq G = rseq(CT(in[0]), 1, &g, 0), v = rseq(CT(in[1]), 3, &g, 2);
  ref_seq dv = rseq(out[0], 3, &g, 2);
  ref_zero(out[0]); /* the queries' and keys' part */
  ref_av_bwd(&g, &G, in[2], &v, out[1], &dv);
  return MX_OK;
}
int mx_ref_interleaved_matmul_encdec_qk_backward(const mx_kctx *ctx, const void *p, int nin,
                                                 mx_tensor *const *in, int nout,
                                                 mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_encdec_qk_backward *P = p;
  ref_att g = ref_geom(in[1], in[2]->shape[0], 1, P->heads);
  ref_seq q = rseq(CT(in[1]), 1, &g, 0), k = rseq(CT(in[2]), 2, &g, 0);
  ref_seq dq = rseq(out[0], 1, &g, 0), dk = rseq(out[1], 2, &g, 0);
  ref_zero(out[1]); /* the values' part */
  ref_qk_bwd(&g, in[0], &q, &k, &dq, &dk);
  return MX_OK;
}
int mx_ref_interleaved_matmul_encdec_valatt_backward(const mx_kctx *ctx, const void *p, int nin,
                                                     mx_tensor *const *in, int nout,
                                                     mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_interleaved_matmul_encdec_valatt_backward *P = p;
  ref_att g = ref_geom(in[1], in[1]->shape[0], 2, P->heads);
  g.Tq = in[2]->shape[1];
  ref_seq G = rseq(CT(in[0]), 1, &g, 0), v = rseq(CT(in[1]), 2, &g, 1);
  ref_seq dv = rseq(out[0], 2, &g, 1);
  ref_zero(out[0]); /* the keys' part */
  ref_av_bwd(&g, &G, in[2], &v, out[1], &dv);
  return MX_OK;
}
