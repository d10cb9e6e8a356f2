/* archive_tool.c — `mx-serve archive`: packs a model into an archive (a tar, a tar.gz or
 * a directory) with its MANIFEST.json, in the spirit of torch-model-archiver:
 *
 *   mx-serve archive --model-name resnet18 --version 1.0 \
 *       --symbol resnet18-symbol.json --params resnet18-0000.params \
 *       --handler image_classifier --input data:float32:-1,3,224,224 \
 *       --extra-files labels.txt --export-path model_store [--format tar|tgz|dir] [--force]
 *
 * Files go into the archive under their base names. The result is written atomically:
 * a temporary beside it, fsync'd, then renamed over the target. */
#include "proto.h"
#include "serve.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: mx-serve archive --model-name NAME [--version V]\n"
          "         (--symbol FILE [--params FILE] | --onnx FILE)\n"
          "         --handler image_classifier|json_tensor|FILE.lua\n"
          "         --input NAME:DTYPE:D0,D1,... (repeat per input; -1: any size)\n"
          "         [--extra-files F1,F2,...] [--config JSON] [--batch-size N]\n"
          "         [--max-batch-delay MS] [--response-timeout MS]\n"
          "         [--export-path DIR] [--format tar|tgz|dir] [--force]\n");
}

typedef struct file_ref {
  const char *src;
  char *base;
} file_ref;

static int parse_input(const char *spec, json_t *inputs) {
  char *s = mxs_strdup(spec);
  char *c1 = s ? strchr(s, ':') : NULL, *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c2) {
    fprintf(stderr, "mx-serve archive: --input '%s': expected NAME:DTYPE:D0,D1,...\n", spec);
    free(s);
    return -1;
  }
  *c1 = *c2 = 0;
  json_t *shape = json_array();
  for (char *tok = strtok(c2 + 1, ","); tok; tok = strtok(NULL, ",")) {
    long d;
    if (mxs_parse_int(tok, -1, 1L << 30, &d)) {
      fprintf(stderr, "mx-serve archive: --input '%s': dim '%s' is not an integer >= -1\n", spec, tok);
      json_decref(shape);
      free(s);
      return -1;
    }
    json_array_append_new(shape, json_integer(d));
  }
  json_array_append_new(inputs, json_pack("{s:s,s:s,s:o}", "name", s, "dtype", c1 + 1, "shape", shape));
  free(s);
  return 0;
}

static int add_file(struct archive *a, const char *src, const char *name) {
  int fd = open(src, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    fprintf(stderr, "mx-serve archive: cannot read '%s': %s\n", src, fd < 0 ? strerror(errno) : "not a file");
    if (fd >= 0) close(fd);
    return -1;
  }
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, name);
  archive_entry_set_size(e, st.st_size);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_mtime(e, st.st_mtime, 0);
  int rc = archive_write_header(a, e) == ARCHIVE_OK ? 0 : -1;
  char buf[1 << 16];
  ssize_t n;
  while (!rc && (n = read(fd, buf, sizeof buf)) > 0)
    if (archive_write_data(a, buf, (size_t)n) != n) rc = -1;
  if (rc) fprintf(stderr, "mx-serve archive: writing '%s': %s\n", name, archive_error_string(a));
  archive_entry_free(e);
  close(fd);
  return rc;
}

static int add_bytes(struct archive *a, const char *name, const char *p, size_t n) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, name);
  archive_entry_set_size(e, (la_int64_t)n);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_mtime(e, time(NULL), 0);
  int rc = archive_write_header(a, e) == ARCHIVE_OK && archive_write_data(a, p, n) == (la_ssize_t)n ? 0 : -1;
  archive_entry_free(e);
  return rc;
}

static int copy_to(const char *src, const char *dst) {
  int in = open(src, O_RDONLY), out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL, 0644);
  int rc = in < 0 || out < 0 ? -1 : 0;
  char buf[1 << 16];
  ssize_t n;
  while (!rc && (n = read(in, buf, sizeof buf)) > 0) rc = mxs_write_all(out, buf, (size_t)n);
  if (!rc && fsync(out)) rc = -1;
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  if (rc) fprintf(stderr, "mx-serve archive: copying '%s': %s\n", src, strerror(errno));
  return rc;
}

