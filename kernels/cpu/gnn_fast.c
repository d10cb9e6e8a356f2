/* kernels/cpu/gnn_fast.c — the cpu gnn kernels' fast paths (gnn.c falls back to its
 * general loops elsewhere): sum / mean reductions and sddmm whose message reads one operand
 * x in place and the other (y) not at all (copy; add / sub in a gradient), elementwise
 * (mul, both rows in place) or one element per block of B features (mul by a broadcast
 * operand: GAT's per-head attention, an edge weight). A node's output row is summed in
 * chunks of W features held in vector registers. A gradient into source rows (u) gathers
 * over the csr's transpose in destination order (what a scatter would add, in its order),
 * kept for the graph's later calls; one into several edges' rows otherwise (the block
 * sums at u) is summed per part of the edges into a buffer of its own, the parts added in
 * order after, so results do not depend on the thread count. */
#include "gnn_fast.h"
#include "vmath.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { FK_COPY, FK_ELEM, FK_SCALE };
typedef struct {
  int kind, ot;                     /* ot: the output rows' target (u, v or e) */
  bool f64, mean, blocks;           /* blocks: each block of B summed into one output */
  int64_t nodes, orows, P, B, yrow, orow, nparts;
  const int64_t *ip, *xs, *ys, *os, *cut; /* row selectors: ix, ei or NULL (the node v) */
  /* the entries summed into output row i: rp[i] .. rp[i + 1], at csr positions rq[r] of
   * destinations rv[r] (NULL: the csr's own row i), each scaled by isc[rv[r]] (NULL: 1) */
  const int64_t *rp, *rq, *rv;
  const void *isc;
  const mx_tensor *tip, *tix; /* the csr's indptr and indices */
  const void *X, *Y;
  void *O, *buf;
  double sign;
} fjob;

static inline int64_t fsel(const int64_t *s, int64_t q, int64_t v) { return s ? s[q] : v; }

