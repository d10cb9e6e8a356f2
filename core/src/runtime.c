/* runtime.c — the inference runtime's models and contexts (mx_runtime.h): a model is
 * the symbol's graph with its parameters as constants, optimised once by the graph
 * layer's passes for its creation signature; a context is a plan of that graph for one
 * input signature (runtime_plan.c) with its buffers. */
#include "runtime.h"
#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void mx_rt_options_init(mx_rt_options *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof *opt);
  opt->dev_type = MX_CPU;
  opt->opt_level = MX_RT_OPT_ALL;
  opt->allow_reshape = 1;
}

const char *mx_rt_last_error(void) { return mx_last_error(); }

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static void model_unref(mx_rt_model *m) {
  if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
  mx_graph_free(m->g);
  for (int k = 0; k < m->nin; k++) free(m->in_name[k]);
  for (int k = 0; k < m->nout; k++) free(m->out_name[k]);
  free(m->in_name);
  free(m->in_node);
  free(m->in_desc);
  free(m->out_name);
  free(m);
}

void mx_rt_model_free(mx_rt_model *m) { model_unref(m); }

static int find_var(const mx_graph *g, const char *name) {
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == MX_GRAPH_VAR && strcmp(g->nodes[i].name, name) == 0) return i;
  return -1;
}

/* "fc1" (its output 0), "fc1_output" (MXNet's name of a one-output node's output) or
 * "fc1_output<k>". */
static int find_output(const mx_graph *g, const char *name, int *node, int *out) {
  for (int i = 0; i < g->n; i++) {
    const char *nm = g->nodes[i].name;
    size_t n = strlen(nm);
    if (strncmp(name, nm, n) != 0) continue;
    const char *rest = name + n;
    int k = -1;
    if (!*rest) k = 0;
    else if (strcmp(rest, "_output") == 0) k = 0;
    else if (strncmp(rest, "_output", 7) == 0 && rest[7] >= '0' && rest[7] <= '9') {
      char *end;
      long v = strtol(rest + 7, &end, 10);
      if (!*end && v < g->nodes[i].nout) k = (int)v;
    }
    if (k >= 0 && k < g->nodes[i].nout) {
      *node = i;
      *out = k;
      return MX_OK;
    }
  }
  return mx_err(MX_EINVAL, "mx_rt: the symbol has no output called '%s' (give a node name, "
                "'<node>_output' or '<node>_output<k>')", name);
}

/* Nodes the heads depend on. */
static bool *needed_nodes(const mx_graph *g) {
  bool *need = calloc((size_t)(g->n ? g->n : 1), sizeof(bool));
  if (!need) return NULL;
  for (int h = 0; h < g->nheads; h++) need[g->head_node[h]] = true;
  for (int i = g->n - 1; i >= 0; i--)
    for (int k = 0; need[i] && k < g->nodes[i].nin; k++) need[g->nodes[i].in_node[k]] = true;
  return need;
}

static int check_input(const mx_rt_input *in, mx_desc *d) {
  char b[MX_SHAPE_BUF];
  if (!in->name) return mx_err(MX_EINVAL, "mx_rt: an input has no name");
  if (in->ndim < 0 || in->ndim > MX_MAX_DIM || (in->ndim && !in->shape))
    return mx_err(MX_EINVAL, "mx_rt: input '%s': %d dims (0 to %d, with a shape)", in->name,
                  in->ndim, MX_MAX_DIM);
  int dt = in->dtype < 0 ? MX_F32 : in->dtype;
  if (!mx_dtype_valid(dt)) return mx_err(MX_EINVAL, "mx_rt: input '%s': unknown dtype %d", in->name, dt);
  memset(d, 0, sizeof *d);
  d->ndim = in->ndim;
  for (int j = 0; j < in->ndim; j++) d->shape[j] = in->shape[j];
  d->dtype = dt;
  d->dev_type = MX_CPU;
  int rc = mx_shape_check("mx_rt", d->ndim, d->shape, dt);
  if (rc)
    return mx_err(MX_EINVAL, "mx_rt: input '%s' has shape %s: dims must be >= 0 and the size "
                  "must fit", in->name, mx_shape_str(b, in->ndim, in->shape));
  return MX_OK;
}

