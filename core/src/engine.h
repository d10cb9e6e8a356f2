/* engine.h — the dependency engine's interface to the rest of the core (not installed).
 *
 * dispatch.c hands every validated, allocated op to mx_engine_push; storage.c frees a
 * storage's variable with it; tensor.c and the savers call the wait functions before
 * touching data outside a kernel; parallel.c asks how many intra-op threads a kernel
 * may use right now. See docs/engine.md for the model. */
#ifndef MX_ENGINE_H
#define MX_ENGINE_H

#include "internal.h"

/* Run `k` on in/out now (inline on the caller's thread) or queue it, with the inputs'
 * storages as reads and the outputs' storages as writes. `def` names the op in errors
 * and in the profiler. params (params_size bytes) and the tensor arrays are copied
 * and every tensor retained when the op is queued, so the caller may release them as
 * soon as this returns.
 * Returns the kernel's status when the op ran inline (the kernel failed: nothing was
 * queued and the caller reports the error at its own line), MX_OK when it was queued
 * or skipped because an input carries an earlier asynchronous error (the outputs
 * then carry it too). */
int mx_engine_push(const mx_kctx *ctx, mx_kernel_fn k, const void *params,
                   size_t params_size, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out);

/* Registers the at-exit drain again, after a library's first use created statics that
 * queued kernels run on (engine.c, engine_shutdown). */
void mx_engine_register_exit(void);

/* Wait until every op queued so far that writes s (read = true) or touches s at all
 * (read = false) has finished. Returns MX_OK, or MX_EASYNC with the message of the
 * asynchronous error s carries (naming the failing op and the Lua line that queued
 * it). No-op on an engine worker (kernels must not wait: use mx_ptr there). */
int mx_engine_wait_storage(mx_storage *s, bool read);

/* Intra-op threads a kernel starting now on this thread may use: the thread budget
 * less what running kernels hold (at least 1): mx_threads_available. */
int mx_engine_intra_threads(void);

/* True on an engine worker thread (or inside a pushed function). */
bool mx_engine_on_worker(void);

#endif /* MX_ENGINE_H */
