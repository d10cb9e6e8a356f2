/* xfile.h — what the readers of foreign model files (safetensors.c, torchfile.c, onnx/)
 * share: a reference-counted private mapping of a file whose pages back tensors and UTF-8
 * validation (hostile strings are printed with ndfile_read.h's mx_ndf_printable). */
#ifndef MX_XFILE_H
#define MX_XFILE_H

#include "internal.h"

#include <stdatomic.h>

/* A file mapped MAP_PRIVATE with read and write access and no swap reservation: its
 * pages are read lazily from the file (a file larger than RAM maps fine; clean pages can
 * be dropped again), and a write to a page gives this process its own copy, never
 * reaching the file (copy-on-write). Tensors made on it hold a reference each. */
typedef struct mx_xmap {
  uint8_t *p;
  size_t len;
  atomic_int refs;
} mx_xmap;

/* Maps the regular file path (who: the caller's name in messages). An empty file maps
 * to len 0 (p a dummy). MX_EIO naming the file when it cannot be opened or mapped. */
int mx_xmap_open(const char *path, const char *who, mx_xmap **out);
void mx_xmap_retain(mx_xmap *m);
void mx_xmap_release(mx_xmap *m);

/* A CPU tensor over len bytes at data inside m (zero-copy: it keeps m alive), or a copy
 * when data is not aligned to the dtype's size (kernels cast pointers to the element
 * type) or m is NULL (data in a buffer the caller keeps). */
int mx_xmap_tensor(mx_xmap *m, const uint8_t *data, int ndim, const int64_t *shape,
                   int dtype, mx_tensor **out);

/* Whether s[0..n) is well-formed UTF-8 (no overlong forms, no surrogates, <= U+10FFFF). */
bool mx_utf8_valid(const uint8_t *s, size_t n);

/* Whether buf starts like a safetensors file (a header length within the format's
 * limit, then '{'; 9 bytes suffice):
 * what mx_nd_load uses to hand such a file to mx_safetensors_load. */
bool mx_safetensors_sniff(const void *buf, size_t len);

#endif
