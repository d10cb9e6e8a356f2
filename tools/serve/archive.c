/* archive.c — model archives: a directory or a tar (optionally gzip'd) holding
 * MANIFEST.json, the model's files (symbol JSON + params, or ONNX), the handler (a
 * built-in name or a .lua file) and any extra files the handler reads (labels...).
 * docs/serving.md "Model archives" documents the manifest.
 *
 * Reading a tar (libarchive) extracts it into a private directory: regular files and
 * directories only (links, devices and fifos are refused), relative paths without "..",
 * bounded entry count and size, files created O_EXCL | O_NOFOLLOW. `mx-serve archive`
 * writes one atomically (a temporary beside the target, fsync, rename). */
#include "proto.h"
#include "serve.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 10000
#define MAX_TOTAL ((int64_t)16 << 30)

static const char *const BUILTIN_HANDLERS[] = {"image_classifier", "json_tensor", NULL};
static const char *const DTYPES[] = {"float32", "float64", "float16", "uint8", "int32",
                                     "int8", "int64", "bool", "bfloat16", NULL};

static int in_list(const char *s, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(s, list[i])) return 1;
  return 0;
}

/* a relative path inside the archive: no "..", no absolute path, no empty part */
static int safe_rel(const char *p) {
  if (!p || !*p || p[0] == '/' || strlen(p) > 1024) return 0;
  const char *s = p;
  while (*s) {
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 0 || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    if (!e) break;
    s = e + 1;
  }
  return 1;
}

