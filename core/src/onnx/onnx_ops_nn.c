/* onnx_ops_nn.c — ONNX's network ops (Conv, ConvTranspose, pooling, normalisation, Gemm,
 * MatMul, Softmax, Resize, TopK) in terms of the op table's MXNet-named ops. Where ONNX
 * allows what an MXNet op does not take directly (asymmetric pads, auto_pad, opset-12
 * softmax's 2-D coercion) the converter adds the ops that make it equal, or says
 * "unsupported" naming the attribute. */
#include "onnx_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- windows: kernel, strides, dilations, pads (symmetric for MXNet, else explicit) ----- */

typedef struct win {
  int ns; /* spatial dims */
  int64_t k[3], s[3], d[3], pb[3], pe[3];
} win;

static int window(ox *X, const mx_desc *x, const int64_t *wshape, win *w, bool transpose) {
  int ns = x->ndim - 2;
  if (ns < 1 || ns > 3) return ox_unsupported(X, "%d spatial dims (1 to 3 are)", ns);
  w->ns = ns;
  int64_t tmp[6];
  int n = ox_attr_ints(X, "kernel_shape", 3, w->k);
  if (n == -2) return MX_EINVAL;
  if (n < 0) {
    if (!wshape) return ox_fail(X, "kernel_shape is required");
    for (int i = 0; i < ns; i++) w->k[i] = wshape[2 + i];
  } else if (n != ns) return ox_fail(X, "kernel_shape has %d dims for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) w->s[i] = 1, w->d[i] = 1, w->pb[i] = 0, w->pe[i] = 0;
  if ((n = ox_attr_ints(X, "strides", 3, tmp)) >= 0) {
    if (n != ns) return ox_fail(X, "strides has %d values", n);
    for (int i = 0; i < ns; i++) w->s[i] = tmp[i];
  }
  if ((n = ox_attr_ints(X, "dilations", 3, tmp)) >= 0) {
    if (n != ns) return ox_fail(X, "dilations has %d values", n);
    for (int i = 0; i < ns; i++) w->d[i] = tmp[i];
  }
  for (int i = 0; i < ns; i++)
    if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1)
      return ox_fail(X, "kernel_shape, strides and dilations must be >= 1");
  if ((n = ox_attr_ints(X, "pads", 6, tmp)) >= 0) {
    if (n != 2 * ns) return ox_fail(X, "pads has %d values for %d spatial dims", n, ns);
    for (int i = 0; i < ns; i++) w->pb[i] = tmp[i], w->pe[i] = tmp[ns + i];
  }
  char ab[16];
  const char *ap = ox_attr_s(X, "auto_pad", "NOTSET", ab, sizeof ab);
  if (strcmp(ap, "NOTSET") == 0 || strcmp(ap, "VALID") == 0) {
    if (strcmp(ap, "VALID") == 0)
      for (int i = 0; i < ns; i++) w->pb[i] = w->pe[i] = 0;
    return MX_OK;
  }
  bool upper = strcmp(ap, "SAME_UPPER") == 0;
  if (transpose) { /* output = input x stride: the padding that gives it (adj added later) */
    if (!upper && strcmp(ap, "SAME_LOWER") != 0) return ox_fail(X, "auto_pad '%s'", ap);
    for (int i = 0; i < ns; i++) {
      int64_t in = x->shape[2 + i];
      if (in < 0) return ox_unsupported(X, "auto_pad SAME on an unknown spatial dim");
      int64_t total = w->s[i] * (in - 1) + ((w->k[i] - 1) * w->d[i] + 1) - in * w->s[i];
      if (total < 0) total = 0;
      w->pb[i] = upper ? total / 2 : total - total / 2;
      w->pe[i] = total - w->pb[i];
    }
    return MX_OK;
  }
  if (!upper && strcmp(ap, "SAME_LOWER") != 0) return ox_fail(X, "auto_pad '%s'", ap);
  for (int i = 0; i < ns; i++) {
    int64_t in = x->shape[2 + i];
    if (in < 0) return ox_unsupported(X, "auto_pad SAME on an unknown spatial dim");
    int64_t outd = (in + w->s[i] - 1) / w->s[i];
    int64_t total = (outd - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in;
    if (total < 0) total = 0;
    w->pb[i] = upper ? total / 2 : total - total / 2;
    w->pe[i] = total - w->pb[i];
  }
  return MX_OK;
}

static bool symmetric(const win *w) {
  for (int i = 0; i < w->ns; i++)
    if (w->pb[i] != w->pe[i]) return false;
  return true;
}

/* Pads asymmetric window pads explicitly (value: the pad value); the window's pads become 0. */
static ox_val *pad_explicit(ox *X, ox_val *x, win *w, double value) {
  if (symmetric(w)) return x;
  int r = x->d.ndim;
  int64_t pads[2 * MX_MAX_DIM] = {0};
  for (int i = 0; i < w->ns; i++) {
    pads[2 + i] = w->pb[i], pads[r + 2 + i] = w->pe[i];
    w->pb[i] = w->pe[i] = 0;
  }
  return ox_pad(X, x, "constant", pads, value);
}

/* ---- convolution ------------------------------------------------------------------------- */

/* Inference batch norm with constant statistics: y = x * scale + shift per channel
 * (axis 1), scale = gamma / sqrt(var + eps), shift = beta - mean * scale, both computed
 * now. rank: x's rank (the constants are shaped (C, 1, ...) for broadcasting), or 0 for
 * the plain (C) vectors. */
static int bn_affine(ox *X, const Onnx__NodeProto *bn, ox_val *const *p, int rank,
                     ox_val **scale, ox_val **shift) {
  double eps = 1e-5;
  for (size_t i = 0; i < bn->n_attribute; i++)
    if (bn->attribute[i]->name && strcmp(bn->attribute[i]->name, "epsilon") == 0)
      eps = bn->attribute[i]->f;
  ox_val *sd = ox_op1(X, "sqrt", ox_op1(X, "_plus_scalar", p[3], KV("scalar", ox_f2s(X, eps))), NULL);
  ox_val *sc = ox_op2(X, "div", p[0], sd, NULL);
  ox_val *sh = ox_op2(X, "sub", p[1], ox_op2(X, "mul", p[2], sc, NULL), NULL);
  if (!sc || !sh) return MX_EINVAL;
  if (rank > 1) {
    int64_t s[MX_MAX_DIM];
    s[0] = -1;
    for (int i = 1; i < rank - 1; i++) s[i] = 1;
    sc = ox_op1(X, "reshape", sc, KV("shape", ox_tup(X, rank - 1, s)));
    sh = ox_op1(X, "reshape", sh, KV("shape", ox_tup(X, rank - 1, s)));
    if (!sc || !sh) return MX_EINVAL;
  }
  *scale = sc, *shift = sh;
  return MX_OK;
}

/* the BatchNormalization that reads only this node's output, when it can be folded in */
static const Onnx__NodeProto *foldable_bn(ox *X, ox_val **bnp) {
  const Onnx__NodeProto *n = X->node;
  if (!n->n_output || !n->output[0]) return NULL;
  const Onnx__NodeProto *bn = ox_sole_consumer(X, n->output[0], "BatchNormalization");
  if (!bn || bn->n_input < 5 || bn->n_output != 1 || strcmp(bn->input[0], n->output[0]) != 0)
    return NULL;
  for (size_t i = 0; i < bn->n_attribute; i++)
    if (bn->attribute[i]->name && strcmp(bn->attribute[i]->name, "training_mode") == 0 &&
        bn->attribute[i]->i)
      return NULL;
  for (int k = 0; k < 4; k++) {
    ox_val *v = ox_lookup(X, bn->input[k + 1]);
    if (!v || !v->c || v->d.ndim != 1) return NULL;
    bnp[k] = v;
  }
  return bn;
}

static int cv_conv(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *x = in[0], *wt = in[1], *b = IN_OR(2, nin, in);
  if (wt->d.ndim < 3 || wt->d.shape[0] < 0) return ox_unsupported(X, "a weight of unknown shape");
  win w;
  if ((rc = window(X, &x->d, wt->d.shape, &w, false))) return rc;
  if (!(x = pad_explicit(X, x, &w, 0))) return MX_EINVAL;
  int64_t group = ox_attr_i(X, "group", 1);
  /* a BatchNormalization reading only this convolution goes into its weight and bias */
  ox_val *bnp[4];
  const Onnx__NodeProto *bn = wt->c && (!b || b->c) ? foldable_bn(X, bnp) : NULL;
  if (bn) {
    ox_val *sc, *sh, *sc_w, *dummy;
    if ((rc = bn_affine(X, bn, bnp, 0, &sc, &sh)) ||
        (rc = bn_affine(X, bn, bnp, wt->d.ndim + 1, &sc_w, &dummy)))
      return rc;
    wt = ox_op2(X, "mul", wt, sc_w, NULL);
    b = b ? ox_op2(X, "add", ox_op2(X, "mul", b, sc, NULL), sh, NULL) : sh;
    if (!wt || !b) return MX_EINVAL;
  }
  /* and a Relu reading only the result (after the folded BatchNormalization, if any) goes
   * into the convolution as its fused activation */
  const char *last = bn ? bn->output[0] : X->node->output[0];
  const Onnx__NodeProto *relu = last ? ox_sole_consumer(X, last, "Relu") : NULL;
  if (relu && relu->n_output != 1) relu = NULL;
  ox_val *ins[3] = {x, wt, b};
  ox_val *y = ox_op(X, "Convolution", b ? 3 : 2, ins, KV("kernel", ox_tup(X, w.ns, w.k),
      "stride", ox_tup(X, w.ns, w.s), "dilate", ox_tup(X, w.ns, w.d), "pad", ox_tup(X, w.ns, w.pb),
      "num_filter", ox_str(X, "%lld", (long long)wt->d.shape[0]),
      "num_group", ox_str(X, "%lld", (long long)group), "no_bias", b ? "False" : "True",
      "act_type", relu ? "relu" : "none"));
  if (!y) return MX_EINVAL;
  if (relu) {
    /* the values ONNX names before the Relu are the unactivated ones: only fold when the
     * convolution's (and BN's) output has no other reader, which sole_consumer made sure */
    if ((rc = ox_skip(X, relu, y))) return rc;
    if (bn) { /* BN's output is read only by the Relu: bind it to the same node */
      if ((rc = ox_skip(X, bn, y))) return rc;
    }
    return ox_done(X, y, out);
  }
  if (bn && (rc = ox_skip(X, bn, y))) return rc;
  return ox_done(X, y, out);
}

static int cv_conv_transpose(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *x = in[0], *wt = in[1], *b = IN_OR(2, nin, in);
  if (wt->d.ndim < 3 || wt->d.shape[1] < 0) return ox_unsupported(X, "a weight of unknown shape");
  win w;
  if ((rc = window(X, &x->d, wt->d.shape, &w, true))) return rc;
  int64_t group = ox_attr_i(X, "group", 1), adj[3] = {0, 0, 0}, os[3];
  int n = ox_attr_ints(X, "output_padding", 3, adj);
  if (n == -2) return MX_EINVAL;
  if (n >= 0 && n != w.ns) return ox_fail(X, "output_padding has %d values", n);
  if ((n = ox_attr_ints(X, "output_shape", 3, os)) >= 0) {
    /* total padding from the asked output size (ONNX: SAME_UPPER-style split) */
    if (n != w.ns) return ox_unsupported(X, "output_shape with batch/channel dims");
    for (int i = 0; i < w.ns; i++) {
      int64_t in_d = x->d.shape[2 + i];
      if (in_d < 0) return ox_unsupported(X, "output_shape on an unknown dim");
      int64_t total = w.s[i] * (in_d - 1) + adj[i] + ((w.k[i] - 1) * w.d[i] + 1) - os[i];
      if (total < 0) { /* a larger output: the extra rows of MXNet's adj */
        adj[i] += -total;
        total = 0;
        if (adj[i] >= w.s[i] && adj[i] >= w.d[i])
          return ox_unsupported(X, "output_shape larger than the stride allows");
      }
      w.pb[i] = total / 2, w.pe[i] = total - total / 2;
    }
  }
  /* MXNet's Deconvolution pads symmetrically: a larger end pad is cropped from the output */
  int64_t crop_e[3] = {0, 0, 0};
  for (int i = 0; i < w.ns; i++) {
    if (w.pe[i] < w.pb[i]) { /* extra on the begin side: pad less, then crop the begin */
      return ox_unsupported(X, "ConvTranspose pads larger at the begin than at the end");
    }
    crop_e[i] = w.pe[i] - w.pb[i];
  }
  ox_val *ins[3] = {x, wt, b};
  ox_val *y = ox_op(X, "Deconvolution", b ? 3 : 2, ins, KV("kernel", ox_tup(X, w.ns, w.k),
      "stride", ox_tup(X, w.ns, w.s), "dilate", ox_tup(X, w.ns, w.d), "pad", ox_tup(X, w.ns, w.pb),
      "adj", ox_tup(X, w.ns, adj), "num_filter", ox_str(X, "%lld", (long long)(wt->d.shape[1] * group)),
      "num_group", ox_str(X, "%lld", (long long)group), "no_bias", b ? "False" : "True"));
  if (!y) return MX_EINVAL;
  bool crop = false;
  for (int i = 0; i < w.ns; i++) crop = crop || crop_e[i];
  if (crop) {
    if (!ox_known(&y->d)) return ox_unsupported(X, "cropping an output of unknown dims");
    int64_t bgn[MX_MAX_DIM] = {0}, end[MX_MAX_DIM];
    for (int i = 0; i < y->d.ndim; i++) end[i] = y->d.shape[i];
    for (int i = 0; i < w.ns; i++) end[2 + i] -= crop_e[i];
    y = ox_op1(X, "slice", y, KV("begin", ox_tup(X, y->d.ndim, bgn), "end", ox_tup(X, y->d.ndim, end)));
  }
  return ox_done(X, y, out);
}

/* ---- pooling ------------------------------------------------------------------------------ */

/* MaxPool with dilations (luamx's Pooling has none): the input padded with -inf, then,
 * one spatial axis at a time (a window's maximum is the maximum over each axis in turn),
 * the maximum of the k strided slices at the dilated offsets along that axis. */
static int dilated_max(ox *X, ox_val *x, const win *w, bool ceil_mode, ox_val **out) {
  int r = x->d.ndim, ns = w->ns;
  if (!ox_known(&x->d)) return ox_unsupported(X, "dilated pooling over dims known only at run time");
  int64_t pads[2 * MX_MAX_DIM] = {0}, o[3], nk = 0;
  bool padded = false;
  for (int i = 0; i < ns; i++) {
    int64_t in_p = x->d.shape[2 + i] + w->pb[i] + w->pe[i], span = (w->k[i] - 1) * w->d[i] + 1;
    if (in_p < span) return ox_fail(X, "the dilated window (%lld) is larger than the padded input (%lld)",
                                    (long long)span, (long long)in_p);
    o[i] = ceil_mode ? (in_p - span + w->s[i] - 1) / w->s[i] + 1 : (in_p - span) / w->s[i] + 1;
    int64_t extra = (o[i] - 1) * w->s[i] + span - in_p; /* ceil mode's last window */
    pads[2 + i] = w->pb[i], pads[r + 2 + i] = w->pe[i] + (extra > 0 ? extra : 0);
    padded = padded || pads[2 + i] || pads[r + 2 + i];
    nk += w->k[i];
  }
  if (nk > 4096) return ox_unsupported(X, "a dilated window %lld elements wide", (long long)nk);
  int dt = x->d.dtype;
  if (padded && dt != MX_F32 && dt != MX_F64 && dt != MX_F16 && dt != MX_BF16)
    return ox_unsupported(X, "padded dilated pooling of %s", mx_dtype_name(dt));
  ox_val *cur = padded ? ox_pad(X, x, "constant", pads, -INFINITY) : x;
  for (int i = 0; cur && i < ns; i++) {
    ox_val *acc = NULL;
    for (int64_t off = 0; off < w->k[i]; off++) {
      int64_t b[MX_MAX_DIM], e[MX_MAX_DIM], st[MX_MAX_DIM];
      for (int j = 0; j < r; j++) b[j] = 0, e[j] = cur->d.shape[j], st[j] = 1;
      b[2 + i] = off * w->d[i], e[2 + i] = b[2 + i] + (o[i] - 1) * w->s[i] + 1, st[2 + i] = w->s[i];
      ox_val *sl = ox_op1(X, "slice", cur, KV("begin", ox_tup(X, r, b), "end", ox_tup(X, r, e),
                                               "step", ox_tup(X, r, st)));
      acc = acc ? ox_op2(X, "maximum", acc, sl, NULL) : sl;
      if (!acc) return MX_EINVAL;
    }
    cur = acc;
  }
  return ox_done(X, cur, out);
}

static int pool(ox *X, int nin, ox_val **in, int nout, ox_val **out, const char *type) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  if (nout > 1) return ox_unsupported(X, "MaxPool's indices output");
  ox_val *x = in[0];
  win w;
  if ((rc = window(X, &x->d, NULL, &w, false))) return rc;
  bool ceil_mode = ox_attr_i(X, "ceil_mode", 0) != 0;
  bool count_pad = ox_attr_i(X, "count_include_pad", 0) != 0;
  bool is_max = strcmp(type, "max") == 0;
  for (int i = 0; i < w.ns; i++)
    if (w.d[i] != 1) {
      if (!is_max) return ox_unsupported(X, "%s pooling with dilations != 1", type);
      return dilated_max(X, x, &w, ceil_mode, out);
    }
  if (!symmetric(&w) && !is_max && !count_pad && strcmp(type, "avg") == 0) {
    /* an average of the real elements only: window sums over the zero-padded input over
     * window counts of a padded constant of ones (folded now) */
    win w2 = w;
    ox_val *ones = ox_op1(X, "ones_like", x, NULL);
    ox_val *xs = pad_explicit(X, x, &w, 0), *os = pad_explicit(X, ones, &w2, 0);
    if (!xs || !os) return MX_EINVAL;
    const char *kv[] = {"kernel", ox_tup(X, w.ns, w.k), "stride", ox_tup(X, w.ns, w.s), "pad",
                        ox_tup(X, w.ns, w.pb), "pool_type", "sum", "pooling_convention",
                        ceil_mode ? "full" : "valid", NULL};
    return ox_done(X, ox_op2(X, "div", ox_op1(X, "Pooling", xs, kv), ox_op1(X, "Pooling", os, kv), NULL), out);
  }
  if (!symmetric(&w)) {
    if (!is_max && !count_pad) return ox_unsupported(X, "asymmetric pads with count_include_pad = 0");
    if (!(x = pad_explicit(X, x, &w, is_max ? -INFINITY : 0))) return MX_EINVAL;
  }
  const char *kv[] = {"kernel", ox_tup(X, w.ns, w.k), "stride", ox_tup(X, w.ns, w.s),
                      "pad", ox_tup(X, w.ns, w.pb), "pool_type", type,
                      "pooling_convention", ceil_mode ? "full" : "valid",
                      "count_include_pad", count_pad ? "True" : "False",
                      strcmp(type, "lp") == 0 ? "p_value" : NULL,
                      ox_str(X, "%lld", (long long)ox_attr_i(X, "p", 2)), NULL};
  return ox_done(X, ox_op1(X, "Pooling", x, kv), out);
}
static int cv_maxpool(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return pool(X, nin, in, nout, out, "max");
}
static int cv_avgpool(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return pool(X, nin, in, nout, out, "avg");
}
static int cv_lppool(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return pool(X, nin, in, nout, out, "lp");
}

