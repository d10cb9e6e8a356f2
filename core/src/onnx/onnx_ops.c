/* onnx_ops.c — the converter registry and the elementwise, comparison, logic and
 * reduction ops: each ONNX op in terms of the op table's ops (MXNet names and
 * attributes). Semantics per the ONNX operator docs (onnx/docs/Operators.md, opsets 7 to
 * 17 as libonnx-testdata 1.12 covers). */
#include "onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry ---------------------------------------------------------------------- */

static const ox_conv_entry *const TABLES[] = {ox_ops_math, ox_ops_shape, ox_ops_nn, ox_ops_extra,
                                               ox_ops_extra2, ox_ops_rnn, ox_ops_seq, ox_ops_loop};
enum { NTABLES = sizeof TABLES / sizeof TABLES[0] };

ox_conv_fn ox_find_converter(const char *op_type) {
  for (int t = 0; t < NTABLES; t++)
    for (const ox_conv_entry *e = TABLES[t]; e->op_type; e++)
      if (strcmp(e->op_type, op_type) == 0) return e->fn;
  return NULL;
}

int ox_num_converters(void) {
  int n = 0;
  for (int t = 0; t < NTABLES; t++)
    for (const ox_conv_entry *e = TABLES[t]; e->op_type; e++) n++;
  return n;
}

const char *ox_converter_name(int k) {
  for (int t = 0; t < NTABLES; t++)
    for (const ox_conv_entry *e = TABLES[t]; e->op_type; e++)
      if (k-- == 0) return e->op_type;
  return NULL;
}

/* ---- helpers ----------------------------------------------------------------------- */

static bool is_float(int dt) { return dt == MX_F32 || dt == MX_F64 || dt == MX_F16 || dt == MX_BF16; }

/* ---- unary ------------------------------------------------------------------------- */

#define UNARY(NAME, OP)                                                                   \
  static int NAME(ox *X, int nin, ox_val **in, int nout, ox_val **out) {                   \
    (void)nout;                                                                           \
    int rc = ox_need(X, nin, in, 1);                                                      \
    return rc ? rc : ox_done(X, ox_op1(X, OP, in[0], NULL), out);                            \
  }
UNARY(cv_relu, "relu")
UNARY(cv_sigmoid, "sigmoid")
UNARY(cv_tanh, "tanh")
UNARY(cv_exp, "exp")
UNARY(cv_log, "log")
UNARY(cv_sqrt, "sqrt")
UNARY(cv_abs, "abs")
UNARY(cv_neg, "negative")
UNARY(cv_reciprocal, "reciprocal")
UNARY(cv_floor, "floor")
UNARY(cv_ceil, "ceil")
UNARY(cv_sin, "sin")
UNARY(cv_cos, "cos")
UNARY(cv_tan, "tan")
UNARY(cv_asin, "arcsin")
UNARY(cv_acos, "arccos")
UNARY(cv_atan, "arctan")
UNARY(cv_sinh, "sinh")
UNARY(cv_cosh, "cosh")
UNARY(cv_asinh, "arcsinh")
UNARY(cv_acosh, "arccosh")
UNARY(cv_atanh, "arctanh")
UNARY(cv_erf, "erf")
UNARY(cv_sign, "sign")
UNARY(cv_softsign, "softsign")
UNARY(cv_hardswish, "hard_swish")
UNARY(cv_mish, "mish")

static int cv_round(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_round_even(X, in[0]), out);
}

static int cv_identity(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (!rc) out[0] = in[0];
  return rc;
}

static int cv_not(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_cast(X, ox_op1(X, "logical_not", in[0], NULL), MX_BOOL), out);
}

static int cv_isnan(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_cast(X, ox_op1(X, "isnan", in[0], NULL), MX_BOOL), out);
}

static int cv_isinf(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t pos = ox_attr_i(X, "detect_positive", 1), neg = ox_attr_i(X, "detect_negative", 1);
  ox_val *v;
  if (pos && neg) v = ox_op1(X, "isinf", in[0], NULL);
  else if (!pos && !neg) v = ox_op1(X, "zeros_like", in[0], NULL);
  else v = ox_op1(X, "_equal_scalar", in[0], KV("scalar", pos ? "inf" : "-inf"));
  return ox_done(X, ox_cast(X, v, MX_BOOL), out);
}