/* The variables of g that the inputs name, in the order given; the entries' descriptors
 * of every variable that is an input. */
static int bind_inputs(mx_rt_model *m, mx_desc *ent) {
  const mx_graph *g = m->g;
  for (int x = 0; x < g->nentries; x++) {
    ent[x].ndim = -1;
    ent[x].dtype = -1;
  }
  for (int k = 0; k < m->nin; k++) {
    int v = find_var(g, m->in_name[k]);
    if (v < 0) return mx_err(MX_EINVAL, "mx_rt: input '%s' is not a variable of the graph", m->in_name[k]);
    m->in_node[k] = v;
    ent[g->nodes[v].row] = m->in_desc[k];
  }
  return mx_graph_infer(g, ent);
}

static int optimise(mx_rt_model *m, mx_desc **entp) {
  static const char *const passes[] = {"dce", "cse", "fold_bn", "fold", "fuse_act", "fuse"};
  static const int level[] = {0, 1, 2, 1, 2, 2};
  for (size_t k = 0; k < sizeof passes / sizeof passes[0]; k++) {
    if (level[k] > m->opt.opt_level) continue;
    mx_graph *ng = NULL;
    int rc = mx_graph_pass(m->g, passes[k], *entp, &ng);
    if (rc) return rc;
    mx_graph_free(m->g);
    m->g = ng;
    free(*entp);
    *entp = malloc((size_t)(ng->nentries ? ng->nentries : 1) * sizeof **entp);
    if (!*entp) return mx_err(MX_ENOMEM, "mx_rt: out of memory");
    if ((rc = bind_inputs(m, *entp))) return rc;
  }
  return MX_OK;
}

