/* sort.c — inference for sort, argsort, topk and sort_backward, and topk's output count
 * (the op table's `nout = "topk"`). Index outputs hold 1-based positions
 * (docs/ops-notes.md) in the dtype param (int64 by default). The kernels read the
 * normalised axis from info->axis and k from their outputs' shapes. */
#include "infer.h"
#include "mx_ops_gen.h"

static const char *shp(char *b, const mx_desc *t) { return mx_shape_str(b, t->ndim, t->shape); }

static int sort_axis(const char *op, const mx_desc *x, int64_t axis, mx_op_info *info) {
  if (x->ndim == 0) return mx_err(MX_EINVAL, "%s: data must have at least 1 dim", op);
  int a, rc = mx_norm_axis(op, "axis", axis, x->ndim, &a);
  if (rc) return rc;
  info->axis = a;
  return MX_OK;
}

/* Index dtypes: the integers that hold any position, or floats (MXNet's float32 default);
 * float16 would round positions above 2048, bool and int8/uint8 cannot hold them. */
static int index_dtype(const char *op, int dt) {
  if (dt == MX_I64 || dt == MX_I32 || dt == MX_F32 || dt == MX_F64) return MX_OK;
  return mx_err(MX_EINVAL, "%s: dtype must be int64, int32, float32 or float64 (index "
                "values), got %s", op, mx_dtype_name(dt));
}

int mx_infer_sort(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_sort *P = p;
  int rc = sort_axis(def->name, in[0], P->axis, info);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

int mx_infer_argsort(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_argsort *P = p;
  int rc = sort_axis(def->name, in[0], P->axis, info);
  if (!rc) rc = index_dtype(def->name, P->dtype);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, P->dtype);
  return MX_OK;
}

int mx_nout_topk(const void *params) {
  const struct mx_params_topk *P = params;
  if (P->ret_typ < MX_TOPK_RET_TYP_VALUE || P->ret_typ > MX_TOPK_RET_TYP_BOTH) return -1;
  return P->ret_typ == MX_TOPK_RET_TYP_BOTH ? 2 : 1;
}

/* k as the kernels use it: k < 1 means the whole axis (MXNet's rule). */
static int64_t topk_k(int64_t k, int64_t n) { return k < 1 ? n : k; }

int mx_infer_topk(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_topk *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  int rc = sort_axis(def->name, x, P->axis, info);
  if (!rc) rc = index_dtype(def->name, P->dtype);
  if (rc) return rc;
  int64_t n = x->shape[info->axis], k = topk_k(P->k, n);
  if (k > n)
    return mx_err(MX_EINVAL, "%s: k=%lld exceeds the size %lld of axis %d of data %s", def->name,
                  (long long)k, (long long)n, info->axis + 1, shp(b, x));
  int64_t shape[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
  shape[info->axis] = k;
  switch (P->ret_typ) {
  case MX_TOPK_RET_TYP_VALUE: mx_out_set(&out[0], x->ndim, shape, x->dtype); break;
  case MX_TOPK_RET_TYP_INDICES: mx_out_set(&out[0], x->ndim, shape, P->dtype); break;
  case MX_TOPK_RET_TYP_MASK: mx_out_set(&out[0], x->ndim, x->shape, x->dtype); break;
  default:
    mx_out_set(&out[0], x->ndim, shape, x->dtype);
    mx_out_set(&out[1], x->ndim, shape, P->dtype);
  }
  return MX_OK;
}

/* sort_backward(data, indices, ograd): indices and ograd have data's shape but (any size
 * on) the axis; the result is zeros of data's shape, ograd's dtype. */
int mx_infer_sort_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_sort_backward *P = p;
  const mx_desc *x = in[0], *idx = in[1], *g = in[2];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int rc = sort_axis(def->name, x, P->axis, info);
  if (rc) return rc;
  bool ok = idx->ndim == x->ndim && g->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++)
    ok = g->shape[d] == idx->shape[d] && (d == info->axis || idx->shape[d] == x->shape[d]);
  if (!ok)
    return mx_err(MX_EINVAL, "%s: indices %s and ograd %s must have data's shape %s but axis %d",
                  def->name, shp(a, idx), shp(b, g), shp(c, x), info->axis + 1);
  if (idx->ndim && idx->shape[info->axis] > x->shape[info->axis])
    return mx_err(MX_EINVAL, "%s: %lld indices along axis %d, data has %lld", def->name,
                  (long long)idx->shape[info->axis], info->axis + 1,
                  (long long)x->shape[info->axis]);
  mx_out_set(&out[0], x->ndim, x->shape, g->dtype);
  return MX_OK;
}