static int cv_leaky(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_op1(X, "LeakyReLU", in[0], KV("act_type", "leaky",
      "slope", ox_f2s(X, ox_attr_f(X, "alpha", 0.01)))), out);
}

static int cv_elu(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_op1(X, "LeakyReLU", in[0], KV("act_type", "elu",
      "slope", ox_f2s(X, ox_attr_f(X, "alpha", 1.0)))), out);
}

/* y = gamma * (x > 0 ? x : alpha * (exp(x) - 1)) */
static int cv_selu(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  double a = ox_attr_f(X, "alpha", 1.67326319217681884765625);
  double g = ox_attr_f(X, "gamma", 1.05070102214813232421875);
  ox_val *e = ox_op1(X, "LeakyReLU", in[0], KV("act_type", "elu", "slope", ox_f2s(X, a)));
  return ox_done(X, ox_op1(X, "_mul_scalar", e, KV("scalar", ox_f2s(X, g))), out);
}

static int cv_celu(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  double a = ox_attr_f(X, "alpha", 1.0); /* max(0,x) + min(0, a*(exp(x/a)-1)) = elu(x/a)*a */
  ox_val *s = ox_op1(X, "_div_scalar", in[0], KV("scalar", ox_f2s(X, a)));
  ox_val *e = ox_op1(X, "LeakyReLU", s, KV("act_type", "elu", "slope", "1"));
  return ox_done(X, ox_op1(X, "_mul_scalar", e, KV("scalar", ox_f2s(X, a))), out);
}

static int cv_hardsigmoid(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_op1(X, "hard_sigmoid", in[0], KV("alpha",
      ox_f2s(X, ox_attr_f(X, "alpha", 0.2)), "beta", ox_f2s(X, ox_attr_f(X, "beta", 0.5)))), out);
}

static int cv_softplus(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  return rc ? rc : ox_done(X, ox_op1(X, "Activation", in[0], KV("act_type", "softrelu")), out);
}

static int cv_thresholded(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  const char *a = ox_f2s(X, ox_attr_f(X, "alpha", 1.0));
  ox_val *m = ox_op1(X, "_greater_scalar", in[0], KV("scalar", a));
  return ox_done(X, ox_op2(X, "mul", in[0], m, NULL), out);
}

static int cv_shrink(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  double l = ox_attr_f(X, "lambd", 0.5), b = ox_attr_f(X, "bias", 0.0);
  ox_val *x = in[0];
  ox_val *hi = ox_op1(X, "_greater_scalar", x, KV("scalar", ox_f2s(X, l)));
  ox_val *lo = ox_op1(X, "_lesser_scalar", x, KV("scalar", ox_f2s(X, -l)));
  ox_val *a = ox_op2(X, "mul", ox_op1(X, "_minus_scalar", x, KV("scalar", ox_f2s(X, b))), hi, NULL);
  ox_val *c = ox_op2(X, "mul", ox_op1(X, "_plus_scalar", x, KV("scalar", ox_f2s(X, b))), lo, NULL);
  return ox_done(X, ox_cast(X, ox_op2(X, "add", a, c, NULL), x->d.dtype), out);
}

static int cv_gelu(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  char buf[16];
  const char *ap = ox_attr_s(X, "approximate", "none", buf, sizeof buf);
  return ox_done(X, ox_op1(X, "gelu", in[0], KV("approximation", strcmp(ap, "tanh") ? "erf" : "tanh")), out);
}

/* ---- binary (numpy broadcasting: the op table's binary ops broadcast) ------------------ */

static int binary(ox *X, int nin, ox_val **in, ox_val **out, const char *op, bool to_bool) {
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *v = ox_op2(X, op, in[0], in[1], NULL);
  return ox_done(X, to_bool ? ox_cast(X, v, MX_BOOL) : v, out);
}
#define BINARY(NAME, OP, BOOL)                                                            \
  static int NAME(ox *X, int nin, ox_val **in, int nout, ox_val **out) {                   \
    (void)nout;                                                                           \
    return binary(X, nin, in, out, OP, BOOL);                                              \
  }