/* 32-byte vectors (GCC's vector extension), loaded and stored unaligned */
typedef float vf32 __attribute__((vector_size(32)));
typedef double vf64 __attribute__((vector_size(32)));
static inline vf32 vld_f32(const float *p) { vf32 v; memcpy(&v, p, sizeof v); return v; }
static inline vf64 vld_f64(const double *p) { vf64 v; memcpy(&v, p, sizeof v); return v; }
static inline float hsum_f32(vf32 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
/* the LN sums of LN vectors, as one vector */
static inline vf32 hsums_f32(const vf32 *p) {
  __m256 t0 = _mm256_hadd_ps((__m256)p[0], (__m256)p[1]);
  __m256 t1 = _mm256_hadd_ps((__m256)p[2], (__m256)p[3]);
  __m256 t2 = _mm256_hadd_ps((__m256)p[4], (__m256)p[5]);
  __m256 t3 = _mm256_hadd_ps((__m256)p[6], (__m256)p[7]);
  __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return (vf32)_mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                             _mm256_permute2f128_ps(u0, u1, 0x31));
}
static inline vf64 hsums_f64(const vf64 *p) {
  __m256d t0 = _mm256_hadd_pd((__m256d)p[0], (__m256d)p[1]);
  __m256d t1 = _mm256_hadd_pd((__m256d)p[2], (__m256d)p[3]);
  return (vf64)_mm256_add_pd(_mm256_permute2f128_pd(t0, t1, 0x20),
                             _mm256_permute2f128_pd(t0, t1, 0x31));
}
static inline double hsum_f64(vf64 v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128((__m256d)v), _mm256_extractf128_pd((__m256d)v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* features [c, c + W) of node v's sum (W / LN vectors held in registers) */
#define FAST_CHUNK(T, S, W, LN)                                                                 \
  static void fch_##S##_##W(const fjob *f, int64_t v, int64_t c, T cv, T *o) {                  \
    enum { NV = W / LN };                                                                       \
    v##S acc[NV];                                                                               \
    for (int s = 0; s < NV; s++) acc[s] = (v##S){0};                                            \
    const T *X = f->X, *Y = f->Y;                                                               \
    const int64_t P = f->P, r0 = f->rp[v], r1 = f->rp[v + 1];                                   \
    const T *isc = f->isc;                                                                      \
    if (f->kind == FK_COPY) {                                                                   \
      for (int64_t r = r0; r < r1; r++) {                                                       \
        int64_t q = f->rq ? f->rq[r] : r, u = f->rv ? f->rv[r] : v;                             \
        const T *x = X + fsel(f->xs, q, u) * P + c;                                             \
        if (isc) for (int s = 0; s < NV; s++) acc[s] += isc[u] * vld_##S(x + s * LN);           \
        else for (int s = 0; s < NV; s++) acc[s] += vld_##S(x + s * LN);                        \
      }                                                                                         \
    } else if (f->kind == FK_ELEM) {                                                            \
      for (int64_t r = r0; r < r1; r++) {                                                       \
        int64_t q = f->rq ? f->rq[r] : r, u = f->rv ? f->rv[r] : v;                             \
        const T *x = X + fsel(f->xs, q, u) * P + c, *y = Y + fsel(f->ys, q, u) * P + c;         \
        const T w = isc ? isc[u] : 1;                                                           \
        for (int s = 0; s < NV; s++) acc[s] += w * vld_##S(x + s * LN) * vld_##S(y + s * LN);   \
      }                                                                                         \
    } else {                                                                                    \
      int64_t wi[NV];                                                                           \
      for (int s = 0; s < NV; s++) wi[s] = (c + s * LN) / f->B;                                 \
      for (int64_t r = r0; r < r1; r++) {                                                       \
        int64_t q = f->rq ? f->rq[r] : r, u = f->rv ? f->rv[r] : v;                             \
        const T *x = X + fsel(f->xs, q, u) * P + c, *y = Y + fsel(f->ys, q, u) * f->yrow;       \
        const T w = isc ? isc[u] : 1;                                                           \
        for (int s = 0; s < NV; s++) acc[s] += w * y[wi[s]] * vld_##S(x + s * LN);              \
      }                                                                                         \
    }                                                                                           \
    for (int s = 0; s < NV; s++) {                                                              \
      v##S r = acc[s] * cv;                                                                     \
      memcpy(o + c + s * LN, &r, sizeof r);                                                     \
    }                                                                                           \
  }

#define FAST_TYPED(T, S, LN, W1, W2, W3, W4)                                                    \
  FAST_CHUNK(T, S, W1, LN) FAST_CHUNK(T, S, W2, LN) FAST_CHUNK(T, S, W3, LN)                    \
  FAST_CHUNK(T, S, W4, LN)                                                                      \
  /* features [c, c + w) of node v's sum, any w <= W1 and any block size */                     \
  static void fch_##S##_var(const fjob *f, int64_t v, int64_t c, int64_t w, T cv, T *o) {       \
    T acc[W1];                                                                                  \
    int64_t wi[W1];                                                                             \
    for (int64_t k = 0; k < w; k++) acc[k] = 0, wi[k] = f->kind == FK_SCALE ? (c + k) / f->B : 0; \
    const T *X = f->X, *Y = f->Y;                                                               \
    const int64_t P = f->P, yr = f->yrow;                                                       \
    const T *isc = f->isc;                                                                      \
    for (int64_t r = f->rp[v]; r < f->rp[v + 1]; r++) {                                         \
      int64_t q = f->rq ? f->rq[r] : r, u = f->rv ? f->rv[r] : v;                               \
      const T *x = X + fsel(f->xs, q, u) * P + c;                                               \
      const T *y = f->kind == FK_COPY ? NULL : Y + fsel(f->ys, q, u) * yr;                      \
      const T sc = isc ? isc[u] : 1;                                                            \
      if (f->kind == FK_COPY) for (int64_t k = 0; k < w; k++) acc[k] += sc * x[k];              \
      else if (f->kind == FK_ELEM) for (int64_t k = 0; k < w; k++) acc[k] += sc * x[k] * y[c + k]; \
      else for (int64_t k = 0; k < w; k++) acc[k] += sc * x[k] * y[wi[k]];                      \
    }                                                                                           \
    for (int64_t k = 0; k < w; k++) o[c + k] = acc[k] * cv;                                     \
  }                                                                                             \
  /* output rows at v: each node's row, summed over its edges */                                \
  static void frows_v_##S(const fjob *f, int64_t b0, int64_t b1) {                              \
    const int64_t P = f->P;                                                                     \
    bool lanes = f->kind != FK_SCALE || f->B % LN == 0;                                         \
    for (int64_t v = b0; v < b1; v++) {                                                         \
      int64_t d = f->mean && !f->rq ? f->ip[v + 1] - f->ip[v] : 0;                              \
      T cv = (T)f->sign * (d > 0 ? (T)1 / (T)d : (T)1);                                         \
      T *o = (T *)f->O + v * P;                                                                 \
      int64_t c = 0;                                                                            \
      while (lanes && P - c >= LN) {                                                            \
        int64_t r = P - c;                                                                      \
        if (r >= W1) fch_##S##_##W1(f, v, c, cv, o), c += W1;                                   \
        else if (r >= W2) fch_##S##_##W2(f, v, c, cv, o), c += W2;                              \
        else if (r >= W3) fch_##S##_##W3(f, v, c, cv, o), c += W3;                              \
        else fch_##S##_##W4(f, v, c, cv, o), c += W4;                                           \
      }                                                                                         \
      for (; c < P; c += W1) fch_##S##_var(f, v, c, P - c < W1 ? P - c : W1, cv, o);            \
    }                                                                                           \
  }                                                                                             \
  /* output rows at the edges' u or e, into O: every edge adds its row */                       \
  static void frows_e_##S(const fjob *f, int64_t b0, int64_t b1, T *O) {                        \
    const int64_t P = f->P, B = f->B, yr = f->yrow, orow = f->orow;                             \
    const T *X = f->X, *Y = f->Y;                                                               \
    /* whole vectors: P (and a block) a multiple of the lane count */                           \
    const bool vec = P % LN == 0 && (f->kind != FK_SCALE || B % LN == 0) &&                     \
                     (!f->blocks || B % LN == 0);                                               \
    for (int64_t v = b0; v < b1; v++) {                                                         \
      int64_t q0 = f->ip[v], q1 = f->ip[v + 1];                                                 \
      T cv = (T)f->sign * (f->mean && q1 > q0 ? (T)1 / (T)(q1 - q0) : (T)1);                    \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        const T *x = X + fsel(f->xs, q, v) * P;                                                 \
        const T *y = f->kind == FK_COPY ? NULL : Y + fsel(f->ys, q, v) * yr;                    \
        T *restrict o = O + fsel(f->os, q, v) * orow;                                           \
        if (f->blocks && vec && B == LN && orow % LN == 0) { /* LN blocks of LN at a time */    \
          for (int64_t h = 0; h < orow; h += LN) {                                              \
            v##S pr[LN], r;                                                                     \
            for (int i = 0; i < LN; i++) {                                                      \
              pr[i] = vld_##S(x + (h + i) * LN);                                                \
              if (y) pr[i] *= vld_##S(y + (h + i) * LN);                                        \
            }                                                                                   \
            r = vld_##S(o + h) + cv * hsums_##S(pr);                                            \
            memcpy(o + h, &r, sizeof r);                                                        \
          }                                                                                     \
        } else if (f->blocks) { /* o[h] += cv * the sum of block h of x (* y) */                \
          for (int64_t h = 0; h < orow; h++) {                                                  \
            const T *xh = x + h * B, *yh = y ? y + h * B : NULL;                                \
            T sum = 0;                                                                          \
            int64_t k = 0;                                                                      \
            if (vec) {                                                                          \
              v##S l = {0};                                                                     \
              if (yh) for (; k < B; k += LN) l += vld_##S(xh + k) * vld_##S(yh + k);            \
              else for (; k < B; k += LN) l += vld_##S(xh + k);                                 \
              sum = hsum_##S(l);                                                                \
            }                                                                                   \
            for (; k < B; k++) sum += yh ? xh[k] * yh[k] : xh[k];                               \
            o[h] += cv * sum;                                                                   \
          }                                                                                     \
        } else if (vec) {                                                                       \
          for (int64_t h = 0, nb = f->kind == FK_SCALE ? P / B : 1; h < nb; h++) {              \
            const T w = f->kind == FK_SCALE ? cv * y[h] : cv;                                   \
            for (int64_t k = h * (P / nb); k < (h + 1) * (P / nb); k += LN) {                   \
              v##S t = vld_##S(x + k), r = vld_##S(o + k);                                      \
              if (f->kind == FK_ELEM) t *= vld_##S(y + k);                                      \
              r += w * t;                                                                       \
              memcpy(o + k, &r, sizeof r);                                                      \
            }                                                                                   \
          }                                                                                     \
        } else if (f->kind == FK_COPY) {                                                        \
          for (int64_t k = 0; k < P; k++) o[k] += cv * x[k];                                    \
        } else if (f->kind == FK_ELEM) {                                                        \
          for (int64_t k = 0; k < P; k++) o[k] += cv * x[k] * y[k];                             \
        } else {                                                                                \
          for (int64_t h = 0; h < P / B; h++) {                                                 \
            const T w = cv * y[h];                                                              \
            for (int64_t k = h * B; k < (h + 1) * B; k++) o[k] += w * x[k];                     \
          }                                                                                     \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  /* gsddmm reading both rows in place (or copy): edge e's row from its operands' rows */       \
  static void fsddmm_##S(int64_t b0, int64_t b1, void *vj) {                                    \
    const gjob *j = vj;                                                                         \
    const int64_t P = j->g.P;                                                                   \
    const T *la = j->L, *ra = j->R;                                                             \
    for (int64_t v = b0; v < b1; v++)                                                           \
      for (int64_t q = j->ip[v]; q < j->ip[v + 1]; q++) {                                       \
        int64_t u = j->ix[q], e = j->ei[q];                                                     \
        const T *a = la + mx_gnn_row(j->lt, v, u, e) * P;                                       \
        const T *b = ra ? ra + mx_gnn_row(j->rt, v, u, e) * P : NULL;                           \
        T *restrict o = (T *)j->O + e * P;                                                      \
        switch (j->binary) {                                                                    \
        case MX_GNN_ADD: for (int64_t k = 0; k < P; k++) o[k] = a[k] + b[k]; break;             \
        case MX_GNN_SUB: for (int64_t k = 0; k < P; k++) o[k] = a[k] - b[k]; break;             \
        case MX_GNN_MUL: for (int64_t k = 0; k < P; k++) o[k] = a[k] * b[k]; break;             \
        case MX_GNN_DIV: for (int64_t k = 0; k < P; k++) o[k] = a[k] / b[k]; break;             \
        default: for (int64_t k = 0; k < P; k++) o[k] = a[k];                                   \
        }                                                                                       \
      }                                                                                         \
  }                                                                                             \
  static void fsum_##S(int64_t b, int64_t e, void *vf) {                                        \
    const fjob *f = vf;                                                                         \
    int64_t n = f->orows * f->orow;                                                             \
    T *o = f->O;                                                                                \
    for (int64_t p = 1; p < f->nparts; p++) {                                                   \
      const T *s = (const T *)f->buf + (p - 1) * n;                                             \
      for (int64_t i = b; i < e; i++) o[i] += s[i];                                             \
    }                                                                                           \
  }

