/* atomic_file.c — the one way libmx writes a file: a fresh temporary beside the target,
 * fsync, rename over the target, fsync of the directory. A reader (or a crash) sees the
 * old file or the new one, never a partial file; any failure leaves the old file. Used
 * by mx_nd_save and mx_file_write_atomic (Lua's plots, symbol files, exports). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static atomic_uint tmp_counter;

/* A write killed midway leaves its `<path>.tmp.<pid>.<n>`; nothing else would ever
 * remove it. Before writing `path`, remove the temporaries of OUR naming for that same
 * path whose writer is gone: kill(pid, 0) fails with ESRCH. A live pid (ours: another
 * thread may be writing; anyone else's, or EPERM: another user's live process) keeps
 * its file. Best effort: a failure here never fails the write. */
static void remove_stale_temps(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t blen = strlen(base);
  char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
  if (!dir) return;
  DIR *d = opendir(dir);
  if (!d) {
    free(dir);
    return;
  }
  long self = (long)getpid();
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *nm = e->d_name;
    if (strncmp(nm, base, blen) != 0 || strncmp(nm + blen, ".tmp.", 5) != 0) continue;
    /* exactly <digits>.<digits> after ".tmp.": anything else is not ours */
    const char *q = nm + blen + 5, *pid_s = q;
    while (*q >= '0' && *q <= '9') q++;
    if (q == pid_s || q - pid_s > 9 || *q != '.') continue;
    const char *n_s = ++q;
    while (*q >= '0' && *q <= '9') q++;
    if (q == n_s || q - n_s > 10 || *q) continue;
    long pid = strtol(pid_s, NULL, 10);
    if (pid <= 0 || pid == self) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    size_t flen = strlen(dir) + 1 + strlen(nm) + 1;
    char *full = malloc(flen);
    if (!full) break;
    snprintf(full, flen, "%s/%s", dir, nm);
    struct stat st;
    if (lstat(full, &st) == 0 && S_ISREG(st.st_mode)) (void)unlink(full);
    free(full);
  }
  closedir(d);
  free(dir);
}

int mx_atomic_begin(mx_atomic_file *af, const char *path, const char *who) {
  af->f = NULL;
  af->tmp = NULL;
  af->path = path;
  remove_stale_temps(path);
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 64);
  if (!tmp) return mx_err(MX_ENOMEM, "%s: out of memory", who);
  int fd = -1;
  for (int tries = 0; tries < 100 && fd < 0; tries++) {
    snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    int rc = mx_err(MX_EIO, "%s: cannot create a temporary file next to '%s': %s", who, path,
                    strerror(errno));
    free(tmp);
    return rc;
  }
  af->f = fdopen(fd, "wb");
  if (!af->f) {
    int rc = mx_err(MX_EIO, "%s: '%s': %s", who, path, strerror(errno));
    close(fd);
    unlink(tmp);
    free(tmp);
    return rc;
  }
  af->tmp = tmp;
  return MX_OK;
}

int mx_atomic_end(mx_atomic_file *af, const char *who, int rc, bool write_ok) {
  int err = 0;
  if (!rc && (!write_ok || fflush(af->f) != 0 || fsync(fileno(af->f)) != 0))
    err = errno ? errno : EIO;
  if (fclose(af->f) != 0 && !err && !rc) err = errno ? errno : EIO;
  af->f = NULL;
  if (!rc && !err && rename(af->tmp, af->path) != 0) err = errno;
  if (rc || err) {
    unlink(af->tmp);
    if (!rc) rc = mx_err(MX_EIO, "%s: cannot write '%s': %s", who, af->path, strerror(err));
    free(af->tmp);
    af->tmp = NULL;
    return rc;
  }
  free(af->tmp);
  af->tmp = NULL;
  /* make the rename itself durable */
  char *dir = strdup(af->path);
  if (dir) {
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)fsync(dfd);
      close(dfd);
    }
    free(dir);
  }
  return MX_OK;
}

int mx_file_write_atomic(const char *path, const void *data, size_t len) {
  if (!path || !*path) return mx_err(MX_EINVAL, "mx_file_write_atomic: empty path");
  if (len && !data) return mx_err(MX_EINVAL, "mx_file_write_atomic: NULL data for %zu bytes", len);
  mx_atomic_file af;
  int rc = mx_atomic_begin(&af, path, "write");
  if (rc) return rc;
  bool ok = len == 0 || fwrite(data, 1, len, af.f) == len;
  return mx_atomic_end(&af, "write", MX_OK, ok);
}

/* zlib's CRC-32 of a whole file, read in 1 MB blocks: the check that an export's
 * parameters file is the one its symbol file was written with (gluon/_export.lua). */
int mx_file_crc32(const char *path, uint32_t *crc, int64_t *size) {
  if (!path || !crc || !size) return mx_err(MX_EINVAL, "mx_file_crc32: NULL argument");
  FILE *f = fopen(path, "rb");
  if (!f) return mx_err(MX_EIO, "cannot open %s: %s", path, strerror(errno));
  enum { BLOCK = 1 << 20 };
  unsigned char *buf = malloc(BLOCK);
  if (!buf) {
    fclose(f);
    return mx_err(MX_ENOMEM, "mx_file_crc32: out of memory");
  }
  uLong c = crc32(0L, Z_NULL, 0);
  int64_t n = 0;
  size_t got;
  while ((got = fread(buf, 1, BLOCK, f)) > 0) {
    c = crc32(c, buf, (uInt)got);
    n += (int64_t)got;
  }
  int bad = ferror(f);
  free(buf);
  fclose(f);
  if (bad) return mx_err(MX_EIO, "cannot read %s", path);
  *crc = (uint32_t)c;
  *size = n;
  return MX_OK;
}
