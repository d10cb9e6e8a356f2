/* fuzz_torchfile.c — libFuzzer target for the PyTorch checkpoint loader
 * (mx_torch_load_bytes: the zip and legacy layouts, the restricted unpickler of
 * core/src/pickle.c and the tensor checks of core/src/torchfile.c).
 *
 * Build and run: docs/file-formats.md ("Fuzzing"). Every input must either load or be
 * rejected with MX_EFORMAT / MX_ENOMEM and a message; anything else (a crash, a
 * sanitizer report, a leak, another status, outputs left behind) is a bug. Loaded arrays
 * are read back in full so ASan sees any tensor whose size disagrees with its
 * allocation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int n = -1;
  mx_tensor **arrays = NULL;
  char **names = NULL;
  int rc = mx_torch_load_bytes(data, size, &n, &arrays, &names);
  if (rc != MX_OK) {
    const char *msg = mx_last_error();
    if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg || arrays || names || n != 0) {
      fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
      abort();
    }
    return 0;
  }
  if (n < 0 || !arrays || !names) abort();
  volatile uint8_t sink = 0;
  for (int i = 0; i < n; i++) {
    mx_tensor *t = arrays[i];
    size_t bytes = (size_t)mx_tensor_size(t) * mx_dtype_size(mx_tensor_dtype(t));
    const uint8_t *p = mx_tensor_data(t);
    for (size_t k = 0; k < bytes; k++) sink ^= p[k];
    sink ^= (uint8_t)strlen(names[i]);
    mx_tensor_release(t);
    mx_free(names[i]);
  }
  (void)sink;
  mx_free(arrays);
  mx_free(names);
  return 0;
}