static int file_in(const char *dir, const char *rel, const char *what, char *msg, size_t cap) {
  if (!safe_rel(rel)) {
    snprintf(msg, cap, "MANIFEST.json: %s '%s' must be a relative path inside the archive", what,
             rel ? rel : "");
    return -1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  struct stat st;
  if (lstat(path, &st) || !S_ISREG(st.st_mode)) {
    snprintf(msg, cap, "MANIFEST.json: %s '%s' is not a file of the archive", what, rel);
    return -1;
  }
  return 0;
}

static const char *str_field(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

int mxs_manifest_check(json_t *m, const char *dir, char *msg, size_t cap) {
  if (!json_is_object(m)) {
    snprintf(msg, cap, "MANIFEST.json: expected a JSON object");
    return -1;
  }
  const char *name = str_field(m, "model_name");
  if (!name || !mxs_valid_name(name)) {
    snprintf(msg, cap, "MANIFEST.json: model_name must be 1..128 of [A-Za-z0-9_.-] (got %s)",
             name ? name : "none");
    return -1;
  }
  const char *ver = str_field(m, "model_version");
  if (json_object_get(m, "model_version") && (!ver || !mxs_valid_name(ver))) {
    snprintf(msg, cap, "MANIFEST.json: model_version must be a string of [A-Za-z0-9_.-]");
    return -1;
  }
  /* no "model": the handler brings its own (or none) */
  json_t *model = json_object_get(m, "model");
  if (model && !json_is_object(model)) {
    snprintf(msg, cap, "MANIFEST.json: 'model' must be an object naming the model's files "
             "({\"symbol\": ..., \"params\": ...} or {\"onnx\": ...})");
    return -1;
  }
  const char *sym = str_field(model, "symbol"), *params = str_field(model, "params");
  const char *onnx = str_field(model, "onnx");
  if (onnx && (sym || params)) {
    snprintf(msg, cap, "MANIFEST.json: model names both an ONNX file and a symbol/params pair");
    return -1;
  }
  if (onnx) {
    if (file_in(dir, onnx, "model.onnx", msg, cap)) return -1;
  } else if (sym) {
    if (file_in(dir, sym, "model.symbol", msg, cap)) return -1;
    if (params && file_in(dir, params, "model.params", msg, cap)) return -1;
  } else if (model && json_object_size(model) > 0) {
    snprintf(msg, cap, "MANIFEST.json: model needs 'symbol' (and 'params') or 'onnx'");
    return -1;
  }
  const char *handler = str_field(m, "handler");
  if (!handler) {
    snprintf(msg, cap, "MANIFEST.json: 'handler' must name a built-in handler (image_classifier, "
             "json_tensor) or a .lua file of the archive");
    return -1;
  }
  if (!in_list(handler, BUILTIN_HANDLERS) && file_in(dir, handler, "handler", msg, cap)) return -1;
  json_t *sig = json_object_get(m, "signature");
  json_t *ins = json_object_get(sig, "inputs");
  if (!json_is_array(ins) || json_array_size(ins) == 0 || json_array_size(ins) > 64) {
    snprintf(msg, cap, "MANIFEST.json: signature.inputs must list the model's inputs "
             "([{\"name\": \"data\", \"dtype\": \"float32\", \"shape\": [-1, 3, 224, 224]}])");
    return -1;
  }
  size_t i;
  json_t *in;
  json_array_foreach(ins, i, in) {
    const char *iname = str_field(in, "name"), *dt = str_field(in, "dtype");
    json_t *shape = json_object_get(in, "shape");
    if (!iname || !*iname || strlen(iname) > 256) {
      snprintf(msg, cap, "MANIFEST.json: signature.inputs[%zu] needs a name", i);
      return -1;
    }
    if (dt && !in_list(dt, DTYPES)) {
      snprintf(msg, cap, "MANIFEST.json: input '%s' has dtype '%s' (float32, float64, float16, "
               "uint8, int32, int8, int64, bool, bfloat16)", iname, dt);
      return -1;
    }
    if (!json_is_array(shape) || json_array_size(shape) == 0 || json_array_size(shape) > 8) {
      snprintf(msg, cap, "MANIFEST.json: input '%s' needs a shape of 1..8 dims (-1: any size)",
               iname);
      return -1;
    }
    size_t k;
    json_t *d;
    json_array_foreach(shape, k, d) {
      if (!json_is_integer(d) || json_integer_value(d) < -1 || json_integer_value(d) > (1 << 30)) {
        snprintf(msg, cap, "MANIFEST.json: input '%s' dim %zu must be an integer >= -1", iname, k);
        return -1;
      }
    }
  }
  static const char *const INTS[] = {"batch_size", "max_batch_delay", "response_timeout", NULL};
  for (int k = 0; INTS[k]; k++) {
    json_t *v = json_object_get(m, INTS[k]);
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
              json_integer_value(v) > 86400000)) {
      snprintf(msg, cap, "MANIFEST.json: %s must be a non-negative integer", INTS[k]);
      return -1;
    }
  }
  json_t *cfg = json_object_get(m, "config");
  if (cfg && !json_is_object(cfg)) {
    snprintf(msg, cap, "MANIFEST.json: config must be an object (the handler's settings)");
    return -1;
  }
  return 0;
}

static int mkdirs(const char *root, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(path, 0700) && errno != EEXIST) return -1;
    *p = '/';
  }
  return 0;
}

