/* fuzz_symjson.c — libFuzzer target for the symbol JSON reader (mx_graph_from_json):
 * MXNet 1.x symbol files and the pre-1.0 form.
 *
 * Build: see fuzz_idx.c (cmake -DMX_FUZZ=ON, clang); run: build-fuzz/fuzz_symjson
 * -max_len=8192 -malloc_limit_mb=256 -dict=tools/fuzz/fuzz_symjson.dict CORPUS
 * spec/fixtures/sym_*-symbol.json. Every input must load or be rejected with MX_EFORMAT /
 * MX_ENOMEM and a message; a crash, a sanitizer report, a leak or another status is a
 * bug. A graph that loads must write (mx_graph_to_json), and what it writes must load
 * again and write the same text: the writer never emits what the reader refuses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

static void check_failure(int rc, const char *what) {
  const char *msg = mx_last_error();
  if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg) {
    fprintf(stderr, "%s: unexpected failure: rc %d, message '%s'\n", what, rc,
            msg ? msg : "(null)");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  mx_graph *g = NULL;
  int rc = mx_graph_from_json(text, &g);
  free(text);
  if (rc != MX_OK) {
    check_failure(rc, "from_json");
    if (g) abort();
    return 0;
  }
  char *js = NULL;
  rc = mx_graph_to_json(g, &js);
  mx_graph_free(g);
  if (rc == MX_ENOMEM) return 0;
  if (rc != MX_OK) {
    fprintf(stderr, "to_json of a loaded graph failed: %s\n", mx_last_error());
    abort();
  }
  mx_graph *g2 = NULL;
  rc = mx_graph_from_json(js, &g2);
  if (rc != MX_OK) {
    fprintf(stderr, "what to_json wrote does not load: %s\n%s\n", mx_last_error(), js);
    abort();
  }
  char *js2 = NULL;
  rc = mx_graph_to_json(g2, &js2);
  mx_graph_free(g2);
  if (rc == MX_OK && strcmp(js, js2) != 0) {
    fprintf(stderr, "second write differs:\n%s\n%s\n", js, js2);
    abort();
  }
  mx_free(js);
  mx_free(js2);
  return 0;
}
