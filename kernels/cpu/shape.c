/* kernels/cpu/shape.c — layout kernels as byte copies (no per-element dtype
 * conversion except cast). Each op is "out = in gathered through a strided view" built
 * here from the geometry inference resolved (ctx->info); the reference kernels
 * (kernels/ref/shape.c) share none of it. A strided copy engine walks the output view;
 * adjacent axes that are contiguous in both source and destination are merged first,
 * so slices and block transposes become memcpy runs. Work splits across the pool by
 * outer index once a copy passes ~256 KiB. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <string.h>
#include <stdlib.h>

/* A view maps output element coordinates (row-major over shape) to an input element
 * offset: base + sum(coord[d] * stride[d]); strides are in elements and may be 0
 * (repeat a value) or negative (flip). Up to 16 dims: tile/repeat split axes in two. */
#define MX_VIEW_DIMS (2 * MX_MAX_DIM)

typedef struct mx_view {
  int ndim;
  int64_t shape[MX_VIEW_DIMS];
  int64_t stride[MX_VIEW_DIMS];
  int64_t base;
} mx_view;

/* row-major element strides of shape */
static void strides_of(int ndim, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) { st[d] = s; s *= shape[d]; }
}

static void view_contig(mx_view *v, int ndim, const int64_t *shape) {
  v->ndim = ndim;
  v->base = 0;
  strides_of(ndim, shape, v->stride);
  for (int d = 0; d < ndim; d++) v->shape[d] = shape[d];
}

/* The view builders of the single-input ops: x as the output o reads it. */
typedef void (*view_fn)(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v);

static void view_same(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v) {
  (void)f; (void)x;
  view_contig(v, o->ndim, o->shape);
}

static void view_perm(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v) {
  (void)o;
  int64_t st[MX_MAX_DIM];
  strides_of(x->ndim, x->shape, st);
  v->ndim = x->ndim;
  v->base = 0;
  for (int d = 0; d < x->ndim; d++) {
    v->shape[d] = x->shape[f->perm[d]];
    v->stride[d] = st[f->perm[d]];
  }
}

/* the slice box of x (slice, slice_axis; slice_assign's region) */
static void view_box(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v) {
  (void)o;
  int64_t st[MX_MAX_DIM];
  strides_of(x->ndim, x->shape, st);
  v->ndim = x->ndim;
  v->base = 0;
  for (int d = 0; d < x->ndim; d++) {
    v->shape[d] = f->extent[d];
    /* an extent of 0 or 1 never steps: no product to overflow (a step of 2^62) */
    v->stride[d] = f->extent[d] > 1 ? st[d] * f->step[d] : 0;
    if (f->extent[d]) v->base += f->begin[d] * st[d]; /* an empty box's begin may be past the end */
  }
}

static void view_flip(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v) {
  (void)o;
  view_contig(v, x->ndim, x->shape);
  for (int d = 0; d < x->ndim; d++) {
    if (!f->axes[d] || x->shape[d] == 0) continue;
    v->base += (x->shape[d] - 1) * v->stride[d];
    v->stride[d] = -v->stride[d];
  }
}

/* tile: output axis i = (reps_i, dim_i) over x as align; the rep index has stride 0 */
static void view_tile(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v) {
  (void)x;
  int64_t st[MX_MAX_DIM];
  int n = f->align_ndim;
  strides_of(n, f->align, st);
  v->ndim = 2 * n;
  v->base = 0;
  for (int i = 0; i < n; i++) {
    int64_t dim = f->align[i];
    v->shape[2 * i] = dim ? o->shape[i] / dim : 0;
    v->stride[2 * i] = 0;
    v->shape[2 * i + 1] = dim;
    v->stride[2 * i + 1] = st[i];
  }
}

/* repeat: axis a of x as align = (dim_a, repeats); the repeat index has stride 0 */
static void view_repeat(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, mx_view *v) {
  (void)x;
  int64_t st[MX_MAX_DIM];
  int n = f->align_ndim, a = f->axis;
  strides_of(n, f->align, st);
  v->ndim = n + 1;
  v->base = 0;
  for (int d = 0, j = 0; d < n; d++) {
    v->shape[j] = f->align[d];
    v->stride[j++] = st[d];
    if (d == a) {
      v->shape[j] = f->align[a] ? o->shape[a] / f->align[a] : 0;
      v->stride[j++] = 0;
    }
  }
}

