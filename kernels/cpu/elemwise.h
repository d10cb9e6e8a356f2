/* elemwise.h — what the CPU elementwise kernels share (elemwise.c: unary and binary ops;
 * elemwise_scalar.c: the scalar forms; elemwise_select.c: clip, broadcast_to/like,
 * where): compute types with the conversion of f16/bf16 into them, and the broadcasting
 * plan. Not installed. */
#ifndef MX_CPU_ELEMWISE_H
#define MX_CPU_ELEMWISE_H
#include "internal.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NOATTR
/* maximum/minimum: NaN in either operand gives NaN (NumPy) */
#define F_MAX(a, b) ((a) != (a) ? (a) : (a) >= (b) ? (a) : (b))
#define F_MIN(a, b) ((a) != (a) ? (a) : (a) <= (b) ? (a) : (b))


enum { CT_F32, CT_F64, CT_I32, CT_I64, CT_I8, CT_U8, CT_N };
static const int ct_dtype[CT_N] = {MX_F32, MX_F64, MX_I32, MX_I64, MX_I8, MX_U8};
static const size_t ct_size[CT_N] = {4, 8, 4, 8, 1, 1};

/* Compute type of a dtype: itself, f32 for f16/bf16, u8 for bool. */
static inline int ct_of(int dtype) {
  switch (dtype) {
  case MX_F32: case MX_F16: case MX_BF16: return CT_F32;
  case MX_F64: return CT_F64;
  case MX_I32: return CT_I32;
  case MX_I64: return CT_I64;
  case MX_I8: return CT_I8;
  default: return CT_U8; /* u8, bool */
  }
}
static inline bool is_native(int dtype) { return dtype != MX_F16 && dtype != MX_BF16; }

#define GRAIN_LIGHT ((int64_t)1 << 16) /* per thread: memory-bound loops */
#define GRAIN_HEAVY ((int64_t)1 << 14) /* per thread: transcendental loops */
#define CHUNK 512                      /* conversion block (elements) */

