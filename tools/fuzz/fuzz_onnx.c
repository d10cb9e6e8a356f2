/* fuzz_onnx.c — libFuzzer target for the ONNX importer (mx_onnx_import_bytes: protobuf-c's
 * parse of the ModelProto, then core/src/onnx/'s reading of every tensor, attribute and
 * node, import-time evaluation included).
 *
 * Build and run: docs/file-formats.md ("Fuzzing"); seeds: the model.onnx files of
 * libonnx-testdata. Every input must import or be rejected with MX_EFORMAT, MX_EINVAL or
 * MX_ENOMEM and a message, leaving no graph; anything else (a crash, a sanitizer report,
 * a leak) is a bug. No external data is allowed (dir NULL). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mx_graph *g = NULL;
  int nout = -1;
  char **names = NULL;
  int rc = mx_onnx_import_bytes(data, size, NULL, 0, NULL, &g, &nout, &names);
  if (rc != MX_OK) {
    const char *msg = mx_last_error();
    if ((rc != MX_EFORMAT && rc != MX_EINVAL && rc != MX_ENOMEM && rc != MX_EIO) || !msg ||
        !*msg || g || names || nout != 0) {
      fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
      abort();
    }
    return 0;
  }
  if (!g || nout < 0 || !names) abort();
  for (int i = 0; i < nout; i++) mx_free(names[i]);
  mx_free(names);
  mx_graph_free(g);
  return 0;
}
