/* kernels/dnnl/conv_winograd.c — the forward 3x3 convolution of inference graphs by
 * Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray 2015): 16 multiplies per 2x2
 * output tile instead of 36, so 2.25x fewer multiply-adds than a direct convolution.
 *
 * Shapes: data (N, C, H, W), weights (F, C, 3, 3), out (N, F, OH, OW), stride 1, no
 * dilation, one group, f32, C and F multiples of 8. Data, residual and output are each
 * row-major, or in a oneDNN layout with the channels innermost in blocks of 8 or 16
 * (nChw8c / nChw16c: what the graph's oneDNN ops hand each other) or no blocks at all.
 * With T = N * ceil(OH/2) * ceil(OW/2) tiles and the 4x4 Winograd points xi:
 *   V[xi] (T, C) = B^T d B of each tile's 4x4 input window       (input transform)
 *   U[xi] (C, F) = G g G^T of each filter, made once (prepack)     (filter transform)
 *   M[xi] (T, F) = V[xi] . U[xi]                                   (16 GEMMs)
 *   out tile     = act(A^T m A + bias [+ residual])                (output transform)
 * The transforms run on 8 channels at a time (one AVX2 vector: the CPU kernels are built
 * for AVX2). Only graphs with constant weights use it: the transformed filter is their
 * prepacked weight tensor (layout MX_LAYOUT_WINOGRAD, which keeps the plain weights too,
 * so any other reader, and the direct kernel when this one declines, gets those).
 *
 * The tiles go through the three stages in blocks that stay in cache (block_tiles), one
 * block per thread at a time.
 * Where: by default with C, F >= 32 on CPUs without AVX-512 (oneDNN's direct AVX2 kernels
 * reach ~85% of the FMA peak, which this beats by doing less work) and on AMD Zen 4, whose
 * AVX-512 runs on 256-bit units (measured 1.05-1.27x on the zoo's networks at batch 1 and
 * 8); with C, F >= 64 on full-width AVX-512 (Zen 5: its direct kernels run at twice the
 * rate of these AVX2 transforms, yet the GEMMs' 2.25x fewer multiply-adds still gave
 * 1.1-1.6x per layer from 64 channels up, 0.55-0.9x at 32). MX_WINOGRAD=1 forces it on
 * any x86 CPU, MX_WINOGRAD=0 turns it off.
 * Accuracy: the transforms add and subtract at most 4 terms of the same magnitude per
 * stage, so results differ from a direct convolution by a few float32 ulps of the
 * largest partial sum (the spec bounds it against the reference kernel). */
#include "conv_winograd.h"
#include "dnnl.h"

#include <cpuid.h>
#include <stdatomic.h>

static atomic_llong runs;
int64_t mx_conv_winograd_runs(void) { return atomic_load(&runs); }

#ifdef MX_HAVE_ONEDNN
#include "layout.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the layout of transformed weights ---------------------------------------------- */

/* layout_md of a MX_LAYOUT_WINOGRAD tensor (logical shape (F, C, 3, 3)): its storage is
 * U[16][C][F] followed by the plain weights (F, C, 3, 3) */
typedef struct wino_md { int64_t F, C; } wino_md;

static size_t u_floats(const wino_md *m) { return (size_t)16 * (size_t)m->C * (size_t)m->F; }

