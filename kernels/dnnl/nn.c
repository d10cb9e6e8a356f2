/* kernels/dnnl/nn.c — oneDNN's eltwise on blocked inputs (MX_BACKEND_DNNL): relu and
 * activation (relu/sigmoid/tanh), leaky_relu (leaky/elu/gelu), silu, gelu, hard_swish,
 * log_sigmoid and mish, the output in the input's blocked layout, so a chain of oneDNN
 * ops never reorders for its activations. Row-major calls stay on the cpu kernels. */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <string.h>

/* ---- eltwise kernels (relu, activation, the nn activations) on blocked inputs ---------- */

typedef struct { int alg; float alpha, beta; dnnl_memory_desc_t md; } elt_key;

static void *elt_build(const void *key, void *arg) {
  (void)arg;
  const elt_key *k = key;
  dnnl_eltwise_desc_t d;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t p = NULL;
  if (dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, (dnnl_alg_kind_t)k->alg,
                                     &k->md, k->alpha, k->beta) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &d, NULL, mx_dnnl_engine(), NULL) == dnnl_success &&
      dnnl_primitive_create(&p, pd) != dnnl_success)
    p = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return p;
}

/* A param finite in float (oneDNN's alpha is a float); FLT_MAX without <float.h>. */
static bool elt_f32ok(double a) { return a >= -3.40282346e38 && a <= 3.40282346e38; }

/* The oneDNN algorithm (and its alpha) of an op call; 0 where oneDNN has none (selu,
 * prelu, rrelu, hard_sigmoid: those read blocked inputs through a reorder to row-major). */
static int act_alg(const mx_op_def *def, const void *params, float *alpha) {
  const char *n = def->name;
  *alpha = 0.0f;
  if (strcmp(n, "relu") == 0) return dnnl_eltwise_relu;
  if (strcmp(n, "activation") == 0) {
    switch (((const struct mx_params_activation *)params)->act_type) {
    case MX_ACTIVATION_ACT_TYPE_RELU: return dnnl_eltwise_relu;
    case MX_ACTIVATION_ACT_TYPE_SIGMOID: return dnnl_eltwise_logistic;
    case MX_ACTIVATION_ACT_TYPE_TANH: return dnnl_eltwise_tanh;
    default: return 0;
    }
  }
  if (strcmp(n, "leaky_relu") == 0) {
    const struct mx_params_leaky_relu *p = params;
    if (!elt_f32ok(p->slope)) return 0; /* not a float: the cpu/ref kernels' doubles */
    *alpha = (float)p->slope;
    switch (p->act_type) {
    case MX_LEAKY_RELU_ACT_TYPE_LEAKY: return dnnl_eltwise_relu; /* alpha: negative slope */
    case MX_LEAKY_RELU_ACT_TYPE_ELU: return dnnl_eltwise_elu;
    case MX_LEAKY_RELU_ACT_TYPE_GELU: return dnnl_eltwise_gelu_erf;
    default: return 0;
    }
  }
  if (strcmp(n, "silu") == 0) {
    double beta = ((const struct mx_params_silu *)params)->beta;
    if (!elt_f32ok(beta)) return 0;
    *alpha = (float)beta; /* sigmoid(alpha*x) */
    return dnnl_eltwise_swish;
  }
  if (strcmp(n, "gelu") == 0)
    return ((const struct mx_params_gelu *)params)->approximation == MX_GELU_APPROXIMATION_TANH
               ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
  if (strcmp(n, "hard_swish") == 0) return dnnl_eltwise_hardswish;
  if (strcmp(n, "log_sigmoid") == 0) return dnnl_eltwise_logsigmoid;
  if (strcmp(n, "mish") == 0) return dnnl_eltwise_mish;
  return 0;
}

/* Only blocked f32 inputs: row-major calls stay on the cpu backend's kernels. */
bool mx_dnnl_eltwise_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
                         int nout, const mx_desc *out, const char **why) {
  (void)nin, (void)nout, (void)out;
  if (in[0].layout != MX_LAYOUT_ONEDNN || in[0].dtype != MX_F32) return false;
  float alpha;
  if (!act_alg(def, params, &alpha)) { *why = "act_type not supported by oneDNN eltwise"; return false; }
  return true;
}

/* The output keeps the input's blocked layout (dispatch asks before allocating). */
int mx_dnnl_eltwise_out_layout(const mx_op_def *def, const void *params,
                          const mx_op_info *info, int nin,
                          mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)params, (void)nin, (void)od;
  *out = NULL;
  if (i != 0 || !mx_dnnl_is_blocked(in[0])) return MX_OK;
  return mx_dnnl_new_like(in[0], in[0]->layout_md, out);
}

int mx_dnnl_eltwise(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                   int nout, mx_tensor *const *out) {
  (void)nin;
  const mx_tensor *x = in[0];
  mx_tensor *y = out[0];
  elt_key k;
  memset(&k, 0, sizeof k);
  k.alg = act_alg(ctx->def, params, &k.alpha);
  memcpy(&k.md, x->layout_md, sizeof k.md);
  mx_dnnl_entry *e;
  bool tmp;
  dnnl_primitive_t p = mx_dnnl_prim_get(MX_DNNL_ELTWISE, &k, sizeof k, elt_build, &e, &tmp);
  if (!p) return mx_err(MX_EINVAL, "%s: oneDNN eltwise unavailable", ctx->def->name);
  int rc;
  if (mx_dnnl_is_blocked(y)) {
    rc = mx_dnnl_exec2(p, DNNL_ARG_SRC, &k.md, mx_ptr(x), &k.md, mx_ptr(y));
  } else { /* a row-major out= slot: compute blocked into scratch, then reorder */
    void *ws = mx_kctx_workspace(ctx, dnnl_memory_desc_get_size(&k.md));
    dnnl_memory_desc_t pm;
    rc = ws ? mx_dnnl_exec2(p, DNNL_ARG_SRC, &k.md, mx_ptr(x), &k.md, ws)
            : mx_err(MX_ENOMEM, "%s: out of memory for scratch", ctx->def->name);
    if (!rc) rc = mx_dnnl_plain_md(&pm, y->ndim, y->shape, y->dtype);
    if (!rc) rc = mx_dnnl_reorder(&k.md, ws, &pm, mx_ptr(y));
  }
  mx_dnnl_prim_put(p, e, tmp);
  if (!rc && nout > 1) { /* leaky_relu's (1) mask: the negative slope (leaky), else 0 */
    const struct mx_params_leaky_relu *lp = params;
    *(float *)mx_ptr(out[1]) = lp->act_type == MX_LEAKY_RELU_ACT_TYPE_LEAKY ? k.alpha : 0.0f;
  }
  return rc;
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_nn_c_not_empty; /* ISO C: no empty translation unit */
