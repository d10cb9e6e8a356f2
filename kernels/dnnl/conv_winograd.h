/* conv_winograd.h — the Winograd F(2x2, 3x3) forward convolution of inference graphs
 * (conv_winograd.c), called by the oneDNN convolution kernels (conv.c). CPU, f32. */
#ifndef MX_CONV_WINOGRAD_H
#define MX_CONV_WINOGRAD_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether a forward convolution of this geometry (mx_conv_geom's fields; d = dilation,
 * 1 for none) runs on Winograd when its weights are constants: 2-D, 3x3, stride 1, no
 * dilation, one group, f32, C and F multiples of 8; by default with C and F >= 32 (64 on
 * full-width AVX-512); the environment's MX_WINOGRAD=1 takes every such convolution,
 * MX_WINOGRAD=0 none. */
bool mx_wino_wants(int nsp, bool last, int dtype, int64_t C, int64_t F, int64_t G,
                   const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *out);
/* A new tensor (*out, one reference) holding weights w ((F, C, 3, 3) f32 row-major) in
 * the layout MX_LAYOUT_WINOGRAD: the transformed filter, and w's values for every other
 * reader. MX_ENOMEM when there is no memory for it. */
int mx_wino_prepack(const mx_tensor *w, mx_tensor **out);
/* Whether w is in that layout. */
bool mx_wino_is(const mx_tensor *w);
/* o = act(conv(x, w) + bias + res) with w in the Winograd layout; bias (F) and res (o's
 * shape) may be NULL; pad: the top and left padding. MX_DECLINE when a tensor's layout is
 * not one it reads (the caller runs the direct kernel on w's plain values). */
int mx_wino_conv(const mx_tensor *x, const mx_tensor *w, const mx_tensor *bias,
                 const mx_tensor *res, mx_tensor *o, const int64_t *pad, int act);

#endif
