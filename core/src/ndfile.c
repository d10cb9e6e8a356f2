/* ndfile.c — MXNet NDArray list files (.params), NumPy .npy and .npz: the entry points
 * (mx_nd_load, mx_nd_load_bytes), which recognise the format; what every reader shares is
 * in ndfile_read.c, the formats in ndfile_params.c (.params load and save) and
 * ndfile_npy.c (.npy, .npz).
 *
 * Layouts: ../shared/reference/mxnet.md §2a and docs/file-formats.md. Everything is
 * little-endian. We write V2 (V3 when a 0-d tensor is in the list: V2 cannot express
 * one) and read V1/V2/V3, the oldest magic-less layout, .npy and .npz.
 *
 * Loading never trusts a header: every count and size is checked against the bytes
 * that are actually left before anything is allocated, products of dims are checked
 * for overflow, and a .params file is walked twice — once to validate the whole file
 * (records, names, trailing bytes) without allocating tensors, then once to build —
 * so a lie anywhere in the file costs no allocation and errors in the second walk
 * can name the array (names sit at the end of the file).
 */
#include "ndfile_read.h"
#include "xfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- entry points --------------------------------------------------------------- */

static int load_any(const uint8_t *p, size_t len, const char *file, int *n,
                    mx_tensor ***arrays, char ***names) {
  if (!n || !arrays || !names) return mx_err(MX_EINVAL, "mx.nd.load: NULL output pointer");
  *n = 0, *arrays = NULL, *names = NULL;
  ld c = {p, len, 0, file, NULL, -1, 0, NULL};
  result res = {0, NULL, NULL};
  int rc;
  if (len == 0) return mx_ndf_fail(&c, "the file is empty");
  if (len >= 6 && memcmp(p, "\x93NUMPY", 6) == 0) {
    res.arrays = calloc(1, sizeof *res.arrays);
    if (!res.arrays) return mx_ndf_fail_nomem(&c, "out of memory");
    res.n = 1;
    rc = mx_ndf_load_npy(&c, &res.arrays[0]);
  } else if (len >= 4 && (memcmp(p, "PK\x03\x04", 4) == 0 || memcmp(p, "PK\x05\x06", 4) == 0)) {
    rc = mx_ndf_load_npz(&c, &res);
  } else if (len >= 8 && mx_ndf_le64(p) == MX_NDF_LIST_MAGIC) {
    rc = mx_ndf_load_params(&c, &res);
  } else if (mx_safetensors_sniff(p, len)) {
    return mx_safetensors_load_bytes(p, len, n, arrays, names, NULL, NULL);
  } else {
    rc = mx_ndf_fail(&c, "not an MXNet .params, .npy, .npz or safetensors file (unknown magic "
                     "%02x %02x %02x %02x)",
              p[0], len > 1 ? p[1] : 0, len > 2 ? p[2] : 0, len > 3 ? p[3] : 0);
  }
  if (rc == MX_OK && res.n > INT32_MAX) rc = mx_ndf_fail(&c, "more than 2^31 arrays");
  if (rc) {
    mx_ndf_result_free(&res);
    return rc;
  }
  *n = (int)res.n;
  *arrays = res.arrays;
  *names = res.names;
  return MX_OK;
}

int mx_nd_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays,
                     char ***names) {
  if (!buf && len) return mx_err(MX_EINVAL, "mx.nd.load: NULL buffer");
  return load_any(buf, len, "<memory>", n, arrays, names);
}

int mx_nd_load(const char *path, int *n, mx_tensor ***arrays, char ***names) {
  if (!path) return mx_err(MX_EINVAL, "mx.nd.load: NULL path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return mx_err(MX_EIO, "mx.nd.load: cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return mx_err(MX_EIO, "mx.nd.load: cannot stat '%s': %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return mx_err(MX_EIO, "mx.nd.load: '%s' is not a regular file", path);
  }
  size_t len = (size_t)st.st_size;
  if (len == 0) {
    close(fd);
    return load_any((const uint8_t *)"", 0, path, n, arrays, names);
  }
  uint8_t head[9];
  if (pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
      mx_safetensors_sniff(head, sizeof head)) { /* its own loader maps it zero-copy */
    close(fd);
    return mx_safetensors_load(path, 0, n, arrays, names, NULL, NULL);
  }
  /* map rather than read: a large checkpoint is not held twice in memory */
  void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return mx_err(MX_EIO, "mx.nd.load: cannot map '%s': %s", path, strerror(e));
  int rc = load_any(m, len, path, n, arrays, names);
  munmap(m, len);
  return rc;
}

