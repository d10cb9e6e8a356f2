/* kernels/ref/shape.c — reference layout kernels: plain loops over the output's
 * coordinates, each mapped straight to the input element it reads with the geometry
 * inference resolved (ctx->info: perm, slice box, flip axes, tile/repeat alignment,
 * concat/stack axis). Nothing here is shared with kernels/cpu/shape.c (its strided
 * views), so the specs comparing the two check one against the other. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <string.h>

/* coordinate c (row-major over shape) of flat index i; only for non-empty shapes */
static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *c) {
  for (int d = ndim - 1; d >= 0; d--) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
}

/* flat row-major index of coordinate c in shape */
static int64_t ravel(int ndim, const int64_t *shape, const int64_t *c) {
  int64_t i = 0;
  for (int d = 0; d < ndim; d++) i = i * shape[d] + c[d];
  return i;
}

/* o[oi] = x[xi]: the bytes when the dtypes match (exact for every dtype), else
 * converted through double (cast) */
static void move(mx_tensor *o, int64_t oi, const mx_tensor *x, int64_t xi) {
  if (o->dtype == x->dtype) {
    size_t es = mx_dtype_size(x->dtype);
    memcpy((char *)mx_ptr(o) + oi * (int64_t)es, (const char *)mx_ptr(x) + xi * (int64_t)es, es);
    return;
  }
  mx_store_f64(mx_ptr(o), o->dtype, oi, mx_load_f64(mx_ptr(x), x->dtype, xi));
}

/* The input element output element i (at coordinate oc) reads. */
typedef int64_t (*src_fn)(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                          const int64_t *oc);

/* reshape, reshape_like, flatten, expand_dims, squeeze, copy, cast: same order */
static int64_t src_same(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                        const int64_t *oc) {
  (void)f; (void)x; (void)o; (void)oc;
  return i;
}

/* transpose, swapaxes: output axis d is input axis perm[d] */
static int64_t src_perm(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                        const int64_t *oc) {
  (void)o; (void)i;
  int64_t ic[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) ic[f->perm[d]] = oc[d];
  return ravel(x->ndim, x->shape, ic);
}

/* slice, slice_axis: input index begin + k * step along each axis */
static int64_t src_box(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                       const int64_t *oc) {
  (void)o; (void)i;
  int64_t ic[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) ic[d] = f->begin[d] + oc[d] * f->step[d];
  return ravel(x->ndim, x->shape, ic);
}

static int64_t src_flip(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                        const int64_t *oc) {
  (void)o; (void)i;
  int64_t ic[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) ic[d] = f->axes[d] ? x->shape[d] - 1 - oc[d] : oc[d];
  return ravel(x->ndim, x->shape, ic);
}

/* tile: the input as align (its dims right-aligned on the output's rank); the output
 * index wraps around each input dim */
static int64_t src_tile(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                        const int64_t *oc) {
  (void)x; (void)o; (void)i;
  int64_t ic[MX_MAX_DIM];
  for (int d = 0; d < f->align_ndim; d++) ic[d] = oc[d] % f->align[d];
  return ravel(f->align_ndim, f->align, ic);
}

/* repeat: the input as align (its shape, or its size with no axis); output index k
 * along axis reads input index k / repeats */
static int64_t src_repeat(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o, int64_t i,
                          const int64_t *oc) {
  (void)x; (void)i;
  int64_t ic[MX_MAX_DIM], reps = o->shape[f->axis] / f->align[f->axis];
  for (int d = 0; d < f->align_ndim; d++) ic[d] = oc[d];
  ic[f->axis] = oc[f->axis] / reps;
  return ravel(f->align_ndim, f->align, ic);
}

static int gather(const mx_kctx *ctx, src_fn src, const mx_tensor *x, mx_tensor *o) {
  int64_t oc[MX_MAX_DIM];
  for (int64_t i = 0; i < o->size; i++) {
    unravel(i, o->ndim, o->shape, oc);
    move(o, i, x, src(&ctx->info, x, o, i, oc));
  }
  return MX_OK;
}

#define GATHER(name, src)                                                                \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)p; (void)nin; (void)nout;                                                      \
    return gather(ctx, src, in[0], out[0]);                                              \
  }
