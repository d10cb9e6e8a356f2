/* specfun.c — the special functions some elementwise ops are defined by (rint, erfinv,
 * gammaln, digamma, trigamma) and the largest finite value per float dtype: the ops'
 * formulas, which every backend's kernels compute (kernels/ref and kernels/cpu alike);
 * specs check them against scipy's and MXNet's values, not against each other. */
#include "internal.h"

#include <math.h>

/* ---------------------------------------------------------------- unary ops, more
 * rint, fix, erfinv, gamma, gammaln, digamma, nan_to_num; through double,
 * every dtype (integers: rint and fix exact, the identity). The special functions are
 * exported (mx_sf_*) for kernels/cpu/elemwise.c, which runs the same formulas. */
/* MXNet's rint (mshadow_op::rint): floor unless x is strictly nearer ceil, so halves go
 * toward -inf (1.5 -> 1, -1.5 -> -2); not C rint's ties-to-even */
double mx_sf_rint(double x) {
  double f = floor(x), c = ceil(x);
  return x - f <= c - x ? f : c;
}
/* Giles' single-precision erfinv ("Approximating the erfinv function", GPU Computing Gems,
 * 2011) as the start, then two Newton steps on erf(x) - y, each doubling the digits
 * (1e-7 -> double precision) */
double mx_sf_erfinv(double y) {
  if (!(y >= -1 && y <= 1)) return NAN;
  if (y == 1 || y == -1) return y * INFINITY;
  double w = -log((1.0 - y) * (1.0 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int k = 0; k < 2; k++) {
    double d = 1.1283791670955126 * exp(-x * x); /* erf'(x) = 2/sqrt(pi) e^-x^2 */
    if (d == 0) break;
    x -= (erf(x) - y) / d;
  }
  return x;
}
/* lgamma_r, not lgamma: lgamma writes the global signgam (a data race in the pool) */
double mx_sf_gammaln(double x) {
  int sign;
  return lgamma_r(x, &sign);
}
/* digamma: NaN at the poles (0, -1, ...); reflection psi(x) = psi(1-x) - pi/tan(pi x) below
 * 0; the recurrence psi(x) = psi(x+1) - 1/x up to x >= 10; then the asymptotic series
 * log x - 1/2x - sum B_2k / (2k x^2k) to x^-12 (the next term, 1/12 x^-14, is below 1e-15
 * at x = 10) */
double mx_sf_digamma(double x) {
  if (x != x || x == -INFINITY) return NAN;
  if (x == INFINITY) return INFINITY;
  if (x <= 0 && x == floor(x)) return NAN;
  double r = 0;
  if (x < 0) {
    /* tan(pi x) through the fractional part keeps its accuracy for large |x| */
    double q = x - floor(x);
    r = -3.14159265358979323846 / tan(3.14159265358979323846 * q);
    x = 1 - x;
  }
  for (; x < 10; x += 1) r -= 1 / x;
  double z = 1 / (x * x);
  double s = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 -
             z * (691.0 / 32760))))));
  return r + log(x) - 0.5 / x - s;
}
/* the largest finite value of a float dtype (nan_to_num's default replacement of inf) */
double mx_sf_float_max(int dtype) {
  switch (dtype) {
  case MX_F16: return 65504.0;
  case MX_BF16: return 3.38953138925153547590470800371487866880e38;
  case MX_F32: return 3.40282346638528859811704183484516925440e38;
  default: return 1.79769313486231570814527423731704356798e308;
  }
}
/* trigamma (digamma's gradient). psi1(x) = sum 1/(x+k)^2: NaN at the poles 0, -1, ..., 0 at +inf;
 * reflection psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x) below 0; the recurrence psi1(x) =
 * psi1(x+1) + 1/x^2 up to x >= 10; then the asymptotic series 1/x + 1/2x^2 +
 * sum B_2k / x^(2k+1) to x^-15 (the next term, 3617/510 x^-17, is below 1e-16 at x = 10) */
double mx_sf_trigamma(double x) {
  if (x != x || x == -INFINITY) return NAN;
  if (x == INFINITY) return 0;
  if (x <= 0 && x == floor(x)) return NAN;
  double r = 0;
  if (x < 0) {
    double q = x - floor(x), s = sin(3.14159265358979323846 * q);
    r = 9.86960440108935861883 / (s * s);
    return r - mx_sf_trigamma(1 - x);
  }
  for (; x < 10; x += 1) r += 1 / (x * x);
  double z = 1 / (x * x);
  double s = 1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 - z * (5.0 / 66 -
             z * (691.0 / 2730 - z * (7.0 / 6))))));
  return r + 1 / x + 0.5 * z + s * z / x;
}