/* Takes g (freed on failure too) and the parameter arrays (borrowed). */
int rt_model_make(mx_graph *g, int narr, mx_tensor **arrays, char **names, int ninputs,
                  const mx_rt_input *inputs, const mx_rt_options *optp, mx_rt_model **out) {
  mx_rt_options opt;
  if (optp) opt = *optp;
  else mx_rt_options_init(&opt);
  int rc = MX_OK;
  mx_rt_model *m = calloc(1, sizeof *m);
  if (!m) {
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "mx_rt: out of memory");
  }
  atomic_init(&m->refs, 1);
  m->g = g;
  if (opt.dev_type != MX_CPU)
    rc = mx_err(MX_EDEVICE, "mx_rt: the runtime runs models on the cpu (dev_type 1); dev_type "
                "%d asked", opt.dev_type);
  else if (opt.opt_level < MX_RT_OPT_NONE || opt.opt_level > MX_RT_OPT_ALL)
    rc = mx_err(MX_EINVAL, "mx_rt: opt_level %d (0 to 2)", opt.opt_level);
  else if (opt.threads < 0)
    rc = mx_err(MX_EINVAL, "mx_rt: threads %d (0: the process budget, or a count)", opt.threads);
  else if (ninputs < 0 || (ninputs && !inputs))
    rc = mx_err(MX_EINVAL, "mx_rt: %d inputs given with no list", ninputs);
  /* internal outputs (MXNet's partial out) replace the heads */
  if (!rc && opt.noutputs > 0) {
    int *hn = malloc((size_t)opt.noutputs * sizeof(int)), *ho = malloc((size_t)opt.noutputs * sizeof(int));
    if (!hn || !ho) rc = mx_err(MX_ENOMEM, "mx_rt: out of memory");
    for (int k = 0; !rc && k < opt.noutputs; k++)
      rc = opt.outputs && opt.outputs[k] ? find_output(g, opt.outputs[k], &hn[k], &ho[k])
                                         : mx_err(MX_EINVAL, "mx_rt: output name %d is NULL", k);
    if (!rc) rc = mx_graph_set_heads(g, opt.noutputs, hn, ho);
    free(hn);
    free(ho);
  }
  opt.noutputs = 0;
  opt.outputs = NULL;
  m->opt = opt;
  m->nin = ninputs;
  m->in_node = calloc((size_t)ninputs + 1, sizeof(int));
  m->in_name = calloc((size_t)ninputs + 1, sizeof(char *));
  m->in_desc = calloc((size_t)ninputs + 1, sizeof(mx_desc));
  if (!rc && (!m->in_node || !m->in_name || !m->in_desc)) rc = mx_err(MX_ENOMEM, "mx_rt: out of memory");
  for (int k = 0; !rc && k < ninputs; k++) {
    if ((rc = check_input(&inputs[k], &m->in_desc[k]))) break;
    for (int j = 0; j < k; j++)
      if (strcmp(inputs[j].name, inputs[k].name) == 0)
        rc = mx_err(MX_EINVAL, "mx_rt: input '%s' given twice", inputs[k].name);
    if (!rc && !(m->in_name[k] = dup_str(inputs[k].name))) rc = mx_err(MX_ENOMEM, "mx_rt: out of memory");
  }
  /* the parameters: by name, with or without "arg:" / "aux:"; inputs win */
  for (int a = 0; !rc && a < narr; a++) {
    const char *nm = names[a];
    if (!strncmp(nm, "arg:", 4) || !strncmp(nm, "aux:", 4)) nm += 4;
    int v = find_var(g, nm);
    bool is_input = false;
    for (int k = 0; k < ninputs; k++) is_input |= strcmp(inputs[k].name, nm) == 0;
    if (v < 0 || is_input) continue;
    if ((rc = mx_tensor_make_plain(arrays[a])) || (rc = mx_tensor_wait_to_read(arrays[a]))) break;
    rc = mx_graph_set_value(g, v, arrays[a]);
  }
  /* inputs name variables: else the message lists those without a parameter */
  for (int k = 0; !rc && k < ninputs; k++) {
    if (find_var(g, inputs[k].name) >= 0) continue;
    char list[400] = "";
    size_t used = 0;
    for (int i = 0; i < g->n && used + 64 < sizeof list; i++)
      if (g->nodes[i].op == MX_GRAPH_VAR && !g->nodes[i].value)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", used ? ", " : "",
                                 g->nodes[i].name);
    rc = mx_err(MX_EINVAL, "mx_rt: input '%s' is not a variable of the symbol (those without a "
                "parameter: %s)", inputs[k].name, used ? list : "none");
  }
  /* every variable the outputs need is an input or has a value */
  bool *need = rc ? NULL : needed_nodes(g);
  if (!rc && !need) rc = mx_err(MX_ENOMEM, "mx_rt: out of memory");
  for (int i = 0; !rc && i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (!need[i] || nd->op != MX_GRAPH_VAR || nd->value) continue;
    bool is_input = false;
    for (int k = 0; k < ninputs; k++) is_input |= strcmp(inputs[k].name, nd->name) == 0;
    if (!is_input)
      rc = mx_err(MX_EINVAL, "mx_rt: variable '%s' has no value in the parameters and is not "
                  "one of the inputs given", nd->name);
  }
  free(need);
  /* inference mode: the train flag of dropout, batch_norm, ... cleared (MXNet's
   * forward(is_train=False)) */
  for (int i = 0; !rc && i < g->n; i++) {
    const mx_op_def *def = mx_graph_def(g, i);
    for (int p = 0; def && p < def->nparams; p++)
      if (def->params[p].type == MX_PT_BOOL && strcmp(def->params[p].name, "training") == 0)
        *(bool *)((char *)g->nodes[i].params + def->params[p].offset) = false;
  }
  mx_desc *ent = NULL;
  if (!rc) {
    ent = malloc((size_t)(g->nentries ? g->nentries : 1) * sizeof *ent);
    rc = ent ? bind_inputs(m, ent) : mx_err(MX_ENOMEM, "mx_rt: out of memory");
  }
  if (!rc) rc = optimise(m, &ent);
  free(ent);
  g = m->g;
  /* folded constants are computed by queued ops: done before any context reads them */
  for (int i = 0; !rc && i < g->n; i++)
    if (g->nodes[i].value) {
      mx_tensor *v = g->nodes[i].value;
      if (!(rc = mx_tensor_wait_to_read(v))) rc = mx_tensor_make_plain(v);
    }
  if (!rc) {
    m->nout = g->nheads;
    m->out_name = calloc((size_t)g->nheads + 1, sizeof(char *));
    if (!m->out_name) rc = mx_err(MX_ENOMEM, "mx_rt: out of memory");
  }
  for (int h = 0; !rc && h < g->nheads; h++) {
    char buf[600];
    rt_entry_name(g, g->head_node[h], g->head_out[h], buf, sizeof buf);
    if (!(m->out_name[h] = dup_str(buf))) rc = mx_err(MX_ENOMEM, "mx_rt: out of memory");
  }
  for (int i = 0; !rc && i < g->n; i++) m->nops += g->nodes[i].op != MX_GRAPH_VAR;
  if (rc) {
    model_unref(m);
    return rc;
  }
  *out = m;
  return MX_OK;
}