/* U[xi][c][f] = (G g G^T)[xi] for g = w[f][c] (3x3), G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1] */
static void filter_transform(const float *w, int64_t F, int64_t C, float *U) {
  for (int64_t f = 0; f < F; f++)
    for (int64_t c = 0; c < C; c++) {
      const float *g = w + (f * C + c) * 9;
      float t[4][3], u[4][4];
      for (int j = 0; j < 3; j++) {
        t[0][j] = g[j];
        t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        t[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; i++) {
        u[i][0] = t[i][0];
        u[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        u[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        u[i][3] = t[i][2];
      }
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) U[((size_t)(i * 4 + j) * C + c) * F + f] = u[i][j];
    }
}

static int wino_to_row_major(const mx_tensor *src, mx_tensor *dst) {
  const wino_md *m = src->layout_md;
  memcpy(mx_ptr(dst), (const float *)mx_ptr(src) + u_floats(m),
         (size_t)src->size * sizeof(float));
  return MX_OK;
}

static int wino_from_row_major(const mx_tensor *src, mx_tensor *dst) {
  const wino_md *m = dst->layout_md;
  float *U = mx_ptr(dst);
  filter_transform(mx_ptr(src), m->F, m->C, U);
  memcpy(U + u_floats(m), mx_ptr(src), (size_t)src->size * sizeof(float));
  return MX_OK;
}

static bool wino_same_md(const void *a, const void *b) {
  const wino_md *x = a, *y = b;
  return x->F == y->F && x->C == y->C;
}

static const mx_layout wino_layout = {"winograd", MX_LAYOUT_WINOGRAD, wino_to_row_major,
                                      wino_from_row_major, NULL, free, wino_same_md, NULL};

__attribute__((constructor)) static void wino_register(void) { mx_layout_register(&wino_layout); }

bool mx_wino_is(const mx_tensor *w) { return w->layout == &wino_layout; }

/* ---- where it runs ------------------------------------------------------------------- */

/* AVX-512 on 256-bit units (AMD family 19h: Zen 4; Zen 3, also 19h, has no AVX-512): there
 * a zmm FMA costs two ymm ones, so the direct kernels gain nothing on the AVX2 rate */
static bool avx512_half_width(void) {
  unsigned a, b, c, d;
  if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  unsigned family = (a >> 8) & 0xf;
  if (family == 0xf) family += (a >> 20) & 0xff;
  return family == 0x19;
}

/* 0 off, 1 forced, 2 auto; read at each graph build (prepack), not per call */
static int wino_mode(void) {
  const char *e = getenv("MX_WINOGRAD");
  return e && e[0] == '0' ? 0 : e && e[0] == '1' ? 1 : 2;
}

bool mx_wino_wants(int nsp, bool last, int dtype, int64_t C, int64_t F, int64_t G,
                   const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *out) {
  int mode = wino_mode();
  if (mode == 0) return false;
  /* auto: not with fewer than 32 channels either side, where the transforms (work in
   * C + F per tile) are too large a part of the GEMMs' (C x F): squeezenet's 16 -> 64
   * expand layers ran slower (bench/RESULTS.md, "Whole networks"); on full-width AVX-512,
   * whose direct kernels run at twice the AVX2 rate of the transforms, not below 64
   * (Zen 5: 32 -> 32 and 32 -> 64 at 147-149 px 0.55-0.9x, 64 and up 1.1-1.6x) */
  int64_t least = __builtin_cpu_supports("avx512f") && !avx512_half_width() ? 64 : 32;
  if (mode == 2 && (C < least || F < least)) return false;
  return nsp == 2 && !last && dtype == MX_F32 && G == 1 && C % 8 == 0 && F % 8 == 0 &&
         k[0] == 3 && k[1] == 3 && s[0] == 1 && s[1] == 1 && d[0] == 1 && d[1] == 1 &&
         out[0] >= 2 && out[1] >= 2;
}

int mx_wino_prepack(const mx_tensor *w, mx_tensor **out) {
  *out = NULL;
  wino_md *m = malloc(sizeof *m);
  if (!m) return mx_err(MX_ENOMEM, "out of host memory for a layout descriptor");
  m->F = w->shape[0], m->C = w->shape[1];
  size_t bytes = (u_floats(m) + (size_t)w->size) * sizeof(float);
  int rc = mx_tensor_new_laid(w->ndim, w->shape, MX_F32, bytes, &wino_layout, m, out);
  if (rc) { free(m); return rc; }
  return wino_from_row_major(w, *out);
}

/* ---- activations as the transforms see them ----------------------------------------- */

/* A 4-D (N, C, H, W) float32 tensor's element (n, c, h, w) at
 * n*sN + (c / X)*sC + h*sH + w*sW + c % X (X = 1: no channel blocks, sC the channel
 * stride). Channels c..c+7 (c % 8 == 0) are contiguous when X >= 8 or sC == 1. */
typedef struct view { float *p; int64_t sN, sC, sH, sW; int X; } view;

/* t's view, or false for a layout the transforms do not read */
static bool view_of(const mx_tensor *t, view *v) {
  v->p = mx_ptr(t);
  if (t->ndim != 4 || t->dtype != MX_F32) return false;
  if (!t->layout) {
    v->X = 1, v->sW = 1, v->sH = t->shape[3], v->sC = t->shape[2] * t->shape[3];
    v->sN = t->shape[1] * v->sC;
    return true;
  }
  if (!mx_dnnl_is_blocked(t)) return false;
  const dnnl_memory_desc_t *md = t->layout_md;
  if (md->format_kind != dnnl_blocked || md->ndims != 4 || md->offset0 != 0) return false;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (b->inner_nblks == 0) v->X = 1;
  else if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 &&
           (b->inner_blks[0] == 8 || b->inner_blks[0] == 16))
    v->X = (int)b->inner_blks[0];
  else return false;
  v->sN = b->strides[0], v->sC = b->strides[1], v->sH = b->strides[2], v->sW = b->strides[3];
  return true;
}

static inline __m256 load8(const view *v, const float *q) {
  if (v->X >= 8 || v->sC == 1) return _mm256_loadu_ps(q);
  int64_t s = v->sC;
  return _mm256_setr_ps(q[0], q[s], q[2 * s], q[3 * s], q[4 * s], q[5 * s], q[6 * s], q[7 * s]);
}

static inline void store8(const view *v, float *q, __m256 x) {
  if (v->X >= 8 || v->sC == 1) { _mm256_storeu_ps(q, x); return; }
  float t[8];
  _mm256_storeu_ps(t, x);
  for (int i = 0; i < 8; i++) q[i * v->sC] = t[i];
}

/* ---- the three stages ---------------------------------------------------------------- */

typedef struct wino_job {
  view x, o, r;           /* data, output, residual (r.p NULL: none) */
  int64_t N, C, F, H, W, OH, OW, ph, pw, th, tw, T;
  const float *U, *bias;
  int act;
} wino_job;

/* V[xi][t][c] = B^T d B for every channel of tile t, d its 4x4 window (zeros outside
 * the data), 8 channels at a time; B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
static void input_tile(const wino_job *j, int64_t t, float *o, size_t stride) {
  const view *x = &j->x;
  int64_t n = t / (j->th * j->tw), r = t % (j->th * j->tw);
  int64_t h0 = (r / j->tw) * 2 - j->ph, w0 = (r % j->tw) * 2 - j->pw;
  bool inside = h0 >= 0 && w0 >= 0 && h0 + 4 <= j->H && w0 + 4 <= j->W;
  int64_t off[4][4];
  bool in[4][4];
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) {
      in[a][b] = inside || (h0 + a >= 0 && h0 + a < j->H && w0 + b >= 0 && w0 + b < j->W);
      off[a][b] = (h0 + a) * x->sH + (w0 + b) * x->sW;
    }
  const float *img = x->p + n * x->sN;
  for (int64_t c = 0; c < j->C; c += 8, o += 8) {
    const float *q = img + (c / x->X) * x->sC + c % x->X;
    __m256 d[4][4];
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++)
        d[a][b] = in[a][b] ? load8(x, q + off[a][b]) : _mm256_setzero_ps();
    __m256 u[4][4];
    for (int b = 0; b < 4; b++) {
      __m256 d0 = d[0][b], d1 = d[1][b], d2 = d[2][b], d3 = d[3][b];
      u[0][b] = _mm256_sub_ps(d0, d2);
      u[1][b] = _mm256_add_ps(d1, d2);
      u[2][b] = _mm256_sub_ps(d2, d1);
      u[3][b] = _mm256_sub_ps(d1, d3);
    }
    for (int a = 0; a < 4; a++) {
      __m256 e0 = u[a][0], e1 = u[a][1], e2 = u[a][2], e3 = u[a][3];
      _mm256_storeu_ps(o + (size_t)(a * 4 + 0) * stride, _mm256_sub_ps(e0, e2));
      _mm256_storeu_ps(o + (size_t)(a * 4 + 1) * stride, _mm256_add_ps(e1, e2));
      _mm256_storeu_ps(o + (size_t)(a * 4 + 2) * stride, _mm256_sub_ps(e2, e1));
      _mm256_storeu_ps(o + (size_t)(a * 4 + 3) * stride, _mm256_sub_ps(e1, e3));
    }
  }
}

static inline __m256 activate(__m256 y, int act) {
  if (act == MX_CONVOLUTION_ACT_TYPE_NONE) return y;
  /* max(y, 0) with y's NaN kept: max_ps returns its second operand when either is NaN */
  y = _mm256_max_ps(_mm256_setzero_ps(), y);
  if (act == MX_CONVOLUTION_ACT_TYPE_RELU6) y = _mm256_min_ps(_mm256_set1_ps(6.0f), y);
  return y;
}