/* value (right-aligned, broadcast) as a view over the region's shape */
static void view_bcast(mx_view *v, const mx_tensor *value, const mx_view *region) {
  int64_t st[MX_MAX_DIM];
  strides_of(value->ndim, value->shape, st);
  v->ndim = region->ndim;
  v->base = 0;
  for (int d = 0; d < region->ndim; d++) {
    int iv = d - (region->ndim - value->ndim);
    v->shape[d] = region->shape[d];
    v->stride[d] = iv >= 0 && value->shape[iv] != 1 ? st[iv] : 0;
  }
}

typedef struct {
  int ndim;
  int64_t shape[MX_VIEW_DIMS];
  int64_t ss[MX_VIEW_DIMS], ds[MX_VIEW_DIMS]; /* source / destination strides (elements) */
  const char *src;
  char *dst;
  size_t es;
} copy_ctx;

/* Merge axis d into d-1 when both sides are contiguous across them; drop unit axes. */
static void coalesce(copy_ctx *c) {
  int n = 0;
  for (int d = 0; d < c->ndim; d++) {
    if (c->shape[d] == 1) continue;
    if (n > 0 && c->ss[n - 1] == c->ss[d] * c->shape[d] && c->ds[n - 1] == c->ds[d] * c->shape[d]) {
      c->shape[n - 1] *= c->shape[d];
      c->ss[n - 1] = c->ss[d];
      c->ds[n - 1] = c->ds[d];
      continue;
    }
    c->shape[n] = c->shape[d];
    c->ss[n] = c->ss[d];
    c->ds[n] = c->ds[d];
    n++;
  }
  if (n == 0) { c->shape[0] = 1; c->ss[0] = c->ds[0] = 1; n = 1; }
  c->ndim = n;
}

#define INNER(T)                                                                           \
  {                                                                                        \
    const T *s = (const T *)src;                                                           \
    T *d = (T *)dst;                                                                       \
    for (int64_t k = 0; k < len; k++) d[k * dst_st] = s[k * src_st];                       \
  }

/* rows [begin, end) of the outer index space (all axes but the last) */
static void copy_range(int64_t begin, int64_t end, void *vc) {
  const copy_ctx *c = vc;
  int last = c->ndim - 1;
  int64_t len = c->shape[last], src_st = c->ss[last], dst_st = c->ds[last];
  for (int64_t row = begin; row < end; row++) {
    int64_t r = row, so = 0, dof = 0;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = r % c->shape[d];
      r /= c->shape[d];
      so += i * c->ss[d];
      dof += i * c->ds[d];
    }
    const char *src = c->src + so * (int64_t)c->es;
    char *dst = c->dst + dof * (int64_t)c->es;
    if (src_st == 1 && dst_st == 1) {
      memmove(dst, src, (size_t)len * c->es); /* a run may overlap its source: never memcpy */
      continue;
    }
    switch (c->es) {
    case 1: INNER(uint8_t) break;
    case 2: INNER(uint16_t) break;
    case 4: INNER(uint32_t) break;
    default: INNER(uint64_t) break;
    }
  }
}

/* Transposing copies (the source is contiguous along axis p, the destination along
 * the last axis) go through 8x8 tiles, reading along the source's contiguous axis:
 * with power-of-two strides bigger tiles alias in L1 (measured on 2048^2 f32: 8x8
 * ~4x faster than the row-by-row copy, 32x32 ~2x). One task per (outer index, tile
 * row). */
#define TILE 8
#define TILE_LOOP(T)                                                                       \
  {                                                                                        \
    const T *s = (const T *)src;                                                           \
    T *d = (T *)dst;                                                                       \
    for (int64_t j0 = 0; j0 < nl; j0 += TILE) {                                            \
      int64_t j1 = j0 + TILE < nl ? j0 + TILE : nl;                                        \
      for (int64_t j = j0; j < j1; j++)                                                    \
        for (int64_t i = i0; i < i1; i++) d[i * dp + j] = s[i + j * sl];                    \
    }                                                                                      \
  }

typedef struct {
  const copy_ctx *c;
  int p;
} tile_ctx;

