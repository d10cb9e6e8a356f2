/* onnx_strings.c — ONNX's string tensors: TensorProto string data in and out of .pb
 * files, and models made of string ops only (StringNormalizer, Identity) run on them.
 *
 * luamx has no string dtype, and adding one would touch every kernel, the allocator and
 * the graph IR for the few ONNX ops that take strings; a string tensor is instead the
 * host-side mx_onnx_strings (a shape and a list of byte strings), and a model whose
 * values are all strings is run here directly, node by node. A model mixing string
 * values with numeric ops is refused naming the node (docs/onnx.md, "Strings"). Case
 * changes follow the node's locale through the C library's wide-character tables
 * (towupper_l / towlower_l over the UTF-8 code points, as ONNX Runtime does). */
#include "onnx_internal.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

/* ---- the tensors ---------------------------------------------------------------------- */

void mx_onnx_strings_free(mx_onnx_strings *t) {
  if (!t) return;
  for (int64_t i = 0; t->s && i < t->n; i++) free(t->s[i]);
  free(t->s);
  free(t->len);
  free(t);
}

int mx_onnx_strings_new(int ndim, const int64_t *shape, mx_onnx_strings **out) {
  if (!out || ndim < 0 || ndim > MX_MAX_DIM || (ndim > 0 && !shape))
    return mx_err(MX_EINVAL, "mx_onnx_strings_new: bad arguments");
  *out = NULL;
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return mx_err(MX_EINVAL, "mx_onnx_strings_new: dim %d is negative", i + 1);
    if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) || n > ((uint64_t)1 << 32))
      return mx_err(MX_EINVAL, "mx_onnx_strings_new: the element count overflows");
  }
  mx_onnx_strings *t = calloc(1, sizeof *t);
  if (!t) return mx_err(MX_ENOMEM, "onnx: out of memory");
  t->ndim = ndim, t->n = (int64_t)n;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->s = calloc(n + 1, sizeof *t->s), t->len = calloc(n + 1, sizeof *t->len);
  for (uint64_t i = 0; t->s && i < n; i++)
    if (!(t->s[i] = calloc(1, 1))) break;
  if (!t->s || !t->len || (n && !t->s[n - 1])) {
    mx_onnx_strings_free(t);
    return mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  *out = t;
  return MX_OK;
}

int mx_onnx_strings_set(mx_onnx_strings *t, int64_t i, const char *s, size_t len) {
  if (!t || i < 0 || i >= t->n || (!s && len))
    return mx_err(MX_EINVAL, "mx_onnx_strings_set: bad arguments");
  char *c = malloc(len + 1);
  if (!c) return mx_err(MX_ENOMEM, "onnx: out of memory");
  if (len) memcpy(c, s, len);
  c[len] = 0;
  free(t->s[i]);
  t->s[i] = c, t->len[i] = len;
  return MX_OK;
}