static int global_pool(ox *X, int nin, ox_val **in, ox_val **out, const char *type) {
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  int ns = in[0]->d.ndim - 2;
  if (ns < 1 || ns > 3) return ox_unsupported(X, "%d spatial dims", ns);
  int64_t k[3] = {1, 1, 1};
  return ox_done(X, ox_op1(X, "Pooling", in[0], KV("kernel", ox_tup(X, ns, k), "pool_type", type,
                                                 "global_pool", "True")), out);
}
static int cv_global_avg(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return global_pool(X, nin, in, out, "avg");
}
static int cv_global_max(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  return global_pool(X, nin, in, out, "max");
}

/* ---- normalisation -------------------------------------------------------------------------- */

static int cv_batchnorm(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 5);
  if (rc) return rc;
  if (ox_attr_i(X, "training_mode", 0) || nout > 1) {
    /* the batch's statistics over every axis but 1, and the updated running ones */
    ox_val *x = in[0];
    int r = x->d.ndim;
    int64_t axes[MX_MAX_DIM], s[MX_MAX_DIM];
    int na = 0;
    for (int i = 0; i < r; i++) {
      if (i != 1) axes[na++] = i;
      s[i] = i == 1 ? -1 : 1;
    }
    const char *ax = ox_tup(X, na, axes), *bs = ox_tup(X, r, s);
    double eps = ox_attr_f(X, "epsilon", 1e-5), mom = ox_attr_f(X, "momentum", 0.9);
    ox_val *m = ox_op1(X, "mean", x, KV("axis", ax));
    ox_val *dv = ox_op2(X, "sub", x, ox_op1(X, "reshape", m, KV("shape", bs)), NULL);
    ox_val *v = ox_op1(X, "mean", ox_op1(X, "square", dv, NULL), KV("axis", ax));
    ox_val *inv = ox_op1(X, "rsqrt", ox_op1(X, "_plus_scalar", v, KV("scalar", ox_f2s(X, eps))), NULL);
    ox_val *sc = ox_op1(X, "reshape", ox_op2(X, "mul", in[1], inv, NULL), KV("shape", bs));
    ox_val *y = ox_op2(X, "add", ox_op2(X, "mul", dv, sc, NULL), ox_op1(X, "reshape", in[2], KV("shape", bs)), NULL);
    if (!y) return MX_EINVAL;
    out[0] = y;
    const char *a = ox_f2s(X, mom), *b = ox_f2s(X, 1 - mom);
    if (nout > 1 && !(out[1] = ox_op2(X, "add", ox_op1(X, "_mul_scalar", in[3], KV("scalar", a)),
                                      ox_op1(X, "_mul_scalar", m, KV("scalar", b)), NULL)))
      return MX_EINVAL;
    if (nout > 2 && !(out[2] = ox_op2(X, "add", ox_op1(X, "_mul_scalar", in[4], KV("scalar", a)),
                                      ox_op1(X, "_mul_scalar", v, KV("scalar", b)), NULL)))
      return MX_EINVAL;
    return MX_OK;
  }
  if (in[1]->c && in[2]->c && in[3]->c && in[4]->c && in[0]->d.ndim >= 2) {
    ox_val *sc, *sh;
    if ((rc = bn_affine(X, X->node, in + 1, in[0]->d.ndim, &sc, &sh))) return rc;
    return ox_done(X, ox_op2(X, "add", ox_op2(X, "mul", in[0], sc, NULL), sh, NULL), out);
  }
  return ox_done(X, ox_op(X, "BatchNorm", 5, in, KV("eps", ox_f2s(X, ox_attr_f(X, "epsilon", 1e-5)),
      "fix_gamma", "False", "use_global_stats", "True", "axis", "1")), out);
}

