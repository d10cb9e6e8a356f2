/* rt_check.c — checks of the inference runtime (mx_runtime.h) that spec/runtime_spec.lua
 * runs on models the spec exports: values against the Lua side's reference outputs,
 * N contexts on N threads against one, create/free races, reshape, zero-copy binding,
 * partial runs, heap allocations in the steady state, and the error messages.
 *
 *   rt_check <mode> <symbol.json> <model.params> <io.params> [n] [iters]
 *
 * io.params (mx.nd.save dict): "data" (the input, batch B) and "out0", "out1", ...
 * (the reference outputs). Prints one "ok ..." line per check, exits non-zero on the
 * first failure with the reason. */
#include "mx.h"
#include "mx_runtime.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Heap calls made by the process (glibc's malloc family interposed): the runtime's
 * steady state is checked to make none. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static _Thread_local long heap_calls;
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__) /* they interpose malloc */
void *malloc(size_t n) { heap_calls++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { heap_calls++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { heap_calls++; return __libc_realloc(p, n); }
int posix_memalign(void **p, size_t a, size_t n) {
  heap_calls++;
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;
}
void *aligned_alloc(size_t a, size_t n) { heap_calls++; return __libc_memalign(a, n); }
#endif

static const char *sym_path, *par_path;
static mx_tensor *data_t;        /* the input */
static mx_tensor *ref[16];       /* reference outputs */
static int nref;

#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
  fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } } while (0)
#define RT(call) do { int rc_ = (call); CHECK(rc_ == 0, "%s -> %d: %s", #call, rc_, mx_rt_last_error()); } while (0)

static void load_io(const char *path) {
  int n;
  mx_tensor **arr;
  char **names;
  CHECK(mx_nd_load(path, &n, &arr, &names) == 0, "load %s: %s", path, mx_last_error());
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], "data") == 0) data_t = arr[i];
    else if (strncmp(names[i], "out", 3) == 0) {
      int k = atoi(names[i] + 3);
      CHECK(k >= 0 && k < 16, "bad name %s", names[i]);
      ref[k] = arr[i];
      if (k + 1 > nref) nref = k + 1;
    } else mx_tensor_release(arr[i]);
    mx_free(names[i]);
  }
  mx_free(arr);
  mx_free(names);
  CHECK(data_t && nref > 0, "%s lacks data / out0", path);
}

static mx_rt_model *load_model(int batch, int threads, int opt_level) {
  int64_t shape[8];
  int nd = mx_tensor_shape(data_t, shape);
  if (batch > 0) shape[0] = batch;
  mx_rt_input in = {"data", nd, shape, mx_tensor_dtype(data_t)};
  mx_rt_options o;
  mx_rt_options_init(&o);
  o.threads = threads;
  if (opt_level >= 0) o.opt_level = opt_level;
  mx_rt_model *m = NULL;
  RT(mx_rt_model_load(sym_path, par_path, 1, &in, &o, &m));
  return m;
}

static void set_data(mx_rt_ctx *c) {
  RT(mx_rt_set_input(c, 0, mx_tensor_data(data_t), mx_rt_input_bytes(c, 0)));
}

/* max |a - ref| / (1 + |ref|) over output k */
static double rel_err(const float *a, mx_tensor *r) {
  const float *b = mx_tensor_data(r);
  double worst = 0;
  for (int64_t i = 0; i < mx_tensor_size(r); i++) {
    double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
    if (!(d <= worst)) worst = d; /* NaN counts as worst */
  }
  return worst;
}

static void check_outputs(mx_rt_ctx *c, const char *what, double tol) {
  CHECK(mx_rt_num_outputs(c) == nref, "%s: %d outputs, %d references", what, mx_rt_num_outputs(c), nref);
  for (int k = 0; k < nref; k++) {
    CHECK(mx_rt_output_bytes(c, k) == (size_t)mx_tensor_size(ref[k]) * 4, "%s: output %d size", what, k);
    double e = rel_err(mx_rt_output_data(c, k), ref[k]);
    CHECK(e <= tol, "%s: output %d differs from the reference by %g (tolerance %g)", what, k, e, tol);
    printf("ok %s output %d (%s) max rel err %.3g\n", what, k, "", e);
  }
}