GATHER(reshape, src_same)
GATHER(reshape_like, src_same)
GATHER(flatten, src_same)
GATHER(expand_dims, src_same)
GATHER(squeeze, src_same)
GATHER(copy, src_same)
GATHER(cast, src_same)
GATHER(transpose, src_perm)
GATHER(swapaxes, src_perm)
GATHER(slice, src_box)
GATHER(slice_axis, src_box)
GATHER(flip, src_flip)
GATHER(tile, src_tile)
GATHER(repeat, src_repeat)

/* concat: output index k along axis belongs to the input whose range holds it */
int mx_ref_concat(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nout;
  mx_tensor *o = out[0];
  int a = ctx->info.axis;
  int64_t oc[MX_MAX_DIM];
  for (int64_t i = 0; i < o->size; i++) {
    unravel(i, o->ndim, o->shape, oc);
    int k = 0;
    while (oc[a] >= in[k]->shape[a]) oc[a] -= in[k++]->shape[a];
    move(o, i, in[k], ravel(in[k]->ndim, in[k]->shape, oc));
  }
  return MX_OK;
}

/* stack: output index k along the new axis is input k */
int mx_ref_stack(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  mx_tensor *o = out[0];
  int a = ctx->info.axis;
  int64_t oc[MX_MAX_DIM], ic[MX_MAX_DIM];
  for (int64_t i = 0; i < o->size; i++) {
    unravel(i, o->ndim, o->shape, oc);
    for (int d = 0, j = 0; d < o->ndim; d++) if (d != a) ic[j++] = oc[d];
    const mx_tensor *x = in[oc[a]];
    move(o, i, x, ravel(x->ndim, x->shape, ic));
  }
  return MX_OK;
}

/* Whether output coordinate oc lies in the slice box (ctx->info's begin, step,
 * extent); its index inside the box goes to q. */
static bool in_box(const mx_op_info *f, int ndim, const int64_t *oc, int64_t *q) {
  for (int d = 0; d < ndim; d++) {
    int64_t t = oc[d] - f->begin[d];
    if (t % f->step[d]) return false;
    q[d] = t / f->step[d];
    if (q[d] < 0 || q[d] >= f->extent[d]) return false;
  }
  return true;
}

/* out = data with the box replaced by value (broadcast to the box, right-aligned) or
 * a scalar: each output element reads its own data element or the value it gets, so
 * out may be data itself. */
static int assign(const mx_kctx *ctx, const mx_tensor *x, const mx_tensor *value, double scalar,
                  mx_tensor *o) {
  const mx_op_info *f = &ctx->info;
  int64_t oc[MX_MAX_DIM], q[MX_MAX_DIM];
  for (int64_t i = 0; i < o->size; i++) {
    unravel(i, o->ndim, o->shape, oc);
    if (!in_box(f, o->ndim, oc, q)) {
      move(o, i, x, i);
    } else if (value) {
      int64_t qi = ravel(o->ndim, f->extent, q);
      move(o, i, value, mx_ref_bcast_offset(qi, o->ndim, f->extent, value->ndim, value->shape));
    } else {
      mx_store_f64(mx_ptr(o), o->dtype, i, scalar);
    }
  }
  return MX_OK;
}

int mx_ref_slice_assign(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return assign(ctx, in[0], in[1], 0, out[0]);
}

int mx_ref_slice_assign_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                               mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_slice_assign_scalar *P = p;
  return assign(ctx, in[0], NULL, P->scalar, out[0]);
}

/* split: element i of piece k (row-major over the piece, squeezed or not: same order)
 * is element (outer, k * piece + j, inner) of the input, written out index by index. */
int mx_ref_split(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)p; (void)nin;
  const mx_tensor *x = in[0];
  int a = ctx->info.axis; /* normalised by inference */
  int64_t inner = 1;
  for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t piece = x->shape[a] / nout;
  for (int k = 0; k < nout; k++) {
    mx_tensor *o = out[k];
    for (int64_t i = 0; i < o->size; i++) {
      int64_t outer = i / (piece * inner), j = (i / inner) % piece, r = i % inner;
      int64_t src = (outer * x->shape[a] + k * piece + j) * inner + r;
      move(o, i, x, src); /* bytes: exact for int64 above 2^53 */
    }
  }
  return MX_OK;
}

/* ---- pad, moveaxis, depth_to_space, space_to_depth, broadcast_axis ---- */

GATHER(moveaxis, src_perm)

