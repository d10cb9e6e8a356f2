/* dnnl.h — what the oneDNN backend's files share (dnnl.c): the one owner of oneDNN's
 * engine, streams and primitive cache, the oneDNN blocked tensor layout
 * (MX_LAYOUT_ONEDNN), and oneDNN's GEMMs for the CPU kernels (gemm.c). Everything here
 * exists only when built with oneDNN (MX_HAVE_ONEDNN). Not installed. */
#ifndef MX_DNNL_H
#define MX_DNNL_H
#ifdef MX_HAVE_ONEDNN

#include "internal.h"
#include <oneapi/dnnl/dnnl.h>

/* The process's CPU engine, created on first use; NULL when oneDNN cannot create one, or
 * cannot start yet for want of address space (callers then take their non-oneDNN path). */
dnnl_engine_t mx_dnnl_engine(void);
/* The calling thread's stream on that engine (one per thread, freed at thread exit). */
dnnl_stream_t mx_dnnl_stream(void);
/* Call before a oneDNN call that does not go through the engine (dnnl_sgemm): false when
 * oneDNN cannot start (no address space for its first use: take the other path). The
 * first time, it runs a warm-up sgemm so oneDNN creates its JIT statics, then registers
 * the engine's exit drain again (mx_engine_register_exit) so it runs before their
 * destructors. Cheap afterwards; mx_dnnl_engine() does the same. */
bool mx_dnnl_note_use(void);
/* The ISA oneDNN's kernels run with here (dnnl_get_effective_cpu_isa), read once: oneDNN
 * fixes it at its first use. Thread-safe. */
dnnl_cpu_isa_t mx_dnnl_isa(void);

/* The primitive cache: entries keyed by (kind, key bytes), at most MX_DNNL_CACHE of
 * them (every primitive of the zoo's largest graphs, a few hundred each, several models
 * at once), least recently used evicted. get returns the entry's object with the entry
 * locked (concurrent same-key callers take turns: one gets NULL rather than wait, and
 * runs its fallback), building it with build(key, arg) when absent; NULL when busy or
 * when build returned NULL. put unlocks. destroy frees an object (eviction, unload). */
#define MX_DNNL_CACHE 2048
/* Cache kinds: each oneDNN-backed family owns a range of 16 (its kernels number their
 * primitives within it: forward, backward data, backward weights...). */
enum { MX_DNNL_FC = 1, MX_DNNL_ELTWISE, MX_DNNL_REORDER,
       MX_DNNL_CONV = 16, MX_DNNL_POOL = 32, MX_DNNL_NORM = 48, MX_DNNL_ACT = 64,
       MX_DNNL_QUANT = 80, MX_DNNL_SHAPE = 96 };
typedef struct mx_dnnl_entry mx_dnnl_entry;
void *mx_dnnl_cache_get(int kind, const void *key, size_t keylen,
                        void *(*build)(const void *key, void *arg), void (*destroy)(void *),
                        void *arg, mx_dnnl_entry **entry);
void mx_dnnl_cache_put(mx_dnnl_entry *entry);

/* The intra-op team of a oneDNN (or oneDNN-sgemm) call: oneDNN sizes its team from the
 * calling thread's OpenMP setting, so set it for `flops` of work (one thread per
 * MX_DNNL_FLOPS_PER_THREAD, taken from the process's thread budget, mx_threads_acquire),
 * grow this thread's team with signals blocked, and return the size; *prev keeps the
 * setting that mx_dnnl_team_end restores (it also gives the budget back). */
#define MX_DNNL_FLOPS_PER_THREAD 4e6
int mx_dnnl_team_begin(double flops, int *prev);
void mx_dnnl_team_end(int nt, int prev);

