/* onnx_ops_rnn.c — ONNX's LSTM, GRU and RNN as the op table's fused `rnn` (MXNet's RNN):
 * the weights W, R, B (constants) are packed at import into MXNet's parameter vector
 * (docs/rnn.md) with the gates reordered (ONNX LSTM i,o,f,c -> i,f,g,o; GRU z,r,h ->
 * r,z,n), "reverse" runs forward over the time-flipped sequence, and the outputs are
 * reshaped to ONNX's (T, D, N, H) / (D, N, H). Supported: the default activations, no
 * peepholes, no clip, GRU with linear_before_reset = 1 (what PyTorch exports), sequence
 * lengths all equal to T. */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

enum { K_LSTM, K_GRU, K_RNN };

static int rnn(ox *X, int nin, ox_val **in, int nout, ox_val **out, int kind) {
  if (nin < 3 || !in[0] || !in[1] || !in[2]) return ox_fail(X, "X, W and R are required");
  ox_val *x = in[0], *W = in[1], *R = in[2], *B = IN_OR(3, nin, in), *seq = IN_OR(4, nin, in);
  ox_val *h0 = IN_OR(5, nin, in), *c0 = kind == K_LSTM ? IN_OR(6, nin, in) : NULL;
  if (kind == K_LSTM && IN_OR(7, nin, in)) {
    const mx_tensor *p = in[7]->c;
    double v = 0;
    for (int64_t i = 0; p && i < mx_tensor_size(p) && v == 0; i++) mx_tensor_get_f64((mx_tensor *)p, i, &v);
    if (!p || v != 0) return ox_unsupported(X, "LSTM peepholes (input P)");
  }
  if (!W->c || !R->c || (B && !B->c)) return ox_unsupported(X, "W, R and B must be a constant each");
  if (ox_attr(X, "activations") || ox_attr(X, "activation_alpha"))
    if (kind != K_RNN) return ox_unsupported(X, "activations other than the defaults");
  if (ox_attr(X, "clip")) return ox_unsupported(X, "clip");
  if (ox_attr_i(X, "input_forget", 0)) return ox_unsupported(X, "input_forget = 1");
  if (kind == K_GRU && !ox_attr_i(X, "linear_before_reset", 0))
    return ox_unsupported(X, "GRU with linear_before_reset = 0 (luamx's GRU is PyTorch's, = 1)");
  const char *mode = kind == K_LSTM ? "lstm" : kind == K_GRU ? "gru" : "rnn_tanh";
  if (kind == K_RNN) {
    const Onnx__AttributeProto *a = ox_attr(X, "activations");
    if (a && a->n_strings >= 1) {
      const ProtobufCBinaryData *s = &a->strings[0];
      if (s->len == 4 && memcmp(s->data, "Relu", 4) == 0) mode = "rnn_relu";
      else if (!(s->len == 4 && memcmp(s->data, "Tanh", 4) == 0))
        return ox_unsupported(X, "RNN activation other than Tanh or Relu");
      for (size_t k = 1; k < a->n_strings; k++)
        if (a->strings[k].len != s->len || memcmp(a->strings[k].data, s->data, s->len))
          return ox_unsupported(X, "different activations per direction");
    }
  }
  char db[16];
  const char *dir = ox_attr_s(X, "direction", "forward", db, sizeof db);
  bool bidi = strcmp(dir, "bidirectional") == 0, rev = strcmp(dir, "reverse") == 0;
  if (!bidi && !rev && strcmp(dir, "forward")) return ox_fail(X, "direction '%s'", dir);
  bool batch_first = ox_attr_i(X, "layout", 0) != 0;
  int G = kind == K_LSTM ? 4 : kind == K_GRU ? 3 : 1, D = bidi ? 2 : 1;
  const mx_desc *wd = &W->d, *rd = &R->d;
  if (wd->ndim != 3 || rd->ndim != 3 || wd->shape[0] != D || rd->shape[0] != D)
    return ox_fail(X, "W and R must be (%d, G*H, .)", D);
  int64_t H = ox_attr_i(X, "hidden_size", rd->shape[2]), I = wd->shape[2];
  if (wd->shape[1] != G * H || rd->shape[1] != G * H || rd->shape[2] != H)
    return ox_fail(X, "W (%lld) / R (%lld) do not fit hidden_size %lld", (long long)wd->shape[1],
                   (long long)rd->shape[1], (long long)H);
  if (B && (B->d.ndim != 2 || B->d.shape[0] != D || B->d.shape[1] != 2 * G * H))
    return ox_fail(X, "B must be (%d, %lld)", D, (long long)(2 * G * H));
  /* ONNX gate k of luamx's gate order */
  static const int lstm_perm[4] = {0, 2, 3, 1}, gru_perm[3] = {1, 0, 2}, rnn_perm[1] = {0};
  const int *perm = kind == K_LSTM ? lstm_perm : kind == K_GRU ? gru_perm : rnn_perm;
  int dt = W->d.dtype;
  int64_t P = D * G * H * (I + H + 2);
  mx_tensor *pt;
  int rc = mx_tensor_new(1, &P, dt, MX_CPU, 0, &pt);
  if (rc) return rc;
  void *pp = mx_ptr(pt);
  const void *wp = mx_tensor_data(W->c), *rp = mx_tensor_data(R->c);
  const void *bp = B ? mx_tensor_data(B->c) : NULL;
  int64_t o = 0;
  for (int d = 0; d < D; d++) { /* weights: i2h (G*H, I) then h2h (G*H, H) per direction */
    for (int g = 0; g < G; g++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < I; i++)
          mx_store_f64(pp, dt, o++, mx_load_f64(wp, dt, ((d * G + perm[g]) * H + h) * I + i));
    for (int g = 0; g < G; g++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < H; i++)
          mx_store_f64(pp, dt, o++, mx_load_f64(rp, dt, ((d * G + perm[g]) * H + h) * H + i));
  }
  for (int d = 0; d < D; d++) /* biases: i2h then h2h per direction (ONNX: Wb then Rb) */
    for (int part = 0; part < 2; part++)
      for (int g = 0; g < G; g++)
        for (int64_t h = 0; h < H; h++)
          mx_store_f64(pp, dt, o++, bp ? mx_load_f64(bp, dt, d * 2 * G * H + part * G * H +
                                                     perm[g] * H + h) : 0.0);
  ox_val *params = ox_const(X, pt);
  if (!params) return mx_err(MX_ENOMEM, "onnx: out of memory");
  if (batch_first) x = ox_op1(X, "transpose", x, KV("axes", "(1, 0, 2)"));
  if (!x || x->d.ndim != 3 || x->d.shape[0] < 0 || x->d.shape[1] < 0)
    return ox_unsupported(X, "an input of unknown (T, N)");
  int64_t T = x->d.shape[0], N = x->d.shape[1];
  if (seq) {
    int64_t lens[4096];
    int n;
    if ((rc = ox_ints(X, seq, "sequence_lens", 4096, lens, &n))) return rc;
    for (int i = 0; i < n; i++)
      if (lens[i] != T) return ox_unsupported(X, "sequence_lens shorter than the sequence");
  }
  int64_t ss[3] = {D, N, H};
  const char *sshape = ox_tup(X, 3, ss);
  if (batch_first) {
    if (h0) h0 = ox_op1(X, "transpose", h0, KV("axes", "(1, 0, 2)"));
    if (c0) c0 = ox_op1(X, "transpose", c0, KV("axes", "(1, 0, 2)"));
  }
  if (!h0) h0 = ox_op(X, "full", 0, NULL, KV("shape", sshape, "dtype", mx_dtype_name(dt), "value", "0"));
  if (kind == K_LSTM && !c0)
    c0 = ox_op(X, "full", 0, NULL, KV("shape", sshape, "dtype", mx_dtype_name(dt), "value", "0"));
  if (rev) x = ox_op1(X, "reverse", x, KV("axis", "(0,)"));
  ox_val *ins[4] = {x, params, h0, c0};
  ox_val *o3[3];
  int want = nout > 1 ? (kind == K_LSTM ? 3 : 2) : 1;
  if ((rc = ox_emit(X, "RNN", kind == K_LSTM ? 4 : 3, ins, KV("state_size", ox_str(X, "%lld", (long long)H),
      "num_layers", "1", "mode", mode, "bidirectional", bidi ? "True" : "False",
      "state_outputs", nout > 1 ? "True" : "False"), want, o3)))
    return rc;
  ox_val *y = o3[0];
  if (rev) y = ox_op1(X, "reverse", y, KV("axis", "(0,)"));
  int64_t s4[4] = {T, N, D, H};
  y = ox_op1(X, "reshape", y, KV("shape", ox_tup(X, 4, s4)));
  y = ox_op1(X, "transpose", y, KV("axes", batch_first ? "(1, 0, 2, 3)" : "(0, 2, 1, 3)"));
  if (!y) return MX_EINVAL;
  out[0] = y;
  for (int k = 1; k < nout && k < want; k++) {
    ox_val *s = o3[k];
    if (batch_first) s = ox_op1(X, "transpose", s, KV("axes", "(1, 0, 2)"));
    if (!(out[k] = s)) return MX_EINVAL;
  }
  return MX_OK;
}