static void tile_range(int64_t begin, int64_t end, void *vt) {
  const tile_ctx *t = vt;
  const copy_ctx *c = t->c;
  int last = c->ndim - 1, p = t->p;
  int64_t np = c->shape[p], nl = c->shape[last], dp = c->ds[p], sl = c->ss[last];
  int64_t tiles = (np + TILE - 1) / TILE;
  for (int64_t task = begin; task < end; task++) {
    int64_t r = task / tiles, i0 = (task % tiles) * TILE, i1 = i0 + TILE < np ? i0 + TILE : np;
    int64_t so = 0, dof = 0;
    for (int d = last - 1; d >= 0; d--) { /* the outer axes, p excluded */
      if (d == p) continue;
      int64_t i = r % c->shape[d];
      r /= c->shape[d];
      so += i * c->ss[d];
      dof += i * c->ds[d];
    }
    const char *src = c->src + so * (int64_t)c->es;
    char *dst = c->dst + dof * (int64_t)c->es;
    switch (c->es) {
    case 1: TILE_LOOP(uint8_t) break;
    case 2: TILE_LOOP(uint16_t) break;
    case 4: TILE_LOOP(uint32_t) break;
    default: TILE_LOOP(uint64_t) break;
    }
  }
}

/* dst (through dview) = src (through sview); both views have the same shape. */
static void copy_views(char *dst, const mx_view *dv, const char *src, const mx_view *sv, size_t es) {
  copy_ctx c;
  c.ndim = sv->ndim;
  for (int d = 0; d < sv->ndim; d++) {
    if (sv->shape[d] == 0) return;
    c.shape[d] = sv->shape[d];
    c.ss[d] = sv->stride[d];
    c.ds[d] = dv->stride[d];
  }
  c.src = src + sv->base * (int64_t)es;
  c.dst = dst + dv->base * (int64_t)es;
  c.es = es;
  coalesce(&c);
  int last = c.ndim - 1;
  if (c.ndim >= 2 && c.ds[last] == 1 && c.ss[last] != 1 && c.shape[last] >= 8) {
    int p = -1;
    for (int d = 0; d < last; d++) if (c.ss[d] == 1 && c.shape[d] >= 8) p = d;
    if (p >= 0) {
      tile_ctx t = { &c, p };
      int64_t tasks = (c.shape[p] + TILE - 1) / TILE;
      for (int d = 0; d < last; d++) if (d != p) tasks *= c.shape[d];
      int64_t task_bytes = TILE * c.shape[last] * (int64_t)es;
      mx_parallel_for(tasks, 1 + (256 << 10) / (task_bytes + 64), tile_range, &t);
      return;
    }
  }
  int64_t rows = 1;
  for (int d = 0; d < c.ndim - 1; d++) rows *= c.shape[d];
  int64_t row_bytes = c.shape[c.ndim - 1] * (int64_t)es;
  mx_parallel_for(rows, 1 + (256 << 10) / (row_bytes + 64), copy_range, &c);
}

static int gather(const mx_kctx *ctx, view_fn build, const mx_tensor *x, mx_tensor *o) {
  mx_view sv, dv;
  build(&ctx->info, x, o, &sv);
  view_contig(&dv, sv.ndim, sv.shape);
  copy_views(mx_ptr(o), &dv, mx_ptr(x), &sv, mx_dtype_size(x->dtype));
  return MX_OK;
}

#define GATHER(name, build)                                                              \
  int mx_cpu_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)p; (void)nin; (void)nout;                                                      \
    return gather(ctx, build, in[0], out[0]);                                            \
  }
GATHER(reshape, view_same)
GATHER(reshape_like, view_same)
GATHER(flatten, view_same)
GATHER(expand_dims, view_same)
GATHER(squeeze, view_same)
GATHER(copy, view_same)
GATHER(transpose, view_perm)
GATHER(swapaxes, view_perm)
GATHER(slice, view_box)
GATHER(slice_axis, view_box)
GATHER(flip, view_flip)
GATHER(tile, view_tile)
GATHER(repeat, view_repeat)

typedef struct {
  const char *src;
  char *dst;
  int sdt, ddt;
} cast_ctx;

static void cast_range(int64_t b, int64_t e, void *vc) {
  const cast_ctx *c = vc;
  mx_convert(c->dst + b * (int64_t)mx_dtype_size(c->ddt), c->ddt,
             c->src + b * (int64_t)mx_dtype_size(c->sdt), c->sdt, e - b);
}