/* ---------------------------------------------------------------- conversion */
/* Converts n elements into / out of the compute type; f16 uses F16C, bf16 bit ops. */
static inline void to_ct(float *restrict dst, const void *src, int dtype, int64_t off, int64_t n) {
  if (dtype == MX_F16) {
    const uint16_t *s = (const uint16_t *)src + off;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(s[i]);
  } else if (dtype == MX_BF16) {
    const uint16_t *s = (const uint16_t *)src + off;
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)s[i] << 16;
      memcpy(&dst[i], &u, 4);
    }
  } else {
    mx_convert(dst, MX_F32, (const char *)src + (size_t)off * mx_dtype_size(dtype), dtype, n);
  }
}
static inline void from_ct(void *dst, int dtype, int64_t off, const float *restrict src, int64_t n) {
  if (dtype == MX_F16) {
    uint16_t *d = (uint16_t *)dst + off;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128((__m128i *)(d + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = mx_f32_to_f16(src[i]);
  } else if (dtype == MX_BF16) {
    uint16_t *d = (uint16_t *)dst + off;
    for (int64_t i = 0; i < n; i++) {
      uint32_t x;
      memcpy(&x, &src[i], 4);
      /* round to nearest even; NaN kept quiet (as mx_f32_to_bf16) */
      uint32_t r = (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x400000u)
                                                  : x + 0x7fffu + ((x >> 16) & 1u);
      d[i] = (uint16_t)(r >> 16);
    }
  } else {
    mx_convert((char *)dst + (size_t)off * mx_dtype_size(dtype), dtype, src, MX_F32, n);
  }
}

/* A whole tensor in compute type ct (a new buffer the caller frees), or NULL+ENOMEM. */
static inline void *as_ct(const mx_tensor *t, int ct, bool *owned) {
  *owned = false;
  if (t->dtype == ct_dtype[ct]) return mx_ptr(t);
  void *b = malloc((size_t)(t->size ? t->size : 1) * ct_size[ct]);
  if (!b) return NULL;
  *owned = true;
  if (ct == CT_F32) {
    to_ct(b, mx_ptr(t), t->dtype, 0, t->size);
  } else {
    mx_convert(b, ct_dtype[ct], mx_ptr(t), t->dtype, t->size);
  }
  return b;
}

/* ---------------------------------------------------------------- broadcasting plan */
/* Output dims (size-1 dims dropped) with each operand's element stride (0 where it
 * broadcasts); adjacent dims merge when every operand continues contiguously, so
 * same-shape, scalar-like, row and column broadcasts reduce to 1 or 2 dims. */
typedef struct {
  int nd;
  int nops;
  int64_t shape[MX_MAX_DIM];
  int64_t st[3][MX_MAX_DIM];
} bplan;

static inline void make_plan(bplan *p, int nops, const int *ndim, const int64_t *const *shapes,
                      int ond, const int64_t *oshape) {
  int64_t cur[3] = {1, 1, 1};
  int64_t rs[MX_MAX_DIM], rst[3][MX_MAX_DIM];
  int n = 0;
  p->nops = nops;
  for (int d = ond - 1; d >= 0; d--) {
    int64_t s[3];
    for (int k = 0; k < nops; k++) {
      int id = d - (ond - ndim[k]);
      int64_t dim = id >= 0 ? shapes[k][id] : 1;
      s[k] = dim == 1 ? 0 : cur[k];
      cur[k] *= dim;
    }
    if (oshape[d] == 1) continue;
    bool merge = n > 0;
    for (int k = 0; k < nops && merge; k++)
      if (s[k] != rst[k][n - 1] * rs[n - 1]) merge = false;
    if (merge) {
      rs[n - 1] *= oshape[d];
    } else {
      rs[n] = oshape[d];
      for (int k = 0; k < nops; k++) rst[k][n] = s[k];
      n++;
    }
  }
  if (n == 0) { /* every dim is 1: one element */
    rs[0] = 1;
    for (int k = 0; k < nops; k++) rst[k][0] = 0;
    n = 1;
  }
  p->nd = n;
  for (int i = 0; i < n; i++) { /* reverse into outer-to-inner order */
    p->shape[i] = rs[n - 1 - i];
    for (int k = 0; k < nops; k++) p->st[k][i] = rst[k][n - 1 - i];
  }
}

/* Walks output elements [b, e) in inner runs: calls run(len, offsets, pos, ctx) with
 * each operand's element offset at the run start; the run's inner strides are the
 * plan's last-dim strides. */
typedef void (*run_fn)(int64_t len, const int64_t *off, int64_t pos, const void *ctx);
static inline void plan_walk(const bplan *p, int64_t b, int64_t e, run_fn run, const void *ctx) {
  int nd = p->nd, in = nd - 1;
  int64_t idx[MX_MAX_DIM], off[3] = {0, 0, 0};
  int64_t r = b;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = r % p->shape[d];
    r /= p->shape[d];
    for (int k = 0; k < p->nops; k++) off[k] += idx[d] * p->st[k][d];
  }
  int64_t pos = b;
  while (pos < e) {
    int64_t len = p->shape[in] - idx[in];
    if (len > e - pos) len = e - pos;
    run(len, off, pos, ctx);
    pos += len;
    idx[in] += len;
    for (int k = 0; k < p->nops; k++) off[k] += len * p->st[k][in];
    for (int d = in; d > 0 && idx[d] == p->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < p->nops; k++) off[k] += p->st[k][d - 1] - p->shape[d] * p->st[k][d];
    }
  }
}

/* int64 tensors stay exact at every magnitude (a double holds integers exactly only to
 * 2^53): comparisons, maximum and minimum compare the int64 with the double exactly;
 * arithmetic with an integral in-range scalar runs in int64 with two's-complement
 * wrap-around (through uint64: no signed overflow); other scalars go through double
 * (docs/ops-notes.md, "int64 exactness"). */
#define I64_LIM 9223372036854775808.0 /* 2^63, exact in double */
static inline bool i64_of(double s, int64_t *k) {
  if (!(s >= -I64_LIM && s < I64_LIM) || s != floor(s)) return false;
  *k = (int64_t)s;
  return true;
}
/* exact order of v and s: -1, 0, 1, or 2 when s is NaN */
static inline int i64_cmp(int64_t v, double s) {
  if (s != s) return 2;
  if (s >= I64_LIM) return -1;
  if (s < -I64_LIM) return 1;
  double f = floor(s);
  int64_t k = (int64_t)f;
  if (v != k) return v < k ? -1 : 1;
  return s == f ? 0 : -1;
}
static inline int64_t i64_sat(double r) {
  if (r != r) return 0;
  if (r >= I64_LIM) return INT64_MAX;
  if (r <= -I64_LIM) return INT64_MIN;
  return (int64_t)r;
}
static inline int64_t i64_idiv(int64_t a, int64_t b) {
  return b == 0 ? 0 : b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;
}

#define SAT(T, r, lo, hi) ((r) != (r) ? (T)0 : (r) <= (lo) ? (T)(lo) : (r) >= (hi) ? (T)(hi) : (T)(r))

#endif
