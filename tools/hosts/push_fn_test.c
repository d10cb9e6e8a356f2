/* push_fn_test.c — mx_engine_push_fn from C with no Lua (spec/engine_spec.lua runs it).
 * Checks: functions pushed with read/write sets are ordered like ops (a writer waits for
 * earlier readers and writers, a reader for earlier writers), interleaved with ops found
 * by name; an error returned by fn is raised at the next sync point naming the function;
 * naive mode runs fn inline; free_arg runs exactly once, on every path.
 * Prints "ok <check>" per check and "PASS" at the end; exits 1 on the first failure. */
#define _POSIX_C_SOURCE 200809L
#include "mx.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 4096
#define CHECK(c, ...)                                                  \
  do {                                                                 \
    if (!(c)) {                                                        \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                      \
      printf(__VA_ARGS__);                                             \
      printf(" [last error: %s]\n", mx_last_error());                  \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static atomic_int log_n;
static int log_ev[64];
static atomic_int frees;

typedef struct { int id; mx_tensor *t; float add; int sleep_ms; int fail; } job;

static void nap(int ms) {
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* Records its id in order; optionally sleeps (so a wrongly unordered successor would
 * overtake it) and adds `add` to every element of t (reading it on the worker). */
static int job_run(void *p) {
  job *j = p;
  if (j->sleep_ms) nap(j->sleep_ms);
  if (j->t && j->add != 0) {
    float *d = mx_tensor_data_nowait(j->t);
    for (int i = 0; i < N; i++) d[i] += j->add;
  }
  log_ev[atomic_fetch_add(&log_n, 1)] = j->id;
  if (j->fail) {
    mx_set_last_error("job_run: asked to fail");
    return MX_EINVAL;
  }
  return MX_OK;
}

static void job_free(void *p) {
  atomic_fetch_add(&frees, 1);
  free(p);
}

static job *mk(int id, mx_tensor *t, float add, int sleep_ms, int fail) {
  job *j = calloc(1, sizeof *j);
  j->id = id, j->t = t, j->add = add, j->sleep_ms = sleep_ms, j->fail = fail;
  return j;
}

static mx_tensor *filled(float v) {
  int64_t shape[1] = { N };
  mx_tensor *t = NULL;
  CHECK(mx_tensor_empty(1, shape, MX_F32, MX_CPU, 0, &t) == MX_OK, "empty");
  float *d = mx_tensor_data(t);
  for (int i = 0; i < N; i++) d[i] = v;
  return t;
}

static float at(mx_tensor *t, int i) {
  CHECK(mx_tensor_wait_to_read(t) == MX_OK, "wait_to_read");
  return ((float *)mx_tensor_data(t))[i];
}

int main(void) {
  mx_engine_set_inline_max(0); /* queue every op: the ordering is the engine's, not luck */
  int add = mx_op_find("add");
  CHECK(add >= 0, "mx_op_find(add)");
  mx_tensor *a = filled(1), *b = filled(2);

  /* 1. write-after-write and read-after-write between fns and ops:
   *    fn1 writes a (slow, +10) -> op c = a + b -> fn2 writes a (+100) -> fn3 reads c */
  atomic_store(&log_n, 0);
  mx_tensor *in[2] = { a, b }, *ws[1] = { a };
  CHECK(mx_engine_push_fn("slow_writer", job_run, mk(1, a, 10, 30, 0), job_free, 0, NULL, 1, ws,
                          MX_CPU, 0, NULL) == MX_OK, "push fn1");
  mx_tensor *c = NULL;
  CHECK(mx_op_invoke(add, 2, in, NULL, 1, &c) == MX_OK, "add");
  /* a writer after a reader (the add reads a): it must wait for the add */
  CHECK(mx_engine_push_fn("writer2", job_run, mk(2, a, 100, 0, 0), job_free, 0, NULL, 1, ws,
                          MX_CPU, 0, NULL) == MX_OK, "push fn2");
  mx_tensor *rc_[1] = { c };
  CHECK(mx_engine_push_fn("reader", job_run, mk(3, NULL, 0, 0, 0), job_free, 1, rc_, 0, NULL,
                          MX_CPU, 0, NULL) == MX_OK, "push fn3");
  CHECK(mx_engine_wait_all() == MX_OK, "wait_all");
  CHECK(at(c, 7) == 13.0f, "c = (1+10)+2 = 13, got %g (the add overtook a writer or a "
        "later writer overtook the add)", at(c, 7));
  CHECK(at(a, 7) == 111.0f, "a = 1+10+100, got %g", at(a, 7));
  CHECK(atomic_load(&log_n) == 3 && log_ev[0] == 1 && log_ev[1] == 2 && log_ev[2] == 3,
        "fn order %d %d %d", log_ev[0], log_ev[1], log_ev[2]);
  CHECK(atomic_load(&frees) == 3, "free_arg ran %d times for 3 fns", atomic_load(&frees));
  printf("ok ordering\n");

  /* 2. a writer waits for earlier (slow) readers */
  atomic_store(&log_n, 0);
  mx_tensor *ra[1] = { b };
  CHECK(mx_engine_push_fn("slow_reader", job_run, mk(1, NULL, 0, 30, 0), job_free, 1, ra, 0, NULL,
                          MX_CPU, 0, NULL) == MX_OK, "push slow reader");
  CHECK(mx_engine_push_fn("writer_after_reader", job_run, mk(2, b, 1, 0, 0), job_free, 0, NULL,
                          1, ra, MX_CPU, 0, NULL) == MX_OK, "push writer");
  CHECK(mx_tensor_wait_to_read(b) == MX_OK, "wait b");
  CHECK(log_n == 2 && log_ev[0] == 1 && log_ev[1] == 2, "writer overtook a reader: %d %d",
        log_ev[0], log_ev[1]);
  CHECK(at(b, 0) == 3.0f, "b = 2+1, got %g", at(b, 0));
  /* wait_to_read returns once the writes are done; free_arg runs just after, and
   * wait_all covers it (the engine drops an op's arg before it stops counting) */
  CHECK(mx_engine_wait_all() == MX_OK, "wait_all");
  printf("ok writer_waits_for_readers\n");

  /* 3. an error returned by fn is raised at the next sync point, naming the function;
   *    a later op on the failed tensor is not run, its free_arg still runs once */
  int f0 = atomic_load(&frees);
  mx_tensor *d = filled(5), *wd[1] = { d };
  CHECK(mx_engine_push_fn("my_failing_fn", job_run, mk(9, NULL, 0, 10, 1), job_free, 0, NULL, 1,
                          wd, MX_CPU, 0, NULL) == MX_OK, "push failing");
  atomic_store(&log_n, 0);
  CHECK(mx_engine_push_fn("after_failure", job_run, mk(10, NULL, 0, 0, 0), job_free, 1, wd, 0,
                          NULL, MX_CPU, 0, NULL) == MX_OK, "push after failure");
  int rc = mx_tensor_wait_to_read(d);
  CHECK(rc == MX_EASYNC, "wait_to_read after a failing fn returned %d", rc);
  CHECK(strstr(mx_last_error(), "my_failing_fn") != NULL, "message names the fn: %s",
        mx_last_error());
  mx_engine_wait_all(); /* clears the session's error list */
  CHECK(atomic_load(&frees) == f0 + 2, "free_arg ran %d times for 2 fns",
        atomic_load(&frees) - f0);
  printf("ok async_error (%s)\n", mx_last_error());
  mx_tensor_release(d);

  /* 4. bad arguments: error returned, fn not run, free_arg run once */
  f0 = atomic_load(&frees);
  CHECK(mx_engine_push_fn("bad", job_run, mk(0, NULL, 0, 0, 0), job_free, -1, NULL, 0, NULL,
                          MX_CPU, 0, NULL) == MX_EINVAL, "negative nread accepted");
  CHECK(mx_engine_push_fn("bad", NULL, mk(0, NULL, 0, 0, 0), job_free, 0, NULL, 0, NULL,
                          MX_CPU, 0, NULL) == MX_EINVAL, "NULL fn accepted");
  CHECK(atomic_load(&frees) == f0 + 2, "free_arg on refusal ran %d times for 2",
        atomic_load(&frees) - f0);
  printf("ok refusal\n");

  /* 5. naive mode: fn runs inline, before push returns, with its error returned or
   *    raised at once */
  CHECK(mx_engine_set_mode(MX_ENGINE_NAIVE) == MX_OK, "naive");
  atomic_store(&log_n, 0);
  f0 = atomic_load(&frees);
  CHECK(mx_engine_push_fn("naive_fn", job_run, mk(5, a, 1, 0, 0), job_free, 0, NULL, 1, ws,
                          MX_CPU, 0, NULL) == MX_OK, "naive push");
  CHECK(atomic_load(&log_n) == 1 && atomic_load(&frees) == f0 + 1,
        "naive: fn ran %d times and free_arg %d times before push returned",
        atomic_load(&log_n), atomic_load(&frees) - f0);
  CHECK(((float *)mx_tensor_data_nowait(a))[0] == 112.0f, "naive: a = 112");
  mx_tensor *e = filled(0), *we[1] = { e };
  rc = mx_engine_push_fn("naive_failing", job_run, mk(6, NULL, 0, 0, 1), job_free, 0, NULL, 1,
                         we, MX_CPU, 0, NULL);
  int rc2 = rc == MX_OK ? mx_tensor_wait_to_read(e) : rc;
  CHECK(rc2 != MX_OK && strstr(mx_last_error(), "naive_failing"),
        "naive failure not reported naming the fn (rc %d/%d): %s", rc, rc2, mx_last_error());
  mx_engine_wait_all();
  CHECK(atomic_load(&frees) == f0 + 2, "naive free_arg count %d", atomic_load(&frees) - f0);
  CHECK(mx_engine_set_mode(MX_ENGINE_THREADED) == MX_OK, "threaded");
  printf("ok naive\n");

  mx_tensor_release(e);
  mx_tensor_release(c);
  mx_tensor_release(a);
  mx_tensor_release(b);
  printf("PASS\n");
  return 0;
}