/* tile t's 2x2 outputs, every filter, 8 at a time: act(A^T m A + bias [+ residual]),
 * A^T = [1 1 1 0; 0 1 -1 -1] */
static void output_tile(const wino_job *j, int64_t t, const float *m, size_t stride) {
  const view *o = &j->o, *rv = &j->r;
  int64_t n = t / (j->th * j->tw), r = t % (j->th * j->tw);
  int64_t h0 = (r / j->tw) * 2, w0 = (r % j->tw) * 2;
  int nh = h0 + 1 < j->OH ? 2 : 1, nw = w0 + 1 < j->OW ? 2 : 1;
  int64_t ooff[2][2], roff[2][2];
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      ooff[a][b] = (h0 + a) * o->sH + (w0 + b) * o->sW;
      roff[a][b] = (h0 + a) * rv->sH + (w0 + b) * rv->sW;
    }
  float *oimg = o->p + n * o->sN;
  const float *rimg = rv->p ? rv->p + n * rv->sN : NULL;
  for (int64_t f = 0; f < j->F; f += 8, m += 8) {
    __m256 s[2][4];
    for (int b = 0; b < 4; b++) {
      __m256 m0 = _mm256_loadu_ps(m + (size_t)(0 * 4 + b) * stride);
      __m256 m1 = _mm256_loadu_ps(m + (size_t)(1 * 4 + b) * stride);
      __m256 m2 = _mm256_loadu_ps(m + (size_t)(2 * 4 + b) * stride);
      __m256 m3 = _mm256_loadu_ps(m + (size_t)(3 * 4 + b) * stride);
      s[0][b] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
      s[1][b] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
    }
    __m256 bias = j->bias ? _mm256_loadu_ps(j->bias + f) : _mm256_setzero_ps();
    float *oq = oimg + (f / o->X) * o->sC + f % o->X;
    const float *rq = rimg ? rimg + (f / rv->X) * rv->sC + f % rv->X : NULL;
    for (int a = 0; a < nh; a++) {
      __m256 y[2] = {_mm256_add_ps(_mm256_add_ps(s[a][0], s[a][1]), s[a][2]),
                     _mm256_sub_ps(_mm256_sub_ps(s[a][1], s[a][2]), s[a][3])};
      for (int b = 0; b < nw; b++) {
        __m256 v = _mm256_add_ps(y[b], bias);
        if (rq) v = _mm256_add_ps(v, load8(rv, rq + roff[a][b]));
        store8(o, oq + ooff[a][b], activate(v, j->act));
      }
    }
  }
  /* a blocked output's padded channels (F up to the next block) are written zero
   * ("padding is zero": docs/design/architecture.md) */
  for (int64_t f = j->F; o->X > 1 && f % o->X; f += 8) {
    float *oq = oimg + (f / o->X) * o->sC + f % o->X;
    for (int a = 0; a < nh; a++)
      for (int b = 0; b < nw; b++) _mm256_storeu_ps(oq + ooff[a][b], _mm256_setzero_ps());
  }
}