static int cv_instancenorm(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 3);
  if (rc) return rc;
  return ox_done(X, ox_op(X, "InstanceNorm", 3, in, KV("eps", ox_f2s(X, ox_attr_f(X, "epsilon", 1e-5)))), out);
}

static int cv_layernorm(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  if (nout > 1) return ox_layernorm_stats(X, nin, in, nout, out);
  ox_val *x = in[0], *g = in[1], *b = IN_OR(2, nin, in);
  int r = x->d.ndim;
  int64_t axis = ox_attr_i(X, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return ox_fail(X, "axis out of range");
  if (!b) {
    if (!(b = ox_op1(X, "zeros_like", g, NULL))) return MX_EINVAL;
  }
  const char *eps = ox_f2s(X, ox_attr_f(X, "epsilon", 1e-5));
  if (axis == r - 1)
    return ox_done(X, ox_op(X, "LayerNorm", 3, (ox_val *[]){x, g, b}, KV("axis", "-1", "eps", eps)), out);
  /* normalising over several trailing axes: merge them into one */
  if (!ox_known(&x->d)) return ox_unsupported(X, "LayerNormalization over axes of unknown dims");
  int64_t s[MX_MAX_DIM], m = 1;
  for (int i = 0; i < axis; i++) s[i] = x->d.shape[i];
  for (int i = (int)axis; i < r; i++) m *= x->d.shape[i];
  s[axis] = m;
  ox_val *xv = ox_op1(X, "reshape", x, KV("shape", ox_tup(X, (int)axis + 1, s)));
  ox_val *gv = ox_op1(X, "reshape", g, KV("shape", ox_tup(X, 1, &m)));
  ox_val *bv = ox_op1(X, "reshape", b, KV("shape", ox_tup(X, 1, &m)));
  if (!xv || !gv || !bv) return MX_EINVAL;
  ox_val *y = ox_op(X, "LayerNorm", 3, (ox_val *[]){xv, gv, bv}, KV("axis", "-1", "eps", eps));
  return ox_done(X, y ? ox_op1(X, "reshape", y, KV("shape", ox_tup(X, r, x->d.shape))) : NULL, out);
}

static int cv_lrn(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  return ox_done(X, ox_op1(X, "LRN", in[0], KV("nsize", ox_str(X, "%lld", (long long)ox_attr_i(X, "size", 1)),
      "alpha", ox_f2s(X, ox_attr_f(X, "alpha", 1e-4)), "beta", ox_f2s(X, ox_attr_f(X, "beta", 0.75)),
      "knorm", ox_f2s(X, ox_attr_f(X, "bias", 1.0)))), out);
}

/* ---- products ------------------------------------------------------------------------------- */

static int cv_gemm(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *a = in[0], *b = in[1], *c = IN_OR(2, nin, in);
  double alpha = ox_attr_f(X, "alpha", 1.0), beta = ox_attr_f(X, "beta", 1.0);
  bool ta = ox_attr_i(X, "transA", 0) != 0, tb = ox_attr_i(X, "transB", 0) != 0;
  if (a->d.ndim != 2 || b->d.ndim != 2) return ox_fail(X, "A and B must be 2-D");
  int64_t n = tb ? b->d.shape[0] : b->d.shape[1];
  /* the fast path: FullyConnected (x W^T + bias) with a 1-D bias */
  bool bias_ok = !c || (beta == 1.0 && c->d.ndim >= 1 && c->d.shape[c->d.ndim - 1] == n &&
                        (c->d.ndim == 1 || (c->d.ndim == 2 && c->d.shape[0] == 1)));
  if (!ta && alpha == 1.0 && bias_ok && n >= 0) {
    ox_val *w = tb ? b : ox_op1(X, "transpose", b, NULL);
    ox_val *bias = c && c->d.ndim == 2 ? ox_op1(X, "reshape", c, KV("shape", ox_tup(X, 1, &n))) : c;
    ox_val *ins[3] = {a, w, bias};
    return ox_done(X, ox_op(X, "FullyConnected", c ? 3 : 2, ins, KV("num_hidden",
        ox_str(X, "%lld", (long long)n), "no_bias", c ? "False" : "True", "flatten", "False")), out);
  }
  ox_val *y = ox_op2(X, "dot", a, b, KV("transpose_a", ta ? "True" : "False",
                                        "transpose_b", tb ? "True" : "False"));
  if (y && alpha != 1.0) y = ox_op1(X, "_mul_scalar", y, KV("scalar", ox_f2s(X, alpha)));
  if (y && c && beta != 0.0) {
    ox_val *cc = beta == 1.0 ? c : ox_op1(X, "_mul_scalar", c, KV("scalar", ox_f2s(X, beta)));
    y = ox_op2(X, "add", y, cc, NULL);
  }
  return ox_done(X, y, out);
}

static int cv_matmul(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *a = in[0], *b = in[1];
  if (a->d.ndim == 2 && b->d.ndim == 2) return ox_done(X, ox_op2(X, "dot", a, b, NULL), out);
  /* (..., K) x constant (K, N): a FullyConnected over the last axis */
  if (b->c && b->d.ndim == 2 && a->d.ndim > 2 && !a->c) {
    ox_val *w = ox_op1(X, "transpose", b, NULL);
    ox_val *ins[2] = {a, w};
    return ox_done(X, ox_op(X, "FullyConnected", 2, ins, KV("num_hidden",
        ox_str(X, "%lld", (long long)b->d.shape[1]), "no_bias", "True", "flatten", "False")), out);
  }
  return ox_done(X, ox_op2(X, "matmul", a, b, NULL), out);
}

/* ---- integer and quantised products: computed in float32 (exact while the sums stay
 * below 2^24, as for 8-bit data and the kernel sizes of real models) --------------------- */

/* v - zp as float32 (zp: a scalar, or per axis-0 channel shaped (C, 1, ...) for rank r) */
static ox_val *centered(ox *X, ox_val *v, ox_val *zp, int r) {
  ox_val *f = ox_cast(X, v, MX_F32);
  if (!zp) return f;
  ox_val *z = ox_cast(X, zp, MX_F32);
  if (z && z->d.ndim == 1 && z->d.shape[0] > 1 && r > 1) {
    int64_t s[MX_MAX_DIM];
    s[0] = -1;
    for (int i = 1; i < r; i++) s[i] = 1;
    z = ox_op1(X, "reshape", z, KV("shape", ox_tup(X, r, s)));
  }
  return ox_op2(X, "sub", f, z, NULL);
}

static ox_val *requantize(ox *X, ox_val *acc, ox_val *sa, ox_val *sb, ox_val *sy, ox_val *zy) {
  ox_val *m = ox_op2(X, "div", ox_op2(X, "mul", ox_cast(X, sa, MX_F32), ox_cast(X, sb, MX_F32), NULL),
                     ox_cast(X, sy, MX_F32), NULL);
  if (m && m->d.ndim == 1 && acc && acc->d.ndim > 2) { /* per output channel (axis 1) */
    int64_t s[MX_MAX_DIM];
    for (int i = 0; i < acc->d.ndim - 1; i++) s[i] = i == 0 ? -1 : 1;
    m = ox_op1(X, "reshape", m, KV("shape", ox_tup(X, acc->d.ndim - 1, s)));
  }
  ox_val *q = ox_round_even(X, ox_op2(X, "mul", acc, m, NULL));
  int qt = zy ? zy->d.dtype : MX_U8;
  if (zy) q = ox_op2(X, "add", q, ox_cast(X, zy, MX_F32), NULL);
  q = ox_op1(X, "clip", q, KV("a_min", qt == MX_U8 ? "0" : "-128", "a_max", qt == MX_U8 ? "255" : "127"));
  return ox_cast(X, q, qt);
}

static int cv_conv_integer(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *ins[2] = {centered(X, in[0], IN_OR(2, nin, in), 0),
                    centered(X, in[1], IN_OR(3, nin, in), in[1]->d.ndim)};
  ox_val *y;
  if (!ins[0] || !ins[1] || (rc = cv_conv(X, 2, ins, nout, &y))) return rc ? rc : MX_EINVAL;
  return ox_done(X, ox_cast(X, y, MX_I32), out);
}

static int cv_matmul_integer(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 2);
  if (rc) return rc;
  ox_val *ins[2] = {centered(X, in[0], IN_OR(2, nin, in), 0), centered(X, in[1], IN_OR(3, nin, in), 0)};
  ox_val *y;
  if (!ins[0] || !ins[1] || (rc = cv_matmul(X, 2, ins, nout, &y))) return rc ? rc : MX_EINVAL;
  return ox_done(X, ox_cast(X, y, MX_I32), out);
}

