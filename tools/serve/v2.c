/* v2.c — KServe's Open Inference Protocol (v2) infer requests: JSON tensors checked
 * against the model's signature and packed into the job (row-major little-endian bytes
 * per input, described in the job's meta). Every malformed request is a 400 naming the
 * input, the shapes or the datatypes. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct v2type {
  const char *v2, *luamx;
  int size;
} v2type;
static const v2type TYPES[] = {{"BOOL", "bool", 1},     {"UINT8", "uint8", 1},
                               {"INT8", "int8", 1},     {"INT32", "int32", 4},
                               {"INT64", "int64", 8},   {"FP16", "float16", 2},
                               {"FP32", "float32", 4},  {"FP64", "float64", 8},
                               {"BF16", "bfloat16", 2}, {NULL, NULL, 0}};

static const v2type *by_v2(const char *s) {
  for (int i = 0; TYPES[i].v2; i++)
    if (!strcmp(TYPES[i].v2, s)) return &TYPES[i];
  return NULL;
}

const char *mxs_v2_dtype_name(const char *luamx) {
  for (int i = 0; TYPES[i].v2; i++)
    if (!strcmp(TYPES[i].luamx, luamx)) return TYPES[i].v2;
  return "FP32";
}

static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

typedef struct filler {
  const v2type *t;
  char *out;
  int64_t n, cap;
  const char *name;
  char *msg;
  size_t mcap;
} filler;

static int put(filler *f, json_t *v) {
  if (f->n >= f->cap) {
    snprintf(f->msg, f->mcap, "input '%s': data has more elements than its shape (%lld)", f->name,
             (long long)f->cap);
    return -1;
  }
  char *p = f->out + f->n * f->t->size;
  const char *dt = f->t->v2;
  if (!strcmp(dt, "BOOL")) {
    if (!json_is_boolean(v) && !(json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))) {
      snprintf(f->msg, f->mcap, "input '%s': element %lld is not a boolean", f->name, (long long)f->n);
      return -1;
    }
    *(uint8_t *)p = json_is_true(v) || (json_is_integer(v) && json_integer_value(v) == 1);
  } else if (dt[0] == 'I' || dt[0] == 'U') {
    if (!json_is_integer(v)) {
      snprintf(f->msg, f->mcap, "input '%s': element %lld is not an integer (datatype %s)", f->name,
               (long long)f->n, dt);
      return -1;
    }
    json_int_t x = json_integer_value(v);
    int ok = !strcmp(dt, "UINT8") ? x >= 0 && x <= 255 : !strcmp(dt, "INT8") ? x >= -128 && x <= 127
             : !strcmp(dt, "INT32") ? x >= INT32_MIN && x <= INT32_MAX : 1;
    if (!ok) {
      snprintf(f->msg, f->mcap, "input '%s': element %lld (%lld) is out of range for %s", f->name,
               (long long)f->n, (long long)x, dt);
      return -1;
    }
    if (f->t->size == 1) *(int8_t *)p = (int8_t)x;
    else if (f->t->size == 4) { int32_t y = (int32_t)x; memcpy(p, &y, 4); }
    else { int64_t y = x; memcpy(p, &y, 8); }
  } else {
    if (!json_is_number(v)) {
      snprintf(f->msg, f->mcap, "input '%s': element %lld is not a number (datatype %s)", f->name,
               (long long)f->n, dt);
      return -1;
    }
    double d = json_number_value(v);
    if (!strcmp(dt, "FP64")) memcpy(p, &d, 8);
    else if (!strcmp(dt, "FP32")) { float x = (float)d; memcpy(p, &x, 4); }
    else if (!strcmp(dt, "FP16")) { uint16_t h = to_half((float)d); memcpy(p, &h, 2); }
    else { uint16_t h = to_bf16((float)d); memcpy(p, &h, 2); }
  }
  f->n++;
  return 0;
}

static int walk(filler *f, json_t *v, int depth) {
  if (!json_is_array(v)) return put(f, v);
  if (depth > 8) {
    snprintf(f->msg, f->mcap, "input '%s': data is nested deeper than 8 levels", f->name);
    return -1;
  }
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) if (walk(f, e, depth + 1)) return -1;
  return 0;
}

static void shape_str(json_t *shape, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  size_t i;
  json_t *d;
  json_array_foreach(shape, i, d) {
    if (used + 24 >= cap) break;
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "",
                             (long long)json_integer_value(d));
  }
  snprintf(buf + used, cap - used, "]");
}

static json_t *sig_input(json_t *sig, const char *name) {
  size_t i;
  json_t *in;
  json_array_foreach(json_object_get(sig, "inputs"), i, in) {
    const char *n = json_string_value(json_object_get(in, "name"));
    if (n && !strcmp(n, name)) return in;
  }
  return NULL;
}

int mxs_v2_parse(mxs_version *v, const char *body, size_t len, mxs_job *j, char *msg, size_t cap) {
  json_error_t je;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    snprintf(msg, cap, "invalid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    return 400;
  }
  int st = 400;
  mxs_buf blob = {0};
  json_t *meta = NULL;
  pthread_mutex_lock(&v->sig_mu);
  json_t *sig = json_deep_copy(v->signature);
  pthread_mutex_unlock(&v->sig_mu);
  json_t *inputs = json_object_get(root, "inputs");
  json_t *id = json_object_get(root, "id");
  if (!json_is_object(root)) {
    snprintf(msg, cap, "the infer request must be a JSON object with \"inputs\"");
    goto out;
  }
  if (id && !json_is_string(id)) {
    snprintf(msg, cap, "\"id\" must be a string");
    goto out;
  }
  if (!json_is_array(inputs) || json_array_size(inputs) == 0) {
    snprintf(msg, cap, "\"inputs\" must be a non-empty array of tensors "
             "({\"name\", \"shape\", \"datatype\", \"data\"})");
    goto out;
  }
  meta = json_pack("{s:s,s:s,s:[]}", "kind", "v2", "id", id ? json_string_value(id) : "", "inputs");
  json_t *metain = json_object_get(meta, "inputs");
  size_t i;
  json_t *in;
  json_array_foreach(inputs, i, in) {
    const char *name = json_string_value(json_object_get(in, "name"));
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    json_t *shape = json_object_get(in, "shape"), *data = json_object_get(in, "data");
    if (!json_is_object(in) || !name) {
      snprintf(msg, cap, "inputs[%zu] needs a \"name\"", i);
      goto out;
    }
    for (size_t k = 0; k < i; k++)
      if (!strcmp(name, json_string_value(json_object_get(json_array_get(inputs, k), "name")))) {
        snprintf(msg, cap, "input '%s' is given twice", name);
        goto out;
      }
    json_t *want = sig_input(sig, name);
    if (!want) {
      mxs_buf names = {0};
      size_t k;
      json_t *w;
      json_array_foreach(json_object_get(sig, "inputs"), k, w)
          mxs_buf_printf(&names, "%s'%s'", k ? ", " : "", json_string_value(json_object_get(w, "name")));
      snprintf(msg, cap, "model %s has no input '%s' (its inputs: %s)", v->name, name,
               names.p ? names.p : "none");
      mxs_buf_free(&names);
      goto out;
    }
    const v2type *t = dt ? by_v2(dt) : NULL;
    if (!t) {
      snprintf(msg, cap, "input '%s': datatype %s%s%s is not supported (BOOL, UINT8, INT8, INT32, "
               "INT64, FP16, FP32, FP64, BF16)", name, dt ? "'" : "", dt ? dt : "missing", dt ? "'" : "");
      goto out;
    }
    const char *wdt = json_string_value(json_object_get(want, "dtype"));
    if (!wdt) wdt = "float32";
    if (strcmp(wdt, t->luamx)) {
      snprintf(msg, cap, "input '%s': datatype %s, but the model takes %s", name, dt,
               mxs_v2_dtype_name(wdt));
      goto out;
    }
    if (!json_is_array(shape) || json_array_size(shape) == 0 || json_array_size(shape) > 8) {
      snprintf(msg, cap, "input '%s': \"shape\" must be an array of 1..8 dims", name);
      goto out;
    }
    int64_t count = 1;
    size_t k;
    json_t *d;
    json_array_foreach(shape, k, d) {
      if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1 << 30)) {
        snprintf(msg, cap, "input '%s': shape dim %zu is not a non-negative integer", name, k);
        goto out;
      }
      count *= json_integer_value(d);
      if (count > (int64_t)v->srv->cfg.max_request_size) {
        snprintf(msg, cap, "input '%s': the shape holds more elements than a request may carry", name);
        st = 413;
        goto out;
      }
    }
    json_t *wshape = json_object_get(want, "shape");
    int match = json_array_size(wshape) == json_array_size(shape);
    json_array_foreach(wshape, k, d) {
      if (!match) break;
      json_int_t w = json_integer_value(d);
      if (w >= 0 && w != json_integer_value(json_array_get(shape, k))) match = 0;
    }
    if (!match) {
      char a[200], b[200];
      shape_str(shape, a, sizeof a);
      shape_str(wshape, b, sizeof b);
      snprintf(msg, cap, "input '%s': shape %s does not match the model's %s (-1: any size)", name,
               a, b);
      goto out;
    }
    if (!json_is_array(data)) {
      snprintf(msg, cap, "input '%s': \"data\" must be an array (flat or nested, row-major)", name);
      goto out;
    }
    size_t off = blob.n, nbytes = (size_t)count * (size_t)t->size;
    char zero[64] = {0};
    for (size_t left = nbytes; left;) {
      size_t c = left < sizeof zero ? left : sizeof zero;
      mxs_buf_add(&blob, zero, c);
      left -= c;
    }
    /* 8-byte alignment for the next tensor */
    while (blob.n % 8) mxs_buf_add(&blob, zero, 1);
    if (blob.oom) {
      snprintf(msg, cap, "out of memory");
      st = 503;
      goto out;
    }
    /* (a first tensor of 0 elements leaves the blob unallocated: no offset from NULL) */
    filler f = {t, blob.p ? blob.p + off : NULL, 0, count, name, msg, cap};
    if (walk(&f, data, 0)) goto out;
    if (f.n != count) {
      char a[200];
      shape_str(shape, a, sizeof a);
      snprintf(msg, cap, "input '%s': data has %lld elements, shape %s needs %lld", name,
               (long long)f.n, a, (long long)count);
      goto out;
    }
    json_array_append_new(metain, json_pack("{s:s,s:s,s:s,s:O,s:I,s:I}", "name", name, "datatype",
                                            dt, "dtype", t->luamx, "shape", shape, "off",
                                            (json_int_t)off, "len", (json_int_t)nbytes));
  }
  json_t *outs = json_object_get(root, "outputs");
  if (outs) {
    if (!json_is_array(outs)) {
      snprintf(msg, cap, "\"outputs\" must be an array of {\"name\": ...}");
      goto out;
    }
    json_t *names = json_array();
    json_object_set_new(meta, "outputs", names);
    json_t *known = json_object_get(sig, "outputs");
    json_t *o;
    json_array_foreach(outs, i, o) {
      const char *n = json_string_value(json_object_get(o, "name"));
      if (!n) {
        snprintf(msg, cap, "outputs[%zu] needs a \"name\"", i);
        goto out;
      }
      int found = !json_array_size(known);
      size_t k;
      json_t *w;
      json_array_foreach(known, k, w) {
        const char *kn = json_string_value(json_object_get(w, "name"));
        found |= kn && !strcmp(n, kn);
      }
      if (!found) {
        snprintf(msg, cap, "model %s has no output '%s'", v->name, n);
        goto out;
      }
      json_array_append_new(names, json_string(n));
    }
  }
  json_t *params = json_object_get(root, "parameters");
  if (params) json_object_set(meta, "parameters", params);
  j->meta = json_dumps(meta, JSON_COMPACT);
  j->meta_len = j->meta ? strlen(j->meta) : 0;
  j->blob = blob.p;
  j->blob_len = blob.n;
  blob.p = NULL;
  st = j->meta ? 0 : 503;
  if (st) snprintf(msg, cap, "out of memory");
out:
  mxs_buf_free(&blob);
  json_decref(meta);
  json_decref(sig);
  json_decref(root);
  return st;
}
