/* onnx_read.c — ONNX TensorProtos and value infos as luamx tensors and descriptors, with
 * every size checked against the data actually there, and external data read only from
 * a plain file under the model's directory (reliability.md §2, item 9: no absolute path,
 * no "..", no symlink, no hard link, offset and length inside the file, length equal to
 * the tensor's bytes); and the C API's readers of a TensorProto file and of a model's
 * declared inputs and outputs (mx_onnx_load_tensor, mx_onnx_model_info). */
#include "onnx_internal.h"
#include "xfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ox_dtype(int32_t t, const char **why) {
  static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  switch (t) {
  case 1: return MX_F32;
  case 2: return MX_U8;
  case 3: return MX_I8;
  case 5: return MX_I16;
  case 6: return MX_I32;
  case 7: return MX_I64;
  case 9: return MX_BOOL;
  case 10: return MX_F16;
  case 11: return MX_F64;
  case 16: return MX_BF16;
  default:
    if (why) *why = t >= 0 && t <= 16 ? names[t] : "an unknown type";
    return -1;
  }
}

int ox_onnx_type(int d) {
  switch (d) {
  case MX_F32: return 1;
  case MX_U8: return 2;
  case MX_I8: return 3;
  case MX_I16: return 5;
  case MX_I32: return 6;
  case MX_I64: return 7;
  case MX_BOOL: return 9;
  case MX_F16: return 10;
  case MX_F64: return 11;
  case MX_BF16: return 16;
  default: return 0;
  }
}

static int tfail(const Onnx__TensorProto *t, const char *file, const char *fmt, ...)
    MX_PRINTF(3, 4);
static int tfail(const Onnx__TensorProto *t, const char *file, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mx_err(MX_EFORMAT, "onnx: %s: tensor '%s': %s", file, t->name ? t->name : "", msg);
}

/* The external file's bytes [off, off + len) into dst, by the rules above. */
static int read_external(const Onnx__TensorProto *t, const char *dir, const char *file,
                         void *dst, size_t nbytes) {
  const char *loc = NULL;
  int64_t off = 0, len = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key || !e->value) continue;
    char *end;
    if (strcmp(e->key, "location") == 0) loc = e->value;
    else if (strcmp(e->key, "offset") == 0) off = strtoll(e->value, &end, 10);
    else if (strcmp(e->key, "length") == 0) len = strtoll(e->value, &end, 10);
  }
  if (!dir) /* a model from memory: no directory its files could be under */
    return tfail(t, file, "external data ('%s') is not allowed for a model read from memory",
                 loc ? loc : "");
  if (!loc || !*loc) return tfail(t, file, "external data without a location");
  if (loc[0] == '/' || strstr(loc, "..") || strchr(loc, '\\'))
    return tfail(t, file, "external data location '%s' is not a plain path under the model's "
                 "directory", loc);
  if (off < 0 || (len >= 0 && (uint64_t)len != nbytes))
    return tfail(t, file, "external data offset %lld / length %lld do not fit %zu bytes",
                 (long long)off, (long long)len, nbytes);
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, loc) >= sizeof path)
    return tfail(t, file, "external data path too long");
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return mx_err(MX_EIO, "onnx: %s: tensor '%s': cannot open external data '%s': %s", file,
                  t->name ? t->name : "", loc, strerror(errno));
  struct stat st;
  int rc = MX_OK;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
    rc = tfail(t, file, "external data '%s' is not a regular file with one link", loc);
  else if ((uint64_t)off > (uint64_t)st.st_size || nbytes > (uint64_t)st.st_size - (uint64_t)off)
    rc = tfail(t, file, "external data '%s': bytes [%lld, +%zu) lie outside its %lld bytes", loc,
               (long long)off, nbytes, (long long)st.st_size);
  else if (nbytes && pread(fd, dst, nbytes, off) != (ssize_t)nbytes)
    rc = mx_err(MX_EIO, "onnx: %s: tensor '%s': reading '%s' failed", file, t->name, loc);
  close(fd);
  return rc;
}