/* Pooling forward through oneDNN (kernels/dnnl/pool.c), shared by the pool family and
 * quantized_pooling (whose params are pooling's, field for field): `params` is a struct
 * mx_params_pooling. geometry_ok: whether oneDNN computes MXNet's windows for data xs ->
 * ys (max/avg, channel-first, valid/full). forward: y = pooling(x) in x's dtype (f32,
 * u8, s8), x row-major or blocked, y row-major or in forward_layout's layout.
 * forward_layout: for a blocked x, a new tensor of desc od in the primitive's dst layout
 * (*out NULL for row-major x). Errors: MX_EINVAL (no primitive), MX_ENOMEM. */
bool mx_dnnl_pool_geometry_ok(const void *params, int nd, const int64_t *xs, const int64_t *ys);
int mx_dnnl_pool_forward(const mx_kctx *ctx, const void *params, const mx_tensor *x,
                         mx_tensor *y);
int mx_dnnl_pool_forward_layout(const void *params, const mx_tensor *x, const mx_desc *od,
                                mx_tensor **out);

/* Reorders between two memory descriptors of the same dims (src/dst data pointers),
 * synchronously on the calling thread; counts one reorder (mx_layout_reorders). */
int mx_dnnl_reorder(const dnnl_memory_desc_t *src_md, const void *src,
                    const dnnl_memory_desc_t *dst_md, void *dst);
/* Writes zeros over the padded area of a blocked buffer (padded_dims beyond dims: 4
 * channels in an 8- or 16-channel block). oneDNN's primitives assume their inputs' padding
 * is zero and read it (a convolution's backward data sums over the padded output
 * channels, times zero weights: garbage or inf there becomes NaN), so every kernel of this
 * backend that writes a blocked tensor with a primitive that does not keep the padding
 * zero calls this after it (batch_norm and its backward). No-op without padding. */
int mx_dnnl_zero_pad(const dnnl_memory_desc_t *md, void *data);
/* A new tensor of that logical shape and dtype in oneDNN's layout described by md
 * (copied): what a DNNL kernel's out-layout function returns. */
int mx_dnnl_new_blocked(int ndim, const int64_t *shape, int dtype, const dnnl_memory_desc_t *md,
                        mx_tensor **out);
/* A row-major f32 (or other dtype) descriptor for t's shape. */
int mx_dnnl_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *shape, int dtype);
/* Whether t is in oneDNN's blocked layout, and a new tensor of t's shape and dtype laid
 * out by md (copied). */
bool mx_dnnl_is_blocked(const mx_tensor *t);
int mx_dnnl_new_like(const mx_tensor *t, const dnnl_memory_desc_t *md, mx_tensor **out);

/* A cached primitive, or (busy entry) a fresh one the caller destroys: kernels that have
 * no other path than oneDNN's must not fail because another thread holds the entry.
 * *tmp says which; put gives it back either way. */
dnnl_primitive_t mx_dnnl_prim_get(int kind, const void *key, size_t keylen,
                                  void *(*build)(const void *, void *), mx_dnnl_entry **e,
                                  bool *tmp);
void mx_dnnl_prim_put(dnnl_primitive_t p, mx_dnnl_entry *e, bool tmp);
/* Runs a one-source primitive src -> dst on the calling thread's stream, synchronously. */
int mx_dnnl_exec2(dnnl_primitive_t p, int arg_src, const dnnl_memory_desc_t *smd,
                  const void *src, const dnnl_memory_desc_t *dmd, void *dst);

/* oneDNN's GEMMs for the CPU kernels' GEMM layer (kernels/cpu/gemm.c), row-major, ta/tb
 * "stored transposed": sgemm with leading dims (threaded by the flop count), and bf16
 * products of packed operands summed in f32 and rounded once (beta: oneDNN's sum
 * post-op). op names the caller in errors. MX_DECLINE: oneDNN cannot do it on this CPU
 * (bf16 below avx512_core) or cannot start yet (address space): the caller's own path. */
int mx_dnnl_sgemm(const char *op, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const void *A, int64_t lda, const void *B, int64_t ldb, float beta, void *C,
                  int64_t ldc);
int mx_dnnl_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                      const void *B, float beta, void *C);

#endif
#endif
