/* kernels/cpu/elemwise_select.c — clip, broadcast_to/broadcast_like and where: copies and
 * selections over the broadcasting plan (elemwise.h). Layout and threading as elemwise.c. */
#include "elemwise.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "vmath.h"

#include <math.h>

/* ---------------------------------------------------------------- clip */
/* clip: x -> same shape/dtype; bounds as doubles (absent: +-inf); NaN stays NaN */
#define CLIP_LOOP(name, T, STORE)                                                         \
  static void name(int64_t n, const void *xv, double lo, double hi, void *yv) {         \
    const T *restrict x = xv;                                                           \
    T *restrict y = yv;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
      double r = (double)x[i];                                                          \
      r = r < lo ? lo : r;                                                              \
      r = r > hi ? hi : r;                                                              \
      y[i] = STORE;                                                                     \
    }                                                                                   \
  }
CLIP_LOOP(clip_f32, float, (float)r)
CLIP_LOOP(clip_f64, double, r)
CLIP_LOOP(clip_i32, int32_t, SAT(int32_t, r, -2147483648.0, 2147483647.0))
/* int64: compared exactly, never rounded through double */
static void clip_i64(int64_t n, const void *xv, double lo, double hi, void *yv) {
  const int64_t *restrict x = xv;
  int64_t *restrict y = yv;
  int64_t tlo = i64_sat(lo), thi = i64_sat(hi);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = x[i];
    if (i64_cmp(v, lo) == -1) v = tlo;
    if (i64_cmp(v, hi) == 1) v = thi;
    y[i] = v;
  }
}
CLIP_LOOP(clip_i8, int8_t, SAT(int8_t, r, -128.0, 127.0))
CLIP_LOOP(clip_u8, uint8_t, SAT(uint8_t, r, 0.0, 255.0))
typedef void (*clip_fn)(int64_t, const void *, double, double, void *);

typedef struct {
  clip_fn f;
  double lo, hi;
  const void *x;
  void *y;
  size_t es;
  int xd, yd;
} clip_ctx;
static void clip_range(int64_t b, int64_t e, void *vc) {
  const clip_ctx *c = vc;
  c->f(e - b, (const char *)c->x + (size_t)b * c->es, c->lo, c->hi,
       (char *)c->y + (size_t)b * c->es);
}
static void clip_conv_range(int64_t b, int64_t e, void *vc) {
  const clip_ctx *c = vc;
  float buf[CHUNK], res[CHUNK];
  for (int64_t i = b; i < e; i += CHUNK) {
    int64_t n = e - i < CHUNK ? e - i : CHUNK;
    to_ct(buf, c->x, c->xd, i, n);
    c->f(n, buf, c->lo, c->hi, res);
    from_ct(c->y, c->yd, i, res, n);
  }
}

int mx_cpu_clip(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  static clip_fn const tab[CT_N] = {clip_f32, clip_f64, clip_i32, clip_i64, clip_i8, clip_u8};
  const struct mx_params_clip *cp = p;
  const mx_tensor *x = in[0], *y = out[0];
  int ct = ct_of(y->dtype);
  clip_ctx c = {tab[ct], cp->has_a_min ? cp->a_min : -INFINITY,
                cp->has_a_max ? cp->a_max : INFINITY, mx_ptr(x), mx_ptr(y), ct_size[ct],
                x->dtype, y->dtype};
  if (is_native(x->dtype)) {
    if (y->size < 2 * GRAIN_LIGHT) c.f(y->size, c.x, c.lo, c.hi, c.y);
    else mx_parallel_for(y->size, GRAIN_LIGHT, clip_range, &c);
  } else {
    mx_parallel_for(y->size, GRAIN_LIGHT / 2, clip_conv_range, &c);
  }
  return MX_OK;
}

/* ---------------------------------------------------------------- broadcast_to/like */
/* data -> out (broadcast), same dtype: element copies by size, stride 0 or 1 */
typedef struct {
  bplan plan;
  const char *x;
  char *y;
  size_t es;
} bc_ctx;

static void bc_run(int64_t len, const int64_t *off, int64_t pos, const void *vc) {
  const bc_ctx *c = vc;
  const char *src = c->x + (size_t)off[0] * c->es;
  char *dst = c->y + (size_t)pos * c->es;
  if (c->plan.st[0][c->plan.nd - 1] != 0) {
    memcpy(dst, src, (size_t)len * c->es);
    return;
  }
  switch (c->es) { /* one value repeated */
  case 1: memset(dst, *src, (size_t)len); break;
  case 2: { uint16_t v; memcpy(&v, src, 2); for (int64_t i = 0; i < len; i++) ((uint16_t *)dst)[i] = v; } break;
  case 4: { uint32_t v; memcpy(&v, src, 4); for (int64_t i = 0; i < len; i++) ((uint32_t *)dst)[i] = v; } break;
  default: { uint64_t v; memcpy(&v, src, 8); for (int64_t i = 0; i < len; i++) ((uint64_t *)dst)[i] = v; } break;
  }
}
static void bc_range(int64_t b, int64_t e, void *vc) {
  plan_walk(&((const bc_ctx *)vc)->plan, b, e, bc_run, vc);
}