/* a thread's buffer for V and M, kept for its next call (no page faults once warm) and
 * freed when the thread exits; a call needing more than KEEP_BYTES allocates its own */
#define KEEP_BYTES ((size_t)64 << 20)
typedef struct kept_buf { size_t bytes; float *p; } kept_buf;
static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;
static void kept_free(void *v) {
  kept_buf *k = v;
  free(k->p);
  free(k);
}
static void kept_init(void) { pthread_key_create(&kept_key, kept_free); }

static float *work_get(size_t bytes, bool *own) {
  *own = bytes > KEEP_BYTES;
  void *p = NULL;
  if (*own) return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
  pthread_once(&kept_once, kept_init);
  kept_buf *k = pthread_getspecific(kept_key);
  if (k && bytes <= k->bytes) return k->p;
  if (!k) {
    if (!(k = calloc(1, sizeof *k))) return NULL;
    if (pthread_setspecific(kept_key, k)) { free(k); return NULL; }
  }
  if (posix_memalign(&p, 64, bytes) != 0) return NULL;
  free(k->p);
  k->p = p, k->bytes = bytes;
  return p;
}

/* Tiles per block. A block's V and M (16 x tb x (C + F) floats) are written by the input
 * transform, run through the 16 GEMMs and read back by the output transform; sized to
 * stay in a core's L2 and its share of L3, so that none of it makes a round trip through
 * memory (2 MB: 256 kB to 1 MB and 4 to 8 MB ran slower on Zen 5, 1 MB of L2 a core;
 * unblocked, Inception v3's first layers at batch 8 wrote and re-read 100-300 MB per
 * convolution and ran at a fifth of the direct kernel's speed). The floor keeps a GEMM's
 * rows from getting so few that reading U, which every block reads again, outweighs
 * them. */
