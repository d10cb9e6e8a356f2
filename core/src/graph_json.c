/* graph_json.c — MXNet 1.x symbol JSON <-> mx_graph (jansson).
 *
 * The file format (docs/symbol.md, docs/file-formats.md): {"nodes": [{"op", "name",
 * "attrs", "inputs": [[node, out, version]]}], "arg_nodes", "node_row_ptr", "heads",
 * "attrs": {"mxnet_version": ["int", 10901]}}. Variables are op "null". Pre-1.0 files
 * keep op params in "param" and node attributes in "attr" (MXNet 0.8/0.9); both are read.
 *
 * The reader is hardened for files from anywhere (tools/fuzz/fuzz_symjson.c): every
 * field's type and range is checked before it is used, inputs and heads must refer to
 * earlier nodes' existing outputs, and every problem is MX_EFORMAT naming the node and
 * field. Node attrs are parsed by mx_op_params_parse (through mx_graph_add_op_attrs), so
 * the op's own messages name a bad value. */
#include "graph.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MXNET_VERSION 10901 /* what we write: MXNet 1.9.1's format */
#define MAX_NODES (1 << 22)
#define MAX_ATTRS 1024

/* ---- reading ----------------------------------------------------------------------- */

/* An integer JSON value in [lo, hi]. */
static bool get_int(const json_t *v, long long lo, long long hi, long long *out) {
  if (!json_is_integer(v)) return false;
  long long x = (long long)json_integer_value(v);
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

/* [node, out] or [node, out, version] naming an existing output of a node before
 * `limit`. Returns MX_OK or MX_EFORMAT (message names `what`). */
static int get_entry(const mx_graph *g, const json_t *e, int limit, const char *what,
                     int *node, int *out) {
  if (!json_is_array(e) || json_array_size(e) < 2 || json_array_size(e) > 3)
    return mx_err(MX_EFORMAT, "symbol JSON: %s must be [node, output, version]", what);
  long long n, o, ver;
  if (!get_int(json_array_get(e, 0), 0, (long long)limit - 1, &n))
    return mx_err(MX_EFORMAT, "symbol JSON: %s: node index must be an integer in 0..%d",
                  what, limit - 1);
  int nout = mx_graph_node_num_outputs(g, (int)n);
  if (!get_int(json_array_get(e, 1), 0, (long long)nout - 1, &o))
    return mx_err(MX_EFORMAT,
                  "symbol JSON: %s: output index must be an integer in 0..%d (node %lld '%s' "
                  "has %d outputs)",
                  what, nout - 1, n, mx_graph_node_name(g, (int)n), nout);
  if (json_array_size(e) == 3 && !get_int(json_array_get(e, 2), 0, INT32_MAX, &ver))
    return mx_err(MX_EFORMAT, "symbol JSON: %s: version must be a non-negative integer", what);
  *node = (int)n;
  *out = (int)o;
  return MX_OK;
}

/* Keys MXNet 0.8 wrote without the underscores that 0.9+ put around node attributes. */
static const char *const LEGACY_ATTRS[] = {"ctx_group", "lr_mult", "wd_mult",
                                           "force_mirroring", "mirror_stage", NULL};

typedef struct attr_list {
  int n;
  const char *keys[MAX_ATTRS], *vals[MAX_ATTRS];
  char *owned[MAX_ATTRS]; /* "__key__" spellings made for legacy attrs */
  int nowned;
} attr_list;

static bool is_hidden(const char *k) {
  size_t n = strlen(k);
  return n > 4 && k[0] == '_' && k[1] == '_' && k[n - 1] == '_' && k[n - 2] == '_';
}

/* Appends obj's string members; legacy: `attr` of an old file, whose keys get their
 * double underscores: the known ones (lr_mult, ctx_group...) as MXNet's upgrade does,
 * every key on an op node (1.x op nodes hold params and "__x__" keys only). */
static int collect_attrs(attr_list *al, const json_t *obj, const char *field, int node,
                         bool legacy, bool op_node) {
  if (!obj) return MX_OK;
  if (!json_is_object(obj))
    return mx_err(MX_EFORMAT, "symbol JSON: node %d: \"%s\" must be an object", node, field);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)obj, k, v) {
    if (!json_is_string(v))
      return mx_err(MX_EFORMAT, "symbol JSON: node %d: %s.%s must be a string", node, field, k);
    if (al->n >= MAX_ATTRS)
      return mx_err(MX_EFORMAT, "symbol JSON: node %d: more than %d attributes", node,
                    MAX_ATTRS);
    const char *key = k;
    bool wrap = legacy && op_node && !is_hidden(k);
    for (int i = 0; legacy && LEGACY_ATTRS[i]; i++) wrap = wrap || strcmp(k, LEGACY_ATTRS[i]) == 0;
    if (wrap) {
      size_t len = strlen(k) + 5;
      char *s = malloc(len);
      if (!s) return mx_err(MX_ENOMEM, "symbol JSON: out of memory");
      snprintf(s, len, "__%s__", k);
      al->owned[al->nowned++] = s;
      key = s;
    }
    al->keys[al->n] = key;
    al->vals[al->n] = json_string_value(v);
    al->n++;
  }
  return MX_OK;
}