FAST_TYPED(float, f32, 8, 64, 32, 16, 8)
FAST_TYPED(double, f64, 4, 32, 16, 8, 4)

static void frange(int64_t b, int64_t e, void *vf) {
  const fjob *f = vf;
  if (f->rq || (f->ot == MX_GNN_V && !f->blocks)) {
    if (f->f64) frows_v_f64(f, b, e);
    else frows_v_f32(f, b, e);
  } else if (f->f64) frows_e_f64(f, b, e, f->O);
  else frows_e_f32(f, b, e, f->O);
}

/* parts [b, e) of a scatter: part p's edges (nodes cut[p] .. cut[p + 1]) into buffer p */
static void fparts(int64_t b, int64_t e, void *vf) {
  const fjob *f = vf;
  size_t es = f->f64 ? sizeof(double) : sizeof(float);
  for (int64_t p = b; p < e; p++) {
    char *o = p == 0 ? f->O : (char *)f->buf + (size_t)((p - 1) * f->orows * f->orow) * es;
    if (f->f64) frows_e_f64(f, f->cut[p], f->cut[p + 1], (double *)o);
    else frows_e_f32(f, f->cut[p], f->cut[p + 1], (float *)o);
  }
}

/* The source-sorted entries of a csr (rp, rq, rv) and its destinations' inverse degrees:
 * a gradient into source rows sums them as the forward sums its rows, in destination
 * order as a scatter would. A layer's backward asks for the same graph at every step, so
 * the last few are kept, named by their indptr and indices tensors' (storage address,
 * version) pairs, which no later state of any storage repeats (mx_tensor_version). */
