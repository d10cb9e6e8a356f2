/* attrs.c — params from strings: the op's defaults (mx_op_params_init) and MXNet's string
 * attributes as symbol JSON holds them (mx_op_params_parse), so a C caller with no Lua can
 * run any op by name (mx_op_invoke_attrs).
 *
 * The defaults come from the generated registry's MXNet-form strings (mx_param_def.def,
 * written by lua/mx/core/opgen.lua's mx_default), parsed by the same code as the attributes:
 * one parser, and spec/optable_spec.lua checks the result equals the Lua side's defaults
 * byte for byte. Axis values are 0-based both in MXNet's attributes and in the C structs:
 * nothing is converted. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PAT(params, off, T) ((T *)((char *)(params) + (off)))
#define IS_TUPLE(type) ((type) == MX_PT_AXES || (type) == MX_PT_SHAPE || (type) == MX_PT_INTS)

static const char *skip_ws(const char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return s;
}

/* s equals word ignoring case and surrounding blanks */
static bool is_word(const char *s, const char *word) {
  s = skip_ws(s);
  size_t n = strlen(word);
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)s[i]) != word[i]) return false;
  return *skip_ws(s + n) == '\0';
}

static bool parse_i64(const char *s, int64_t *out) {
  s = skip_ws(s);
  if (!*s) return false;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno == ERANGE) return false;
  if (*end == '.') { /* "3.0" as an integer: MXNet's JSON writes floats for some ints */
    char *e2;
    double d = strtod(s, &e2);
    if (d != floor(d) || fabs(d) >= 9.2e18 || *skip_ws(e2)) return false;
    *out = (int64_t)d;
    return true;
  }
  if (end == s || *skip_ws(end)) return false;
  *out = (int64_t)v;
  return true;
}

/* A float: decimal, "inf"/"-inf"/"nan" (strtod takes those), also "None" rejected. */
static bool parse_f64(const char *s, double *out) {
  s = skip_ws(s);
  if (!*s) return false;
  char *end;
  double v = strtod(s, &end);
  if (end == s || *skip_ws(end)) return false;
  *out = v;
  return true;
}

static bool parse_bool(const char *s, bool *out) {
  if (is_word(s, "true") || is_word(s, "1")) { *out = true; return true; }
  if (is_word(s, "false") || is_word(s, "0")) { *out = false; return true; }
  return false;
}

/* A tuple "(3, 3)", "[3,3]", "(3,)", "()", or a bare "3". Elements "None" are INT64_MIN
 * (slice's begin/end/step: a bound left out) where none_ok. */
static bool parse_tuple(const char *s, mx_tuple *t, bool none_ok) {
  s = skip_ws(s);
  char close = 0;
  if (*s == '(') close = ')';
  else if (*s == '[') close = ']';
  if (close) s++;
  t->n = 0;
  char buf[64];
  for (;;) {
    s = skip_ws(s);
    if (close && *s == close) { s++; break; }
    if (!close && !*s) break;
    const char *e = s;
    while (*e && *e != ',' && *e != close) e++;
    size_t len = (size_t)(e - s);
    if (len == 0 || len >= sizeof buf || t->n >= (int)(sizeof t->v / sizeof t->v[0])) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    int64_t v;
    if (none_ok && is_word(buf, "none")) v = INT64_MIN;
    else if (!parse_i64(buf, &v)) return false;
    t->v[t->n++] = v;
    s = e;
    if (*s == ',') s++;
    else if (!close && !*s) break;
    else if (*s != close) return false;
  }
  return *skip_ws(s) == '\0';
}

static bool parse_enum(const mx_param_def *pd, const char *s, int32_t *out) {
  s = skip_ws(s);
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
  for (int i = 0; pd->values && pd->values[i]; i++)
    if (strlen(pd->values[i]) == n && strncmp(pd->values[i], s, n) == 0) {
      *out = i;
      return true;
    }
  return false;
}

static bool parse_dtype(const char *s, int32_t *out) {
  char buf[32];
  s = skip_ws(s);
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  int c = mx_dtype_from_name(buf);
  if (c < 0) {
    int64_t v;
    if (!parse_i64(buf, &v) || !mx_dtype_valid((int)v)) return false;
    c = (int)v;
  }
  *out = c;
  return true;
}