int mx_cpu_cast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  cast_ctx c = { mx_ptr(in[0]), mx_ptr(out[0]), in[0]->dtype, out[0]->dtype };
  mx_parallel_for(in[0]->size, 1 << 16, cast_range, &c);
  return MX_OK;
}

/* concat/stack: input k is a (outer, blk_k) block written at column off_k of the
 * (outer, row) output */
static void place(mx_tensor *o, int nin, mx_tensor *const *in, int64_t outer, int64_t row,
                  const int64_t *blk) {
  size_t es = mx_dtype_size(o->dtype);
  int64_t off = 0;
  for (int k = 0; k < nin; k++) {
    mx_view sv, dv;
    sv.ndim = dv.ndim = 2;
    sv.shape[0] = dv.shape[0] = outer;
    sv.shape[1] = dv.shape[1] = blk[k];
    sv.stride[0] = blk[k]; sv.stride[1] = 1; sv.base = 0;
    dv.stride[0] = row; dv.stride[1] = 1; dv.base = off;
    copy_views(mx_ptr(o), &dv, mx_ptr(in[k]), &sv, es);
    off += blk[k];
  }
}

/* o viewed as (outer, o->shape[a], inner) around axis a */
static void around_axis(const mx_tensor *o, int a, int64_t *outer, int64_t *inner) {
  *inner = *outer = 1;
  for (int d = a + 1; d < o->ndim; d++) *inner *= o->shape[d];
  for (int d = 0; d < a; d++) *outer *= o->shape[d];
}

int mx_cpu_concat(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nout;
  mx_tensor *o = out[0];
  int64_t inner, outer, blk[64];
  int a = ctx->info.axis;
  around_axis(o, a, &outer, &inner);
  for (int k = 0; k < nin; k++) blk[k] = in[k]->shape[a] * inner;
  place(o, nin, in, outer, o->shape[a] * inner, blk);
  return MX_OK;
}

int mx_cpu_stack(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nout;
  mx_tensor *o = out[0];
  int64_t inner, outer, blk[64];
  around_axis(o, ctx->info.axis, &outer, &inner);
  for (int k = 0; k < nin; k++) blk[k] = inner;
  place(o, nin, in, outer, nin * inner, blk);
  return MX_OK;
}

static int assign(const mx_kctx *ctx, const mx_tensor *x, const mx_tensor *value, double scalar,
                  mx_tensor *o) {
  mx_view r;
  view_box(&ctx->info, x, o, &r);
  size_t es = mx_dtype_size(o->dtype);
  if (o->storage != x->storage || o->offset != x->offset) {
    mx_view cv;
    view_contig(&cv, x->ndim, x->shape);
    copy_views(mx_ptr(o), &cv, mx_ptr(x), &cv, es);
  }
  if (value && value->dtype == o->dtype) {
    mx_view vv;
    view_bcast(&vv, value, &r);
    copy_views(mx_ptr(o), &r, mx_ptr(value), &vv, es);
    return MX_OK;
  }
  /* a scalar (or a value of another dtype): convert one element, broadcast it or
   * convert the value first */
  int64_t n = mx_shape_prod(r.ndim, r.shape);
  if (n == 0) return MX_OK;
  if (!value) {
    uint64_t one = 0;
    mx_store_f64(&one, o->dtype, 0, scalar);
    mx_view sv = r;
    sv.base = 0;
    for (int d = 0; d < sv.ndim; d++) sv.stride[d] = 0;
    copy_views(mx_ptr(o), &r, (const char *)&one, &sv, es);
    return MX_OK;
  }
  mx_view vv;
  view_bcast(&vv, value, &r);
  for (int64_t i = 0; i < n; i++) { /* rare mixed-dtype path: element by element */
    int64_t ri = i, ro = r.base, vo = 0;
    for (int d = r.ndim - 1; d >= 0; d--) {
      int64_t c = ri % r.shape[d];
      ri /= r.shape[d];
      ro += c * r.stride[d];
      vo += c * vv.stride[d];
    }
    mx_store_f64(mx_ptr(o), o->dtype, ro, mx_load_f64(mx_ptr(value), value->dtype, vo));
  }
  return MX_OK;
}