#define BLOCK_BYTES ((size_t)2 << 20)
#define MIN_BLOCK_TILES 32
static int64_t block_tiles(const wino_job *j) {
  int64_t tb = (int64_t)(BLOCK_BYTES / (16 * sizeof(float) * (size_t)(j->C + j->F)));
  return tb < MIN_BLOCK_TILES ? MIN_BLOCK_TILES : tb;
}

/* M[xi] (n, F) = V[xi] (n, C) . U[xi] (C, F): Winograd point xi of n tiles, V and M
 * holding the 16 points' matrices one after another */
static int point_gemm(const wino_job *j, int xi, int64_t n, const float *V, float *M) {
  size_t sv = (size_t)n * (size_t)j->C, sm = (size_t)n * (size_t)j->F;
  return mx_dnnl_sgemm("convolution", false, false, n, j->F, j->C, 1.0f, V + xi * sv, j->C,
                       j->U + (size_t)xi * (size_t)j->C * (size_t)j->F, j->F, 0.0f, M + xi * sm,
                       j->F);
}

static int no_room(size_t bytes) {
  return mx_err(MX_ENOMEM, "convolution: out of memory for Winograd's %zu KB", bytes >> 10);
}

/* the tiles t0 .. t0 + n - 1 through the three stages on the calling thread; buf holds
 * their V and M */
static int run_block(const wino_job *j, int64_t t0, int64_t n, float *buf) {
  float *V = buf, *M = buf + (size_t)16 * (size_t)n * (size_t)j->C;
  size_t sv = (size_t)n * (size_t)j->C, sm = (size_t)n * (size_t)j->F;
  for (int64_t i = 0; i < n; i++) input_tile(j, t0 + i, V + (size_t)i * (size_t)j->C, sv);
  for (int xi = 0; xi < 16; xi++) {
    int e = point_gemm(j, xi, n, V, M);
    if (e) return e;
  }
  for (int64_t i = 0; i < n; i++) output_tile(j, t0 + i, M + (size_t)i * (size_t)j->F, sm);
  return MX_OK;
}