/* What a param takes, for the error message. */
static const char *expect(int type) {
  switch (type) {
  case MX_PT_INT: return "an integer";
  case MX_PT_FLOAT: return "a number";
  case MX_PT_BOOL: return "True or False";
  case MX_PT_DTYPE: return "a dtype name (float32, int64, ...)";
  case MX_PT_AXIS: return "a 0-based axis";
  case MX_PT_AXES: return "an axis or a tuple of axes like (0, 1)";
  case MX_PT_SHAPE: return "a shape like (3, 3)";
  case MX_PT_INTS: return "a tuple of integers like (1, 2)";
  default: return "a valid value";
  }
}

/* Sets one param from its string value. */
static int set_param(const mx_op_def *def, const mx_param_def *pd, const char *key,
                     const char *val, void *params) {
  bool ok = false;
  /* "None" on an optional param: not given (has_ false / tuple n = -1) */
  if (pd->optional && is_word(val, "none")) {
    if (IS_TUPLE(pd->type)) PAT(params, pd->offset, mx_tuple)->n = -1;
    else *PAT(params, pd->has_offset, bool) = false;
    return MX_OK;
  }
  switch (pd->type) {
  case MX_PT_INT:
  case MX_PT_AXIS: ok = parse_i64(val, PAT(params, pd->offset, int64_t)); break;
  case MX_PT_FLOAT: ok = parse_f64(val, PAT(params, pd->offset, double)); break;
  case MX_PT_BOOL: ok = parse_bool(val, PAT(params, pd->offset, bool)); break;
  case MX_PT_DTYPE: ok = parse_dtype(val, PAT(params, pd->offset, int32_t)); break;
  case MX_PT_ENUM: ok = parse_enum(pd, val, PAT(params, pd->offset, int32_t)); break;
  case MX_PT_AXES:
  case MX_PT_SHAPE:
  case MX_PT_INTS: {
    mx_tuple t;
    memset(&t, 0, sizeof t); /* unused elements zero: structs compare byte for byte */
    ok = parse_tuple(val, &t, pd->type == MX_PT_INTS);
    if (ok) *PAT(params, pd->offset, mx_tuple) = t;
    break;
  }
  default: break;
  }
  if (!ok) {
    if (pd->type == MX_PT_ENUM) {
      char names[256] = "";
      size_t used = 0;
      for (int i = 0; pd->values && pd->values[i] && used < sizeof names - 40; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 pd->values[i]);
      return mx_err(MX_EINVAL, "%s: attribute %s=\"%s\": expected one of %s%s", def->name, key,
                    val, names, pd->optional ? " or None" : "");
    }
    return mx_err(MX_EINVAL, "%s: attribute %s=\"%s\": expected %s%s", def->name, key, val,
                  expect(pd->type), pd->optional ? " or None" : "");
  }
  if (pd->optional && !IS_TUPLE(pd->type)) *PAT(params, pd->has_offset, bool) = true;
  return MX_OK;
}

/* MXNet's ctx attribute: "cpu", "cpu(0)", "gpu(1)". */
static int set_ctx(const mx_op_def *def, const char *val, void *params) {
  const char *s = skip_ws(val);
  int dt = 0;
  if (strncmp(s, "cpu", 3) == 0) dt = MX_CPU;
  else if (strncmp(s, "gpu", 3) == 0) dt = MX_GPU;
  int64_t id = 0;
  bool ok = dt != 0;
  if (ok) {
    s = skip_ws(s + 3);
    if (*s == '(') {
      const char *e = strchr(s, ')');
      char buf[24];
      size_t n = e ? (size_t)(e - s - 1) : 0;
      ok = e && n > 0 && n < sizeof buf && *skip_ws(e + 1) == '\0';
      if (ok) {
        memcpy(buf, s + 1, n);
        buf[n] = '\0';
        ok = parse_i64(buf, &id) && id >= 0 && id < 1024;
      }
    } else ok = *s == '\0';
  }
  if (!ok)
    return mx_err(MX_EINVAL, "%s: attribute ctx=\"%s\": expected cpu(N) or gpu(N)", def->name,
                  val);
  PAT(params, 0, int32_t)[0] = dt;
  PAT(params, 0, int32_t)[1] = (int32_t)id;
  return MX_OK;
}

static int check_op(int op, const char *fn) {
  if (op < 0 || op >= mx_num_ops)
    return mx_err(MX_EINVAL, "%s: op %d unknown (0..%d; mx_op_find takes names)", fn, op,
                  mx_num_ops - 1);
  return MX_OK;
}