static int cv_lstm(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return rnn(X, nin, in, nout, out, K_LSTM);
}
static int cv_gru(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return rnn(X, nin, in, nout, out, K_GRU);
}
static int cv_rnn(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  return rnn(X, nin, in, nout, out, K_RNN);
}

const ox_conv_entry ox_ops_rnn[] = {
    {"LSTM", cv_lstm}, {"GRU", cv_gru}, {"RNN", cv_rnn}, {NULL, NULL}};

/* ---- sequences whose structure is known at import (positions are constants) --------------- */

static int seq_pos(ox *X, ox_val *p, int n, bool insert, int dflt, int *pos) {
  if (!p) {
    *pos = dflt;
    return MX_OK;
  }
  int64_t v;
  int k, rc = ox_ints(X, p, "position", 1, &v, &k);
  if (rc) return rc;
  if (v < 0) v += n;
  if (v < 0 || v > n - (insert ? 0 : 1)) return ox_fail(X, "position %lld out of range", (long long)v);
  *pos = (int)v;
  return MX_OK;
}

static bool is_seq(ox_val *v) { return v && v->is_seq; }

static int cv_seq_empty(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nin, (void)in, (void)nout;
  return (out[0] = ox_seq(X, 0, NULL)) ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
}

static int cv_seq_construct(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  for (int i = 0; i < nin; i++)
    if (!in[i] || in[i]->is_seq) return ox_fail(X, "input %d is not a tensor", i + 1);
  return (out[0] = ox_seq(X, nin, in)) ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
}

