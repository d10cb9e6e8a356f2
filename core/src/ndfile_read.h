/* ndfile_read.h — what the readers of array files share (ndfile_read.c): a bounds-checked
 * cursor over the file's bytes and messages that name the file, the entry and the array;
 * the format readers are ndfile_params.c (MXNet's .params) and ndfile_npy.c (.npy, .npz),
 * the entry points ndfile.c. Not installed. */
#ifndef MX_NDFILE_READ_H
#define MX_NDFILE_READ_H
#include "internal.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ndfile readers copy array bytes as stored: they assume a little-endian host"
#endif

#define MX_NDF_LIST_MAGIC 0x112u
/* Far beyond any real checkpoint; bounds the tensors (about 200 bytes each, even for
 * an empty one) that a file of tiny records could make us allocate. */
#define MX_NDF_MAX_ARRAYS (1 << 24)

typedef struct ld {
  const uint8_t *p;
  size_t len, pos;
  const char *file;  /* path, or "<memory>" */
  const char *entry; /* npz entry name, or NULL */
  int64_t idx, count; /* array being read (0-based; -1: none) and how many */
  const char *name;   /* its name when known */
} ld;

/* Copies s into out (size cap) with non-printable bytes as \xNN, so a hostile name
 * cannot garble the message. */
const char *mx_ndf_printable(char *out, size_t cap, const char *s, size_t n);
/* MX_EFORMAT (MX_ENOMEM) with the message prefixed by the file, entry and array. */
int mx_ndf_fail(const ld *c, const char *fmt, ...) MX_PRINTF(2, 3);
int mx_ndf_fail_nomem(const ld *c, const char *fmt, ...) MX_PRINTF(2, 3);

static inline size_t mx_ndf_left(const ld *c) { return c->len - c->pos; }

static inline int mx_ndf_rd_bytes(ld *c, void *dst, size_t n, const char *what) {
  if (mx_ndf_left(c) < n)
    return mx_ndf_fail(c, "file ends inside %s (needs %zu bytes, %zu left)", what, n, mx_ndf_left(c));
  memcpy(dst, c->p + c->pos, n);
  c->pos += n;
  return MX_OK;
}
static inline int mx_ndf_rd_u32(ld *c, uint32_t *v, const char *what) { return mx_ndf_rd_bytes(c, v, 4, what); }
static inline int mx_ndf_rd_i32(ld *c, int32_t *v, const char *what) { return mx_ndf_rd_bytes(c, v, 4, what); }
static inline int mx_ndf_rd_u64(ld *c, uint64_t *v, const char *what) { return mx_ndf_rd_bytes(c, v, 8, what); }

static inline uint16_t mx_ndf_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t mx_ndf_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t mx_ndf_le64(const uint8_t *p) { return mx_ndf_le32(p) | (uint64_t)mx_ndf_le32(p + 4) << 32; }

/* Reserves the data block of `bytes` (checked against what is left). */
static inline int mx_ndf_take_data(ld *c, const char *what, size_t bytes, size_t *off) {
  if (bytes > mx_ndf_left(c))
    return mx_ndf_fail(c, "%s needs %zu bytes of data but only %zu are left in the file", what,
                bytes, mx_ndf_left(c));
  *off = c->pos;
  c->pos += bytes;
  return MX_OK;
}

/* A dtype code's name, MXNet 2.0's codes luamx lacks included; NULL for none. */
const char *mx_ndf_dtype_desc(int code);
int mx_ndf_check_dtype(ld *c, int32_t code, const char *what);
/* Bytes of data for ndim dims of esize-byte elements; overflow is an error. */
int mx_ndf_data_bytes(ld *c, int ndim, const int64_t *dims, size_t esize, size_t *out);

/* What a load returns: n arrays, with names (NULL: a list file). */
typedef struct result {
  int64_t n;
  mx_tensor **arrays;
  char **names; /* NULL: a list file */
} result;

void mx_ndf_result_free(result *res);
/* Names must be unique: a dict load would silently drop one of two equal keys. */
int mx_ndf_check_unique(ld *c, char **names, int64_t n);
int mx_ndf_new_tensor(ld *c, int ndim, const int64_t *shape, int dtype, mx_tensor **out);

/* The formats: c->p is the whole file. */
int mx_ndf_load_params(ld *c, result *res);   /* ndfile_params.c */
int mx_ndf_load_npy(ld *c, mx_tensor **out);  /* ndfile_npy.c */
int mx_ndf_load_npz(ld *c, result *res);

#endif