/* A TensorProto of element type STRING as a string tensor, its size checked first. */
static int strings_from_proto(const Onnx__TensorProto *p, const char *file, mx_onnx_strings **out) {
  const char *nm = p->name ? p->name : "";
  if (!p->has_data_type || p->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__STRING)
    return mx_err(MX_EINVAL, "onnx: %s: tensor '%s': not a string tensor", file, nm);
  if (p->has_raw_data || (p->has_data_location &&
                          p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
    return mx_err(MX_EFORMAT, "onnx: %s: tensor '%s': string data must be in string_data "
                  "(ONNX allows neither raw_data nor external data for strings)", file, nm);
  if (p->n_dims > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "onnx: %s: tensor '%s': unsupported: %zu dims (luamx has at most "
                  "%d)", file, nm, p->n_dims, MX_MAX_DIM);
  uint64_t count = 1;
  for (size_t i = 0; i < p->n_dims; i++) {
    if (p->dims[i] < 0) return mx_err(MX_EFORMAT, "onnx: %s: tensor '%s': dim %zu is negative",
                                      file, nm, i + 1);
    if (__builtin_mul_overflow(count, (uint64_t)p->dims[i], &count) || count > ((uint64_t)1 << 32))
      return mx_err(MX_EFORMAT, "onnx: %s: tensor '%s': the element count overflows", file, nm);
  }
  if (count != p->n_string_data)
    return mx_err(MX_EFORMAT, "onnx: %s: tensor '%s': holds %zu strings where its shape needs "
                  "%llu", file, nm, p->n_string_data, (unsigned long long)count);
  int rc = mx_onnx_strings_new((int)p->n_dims, p->dims, out);
  for (size_t i = 0; !rc && i < p->n_string_data; i++)
    rc = mx_onnx_strings_set(*out, (int64_t)i, (const char *)p->string_data[i].data,
                             p->string_data[i].len);
  if (rc) {
    mx_onnx_strings_free(*out);
    *out = NULL;
  }
  return rc;
}

int mx_onnx_load_strings(const char *path, mx_onnx_strings **out, char **name) {
  if (!path || !out) return mx_err(MX_EINVAL, "mx_onnx_load_strings: bad arguments");
  *out = NULL;
  if (name) *name = NULL;
  Onnx__TensorProto *t;
  int rc = ox_read_tensor_proto(path, &t);
  if (rc) return rc;
  rc = strings_from_proto(t, path, out);
  if (!rc && name && !(*name = strdup(t->name ? t->name : ""))) {
    mx_onnx_strings_free(*out);
    *out = NULL;
    rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  onnx__tensor_proto__free_unpacked(t, NULL);
  return rc;
}

int mx_onnx_save_tensor(const char *path, mx_tensor *t, const mx_onnx_strings *s,
                        const char *name) {
  if (!path || (!t) == (!s))
    return mx_err(MX_EINVAL, "mx_onnx_save_tensor: give a tensor or a string tensor");
  Onnx__TensorProto p;
  onnx__tensor_proto__init(&p);
  p.name = (char *)(name ? name : "");
  int64_t dims[MX_MAX_DIM];
  ProtobufCBinaryData *sd = NULL;
  p.has_data_type = 1;
  if (t) {
    int ot = ox_onnx_type(mx_tensor_dtype(t));
    if (!ot)
      return mx_err(MX_EINVAL, "mx_onnx_save_tensor: dtype %s has no ONNX type",
                    mx_dtype_name(mx_tensor_dtype(t)));
    p.data_type = ot;
    p.n_dims = (size_t)mx_tensor_ndim(t);
    for (int i = 0; i < mx_tensor_ndim(t); i++) dims[i] = mx_tensor_dim(t, i);
    size_t bytes = (size_t)mx_tensor_size(t) * mx_dtype_size(mx_tensor_dtype(t));
    void *src = bytes ? mx_tensor_data(t) : NULL;
    if (bytes && !src) return mx_err(MX_EINVAL, "mx_onnx_save_tensor: the tensor cannot be read");
    p.has_raw_data = 1, p.raw_data.len = bytes, p.raw_data.data = src;
  } else {
    p.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
    p.n_dims = (size_t)s->ndim;
    for (int i = 0; i < s->ndim; i++) dims[i] = s->shape[i];
    if (s->n && !(sd = calloc((size_t)s->n, sizeof *sd)))
      return mx_err(MX_ENOMEM, "onnx: out of memory");
    for (int64_t i = 0; i < s->n; i++) sd[i].data = (uint8_t *)s->s[i], sd[i].len = s->len[i];
    p.n_string_data = (size_t)s->n, p.string_data = sd;
  }
  p.dims = dims;
  size_t len = onnx__tensor_proto__get_packed_size(&p);
  uint8_t *buf = malloc(len ? len : 1);
  int rc = buf ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
  if (!rc) {
    onnx__tensor_proto__pack(&p, buf);
    rc = mx_file_write_atomic(path, buf, len);
  }
  free(buf);
  free(sd);
  return rc;
}

/* ---- StringNormalizer ----------------------------------------------------------------- */

/* One code point of s[*i..n) (strict UTF-8: no overlong forms, surrogates or values past
 * U+10FFFF), -1 when it is not valid. */
static int32_t utf8_next(const unsigned char *s, size_t n, size_t *i) {
  unsigned c = s[*i];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (!len || *i + (size_t)len > n) return -1;
  uint32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (int k = 1; k < len; k++) {
    unsigned b = s[*i + (size_t)k];
    if ((b >> 6) != 2) return -1;
    cp = cp << 6 | (b & 0x3F);
  }
  static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *i += (size_t)len;
  return (int32_t)cp;
}

static size_t utf8_put(uint32_t cp, char *o) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

enum { CASE_NONE, CASE_LOWER, CASE_UPPER };
enum { NOT_UTF8 = 1 };

/* s upper- or lowercased in locale loc into a new string (*out, *outn); NOT_UTF8 when s
 * is not UTF-8 (nothing set). */
static int change_case(const char *s, size_t n, int action, locale_t loc, char **out,
                       size_t *outn) {
  char *o = malloc(4 * n + 1); /* a code point's case partner takes at most 4 bytes */
  if (!o) return mx_err(MX_ENOMEM, "onnx: out of memory");
  size_t i = 0, k = 0;
  while (i < n) {
    int32_t cp = utf8_next((const unsigned char *)s, n, &i);
    if (cp < 0) {
      free(o);
      return NOT_UTF8;
    }
    wint_t w = action == CASE_UPPER ? towupper_l((wint_t)cp, loc) : towlower_l((wint_t)cp, loc);
    if (w > 0x10FFFF || (w >= 0xD800 && w <= 0xDFFF)) w = (wint_t)cp;
    k += utf8_put((uint32_t)w, o + k);
  }
  o[k] = 0;
  *out = o, *outn = k;
  return MX_OK;
}

/* The node's locale for case changes: the name as given, or with ".UTF-8" (ONNX writes
 * "en_US", glibc names "en_US.UTF-8"); en_US (ONNX's default) falls back to C.UTF-8,
 * whose case tables are the same Unicode ones. */
static int node_locale(const char *node, const char *name, locale_t *out) {
  char buf[256];
  const char *tries[4] = {name, buf, NULL, NULL};
  snprintf(buf, sizeof buf, "%s.UTF-8", name);
  if (!*name || strcmp(name, "en_US") == 0 || strncmp(name, "en_US.", 6) == 0) tries[2] = "C.UTF-8";
  for (int k = 0; k < 4; k++) {
    if (!tries[k] || !*tries[k]) continue;
    locale_t l = newlocale(LC_CTYPE_MASK, tries[k], (locale_t)0);
    if (l) {
      *out = l;
      return MX_OK;
    }
  }
  return mx_err(MX_EINVAL, "onnx: node '%s' (StringNormalizer): unsupported: locale '%s' is not "
                "installed on this system", node, name);
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
  return NULL;
}

static int attr_str(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf,
                    size_t cap) {
  const Onnx__AttributeProto *a = attr(n, name);
  if (!a || !a->has_s) {
    snprintf(buf, cap, "%s", dflt);
    return MX_OK;
  }
  if (a->s.len >= cap || memchr(a->s.data, 0, a->s.len))
    return mx_err(MX_EINVAL, "onnx: node '%s' (StringNormalizer): attribute %s is not a short "
                  "string", n->name ? n->name : "", name);
  memcpy(buf, a->s.data, a->s.len);
  buf[a->s.len] = 0;
  return MX_OK;
}

/* ONNX's StringNormalizer: X of shape [C] or [1, C]; the stopwords removed (compared
 * after folding both to the case of case_change_action, lower for NONE, unless
 * is_case_sensitive), then every kept string lower- or uppercased (or left); when all are
 * removed, one empty string of shape [1] / [1, 1]. */
static int string_normalizer(const Onnx__NodeProto *n, const char *nm, const mx_onnx_strings *x,
                             mx_onnx_strings **y) {
  char action_s[32], locname[128];
  int rc = attr_str(n, "case_change_action", "NONE", action_s, sizeof action_s);
  if (!rc) rc = attr_str(n, "locale", "", locname, sizeof locname);
  if (rc) return rc;
  int action = strcmp(action_s, "NONE") == 0    ? CASE_NONE
               : strcmp(action_s, "LOWER") == 0 ? CASE_LOWER
               : strcmp(action_s, "UPPER") == 0 ? CASE_UPPER
                                                : -1;
  if (action < 0)
    return mx_err(MX_EINVAL, "onnx: node '%s' (StringNormalizer): case_change_action '%s' is "
                  "none of NONE, LOWER, UPPER", nm, action_s);
  const Onnx__AttributeProto *cs = attr(n, "is_case_sensitive");
  bool sensitive = cs && cs->has_i && cs->i != 0;
  const Onnx__AttributeProto *sw = attr(n, "stopwords");
  size_t nstop = sw ? sw->n_strings : 0;
  if (!(x->ndim == 1 || (x->ndim == 2 && x->shape[0] == 1)))
    return mx_err(MX_EINVAL, "onnx: node '%s' (StringNormalizer): the input must be of shape [C] "
                  "or [1, C], got rank %d%s", nm, x->ndim, x->ndim == 2 ? " with a first dim != 1" : "");
  int fold = action == CASE_UPPER ? CASE_UPPER : CASE_LOWER;
  bool need_loc = action != CASE_NONE || (!sensitive && nstop);
  locale_t loc = (locale_t)0;
  if (need_loc && (rc = node_locale(nm, locname[0] ? locname : "en_US", &loc))) return rc;
  char **stop = nstop ? calloc(nstop, sizeof *stop) : NULL;
  size_t *stopn = nstop ? calloc(nstop, sizeof *stopn) : NULL;
  char **keep = calloc((size_t)x->n + 1, sizeof *keep);
  size_t *keepn = calloc((size_t)x->n + 1, sizeof *keepn);
  int64_t nk = 0;
  if ((nstop && (!stop || !stopn)) || !keep || !keepn) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  for (size_t k = 0; !rc && k < nstop; k++) {
    const ProtobufCBinaryData *w = &sw->strings[k];
    if (sensitive) {
      if (!(stop[k] = malloc(w->len + 1))) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
      else memcpy(stop[k], w->data, w->len), stop[k][w->len] = 0, stopn[k] = w->len;
    } else if ((rc = change_case((const char *)w->data, w->len, fold, loc, &stop[k], &stopn[k])) ==
               NOT_UTF8) {
      rc = mx_err(MX_EINVAL, "onnx: node '%s' (StringNormalizer): stopword %zu is not UTF-8", nm,
                  k + 1);
    }
  }
  for (int64_t i = 0; !rc && i < x->n; i++) {
    char *cmp = x->s[i];
    size_t cmpn = x->len[i];
    char *folded = NULL;
    if (!sensitive && nstop) {
      if ((rc = change_case(x->s[i], x->len[i], fold, loc, &folded, &cmpn))) break;
      cmp = folded;
    }
    bool dropped = false;
    for (size_t k = 0; k < nstop && !dropped; k++)
      dropped = stopn[k] == cmpn && memcmp(stop[k], cmp, cmpn) == 0;
    free(folded);
    if (dropped) continue;
    if (action == CASE_NONE) {
      if (!(keep[nk] = malloc(x->len[i] + 1))) { rc = mx_err(MX_ENOMEM, "onnx: out of memory"); break; }
      memcpy(keep[nk], x->s[i], x->len[i] + 1);
      keepn[nk] = x->len[i];
    } else if ((rc = change_case(x->s[i], x->len[i], action, loc, &keep[nk], &keepn[nk]))) {
      break;
    }
    nk++;
  }
  if (rc == NOT_UTF8)
    rc = mx_err(MX_EINVAL, "onnx: node '%s' (StringNormalizer): an input string is not UTF-8", nm);
  if (!rc) {
    int64_t shape[2] = {1, nk ? nk : 1};
    if (x->ndim == 1) shape[0] = nk ? nk : 1;
    rc = mx_onnx_strings_new(x->ndim, shape, y);
    for (int64_t i = 0; !rc && i < nk; i++) {
      free((*y)->s[i]);
      (*y)->s[i] = keep[i], (*y)->len[i] = keepn[i], keep[i] = NULL;
    }
  }
  for (int64_t i = 0; keep && i < nk; i++) free(keep[i]);
  for (size_t k = 0; stop && k < nstop; k++) free(stop[k]);
  free(keep), free(keepn), free(stop), free(stopn);
  if (loc) freelocale(loc);
  return rc;
}

/* ---- a model of string ops ------------------------------------------------------------ */

typedef struct sval { const char *name; mx_onnx_strings *t; bool owned; } sval;

static sval *lookup(sval *v, size_t n, const char *name) {
  for (size_t i = n; i-- > 0;)
    if (strcmp(v[i].name, name) == 0) return &v[i];
  return NULL;
}

int mx_onnx_run_strings(const char *path, int nin, const char *const *names,
                        const mx_onnx_strings *const *in, int *nout, char ***out_names,
                        mx_onnx_strings ***out) {
  if (!path || !nout || !out_names || !out || nin < 0 || (nin && (!names || !in)))
    return mx_err(MX_EINVAL, "mx_onnx_run_strings: bad arguments");
  *nout = 0, *out_names = NULL, *out = NULL;
  Onnx__ModelProto *m;
  int rc = ox_model_open(path, &m);
  if (rc) return rc;
  const Onnx__GraphProto *g = m->graph;
  size_t cap = g->n_initializer + g->n_input + 1;
  for (size_t i = 0; i < g->n_node; i++) cap += g->node[i]->n_output;
  sval *v = calloc(cap, sizeof *v);
  size_t nv = 0;
  if (!v) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  for (size_t i = 0; !rc && i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__STRING) continue;
    v[nv].name = t->name ? t->name : "", v[nv].owned = true;
    if (!(rc = strings_from_proto(t, path, &v[nv].t))) nv++;
  }
  for (size_t i = 0; !rc && i < g->n_input; i++) {
    const char *nm = g->input[i]->name ? g->input[i]->name : "";
    if (lookup(v, nv, nm)) continue;
    const mx_onnx_strings *given = NULL;
    for (int k = 0; k < nin; k++)
      if (names[k] && strcmp(names[k], nm) == 0) given = in[k];
    if (!given) {
      rc = mx_err(MX_EINVAL, "onnx: %s: no value for input '%s'", path, nm);
      break;
    }
    v[nv].name = nm, v[nv].t = (mx_onnx_strings *)given, v[nv].owned = false, nv++;
  }
  for (size_t i = 0; !rc && i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    const char *op = n->op_type ? n->op_type : "";
    const char *nm = n->name && *n->name ? n->name : n->n_output ? n->output[0] : "";
    bool known = strcmp(op, "StringNormalizer") == 0 || strcmp(op, "Identity") == 0;
    if ((n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) || !known) {
      rc = mx_err(MX_EINVAL, "onnx: %s: node '%s' (%s): unsupported: string values meet an op "
                  "other than StringNormalizer and Identity (luamx runs graphs of strings on "
                  "their own, docs/onnx.md)", path, nm, op);
      break;
    }
    if (n->n_input != 1 || n->n_output != 1 || !n->input[0] || !n->output[0]) {
      rc = mx_err(MX_EINVAL, "onnx: %s: node '%s' (%s): takes one input and one output", path, nm, op);
      break;
    }
    sval *x = lookup(v, nv, n->input[0]);
    if (!x) {
      rc = mx_err(MX_EINVAL, "onnx: %s: node '%s' (%s): input '%s' is not a string value made by "
                  "an earlier node, input or initializer", path, nm, op, n->input[0]);
      break;
    }
    mx_onnx_strings *y = NULL;
    if (op[0] == 'I') {
      rc = mx_onnx_strings_new(x->t->ndim, x->t->shape, &y);
      for (int64_t k = 0; !rc && k < x->t->n; k++) rc = mx_onnx_strings_set(y, k, x->t->s[k], x->t->len[k]);
      if (rc) mx_onnx_strings_free(y);
    } else {
      rc = string_normalizer(n, nm, x->t, &y);
    }
    if (!rc) v[nv].name = n->output[0], v[nv].t = y, v[nv].owned = true, nv++;
  }
  mx_onnx_strings **res = NULL;
  char **rn = NULL;
  if (!rc) {
    res = calloc(g->n_output + 1, sizeof *res), rn = calloc(g->n_output + 1, sizeof *rn);
    if (!res || !rn) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  for (size_t k = 0; !rc && k < g->n_output; k++) {
    const char *nm = g->output[k]->name ? g->output[k]->name : "";
    sval *x = lookup(v, nv, nm);
    if (!x) { rc = mx_err(MX_EINVAL, "onnx: %s: graph output '%s' is never made", path, nm); break; }
    if (!(rn[k] = strdup(nm))) { rc = mx_err(MX_ENOMEM, "onnx: out of memory"); break; }
    rc = mx_onnx_strings_new(x->t->ndim, x->t->shape, &res[k]);
    for (int64_t j = 0; !rc && j < x->t->n; j++) rc = mx_onnx_strings_set(res[k], j, x->t->s[j], x->t->len[j]);
  }
  for (size_t i = 0; v && i < nv; i++)
    if (v[i].owned) mx_onnx_strings_free(v[i].t);
  free(v);
  if (rc) {
    for (size_t k = 0; res && k < g->n_output; k++) mx_onnx_strings_free(res[k]), free(rn[k]);
    free(res), free(rn);
  } else {
    *nout = (int)g->n_output, *out_names = rn, *out = res;
  }
  onnx__model_proto__free_unpacked(m, NULL);
  return rc;
}