typedef struct tcsr {
  const void *ip, *ix;
  uint32_t ipv, ixv;
  int64_t N, E, U;
  int refs;
  bool cached;
  int64_t *rp, *rq, *rv;
  float *isf;
  double *isd;
} tcsr;
#define TCSR_SLOTS 4
#define TCSR_MAX_BYTES ((size_t)256 << 20)
static tcsr *tcsr_slot[TCSR_SLOTS];
static pthread_mutex_t tcsr_lock = PTHREAD_MUTEX_INITIALIZER;

static tcsr *tcsr_build(const int64_t *ip, const int64_t *ix, int64_t N, int64_t E, int64_t U) {
  size_t n = (size_t)(2 * U + 1 + 2 * E);
  tcsr *t = calloc(1, sizeof *t);
  void *m = t ? malloc(sizeof(int64_t) * n + (sizeof(float) + sizeof(double)) * (size_t)N) : NULL;
  if (!m) { free(t); return NULL; }
  int64_t *rp = m, *pos = rp + U + 1, *rq = pos + U, *rv = rq + E;
  memset(rp, 0, sizeof(int64_t) * (size_t)(U + 1));
  for (int64_t q = 0; q < E; q++) rp[ix[q] + 1]++;
  for (int64_t i = 0; i < U; i++) rp[i + 1] += rp[i];
  memcpy(pos, rp, sizeof(int64_t) * (size_t)U);
  for (int64_t v = 0; v < N; v++)
    for (int64_t q = ip[v], q1 = ip[v + 1]; q < q1; q++) {
      int64_t r = pos[ix[q]]++;
      rq[r] = q, rv[r] = v;
    }
  t->isd = (double *)(rv + E), t->isf = (float *)(t->isd + N);
  for (int64_t v = 0; v < N; v++) {
    int64_t d = ip[v + 1] - ip[v];
    t->isd[v] = d ? 1.0 / (double)d : 0, t->isf[v] = d ? 1.0f / (float)d : 0;
  }
  t->rp = rp, t->rq = rq, t->rv = rv, t->N = N, t->E = E, t->U = U;
  return t;
}

