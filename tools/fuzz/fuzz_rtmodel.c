/* fuzz_rtmodel.c — libFuzzer target for the inference runtime's model reader
 * (mx_rt_model_from_memory: an exported model's symbol JSON and .params bytes) and MXNet's
 * C predict API over it (MXPredCreate: the same bytes, a status and a message).
 *
 * An input is a 4-byte little-endian length L, a byte ndim (1..4, taken mod 4) and ndim
 * bytes of dims (each 1..64) for the model's one input "data", then L bytes of symbol
 * JSON, then the .params bytes (the replay seeds, spec/fuzz_replay_spec.lua, are the
 * exported fixture models packed so, with their data's shape). Every input must load (then a context is made and run) or
 * be rejected with MX_RT_EINVAL / MX_RT_EFORMAT / MX_RT_ENOMEM and a message; a crash, a
 * sanitizer report, a leak or another status is a bug. Build and run: docs/file-formats.md
 * "Fuzzing" (target fuzz_rtmodel, -max_len=65536). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mx_runtime.h"
#include "mxnet/c_predict_api.h"

static void check_failure(int rc, const char *what) {
  const char *msg = mx_rt_last_error();
  if ((rc != MX_RT_EINVAL && rc != MX_RT_EFORMAT && rc != MX_RT_ENOMEM) || !msg || !*msg) {
    fprintf(stderr, "%s: unexpected failure: rc %d, message '%s'\n", what, rc,
            msg ? msg : "(null)");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  size_t L = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
  int ndim = data[4] % 4 + 1;
  if (size < 5 + (size_t)ndim) return 0;
  int64_t shape[4];
  uint32_t sdata[4];
  for (int d = 0; d < ndim; d++) shape[d] = sdata[d] = (uint32_t)(data[5 + d] % 64 + 1);
  size_t at = 5 + (size_t)ndim;
  if (L > size - at) L = size - at;
  char *json = malloc(L + 1);
  if (!json) return 0;
  memcpy(json, data + at, L);
  json[L] = '\0';
  const uint8_t *params = data + at + L;
  size_t np = size - at - L;
  mx_rt_input in = {"data", ndim, shape, -1};
  /* the C predict API: fails with -1 and a message, or gives a handle */
  const char *keys[1] = {"data"};
  uint32_t indptr[2] = {0, (uint32_t)ndim};
  PredictorHandle ph = NULL;
  if (np <= 0x7fffffff) {
    if (MXPredCreate(json, np ? params : NULL, (int)np, 1, 0, 1, keys, indptr, sdata, &ph) == 0)
      MXPredFree(ph);
    else if (!MXGetLastError()[0]) {
      fprintf(stderr, "MXPredCreate failed with no message\n");
      abort();
    }
  }
  mx_rt_model *m = NULL;
  int rc = mx_rt_model_from_memory(json, np ? params : NULL, np, 1, &in, NULL, &m);
  free(json);
  if (rc != MX_RT_OK) {
    if (m) { fprintf(stderr, "a failed load returned a model\n"); abort(); }
    check_failure(rc, "mx_rt_model_from_memory");
    return 0;
  }
  mx_rt_ctx *c = NULL;
  rc = mx_rt_ctx_new(m, &c);
  if (rc == MX_RT_OK) {
    rc = mx_rt_run(c);
    if (rc != MX_RT_OK) check_failure(rc, "mx_rt_run");
    mx_rt_ctx_free(c);
  } else {
    check_failure(rc, "mx_rt_ctx_new");
  }
  mx_rt_model_free(m);
  return 0;
}