/* MXNet 1.9.1's defaults where luamx's differ (the index dtype of topk and argsort:
 * MXNet's float32, luamx's int64), set when a node leaves them out */
static const char *const MXNET_DEFAULTS[][3] = {
    {"topk", "dtype", "float32"}, {"argsort", "dtype", "float32"}, {NULL, NULL, NULL}};

/* MXNet ops read as a luamx op with one param set: {MXNet name, luamx op, param, value} */
static const char *const ALIASES[][4] = {{"argmax_channel", "argmax", "axis", "-1"},
                                         {NULL, NULL, NULL, NULL}};

static int read_node(mx_graph *g, const json_t *jn, int i, attr_list *al) {
  if (!json_is_object(jn)) return mx_err(MX_EFORMAT, "symbol JSON: node %d must be an object", i);
  const json_t *jop = json_object_get(jn, "op"), *jname = json_object_get(jn, "name");
  if (!json_is_string(jop))
    return mx_err(MX_EFORMAT, "symbol JSON: node %d: \"op\" must be a string", i);
  if (!json_is_string(jname))
    return mx_err(MX_EFORMAT, "symbol JSON: node %d: \"name\" must be a string", i);
  const char *op = json_string_value(jop), *name = json_string_value(jname);
  const json_t *jin = json_object_get(jn, "inputs");
  if (jin && !json_is_array(jin))
    return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s': \"inputs\" must be an array", i, name);
  size_t nin = jin ? json_array_size(jin) : 0;
  al->n = 0;
  bool op_node = strcmp(op, "null") != 0;
  int rc = collect_attrs(al, json_object_get(jn, "attrs"), "attrs", i, false, op_node);
  if (!rc) rc = collect_attrs(al, json_object_get(jn, "param"), "param", i, false, op_node);
  int nparam = al->n; /* "attr" of old files: node attributes, never op params */
  if (!rc) rc = collect_attrs(al, json_object_get(jn, "attr"), "attr", i, true, op_node);
  if (rc) return rc;

  if (strcmp(op, "null") == 0) {
    if (nin != 0)
      return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s': a variable (op \"null\") has no "
                    "inputs, got %zu", i, name, nin);
    int id = mx_graph_add_var(g, name);
    if (id < 0) return id;
    for (int a = 0; a < al->n; a++) {
      const char *what = mx_graph_attr_invalid(al->keys[a], al->vals[a]);
      if (what)
        return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s': %s=\"%s\" is not %s", i, name,
                      al->keys[a], al->vals[a], what);
      if ((rc = mx_graph_set_attr(g, id, al->keys[a], al->vals[a])) != MX_OK) return rc;
    }
    return id;
  }
  /* MXNet ops that are another op with a param fixed */
  const char *alias_key = NULL, *alias_val = NULL;
  for (int a = 0; ALIASES[a][0]; a++)
    if (strcmp(ALIASES[a][0], op) == 0) {
      op = ALIASES[a][1];
      alias_key = ALIASES[a][2];
      alias_val = ALIASES[a][3];
    }
  int opid = mx_op_find(op);
  if (opid < 0)
    return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s': unknown op '%s' (luamx implements "
                  "no op of that name: docs/ops.md lists the MXNet names it reads)", i, name, op);
  const mx_op_def *def = &mx_ops[opid];
  if (nin > 64)
    return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s' (%s): %zu inputs (at most 64)", i, name,
                  op, nin);
  int in_node[64], in_out[64];
  for (size_t k = 0; k < nin; k++) {
    char what[96];
    snprintf(what, sizeof what, "node %d '%.40s' input %zu", i, name, k);
    if ((rc = get_entry(g, json_array_get(jin, k), i, what, &in_node[k], &in_out[k])))
      return rc;
  }
  if (def->flags & MX_OPF_VARIADIC)
    for (int a = 0; a < nparam; a++)
      if (strcmp(al->keys[a], "num_args") == 0) {
        char *end;
        long v = strtol(al->vals[a], &end, 10);
        if (*end || v != (long)nin)
          return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s' (%s): num_args=\"%s\" but %zu "
                        "inputs", i, name, op, al->vals[a], nin);
      }
  /* Op params and hidden node attributes (every legacy `attr` key is one by now) go to
   * add_op_attrs, which keeps the hidden ones as node attributes. */
  const char *keys[MAX_ATTRS], *vals[MAX_ATTRS];
  int np = 0;
  for (int a = 0; a < al->n; a++)
    if (a < nparam || is_hidden(al->keys[a])) {
      keys[np] = al->keys[a];
      vals[np++] = al->vals[a];
    }
  if (alias_key && np < MAX_ATTRS) {
    for (int a = 0; a < np; a++)
      if (strcmp(keys[a], alias_key) == 0)
        return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s' (%s): has no param '%s'", i, name,
                      json_string_value(jop), alias_key);
    keys[np] = alias_key;
    vals[np++] = alias_val;
  }
  /* params whose MXNet default differs from luamx's: a file without them means MXNet's */
  for (int d = 0; MXNET_DEFAULTS[d][0]; d++) {
    if (strcmp(MXNET_DEFAULTS[d][0], def->name) != 0) continue;
    bool given = false;
    for (int a = 0; a < np; a++) given = given || strcmp(keys[a], MXNET_DEFAULTS[d][1]) == 0;
    if (!given && np < MAX_ATTRS) {
      keys[np] = MXNET_DEFAULTS[d][1];
      vals[np++] = MXNET_DEFAULTS[d][2];
    }
  }
  int id = mx_graph_add_op_attrs(g, opid, name, np, keys, vals, (int)nin, in_node, in_out);
  if (id < 0) {
    /* the op's message names the attribute; say where in the file */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mx_last_error());
    return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s' (%s): %s", i, name, op, msg);
  }
  /* MXNet 1.x's shapes: a 0 dim of a creation op is unknown (the consumer infers it) */
  mx_graph_zero_dims_unknown(g, id);
  /* the op's own checks of its params, before any shape is known (num_hidden="-3" is
   * named here, not at a bind that cannot infer the weight). Not for creation ops: their
   * shapes may hold the unknown dims made just above. */
  int nout = nin > 0 ? mx_graph_node_num_outputs(g, id) : 0;
  mx_desc ud[64], od[64];
  for (size_t k = 0; k < nin; k++) {
    memset(&ud[k], 0, sizeof ud[k]);
    ud[k].ndim = -1;
    ud[k].dtype = -1;
  }
  if (nout > 0 && nout <= 64 &&
      mx_op_infer(opid, mx_graph_node_params(g, id), (int)nin, ud, nout, od) != MX_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mx_last_error());
    return mx_err(MX_EFORMAT, "symbol JSON: node %d '%s' (%s): %s", i, name, op, msg);
  }
  return id;
}