static void tcsr_free(tcsr *t) {
  if (t) free(t->rp);
  free(t);
}

static tcsr *tcsr_get(const mx_tensor *tip, const mx_tensor *tix, int64_t N, int64_t E,
                      int64_t U) {
  const void *ip = mx_ptr(tip), *ix = mx_ptr(tix);
  uint32_t ipv = mx_tensor_version(tip), ixv = mx_tensor_version(tix);
  pthread_mutex_lock(&tcsr_lock);
  for (int i = 0; i < TCSR_SLOTS; i++) {
    tcsr *t = tcsr_slot[i];
    if (t && t->ip == ip && t->ix == ix && t->ipv == ipv && t->ixv == ixv && t->N == N &&
        t->E == E && t->U == U) {
      t->refs++;
      for (; i > 0; i--) tcsr_slot[i] = tcsr_slot[i - 1]; /* most recent first */
      tcsr_slot[0] = t;
      pthread_mutex_unlock(&tcsr_lock);
      return t;
    }
  }
  pthread_mutex_unlock(&tcsr_lock);
  tcsr *t = tcsr_build(ip, ix, N, E, U);
  if (!t) return NULL;
  t->ip = ip, t->ix = ix, t->ipv = ipv, t->ixv = ixv, t->refs = 1;
  if (sizeof(int64_t) * (size_t)(2 * U + 2 * E) > TCSR_MAX_BYTES) return t; /* not kept */
  pthread_mutex_lock(&tcsr_lock);
  tcsr *old = tcsr_slot[TCSR_SLOTS - 1];
  for (int i = TCSR_SLOTS - 1; i > 0; i--) tcsr_slot[i] = tcsr_slot[i - 1];
  tcsr_slot[0] = t, t->cached = true;
  if (old) old->cached = false;
  if (old && old->refs > 0) old = NULL; /* its last user frees it */
  pthread_mutex_unlock(&tcsr_lock);
  tcsr_free(old);
  return t;
}

static void tcsr_put(tcsr *t) {
  pthread_mutex_lock(&tcsr_lock);
  bool drop = --t->refs == 0 && !t->cached;
  pthread_mutex_unlock(&tcsr_lock);
  if (drop) tcsr_free(t);
}

/* Runs a fast-path job over the csr's nodes; O is zeroed first where edges add into it. */
static int frun(const char *op, fjob *f, int64_t E) {
  size_t es = f->f64 ? sizeof(double) : sizeof(float), rowb = (size_t)(f->orows * f->orow) * es;
  int64_t per = f->nodes ? (E / f->nodes + 1) * f->P : 1;
  f->nparts = 1, f->rp = f->ip;
  if (f->ot == MX_GNN_U && !f->blocks) { /* a gather over the sources' out-edges */
    tcsr *t = tcsr_get(f->tip, f->tix, f->nodes, E, f->orows);
    if (!t) return mx_err(MX_ENOMEM, "%s: out of memory", op);
    f->rp = t->rp, f->rq = t->rq, f->rv = t->rv;
    if (f->mean) f->isc = f->f64 ? (const void *)t->isd : (const void *)t->isf;
    mx_parallel_for(f->orows, mx_gnn_grain(per), frange, f);
    tcsr_put(t);
    return MX_OK;
  }
  if (f->ot != MX_GNN_V || f->blocks || f->orows != f->nodes) memset(f->O, 0, rowb);
  if (f->ot != MX_GNN_U) {
    mx_parallel_for(f->nodes, mx_gnn_grain(per), frange, f);
    return MX_OK;
  }
  /* a scatter: up to 4 parts of about equal edge counts (fewer for small graphs or when
   * their buffers would pass 64 MB) */
  int64_t K = E * f->P / 65536, cut[5];
  if (K > 4) K = 4;
  while (K > 1 && (size_t)(K - 1) * rowb > ((size_t)64 << 20)) K--;
  if (K < 1) K = 1;
  cut[0] = 0, cut[K] = f->nodes;
  for (int64_t p = 1, v = 0; p < K; p++) {
    while (v < f->nodes && f->ip[v] < E * p / K) v++;
    cut[p] = v;
  }
  f->cut = cut, f->nparts = K, f->buf = NULL;
  if (K > 1 && !(f->buf = calloc((size_t)(K - 1), rowb)))
    return mx_err(MX_ENOMEM, "%s: out of memory", op);
  mx_parallel_for(K, 1, fparts, f);
  if (K > 1) mx_parallel_for(f->orows * f->orow, 65536, f->f64 ? fsum_f64 : fsum_f32, f);
  free(f->buf);
  return MX_OK;
}