static int cv_seq_insert(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 2 || !is_seq(in[0]) || !in[1]) return ox_fail(X, "needs a sequence and a tensor");
  ox_val *s = in[0];
  int pos = 0, rc = seq_pos(X, IN_OR(2, nin, in), s->nseq, true, s->nseq, &pos);
  if (rc) return rc;
  ox_val *items[256];
  if (s->nseq >= 255) return ox_unsupported(X, "sequences longer than 255");
  for (int i = 0, k = 0; i <= s->nseq; i++) items[i] = i == pos ? in[1] : s->seq[k++];
  return (out[0] = ox_seq(X, s->nseq + 1, items)) ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
}

static int cv_seq_erase(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 1 || !is_seq(in[0])) return ox_fail(X, "needs a sequence");
  ox_val *s = in[0];
  if (s->nseq == 0) return ox_fail(X, "erasing from an empty sequence");
  int pos = 0, rc = seq_pos(X, IN_OR(1, nin, in), s->nseq, false, s->nseq - 1, &pos);
  if (rc) return rc;
  ox_val *items[256];
  for (int i = 0, k = 0; i < s->nseq; i++) if (i != pos) items[k++] = s->seq[i];
  return (out[0] = ox_seq(X, s->nseq - 1, items)) ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
}

static int cv_seq_at(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 2 || !is_seq(in[0])) return ox_fail(X, "needs a sequence and a position");
  int pos = 0, rc = seq_pos(X, in[1], in[0]->nseq, false, 0, &pos);
  if (rc) return rc;
  out[0] = in[0]->seq[pos];
  return MX_OK;
}