int mx_op_params_init(int op, void *params) {
  if (check_op(op, "mx_op_params_init")) return MX_EINVAL;
  const mx_op_def *def = &mx_ops[op];
  if (def->params_size == 0) return MX_OK;
  if (!params) return mx_err(MX_EINVAL, "mx_op_params_init: %s: params is NULL", def->name);
  memset(params, 0, def->params_size);
  if (def->flags & MX_OPF_CREATION) {
    PAT(params, 0, int32_t)[0] = MX_CPU;
    PAT(params, 0, int32_t)[1] = 0;
  }
  for (int i = 0; i < def->nparams; i++) {
    const mx_param_def *pd = &def->params[i];
    if (pd->optional && IS_TUPLE(pd->type))
      PAT(params, pd->offset, mx_tuple)->n = -1;
    if (!pd->def) continue; /* optional without a default: has_ false */
    if (set_param(def, pd, pd->name, pd->def, params) != MX_OK)
      return mx_err(MX_EINVAL, "mx_op_params_init: %s: generated default %s=\"%s\" does not parse",
                    def->name, pd->name, pd->def);
  }
  return MX_OK;
}

int mx_op_params_parse(int op, int nattr, const char *const *keys, const char *const *vals,
                       void *params) {
  if (check_op(op, "mx_op_params_parse")) return MX_EINVAL;
  const mx_op_def *def = &mx_ops[op];
  if (nattr < 0 || (nattr > 0 && (!keys || !vals)))
    return mx_err(MX_EINVAL, "%s: %d attributes with NULL keys or values", def->name, nattr);
  if (def->params_size > 0 && !params)
    return mx_err(MX_EINVAL, "mx_op_params_parse: %s: params is NULL", def->name);
  if (mx_op_params_init(op, params) != MX_OK) return MX_EINVAL;
  for (int a = 0; a < nattr; a++) {
    const char *k = keys[a], *v = vals[a];
    if (!k || !v) return mx_err(MX_EINVAL, "%s: attribute %d: NULL key or value", def->name, a);
    /* Symbol JSON's "__name__" attributes (lr_mult, init, storage type hints) belong to
     * the graph, not to the op. */
    size_t kl = strlen(k);
    if (kl > 4 && k[0] == '_' && k[1] == '_' && k[kl - 1] == '_' && k[kl - 2] == '_') continue;
    if ((def->flags & MX_OPF_CREATION) && strcmp(k, "ctx") == 0) {
      if (set_ctx(def, v, params)) return MX_EINVAL;
      continue;
    }
    if ((def->flags & MX_OPF_VARIADIC) && strcmp(k, "num_args") == 0) {
      /* MXNet's Concat/stack carry their input count; the inputs say it here
       * (mx_op_invoke_attrs checks that the two agree). */
      int64_t n;
      if (!parse_i64(v, &n) || n < 1)
        return mx_err(MX_EINVAL, "%s: attribute num_args=\"%s\": expected a positive integer",
                      def->name, v);
      continue;
    }
    const mx_param_def *pd = NULL;
    for (int i = 0; i < def->nparams && !pd; i++)
      if (strcmp(def->params[i].mxnet, k) == 0) pd = &def->params[i];
    for (int i = 0; i < def->nparams && !pd; i++)
      if (strcmp(def->params[i].name, k) == 0) pd = &def->params[i];
    if (!pd) {
      char names[512] = "";
      size_t used = 0;
      for (int i = 0; i < def->nparams && used < sizeof names - 40; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 def->params[i].mxnet);
      return mx_err(MX_EINVAL, "%s: unknown attribute %s=\"%s\" (%s%s)", def->name, k, v,
                    def->nparams ? "it takes: " : "it takes no attributes", names);
    }
    if (set_param(def, pd, k, v, params) != MX_OK) return MX_EINVAL;
  }
  return MX_OK;
}

int mx_op_invoke_attrs(int op, int nin, mx_tensor *const *in, int nattr,
                       const char *const *keys, const char *const *vals, int nout,
                       mx_tensor **out) {
  if (check_op(op, "mx_op_invoke_attrs")) return MX_EINVAL;
  const mx_op_def *def = &mx_ops[op];
  /* Every generated struct is a few hundred bytes at most: the stack holds it. The
   * union keeps the alignment of its widest member. */
  union {
    int64_t i;
    double d;
    char bytes[2048];
  } buf;
  if (def->params_size > sizeof buf)
    return mx_err(MX_EINVAL, "%s: params struct of %zu bytes exceeds invoke_attrs' %zu", def->name,
                  def->params_size, sizeof buf);
  if (mx_op_params_parse(op, nattr, keys, vals, &buf) != MX_OK) return MX_EINVAL;
  for (int a = 0; a < nattr && (def->flags & MX_OPF_VARIADIC); a++) {
    int64_t n;
    if (strcmp(keys[a], "num_args") == 0 && parse_i64(vals[a], &n) && n != nin)
      return mx_err(MX_EINVAL, "%s: attribute num_args=\"%s\" but %d inputs given", def->name,
                    vals[a], nin);
  }
  return mx_op_invoke(op, nin, in, def->params_size ? &buf : NULL, nout, out);
}