int ox_tensor_from_proto(const Onnx__TensorProto *t, const char *dir, const char *file,
                         mx_tensor **out) {
  *out = NULL;
  const char *why = "";
  int dt = ox_dtype(t->has_data_type ? t->data_type : 0, &why);
  if (dt < 0) return tfail(t, file, "unsupported: element type %s", why);
  if (t->segment) return tfail(t, file, "unsupported: segmented tensors");
  if (t->n_dims > MX_MAX_DIM)
    return tfail(t, file, "unsupported: %zu dims (luamx has at most %d)", t->n_dims, MX_MAX_DIM);
  int64_t shape[MX_MAX_DIM];
  uint64_t count = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0) return tfail(t, file, "dim %zu is negative", i + 1);
    shape[i] = t->dims[i];
    if (__builtin_mul_overflow(count, (uint64_t)t->dims[i], &count) || count > ((uint64_t)1 << 40))
      return tfail(t, file, "the element count overflows");
  }
  size_t es = mx_dtype_size(dt), nbytes = (size_t)count * es;
  /* the data must be there before anything is allocated for it */
  bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  size_t have;
  if (external) have = nbytes; /* checked against the file when read */
  else if (t->has_raw_data) have = t->raw_data.len;
  else if (dt == MX_F32) have = t->n_float_data * 4;
  else if (dt == MX_F64) have = t->n_double_data * 8;
  else if (dt == MX_I64) have = t->n_int64_data * 8;
  else have = t->n_int32_data * es; /* i32, i16, i8, u8, bool, f16, bf16 */
  if (have != nbytes)
    return tfail(t, file, "holds %zu bytes of data where its shape needs %zu", have, nbytes);
  int rc = mx_tensor_new((int)t->n_dims, shape, dt, MX_CPU, 0, out);
  if (rc) return rc;
  uint8_t *p = mx_ptr(*out);
  if (nbytes == 0) {
    /* nothing to copy (and protobuf-c leaves empty fields' pointers NULL) */
  } else if (external) {
    rc = read_external(t, dir, file, p, nbytes);
  } else if (t->has_raw_data) {
    memcpy(p, t->raw_data.data, nbytes);
  } else if (dt == MX_F32) {
    memcpy(p, t->float_data, nbytes);
  } else if (dt == MX_F64) {
    memcpy(p, t->double_data, nbytes);
  } else if (dt == MX_I64) {
    memcpy(p, t->int64_data, nbytes);
  } else {
    for (size_t i = 0; i < count; i++) { /* int32_data holds each element widened */
      int32_t v = t->int32_data[i];
      if (es == 4) memcpy(p + 4 * i, &v, 4);
      else if (es == 2) { uint16_t h = (uint16_t)v; memcpy(p + 2 * i, &h, 2); }
      else p[i] = dt == MX_BOOL ? (v != 0) : (uint8_t)v;
    }
  }
  if (rc) {
    mx_tensor_release(*out);
    *out = NULL;
  }
  return rc;
}

int ox_desc_from_value_info(const Onnx__ValueInfoProto *vi, const char *file, mx_desc *d) {
  memset(d, 0, sizeof *d);
  d->ndim = -1, d->dtype = -1, d->dev_type = MX_CPU;
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
    if (tp && tp->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET &&
        tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
      return mx_err(MX_EINVAL, "onnx: %s: value '%s': unsupported: a non-tensor type (sequence, "
                    "map or optional)", file, vi->name ? vi->name : "");
    return MX_OK;
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->has_elem_type) {
    const char *why = "";
    d->dtype = ox_dtype(tt->elem_type, &why);
    if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING) d->dtype = MX_ONNX_STRING;
    else if (d->dtype < 0)
      return mx_err(MX_EINVAL, "onnx: %s: value '%s': unsupported: element type %s", file,
                    vi->name ? vi->name : "", why);
  }
  if (tt->shape) {
    if (tt->shape->n_dim > MX_MAX_DIM)
      return mx_err(MX_EINVAL, "onnx: %s: value '%s': unsupported: %zu dims", file,
                    vi->name ? vi->name : "", tt->shape->n_dim);
    d->ndim = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
      d->shape[i] = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                            dm->dim_value >= 0 ? dm->dim_value : MX_DIM_UNKNOWN;
    }
  }
  return MX_OK;
}

