/* fuzz_safetensors.c — libFuzzer target for the safetensors loader
 * (mx_safetensors_load_bytes: the header parser and every check of core/src/safetensors.c;
 * the mapped path shares that code).
 *
 * Build and run: docs/file-formats.md ("Fuzzing"). Every input must either load or be
 * rejected with MX_EFORMAT / MX_ENOMEM and a message; anything else (a crash, a
 * sanitizer report, a leak, another status, outputs left behind) is a bug. Loaded tensors
 * are read back in full so that ASan sees any size that disagrees with its allocation,
 * and a load is saved and loaded again: the writer must accept what the reader accepts
 * and give back the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mx.h"

static void free_all(int n, mx_tensor **arrays, char **names, int nmeta, char **meta) {
  for (int i = 0; i < n; i++) {
    mx_tensor_release(arrays[i]);
    mx_free(names[i]);
  }
  for (int i = 0; i < 2 * nmeta; i++) mx_free(meta[i]);
  mx_free(arrays);
  mx_free(names);
  mx_free(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int n = -1, nmeta = -1;
  mx_tensor **arrays = NULL;
  char **names = NULL, **meta = NULL;
  int rc = mx_safetensors_load_bytes(data, size, &n, &arrays, &names, &nmeta, &meta);
  if (rc != MX_OK) {
    const char *msg = mx_last_error();
    if ((rc != MX_EFORMAT && rc != MX_ENOMEM) || !msg || !*msg || arrays || names || meta ||
        n != 0 || nmeta != 0) {
      fprintf(stderr, "unexpected failure: rc %d, message '%s'\n", rc, msg ? msg : "(null)");
      abort();
    }
    return 0;
  }
  if (n < 0 || nmeta < 0 || !arrays || !names || !meta) abort();
  volatile uint8_t sink = 0;
  for (int i = 0; i < n; i++) {
    mx_tensor *t = arrays[i];
    size_t bytes = (size_t)mx_tensor_size(t) * mx_dtype_size(mx_tensor_dtype(t));
    const uint8_t *p = mx_tensor_data(t);
    for (size_t k = 0; k < bytes; k++) sink ^= p[k];
    sink ^= (uint8_t)strlen(names[i]);
  }
  (void)sink;
  /* what loads must save and load back the same */
  char path[64];
  snprintf(path, sizeof path, "/tmp/fuzz_st.%d.safetensors", (int)getpid());
  const char **keys = malloc(sizeof(char *) * (size_t)(nmeta + 1));
  const char **vals = malloc(sizeof(char *) * (size_t)(nmeta + 1));
  if (!keys || !vals) abort();
  for (int i = 0; i < nmeta; i++) keys[i] = meta[2 * i], vals[i] = meta[2 * i + 1];
  if (mx_safetensors_save(path, n, arrays, (const char *const *)names, nmeta, keys, vals) != MX_OK) {
    fprintf(stderr, "save of a loaded file failed: %s\n", mx_last_error());
    abort();
  }
  free(keys);
  free(vals);
  int n2;
  mx_tensor **a2;
  char **nm2, **m2;
  int nmeta2;
  if (mx_safetensors_load(path, 0, &n2, &a2, &nm2, &nmeta2, &m2) != MX_OK || n2 != n ||
      nmeta2 != nmeta) {
    fprintf(stderr, "reload failed: %s\n", mx_last_error());
    abort();
  }
  for (int i = 0; i < n2; i++) { /* same name, same bytes (names are unique) */
    int j = 0;
    while (j < n && strcmp(names[j], nm2[i]) != 0) j++;
    if (j == n || mx_tensor_dtype(arrays[j]) != mx_tensor_dtype(a2[i]) ||
        mx_tensor_size(arrays[j]) != mx_tensor_size(a2[i]) ||
        memcmp(mx_tensor_data(arrays[j]), mx_tensor_data(a2[i]),
               (size_t)mx_tensor_size(a2[i]) * mx_dtype_size(mx_tensor_dtype(a2[i]))) != 0)
      abort();
  }
  unlink(path);
  free_all(n2, a2, nm2, nmeta2, m2);
  free_all(n, arrays, names, nmeta, meta);
  return 0;
}