static int model_from(const char *json, int narr, mx_tensor **arrays, char **names, int ninputs,
                      const mx_rt_input *inputs, const mx_rt_options *opt, mx_rt_model **out) {
  mx_graph *g = NULL;
  int rc = mx_graph_from_json(json, &g);
  if (rc) return mx_err_prefix(rc, "mx_rt");
  /* the file's 0-based positions (pick, take, argmax, topk...) as luamx's ops take them */
  mx_graph *h = NULL;
  rc = mx_graph_index_from_mxnet(g, &h);
  mx_graph_free(g);
  if (rc) return mx_err_prefix(rc, "mx_rt");
  return rt_model_make(h, narr, arrays, names, ninputs, inputs, opt, out);
}

static void free_arrays(int n, mx_tensor **arrays, char **names) {
  for (int k = 0; k < n; k++) {
    if (arrays) mx_tensor_release(arrays[k]);
    if (names) mx_free(names[k]);
  }
  mx_free(arrays);
  mx_free(names);
}

static int load_params(const char *path, const void *buf, size_t len, int *n, mx_tensor ***arrays,
                       char ***names) {
  *n = 0;
  *arrays = NULL;
  *names = NULL;
  if (!path && (!buf || len == 0)) return MX_OK;
  int rc = path ? mx_nd_load(path, n, arrays, names) : mx_nd_load_bytes(buf, len, n, arrays, names);
  if (rc) return mx_err_prefix(rc, "mx_rt");
  if (*n > 0 && !*names) {
    free_arrays(*n, *arrays, NULL);
    *n = 0;
    return mx_err(MX_EFORMAT, "mx_rt: the parameter file holds a list without names (save a "
                  "dict: 'arg:<name>' / 'aux:<name>' or plain names)");
  }
  for (int i = 0; i < *n; i++)
    if (mx_tensor_stype((*arrays)[i])) {
      rc = mx_err(MX_EFORMAT, "mx_rt: parameter '%s' has sparse storage (%s): the runtime takes "
                  "dense parameters (save it with tostype('default'))", (*names)[i],
                  mx_tensor_stype((*arrays)[i]) == MX_STYPE_CSR ? "csr" : "row_sparse");
      free_arrays(*n, *arrays, *names);
      *n = 0;
      *arrays = NULL;
      *names = NULL;
      return rc;
    }
  return MX_OK;
}

int mx_rt_model_from_memory(const char *json, const void *params, size_t params_len, int ninputs,
                            const mx_rt_input *inputs, const mx_rt_options *opt, mx_rt_model **out) {
  if (!out || !json) return mx_err(MX_EINVAL, "mx_rt_model_from_memory: NULL argument");
  *out = NULL;
  int n;
  mx_tensor **arrays;
  char **names;
  int rc = load_params(NULL, params, params_len, &n, &arrays, &names);
  if (rc) return rc;
  rc = model_from(json, n, arrays, names, ninputs, inputs, opt, out);
  free_arrays(n, arrays, names);
  return rc;
}