static int cv_qlinear_conv(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 8);
  if (rc) return rc;
  ox_val *ins[2] = {centered(X, in[0], in[2], 0), centered(X, in[3], in[5], in[3]->d.ndim)};
  ox_val *acc;
  if (!ins[0] || !ins[1] || (rc = cv_conv(X, 2, ins, nout, &acc))) return rc ? rc : MX_EINVAL;
  ox_val *b = IN_OR(8, nin, in);
  if (b) {
    int64_t s[MX_MAX_DIM];
    for (int i = 0; i < acc->d.ndim - 1; i++) s[i] = i == 0 ? -1 : 1;
    acc = ox_op2(X, "add", acc, ox_op1(X, "reshape", ox_cast(X, b, MX_F32),
                                       KV("shape", ox_tup(X, acc->d.ndim - 1, s))), NULL);
  }
  return ox_done(X, requantize(X, acc, in[1], in[4], in[6], in[7]), out);
}

static int cv_qlinear_matmul(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  int rc = ox_need(X, nin, in, 8);
  if (rc) return rc;
  ox_val *ins[2] = {centered(X, in[0], in[2], 0), centered(X, in[3], in[5], 0)};
  ox_val *acc;
  if (!ins[0] || !ins[1] || (rc = cv_matmul(X, 2, ins, nout, &acc))) return rc ? rc : MX_EINVAL;
  return ox_done(X, requantize(X, acc, in[1], in[4], in[6], in[7]), out);
}

