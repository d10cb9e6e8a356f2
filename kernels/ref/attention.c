/* kernels/ref/attention.c — reference fused self-attention, in double, one (sequence,
 * head) at a time: scores q . k^T / sqrt(D) over the valid keys, softmax, weighted sum
 * of the values; its backward from the attention recomputed. Layouts:
 * core/ops/attention.lua (qkv (T, N, H, 3, D) flattened to (T, N, 3*H*D)). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  int64_t T, N, H, D;
  const mx_tensor *qkv;
} geo;

static geo geo_of(const mx_tensor *qkv, int64_t heads) {
  geo g = {qkv->shape[0], qkv->shape[1], heads, qkv->shape[2] / (3 * heads), qkv};
  return g;
}
/* part 0 query, 1 key, 2 value: element d of time t, sequence n, head h */
static int64_t at(const geo *g, int64_t t, int64_t n, int64_t h, int part, int64_t d) {
  return ((t * g->N + n) * g->H + h) * 3 * g->D + part * g->D + d;
}
static double ld(const geo *g, int64_t t, int64_t n, int64_t h, int part, int64_t d) {
  return mx_load_f64(mx_ptr(g->qkv), g->qkv->dtype, at(g, t, n, h, part, d));
}

/* The valid keys of every sequence: integral values 0..T */
static int lengths(const char *op, const mx_tensor *vl, const geo *g, int64_t *L) {
  for (int64_t n = 0; n < g->N; n++) {
    double v = vl ? mx_load_f64(mx_ptr(vl), vl->dtype, n) : (double)g->T;
    if (!(v >= 0 && v <= (double)g->T) || v != floor(v))
      return mx_err(MX_EINVAL, "%s: valid_length element %lld is %g, expected an integer in "
                    "0..%lld (the sequence length)", op, (long long)n + 1, v, (long long)g->T);
    L[n] = (int64_t)v;
  }
  return MX_OK;
}

/* P (T, L): the attention of sequence n, head h over its first L keys */
static void attention(const geo *g, int64_t n, int64_t h, int64_t L, double *P) {
  double scale = 1 / sqrt((double)g->D);
  for (int64_t i = 0; i < g->T; i++) {
    double *p = P + i * L, mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < L; j++) {
      double v = 0;
      for (int64_t d = 0; d < g->D; d++) v += ld(g, i, n, h, 0, d) * ld(g, j, n, h, 1, d);
      p[j] = v * scale;
      if (p[j] > mx || p[j] != p[j]) mx = p[j];
    }
    for (int64_t j = 0; j < L; j++) s += (p[j] = exp(p[j] - mx));
    for (int64_t j = 0; j < L; j++) p[j] /= s;
  }
}

int mx_ref_interleaved_selfatt(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)ctx; (void)nout;
  const struct mx_params_interleaved_selfatt *P = p;
  geo g = geo_of(in[0], P->heads);
  mx_tensor *o = out[0];
  int64_t *L = malloc(sizeof(int64_t) * (size_t)(g.N + 1));
  double *A = malloc(sizeof(double) * (size_t)(g.T * g.T + 1));
  if (!L || !A) {
    free(L), free(A);
    return mx_err(MX_ENOMEM, "interleaved_selfatt: out of memory");
  }
  int rc = lengths("interleaved_selfatt", nin > 1 ? in[1] : NULL, &g, L);
  for (int64_t n = 0; n < g.N && !rc; n++)
    for (int64_t h = 0; h < g.H; h++) {
      attention(&g, n, h, L[n], A);
      for (int64_t i = 0; i < g.T; i++)
        for (int64_t d = 0; d < g.D; d++) {
          double v = 0;
          for (int64_t j = 0; j < L[n]; j++) v += A[i * L[n] + j] * ld(&g, j, n, h, 2, d);
          mx_store_f64(mx_ptr(o), o->dtype, ((i * g.N + n) * g.H + h) * g.D + d, v);
        }
    }
  free(L), free(A);
  return rc;
}

/* With S = scale q k^T, P = softmax(S), O = P v and G = dO:
 *   dv = P^T G, dP = G v^T, dS = P * (dP - rowsum(P * dP)), dq = scale dS k, dk = scale dS^T q */
int mx_ref_interleaved_selfatt_backward(const mx_kctx *ctx, const void *p, int nin,
                                        mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nout;
  const struct mx_params_interleaved_selfatt_backward *P = p;
  const mx_tensor *G = in[0];
  geo g = geo_of(in[1], P->heads);
  mx_tensor *o = out[0];
  double scale = 1 / sqrt((double)g.D);
  int64_t *L = malloc(sizeof(int64_t) * (size_t)(g.N + 1));
  double *A = malloc(sizeof(double) * (size_t)(2 * g.T * g.T + 1)), *dS = A + g.T * g.T;
  if (!L || !A) {
    free(L), free(A);
    return mx_err(MX_ENOMEM, "interleaved_selfatt_backward: out of memory");
  }
  int rc = lengths("interleaved_selfatt_backward", nin > 2 ? in[2] : NULL, &g, L);
  for (int64_t i = 0; i < o->size && !rc; i++) mx_store_f64(mx_ptr(o), o->dtype, i, 0);
  for (int64_t n = 0; n < g.N && !rc; n++)
    for (int64_t h = 0; h < g.H; h++) {
      int64_t Ln = L[n];
#define GR(t, d) mx_load_f64(mx_ptr(G), G->dtype, (((t) * g.N + n) * g.H + h) * g.D + (d))
      attention(&g, n, h, Ln, A);
      for (int64_t i = 0; i < g.T; i++) {
        double s = 0;
        for (int64_t j = 0; j < Ln; j++) {
          double dp = 0;
          for (int64_t d = 0; d < g.D; d++) dp += GR(i, d) * ld(&g, j, n, h, 2, d);
          dS[i * Ln + j] = dp;
          s += dp * A[i * Ln + j];
        }
        for (int64_t j = 0; j < Ln; j++) dS[i * Ln + j] = A[i * Ln + j] * (dS[i * Ln + j] - s);
      }
      for (int64_t d = 0; d < g.D; d++) {
        for (int64_t i = 0; i < g.T; i++) { /* dq */
          double v = 0;
          for (int64_t j = 0; j < Ln; j++) v += dS[i * Ln + j] * ld(&g, j, n, h, 1, d);
          mx_store_f64(mx_ptr(o), o->dtype, at(&g, i, n, h, 0, d), scale * v);
        }
        for (int64_t j = 0; j < Ln; j++) { /* dk, dv */
          double k = 0, v = 0;
          for (int64_t i = 0; i < g.T; i++) {
            k += dS[i * Ln + j] * ld(&g, i, n, h, 0, d);
            v += A[i * Ln + j] * GR(i, d);
          }
          mx_store_f64(mx_ptr(o), o->dtype, at(&g, j, n, h, 1, d), scale * k);
          mx_store_f64(mx_ptr(o), o->dtype, at(&g, j, n, h, 2, d), v);
        }
      }
#undef GR
    }
  free(L), free(A);
  return rc;
}
