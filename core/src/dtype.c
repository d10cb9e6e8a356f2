/* dtype.c — MXNet dtype codes, names, promotion and f16/bf16 conversion. */
#include "internal.h"

#include <math.h>
#include <string.h>

size_t mx_dtype_size(int d) {
  switch (d) {
  case MX_F32: case MX_I32: return 4;
  case MX_F64: case MX_I64: return 8;
  case MX_F16: case MX_BF16: case MX_I16: return 2;
  case MX_U8: case MX_I8: case MX_BOOL: return 1;
  default: return 0;
  }
}

bool mx_dtype_valid(int d) { return mx_dtype_size(d) != 0; }
bool mx_dtype_is_float(int d) {
  return d == MX_F32 || d == MX_F64 || d == MX_F16 || d == MX_BF16;
}

const char *mx_dtype_name(int d) {
  switch (d) {
  case MX_F32: return "float32";
  case MX_F64: return "float64";
  case MX_F16: return "float16";
  case MX_BF16: return "bfloat16";
  case MX_U8: return "uint8";
  case MX_I8: return "int8";
  case MX_I16: return "int16";
  case MX_I32: return "int32";
  case MX_I64: return "int64";
  case MX_BOOL: return "bool";
  default: return NULL;
  }
}

int mx_dtype_from_name(const char *n) {
  static const struct { const char *name; int code; } tab[] = {
      {"float32", MX_F32}, {"f32", MX_F32}, {"float", MX_F32},
      {"float64", MX_F64}, {"f64", MX_F64}, {"double", MX_F64},
      {"float16", MX_F16}, {"f16", MX_F16}, {"half", MX_F16},
      {"bfloat16", MX_BF16}, {"bf16", MX_BF16},
      {"uint8", MX_U8}, {"u8", MX_U8}, {"int8", MX_I8}, {"i8", MX_I8},
      {"int16", MX_I16}, {"i16", MX_I16},
      {"int32", MX_I32}, {"i32", MX_I32}, {"int64", MX_I64}, {"i64", MX_I64},
      {"bool", MX_BOOL}, {"bool_", MX_BOOL}};
  if (!n) return -1;
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (strcmp(n, tab[i].name) == 0) return tab[i].code;
  return -1;
}

/* Rank for promotion: bool < u8/i8 < i16 < i32 < i64 < f16/bf16 < f32 < f64. Mixed
 * u8/i8 goes to i32; f16 with bf16 goes to f32 (as NumPy/PyTorch do). */
static int rank(int d) {
  switch (d) {
  case MX_BOOL: return 0;
  case MX_U8: case MX_I8: return 1;
  case MX_I16: return 2;
  case MX_I32: return 3;
  case MX_I64: return 4;
  case MX_F16: case MX_BF16: return 5;
  case MX_F32: return 6;
  case MX_F64: return 7;
  default: return -1;
  }
}

int mx_dtype_promote(int a, int b) {
  if (a == b) return a;
  int ra = rank(a), rb = rank(b);
  if (ra == rb) return ra == 1 ? MX_I32 : MX_F32; /* u8+i8, f16+bf16 */
  return ra > rb ? a : b;
}

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t mx_f32_to_f16(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* Inf or NaN: keep NaN quiet and non-zero */
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
  if (ax < 0x38800000u) { /* subnormal or zero in f16 */
    /* value = ax as float; scale into the subnormal grid of 2^-24 with RNE */
    float v = u2f(ax) * 16777216.0f; /* 2^24, exact */
    uint32_t m = (uint32_t)v;
    float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) m++;
    return (uint16_t)(sign | m);
  }
  uint32_t mant = ax & 0x7fffffu;
  uint32_t exp = (ax >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* carry may bump exp: fine */
  return (uint16_t)(sign | h);
}