static int read_graph(mx_graph *g, const json_t *root, attr_list *al) {
  if (!json_is_object(root)) return mx_err(MX_EFORMAT, "symbol JSON: the top level must be an object");
  const json_t *nodes = json_object_get(root, "nodes");
  if (!json_is_array(nodes))
    return mx_err(MX_EFORMAT, "symbol JSON: \"nodes\" must be an array (is this a symbol file?)");
  size_t n = json_array_size(nodes);
  if (n == 0 || n > MAX_NODES)
    return mx_err(MX_EFORMAT, "symbol JSON: %zu nodes (1..%d)", n, MAX_NODES);
  for (size_t i = 0; i < n; i++) {
    int id = read_node(g, json_array_get(nodes, i), (int)i, al);
    for (int k = 0; k < al->nowned; k++) free(al->owned[k]);
    al->nowned = 0;
    if (id < 0) return id == MX_ENOMEM ? id : MX_EFORMAT;
  }
  const json_t *args = json_object_get(root, "arg_nodes");
  if (args) {
    if (!json_is_array(args))
      return mx_err(MX_EFORMAT, "symbol JSON: \"arg_nodes\" must be an array");
    for (size_t k = 0; k < json_array_size(args); k++) {
      long long a;
      if (!get_int(json_array_get(args, k), 0, (long long)n - 1, &a) ||
          mx_graph_node_op(g, (int)a) != MX_GRAPH_VAR)
        return mx_err(MX_EFORMAT, "symbol JSON: arg_nodes[%zu] must be a variable node's index",
                      k);
    }
  }
  const json_t *rows = json_object_get(root, "node_row_ptr");
  if (rows) { /* MXNet's count of outputs per node: its form is checked, not the counts
                 (LeakyReLU has one output there and two here; entries are ours) */
    if (!json_is_array(rows) || json_array_size(rows) != n + 1)
      return mx_err(MX_EFORMAT, "symbol JSON: \"node_row_ptr\" must be an array of %zu integers",
                    n + 1);
    long long prev = 0;
    for (size_t k = 0; k <= n; k++) {
      long long r;
      if (!get_int(json_array_get(rows, k), prev, INT32_MAX, &r) || (k == 0 && r != 0))
        return mx_err(MX_EFORMAT, "symbol JSON: node_row_ptr[%zu] must be a non-decreasing "
                      "integer starting at 0", k);
      prev = r;
    }
  }
  const json_t *heads = json_object_get(root, "heads");
  if (!json_is_array(heads) || json_array_size(heads) == 0 || json_array_size(heads) > 65536)
    return mx_err(MX_EFORMAT, "symbol JSON: \"heads\" must be a non-empty array of "
                  "[node, output, version]");
  size_t nh = json_array_size(heads);
  int *hn = malloc(nh * sizeof *hn), *ho = malloc(nh * sizeof *ho);
  int rc = hn && ho ? MX_OK : mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  for (size_t k = 0; k < nh && !rc; k++) {
    char what[32];
    snprintf(what, sizeof what, "heads[%zu]", k);
    rc = get_entry(g, json_array_get(heads, k), (int)n, what, &hn[k], &ho[k]);
  }
  if (!rc) rc = mx_graph_set_heads(g, (int)nh, hn, ho);
  free(hn);
  free(ho);
  if (rc) return rc;
  const json_t *attrs = json_object_get(root, "attrs");
  if (attrs) {
    if (!json_is_object(attrs)) return mx_err(MX_EFORMAT, "symbol JSON: \"attrs\" must be an object");
    const json_t *ver = json_object_get(attrs, "mxnet_version");
    long long v;
    if (ver && (!json_is_array(ver) || json_array_size(ver) != 2 ||
                !json_is_string(json_array_get(ver, 0)) ||
                !get_int(json_array_get(ver, 1), 0, INT32_MAX, &v)))
      return mx_err(MX_EFORMAT, "symbol JSON: attrs.mxnet_version must be [\"int\", N]");
  }
  return MX_OK;
}