static void mode_run(double tol) {
  for (int lvl = 0; lvl <= 2; lvl++) {
    mx_rt_model *m = load_model(0, 0, lvl);
    mx_rt_ctx *c;
    RT(mx_rt_ctx_new(m, &c));
    mx_rt_model_free(m); /* the context keeps it */
    set_data(c);
    RT(mx_rt_run(c));
    char what[64];
    snprintf(what, sizeof what, "run opt_level=%d", lvl);
    check_outputs(c, what, tol);
    RT(mx_rt_run(c)); /* a second run gives the same */
    check_outputs(c, what, tol);
    printf("ok opt_level=%d nodes %d planned %lld bytes\n", lvl, mx_rt_model_num_nodes(m),
           (long long)mx_rt_ctx_planned_bytes(c));
    mx_rt_ctx_free(c);
  }
}

/* ---- N contexts on N threads -------------------------------------------------------- */

typedef struct job {
  mx_rt_model *m;
  int iters;
  float *want;       /* output 0 of one thread alone */
  size_t bytes;
  int bad;
} job;

static void *thread_main(void *arg) {
  job *j = arg;
  mx_rt_ctx *c;
  if (mx_rt_ctx_new(j->m, &c)) { j->bad = -1; return NULL; }
  set_data(c);
  for (int it = 0; it < j->iters; it++) {
    if (mx_rt_run(c)) { j->bad = -2; break; }
    if (memcmp(mx_rt_output_data(c, 0), j->want, j->bytes) != 0) j->bad++;
  }
  mx_rt_ctx_free(c);
  return NULL;
}