float mx_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return u2f(sign | 0x7f800000u | (mant << 13));
  return u2f(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t mx_f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

float mx_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* double -> a 16-bit float with `mbits` explicit mantissa bits and exponent bias
 * `bias`, rounded once (nearest even). Going through float32 first would round
 * twice and get ties and the overflow threshold wrong. */
static uint16_t f64_to_half(double d, int mbits, int bias) {
  uint16_t sign = signbit(d) ? 0x8000u : 0;
  int efield_max = 2 * bias + 1; /* all-ones exponent: Inf/NaN */
  uint16_t inf = (uint16_t)(sign | ((unsigned)efield_max << mbits));
  if (d != d) return (uint16_t)(inf | (1u << (mbits - 1))); /* quiet NaN */
  double a = fabs(d);
  if (a == INFINITY) return inf;
  if (a == 0) return sign;
  int k;
  double f = frexp(a, &k); /* a = f * 2^k, f in [0.5, 1) */
  int e = k - 1;           /* a = (2f) * 2^e, 2f in [1, 2) */
  if (e < 1 - bias) {      /* subnormal: quantum 2^(1 - bias - mbits) */
    double m = nearbyint(ldexp(a, bias - 1 + mbits)); /* exact scaling, one rounding */
    return (uint16_t)(sign | (uint16_t)m); /* m == 2^mbits encodes the smallest normal */
  }
  double m = nearbyint(ldexp(2 * f, mbits)); /* in [2^mbits, 2^(mbits+1)] */
  if (m >= ldexp(1.0, mbits + 1)) { m /= 2; e++; }
  int efield = e + bias;
  if (efield >= efield_max) return inf;
  return (uint16_t)(sign | ((unsigned)efield << mbits) | ((uint16_t)m & ((1u << mbits) - 1)));
}

double mx_load_f64(const void *p, int d, int64_t i) {
  switch (d) {
  case MX_F32: return ((const float *)p)[i];
  case MX_F64: return ((const double *)p)[i];
  case MX_F16: return mx_f16_to_f32(((const uint16_t *)p)[i]);
  case MX_BF16: return mx_bf16_to_f32(((const uint16_t *)p)[i]);
  case MX_U8: return ((const uint8_t *)p)[i];
  case MX_I8: return ((const int8_t *)p)[i];
  case MX_I16: return ((const int16_t *)p)[i];
  case MX_I32: return ((const int32_t *)p)[i];
  case MX_I64: return (double)((const int64_t *)p)[i];
  case MX_BOOL: return ((const uint8_t *)p)[i] != 0;
  default: return NAN;
  }
}

/* Float to integer conversions truncate toward zero like C casts, saturating
 * instead of invoking undefined behaviour on out-of-range values or NaN. */
static int64_t sat_i64(double v, double lo, double hi) {
  if (v != v) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

void mx_store_f64(void *p, int d, int64_t i, double v) {
  switch (d) {
  case MX_F32: ((float *)p)[i] = (float)v; break;
  case MX_F64: ((double *)p)[i] = v; break;
  case MX_F16: ((uint16_t *)p)[i] = f64_to_half(v, 10, 15); break;
  case MX_BF16: ((uint16_t *)p)[i] = f64_to_half(v, 7, 127); break;
  case MX_U8: ((uint8_t *)p)[i] = (uint8_t)sat_i64(v, 0, 255); break;
  case MX_I8: ((int8_t *)p)[i] = (int8_t)sat_i64(v, -128, 127); break;
  case MX_I16: ((int16_t *)p)[i] = (int16_t)sat_i64(v, -32768, 32767); break;
  case MX_I32: ((int32_t *)p)[i] = (int32_t)sat_i64(v, -2147483648.0, 2147483647.0); break;
  case MX_I64:
    /* 2^63 itself is the first double above INT64_MAX: saturate there, and convert
     * only values that fit (the cast of an out-of-range double is undefined) */
    ((int64_t *)p)[i] = v != v ? 0 : v >= 9223372036854775808.0 ? INT64_MAX
                       : v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;
    break;
  case MX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}

void mx_convert(void *dst, int dd, const void *src, int sd, int64_t n) {
  if (dd == sd) {
    memcpy(dst, src, (size_t)n * mx_dtype_size(dd));
    return;
  }
  if (dd == MX_F32 && sd == MX_F16) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = mx_f16_to_f32(((const uint16_t *)src)[i]);
    return;
  }
  if (dd == MX_F16 && sd == MX_F32) {
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = mx_f32_to_f16(((const float *)src)[i]);
    return;
  }
  if (dd == MX_F32 && sd == MX_U8) { /* image data: the common cast */
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = ((const uint8_t *)src)[i];
    return;
  }
  if (dd == MX_F32 && sd == MX_I32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const int32_t *)src)[i];
    return;
  }
  if (dd == MX_F32 && sd == MX_I64) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const int64_t *)src)[i];
    return;
  }
  if (dd == MX_F64 && sd == MX_F32) {
    for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = ((const float *)src)[i];
    return;
  }
  if (dd == MX_F32 && sd == MX_F64) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const double *)src)[i];
    return;
  }
  /* int64 to int64-ish paths must not go through double (precision loss) */
  if (dd == MX_I64 && (sd == MX_I32 || sd == MX_I16 || sd == MX_U8 || sd == MX_I8 || sd == MX_BOOL)) {
    for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int64_t)mx_load_f64(src, sd, i);
    return;
  }
  if (sd == MX_I64 && (dd == MX_I32 || dd == MX_I16 || dd == MX_U8 || dd == MX_I8)) {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = ((const int64_t *)src)[i];
      if (dd == MX_I32) ((int32_t *)dst)[i] = (int32_t)v;
      else if (dd == MX_I16) ((int16_t *)dst)[i] = (int16_t)v;
      else if (dd == MX_U8) ((uint8_t *)dst)[i] = (uint8_t)v;
      else ((int8_t *)dst)[i] = (int8_t)v;
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) mx_store_f64(dst, dd, i, mx_load_f64(src, sd, i));
}