int mx_cpu_slice_assign(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return assign(ctx, in[0], in[1], 0, out[0]);
}

int mx_cpu_slice_assign_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                               mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_slice_assign_scalar *P = p;
  return assign(ctx, in[0], NULL, P->scalar, out[0]);
}

/* split: the input is (outer, nout, run) bytes-wise around the axis, run = piece * inner
 * elements; piece k takes column k of every outer row, one memcpy per row. */
int mx_cpu_split(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)p; (void)nin;
  const mx_tensor *x = in[0];
  int a = ctx->info.axis; /* normalised by inference */
  size_t es = mx_dtype_size(x->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= x->shape[d];
  for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
  size_t run = (size_t)(x->shape[a] / nout * inner) * es;
  if (run == 0) return MX_OK;
  const char *src = mx_ptr(x);
  for (int k = 0; k < nout; k++) {
    char *dst = mx_ptr(out[k]);
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (size_t)o * run, src + ((size_t)o * (size_t)nout + (size_t)k) * run, run);
  }
  return MX_OK;
}

/* ---- pad, moveaxis, depth_to_space, space_to_depth, broadcast_axis ---- */

GATHER(moveaxis, view_perm)

/* broadcast_axis: x over the output's shape, stride 0 on the broadcast axes */
static void view_bcast_axis(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o,
                            mx_view *v) {
  strides_of(x->ndim, x->shape, v->stride);
  v->ndim = x->ndim;
  v->base = 0;
  for (int d = 0; d < x->ndim; d++) {
    v->shape[d] = o->shape[d];
    if (f->axes[d]) v->stride[d] = 0;
  }
}
GATHER(broadcast_axis, view_bcast_axis)

/* depth_to_space: the output (N, C', H*b, W*b) is (N, C', H, b, W, b) row-major; element
 * (n, c, h, i, w, j) reads x[n, (i*b+j)*C' + c, h, w] */
static void view_d2s(const mx_tensor *x, const mx_tensor *o, int64_t bs, mx_view *v) {
  int64_t st[4];
  strides_of(4, x->shape, st);
  int64_t cq = o->shape[1];
  int64_t sh[6] = { o->shape[0], cq, x->shape[2], bs, x->shape[3], bs };
  int64_t sd[6] = { st[0], st[1], st[2], bs * cq * st[1], st[3], cq * st[1] };
  v->ndim = 6;
  v->base = 0;
  memcpy(v->shape, sh, sizeof sh);
  memcpy(v->stride, sd, sizeof sd);
}

/* space_to_depth: the output (N, C*b^2, H', W') is (N, b, b, C, H', W') row-major;
 * element (n, i, j, c, h, w) reads x[n, c, h*b+i, w*b+j] */
static void view_s2d(const mx_tensor *x, const mx_tensor *o, int64_t bs, mx_view *v) {
  int64_t st[4];
  strides_of(4, x->shape, st);
  int64_t sh[6] = { x->shape[0], bs, bs, x->shape[1], o->shape[2], o->shape[3] };
  int64_t sd[6] = { st[0], st[2], st[3], st[1], bs * st[2], bs * st[3] };
  v->ndim = 6;
  v->base = 0;
  memcpy(v->shape, sh, sizeof sh);
  memcpy(v->stride, sd, sizeof sd);
}

int mx_cpu_depth_to_space(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_depth_to_space *P = p;
  mx_view sv, dv;
  view_d2s(in[0], out[0], P->block_size, &sv);
  view_contig(&dv, sv.ndim, sv.shape);
  copy_views(mx_ptr(out[0]), &dv, mx_ptr(in[0]), &sv, mx_dtype_size(in[0]->dtype));
  return MX_OK;
}

int mx_cpu_space_to_depth(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_space_to_depth *P = p;
  mx_view sv, dv;
  view_s2d(in[0], out[0], P->block_size, &sv);
  view_contig(&dv, sv.ndim, sv.shape);
  copy_views(mx_ptr(out[0]), &dv, mx_ptr(in[0]), &sv, mx_dtype_size(in[0]->dtype));
  return MX_OK;
}

/* pad: per-axis tables map each output index to its input index (-1: the constant);
 * each output row copies its interior in one memcpy and writes the few pad elements. */
