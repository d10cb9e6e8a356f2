/* fuzz_imdecode.c — libFuzzer target for the image decoder (mx_image_decode: JPEG via
 * libjpeg-turbo, PNG via libpng), each input decoded with flag 1, 0 and -1, and for the
 * header reader mx_image_info (the size it declares must be the size decoded).
 *
 * Build and run: docs/file-formats.md, "Fuzzing" (target fuzz_imdecode; seeds: the
 * images under spec/fixtures/images). Every input must decode or be rejected with
 * MX_EFORMAT / MX_ENOMEM and a message; a crash, a sanitizer report, a leak, an abort
 * from libjpeg's default error_exit or another status is a bug. A decoded image is read
 * back in full so ASan sees a size that disagrees with its allocation. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mx.h"

static void refused(int rc, bool has_out) {
  const char *msg = mx_last_error();
  if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg || has_out) {
    fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int flags[3] = { 1, 0, -1 };
  int64_t ih = -1, iw = -1;
  int ic = -1;
  int irc = mx_image_info(data, size, &ih, &iw, &ic);
  if (irc != MX_OK) refused(irc, false);
  else if (ih < 1 || iw < 1 || ic < 1 || ic > 4) abort();
  for (int f = 0; f < 3; f++) {
    mx_tensor *t = NULL;
    int rc = mx_image_decode(data, size, flags[f], f != 1, &t);
    if (rc != MX_OK) {
      refused(rc, t != NULL);
      return 0; /* the other flags fail the same way */
    }
    if (!t || mx_tensor_ndim(t) != 3) abort();
    int64_t s[3];
    mx_tensor_shape(t, s);
    if (s[2] != (flags[f] == 0 ? 1 : flags[f] == 1 ? 3 : s[2]) || s[2] < 1 || s[2] > 4) abort();
    if (irc == MX_OK && (s[0] != ih || s[1] != iw)) {
      fprintf(stderr, "mx_image_info said %lldx%lld, decoded %lldx%lld\n", (long long)ih,
              (long long)iw, (long long)s[0], (long long)s[1]);
      abort();
    }
    size_t n = (size_t)mx_tensor_size(t);
    const volatile uint8_t *p = mx_tensor_data(t);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++) sink ^= p[i];
    (void)sink;
    mx_tensor_release(t);
  }
  return 0;
}
