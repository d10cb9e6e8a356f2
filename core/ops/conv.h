/* conv.h — the geometry of a convolution call (core/ops/conv.c), shared by its inference
 * and the kernels (kernels/ref/conv.c, kernels/cpu/conv.c) so they agree on one reading
 * of the params. Not installed. */
#ifndef MX_CONV_H
#define MX_CONV_H
#include "internal.h"
#include "mx_ops_gen.h"

/* Spatial dims past nsp are padded to 3 with size 1 (kernel 1, stride 1, dilate 1, pad 0)
 * so loops can always run over three. */
typedef struct mx_conv_geom {
  int nsp;                      /* spatial dims: 1 to 3 */
  bool last;                    /* channel-last (NWC/NHWC/NDHWC) */
  int64_t N, C, F, G;           /* batch, input channels, filters, groups */
  int64_t in[3], out[3], k[3], s[3], d[3], p[3];
} mx_conv_geom;

/* The geometry of convolution (P: any of the conv ops' params; they share one layout)
 * for data of shape dshape with F filters (F < 0: from num_filter). Errors name op. */
int mx_conv_geom_of(const char *op, const struct mx_params_convolution *P, int ndim,
                    const int64_t *dshape, int64_t F, mx_conv_geom *g);
/* The weight's shape for g: (F, C/G, k...) or, channel-last, (F, k..., C/G). */
int mx_conv_weight_shape(const mx_conv_geom *g, int64_t *shape);
/* The output's shape for g (data's layout). */
int mx_conv_out_shape(const mx_conv_geom *g, int64_t *shape);
/* A deconvolution (params D, data of shape xshape: (N, C, spatial...)) as the convolution
 * whose data gradient it is: *cp gets that convolution's params (pad from target_shape
 * when given, num_filter = C, no bias) and oshape the deconvolution's output shape (F
 * filters; F < 0: from num_filter). Errors name op. */
int mx_deconv_as_conv(const char *op, const struct mx_params_deconvolution *D, int ndim,
                      const int64_t *xshape, int64_t F, struct mx_params_convolution *cp,
                      int64_t *oshape);
#endif
