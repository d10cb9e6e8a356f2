/* onnx_export_rnn.c — MXNet's fused RNN op (LSTM, GRU, vanilla RNN; layers and
 * directions) as ONNX LSTM / GRU / RNN nodes, one per layer. docs/onnx.md ("Export"). */
#include "onnx_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MXNet's fused RNN: one ONNX LSTM/GRU/RNN per layer, the packed parameter vector (a
 * constant) unpacked into W, R, B with ONNX's gate order; the layers chained through
 * (T, D, N, H) -> (T, N, D*H). */
int ex_rnn(ex *E, int id, int op, const void *p, const char *const *in, const char *const *out,
                  int nout) {
  char mb[16];
  const char *mode = ex_pstr(E, op, p, "mode", mb, sizeof mb);
  int G = strcmp(mode, "lstm") == 0 ? 4 : strcmp(mode, "gru") == 0 ? 3 : 1;
  static const int lstm[4] = {0, 3, 1, 2}, gru[3] = {1, 0, 2}, one[1] = {0};
  const int *from = G == 4 ? lstm : G == 3 ? gru : one; /* ONNX gate j <- luamx gate from[j] */
  int64_t H = ex_pint(E, op, p, "state_size", 0), L = ex_pint(E, op, p, "num_layers", 1);
  int D = ex_pbool(E, op, p, "bidirectional", false) ? 2 : 1;
  if (ex_pbool(E, op, p, "use_sequence_length", false)) return ex_fail(E, "RNN with sequence lengths");
  if (ex_pint(E, op, p, "projection_size", 0) > 0) return ex_fail(E, "LSTMP has no ONNX form");
  int oi;
  int src = mx_graph_node_input(E->g, id, 1, &oi);
  mx_tensor *P = mx_graph_node_value(E->g, src);
  if (!P) return ex_fail(E, "the RNN's parameters must be a constant (a parameter with a value)");
  const mx_desc *x = ex_in_desc(E, id, 0);
  int64_t I = x->shape[2];
  int dt = mx_tensor_dtype(P);
  const void *pp = mx_tensor_data(P);
  int64_t woff = 0, boff = 0;
  for (int64_t l = 0; l < L; l++) boff += D * G * H * ((l == 0 ? I : D * H) + H);
  const char *layer_in = in[0], *hs[16], *cs[16];
  if (L > 16) return ex_fail(E, "more than 16 layers");
  for (int64_t l = 0; l < L; l++) {
    int64_t inl = l == 0 ? I : D * H;
    int64_t ws[3] = {D, G * H, inl}, rs[3] = {D, G * H, H}, bs[2] = {D, 2 * G * H};
    mx_tensor *W, *R, *B;
    int rc = mx_tensor_new(3, ws, dt, MX_CPU, 0, &W);
    if (!rc) rc = mx_tensor_new(3, rs, dt, MX_CPU, 0, &R);
    if (!rc) rc = mx_tensor_new(2, bs, dt, MX_CPU, 0, &B);
    if (rc) return rc;
    for (int d = 0; d < D; d++) {
      for (int j = 0; j < G; j++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < inl; i++)
            mx_store_f64(mx_ptr(W), dt, ((d * G + j) * H + h) * inl + i,
                         mx_load_f64(pp, dt, woff + (from[j] * H + h) * inl + i));
      woff += G * H * inl;
      for (int j = 0; j < G; j++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < H; i++)
            mx_store_f64(mx_ptr(R), dt, ((d * G + j) * H + h) * H + i,
                         mx_load_f64(pp, dt, woff + (from[j] * H + h) * H + i));
      woff += G * H * H;
      for (int part = 0; part < 2; part++)
        for (int j = 0; j < G; j++)
          for (int64_t h = 0; h < H; h++)
            mx_store_f64(mx_ptr(B), dt, d * 2 * G * H + part * G * H + j * H + h,
                         mx_load_f64(pp, dt, boff + part * G * H + from[j] * H + h));
      boff += 2 * G * H;
    }
    const char *wn = ex_str(E, "%s_W%lld", mx_graph_node_name(E->g, id), (long long)l);
    const char *rn = ex_str(E, "%s_R%lld", mx_graph_node_name(E->g, id), (long long)l);
    const char *bn = ex_str(E, "%s_B%lld", mx_graph_node_name(E->g, id), (long long)l);
    rc = ex_init_tensor(E, wn, W);
    if (!rc) rc = ex_init_tensor(E, rn, R);
    if (!rc) rc = ex_init_tensor(E, bn, B);
    mx_tensor_release(W), mx_tensor_release(R), mx_tensor_release(B);
    if (rc) return rc;
    /* this layer's initial states: rows [l*D, (l+1)*D) of the state inputs */
    int64_t st = l * D, en = (l + 1) * D, ax = 0;
    const char *cst = ex_c_i64(E, 1, &st), *cen = ex_c_i64(E, 1, &en), *cax = ex_c_i64(E, 1, &ax);
    const char *h0 = ex_tmpname(E), *c0 = G == 4 ? ex_tmpname(E) : "";
    if (!cst || !cen || !cax) return MX_ENOMEM;
    if ((rc = ex_node(E, "Slice", 4, (const char *[]){in[2], cst, cen, cax}, 1, &h0, 0, NULL))) return rc;
    if (G == 4 && (rc = ex_node(E, "Slice", 4, (const char *[]){in[3], cst, cen, cax}, 1, &c0, 0, NULL)))
      return rc;
    const char *y = ex_tmpname(E);
    hs[l] = ex_tmpname(E), cs[l] = G == 4 ? ex_tmpname(E) : "";
    const char *ins[7] = {layer_in, wn, rn, bn, "", h0, c0};
    const char *outs[3] = {y, hs[l], cs[l]};
    attr a[4] = {AI("hidden_size", H), AS("direction", D == 2 ? "bidirectional" : "forward"),
                 AI("linear_before_reset", 1), AS("activations", "")};
    int na = 2;
    if (G == 3) na = 3;
    const char *ot = G == 4 ? "LSTM" : G == 3 ? "GRU" : "RNN";
    Onnx__NodeProto *node;
    if ((rc = ex_node(E, ot, G == 4 ? 7 : 6, ins, G == 4 ? 3 : 2, outs, na, a))) return rc;
    node = E->nodes[E->nn - 1];
    if (G == 1) { /* activations: one per direction */
      Onnx__AttributeProto *pa = ex_alloc(E, sizeof *pa);
      if (!pa) return MX_ENOMEM;
      onnx__attribute_proto__init(pa);
      pa->name = ex_str(E, "activations");
      pa->has_type = 1, pa->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
      pa->n_strings = (size_t)D, pa->strings = ex_alloc(E, sizeof(ProtobufCBinaryData) * (size_t)D);
      const char *f = strcmp(mode, "rnn_relu") == 0 ? "Relu" : "Tanh";
      for (int d = 0; d < D; d++) pa->strings[d].data = (uint8_t *)ex_str(E, "%s", f), pa->strings[d].len = 4;
      Onnx__AttributeProto **na2 = ex_alloc(E, sizeof(void *) * (node->n_attribute + 1));
      if (!na2) return MX_ENOMEM;
      for (size_t i = 0; i < node->n_attribute; i++) na2[i] = node->attribute[i];
      na2[node->n_attribute++] = pa;
      node->attribute = na2;
    }
    /* (T, D, N, H) -> (T, N, D*H) */
    const char *tr = ex_tmpname(E), *dst = l == L - 1 ? out[0] : ex_tmpname(E);
    int64_t perm[4] = {0, 2, 1, 3}, rs3[3] = {0, 0, -1};
    if ((rc = NODE1("Transpose", y, tr, AV("perm", 4, perm)))) return rc;
    const char *c3 = ex_c_i64(E, 3, rs3);
    if (!c3 || (rc = NODE2N("Reshape", tr, c3, dst))) return c3 ? rc : MX_ENOMEM;
    layer_in = dst;
  }
  for (int k = 1; k < nout && k < (G == 4 ? 3 : 2); k++) {
    const char **parts = k == 1 ? hs : cs;
    int rc = L == 1 ? NODE1N("Identity", parts[0], out[k])
                    : ex_node(E, "Concat", (int)L, parts, 1, &out[k], 1, (attr[]){AI("axis", 0)});
    if (rc) return rc;
  }
  return MX_OK;
}