int mx_rt_model_load(const char *symbol_path, const char *params_path, int ninputs,
                     const mx_rt_input *inputs, const mx_rt_options *opt, mx_rt_model **out) {
  if (!out || !symbol_path) return mx_err(MX_EINVAL, "mx_rt_model_load: NULL argument");
  *out = NULL;
  FILE *f = fopen(symbol_path, "rb");
  if (!f) return mx_err(MX_EIO, "mx_rt: cannot open '%s': %s", symbol_path, strerror(errno));
  char *text = NULL;
  long len = -1;
  if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
  if (len >= 0 && fseek(f, 0, SEEK_SET) == 0) text = malloc((size_t)len + 1);
  bool ok = text && fread(text, 1, (size_t)len, f) == (size_t)len;
  fclose(f);
  if (!ok) {
    free(text);
    return mx_err(MX_EIO, "mx_rt: cannot read '%s'", symbol_path);
  }
  text[len] = 0;
  int n;
  mx_tensor **arrays;
  char **names;
  int rc = load_params(params_path, NULL, 0, &n, &arrays, &names);
  if (!rc) rc = model_from(text, n, arrays, names, ninputs, inputs, opt, out);
  free_arrays(n, arrays, names);
  free(text);
  return rc;
}

int mx_rt_model_num_inputs(const mx_rt_model *m) { return m ? m->nin : -1; }
int mx_rt_model_num_outputs(const mx_rt_model *m) { return m ? m->nout : -1; }
int mx_rt_model_num_nodes(const mx_rt_model *m) { return m ? m->nops : -1; }
const char *mx_rt_model_input_name(const mx_rt_model *m, int k) {
  return m && k >= 0 && k < m->nin ? m->in_name[k] : NULL;
}
const char *mx_rt_model_output_name(const mx_rt_model *m, int k) {
  return m && k >= 0 && k < m->nout ? m->out_name[k] : NULL;
}

/* ---- contexts ---------------------------------------------------------------------- */

int mx_rt_ctx_new(mx_rt_model *m, mx_rt_ctx **out) {
  if (!m || !out) return mx_err(MX_EINVAL, "mx_rt_ctx_new: NULL argument");
  *out = NULL;
  mx_rt_ctx *c = calloc(1, sizeof *c);
  if (!c) return mx_err(MX_ENOMEM, "mx_rt: out of memory");
  int prev = mx_threads_set_local_cap(m->opt.threads); /* the teams the kernels will get */
  int rc = rt_plan_build(m, m->in_desc, &c->p);
  mx_threads_set_local_cap(prev);
  if (rc) {
    free(c);
    return rc;
  }
  atomic_fetch_add(&m->refs, 1);
  c->m = m;
  *out = c;
  return MX_OK;
}

void mx_rt_ctx_free(mx_rt_ctx *c) {
  if (!c) return;
  rt_plan_free(&c->p);
  model_unref(c->m);
  free(c);
}