static const int64_t *fsel_of(const gjob *j, int t) {
  return t == MX_GNN_U ? j->ix : t == MX_GNN_E ? j->ei : NULL;
}

/* The fast path of a gspmm (sum / mean) or of the gradient (wrt 1: lhs, 2: rhs) of a gspmm
 * (sum / mean, ograd G at v) or gsddmm (G at e), into O with orows rows; false where the
 * general loops run. */
static bool fsetup(fjob *f, const gjob *j, int wrt, const void *G, void *O, int64_t orows) {
  memset(f, 0, sizeof *f);
  int64_t P = j->g.P, bk = j->blk < 0 ? -j->blk : j->blk;
  bool sum = j->reduce == MX_GSPMM_REDUCE_OP_SUM || j->reduce == MX_GSPMM_REDUCE_OP_MEAN;
  if (P < 1 || (j->spmm && !sum) || j->g.K != 1) return false;
  f->f64 = j->f64, f->nodes = j->N, f->orows = orows, f->P = P, f->ip = j->ip, f->O = O;
  f->tip = j->tip, f->tix = j->tix;
  f->mean = j->spmm && j->reduce == MX_GSPMM_REDUCE_OP_MEAN, f->sign = 1, f->orow = P;
  bool copy = j->binary == MX_GNN_COPY && j->lid, mul = j->binary == MX_GNN_MUL && bk >= 1;
  bool addsub = (j->binary == MX_GNN_ADD || j->binary == MX_GNN_SUB) && bk >= 1;
  /* x: the operand read in place (blk < 0: the rhs), y the other */
  bool xr = j->blk < 0;
  const void *XO = xr ? j->R : j->L, *YO = xr ? j->L : j->R;
  int xt = xr ? j->rt : j->lt, yt = xr ? j->lt : j->rt;
  (void)xt, (void)yt;
  f->B = bk, f->yrow = bk > 1 ? P / bk : P;
  if (wrt == 0) { /* the forward gspmm: node v sums x (* y) over its edges */
    if (!j->spmm || !(copy || mul)) return false;
    f->kind = copy ? FK_COPY : bk == 1 ? FK_ELEM : FK_SCALE;
    f->X = copy ? j->L : XO, f->Y = copy ? NULL : YO;
    f->xs = fsel_of(j, copy ? j->lt : xt), f->ys = copy ? NULL : fsel_of(j, yt);
    f->ot = MX_GNN_V;
    return true;
  }
  if (!(copy || mul || addsub) || (copy && wrt != 1)) return false;
  /* d: the operand differentiated, o the other; with bk == 1 both are read in place */
  int dt = wrt == 1 ? j->lt : j->rt, ot = wrt == 1 ? j->rt : j->lt;
  const void *OO = wrt == 1 ? j->R : j->L;
  bool on_x = copy || bk == 1 || (wrt == 2) == xr; /* d is read in place */
  f->X = G, f->xs = j->spmm ? NULL : j->ei;
  f->ot = dt, f->os = fsel_of(j, dt);
  if (j->binary == MX_GNN_SUB && wrt == 2) f->sign = -1;
  if (on_x) { /* G (* o), elementwise or per block, into d's rows */
    f->kind = copy || addsub ? FK_COPY : bk == 1 ? FK_ELEM : FK_SCALE;
    if (f->kind != FK_COPY) f->Y = OO, f->ys = fsel_of(j, ot);
  } else { /* each block of G (* o) summed into d's rows */
    f->blocks = true, f->orow = P / bk, f->yrow = P;
    f->kind = mul ? FK_ELEM : FK_COPY;
    if (mul) f->Y = OO, f->ys = fsel_of(j, ot);
  }
  return true;
}