int mx_graph_from_json(const char *json, mx_graph **out) {
  if (!json || !out) return mx_err(MX_EINVAL, "mx_graph_from_json: NULL argument");
  json_error_t jerr;
  json_t *root = json_loads(json, 0, &jerr);
  if (!root)
    return mx_err(MX_EFORMAT, "symbol JSON: malformed at line %d column %d: %s", jerr.line,
                  jerr.column, jerr.text);
  mx_graph *g = mx_graph_new();
  attr_list *al = calloc(1, sizeof *al);
  int rc = g && al ? read_graph(g, root, al) : mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  if (al) for (int k = 0; k < al->nowned; k++) free(al->owned[k]);
  free(al);
  json_decref(root);
  if (rc) {
    mx_graph_free(g);
    return rc == MX_ENOMEM ? rc : MX_EFORMAT; /* whatever the check, the file is at fault */
  }
  *out = g;
  return MX_OK;
}

/* ---- writing ----------------------------------------------------------------------- */

/* The op name MXNet knows: a broadcast_* name where the op has one (luamx's add
 * broadcasts: MXNet's elemwise_add would reject unequal shapes), else the first MXNet
 * name, else luamx's own (MXNet cannot read that node; luamx can). */
static const char *mxnet_name(const mx_op_def *def) {
  const char *const *names = def->mxnet_names;
  for (int i = 0; names && names[i]; i++)
    if (strncmp(names[i], "broadcast_", 10) == 0) return names[i];
  return names && names[0] ? names[0] : def->name;
}

/* Params MXNet 1.9.1 requires (or defaults otherwise) where luamx has a default: always
 * written, or MXNet reads another value or refuses the node (found by comparing each
 * op's luamx defaults with MXNet's registry: MXSymbolGetAtomicSymbolInfo). Every param
 * named "scalar" also (luamx's default 0, MXNet's 1). */