int mx_rt_ctx_reshape(mx_rt_ctx *c, int ninputs, const mx_rt_input *inputs) {
  if (!c || (ninputs && !inputs)) return mx_err(MX_EINVAL, "mx_rt_ctx_reshape: NULL argument");
  const mx_rt_model *m = c->m;
  if (!m->opt.allow_reshape)
    return mx_err(MX_EINVAL, "mx_rt: the model was made with fixed shapes (allow_reshape = 0)");
  mx_desc d[64];
  if (m->nin > 64) return mx_err(MX_EINVAL, "mx_rt: reshape takes models of at most 64 inputs");
  for (int k = 0; k < m->nin; k++) d[k] = c->p.ent[m->g->nodes[m->in_node[k]].row];
  for (int j = 0; j < ninputs; j++) {
    int k = mx_rt_input_index(c, inputs[j].name);
    if (k < 0) return MX_EINVAL;
    mx_rt_input in = inputs[j];
    if (in.dtype < 0) in.dtype = d[k].dtype;
    if (in.dtype != d[k].dtype)
      return mx_err(MX_EINVAL, "mx_rt: reshape of input '%s' changes its dtype (%s to %s)", in.name,
                    mx_dtype_name(d[k].dtype), mx_dtype_name(in.dtype));
    int rc = check_input(&in, &d[k]);
    if (rc) return rc;
  }
  rt_plan np;
  int prev = mx_threads_set_local_cap(m->opt.threads);
  int rc = rt_plan_build(m, d, &np);
  mx_threads_set_local_cap(prev);
  if (rc) return rc;
  rt_plan_free(&c->p);
  c->p = np;
  return MX_OK;
}

int mx_rt_num_inputs(const mx_rt_ctx *c) { return c ? c->m->nin : -1; }
int mx_rt_num_outputs(const mx_rt_ctx *c) { return c ? c->m->nout : -1; }

int mx_rt_input_index(const mx_rt_ctx *c, const char *name) {
  if (!c || !name) return mx_err(MX_EINVAL, "mx_rt_input_index: NULL argument");
  for (int k = 0; k < c->m->nin; k++)
    if (strcmp(c->m->in_name[k], name) == 0) return k;
  return mx_err(MX_EINVAL, "mx_rt: the model has no input '%s'", name);
}

int mx_rt_output_index(const mx_rt_ctx *c, const char *name) {
  if (!c || !name) return mx_err(MX_EINVAL, "mx_rt_output_index: NULL argument");
  for (int k = 0; k < c->m->nout; k++)
    if (strcmp(c->m->out_name[k], name) == 0) return k;
  return mx_err(MX_EINVAL, "mx_rt: the model has no output '%s'", name);
}

static int shape_of(const mx_tensor *t, int64_t *shape, int *dtype) {
  for (int j = 0; shape && j < t->ndim; j++) shape[j] = t->shape[j];
  if (dtype) *dtype = t->dtype;
  return t->ndim;
}

int mx_rt_input_shape(const mx_rt_ctx *c, int k, int64_t *shape, int *dtype) {
  if (!c || k < 0 || k >= c->m->nin) return mx_err(MX_EINVAL, "mx_rt: no input %d", k);
  return shape_of(c->p.in[k], shape, dtype);
}
int mx_rt_output_shape(const mx_rt_ctx *c, int k, int64_t *shape, int *dtype) {
  if (!c || k < 0 || k >= c->m->nout) return mx_err(MX_EINVAL, "mx_rt: no output %d", k);
  return shape_of(c->p.out[k], shape, dtype);
}
size_t mx_rt_input_bytes(const mx_rt_ctx *c, int k) {
  return c && k >= 0 && k < c->m->nin ? mx_nbytes(c->p.in[k]) : 0;
}
size_t mx_rt_output_bytes(const mx_rt_ctx *c, int k) {
  return c && k >= 0 && k < c->m->nout ? mx_nbytes(c->p.out[k]) : 0;
}

/* a bound buffer: any alignment of its dtype's elements (kernels read them as such) */
static int check_align(const char *what, const char *name, const mx_tensor *t, const void *p) {
  size_t a = mx_dtype_size(t->dtype);
  if (a <= 1 || (uintptr_t)p % a == 0) return MX_OK;
  return mx_err(MX_EINVAL, "mx_rt: %s '%s': the buffer %p is not aligned to its %s elements (%zu "
                "bytes)", what, name, p, mx_dtype_name(t->dtype), a);
}

static int check_bytes(const char *what, const char *name, const mx_tensor *t, size_t n) {
  char b[MX_SHAPE_BUF];
  if (n == mx_nbytes(t)) return MX_OK;
  return mx_err(MX_EINVAL, "mx_rt: %s '%s' is %s %s (%zu bytes), %zu bytes given", what, name,
                mx_shape_str(b, t->ndim, t->shape), mx_dtype_name(t->dtype), mx_nbytes(t), n);
}