BINARY(cv_add, "add", false)
BINARY(cv_sub, "sub", false)
BINARY(cv_mul, "mul", false)
BINARY(cv_div, "div", false)
BINARY(cv_equal, "equal", true)
BINARY(cv_less, "lesser", true)
BINARY(cv_lesseq, "lesser_equal", true)
BINARY(cv_greater, "greater", true)
BINARY(cv_greatereq, "greater_equal", true)
BINARY(cv_and, "logical_and", true)
BINARY(cv_or, "logical_or", true)
BINARY(cv_xor, "logical_xor", true)

static int cv_pow(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  /* the result has the base's type; an exponent of another type is converted */
  ox_val *e = ox_cast(X, in[1], in[0]->d.dtype);
  return ox_done(X, ox_op2(X, "pow", in[0], e, NULL), out);
}

static int cv_mod(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  if (!ox_attr_i(X, "fmod", 0)) return ox_done(X, ox_op2(X, "mod", in[0], in[1], NULL), out);
  /* C's fmod: the dividend's sign; a - trunc(a / b) * b */
  ox_val *a = in[0], *b = in[1];
  ox_val *q = ox_op2(X, "div", a, b, NULL);
  if (is_float(a->d.dtype)) q = ox_op1(X, "trunc", q, NULL);
  return ox_done(X, ox_op2(X, "sub", a, ox_op2(X, "mul", q, b, NULL), NULL), out);
}

/* Max, Min, Sum, Mean: variadic, broadcasting */
static int variadic(ox *X, int nin, ox_val **in, ox_val **out, const char *op, bool mean) {
  if (nin < 1 || !in[0]) return ox_fail(X, "needs at least one input");
  ox_val *acc = in[0];
  for (int i = 1; i < nin && acc; i++) acc = ox_op2(X, op, acc, in[i], NULL);
  if (mean && nin > 1 && acc) acc = ox_op1(X, "_div_scalar", acc, KV("scalar", ox_str(X, "%d", nin)));
  if (acc == in[0] && acc) acc = ox_op1(X, "copy", acc, NULL);
  return ox_done(X, acc, out);
}
static int cv_max(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return variadic(X, nin, in, out, "maximum", false);
}
static int cv_min(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return variadic(X, nin, in, out, "minimum", false);
}
static int cv_sum(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return variadic(X, nin, in, out, "add", false);
}
static int cv_mean(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return variadic(X, nin, in, out, "add", true);
}

static int cv_prelu(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  /* max(x, 0) + min(x, 0) * slope, slope broadcast (unidirectionally) to x */
  ox_val *pos = ox_op1(X, "relu", in[0], NULL);
  ox_val *neg = ox_op1(X, "_minimum_scalar", in[0], KV("scalar", "0"));
  ox_val *slope = in[1];
  const mx_desc *xd = &in[0]->d, *sd = &slope->d;
  /* opset < 7: a 1-D slope of the channel count applies along axis 1 */
  if (sd->ndim == 1 && xd->ndim > 2 && sd->shape[0] > 1 && sd->shape[0] == xd->shape[1] &&
      sd->shape[0] != xd->shape[xd->ndim - 1]) {
    int64_t s[MX_MAX_DIM];
    s[0] = sd->shape[0];
    for (int i = 1; i < xd->ndim - 1; i++) s[i] = 1;
    char b[160];
    slope = ox_op1(X, "reshape", slope, KV("shape", ox_str(X, "%s", ox_tuple(b, sizeof b, xd->ndim - 1, s))));
  }
  return ox_done(X, ox_op2(X, "add", pos, ox_op2(X, "mul", neg, slope, NULL), NULL), out);
}

static int cv_where(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 3);
  if (rc) return rc;
  mx_desc d;
  if ((rc = ox_bshape(X, 3, in, &d))) return rc;
  ox_val *b[3];
  for (int i = 0; i < 3; i++)
    if (!(b[i] = ox_bcast_to(X, in[i], &d))) return MX_EINVAL;
  return ox_done(X, ox_op(X, "where", 3, b, NULL), out);
}

