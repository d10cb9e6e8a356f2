/* deformable.h — the geometry of a deformable convolution call (core/ops/deformable.c),
 * shared by its inference and the kernels (kernels/ref/deformable.c) so they agree on one
 * reading of the params of the four ops (deformable_convolution, its modulated form and
 * their backward ops). Not installed. */
#ifndef MX_DEFORMABLE_H
#define MX_DEFORMABLE_H
#include "internal.h"

typedef struct mx_dcn_geom {
  bool modulated;          /* modulated_deformable_convolution(_backward): a mask input */
  bool no_bias;
  int64_t N, C, H, W;      /* data */
  int64_t F, G, DG;        /* filters, groups, offset (deformable) groups */
  int64_t kh, kw, sh, sw, dh, dw, ph, pw;
  int64_t Ho, Wo;          /* output positions */
} mx_dcn_geom;

/* Whether op (a deformable family op) is one of the modulated ones. */
bool mx_dcn_modulated(const mx_op_def *def);
/* The geometry of op's params for data of shape dshape (ndim dims). Errors name op. */
int mx_dcn_geom_of(const mx_op_def *def, const void *params, int ndim, const int64_t *dshape,
                   mx_dcn_geom *g);
#endif