int mx_wino_conv(const mx_tensor *x, const mx_tensor *w, const mx_tensor *bias,
                 const mx_tensor *res, mx_tensor *o, const int64_t *pad, int act) {
  wino_job j;
  memset(&j, 0, sizeof j);
  const wino_md *m = w->layout_md;
  if (!view_of(x, &j.x) || !view_of(o, &j.o) || (res && !view_of(res, &j.r)) ||
      (bias && (bias->layout || bias->dtype != MX_F32)) ||
      x->shape[1] != m->C || o->shape[1] != m->F)
    return MX_DECLINE;
  j.N = x->shape[0], j.C = m->C, j.F = m->F, j.H = x->shape[2], j.W = x->shape[3];
  j.OH = o->shape[2], j.OW = o->shape[3], j.ph = pad[0], j.pw = pad[1];
  j.th = (j.OH + 1) / 2, j.tw = (j.OW + 1) / 2, j.T = j.N * j.th * j.tw;
  j.U = mx_ptr(w), j.bias = bias ? mx_ptr(bias) : NULL, j.act = act;
  if (j.T == 0) return MX_OK;
  double flops = 2.0 * 16.0 * (double)j.T * (double)j.C * (double)j.F;
  int prev, nt = mx_dnnl_team_begin(flops, &prev);
  int64_t tb = block_tiles(&j), nb = (j.T + tb - 1) / tb;
  size_t per_tile = (size_t)16 * (size_t)(j.C + j.F) * sizeof(float);
  int rc = MX_OK;
  if (nb == 1) {
    /* one block: its stages in turn, each shared by the team (tiles, then one GEMM per
     * Winograd point and thread: oneDNN's sgemm runs on the calling thread inside a
     * parallel region) */
    bool own;
    float *buf = work_get((size_t)j.T * per_tile, &own);
    size_t sv = (size_t)j.T * (size_t)j.C, sm = (size_t)j.T * (size_t)j.F;
    if (!buf) {
      rc = no_room((size_t)j.T * per_tile);
    } else {
      float *V = buf, *M = buf + 16 * sv;
#pragma omp parallel num_threads(nt)
      {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < j.T; t++) input_tile(&j, t, V + (size_t)t * (size_t)j.C, sv);
#pragma omp for schedule(static)
        for (int xi = 0; xi < 16; xi++) {
          int e = point_gemm(&j, xi, j.T, V, M);
          if (e) {
#pragma omp critical
            rc = e;
          }
        }
        if (!rc) {
#pragma omp for schedule(static)
          for (int64_t t = 0; t < j.T; t++)
            output_tile(&j, t, M + (size_t)t * (size_t)j.F, sm);
        }
      }
      if (own) free(buf);
    }
  } else {
    /* blocks of equal size, as many per thread */
    nb = (nb + nt - 1) / nt * nt;
    tb = (j.T + nb - 1) / nb;
    nb = (j.T + tb - 1) / tb;
#pragma omp parallel num_threads(nt)
    {
      bool own;
      float *buf = work_get((size_t)tb * per_tile, &own);
      if (!buf) {
#pragma omp critical
        rc = no_room((size_t)tb * per_tile);
      }
#pragma omp for schedule(static)
      for (int64_t b = 0; b < nb; b++) {
        int64_t t0 = b * tb, n = j.T - t0 < tb ? j.T - t0 : tb;
        int e = buf ? run_block(&j, t0, n, buf) : MX_OK;
        if (e) {
#pragma omp critical
          rc = e;
        }
      }
      if (own) free(buf);
    }
  }
  mx_dnnl_team_end(nt, prev);
  if (!rc) atomic_fetch_add_explicit(&runs, 1, memory_order_relaxed);
  return rc;
}

#endif /* MX_HAVE_ONEDNN */