static const char *const FORCE[][2] = {
    {"activation", "act_type"}, {"slice_axis", "axis"}, {"slice_axis", "begin"},
    {"slice_axis", "end"}, {"tile", "reps"}, {"repeat", "repeats"}, {"pad", "mode"},
    {"pad", "pad_width"}, {"split_v2", "indices"}, {"copy_make_border", "top"},
    {"copy_make_border", "bot"}, {"copy_make_border", "left"}, {"copy_make_border", "right"},
    {"upsampling", "sample_type"}, {"upsampling", "num_args"}, {"full", "value"},
    {"arange", "start"}, {"linspace", "start"}, {"eye", "N"}, {"random_randint", "low"},
    {"random_randint", "high"}, {"topk", "dtype"}, {"argsort", "dtype"}, {NULL, NULL}};

static bool forced(const mx_op_def *def, const mx_param_def *pd) {
  if (strcmp(pd->name, "scalar") == 0) return true;
  for (int i = 0; FORCE[i][0]; i++)
    if (strcmp(FORCE[i][0], def->name) == 0 && strcmp(FORCE[i][1], pd->name) == 0) return true;
  return false;
}

static int set_new(json_t *obj, const char *key, json_t *v) {
  return v && json_object_set_new(obj, key, v) == 0 ? MX_OK
                                                     : mx_err(MX_ENOMEM, "symbol JSON: out of memory");
}

static json_t *entry_json(int node, int out) {
  return json_pack("[iii]", node, out, 0);
}

static int write_node(const mx_graph *g, int i, json_t *nodes) {
  int op = mx_graph_node_op(g, i);
  json_t *jn = json_object();
  if (!jn || json_array_append_new(nodes, jn)) return mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  if (op < MX_GRAPH_VAR)
    return mx_err(MX_EINVAL, "mx_graph_to_json: node %d '%s' is a fused node (write the graph "
                  "before fusion)", i, mx_graph_node_name(g, i));
  const mx_op_def *def = op >= 0 ? &mx_ops[op] : NULL;
  int rc = set_new(jn, "op", json_string(def ? mxnet_name(def) : "null"));
  if (!rc) rc = set_new(jn, "name", json_string(mx_graph_node_name(g, i)));
  json_t *attrs = json_object();
  if (!attrs) return mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  int nin = mx_graph_node_num_inputs(g, i);
  if (!rc && def) {
    const void *p = mx_graph_node_params(g, i);
    char buf[512];
    /* a creation shape's unknown dims: MXNet 1.x's 0 (the reader's inverse) */
    char pcopy[4096];
    const mx_tuple *st = mx_graph_shape_param(g, i);
    if (st && def->params_size <= sizeof pcopy) {
      bool unk = false;
      for (int d = 0; d < st->n; d++) unk = unk || st->v[d] == MX_DIM_UNKNOWN;
      if (unk) {
        memcpy(pcopy, p, def->params_size);
        mx_tuple *ct = (mx_tuple *)(pcopy + ((const char *)st - (const char *)p));
        for (int d = 0; d < ct->n; d++)
          if (ct->v[d] == MX_DIM_UNKNOWN) ct->v[d] = 0;
        p = pcopy;
      }
    }
    for (int k = 0; p && k < def->nparams && !rc; k++) {
      const char *key;
      int d = mx_op_params_format(op, p, k, &key, buf, sizeof buf);
      if (d < 0) rc = d;
      else if (d > 0 || forced(def, &def->params[k])) rc = set_new(attrs, key, json_string(buf));
    }
    /* MXNet's BilinearResize2D counts its inputs from mode (like: 2) and refuses num_args */
    if (!rc && (def->flags & MX_OPF_VARIADIC) && strcmp(def->name, "bilinear_resize2d") != 0) {
      snprintf(buf, sizeof buf, "%d", nin);
      rc = set_new(attrs, "num_args", json_string(buf));
    }
  }
  for (int k = 0; !rc && k < mx_graph_num_attrs(g, i); k++) {
    const char *key = mx_graph_attr_key(g, i, k);
    char *wrapped = NULL;
    if (def && !is_hidden(key)) { /* op nodes hold params and "__x__" keys only (MXNet
                                     reads any other key as a param and refuses it) */
      size_t len = strlen(key) + 5;
      wrapped = malloc(len);
      if (!wrapped) {
        rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
        break;
      }
      snprintf(wrapped, len, "__%s__", key);
      key = wrapped;
    }
    rc = set_new(attrs, key, json_string(mx_graph_attr_val(g, i, k)));
    free(wrapped);
  }
  if (rc) {
    json_decref(attrs);
    return rc;
  }
  if (json_object_size(attrs) > 0) rc = set_new(jn, "attrs", attrs);
  else json_decref(attrs);
  json_t *ins = json_array();
  for (int k = 0; !rc && k < nin; k++) {
    int o, src = mx_graph_node_input(g, i, k, &o);
    if (!ins || json_array_append_new(ins, entry_json(src, o)))
      rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  }
  if (!rc) rc = set_new(jn, "inputs", ins);
  else json_decref(ins);
  return rc;
}