int mx_cpu_gnn_fast(const gjob *j, const char *op, int wrt, const void *G, void *O,
                    int64_t osize, bool *done) {
  fjob f;
  *done = false;
  if (!fsetup(&f, j, wrt, G, O, j->N)) return MX_OK;
  if (wrt) {
    if (f.orow < 1 || osize % f.orow) return MX_OK;
    f.orows = osize / f.orow;
  }
  *done = true;
  return frun(op, &f, j->E);
}

mx_range_fn mx_cpu_gnn_fast_sddmm(const gjob *j) {
  if (!(j->binary == MX_GNN_COPY && j->lid) && !(j->binary != MX_GNN_DOT && j->blk == 1))
    return NULL;
  return j->f64 ? fsddmm_f64 : fsddmm_f32;
}

/* ---- the csr checks a graph passed: the last few, by their tensors' states */
typedef struct {
  const void *p[3];
  uint32_t ver[3];
  int64_t N, E, lo, hi; /* lo, hi: the smallest and largest index (E == 0: 0, -1) */
} cchk;
#define CCHK_SLOTS 8
static cchk cchk_slot[CCHK_SLOTS];
static int cchk_used, cchk_next;
static pthread_mutex_t cchk_lock = PTHREAD_MUTEX_INITIALIZER;

int mx_cpu_gnn_check(const char *op, const mx_tensor *indptr, const mx_tensor *indices,
                     const mx_tensor *eids, int64_t urows) {
  const int64_t *ip = mx_ptr(indptr), *ix = indices ? mx_ptr(indices) : NULL;
  const int64_t *ei = mx_ptr(eids);
  int64_t N = indptr->shape[0] - 1, E = eids->shape[0];
  cchk k;
  memset(&k, 0, sizeof k);
  const mx_tensor *t[3] = {indptr, indices, eids};
  for (int i = 0; i < 3; i++)
    if (t[i]) k.p[i] = mx_ptr(t[i]), k.ver[i] = mx_tensor_version(t[i]);
  k.N = N, k.E = E;
  bool hit = false;
  pthread_mutex_lock(&cchk_lock);
  for (int i = 0; i < cchk_used && !hit; i++) {
    const cchk *c = &cchk_slot[i];
    if (!memcmp(c->p, k.p, sizeof k.p) && !memcmp(c->ver, k.ver, sizeof k.ver) && c->N == N &&
        c->E == E)
      hit = true, k.lo = c->lo, k.hi = c->hi;
  }
  pthread_mutex_unlock(&cchk_lock);
  if (!hit) {
    int rc = mx_gnn_check_csr(op, ip, N, NULL, ei, E, -1);
    if (rc) return rc;
    int64_t lo = E ? INT64_MAX : 0, hi = E ? INT64_MIN : -1;
    for (int64_t q = 0; ix && q < E; q++) {
      lo = ix[q] < lo ? ix[q] : lo;
      hi = ix[q] > hi ? ix[q] : hi;
    }
    k.lo = lo, k.hi = hi;
    pthread_mutex_lock(&cchk_lock);
    cchk_slot[cchk_next] = k;
    cchk_next = (cchk_next + 1) % CCHK_SLOTS;
    if (cchk_used < CCHK_SLOTS) cchk_used++;
    pthread_mutex_unlock(&cchk_lock);
  }
  if (ix && urows >= 0 && (k.lo < 0 || k.hi >= urows)) /* the message naming the index */
    return mx_gnn_check_csr(op, ip, N, ix, ei, E, urows);
  return MX_OK;
}

/* ---- edge_softmax (and its gradient) over rows of whole vectors: per node, each vector of
 * features keeps its running max and sum in registers */
