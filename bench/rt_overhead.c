/* rt_overhead.c — per-call cost of the inference runtime on one-op models (bench/RESULTS.md):
 * mx_rt_run of a graph holding one relu (1 and 1000 elements) and one fully_connected
 * (1x64 by 64x64), against the same op through mx_op_invoke (eager dispatch, out=) and
 * against an empty call loop. Single thread; medians of 7 rounds of 200000 calls.
 *   rt_overhead */
#define _POSIX_C_SOURCE 200809L
#include "mx.h"
#include "mx_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define ROUNDS 7
#define N 200000

static double median_ns(int (*fn)(void *), void *arg) {
  double r[ROUNDS];
  for (int k = 0; k < ROUNDS; k++) {
    double t0 = now_ns();
    for (int i = 0; i < N; i++)
      if (fn(arg)) { fprintf(stderr, "%s\n", mx_last_error()); exit(1); }
    r[k] = (now_ns() - t0) / N;
  }
  qsort(r, ROUNDS, sizeof *r, cmp);
  return r[ROUNDS / 2];
}

static int run_ctx(void *c) { return mx_rt_run(c); }
typedef struct eager { int op; mx_tensor *in[3]; int nin; void *params; mx_tensor *out; } eager;
static int run_eager(void *a) {
  eager *e = a;
  return mx_op_invoke(e->op, e->nin, e->in, e->params, 1, &e->out);
}

static const char *RELU = "{\"nodes\": [{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
  "{\"op\": \"relu\", \"name\": \"r\", \"inputs\": [[0, 0, 0]]}], \"arg_nodes\": [0],"
  "\"node_row_ptr\": [0, 1, 2], \"heads\": [[1, 0, 0]], \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";
static const char *FC = "{\"nodes\": [{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
  "{\"op\": \"null\", \"name\": \"w\", \"inputs\": []}, {\"op\": \"null\", \"name\": \"b\", \"inputs\": []},"
  "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"64\"},"
  "\"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]}], \"arg_nodes\": [0, 1, 2],"
  "\"node_row_ptr\": [0, 1, 2, 3, 4], \"heads\": [[3, 0, 0]], \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";

int main(void) {
  mx_set_num_threads(1);
  mx_rt_options o;
  mx_rt_options_init(&o);
  o.threads = 1;
  for (int n = 1; n <= 1000; n *= 1000) {
    int64_t shape[1] = {n};
    mx_rt_input in = {"data", 1, shape, MX_RT_F32};
    mx_rt_model *m;
    mx_rt_ctx *c;
    if (mx_rt_model_from_memory(RELU, NULL, 0, 1, &in, &o, &m) || mx_rt_ctx_new(m, &c)) {
      fprintf(stderr, "%s\n", mx_rt_last_error());
      return 1;
    }
    eager e = {mx_op_find("relu"), {NULL}, 1, NULL, NULL};
    mx_tensor_empty(1, shape, MX_F32, MX_CPU, 0, &e.in[0]);
    mx_tensor_empty(1, shape, MX_F32, MX_CPU, 0, &e.out);
    printf("relu %d elements: mx_rt_run %.1f ns/call, mx_op_invoke (out=) %.1f ns/call\n", n,
           median_ns(run_ctx, c), median_ns(run_eager, &e));
    mx_rt_ctx_free(c);
    mx_rt_model_free(m);
  }
  /* fully_connected 1x64 -> 64: parameters as a .params blob made with mx_nd_save */
  int64_t ws[2] = {64, 64}, bs[1] = {64}, xs[2] = {1, 64};
  mx_tensor *w, *b;
  mx_tensor_empty(2, ws, MX_F32, MX_CPU, 0, &w);
  mx_tensor_empty(1, bs, MX_F32, MX_CPU, 0, &b);
  float *wp = mx_tensor_data(w), *bp = mx_tensor_data(b);
  for (int i = 0; i < 64 * 64; i++) wp[i] = (float)(i % 13) / 13.0f - 0.5f;
  for (int i = 0; i < 64; i++) bp[i] = 0.1f;
  mx_tensor *arr[2] = {w, b};
  const char *names[2] = {"arg:w", "arg:b"};
  const char *path = "/tmp/rt_overhead_fc.params";
  if (mx_nd_save(path, 2, arr, names)) return 1;
  mx_rt_input in = {"data", 2, xs, MX_RT_F32};
  mx_rt_model *m;
  mx_rt_ctx *c;
  FILE *f = fopen("/tmp/rt_overhead_fc.json", "w");
  fputs(FC, f);
  fclose(f);
  if (mx_rt_model_load("/tmp/rt_overhead_fc.json", path, 1, &in, &o, &m) || mx_rt_ctx_new(m, &c)) {
    fprintf(stderr, "%s\n", mx_rt_last_error());
    return 1;
  }
  eager e = {mx_op_find("FullyConnected"), {NULL, w, b}, 3, NULL, NULL};
  size_t ps = mx_op_params_size(e.op);
  e.params = calloc(1, ps);
  const char *k[1] = {"num_hidden"}, *v[1] = {"64"};
  mx_op_params_parse(e.op, 1, k, v, e.params);
  mx_tensor_empty(2, xs, MX_F32, MX_CPU, 0, &e.in[0]);
  mx_tensor_empty(2, xs, MX_F32, MX_CPU, 0, &e.out);
  printf("fully_connected 1x64 -> 64: mx_rt_run %.1f ns/call, mx_op_invoke (out=) %.1f ns/call\n",
         median_ns(run_ctx, c), median_ns(run_eager, &e));
  mx_rt_ctx_free(c);
  mx_rt_model_free(m);
  remove(path);
  remove("/tmp/rt_overhead_fc.json");
  return 0;
}