static int extract_tar(const char *path, const char *dir, char *msg, size_t cap) {
  struct archive *a = archive_read_new();
  if (!a) {
    snprintf(msg, cap, "out of memory");
    return -1;
  }
  archive_read_support_format_tar(a);
  archive_read_support_format_gnutar(a);
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_none(a);
  int rc = -1, entries = 0;
  int64_t total = 0;
  if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
    snprintf(msg, cap, "archive '%s': %s", path, archive_error_string(a));
    archive_read_free(a);
    return -1;
  }
  struct archive_entry *e;
  char buf[1 << 16];
  for (;;) {
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) {
      rc = 0;
      break;
    }
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      snprintf(msg, cap, "archive '%s': %s", path, archive_error_string(a));
      break;
    }
    const char *name = archive_entry_pathname(e);
    while (name && name[0] == '.' && name[1] == '/') name += 2;
    if (!name || !*name || !strcmp(name, ".")) continue;
    char rel[1100];
    snprintf(rel, sizeof rel, "%s", name);
    size_t rl = strlen(rel);
    while (rl && rel[rl - 1] == '/') rel[--rl] = 0;
    if (++entries > MAX_ENTRIES) {
      snprintf(msg, cap, "archive '%s': more than %d entries", path, MAX_ENTRIES);
      break;
    }
    if (!safe_rel(rel)) {
      snprintf(msg, cap, "archive '%s': entry '%s' leaves the archive (absolute or '..')", path,
               name);
      break;
    }
    mode_t type = archive_entry_filetype(e);
    if (type == AE_IFDIR) {
      char full[4096];
      snprintf(full, sizeof full, "%s/%s", dir, rel);
      if (mkdirs(dir, rel) || (mkdir(full, 0700) && errno != EEXIST)) {
        snprintf(msg, cap, "archive '%s': cannot create '%s': %s", path, rel, strerror(errno));
        break;
      }
      continue;
    }
    if (type != AE_IFREG) {
      snprintf(msg, cap, "archive '%s': entry '%s' is not a regular file or directory (links "
               "and devices are refused)", path, name);
      break;
    }
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, rel);
    int fd = mkdirs(dir, rel) ? -1 : open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd < 0) {
      snprintf(msg, cap, "archive '%s': cannot create '%s': %s", path, rel, strerror(errno));
      break;
    }
    int bad = 0;
    for (;;) {
      la_ssize_t n = archive_read_data(a, buf, sizeof buf);
      if (n == 0) break;
      if (n < 0) {
        snprintf(msg, cap, "archive '%s': entry '%s': %s", path, name, archive_error_string(a));
        bad = 1;
        break;
      }
      total += n;
      if (total > MAX_TOTAL) {
        snprintf(msg, cap, "archive '%s': more than %lld bytes unpacked", path, (long long)MAX_TOTAL);
        bad = 1;
        break;
      }
      if (mxs_write_all(fd, buf, (size_t)n)) {
        snprintf(msg, cap, "archive '%s': writing '%s': %s", path, rel, strerror(errno));
        bad = 1;
        break;
      }
    }
    close(fd);
    if (bad) break;
  }
  archive_read_free(a);
  return rc;
}

int mxs_archive_open(const char *path, char **dirp, int *own, json_t **manifest, char *msg,
                     size_t cap) {
  *dirp = NULL;
  *own = 0;
  *manifest = NULL;
  struct stat st;
  if (stat(path, &st)) {
    snprintf(msg, cap, "archive '%s': %s", path, strerror(errno));
    return -1;
  }
  char *dir = NULL;
  if (S_ISDIR(st.st_mode)) {
    dir = realpath(path, NULL);
  } else if (S_ISREG(st.st_mode)) {
    const char *tmp = getenv("TMPDIR");
    char *tmpl = mxs_printf("%s/mx-serve-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!tmpl || !mkdtemp(tmpl)) {
      snprintf(msg, cap, "archive '%s': cannot make a directory to unpack it: %s", path,
               strerror(errno));
      free(tmpl);
      return -1;
    }
    if (extract_tar(path, tmpl, msg, cap)) {
      mxs_rmtree(tmpl);
      free(tmpl);
      return -1;
    }
    dir = tmpl;
    *own = 1;
  } else {
    snprintf(msg, cap, "archive '%s' is neither a directory nor a file", path);
    return -1;
  }
  if (!dir) {
    snprintf(msg, cap, "out of memory");
    return -1;
  }
  char *mpath = mxs_printf("%s/MANIFEST.json", dir);
  json_error_t je;
  json_t *m = mpath ? json_load_file(mpath, JSON_REJECT_DUPLICATES, &je) : NULL;
  free(mpath);
  int rc = 0;
  if (!m) {
    snprintf(msg, cap, "archive '%s': MANIFEST.json: %s (line %d)", path, je.text, je.line);
    rc = -1;
  } else if (mxs_manifest_check(m, dir, msg, cap)) {
    rc = -1;
  }
  if (rc) {
    json_decref(m);
    if (*own) mxs_rmtree(dir);
    free(dir);
    *own = 0;
    return -1;
  }
  *dirp = dir;
  *manifest = m;
  return 0;
}