static int write_dir(const char *target, file_ref *files, int nf, const char *man, int force) {
  char *tmp = mxs_printf("%s.tmp-XXXXXX", target);
  if (!tmp || !mkdtemp(tmp)) {
    fprintf(stderr, "mx-serve archive: cannot create a directory beside '%s': %s\n", target, strerror(errno));
    free(tmp);
    return 1;
  }
  int rc = 0;
  for (int i = 0; !rc && i < nf; i++) {
    char *dst = mxs_printf("%s/%s", tmp, files[i].base);
    rc = copy_to(files[i].src, dst);
    free(dst);
  }
  char *mp = mxs_printf("%s/MANIFEST.json", tmp);
  int fd = rc ? -1 : open(mp, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (!rc && (fd < 0 || mxs_write_all(fd, man, strlen(man)) || fsync(fd))) rc = -1;
  if (fd >= 0) close(fd);
  free(mp);
  struct stat st;
  if (!rc && stat(target, &st) == 0) {
    if (!force) {
      fprintf(stderr, "mx-serve archive: '%s' exists (--force replaces it)\n", target);
      rc = -1;
    } else if (mxs_rmtree(target)) {
      fprintf(stderr, "mx-serve archive: cannot remove the old '%s'\n", target);
      rc = -1;
    }
  }
  if (!rc && rename(tmp, target)) {
    fprintf(stderr, "mx-serve archive: rename to '%s': %s\n", target, strerror(errno));
    rc = -1;
  }
  if (rc) mxs_rmtree(tmp);
  free(tmp);
  return rc ? 1 : 0;
}

static int write_tar(const char *target, int gz, file_ref *files, int nf, const char *man, int force) {
  struct stat st;
  if (!force && stat(target, &st) == 0) {
    fprintf(stderr, "mx-serve archive: '%s' exists (--force replaces it)\n", target);
    return 1;
  }
  char *tmp = mxs_printf("%s.tmp-XXXXXX", target);
  int fd = tmp ? mkstemp(tmp) : -1;
  if (fd < 0) {
    fprintf(stderr, "mx-serve archive: cannot create a file beside '%s': %s\n", target, strerror(errno));
    free(tmp);
    return 1;
  }
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gz) archive_write_add_filter_gzip(a);
  int rc = archive_write_open_fd(a, fd) == ARCHIVE_OK ? 0 : -1;
  if (!rc) rc = add_bytes(a, "MANIFEST.json", man, strlen(man));
  for (int i = 0; !rc && i < nf; i++) rc = add_file(a, files[i].src, files[i].base);
  if (archive_write_close(a) != ARCHIVE_OK) rc = -1;
  archive_write_free(a);
  if (!rc && fsync(fd)) rc = -1;
  close(fd);
  if (!rc && chmod(tmp, 0644)) rc = -1;
  if (!rc && rename(tmp, target)) rc = -1;
  if (rc) {
    fprintf(stderr, "mx-serve archive: writing '%s' failed\n", target);
    unlink(tmp);
  }
  free(tmp);
  return rc ? 1 : 0;
}

static char *base_of(const char *p) {
  char *c = mxs_strdup(p);
  char *b = c ? mxs_strdup(basename(c)) : NULL;
  free(c);
  return b;
}