/* Appends text to the growing string *s (len used, cap allocated). */
static bool append(char **s, size_t *len, size_t *cap, const char *text) {
  size_t n = strlen(text);
  if (*len + n + 1 > *cap) {
    size_t c = *cap;
    while (*len + n + 1 > c) c *= 2;
    char *p = realloc(*s, c);
    if (!p) return false;
    *s = p;
    *cap = c;
  }
  memcpy(*s + *len, text, n + 1);
  *len += n;
  return true;
}

int mx_graph_to_json(const mx_graph *g, char **out) {
  if (!g || !out) return mx_err(MX_EINVAL, "mx_graph_to_json: NULL argument");
  int n = mx_graph_num_nodes(g);
  json_t *root = json_object(), *nodes = json_array(), *args = json_array(),
         *rows = json_array(), *heads = json_array();
  int rc = root && nodes && args && rows && heads ? MX_OK
                                                   : mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  int row = 0;
  if (!rc && json_array_append_new(rows, json_integer(0))) rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  for (int i = 0; i < n && !rc; i++) {
    rc = write_node(g, i, nodes);
    if (!rc && mx_graph_node_op(g, i) == MX_GRAPH_VAR &&
        json_array_append_new(args, json_integer(i)))
      rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
    row += mx_graph_node_num_outputs(g, i);
    if (!rc && json_array_append_new(rows, json_integer(row))) rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  }
  for (int k = 0; k < mx_graph_num_heads(g) && !rc; k++) {
    int o, node = mx_graph_head(g, k, &o);
    if (json_array_append_new(heads, entry_json(node, o))) rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
  }
  /* the order MXNet writes them in */
  if (!rc) rc = set_new(root, "nodes", nodes); else json_decref(nodes);
  if (!rc) rc = set_new(root, "arg_nodes", args); else json_decref(args);
  if (!rc) rc = set_new(root, "node_row_ptr", rows); else json_decref(rows);
  if (!rc) rc = set_new(root, "heads", heads); else json_decref(heads);
  if (!rc) rc = set_new(root, "attrs", json_pack("{s:[si]}", "mxnet_version", "int", MXNET_VERSION));
  char *s = NULL;
  if (!rc) {
    /* MXNet's layout: one line per node, the rest compact; jansson's indent would put
     * every input index on its own line */
    size_t cap = 256, len = 0;
    s = malloc(cap);
    bool ok = s != NULL;
    ok = ok && append(&s, &len, &cap, "{\n  \"nodes\": [");
    for (size_t i = 0; ok && i < json_array_size(nodes); i++) {
      char *js = json_dumps(json_array_get(nodes, i), JSON_COMPACT | JSON_PRESERVE_ORDER);
      ok = js && append(&s, &len, &cap, i ? ",\n    " : "\n    ") && append(&s, &len, &cap, js);
      free(js);
    }
    ok = ok && append(&s, &len, &cap, "\n  ]");
    const char *keys[] = {"arg_nodes", "node_row_ptr", "heads", "attrs"};
    for (int k = 0; ok && k < 4; k++) {
      char *js = json_dumps(json_object_get(root, keys[k]), JSON_COMPACT | JSON_PRESERVE_ORDER);
      ok = js && append(&s, &len, &cap, ",\n  \"") && append(&s, &len, &cap, keys[k]) &&
           append(&s, &len, &cap, "\": ") && append(&s, &len, &cap, js);
      free(js);
    }
    ok = ok && append(&s, &len, &cap, "\n}\n");
    if (!ok) {
      free(s);
      s = NULL;
      rc = mx_err(MX_ENOMEM, "symbol JSON: out of memory");
    }
  }
  json_decref(root);
  if (rc) return rc;
  *out = s;
  return MX_OK;
}