static int cv_clip(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  double lo = -INFINITY, hi = INFINITY;
  int n;
  if (X->opset < 11) {
    lo = ox_attr_f(X, "min", -INFINITY);
    hi = ox_attr_f(X, "max", INFINITY);
  } else {
    if (IN_OR(1, nin, in) && (rc = ox_f64s(X, in[1], "min", 1, &lo, &n))) return rc;
    if (IN_OR(2, nin, in) && (rc = ox_f64s(X, in[2], "max", 1, &hi, &n))) return rc;
  }
  ox_val *v = in[0];
  if (!is_float(v->d.dtype)) { /* integer clip: exact through maximum/minimum */
    if (lo > -INFINITY) v = ox_op1(X, "_maximum_scalar", v, KV("scalar", ox_f2s(X, lo)));
    if (v && hi < INFINITY) v = ox_op1(X, "_minimum_scalar", v, KV("scalar", ox_f2s(X, hi)));
    if (v == in[0]) v = ox_op1(X, "copy", v, NULL);
    return ox_done(X, v, out);
  }
  return ox_done(X, ox_op1(X, "clip", v, KV("a_min", ox_f2s(X, lo), "a_max", ox_f2s(X, hi))), out);
}

/* ---- reductions ---------------------------------------------------------------------- */

/* The axes of a Reduce*: the attribute (opset < 18; ReduceSum < 13) or input 2. */
static int reduce_axes(ox *X, int nin, ox_val **in, bool axes_input, int64_t *axes, int *n) {
  *n = ox_attr_ints(X, "axes", MX_MAX_DIM, axes);
  if (axes_input && IN_OR(1, nin, in)) return ox_ints(X, in[1], "axes", MX_MAX_DIM, axes, n);
  if (*n == -2) return MX_EINVAL;
  return MX_OK;
}

static int reduce(ox *X, int nin, ox_val **in, ox_val **out, const char *op, int pre, int post,
                  int64_t axes_opset) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t axes[MX_MAX_DIM];
  int n = -1;
  if ((rc = reduce_axes(X, nin, in, X->opset >= axes_opset, axes, &n))) return rc;
  bool keep = ox_attr_i(X, "keepdims", 1) != 0;
  ox_val *x = in[0];
  if (n <= 0 && ox_attr_i(X, "noop_with_empty_axes", 0)) return ox_done(X, ox_op1(X, "copy", x, NULL), out);
  /* pre: 1 abs, 2 square, 3 exp; post: 1 sqrt, 2 log */
  if (pre == 1) x = ox_op1(X, "abs", x, NULL);
  else if (pre == 2) x = ox_op1(X, "square", x, NULL);
  else if (pre == 3) x = ox_op1(X, "exp", x, NULL);
  if (!x) return MX_EINVAL;
  char b[160];
  ox_val *r = n > 0 ? ox_op1(X, op, x, KV("axis", ox_str(X, "%s", ox_tuple(b, sizeof b, n, axes)),
                                          "keepdims", keep ? "True" : "False"))
                    : ox_op1(X, op, x, KV("keepdims", keep ? "True" : "False"));
  if (r && post == 1) r = ox_op1(X, "sqrt", r, NULL);
  else if (r && post == 2) r = ox_op1(X, "log", r, NULL);
  return ox_done(X, r, out);
}
#define REDUCE(NAME, OP, PRE, POST, OPSET)                                                \
  static int NAME(ox *X, int nin, ox_val **in, int nout, ox_val **out) {                   \
    (void)nout;                                                                           \
    return reduce(X, nin, in, out, OP, PRE, POST, OPSET);                                  \
  }
REDUCE(cv_reduce_sum, "sum", 0, 0, 13)
REDUCE(cv_reduce_mean, "mean", 0, 0, 18)
REDUCE(cv_reduce_max, "max", 0, 0, 18)
REDUCE(cv_reduce_min, "min", 0, 0, 18)
REDUCE(cv_reduce_prod, "prod", 0, 0, 18)
REDUCE(cv_reduce_l1, "sum", 1, 0, 18)
REDUCE(cv_reduce_l2, "sum", 2, 1, 18)
REDUCE(cv_reduce_sumsq, "sum", 2, 0, 18)
REDUCE(cv_reduce_logsum, "sum", 0, 2, 18)
REDUCE(cv_reduce_logsumexp, "sum", 3, 2, 18)