int mx_rt_set_input(mx_rt_ctx *c, int k, const void *data, size_t nbytes) {
  if (!c || k < 0 || k >= c->m->nin) return mx_err(MX_EINVAL, "mx_rt: no input %d", k);
  mx_tensor *t = c->p.in[k];
  int rc = check_bytes("input", c->m->in_name[k], t, nbytes);
  if (rc) return rc;
  if (nbytes && !data) return mx_err(MX_EINVAL, "mx_rt: input '%s': NULL data", c->m->in_name[k]);
  t->storage->data = c->p.in_buf[k];
  if (nbytes) memcpy(c->p.in_buf[k], data, nbytes);
  return MX_OK;
}

int mx_rt_bind_input(mx_rt_ctx *c, int k, const void *data, size_t nbytes) {
  if (!c || k < 0 || k >= c->m->nin) return mx_err(MX_EINVAL, "mx_rt: no input %d", k);
  mx_tensor *t = c->p.in[k];
  if (!data) {
    t->storage->data = c->p.in_buf[k];
    return MX_OK;
  }
  int rc = check_bytes("input", c->m->in_name[k], t, nbytes);
  if (!rc) rc = check_align("input", c->m->in_name[k], t, data);
  if (rc) return rc;
  t->storage->data = (void *)data; /* read only: no step writes an input */
  return MX_OK;
}

int mx_rt_bind_output(mx_rt_ctx *c, int k, void *data, size_t nbytes) {
  if (!c || k < 0 || k >= c->m->nout) return mx_err(MX_EINVAL, "mx_rt: no output %d", k);
  mx_tensor *t = c->p.out[k];
  if (!data) {
    t->storage->data = c->p.out_buf[k];
    return MX_OK;
  }
  int rc = check_bytes("output", c->m->out_name[k], t, nbytes);
  if (!rc) rc = check_align("output", c->m->out_name[k], t, data);
  if (rc) return rc;
  t->storage->data = data;
  return MX_OK;
}

int mx_rt_get_output(const mx_rt_ctx *c, int k, void *data, size_t nbytes) {
  if (!c || k < 0 || k >= c->m->nout) return mx_err(MX_EINVAL, "mx_rt: no output %d", k);
  const mx_tensor *t = c->p.out[k];
  int rc = check_bytes("output", c->m->out_name[k], t, nbytes);
  if (rc) return rc;
  if (nbytes && !data) return mx_err(MX_EINVAL, "mx_rt: output '%s': NULL data", c->m->out_name[k]);
  if (nbytes) memcpy(data, mx_ptr(t), nbytes);
  return MX_OK;
}

const void *mx_rt_output_data(const mx_rt_ctx *c, int k) {
  return c && k >= 0 && k < c->m->nout ? mx_ptr(c->p.out[k]) : NULL;
}

int mx_rt_run(mx_rt_ctx *c) {
  if (!c) return mx_err(MX_EINVAL, "mx_rt_run: NULL context");
  return rt_plan_run(c, 0, c->p.nops);
}

int mx_rt_run_steps(mx_rt_ctx *c, int first, int n) {
  if (!c || first < 0 || n < 0)
    return mx_err(MX_EINVAL, "mx_rt_run_steps: bad arguments (first %d, n %d)", first, n);
  int last = first + n > c->p.nops || first + n < first ? c->p.nops : first + n;
  return first >= last ? MX_OK : rt_plan_run(c, first, last);
}

int mx_rt_set_monitor(mx_rt_ctx *c, mx_rt_monitor_fn fn, void *user) {
  if (!c) return mx_err(MX_EINVAL, "mx_rt_set_monitor: NULL context");
  c->monitor = fn;
  c->monitor_user = user;
  return MX_OK;
}

int64_t mx_rt_ctx_planned_bytes(const mx_rt_ctx *c) { return c ? c->p.planned : 0; }