static int bcast(const mx_tensor *x, const mx_tensor *y, int xnd, const int64_t *xshape) {
  if (y->size == 0) return MX_OK;
  bc_ctx c;
  const int64_t *shp[1] = {xshape};
  make_plan(&c.plan, 1, &xnd, shp, y->ndim, y->shape);
  c.x = mx_ptr(x);
  c.y = mx_ptr(y);
  c.es = mx_dtype_size(y->dtype);
  mx_parallel_for(y->size, GRAIN_LIGHT, bc_range, &c);
  return MX_OK;
}

int mx_cpu_broadcast_to(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return bcast(in[0], out[0], in[0]->ndim, in[0]->shape);
}

int mx_cpu_broadcast_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  (void)nin; (void)nout;
  (void)p; /* data's dims on like's rank: inference resolved the axis param */
  return bcast(in[0], out[0], ctx->info.align_ndim, ctx->info.align);
}

/* ---------------------------------------------------------------- where */
/* where(cond, x, y): cond as a uint8 nonzero mask, x and y in the result's compute
 * type, walked by one 3-operand plan (cond on its aligned dims: a 1-D cond repeats along
 * the inner axes); strides 0/1 per operand along each run. */
#define WHERE_LOOP(name, T)                                                               \
  static void name(int64_t n, const void *cv, int sc, const void *xv, int sx,           \
                   const void *yv, int sy, void *ov) {                                  \
    const uint8_t *c = cv;                                                              \
    const T *x = xv, *y = yv;                                                           \
    T *o = ov;                                                                          \
    for (int64_t i = 0; i < n; i++)                                                     \
      o[i] = c[sc ? i : 0] != 0 ? x[sx ? i : 0] : y[sy ? i : 0];                        \
  }
WHERE_LOOP(where_f32, float)
WHERE_LOOP(where_f64, double)
WHERE_LOOP(where_i32, int32_t)
WHERE_LOOP(where_i64, int64_t)
WHERE_LOOP(where_i8, int8_t)
WHERE_LOOP(where_u8, uint8_t)
typedef void (*where_fn)(int64_t, const void *, int, const void *, int, const void *, int,
                         void *);

typedef struct {
  where_fn f;
  bplan plan;
  const char *p[3];
  char *y;
  size_t es;
} where_ctx;

static void where_run(int64_t len, const int64_t *off, int64_t pos, const void *vc) {
  const where_ctx *c = vc;
  int in = c->plan.nd - 1;
  c->f(len, c->p[0] + (size_t)off[0], c->plan.st[0][in] != 0,
       c->p[1] + (size_t)off[1] * c->es, c->plan.st[1][in] != 0,
       c->p[2] + (size_t)off[2] * c->es, c->plan.st[2][in] != 0, c->y + (size_t)pos * c->es);
}
static void where_range(int64_t b, int64_t e, void *vc) {
  plan_walk(&((const where_ctx *)vc)->plan, b, e, where_run, vc);
}

int mx_cpu_where(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  static where_fn const tab[CT_N] = {where_f32, where_f64, where_i32, where_i64, where_i8,
                                     where_u8};
  const mx_tensor *y = out[0];
  int64_t n = y->size;
  if (n == 0) return MX_OK;
  int ct = ct_of(y->dtype);
  where_ctx c;
  c.f = tab[ct];
  c.es = ct_size[ct];
  /* cond through its dims aligned on x's rank (infer: a 1-D cond picks rows) */
  int nds[3] = {ctx->info.align_ndim, in[1]->ndim, in[2]->ndim};
  const int64_t *shp[3] = {ctx->info.align, in[1]->shape, in[2]->shape};
  make_plan(&c.plan, 3, nds, shp, y->ndim, y->shape);
  bool owned[3] = {false, false, false};
  int rc = MX_OK;
  const mx_tensor *cond = in[0];
  if (cond->dtype == MX_U8 || cond->dtype == MX_BOOL) {
    c.p[0] = mx_ptr(cond);
  } else {
    uint8_t *m = malloc((size_t)(cond->size ? cond->size : 1));
    if (m) {
      for (int64_t i = 0; i < cond->size; i++) m[i] = mx_load_f64(mx_ptr(cond), cond->dtype, i) != 0;
      owned[0] = true;
    }
    c.p[0] = (const char *)m;
  }
  for (int k = 0; k < 3; k++) {
    if (k > 0) c.p[k] = as_ct(in[k], ct, &owned[k]);
    if (!c.p[k]) rc = mx_err(MX_ENOMEM, "where: out of memory");
  }
  bool ynat = y->dtype == ct_dtype[ct];
  void *tmp = NULL;
  c.y = ynat ? mx_ptr(y) : (tmp = malloc((size_t)n * c.es));
  if (!c.y) rc = mx_err(MX_ENOMEM, "where: out of memory");
  if (rc == MX_OK) {
    mx_parallel_for(n, GRAIN_LIGHT, where_range, &c);
    if (!ynat && ct == CT_F32) from_ct(mx_ptr(y), y->dtype, 0, (const float *)c.y, n);
    else if (!ynat) mx_convert(mx_ptr(y), y->dtype, c.y, ct_dtype[ct], n);
  }
  for (int k = 0; k < 3; k++) if (owned[k]) free((void *)c.p[k]);
  free(tmp);
  return rc;
}