static int argreduce(ox *X, int nin, ox_val **in, ox_val **out, const char *op) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int64_t axis = ox_attr_i(X, "axis", 0);
  bool keep = ox_attr_i(X, "keepdims", 1) != 0, last = ox_attr_i(X, "select_last_index", 0) != 0;
  int rank = in[0]->d.ndim;
  if (axis < 0) axis += rank;
  ox_val *x = in[0];
  int64_t dim = rank > 0 && axis >= 0 && axis < rank ? in[0]->d.shape[axis] : -1;
  if (last) { /* the first of the reversed: dim - 1 - that position */
    if (dim < 0) return ox_unsupported(X, "select_last_index on an unknown dim");
    x = ox_op1(X, "reverse", x, KV("axis", ox_str(X, "(%lld,)", (long long)axis)));
  }
  ox_val *r = ox_op1(X, op, x, KV("axis", ox_str(X, "%lld", (long long)axis),
                                  "keepdims", keep ? "True" : "False"));
  r = ox_cast(X, r, MX_I64);
  /* luamx counts positions from 1 */
  if (last) return ox_done(X, ox_op1(X, "_rminus_scalar", r, KV("scalar", ox_str(X, "%lld", (long long)dim))), out);
  return ox_done(X, ox_op1(X, "_minus_scalar", r, KV("scalar", "1")), out);
}
static int cv_argmax(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return argreduce(X, nin, in, out, "argmax");
}
static int cv_argmin(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return argreduce(X, nin, in, out, "argmin");
}

const ox_conv_entry ox_ops_math[] = {
    {"Relu", cv_relu}, {"Sigmoid", cv_sigmoid}, {"Tanh", cv_tanh}, {"Exp", cv_exp},
    {"Log", cv_log}, {"Sqrt", cv_sqrt}, {"Abs", cv_abs}, {"Neg", cv_neg},
    {"Reciprocal", cv_reciprocal}, {"Floor", cv_floor}, {"Ceil", cv_ceil}, {"Round", cv_round},
    {"Sin", cv_sin}, {"Cos", cv_cos}, {"Tan", cv_tan}, {"Asin", cv_asin}, {"Acos", cv_acos},
    {"Atan", cv_atan}, {"Sinh", cv_sinh}, {"Cosh", cv_cosh}, {"Asinh", cv_asinh},
    {"Acosh", cv_acosh}, {"Atanh", cv_atanh}, {"Erf", cv_erf}, {"Sign", cv_sign},
    {"Softsign", cv_softsign}, {"HardSwish", cv_hardswish}, {"Mish", cv_mish},
    {"Identity", cv_identity}, {"Not", cv_not}, {"IsNaN", cv_isnan}, {"IsInf", cv_isinf},
    {"LeakyRelu", cv_leaky}, {"Elu", cv_elu}, {"Selu", cv_selu}, {"Celu", cv_celu},
    {"HardSigmoid", cv_hardsigmoid}, {"Softplus", cv_softplus},
    {"ThresholdedRelu", cv_thresholded}, {"Shrink", cv_shrink}, {"Gelu", cv_gelu},
    {"Add", cv_add}, {"Sub", cv_sub}, {"Mul", cv_mul}, {"Div", cv_div}, {"Pow", cv_pow},
    {"Mod", cv_mod}, {"Equal", cv_equal}, {"Less", cv_less}, {"LessOrEqual", cv_lesseq},
    {"Greater", cv_greater}, {"GreaterOrEqual", cv_greatereq}, {"And", cv_and}, {"Or", cv_or},
    {"Xor", cv_xor}, {"Max", cv_max}, {"Min", cv_min}, {"Sum", cv_sum}, {"Mean", cv_mean},
    {"PRelu", cv_prelu}, {"Where", cv_where}, {"Clip", cv_clip},
    {"ReduceSum", cv_reduce_sum}, {"ReduceMean", cv_reduce_mean}, {"ReduceMax", cv_reduce_max},
    {"ReduceMin", cv_reduce_min}, {"ReduceProd", cv_reduce_prod}, {"ReduceL1", cv_reduce_l1},
    {"ReduceL2", cv_reduce_l2}, {"ReduceSumSquare", cv_reduce_sumsq},
    {"ReduceLogSum", cv_reduce_logsum}, {"ReduceLogSumExp", cv_reduce_logsumexp},
    {"ArgMax", cv_argmax}, {"ArgMin", cv_argmin},
    {NULL, NULL}};
