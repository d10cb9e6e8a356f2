/* onnx_ops_loop.c — ONNX's Loop and Scan, where luamx's graph IR can express them: the
 * IR has no loops, so the body is unrolled at import, one inline copy per iteration.
 * That needs the number of iterations at import: Loop's trip count and conditions must
 * be constants (values of initializers, or computed from constants and the iteration
 * number, which is a constant in each copy), Scan's sequence length a known dim (opset
 * 8's batched Scan: each batch element unrolled on its own).
 * Anything else is an "unsupported:" error naming the node. Loop-carried values may
 * change shape between iterations (each copy has its own); scan outputs are stacked. */
#include "onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* iterations unrolled at most: the graph grows by one body per iteration; and the body
 * nodes one import converts by unrolling, nested loops included (a file cannot make the
 * import's work grow without bound) */
enum { MAX_ITERS = 4096, MAX_VALS = 64 };
#define MAX_UNROLLED ((int64_t)1 << 18)

/* Counts one more copy of body g against the import's bound. */
static int unroll_one(ox *X, const Onnx__GraphProto *g) {
  X->unrolled += (int64_t)g->n_node + 1;
  if (X->unrolled > MAX_UNROLLED)
    return ox_unsupported(X, "unrolling would convert more than %lld body nodes (luamx unrolls "
                          "Loop and Scan at import)", (long long)MAX_UNROLLED);
  return MX_OK;
}

/* items[0..n) stacked along a new axis (ops take at most 64 inputs: chunks of 64 stacked,
 * then concatenated). */
static ox_val *stack_all(ox *X, int n, ox_val **items, int64_t axis) {
  const char *ax = ox_str(X, "%lld", (long long)axis);
  if (n <= 64) return ox_op(X, "stack", n, items, KV("axis", ax, "num_args", ox_str(X, "%d", n)));
  ox_val *chunks[64];
  int nc = 0;
  for (int b = 0; b < n; b += 64) {
    int c = n - b < 64 ? n - b : 64;
    if (!(chunks[nc++] = ox_op(X, "stack", c, items + b, KV("axis", ax, "num_args", ox_str(X, "%d", c)))))
      return NULL;
  }
  return ox_op(X, "concat", nc, chunks, KV("dim", ax, "num_args", ox_str(X, "%d", nc)));
}

/* Loop(M, cond, v_initial...) with body(iteration_num, cond, v...) -> (cond, v..., scan...):
 * the outputs are the final v and each scan value stacked over the iterations. */
static int cv_loop(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  const Onnx__AttributeProto *b = ox_attr(X, "body");
  if (!b || !b->g) return ox_fail(X, "no body graph");
  const Onnx__GraphProto *g = b->g;
  int N = nin - 2;
  if (N < 0) return ox_fail(X, "needs the inputs M and cond (empty names allowed)");
  int K = (int)g->n_output - 1 - N;
  if ((int)g->n_input != N + 2 || K < 0)
    return ox_fail(X, "the body has %zu inputs and %zu outputs for %d loop-carried values",
                   g->n_input, g->n_output, N);
  if (N + K > MAX_VALS) return ox_unsupported(X, "more than %d loop values", MAX_VALS);
  if (nout > N + K) return ox_fail(X, "%d outputs for %d loop-carried and %d scan values", nout, N, K);
  int64_t M = INT64_MAX;
  int n, rc;
  if (in[0]) {
    if (!in[0]->c)
      return ox_unsupported(X, "the trip count M must be a constant (luamx unrolls Loop at "
                            "import; give it with constants)");
    if ((rc = ox_ints(X, in[0], "M", 1, &M, &n))) return rc;
    if (n != 1) return ox_fail(X, "the trip count M is not one value");
  }
  double c = 1;
  if (in[1]) {
    if (!in[1]->c)
      return ox_unsupported(X, "the condition cond must be a constant (luamx unrolls Loop at "
                            "import; give it with constants)");
    if ((rc = ox_f64s(X, in[1], "cond", 1, &c, &n))) return rc;
  }
  if (M != INT64_MAX && M > MAX_ITERS)
    return ox_unsupported(X, "%lld iterations (luamx unrolls Loop at import, at most %d)",
                          (long long)M, MAX_ITERS);
  ox_val *v[MAX_VALS], *res[MAX_VALS + 1], *ins[MAX_VALS + 2];
  for (int j = 0; j < N; j++)
    if (!(v[j] = in[2 + j])) return ox_fail(X, "loop-carried input %d is missing", j + 1);
  ox_val **scan = K ? calloc((size_t)K * MAX_ITERS, sizeof *scan) : NULL;
  if (K && !scan) return mx_err(MX_ENOMEM, "onnx: out of memory");
  const Onnx__NodeProto *self = X->node;
  int64_t it = 0;
  rc = MX_OK;
  while (c != 0 && it < M) {
    if (it == MAX_ITERS) {
      rc = ox_unsupported(X, "more than %d iterations (luamx unrolls Loop at import)", MAX_ITERS);
      break;
    }
    if ((rc = unroll_one(X, g))) break;
    ins[0] = ox_scalar(X, MX_I64, (double)it);
    ins[1] = ox_scalar(X, MX_BOOL, 1);
    if (!ins[0] || !ins[1]) { rc = mx_err(MX_ENOMEM, "onnx: out of memory"); break; }
    for (int j = 0; j < N; j++) ins[2 + j] = v[j];
    rc = ox_subgraph_in(X, g, N + 2, ins, N + 1 + K, res);
    X->node = self;
    if (rc) break;
    if (!res[0]->c) {
      rc = ox_unsupported(X, "the body's condition must be a constant in every iteration "
                          "(luamx unrolls Loop at import)");
      break;
    }
    if ((rc = ox_f64s(X, res[0], "the body's condition", 1, &c, &n))) break;
    for (int j = 0; j < N; j++) v[j] = res[1 + j];
    for (int k = 0; k < K; k++) scan[(size_t)k * MAX_ITERS + (size_t)it] = res[1 + N + k];
    it++;
  }
  for (int j = 0; !rc && j < N && j < nout; j++) out[j] = v[j];
  for (int k = 0; !rc && k < K && N + k < nout; k++) {
    if (it == 0) {
      rc = ox_unsupported(X, "scan outputs of a Loop that runs no iteration (their shape is "
                          "unknown)");
      break;
    }
    if (!(out[N + k] = stack_all(X, (int)it, scan + (size_t)k * MAX_ITERS, 0))) rc = MX_EINVAL;
  }
  free(scan);
  return rc;
}

/* One Scan over in[0..N) states and in[N..N+Ms) scanned inputs (scan axes iax, directions
 * idir), the body's K scan outputs stacked along oax (in reverse for odir 1): out[0..N)
 * the final states, out[N..N+K) the scan outputs. */
static int scan_run(ox *X, const Onnx__GraphProto *g, int N, int Ms, ox_val *const *in,
                    int64_t *idir, int64_t *iax, const int64_t *odir, const int64_t *oax,
                    ox_val **out) {
  int nin = N + Ms, K = (int)g->n_output - N;
  int64_t T = -1;
  for (int s = 0; s < Ms; s++) {
    ox_val *x = in[N + s];
    if (!x) return ox_fail(X, "scan input %d is missing", s + 1);
    int r = x->d.ndim;
    if (iax[s] < 0) iax[s] += r;
    if (r < 1 || iax[s] < 0 || iax[s] >= r) return ox_fail(X, "scan axis out of range for rank %d", r);
    int64_t len = x->d.shape[iax[s]];
    if (len < 0)
      return ox_unsupported(X, "a scan over a dim known only at run time (luamx unrolls Scan at "
                            "import; give input_shapes)");
    if (T >= 0 && len != T) return ox_fail(X, "scan inputs of lengths %lld and %lld", (long long)T, (long long)len);
    T = len;
  }
  if (T == 0) return ox_unsupported(X, "a scan of length 0 (its outputs' shapes are unknown)");
  if (T > MAX_ITERS)
    return ox_unsupported(X, "a scan of %lld steps (luamx unrolls Scan at import, at most %d)",
                          (long long)T, MAX_ITERS);
  ox_val *st[MAX_VALS], *ins[MAX_VALS], *res[MAX_VALS];
  for (int j = 0; j < N; j++)
    if (!(st[j] = in[j])) return ox_fail(X, "state input %d is missing", j + 1);
  ox_val **scan = K ? calloc((size_t)K * (size_t)T, sizeof *scan) : NULL;
  if (K && !scan) return mx_err(MX_ENOMEM, "onnx: out of memory");
  const Onnx__NodeProto *self = X->node;
  int rc = MX_OK;
  for (int64_t t = 0; !rc && t < T; t++) {
    if ((rc = unroll_one(X, g))) break;
    for (int j = 0; j < N; j++) ins[j] = st[j];
    for (int s = 0; !rc && s < Ms; s++) {
      int64_t at = idir[s] ? T - 1 - t : t;
      const char *ax = ox_str(X, "%lld", (long long)iax[s]);
      ox_val *sl = ox_op1(X, "slice_axis", in[N + s], KV("axis", ax, "begin", ox_str(X, "%lld", (long long)at),
                                                        "end", ox_str(X, "%lld", (long long)(at + 1))));
      if (sl) sl = ox_op1(X, "squeeze", sl, KV("axis", ox_str(X, "(%lld,)", (long long)iax[s])));
      if (!(ins[N + s] = sl)) rc = MX_EINVAL;
    }
    if (rc) break;
    rc = ox_subgraph_in(X, g, nin, ins, N + K, res);
    X->node = self;
    if (rc) break;
    for (int j = 0; j < N; j++) st[j] = res[j];
    for (int k = 0; k < K; k++) scan[(size_t)k * (size_t)T + (size_t)(odir[k] ? T - 1 - t : t)] = res[N + k];
  }
  for (int j = 0; !rc && j < N; j++) out[j] = st[j];
  for (int k = 0; !rc && k < K; k++) {
    int64_t ax = oax[k];
    if (ax < 0) ax += scan[(size_t)k * (size_t)T]->d.ndim + 1;
    if (!(out[N + k] = stack_all(X, (int)T, scan + (size_t)k * (size_t)T, ax))) rc = MX_EINVAL;
  }
  free(scan);
  return rc;
}

/* Scan with body(state..., scan slice...) -> (state..., scan output...). Opset 9 on: each
 * scan input sliced along its axis (backwards for direction 1), the scan outputs stacked
 * along theirs (in reverse for direction 1). Opset 8: a leading batch axis on every input
 * and output (each batch element scanned on its own, along axis 1 of the inputs) and
 * sequence_lens, which must then be constants equal to the full length. */
static int cv_scan(ox *X, int nin, ox_val **in, int nout, ox_val **out) {
  const Onnx__AttributeProto *b = ox_attr(X, "body");
  if (!b || !b->g) return ox_fail(X, "no body graph");
  const Onnx__GraphProto *g = b->g;
  bool v8 = X->opset < 9;
  int first = v8 ? 1 : 0; /* opset 8's sequence_lens */
  int Ms = (int)ox_attr_i(X, "num_scan_inputs", -1);
  if (Ms < 1 || Ms > nin - first) return ox_fail(X, "num_scan_inputs %d for %d inputs", Ms, nin);
  int N = nin - first - Ms, K = (int)g->n_output - N;
  if ((int)g->n_input != N + Ms || K < 0)
    return ox_fail(X, "the body has %zu inputs and %zu outputs for %d states and %d scan inputs",
                   g->n_input, g->n_output, N, Ms);
  if (N + Ms > MAX_VALS || N + K > MAX_VALS) return ox_unsupported(X, "more than %d scan values", MAX_VALS);
  if (nout > N + K) return ox_fail(X, "%d outputs for %d states and %d scan outputs", nout, N, K);
  int64_t idir[MAX_VALS] = {0}, iax[MAX_VALS] = {0}, odir[MAX_VALS] = {0}, oax[MAX_VALS] = {0};
  if (ox_attr_ints(X, v8 ? "directions" : "scan_input_directions", MAX_VALS, idir) == -2 ||
      (!v8 && (ox_attr_ints(X, "scan_input_axes", MAX_VALS, iax) == -2 ||
               ox_attr_ints(X, "scan_output_directions", MAX_VALS, odir) == -2 ||
               ox_attr_ints(X, "scan_output_axes", MAX_VALS, oax) == -2)))
    return MX_EINVAL;
  ox_val *res[MAX_VALS];
  if (!v8) {
    int rc = scan_run(X, g, N, Ms, in, idir, iax, odir, oax, res);
    for (int k = 0; !rc && k < nout; k++) out[k] = res[k];
    return rc;
  }
  ox_val *x0 = in[first + N];
  if (!x0 || x0->d.ndim < 2 || x0->d.shape[0] < 0 || x0->d.shape[1] < 0)
    return ox_unsupported(X, "an opset-8 Scan over dims known only at run time");
  int64_t B = x0->d.shape[0], L = x0->d.shape[1];
  if (B < 1 || B > MAX_ITERS) return ox_unsupported(X, "an opset-8 Scan of batch %lld", (long long)B);
  if (in[0]) { /* sequence_lens: luamx scans every sequence to its full length */
    int64_t lens[MAX_ITERS];
    int n, rc = ox_ints(X, in[0], "sequence_lens", MAX_ITERS, lens, &n);
    if (rc) return rc;
    for (int i = 0; i < n; i++)
      if (lens[i] != L) return ox_unsupported(X, "sequence_lens shorter than the sequences");
  }
  for (int s = 0; s < Ms; s++) iax[s] = 0; /* within one batch element */
  ox_val **per = calloc((size_t)(N + K) * (size_t)B, sizeof *per);
  if (!per) return mx_err(MX_ENOMEM, "onnx: out of memory");
  int rc = MX_OK;
  for (int64_t bi = 0; !rc && bi < B; bi++) {
    ox_val *ins[MAX_VALS];
    for (int j = 0; !rc && j < N + Ms; j++) {
      ox_val *v = in[first + j];
      if (!v) { rc = ox_fail(X, "input %d is missing", first + j + 1); break; }
      ox_val *sl = ox_op1(X, "slice_axis", v, KV("axis", "0", "begin", ox_str(X, "%lld", (long long)bi),
                                                "end", ox_str(X, "%lld", (long long)(bi + 1))));
      if (sl) sl = ox_op1(X, "squeeze", sl, KV("axis", "(0,)"));
      if (!(ins[j] = sl)) rc = MX_EINVAL;
    }
    if (!rc) rc = scan_run(X, g, N, Ms, ins, idir, iax, odir, oax, res);
    for (int k = 0; !rc && k < N + K; k++) per[(size_t)k * (size_t)B + (size_t)bi] = res[k];
  }
  for (int k = 0; !rc && k < nout; k++)
    if (!(out[k] = stack_all(X, (int)B, per + (size_t)k * (size_t)B, 0))) rc = MX_EINVAL;
  free(per);
  return rc;
}

const ox_conv_entry ox_ops_loop[] = {{"Loop", cv_loop}, {"Scan", cv_scan}, {NULL, NULL}};