/* ---- resizing -------------------------------------------------------------------------------- */

/* One resized axis as taps: output index j reads source indices idx[k][j] with weights
 * w[k][j] (k < ntaps), by ONNX's formulas (onnx/reference/ops/op_resize.py): the
 * coordinate transformation, then nearest rounding, linear or cubic coefficients, edge
 * indices clamped (cubic's exclude_outside drops them and renormalises). */
typedef struct taps { int n; double *idx[4], *w[4]; } taps;

static void taps_free(taps *t) {
  for (int k = 0; k < 4; k++) free(t->idx[k]), free(t->w[k]);
}

static int make_taps(ox *X, int64_t in, int64_t outn, double outf, double scale, const char *mode,
                     const char *coord, const char *nearest, double cubic_a, bool exclude,
                     taps *t) {
  memset(t, 0, sizeof *t);
  t->n = strcmp(mode, "nearest") == 0 ? 1 : strcmp(mode, "linear") == 0 ? 2 : 4;
  for (int k = 0; k < t->n; k++) {
    t->idx[k] = malloc(sizeof(double) * (size_t)(outn ? outn : 1));
    t->w[k] = malloc(sizeof(double) * (size_t)(outn ? outn : 1));
    if (!t->idx[k] || !t->w[k]) return mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  for (int64_t j = 0; j < outn; j++) {
    double x;
    if (strcmp(coord, "half_pixel") == 0) x = ((double)j + 0.5) / scale - 0.5;
    else if (strcmp(coord, "pytorch_half_pixel") == 0) x = outn > 1 ? ((double)j + 0.5) / scale - 0.5 : 0;
    /* the reference divides by the unrounded output length (in x scale) */
    else if (strcmp(coord, "align_corners") == 0) x = outf > 1 ? (double)j * (double)(in - 1) / (outf - 1) : 0;
    else if (strcmp(coord, "asymmetric") == 0) x = (double)j / scale;
    else if (strcmp(coord, "tf_half_pixel_for_nn") == 0) x = ((double)j + 0.5) / scale;
    else return ox_unsupported(X, "coordinate_transformation_mode %s", coord);
    if (t->n == 1) {
      double r;
      if (strcmp(nearest, "floor") == 0) r = floor(x);
      else if (strcmp(nearest, "ceil") == 0) r = ceil(x);
      else if (strcmp(nearest, "round_prefer_ceil") == 0) r = floor(x + 0.5);
      else r = ceil(x - 0.5); /* round_prefer_floor */
      t->idx[0][j] = r < 0 ? 0 : r > (double)(in - 1) ? (double)(in - 1) : r;
      t->w[0][j] = 1;
      continue;
    }
    double x0 = floor(x), f = x - x0, c[4];
    int base = t->n == 2 ? 0 : -1;
    if (t->n == 2) {
      c[0] = 1 - f, c[1] = f;
    } else {
      double A = cubic_a, s1 = f + 1, s0 = f, u0 = 1 - f, u1 = 2 - f;
      c[0] = ((A * s1 - 5 * A) * s1 + 8 * A) * s1 - 4 * A;
      c[1] = ((A + 2) * s0 - (A + 3)) * s0 * s0 + 1;
      c[2] = ((A + 2) * u0 - (A + 3)) * u0 * u0 + 1;
      c[3] = ((A * u1 - 5 * A) * u1 + 8 * A) * u1 - 4 * A;
    }
    double sum = 0;
    for (int k = 0; k < t->n; k++) {
      double i = x0 + base + k;
      if (exclude && (i < 0 || i > (double)(in - 1))) c[k] = 0;
      sum += c[k];
      t->idx[k][j] = i < 0 ? 0 : i > (double)(in - 1) ? (double)(in - 1) : i;
    }
    for (int k = 0; k < t->n; k++) t->w[k][j] = exclude && sum != 0 ? c[k] / sum : c[k];
  }
  return MX_OK;
}

/* x resized along `axis` by taps: sum over k of take(x, idx_k) * w_k */
static ox_val *apply_taps(ox *X, ox_val *x, int axis, int64_t outn, const taps *t) {
  int r = x->d.ndim;
  ox_val *acc = NULL;
  int64_t ws[MX_MAX_DIM];
  for (int i = 0; i < r; i++) ws[i] = i == axis ? outn : 1;
  for (int k = 0; k < t->n; k++) {
    double *pos = malloc(sizeof(double) * (size_t)(outn ? outn : 1));
    if (!pos) return NULL;
    for (int64_t j = 0; j < outn; j++) pos[j] = t->idx[k][j] + 1; /* 1-based */
    ox_val *p = ox_const_vec(X, MX_I64, (int)outn, pos);
    free(pos);
    ox_val *g = ox_op2(X, "take", x, p, KV("axis", ox_str(X, "%d", axis)));
    if (t->n > 1) {
      ox_val *w = ox_const_vec(X, x->d.dtype, (int)outn, t->w[k]);
      w = ox_op1(X, "reshape", w, KV("shape", ox_tup(X, r, ws)));
      g = ox_op2(X, "mul", g, w, NULL);
    }
    acc = acc ? ox_op2(X, "add", acc, g, NULL) : g;
    if (!acc) return NULL;
  }
  return acc;
}

static int resize(ox *X, ox_val *x, const double *scales, const int64_t *sizes, const char *mode,
                  const char *coord, const char *nearest, ox_val **out) {
  const mx_desc *d = &x->d;
  int r = d->ndim;
  if (!ox_known(d)) return ox_unsupported(X, "Resize of a value with unknown dims");
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
    return ox_unsupported(X, "resize mode %s", mode);
  if (strcmp(coord, "tf_crop_and_resize") == 0) return ox_unsupported(X, "tf_crop_and_resize");
  int64_t on[MX_MAX_DIM];
  double sc[MX_MAX_DIM];
  for (int i = 0; i < r; i++)
    if (d->shape[i] < 1) return ox_unsupported(X, "resizing a value with an empty axis");
  for (int i = 0; i < r; i++) {
    if (sizes) on[i] = sizes[i], sc[i] = (double)sizes[i] / (double)d->shape[i];
    else on[i] = (int64_t)floor((double)d->shape[i] * scales[i]), sc[i] = scales[i];
  }
  /* the common case, nearest x k on H and W with floor-like rounding: UpSampling */
  if (strcmp(mode, "nearest") == 0 && r == 4 && on[0] == d->shape[0] && on[1] == d->shape[1] &&
      on[2] % d->shape[2] == 0 && on[2] / d->shape[2] > 1 && on[2] / d->shape[2] == on[3] / d->shape[3] &&
      on[3] % d->shape[3] == 0 && sc[2] == sc[3] && sc[2] == floor(sc[2]) &&
      ((strcmp(coord, "asymmetric") == 0 && strcmp(nearest, "floor") == 0) ||
       ((strcmp(coord, "half_pixel") == 0 || strcmp(coord, "pytorch_half_pixel") == 0) &&
        strncmp(nearest, "round_prefer", 12) == 0)) && d->dtype == MX_F32)
    return ox_done(X, ox_op1(X, "UpSampling", x, KV("scale", ox_str(X, "%lld", (long long)(on[2] / d->shape[2])),
                                                  "sample_type", "nearest", "num_args", "1")), out);
  double cubic_a = ox_attr_f(X, "cubic_coeff_a", -0.75);
  bool exclude = ox_attr_i(X, "exclude_outside", 0) != 0;
  ox_val *v = x;
  for (int i = 0; i < r && v; i++) {
    if (on[i] == d->shape[i] && sc[i] == 1.0) continue;
    taps t;
    double outf = sizes ? (double)on[i] : (double)d->shape[i] * sc[i];
    int rc = make_taps(X, d->shape[i], on[i], outf, sc[i], mode, coord, nearest, cubic_a, exclude, &t);
    if (!rc) v = apply_taps(X, v, i, on[i], &t);
    taps_free(&t);
    if (rc) return rc;
  }
  if (v == x) v = ox_op1(X, "copy", x, NULL);
  return ox_done(X, v, out);
}

static int cv_resize(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  char mb[16], cb[32], nb[32];
  const char *mode = ox_attr_s(X, "mode", "nearest", mb, sizeof mb);
  const char *coord = ox_attr_s(X, "coordinate_transformation_mode",
                                X->opset >= 11 ? "half_pixel" : "asymmetric", cb, sizeof cb);
  const char *nearest = ox_attr_s(X, "nearest_mode", X->opset >= 11 ? "round_prefer_floor" : "floor",
                                  nb, sizeof nb);
  double scales[MX_MAX_DIM];
  int64_t sizes[MX_MAX_DIM];
  int n = 0;
  ox_val *sc = X->opset >= 11 ? IN_OR(2, nin, in) : IN_OR(1, nin, in);
  ox_val *sz = X->opset >= 11 ? IN_OR(3, nin, in) : NULL;
  if (sz && (!sz->c || mx_tensor_size(sz->c) > 0)) {
    if ((rc = ox_ints(X, sz, "sizes", MX_MAX_DIM, sizes, &n))) return rc;
    if (n != in[0]->d.ndim) return ox_fail(X, "sizes has %d values", n);
    return resize(X, in[0], NULL, sizes, mode, coord, nearest, out);
  }
  if ((rc = ox_f64s(X, sc, "scales", MX_MAX_DIM, scales, &n))) return rc;
  if (n != in[0]->d.ndim) return ox_fail(X, "scales has %d values", n);
  return resize(X, in[0], scales, NULL, mode, coord, nearest, out);
}

static int cv_upsample(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  int rc = ox_need(X, nin, in, 1);
  if (rc) return rc;
  char mb[16];
  const char *mode = ox_attr_s(X, "mode", "nearest", mb, sizeof mb);
  double scales[MX_MAX_DIM];
  int n;
  const Onnx__AttributeProto *a = ox_attr(X, "scales");
  if (a) {
    n = (int)a->n_floats;
    for (int i = 0; i < n && i < MX_MAX_DIM; i++) scales[i] = a->floats[i];
  } else if ((rc = ox_f64s(X, IN_OR(1, nin, in), "scales", MX_MAX_DIM, scales, &n))) {
    return rc;
  }
  if (n != in[0]->d.ndim) return ox_fail(X, "scales has %d values", n);
  return resize(X, in[0], scales, NULL, strcmp(mode, "linear") == 0 ? "linear" : mode,
                "asymmetric", "floor", out);
}

const ox_conv_entry ox_ops_nn[] = {
    {"Conv", cv_conv}, {"ConvTranspose", cv_conv_transpose}, {"MaxPool", cv_maxpool},
    {"AveragePool", cv_avgpool}, {"LpPool", cv_lppool}, {"GlobalAveragePool", cv_global_avg},
    {"GlobalMaxPool", cv_global_max}, {"BatchNormalization", cv_batchnorm},
    {"InstanceNormalization", cv_instancenorm}, {"LayerNormalization", cv_layernorm},
    {"LRN", cv_lrn}, {"Gemm", cv_gemm}, {"MatMul", cv_matmul}, {"Resize", cv_resize},
    {"Upsample", cv_upsample}, {"ConvInteger", cv_conv_integer},
    {"MatMulInteger", cv_matmul_integer}, {"QLinearConv", cv_qlinear_conv},
    {"QLinearMatMul", cv_qlinear_matmul},
    {NULL, NULL}};