/* broadcast_axis: the broadcast axes (info->axes) read index 0 */
static int64_t src_bcast_axis(const mx_op_info *f, const mx_tensor *x, const mx_tensor *o,
                              int64_t i, const int64_t *oc) {
  (void)o; (void)i;
  int64_t ic[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) ic[d] = f->axes[d] ? 0 : oc[d];
  return ravel(x->ndim, x->shape, ic);
}
GATHER(broadcast_axis, src_bcast_axis)

/* depth_to_space: out[n, c, h*b+i, w*b+j] = x[n, (i*b+j)*C' + c, h, w], C' = C/b^2 */
int mx_ref_depth_to_space(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_depth_to_space *P = p;
  const mx_tensor *x = in[0];
  mx_tensor *o = out[0];
  int64_t bs = P->block_size, oc[4], ic[4];
  for (int64_t k = 0; k < o->size; k++) {
    unravel(k, 4, o->shape, oc);
    int64_t i = oc[2] % bs, j = oc[3] % bs;
    ic[0] = oc[0];
    ic[1] = (i * bs + j) * o->shape[1] + oc[1];
    ic[2] = oc[2] / bs;
    ic[3] = oc[3] / bs;
    move(o, k, x, ravel(4, x->shape, ic));
  }
  return MX_OK;
}

/* space_to_depth: out[n, (i*b+j)*C + c, h, w] = x[n, c, h*b+i, w*b+j] */
int mx_ref_space_to_depth(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_space_to_depth *P = p;
  const mx_tensor *x = in[0];
  mx_tensor *o = out[0];
  int64_t bs = P->block_size, C = x->shape[1], oc[4], ic[4];
  for (int64_t k = 0; k < o->size; k++) {
    unravel(k, 4, o->shape, oc);
    int64_t blk = oc[1] / C;
    ic[0] = oc[0];
    ic[1] = oc[1] % C;
    ic[2] = oc[2] * bs + blk / bs;
    ic[3] = oc[3] * bs + blk % bs;
    move(o, k, x, ravel(4, x->shape, ic));
  }
  return MX_OK;
}

/* pad: output coordinate t on axis d is input t - before (info->begin) when inside;
 * outside, constant writes constant_value, edge clamps, reflect mirrors about the
 * border element (pads are smaller than the axis: one reflection suffices). */
int mx_ref_pad(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_pad *P = p;
  const mx_op_info *f = &ctx->info;
  const mx_tensor *x = in[0];
  mx_tensor *o = out[0];
  int64_t oc[MX_MAX_DIM], ic[MX_MAX_DIM];
  for (int64_t k = 0; k < o->size; k++) {
    unravel(k, o->ndim, o->shape, oc);
    bool inside = true;
    for (int d = 0; d < o->ndim; d++) {
      int64_t t = oc[d] - f->begin[d], n = f->extent[d];
      if (t < 0 || t >= n) {
        if (P->mode == MX_PAD_MODE_CONSTANT) inside = false;
        else if (P->mode == MX_PAD_MODE_EDGE) t = t < 0 ? 0 : n - 1;
        else t = t < 0 ? -t : 2 * (n - 1) - t;
      }
      ic[d] = t;
    }
    if (inside) move(o, k, x, ravel(x->ndim, x->shape, ic));
    else mx_store_f64(mx_ptr(o), o->dtype, k, P->constant_value);
  }
  return MX_OK;
}

/* ---- split_v2, piece k from its start along the axis ---- */
int64_t mx_split_v2_start(const void *params, int64_t len, int k);

int mx_ref_split_v2(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)nin;
  const mx_tensor *x = in[0];
  int a = ctx->info.axis; /* normalised by inference */
  int64_t inner = 1, len = x->shape[a];
  for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
  for (int k = 0; k < nout; k++) {
    mx_tensor *o = out[k];
    int64_t s = mx_split_v2_start(p, len, k);
    int64_t e = k + 1 < nout ? mx_split_v2_start(p, len, k + 1) : len, piece = e - s;
    for (int64_t i = 0; i < o->size; i++) {
      int64_t outer = i / (piece * inner), j = (i / inner) % piece, r = i % inner;
      move(o, i, x, (outer * len + s + j) * inner + r);
    }
  }
  return MX_OK;
}

/* shape_array, size_array: the input's dims / element count as int64 values */
int mx_ref_shape_array(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t *o = mx_ptr(out[0]);
  for (int d = 0; d < in[0]->ndim; d++) o[d] = in[0]->shape[d];
  return MX_OK;
}

int mx_ref_size_array(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  *(int64_t *)mx_ptr(out[0]) = in[0]->size;
  return MX_OK;
}
