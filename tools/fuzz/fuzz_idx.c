/* fuzz_idx.c — libFuzzer target for the IDX reader (mx_idx_load_bytes): plain and
 * gzip IDX (MNIST / Fashion-MNIST) files.
 *
 * Build: cmake -S . -B build-fuzz -DMX_FUZZ=ON -DCMAKE_C_COMPILER=clang && cmake --build
 * build-fuzz --target fuzz_idx; run: build-fuzz/fuzz_idx -max_len=4096 -malloc_limit_mb=64.
 * Every input must either load or be rejected with MX_EFORMAT / MX_ENOMEM and a
 * message; a crash, a sanitizer report, a leak or another status is a bug. A loaded
 * tensor is read back in full so ASan sees a size that disagrees with its allocation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mx_tensor *t = NULL;
  int rc = mx_idx_load_bytes(data, size, &t);
  if (rc != MX_OK) {
    const char *msg = mx_last_error();
    if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg || t) {
      fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
      abort();
    }
    return 0;
  }
  if (!t) abort();
  size_t n = (size_t)mx_tensor_size(t) * mx_dtype_size(mx_tensor_dtype(t));
  const volatile uint8_t *p = mx_tensor_data(t);
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < n; i++) sink ^= p[i];
  (void)sink;
  mx_tensor_release(t);
  return 0;
}
