/* kernels/ref/autograd.c — reference kernels of the autograd family.
 * stop_gradient: the identity (a copy); autograd records nothing for it, so no
 * gradient flows back through it (op table: nondiff). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <string.h>

int mx_ref_stop_gradient(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                         mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  if (out[0]->size > 0) memcpy(mx_ptr(out[0]), mx_ptr(in[0]), mx_nbytes(out[0]));
  return MX_OK;
}
