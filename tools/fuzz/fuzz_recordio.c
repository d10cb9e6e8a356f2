/* fuzz_recordio.c — libFuzzer target for the RecordIO reader (mx_recordio_open_bytes +
 * mx_recordio_read/seek): MXNet .rec files.
 *
 * Build: see fuzz_idx.c (cmake -DMX_FUZZ=ON, clang); run: build-fuzz/fuzz_recordio
 * -max_len=4096 -malloc_limit_mb=64 CORPUS spec/fixtures/mx191_rec.rec.
 * Every input must read to its end or be rejected with MX_EFORMAT / MX_ENOMEM and a
 * message; a crash, a sanitizer report, a leak or another status is a bug. Each record
 * is read in full (ASan sees a length that disagrees with the buffer), then the reader
 * seeks back to every record start it saw and reads that record again: it must be the
 * same length. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

static void check_failure(int rc) {
  const char *msg = mx_last_error();
  if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg) {
    fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mx_recordio *r = NULL;
  if (mx_recordio_open_bytes(data, size, &r) != MX_OK) abort();
  int64_t starts[64];
  size_t lens[64];
  int n = 0;
  for (;;) {
    int64_t at = mx_recordio_tell(r);
    const void *p = NULL;
    size_t len = 0;
    int rc = mx_recordio_read(r, &p, &len);
    if (rc != MX_OK) {
      check_failure(rc);
      break;
    }
    if (!p) break;
    const volatile uint8_t *b = p;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < len; i++) sink ^= b[i];
    (void)sink;
    if (n < 64) {
      starts[n] = at;
      lens[n++] = len;
    }
  }
  for (int i = n - 1; i >= 0; i--) {
    const void *p = NULL;
    size_t len = 0;
    if (mx_recordio_seek(r, starts[i]) != MX_OK || mx_recordio_read(r, &p, &len) != MX_OK ||
        !p || len != lens[i]) {
      fprintf(stderr, "record %d at %lld did not read back the same\n", i, (long long)starts[i]);
      abort();
    }
  }
  if (mx_recordio_close(r) != MX_OK) abort();
  return 0;
}