/* ---- entry points: a TensorProto file, a model's inputs and outputs ------------------- */

int ox_read_tensor_proto(const char *path, Onnx__TensorProto **out) {
  *out = NULL;
  mx_xmap *map;
  int rc = mx_xmap_open(path, "onnx", &map);
  if (rc) return rc;
  *out = onnx__tensor_proto__unpack(NULL, map->len, map->p);
  mx_xmap_release(map);
  return *out ? MX_OK : mx_err(MX_EFORMAT, "onnx: %s: not a TensorProto", path);
}

int mx_onnx_load_tensor(const char *path, mx_tensor **out, char **name) {
  if (!path || !out) return mx_err(MX_EINVAL, "mx_onnx_load_tensor: bad arguments");
  *out = NULL;
  if (name) *name = NULL;
  Onnx__TensorProto *t;
  int rc = ox_read_tensor_proto(path, &t);
  if (rc) return rc;
  char dir[4096];
  ox_dir_of(path, dir, sizeof dir);
  rc = ox_tensor_from_proto(t, dir, path, out);
  if (!rc && name && !(*name = strdup(t->name ? t->name : ""))) {
    mx_tensor_release(*out);
    *out = NULL;
    rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  onnx__tensor_proto__free_unpacked(t, NULL);
  return rc;
}

static int infos(const char *file, Onnx__ValueInfoProto **vi, size_t n, const Onnx__GraphProto *g,
                 bool skip_init, int *cnt, char ***names, mx_desc **descs) {
  char **nm = calloc(n + 1, sizeof *nm);
  mx_desc *d = calloc(n + 1, sizeof *d);
  int k = 0, rc = (!nm || !d) ? mx_err(MX_ENOMEM, "onnx: out of memory") : MX_OK;
  for (size_t i = 0; !rc && i < n; i++) {
    bool init = false;
    for (size_t j = 0; skip_init && j < g->n_initializer; j++)
      if (vi[i]->name && g->initializer[j]->name && strcmp(vi[i]->name, g->initializer[j]->name) == 0)
        init = true;
    if (init) continue;
    if ((rc = ox_desc_from_value_info(vi[i], file, &d[k]))) break;
    if (!(nm[k] = strdup(vi[i]->name ? vi[i]->name : ""))) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
    k++;
  }
  if (rc) {
    for (int i = 0; nm && i < k; i++) free(nm[i]);
    free(nm);
    free(d);
    return rc;
  }
  *cnt = k, *names = nm, *descs = d;
  return MX_OK;
}

int mx_onnx_model_info(const char *path, int *nin, char ***in_names, mx_desc **in_descs,
                       int *nout, char ***out_names, mx_desc **out_descs) {
  if (!path || !nin || !in_names || !in_descs || !nout || !out_names || !out_descs)
    return mx_err(MX_EINVAL, "mx_onnx_model_info: bad arguments");
  Onnx__ModelProto *m = NULL;
  int rc = ox_model_open(path, &m);
  if (rc) return rc;
  const Onnx__GraphProto *g = m->graph;
  rc = infos(path, g->input, g->n_input, g, true, nin, in_names, in_descs);
  if (!rc && (rc = infos(path, g->output, g->n_output, g, false, nout, out_names, out_descs))) {
    for (int i = 0; i < *nin; i++) free((*in_names)[i]);
    free(*in_names);
    free(*in_descs);
  }
  onnx__model_proto__free_unpacked(m, NULL);
  return rc;
}