int mxs_archive_main(int argc, char **argv) {
  static struct option opts[] = {
      {"model-name", 1, 0, 'n'}, {"version", 1, 0, 'v'}, {"symbol", 1, 0, 's'},
      {"params", 1, 0, 'p'}, {"onnx", 1, 0, 'o'}, {"handler", 1, 0, 'H'}, {"input", 1, 0, 'i'},
      {"extra-files", 1, 0, 'e'}, {"config", 1, 0, 'c'}, {"batch-size", 1, 0, 'b'},
      {"max-batch-delay", 1, 0, 'd'}, {"response-timeout", 1, 0, 't'},
      {"export-path", 1, 0, 'x'}, {"format", 1, 0, 'f'}, {"force", 0, 0, 'F'},
      {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  const char *name = NULL, *version = "1.0", *sym = NULL, *params = NULL, *onnx = NULL;
  const char *handler = NULL, *extra = NULL, *config = NULL, *export_path = ".", *format = "tar";
  long batch = -1, delay = -1, timeout = -1;
  int force = 0;
  json_t *inputs = json_array();
  int c, li = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "", opts, &li)) != -1) {
    switch (c) {
    case 'n': name = optarg; break;
    case 'v': version = optarg; break;
    case 's': sym = optarg; break;
    case 'p': params = optarg; break;
    case 'o': onnx = optarg; break;
    case 'H': handler = optarg; break;
    case 'i': if (parse_input(optarg, inputs)) return 2; break;
    case 'e': extra = optarg; break;
    case 'c': config = optarg; break;
    case 'b': if (mxs_parse_int(optarg, 1, 4096, &batch)) goto bad_int; break;
    case 'd': if (mxs_parse_int(optarg, 0, 60000, &delay)) goto bad_int; break;
    case 't': if (mxs_parse_int(optarg, 1, 86400000, &timeout)) goto bad_int; break;
    case 'x': export_path = optarg; break;
    case 'f': format = optarg; break;
    case 'F': force = 1; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
    continue;
  bad_int:
    fprintf(stderr, "mx-serve archive: --%s '%s' is out of range\n", opts[li].name, optarg);
    return 2;
  }
  if (!name || !handler || (!sym && !onnx) || json_array_size(inputs) == 0) {
    fprintf(stderr, "mx-serve archive: --model-name, --handler, --input and --symbol or --onnx are required\n");
    usage(stderr);
    return 2;
  }
  if (!mxs_valid_name(name) || !mxs_valid_name(version)) {
    fprintf(stderr, "mx-serve archive: names and versions are 1..128 of [A-Za-z0-9_.-]\n");
    return 2;
  }
  int gz = !strcmp(format, "tgz"), dir = !strcmp(format, "dir");
  if (!gz && !dir && strcmp(format, "tar")) {
    fprintf(stderr, "mx-serve archive: --format is tar, tgz or dir (got '%s')\n", format);
    return 2;
  }
  file_ref files[256];
  int nf = 0;
  json_t *model = json_object();
#define ADD(path, key)                                                       \
  do {                                                                       \
    files[nf].src = path;                                                    \
    files[nf].base = base_of(path);                                          \
    if (key) json_object_set_new(model, key, json_string(files[nf].base));   \
    nf++;                                                                    \
  } while (0)
  if (onnx) ADD(onnx, "onnx");
  if (sym) ADD(sym, "symbol");
  if (params) ADD(params, "params");
  const char *builtin = strcmp(handler, "image_classifier") && strcmp(handler, "json_tensor") ? NULL : handler;
  const char *hname = handler;
  if (!builtin) {
    ADD(handler, (const char *)NULL);
    hname = files[nf - 1].base;
  }
  char *ex = extra ? mxs_strdup(extra) : NULL;
  for (char *tok = ex ? strtok(ex, ",") : NULL; tok && nf < 250; tok = strtok(NULL, ",")) ADD(tok, (const char *)NULL);
#undef ADD
  for (int i = 0; i < nf; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(files[i].base, files[j].base) || !strcmp(files[i].base, "MANIFEST.json")) {
        fprintf(stderr, "mx-serve archive: two files are named '%s' in the archive\n", files[i].base);
        return 2;
      }
  json_t *man = json_pack("{s:i,s:s,s:s,s:o,s:s,s:{s:o}}", "manifest_version", 1, "model_name",
                          name, "model_version", version, "model", model, "handler", hname,
                          "signature", "inputs", inputs);
  if (batch > 0) json_object_set_new(man, "batch_size", json_integer(batch));
  if (delay >= 0) json_object_set_new(man, "max_batch_delay", json_integer(delay));
  if (timeout > 0) json_object_set_new(man, "response_timeout", json_integer(timeout));
  if (config) {
    json_error_t je;
    json_t *cj = json_loads(config, 0, &je);
    if (!json_is_object(cj)) {
      fprintf(stderr, "mx-serve archive: --config must be a JSON object (%s)\n", cj ? "not an object" : je.text);
      return 2;
    }
    json_object_set_new(man, "config", cj);
  }
  char *text = json_dumps(man, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  char *target = mxs_printf("%s/%s%s", export_path, name, dir ? "" : gz ? ".tar.gz" : ".tar");
  int rc = !text || !target ? 1 : dir ? write_dir(target, files, nf, text, force)
                                      : write_tar(target, gz, files, nf, text, force);
  if (!rc) {
    /* what the server will check when it loads it */
    char *d = NULL, msg[600];
    int own = 0;
    json_t *m = NULL;
    if (mxs_archive_open(target, &d, &own, &m, msg, sizeof msg)) {
      fprintf(stderr, "mx-serve archive: %s\n", msg);
      if (dir) mxs_rmtree(target);
      else unlink(target);
      rc = 1;
    } else {
      if (own) mxs_rmtree(d);
      printf("%s\n", target);
    }
    free(d);
    json_decref(m);
  }
  for (int i = 0; i < nf; i++) free(files[i].base);
  free(ex);
  free(text);
  free(target);
  json_decref(man);
  return rc;
}
