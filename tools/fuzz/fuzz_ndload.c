/* fuzz_ndload.c — libFuzzer target for the NDArray file loader (mx_nd_load_bytes):
 * MXNet .params (V1/V2/V3/legacy), .npy and .npz (zip, stored or deflated).
 *
 * Build and run: docs/file-formats.md ("Fuzzing"). Every input must either load or be
 * rejected with MX_EFORMAT / MX_ENOMEM and a message; anything else (a crash, a
 * sanitizer report, a leak, another status) is a bug. Loaded arrays are read back in
 * full so ASan sees any tensor whose size disagrees with its allocation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"
#include "mxnet/c_predict_api.h"

/* MXNet's C predict API reads the same files (MXNDListCreate: the arrays as float32):
 * a handle whose every array reads back in full, or -1 and a message. */
static void ndlist(const uint8_t *data, size_t size) {
  if (size > 0x7fffffff) return;
  NDListHandle h = NULL;
  uint32_t len = 0;
  if (MXNDListCreate((const char *)data, (int)size, &h, &len) != 0) {
    if (!MXGetLastError()[0]) { fprintf(stderr, "MXNDListCreate failed with no message\n"); abort(); }
    return;
  }
  volatile float sink = 0;
  for (uint32_t i = 0; i < len; i++) {
    const char *key;
    const float *d;
    const uint32_t *shape;
    uint32_t nd;
    if (MXNDListGet(h, i, &key, &d, &shape, &nd) != 0) continue; /* (a dtype it refuses) */
    size_t count = 1;
    for (uint32_t k = 0; k < nd; k++) count *= shape[k];
    for (size_t k = 0; k < count; k++) sink += d[k];
  }
  (void)sink;
  MXNDListFree(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ndlist(data, size);
  int n = -1;
  mx_tensor **arrays = NULL;
  char **names = NULL;
  int rc = mx_nd_load_bytes(data, size, &n, &arrays, &names);
  if (rc != MX_OK) {
    const char *msg = mx_last_error();
    if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg || arrays || names || n != 0) {
      fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
      abort();
    }
    return 0;
  }
  if (n < 0 || (n > 0 && !arrays)) abort();
  volatile uint8_t sink = 0;
  for (int i = 0; i < n; i++) {
    mx_tensor *t = arrays[i];
    int64_t count = mx_tensor_size(t);
    size_t bytes = (size_t)count * mx_dtype_size(mx_tensor_dtype(t));
    const uint8_t *p = mx_tensor_data(t);
    for (size_t k = 0; k < bytes; k++) sink ^= p[k];
    if (names) sink ^= (uint8_t)strlen(names[i]);
    mx_tensor_release(t);
    if (names) mx_free(names[i]);
  }
  (void)sink;
  mx_free(arrays);
  mx_free(names);
  return 0;
}
