/* capi_demo.c — a C program with no Lua running luamx ops by their MXNet names with
 * MXNet's string attributes, as a symbol JSON importer would: FullyConnected ->
 * Activation -> broadcast_add -> softmax, each result checked against values computed
 * by hand here, then two malformed calls that must fail with a clear message.
 * Exit 0 when everything matches, 1 otherwise. spec/capi_spec.lua runs it. */
#include "mx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static int find(const char *name) {
  int op = mx_op_find(name);
  if (op < 0) {
    printf("FAIL: mx_op_find(\"%s\") found nothing\n", name);
    failures++;
  } else {
    printf("found %s -> op %d (%s)\n", name, op, mx_op_name(op));
  }
  return op;
}

/* Compares t's shape and values with the expectation; prints what it checked. */
static void expect(const char *what, mx_tensor *t, int ndim, const int64_t *shape,
                   const double *want, int n) {
  if (!t) {
    printf("FAIL: %s: no result\n", what);
    failures++;
    return;
  }
  int64_t got_shape[8];
  int got_ndim = mx_tensor_shape(t, got_shape);
  bool ok = got_ndim == ndim && mx_tensor_size(t) == n;
  for (int i = 0; ok && i < ndim; i++) ok = got_shape[i] == shape[i];
  double got[16];
  if (ok && mx_tensor_get_all_f64(t, got, n) != MX_OK) {
    printf("FAIL: %s: reading the result: %s\n", what, mx_last_error());
    failures++;
    return;
  }
  for (int i = 0; ok && i < n; i++) ok = fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i]));
  printf("%s %s:", ok ? "ok" : "FAIL:", what);
  for (int i = 0; i < n && got_ndim == ndim && mx_tensor_size(t) == n; i++) printf(" %.6g", got[i]);
  printf("\n");
  if (!ok) failures++;
}

/* Runs op with attributes; NULL (and a FAIL line) on error. */
static mx_tensor *run1(int op, int nin, mx_tensor *const *in, int nattr, const char *const *k,
                       const char *const *v) {
  mx_tensor *out[2] = {NULL, NULL};
  if (op < 0) return NULL;
  if (mx_op_invoke_attrs(op, nin, in, nattr, k, v, mx_op_num_outputs(op), out) != MX_OK) {
    printf("FAIL: %s: %s\n", mx_op_name(op), mx_last_error());
    failures++;
    return NULL;
  }
  mx_tensor_release(out[1]);
  return out[0];
}

/* A call that must fail, with a message containing every word in `must`. */
static void expect_error(const char *what, int op, int nin, mx_tensor *const *in, int nattr,
                         const char *const *k, const char *const *v, const char *const *must) {
  mx_tensor *out[2] = {NULL, NULL};
  int rc = mx_op_invoke_attrs(op, nin, in, nattr, k, v, 1, out);
  if (rc == MX_OK) {
    printf("FAIL: %s: accepted\n", what);
    failures++;
    mx_tensor_release(out[0]);
    return;
  }
  const char *msg = mx_last_error();
  bool ok = rc == MX_EINVAL && out[0] == NULL;
  for (int i = 0; must[i]; i++) ok = ok && strstr(msg, must[i]) != NULL;
  printf("%s %s: error: %s\n", ok ? "ok" : "FAIL:", what, msg);
  if (!ok) failures++;
}

int main(void) {
  int fc = find("FullyConnected"), act = find("Activation"), add = find("broadcast_add"),
      sm = find("softmax");
  if (failures) return 1;

  /* x (2, 3) and the FC parameters: memory owned here (no deleter) */
  static float x[6] = {1, 2, 3, 4, 5, 6};
  static float w[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}; /* (num_hidden 2, in_units 3) */
  static float b[2] = {0.1f, -4};
  int64_t sx[2] = {2, 3}, sw[2] = {2, 3}, sb[1] = {2}, sc[2] = {1, 2};
  mx_tensor *tx = NULL, *tw = NULL, *tb = NULL, *tc = NULL;
  if (mx_tensor_from_data(x, 2, sx, MX_F32, NULL, NULL, &tx) ||
      mx_tensor_from_data(w, 2, sw, MX_F32, NULL, NULL, &tw) ||
      mx_tensor_from_data(b, 1, sb, MX_F32, NULL, NULL, &tb) ||
      mx_tensor_empty(2, sc, MX_F32, MX_CPU, 0, &tc)) {
    printf("FAIL: making tensors: %s\n", mx_last_error());
    return 1;
  }
  const double c[2] = {1, -1};
  mx_tensor_set_from_f64(tc, c, 2);

  /* y = x w^T + b, by hand */
  double y[4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      double s = b[j];
      for (int k = 0; k < 3; k++) s += (double)x[i * 3 + k] * w[j * 3 + k];
      y[i * 2 + j] = s;
    }
  int64_t s22[2] = {2, 2};

  const char *fk[] = {"num_hidden", "no_bias", "flatten"};
  const char *fv[] = {"2", "False", "True"};
  mx_tensor *fin[3] = {tx, tw, tb};
  mx_tensor *ty = run1(fc, 3, fin, 3, fk, fv);
  expect("FullyConnected(num_hidden=2, no_bias=False, flatten=True)", ty, 2, s22, y, 4);

  double r[4];
  for (int i = 0; i < 4; i++) r[i] = y[i] > 0 ? y[i] : 0;
  const char *ak[] = {"act_type"}, *av[] = {"relu"};
  mx_tensor *tr = run1(act, 1, &ty, 1, ak, av);
  expect("Activation(act_type=relu)", tr, 2, s22, r, 4);

  double a[4];
  for (int i = 0; i < 4; i++) a[i] = r[i] + c[i % 2];
  mx_tensor *ain[2] = {tr, tc};
  mx_tensor *ta = run1(add, 2, ain, 0, NULL, NULL);
  expect("broadcast_add((2, 2), (1, 2))", ta, 2, s22, a, 4);

  /* softmax over the last axis (MXNet's axis -1, written 0-based as "1") at temperature 2 */
  double p[4];
  for (int i = 0; i < 2; i++) {
    double e0 = exp(a[i * 2] / 2), e1 = exp(a[i * 2 + 1] / 2);
    p[i * 2] = e0 / (e0 + e1);
    p[i * 2 + 1] = e1 / (e0 + e1);
  }
  const char *sk[] = {"axis", "temperature"}, *sv[] = {"1", "2.0"};
  mx_tensor *tp = run1(sm, 1, &ta, 2, sk, sv);
  expect("softmax(axis=1, temperature=2.0)", tp, 2, s22, p, 4);

  /* malformed: a word for an integer, and a key FullyConnected does not have */
  const char *bk[] = {"num_hidden"}, *bv[] = {"ten"};
  const char *must1[] = {"fully_connected", "num_hidden", "ten", NULL};
  expect_error("num_hidden=\"ten\"", fc, 3, fin, 1, bk, bv, must1);
  const char *uk[] = {"num_hiden"}, *uv[] = {"2"};
  const char *must2[] = {"fully_connected", "num_hiden", "unknown", NULL};
  expect_error("unknown key num_hiden", fc, 3, fin, 1, uk, uv, must2);

  mx_tensor_release(tp);
  mx_tensor_release(ta);
  mx_tensor_release(tr);
  mx_tensor_release(ty);
  mx_tensor_release(tc);
  mx_tensor_release(tb);
  mx_tensor_release(tw);
  mx_tensor_release(tx);
  mx_engine_wait_all();
  printf("%s (%d failure%s)\n", failures ? "FAILED" : "PASSED", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
