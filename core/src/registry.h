/* registry.h — the op registry's internal side (registry.c): what dispatch, the graph
 * layer and the string-attribute parser ask of the op table beyond mx.h. Not installed.
 * The table itself (mx_ops[], struct mx_op_def) and kernel registration are in
 * internal.h, which kernels share. */
#ifndef MX_REGISTRY_H
#define MX_REGISTRY_H

#include "internal.h"

/* At most this many inputs or outputs per op call. */
#define MX_MAX_IO 64

/* The generic checks of a filled params struct (dtype codes, tuple lengths, enum
 * ranges), naming the op and the param. */
int mx_op_check_params(const mx_op_def *def, const void *params);

/* Whether some backend's kernel of op may choose its outputs' layout (its entry has an
 * out-layout function): the graph executor leaves such outputs to the op instead of
 * planning row-major buffers for them. */
bool mx_kernel_picks_layout(int op);

/* The backend that runs a call on dev_type, after `after` (-1: from the start) in the
 * device's order (CPU: DNNL, CPU, REF; GPU: CUDA), that is registered and supports it;
 * ref forces REF. Sets *ke; on none, an error naming the op and the refusal. */
int mx_kernel_choose(const mx_op_def *def, int dev_type, bool ref, int after, const void *params,
                     const mx_op_info *info, int nin, const mx_desc *in, int nout,
                     const mx_desc *out, const mx_kernel_entry **ke);

#endif