static int cv_seq_length(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 1 || !is_seq(in[0])) return ox_fail(X, "needs a sequence");
  return (out[0] = ox_scalar(X, MX_I64, in[0]->nseq)) ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
}

static int cv_concat_from_seq(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 1 || !is_seq(in[0]) || in[0]->nseq == 0) return ox_fail(X, "needs a non-empty sequence");
  ox_val *s = in[0];
  int64_t axis = ox_attr_i(X, "axis", 0);
  bool new_axis = ox_attr_i(X, "new_axis", 0) != 0;
  int r = s->seq[0]->d.ndim + (new_axis ? 1 : 0);
  if (axis < 0) axis += r;
  const char *kv[] = {"dim", ox_str(X, "%lld", (long long)axis), "num_args", ox_str(X, "%d", s->nseq), NULL};
  const char *kvs[] = {"axis", kv[1], "num_args", kv[3], NULL};
  return (out[0] = ox_op(X, new_axis ? "stack" : "concat", s->nseq, s->seq, new_axis ? kvs : kv))
             ? MX_OK : MX_EINVAL;
}

static int cv_split_to_seq(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  (void)nout;
  if (nin < 1 || !in[0]) return ox_fail(X, "needs a tensor");
  ox_val *x = in[0];
  int r = x->d.ndim;
  int64_t axis = ox_attr_i(X, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || x->d.shape[axis] < 0) return ox_unsupported(X, "split over an unknown dim");
  int64_t dim = x->d.shape[axis], sp[256];
  int n = 0, rc;
  bool keep = ox_attr_i(X, "keepdims", 1) != 0;
  ox_val *split = IN_OR(1, nin, in);
  if (split) {
    if ((rc = ox_ints(X, split, "split", 256, sp, &n))) return rc;
    if (split->c && mx_tensor_ndim(split->c) == 0) { /* one size: equal parts, the last smaller */
      int64_t each = sp[0];
      if (each < 1) return ox_fail(X, "split size %lld", (long long)each);
      n = 0;
      for (int64_t b = 0; b < dim && n < 256; b += each) sp[n++] = b + each <= dim ? each : dim - b;
    }
    keep = true;
  } else {
    if (dim > 256) return ox_unsupported(X, "a sequence longer than 256");
    for (int64_t i = 0; i < dim; i++) sp[n++] = 1;
  }
  ox_val *items[256];
  int64_t b = 0;
  for (int i = 0; i < n; i++) {
    ox_val *v = ox_op1(X, "slice_axis", x, KV("axis", ox_str(X, "%lld", (long long)axis),
        "begin", ox_str(X, "%lld", (long long)b), "end", ox_str(X, "%lld", (long long)(b + sp[i]))));
    if (v && !keep) v = ox_op1(X, "squeeze", v, KV("axis", ox_str(X, "(%lld,)", (long long)axis)));
    if (!(items[i] = v)) return MX_EINVAL;
    b += sp[i];
  }
  return (out[0] = ox_seq(X, n, items)) ? MX_OK : mx_err(MX_ENOMEM, "onnx: out of memory");
}

const ox_conv_entry ox_ops_seq[] = {
    {"SequenceEmpty", cv_seq_empty}, {"SequenceConstruct", cv_seq_construct},
    {"SequenceInsert", cv_seq_insert}, {"SequenceErase", cv_seq_erase},
    {"SequenceAt", cv_seq_at}, {"SequenceLength", cv_seq_length},
    {"ConcatFromSequence", cv_concat_from_seq}, {"SplitToSequence", cv_split_to_seq},
    {NULL, NULL}};