static void mode_threads(int n, int iters) {
  mx_rt_model *m = load_model(0, 1, -1);
  mx_rt_ctx *c;
  RT(mx_rt_ctx_new(m, &c));
  set_data(c);
  RT(mx_rt_run(c));
  size_t bytes = mx_rt_output_bytes(c, 0);
  float *want = malloc(bytes);
  memcpy(want, mx_rt_output_data(c, 0), bytes);
  mx_rt_ctx_free(c);
  pthread_t t[64];
  job jobs[64];
  for (int i = 0; i < n; i++) {
    jobs[i] = (job){m, iters, want, bytes, 0};
    pthread_create(&t[i], NULL, thread_main, &jobs[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < n; i++)
    CHECK(jobs[i].bad == 0, "thread %d: %d runs differ from one thread's output (or failed)", i, jobs[i].bad);
  printf("ok %d threads x %d runs, one model: outputs bitwise equal to one thread's\n", n, iters);
  mx_rt_model_free(m);
  free(want);
}

/* ---- create/free races: contexts made and freed on threads while the model is freed -- */

static atomic_int race_fail;
static void *race_main(void *arg) {
  job *j = arg;
  for (int it = 0; it < j->iters; it++) {
    mx_rt_ctx *c;
    if (mx_rt_ctx_new(j->m, &c)) { atomic_fetch_add(&race_fail, 1); continue; }
    set_data(c);
    if (mx_rt_run(c) || memcmp(mx_rt_output_data(c, 0), j->want, j->bytes) != 0)
      atomic_fetch_add(&race_fail, 1);
    mx_rt_ctx_free(c);
  }
  return NULL;
}

static void mode_race(int n, int iters) {
  for (int round = 0; round < 3; round++) {
    mx_rt_model *m = load_model(0, 1, -1), *keep[64];
    mx_rt_ctx *c;
    RT(mx_rt_ctx_new(m, &c));
    set_data(c);
    RT(mx_rt_run(c));
    size_t bytes = mx_rt_output_bytes(c, 0);
    float *want = malloc(bytes);
    memcpy(want, mx_rt_output_data(c, 0), bytes);
    pthread_t t[64];
    job jobs[64];
    /* each thread starts with a context of its own, so the model outlives its handle */
    for (int i = 0; i < n; i++) {
      keep[i] = m;
      jobs[i] = (job){m, iters, want, bytes, 0};
      pthread_create(&t[i], NULL, race_main, &jobs[i]);
    }
    mx_rt_ctx_free(c); /* the main thread's context goes while the others run */
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    mx_rt_model_free(m);
    (void)keep;
    free(want);
  }
  CHECK(atomic_load(&race_fail) == 0, "%d create/run/free rounds failed", atomic_load(&race_fail));
  printf("ok create/run/free races: %d threads x %d contexts x 3 models\n", n, iters);
  /* the model freed first, its contexts after, on another thread */
  mx_rt_model *m = load_model(0, 1, -1);
  mx_rt_ctx *cs[8];
  for (int i = 0; i < 8; i++) RT(mx_rt_ctx_new(m, &cs[i]));
  mx_rt_model_free(m);
  for (int i = 0; i < 8; i++) {
    set_data(cs[i]);
    RT(mx_rt_run(cs[i]));
    mx_rt_ctx_free(cs[i]);
  }
  printf("ok model freed before its contexts\n");
}

/* ---- reshape, binding, partial runs, allocations ------------------------------------- */

static void mode_features(double tol) {
  mx_rt_model *m = load_model(0, 0, -1);
  mx_rt_ctx *c;
  RT(mx_rt_ctx_new(m, &c));
  int64_t shape[8];
  int nd = mx_rt_input_shape(c, 0, shape, NULL);
  int64_t b = shape[0];
  /* reshape to twice the batch: the data twice, each half matches the reference */
  size_t in1 = mx_rt_input_bytes(c, 0);
  shape[0] = 2 * b;
  mx_rt_input in2 = {"data", nd, shape, -1};
  RT(mx_rt_ctx_reshape(c, 1, &in2));
  CHECK(mx_rt_input_bytes(c, 0) == 2 * in1, "reshape: input bytes %zu", mx_rt_input_bytes(c, 0));
  char *two = malloc(2 * in1);
  memcpy(two, mx_tensor_data(data_t), in1);
  memcpy(two + in1, mx_tensor_data(data_t), in1);
  RT(mx_rt_set_input(c, 0, two, 2 * in1));
  RT(mx_rt_run(c));
  for (int k = 0; k < nref; k++) {
    size_t ob = mx_rt_output_bytes(c, k);
    CHECK(ob == 2 * (size_t)mx_tensor_size(ref[k]) * 4, "reshape: output %d has %zu bytes", k, ob);
    const float *o = mx_rt_output_data(c, k);
    CHECK(rel_err(o, ref[k]) <= tol && rel_err(o + ob / 8, ref[k]) <= tol,
          "reshape: output %d halves differ from the reference", k);
  }
  printf("ok reshape to batch %lld: both halves match\n", (long long)(2 * b));
  shape[0] = b;
  RT(mx_rt_ctx_reshape(c, 1, &in2));
  /* a bad reshape leaves the context as it was */
  int64_t bad[8] = {b, 1, 2, 3, 4, 5, 6, 7};
  mx_rt_input inb = {"data", nd == 8 ? 7 : nd + 1, bad, -1};
  CHECK(mx_rt_ctx_reshape(c, 1, &inb) != 0, "a bad reshape was accepted");
  printf("ok bad reshape refused: %s\n", mx_rt_last_error());
  set_data(c);
  RT(mx_rt_run(c));
  check_outputs(c, "after a refused reshape", tol);
  /* zero-copy: the caller's input and output buffers */
  size_t ob = mx_rt_output_bytes(c, 0);
  float *mine = malloc(ob);
  char *inbuf = malloc(in1 + 4); /* 4-byte but not 16-byte aligned on purpose */
  memcpy(inbuf + 4, mx_tensor_data(data_t), in1);
  RT(mx_rt_set_input(c, 0, two + in1 / 2, in1)); /* garbage in the own buffer */
  CHECK(mx_rt_bind_input(c, 0, inbuf + 1, in1) != 0, "a misaligned float buffer was bound");
  RT(mx_rt_bind_input(c, 0, inbuf + 4, in1));
  RT(mx_rt_bind_output(c, 0, mine, ob));
  RT(mx_rt_run(c));
  CHECK(mx_rt_output_data(c, 0) == mine, "bound output not used");
  CHECK(rel_err(mine, ref[0]) <= tol, "bound buffers: output differs");
  printf("ok zero-copy input (4-byte aligned; 1-byte refused) and output\n");
  RT(mx_rt_bind_output(c, 0, NULL, 0));
  /* partial runs node by node give the run's outputs */
  int nodes = mx_rt_model_num_nodes(m);
  memset(mine, 0, ob);
  for (int j = 0; j < nodes; j++) RT(mx_rt_run_steps(c, j, 1));
  CHECK(rel_err(mx_rt_output_data(c, 0), ref[0]) <= tol, "partial runs differ");
  printf("ok %d partial runs of one node each\n", nodes);
  RT(mx_rt_bind_input(c, 0, NULL, 0));
  /* steady state: no heap call of ours per run (single-threaded kernels) */
  mx_rt_options o;
  mx_rt_options_init(&o);
  mx_rt_model *m1 = load_model(0, 1, -1);
  mx_rt_ctx *c1;
  RT(mx_rt_ctx_new(m1, &c1));
  set_data(c1);
  for (int i = 0; i < 3; i++) RT(mx_rt_run(c1));
  long before = heap_calls;
  for (int i = 0; i < 20; i++) RT(mx_rt_run(c1));
  printf("ok heap calls in 20 warm runs: %ld\n", heap_calls - before);
  mx_rt_ctx_free(c1);
  mx_rt_model_free(m1);
  mx_rt_ctx_free(c);
  mx_rt_model_free(m);
  free(two);
  free(mine);
  free(inbuf);
}

/* ---- errors: each bad call fails with a message and no crash ----------------------- */

static void expect_fail(int rc, const char *what, const char *must) {
  CHECK(rc != 0, "%s succeeded", what);
  const char *msg = mx_rt_last_error();
  CHECK(strstr(msg, must) != NULL, "%s: message '%s' lacks '%s'", what, msg, must);
  printf("ok error %s: %s\n", what, msg);
}

static void mode_errors(void) {
  int64_t shape[8];
  int nd = mx_tensor_shape(data_t, shape);
  mx_rt_model *m = NULL;
  mx_rt_input in = {"date", nd, shape, -1};
  expect_fail(mx_rt_model_load(sym_path, par_path, 1, &in, NULL, &m), "unknown input", "'date'");
  in.name = "data";
  expect_fail(mx_rt_model_load("/nonexistent-symbol.json", par_path, 1, &in, NULL, &m), "missing file",
              "/nonexistent-symbol.json");
  expect_fail(mx_rt_model_load(sym_path, NULL, 1, &in, NULL, &m), "no params", "has no value");
  expect_fail(mx_rt_model_from_memory("{\"nodes\": 3}", NULL, 0, 1, &in, NULL, &m), "bad JSON",
              "symbol JSON");
  expect_fail(mx_rt_model_from_memory("{}", "garbage", 7, 1, &in, NULL, &m), "bad params",
              "not an MXNet .params");
  int64_t wrong[8];
  memcpy(wrong, shape, sizeof wrong);
  wrong[1] += 1;
  in.shape = wrong;
  expect_fail(mx_rt_model_load(sym_path, par_path, 1, &in, NULL, &m), "wrong shape", "node");
  in.shape = shape;
  mx_rt_options o;
  mx_rt_options_init(&o);
  o.dev_type = 2;
  expect_fail(mx_rt_model_load(sym_path, par_path, 1, &in, &o, &m), "gpu", "cpu");
  mx_rt_options_init(&o);
  const char *outs[] = {"no_such_node"};
  o.noutputs = 1;
  o.outputs = outs;
  expect_fail(mx_rt_model_load(sym_path, par_path, 1, &in, &o, &m), "unknown output", "no_such_node");
  mx_rt_options_init(&o);
  o.allow_reshape = 0;
  RT(mx_rt_model_load(sym_path, par_path, 1, &in, &o, &m));
  mx_rt_ctx *c;
  RT(mx_rt_ctx_new(m, &c));
  expect_fail(mx_rt_set_input(c, 0, shape, 3), "input size", "bytes given");
  expect_fail(mx_rt_set_input(c, 5, shape, 3), "input index", "no input 5");
  expect_fail(mx_rt_input_index(c, "x") >= 0 ? 0 : -1, "input name", "no input 'x'");
  expect_fail(mx_rt_ctx_reshape(c, 1, &in), "fixed shapes", "allow_reshape");
  float f;
  expect_fail(mx_rt_get_output(c, 0, &f, 1), "output size", "bytes given");
  expect_fail(mx_rt_run(NULL), "NULL context", "NULL");
  mx_rt_ctx_free(c);
  mx_rt_model_free(m);
}

/* ---- internal outputs by name (MXNet's partial out) ------------------------------- */

static void mode_internal(const char *name) {
  int64_t shape[8];
  int nd = mx_tensor_shape(data_t, shape);
  mx_rt_input in = {"data", nd, shape, -1};
  mx_rt_options o;
  mx_rt_options_init(&o);
  const char *outs[] = {name};
  o.noutputs = 1;
  o.outputs = outs;
  mx_rt_model *m;
  RT(mx_rt_model_load(sym_path, par_path, 1, &in, &o, &m));
  mx_rt_ctx *c;
  RT(mx_rt_ctx_new(m, &c));
  set_data(c);
  RT(mx_rt_run(c));
  int64_t os[8];
  int ond = mx_rt_output_shape(c, 0, os, NULL);
  printf("ok internal output %s:", mx_rt_model_output_name(m, 0));
  for (int j = 0; j < ond; j++) printf(" %lld", (long long)os[j]);
  const float *v = mx_rt_output_data(c, 0);
  double s = 0;
  for (size_t i = 0; i < mx_rt_output_bytes(c, 0) / 4; i++) s += v[i];
  printf(" sum %.6g\n", s);
  mx_rt_ctx_free(c);
  mx_rt_model_free(m);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: rt_check run|threads|race|features|errors|internal sym params io [n] [iters]\n");
    return 2;
  }
  sym_path = argv[2];
  par_path = argv[3];
  load_io(argv[4]);
  int n = argc > 5 ? atoi(argv[5]) : 4, iters = argc > 6 ? atoi(argv[6]) : 20;
  double tol = getenv("RT_TOL") ? atof(getenv("RT_TOL")) : 1e-4;
  if (n < 1 || n > 64) n = 4;
  if (!strcmp(argv[1], "run")) mode_run(tol);
  else if (!strcmp(argv[1], "threads")) mode_threads(n, iters);
  else if (!strcmp(argv[1], "race")) mode_race(n, iters);
  else if (!strcmp(argv[1], "features")) mode_features(tol);
  else if (!strcmp(argv[1], "errors")) mode_errors();
  else if (!strcmp(argv[1], "internal")) mode_internal(argv[5]);
  else { fprintf(stderr, "unknown mode %s\n", argv[1]); return 2; }
  for (int k = 0; k < nref; k++) mx_tensor_release(ref[k]);
  mx_tensor_release(data_t);
  return 0;
}