typedef struct {
  const mx_tensor *x;
  mx_tensor *o;
  const int64_t *map[MX_MAX_DIM];
  int64_t before, inner; /* last axis: the before pad and the input's length */
  char fill[16];         /* constant_value in the dtype */
} pad_ctx;

static void pad_range(int64_t begin, int64_t end, void *vc) {
  const pad_ctx *c = vc;
  const mx_tensor *x = c->x;
  mx_tensor *o = c->o;
  int nd = o->ndim, last = nd - 1;
  size_t es = mx_dtype_size(o->dtype);
  int64_t len = o->shape[last];
  const int64_t *ml = c->map[last];
  for (int64_t row = begin; row < end; row++) {
    int64_t r = row, src = 0, mul = x->shape[last];
    bool outside = false;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = c->map[d][r % o->shape[d]];
      r /= o->shape[d];
      if (i < 0) outside = true;
      src += i * mul;
      mul *= x->shape[d];
    }
    char *dst = (char *)mx_ptr(o) + row * len * (int64_t)es;
    const char *s = (const char *)mx_ptr(x) + src * (int64_t)es;
    if (outside) {
      for (int64_t k = 0; k < len; k++) memcpy(dst + k * (int64_t)es, c->fill, es);
      continue;
    }
    memcpy(dst + c->before * (int64_t)es, s, (size_t)c->inner * es);
    for (int64_t k = 0; k < len; k++) {
      if (k == c->before) k += c->inner; /* the interior, copied above */
      if (k >= len) break;
      if (ml[k] < 0) memcpy(dst + k * (int64_t)es, c->fill, es);
      else memcpy(dst + k * (int64_t)es, s + ml[k] * (int64_t)es, es);
    }
  }
}

int mx_cpu_pad(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_pad *P = p;
  const mx_op_info *f = &ctx->info;
  mx_tensor *o = out[0];
  if (o->size == 0) return MX_OK;
  int nd = o->ndim;
  int64_t total = 0;
  for (int d = 0; d < nd; d++) total += o->shape[d];
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)total);
  if (!tab) return mx_err(MX_ENOMEM, "pad: out of memory for %lld index entries", (long long)total);
  pad_ctx c;
  c.x = in[0];
  c.o = o;
  int64_t *t = tab;
  for (int d = 0; d < nd; d++) {
    int64_t n = f->extent[d];
    for (int64_t k = 0; k < o->shape[d]; k++) {
      int64_t i = k - f->begin[d];
      if (i < 0 || i >= n) {
        if (P->mode == MX_PAD_MODE_CONSTANT) i = -1;
        else if (P->mode == MX_PAD_MODE_EDGE) i = i < 0 ? 0 : n - 1;
        else i = i < 0 ? -i : 2 * (n - 1) - i;
      }
      t[k] = i;
    }
    c.map[d] = t;
    t += o->shape[d];
  }
  c.before = f->begin[nd - 1];
  c.inner = f->extent[nd - 1];
  mx_store_f64(c.fill, o->dtype, 0, P->constant_value);
  int64_t rows = o->size / o->shape[nd - 1];
  mx_parallel_for(rows, 1 + (256 << 10) / (o->shape[nd - 1] * (int64_t)mx_dtype_size(o->dtype) + 64),
                  pad_range, &c);
  free(tab);
  return MX_OK;
}

/* ---- split_v2, one memcpy run per piece and outer index ---- */
int64_t mx_split_v2_start(const void *params, int64_t len, int k);

int mx_cpu_split_v2(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)nin;
  const mx_tensor *x = in[0];
  int a = ctx->info.axis; /* normalised by inference */
  size_t es = mx_dtype_size(x->dtype);
  int64_t outer = 1, inner = 1, len = x->shape[a];
  for (int d = 0; d < a; d++) outer *= x->shape[d];
  for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
  const char *src = mx_ptr(x);
  size_t row = (size_t)(len * inner) * es;
  for (int k = 0; k < nout; k++) {
    int64_t s = mx_split_v2_start(p, len, k);
    int64_t e = k + 1 < nout ? mx_split_v2_start(p, len, k + 1) : len;
    size_t run = (size_t)((e - s) * inner) * es, off = (size_t)(s * inner) * es;
    if (run == 0) continue;
    char *dst = mx_ptr(out[k]);
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (size_t)o * run, src + (size_t)o * row + off, run);
  }
  return MX_OK;
}