/* ---- params to strings (symbol JSON writing) ----------------------------
 * The inverse of set_param: param k of a filled struct in the form MXNet writes it, so
 * that mx_op_params_parse (and MXNet's own parser) read back the same value. */

int mx_op_num_params(int op) {
  if (check_op(op, "mx_op_num_params")) return MX_EINVAL;
  return mx_ops[op].nparams;
}

/* Shortest "%.*g" that reads back as the same double (MXNet writes Python's repr). */
static void format_f64(double v, char *buf, size_t cap) {
  if (isnan(v)) { snprintf(buf, cap, "nan"); return; }
  if (isinf(v)) { snprintf(buf, cap, v > 0 ? "inf" : "-inf"); return; }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

static int format_value(const mx_param_def *pd, const void *params, char *buf, size_t cap) {
  if (pd->optional) {
    bool given = IS_TUPLE(pd->type) ? PAT(params, pd->offset, const mx_tuple)->n >= 0
                                    : *PAT(params, pd->has_offset, const bool);
    if (!given) { snprintf(buf, cap, "None"); return MX_OK; }
  }
  switch (pd->type) {
  case MX_PT_INT:
  case MX_PT_AXIS:
    snprintf(buf, cap, "%lld", (long long)*PAT(params, pd->offset, const int64_t));
    return MX_OK;
  case MX_PT_FLOAT: format_f64(*PAT(params, pd->offset, const double), buf, cap); return MX_OK;
  case MX_PT_BOOL:
    snprintf(buf, cap, "%s", *PAT(params, pd->offset, const bool) ? "True" : "False");
    return MX_OK;
  case MX_PT_DTYPE: {
    const char *n = mx_dtype_name(*PAT(params, pd->offset, const int32_t));
    if (!n) return MX_EINVAL;
    snprintf(buf, cap, "%s", n);
    return MX_OK;
  }
  case MX_PT_ENUM: {
    int32_t v = *PAT(params, pd->offset, const int32_t);
    for (int i = 0; pd->values && pd->values[i]; i++)
      if (i == v) { snprintf(buf, cap, "%s", pd->values[i]); return MX_OK; }
    return MX_EINVAL;
  }
  case MX_PT_AXES:
  case MX_PT_SHAPE:
  case MX_PT_INTS: {
    const mx_tuple *t = PAT(params, pd->offset, const mx_tuple);
    if (t->n < 0 || t->n > 16) return MX_EINVAL;
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < t->n && used < cap; i++) {
      if (t->v[i] == INT64_MIN)
        used += (size_t)snprintf(buf + used, cap - used, "%sNone", i ? ", " : "");
      else
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "",
                                 (long long)t->v[i]);
    }
    /* Python's one-tuple "(3,)" */
    if (used < cap) snprintf(buf + used, cap - used, "%s)", t->n == 1 ? "," : "");
    return used < cap ? MX_OK : MX_EINVAL;
  }
  default: return MX_EINVAL;
  }
}

int mx_op_params_format(int op, const void *params, int k, const char **key, char *buf,
                        size_t cap) {
  if (check_op(op, "mx_op_params_format")) return MX_EINVAL;
  const mx_op_def *def = &mx_ops[op];
  if (k < 0 || k >= def->nparams)
    return mx_err(MX_EINVAL, "mx_op_params_format: %s: param %d of %d", def->name, k,
                  def->nparams);
  if (!params || !buf || cap < 64)
    return mx_err(MX_EINVAL, "mx_op_params_format: %s: NULL params or a buffer under 64 bytes",
                  def->name);
  const mx_param_def *pd = &def->params[k];
  if (key) *key = pd->mxnet;
  if (format_value(pd, params, buf, cap) != MX_OK)
    return mx_err(MX_EINVAL, "mx_op_params_format: %s: param %s holds an invalid value",
                  def->name, pd->name);
  if (!pd->def && !pd->optional) return 1; /* required: always written */
  /* Compared as MXNet would read it back: the default's string and ours. */
  char dbuf[512];
  union {
    int64_t i;
    double d;
    char bytes[2048];
  } dflt;
  if (def->params_size > sizeof dflt || mx_op_params_init(op, &dflt) != MX_OK) return 1;
  if (format_value(pd, &dflt, dbuf, sizeof dbuf) != MX_OK) return 1;
  return strcmp(dbuf, buf) != 0;
}