static inline vf32 vmax_f32(vf32 a, vf32 m) { return (vf32)_mm256_max_ps((__m256)a, (__m256)m); }
static inline vf64 vmax_f64(vf64 a, vf64 m) { return (vf64)_mm256_max_pd((__m256d)a, (__m256d)m); }
#define FAST_SOFTMAX(T, S, LN, EXP)                                                             \
  static void fesm_##S(int64_t b0, int64_t b1, void *vj) {                                      \
    const gjob *j = vj;                                                                         \
    const int64_t F = j->g.P, *ei = j->ei;                                                      \
    const T *x = j->L;                                                                          \
    T *o = j->O;                                                                                \
    for (int64_t v = b0; v < b1; v++)                                                           \
      for (int64_t c = 0; c < F; c += LN) {                                                     \
        int64_t q0 = j->ip[v], q1 = j->ip[v + 1];                                               \
        v##S m, s = {0};                                                                        \
        for (int k = 0; k < LN; k++) m[k] = -INFINITY;                                          \
        /* max(a, m) keeps m where a is NaN, as the general loop's a > m ? a : m */             \
        for (int64_t q = q0; q < q1; q++) m = vmax_##S(vld_##S(x + ei[q] * F + c), m);          \
        for (int64_t q = q0; q < q1; q++) {                                                     \
          v##S d = vld_##S(x + ei[q] * F + c) - m, y;                                           \
          T t[LN], e[LN];                                                                       \
          memcpy(t, &d, sizeof d);                                                              \
          for (int k = 0; k < LN; k++) e[k] = EXP(t[k]);                                        \
          memcpy(&y, e, sizeof y);                                                              \
          s += y;                                                                               \
          memcpy(o + ei[q] * F + c, &y, sizeof y);                                              \
        }                                                                                       \
        s = (T)1 / s;                                                                           \
        for (int64_t q = q0; q < q1; q++) {                                                     \
          v##S y = vld_##S(o + ei[q] * F + c) * s;                                              \
          memcpy(o + ei[q] * F + c, &y, sizeof y);                                              \
        }                                                                                       \
      }                                                                                         \
  }                                                                                             \
  static void fesm_back_##S(int64_t b0, int64_t b1, void *vj) {                                 \
    const gjob *j = vj;                                                                         \
    const int64_t F = j->g.P, *ei = j->ei;                                                      \
    const T *g = j->G, *y = j->L;                                                               \
    T *o = j->O;                                                                                \
    for (int64_t v = b0; v < b1; v++)                                                           \
      for (int64_t c = 0; c < F; c += LN) {                                                     \
        int64_t q0 = j->ip[v], q1 = j->ip[v + 1];                                               \
        v##S s = {0};                                                                           \
        for (int64_t q = q0; q < q1; q++)                                                       \
          s += vld_##S(y + ei[q] * F + c) * vld_##S(g + ei[q] * F + c);                         \
        for (int64_t q = q0; q < q1; q++) {                                                     \
          int64_t i = ei[q] * F + c;                                                            \
          v##S r = vld_##S(y + i) * (vld_##S(g + i) - s);                                       \
          memcpy(o + i, &r, sizeof r);                                                          \
        }                                                                                       \
      }                                                                                         \
  }

/* one feature per edge (a single head): a node's logits gathered into a buffer, so the exp
 * runs over vectors of its edges */
#define FAST_SOFTMAX1(T, S, EXP)                                                               \
  static void fesm1_##S(int64_t b0, int64_t b1, void *vj) {                                    \
    gjob *j = vj;                                                                              \
    const int64_t *ei = j->ei;                                                                 \
    const T *x = j->L;                                                                         \
    T *o = j->O, *t = NULL;                                                                    \
    int64_t cap = 0;                                                                           \
    for (int64_t v = b0; v < b1; v++) {                                                        \
      int64_t q0 = j->ip[v], d = j->ip[v + 1] - q0;                                            \
      if (d == 0) continue;                                                                    \
      if (d > cap) {                                                                           \
        free(t);                                                                               \
        cap = d > 256 ? d : 256;                                                               \
        if (!(t = malloc(sizeof(T) * (size_t)cap))) { j->failed = 1; return; }                 \
      }                                                                                        \
      T m = -INFINITY, s = 0;                                                                  \
      for (int64_t k = 0; k < d; k++) t[k] = x[ei[q0 + k]];                                    \
      for (int64_t k = 0; k < d; k++) m = t[k] > m ? t[k] : m;                                 \
      for (int64_t k = 0; k < d; k++) t[k] = EXP(t[k] - m);                                    \
      for (int64_t k = 0; k < d; k++) s += t[k];                                               \
      s = (T)1 / s;                                                                            \
      for (int64_t k = 0; k < d; k++) o[ei[q0 + k]] = t[k] * s;                                \
    }                                                                                          \
    free(t);                                                                                   \
  }

FAST_SOFTMAX(float, f32, 8, v_expf)
FAST_SOFTMAX(double, f64, 4, v_exp)
FAST_SOFTMAX1(float, f32, v_expf)
FAST_SOFTMAX1(double, f64, v_exp)

mx_range_fn mx_cpu_gnn_fast_softmax(const gjob *j, bool back) {
  int64_t ln = j->f64 ? 4 : 8;
  if (j->g.P == 1 && !back) return j->f64 ? fesm1_f64 : fesm1_f32;
  if (j->g.P < 1 || j->g.P % ln) return NULL;
  if (back) return j->f64 ? fesm_back_f64 : fesm_back_f32;
  return j->f64 ? fesm_f64 : fesm_f32;
}
