/* mx.h — the public C API of libmx (luamx's core).
 *
 * This header is the manual. It is also the only declaration LuaJIT's FFI sees:
 * lua/mx/core/lib.lua feeds the region between the MX_FFI_BEGIN / MX_FFI_END markers
 * to ffi.cdef, so that region holds no preprocessor lines and no macros.
 *
 * Conventions (every function):
 *  - Fallible calls return an int status: MX_OK (0) or a negative MX_E* code. The
 *    message (naming the op, the argument and the shapes) is kept in a thread-local
 *    buffer read with mx_last_error(); it stays valid until the next failing call on
 *    the same thread.
 *  - A handle returned through an out-pointer is a NEW reference: the caller owns it
 *    and gives it back with mx_tensor_release(). Handles passed as arguments are
 *    borrowed: the callee takes its own reference if it keeps one.
 *  - Shapes are int64, axes and indices are 0-based (the Lua layer converts from its
 *    1-based convention), dtypes use MXNet's type_flag codes.
 *  - Thread-safety: calls on distinct tensors may run concurrently on any threads;
 *    mutating one tensor (writing its data) from two threads at
 *    once needs the caller's own synchronisation. Nothing in libmx calls into Lua.
 *  - The core never aborts on bad input: it returns MX_EINVAL and says why.
 */
#ifndef MX_H
#define MX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MX_VERSION_MAJOR 0
#define MX_VERSION_MINOR 1
#define MX_VERSION_PATCH 0
/* Bumped whenever a declaration between the FFI markers changes incompatibly.
 * lua/mx/core/lib.lua carries the value it was written against and refuses to load a
 * library with another one. */
#define MX_ABI_VERSION 2
#define MX_MAX_DIM 8

/* MX_FFI_BEGIN */
typedef struct mx_tensor mx_tensor;

enum {
  MX_OK = 0,
  MX_EINVAL = -1,   /* bad argument: shape, dtype, axis, option */
  MX_ENOMEM = -2,   /* allocation failed */
  MX_EIO = -3,      /* file could not be read or written */
  MX_EFORMAT = -4,  /* file content malformed */
  MX_EDEVICE = -5,  /* device missing or device runtime failure */
  MX_EASYNC = -6    /* an earlier asynchronous op failed (see message) */
};

/* dtype codes: MXNet's type_flag. */
enum {
  MX_F32 = 0, MX_F64 = 1, MX_F16 = 2, MX_U8 = 3, MX_I32 = 4,
  MX_I8 = 5, MX_I64 = 6, MX_BOOL = 7, MX_I16 = 8, MX_BF16 = 12
};

/* device types: MXNet's codes. */
enum { MX_CPU = 1, MX_GPU = 2 };

/* A fixed-capacity list of int64 (shapes, axes, begin/end lists, pad widths) used in op
 * params: at most 16 entries (two per dim of an 8-d tensor: pad_width). n == -1 means
 * "not given" for optional params. */
typedef struct mx_tuple { int32_t n; int64_t v[16]; } mx_tuple;
/* The same for lists of doubles (anchor sizes, ratios, variances: MXNet's Tuple<float>). */
typedef struct mx_ftuple { int32_t n; double v[16]; } mx_ftuple;

/* A tensor descriptor: what inference works on (no data). ndim -1: unknown rank; a
 * dim of -1 (MX_DIM_UNKNOWN): unknown; dtype -1: unknown. layout: MX_LAYOUT_ROW_MAJOR
 * or a backend layout code. */
enum { MX_DIM_UNKNOWN = -1 };
enum { MX_LAYOUT_ROW_MAJOR = 0, MX_LAYOUT_ONEDNN = 1, MX_LAYOUT_WINOGRAD = 2 };
typedef struct mx_desc {
  int ndim;
  int64_t shape[8];
  int dtype;
  int layout;
  int dev_type, dev_id;
} mx_desc;

/* ---- library ---------------------------------------------------------------- */
int mx_abi_version(void);
const char *mx_version_string(void);
/* Message of the last failing call on this thread ("" if none). Borrowed. */
const char *mx_last_error(void);
/* Set the thread's error message (used by bindings to report their own errors
 * through the same channel). */
void mx_set_last_error(const char *msg);

/* ---- dtypes ------------------------------------------------------------------- */
/* Element size in bytes, 0 for an unknown code. */
size_t mx_dtype_size(int dtype);
/* "float32", ...; NULL for an unknown code. Static storage. */
const char *mx_dtype_name(int dtype);
/* Code for a name ("float32", "f32", "int64", ...), -1 if unknown. */
int mx_dtype_from_name(const char *name);
/* Scalar conversions with round-to-nearest-even; NaN and Inf are kept. */
uint16_t mx_f32_to_f16(float x);
float mx_f16_to_f32(uint16_t h);
uint16_t mx_f32_to_bf16(float x);
float mx_bf16_to_f32(uint16_t h);

/* ---- devices ------------------------------------------------------------------ */
/* Number of GPUs usable (0 when libmx_cuda is absent or no driver/device). */
int mx_gpu_count(void);
/* Why GPUs are unavailable ("" when they are). Borrowed, static. */
const char *mx_gpu_status(void);

/* ---- tensors ------------------------------------------------------------------ */
/* New uninitialised contiguous tensor. ndim in 0..8, dims >= 0. */
int mx_tensor_empty(int ndim, const int64_t *shape, int dtype, int dev_type,
                    int dev_id, mx_tensor **out);
/* Wrap external memory without copying. `data` must hold prod(shape) elements of
 * dtype, stay valid, and be 64-byte aligned or not (either works). `deleter(data,
 * ctx)` is called once when the last reference goes (may be NULL: caller keeps
 * ownership and must outlive every tensor and view made from it). CPU only. */
int mx_tensor_from_data(void *data, int ndim, const int64_t *shape, int dtype,
                        void (*deleter)(void *data, void *ctx), void *ctx,
                        mx_tensor **out);
/* Reference counting. retain/release on NULL are no-ops. release may free the
 * storage (through the pool) when the last tensor or view using it goes. */
void mx_tensor_retain(mx_tensor *t);
void mx_tensor_release(mx_tensor *t);

int mx_tensor_ndim(const mx_tensor *t);
/* Dimension i (0-based), -1 if out of range. */
int64_t mx_tensor_dim(const mx_tensor *t, int i);
/* Copies ndim dims into shape (caller provides 8). Returns ndim. */
int mx_tensor_shape(const mx_tensor *t, int64_t *shape);
int64_t mx_tensor_size(const mx_tensor *t);
int mx_tensor_dtype(const mx_tensor *t);
int mx_tensor_dev_type(const mx_tensor *t);
int mx_tensor_dev_id(const mx_tensor *t);
/* Pointer to element 0 (storage base + offset). Host-readable only for CPU tensors.
 * Waits for pending writes first (a sync point). A tensor in a backend layout is first
 * converted to row-major in place (both functions; NULL if that fails). */
void *mx_tensor_data(mx_tensor *t);
/* The state of t's storage (shared by its views) as a number of one process-wide
 * sequence: it changes with each op pushed with the storage as an output and each mutable
 * mx_tensor_data pointer, so an unchanged number means unchanged values (mx.amp's cast
 * cache; it wraps after 2^32 writes in the whole process). Any thread. */
uint32_t mx_tensor_version(const mx_tensor *t);
/* Same pointer without waiting: for callers that synchronise themselves. */
void *mx_tensor_data_nowait(const mx_tensor *t);
/* True when a and b share storage. */
bool mx_tensor_shares_storage(const mx_tensor *a, const mx_tensor *b);

/* Views (share storage, new handle). reshape: shape may use MXNet's codes 0 (copy
 * this dim) and -1 (infer one dim). */
int mx_tensor_reshape(mx_tensor *t, int ndim, const int64_t *shape, mx_tensor **out);
/* Rows [begin, end) of the leading axis, 0 <= begin <= end <= dim0. */
int mx_tensor_slice0(mx_tensor *t, int64_t begin, int64_t end, mx_tensor **out);
/* Row i of the leading axis, dropping that axis. */
int mx_tensor_index0(mx_tensor *t, int64_t i, mx_tensor **out);

/* Copy src into dst (same shape; dtypes may differ: converts; devices may differ). */
int mx_tensor_copy_into(mx_tensor *dst, mx_tensor *src);
/* New tensor with src's data on the given device/dtype (dtype -1: keep). */
int mx_tensor_to(mx_tensor *src, int dev_type, int dev_id, int dtype, mx_tensor **out);
/* Element i (flat, row-major) as double / int64. Sync point. */
int mx_tensor_get_f64(mx_tensor *t, int64_t i, double *out);
int mx_tensor_get_i64(mx_tensor *t, int64_t i, int64_t *out);
/* Fill all elements from a double array of length mx_tensor_size(t), converting. */
int mx_tensor_set_from_f64(mx_tensor *t, const double *src, int64_t n);
/* Copy all elements into a double array (length >= size), converting. Sync point. */
int mx_tensor_get_all_f64(mx_tensor *t, double *dst, int64_t n);
/* Layouts (docs/design/architecture.md, "Layouts"): a tensor's MX_LAYOUT_* code, and a
 * new tensor holding t's values in `layout`; for MX_LAYOUT_ONEDNN, format is a oneDNN
 * format tag name ("nChw16c", "nChw8c", "abcd"; float32 cpu tensors). MX_EINVAL for an
 * unknown layout or format, or MX_LAYOUT_ONEDNN in a build without oneDNN. Every reader
 * but a kernel accepting the layout sees row-major values: data/data_nowait, item,
 * totable, copies, views and save convert the tensor in place first (waiting for its
 * pending ops). mx_layout_reorders: conversions between layouts so far (a debug counter). */
int mx_tensor_layout(const mx_tensor *t);
int mx_tensor_to_layout(mx_tensor *t, int layout, const char *format, mx_tensor **out);
int64_t mx_layout_reorders(void);
/* Forward convolutions run by Winograd's F(2x2, 3x3) so far (a debug counter; 0 in a build
 * without oneDNN). Inference graphs with constant weights take it for 3x3, stride-1,
 * undilated, ungrouped float32 convolutions whose channel counts divide by 8, by default
 * on CPUs without AVX-512 and with 32 or more channels in and out; the environment
 * variable MX_WINOGRAD (read when a graph is built) forces it on (1) or off (0).
 * docs/design/architecture.md, "Winograd". */
int64_t mx_conv_winograd_runs(void);

/* ---- sparse storage (stype.c, sparse.c; docs/sparse.md) ------------------------
 * Storage types are MXNet's: dense (default), row_sparse (some rows of a tensor of any
 * rank, the others zero) and csr (a 2-d matrix in compressed sparse rows). A sparse
 * tensor has a shape, a dtype and a device like any other; its values are its parts:
 * part 0 the data (row_sparse: (nnr, shape[1], ...) stored rows; csr: (nnz) values),
 * part 1 the first index array (row_sparse: the (nnr) row ids, ascending; csr: the
 * (rows + 1) indptr), part 2 (csr) the (nnz) column ids, ascending within each row.
 * Index parts are int64. Ops take sparse inputs where the op table declares their
 * storage types (docs/ops.md); any other call converts them to dense first, warning
 * once per op and storage-type combination on stderr unless the environment variable
 * MXNET_STORAGE_FALLBACK_LOG_VERBOSE is 0. Element readers (data, item, totable,
 * views) refuse sparse tensors: read their parts or convert them (cast_storage).
 * CPU only. */
enum { MX_STYPE_DEFAULT = 0, MX_STYPE_ROW_SPARSE = 1, MX_STYPE_CSR = 2 };
int mx_tensor_stype(const mx_tensor *t);
/* A new sparse tensor of stype and shape whose parts are copies of data, aux0 and (csr)
 * aux1 (any integer dtype for the indices; data's dtype is the tensor's), checked
 * (sizes, index ranges, indptr from 0 to nnz, non-decreasing) and put in canonical
 * order: row_sparse rows and csr columns within a row sorted, duplicates summed. On
 * data's device (the CPU). MX_EINVAL naming the part and the index that is wrong. */
int mx_sparse_from_parts(int stype, int ndim, const int64_t *shape, mx_tensor *data,
                         mx_tensor *aux0, mx_tensor *aux1, mx_tensor **out);
/* Zeros: a sparse tensor with no stored entries. */
int mx_sparse_zeros(int stype, int ndim, const int64_t *shape, int dtype, int dev_type,
                    int dev_id, mx_tensor **out);
/* A new tensor holding a copy of part k (0 data, 1 and 2 the index arrays) of sparse t,
 * after t's pending writes (a sync point: MX_EASYNC as mx_tensor_wait_to_read).
 * MX_EINVAL for a dense t or a k it does not have. */
int mx_sparse_part(mx_tensor *t, int k, mx_tensor **out);
/* Stored entries: row_sparse its rows (nnr), csr its values (nnz). A sync point. */
int mx_sparse_nnz(mx_tensor *t, int64_t *out);
/* Calls that converted sparse inputs to dense (the storage fallback) so far. */
int64_t mx_storage_fallbacks(void);
/* The op's storage-type kernels (the op table's `stypes`, in order): how many, and for
 * entry i the backends registered (bits as mx_op_backends), its kernels' base name and
 * the storage types of its inputs and outputs (MX_STYPE_* into ins/outs, at least 8 and
 * 4 entries; returns the input count, -1 for a bad op or entry). */
int mx_op_stype_count(int op);
uint32_t mx_op_stype_backends(int op, int i);
const char *mx_op_stype_name(int op, int i);
int mx_op_stype_sig(int op, int i, int *ins, int *outs);

/* ---- ops ---------------------------------------------------------------------- */
/* The op table (generated from the core/ops/ tables). Ops are numbered 0..count-1 in table
 * order, and the numbers change when ops are added: C callers find ops by name. */
int mx_op_count(void);
const char *mx_op_name(int op);
/* The op called `name`: a luamx name ("fully_connected") or one of the MXNet operator
 * names it implements ("FullyConnected", "broadcast_add", "_plus_scalar"); -1 if none. */
int mx_op_find(const char *name);
/* Hash of the generated op table (op names, order, param struct layouts): the Lua
 * binding compares it with the table it was written against. */
uint64_t mx_op_table_hash(void);
/* Size of the op's params struct (struct mx_params_<name>), 0 if it has none. */
size_t mx_op_params_size(int op);
int mx_op_num_inputs(int op);   /* -1: variadic */
int mx_op_num_outputs(int op);
/* The backends whose kernels op has in this process: bit b for backend b, named by
 * mx_backend_name(b) ("ref", "cpu", "dnnl", "cuda"; NULL past the last). The op table
 * declares them; a backend's kernels are there when its library is built and loaded
 * (dnnl: built with oneDNN; cuda: libmx_cuda loaded, after the first GPU use). */
uint32_t mx_op_backends(int op);
const char *mx_backend_name(int backend);

/* The one dispatch function. in: nin borrowed tensors. params: a filled
 * struct mx_params_<name> (NULL when the op has none). out: nout slots; a NULL slot
 * gets a new tensor (new reference, owned by the caller), a non-NULL slot is
 * written into (`out=`: its shape and dtype must match the inferred ones).
 * Validates everything, infers shapes/dtypes, allocates, then runs the kernel for
 * the inputs' device. On error nothing is allocated into the out slots. */
int mx_op_invoke(int op, int nin, mx_tensor *const *in, const void *params,
                 int nout, mx_tensor **out);
/* Same, forcing the plain reference kernel (the test oracle). */
int mx_op_invoke_ref(int op, int nin, mx_tensor *const *in, const void *params,
                     int nout, mx_tensor **out);

/* Fills a zeroed params struct with the op's defaults. MX_EINVAL for a bad op. */
int mx_op_params_init(int op, void *params);
/* Parses MXNet string attributes (as in symbol JSON: "(3, 3)", "True", "relu", "None",
 * "0.5") into params (initialised with the defaults first). Keys are MXNet attribute
 * names or luamx param names; unknown keys, malformed values and missing required
 * params are MX_EINVAL naming the op, the key and the value. Axis-valued attributes are
 * 0-based, as in MXNet. */
int mx_op_params_parse(int op, int nattr, const char *const *keys, const char *const *vals,
                       void *params);
/* Param k (0..mx_op_num_params-1, table order) of a filled params struct in MXNet's
 * string form ("(3, 3)", "True", "relu", "None", "0.5", "float32"; 0-based axes), what
 * mx_op_params_parse reads back to the same value. *key (may be NULL): its MXNet attribute
 * name. buf: at least 64 bytes (512 hold any tuple). Returns 1 when the value differs
 * from the default or the param is required (symbol JSON writes those), 0 when it is the
 * default, MX_EINVAL for a bad op/k/buffer or a value out of the param's range. */
int mx_op_num_params(int op);
int mx_op_params_format(int op, const void *params, int k, const char **key, char *buf,
                        size_t cap);
/* Runs op with MXNet string attributes: mx_op_params_parse into a private struct, then
 * mx_op_invoke. The C caller with no Lua uses this. */
int mx_op_invoke_attrs(int op, int nin, mx_tensor *const *in, int nattr,
                       const char *const *keys, const char *const *vals, int nout,
                       mx_tensor **out);
/* Output count of op for these params (split's num_outputs); -1 for a bad op. */
int mx_op_num_outputs_for(int op, const void *params);
/* Pure shape/dtype inference on descriptors: no tensor, no side effect. in[i] may have
 * unknown dims (MX_DIM_UNKNOWN): parameter inputs whose dims the data determines are
 * filled in (fully_connected's weight and bias); outputs whose shape cannot be known
 * yet come back with ndim -1. MX_EINVAL when the known parts conflict. */
int mx_op_infer(int op, const void *params, int nin, mx_desc *in, int nout, mx_desc *out);

/* ---- sessions (session.c) -------------------------------------------------------
 * A session is what one Lua state (or one C host thread) owns in the process: the byte
 * counter that steps its GC, its random stream and the scope of mx_engine_wait_all.
 * Every thread has a current session, the process's default one until
 * mx_session_bind. The Lua binding makes one per Lua state and binds it to the thread
 * that loads mx: a state must then run on that thread (or bind again after moving).
 * Tensors are charged to the session current when their storage was made.
 * Thread-safe. */
typedef struct mx_session mx_session;
/* A new session (seeded like a fresh process: seed 0). NULL when out of memory. */
mx_session *mx_session_new(void);
/* Makes s the calling thread's current session (NULL: the default session). */
void mx_session_bind(mx_session *s);
mx_session *mx_session_current(void);
mx_session *mx_session_default(void);
/* Waits for s's ops, then frees it when nothing of it is alive any more (its tensors
 * keep it until they go). The default session is never freed. */
void mx_session_free(mx_session *s);
/* Bytes held by live storages charged to s (a relaxed read, cheap to poll). */
int64_t mx_session_bytes(const mx_session *s);
/* Moves the charge of t's storage to session s (a tensor handed to another state:
 * that state's GC accounts for it from now on). */
void mx_tensor_adopt(mx_tensor *t, mx_session *s);
/* Marks t's storage as used from several threads (Lua states) at once: from now on
 * every op on it (and on its views) is ordered by the engine like a queued op, so two
 * states writing it in place never lose an update; none runs inline unlocked. The
 * hand-over functions below do it; call it for memory shared by other means. */
void mx_tensor_share(mx_tensor *t);
/* Hand-over between states through a registry of live exports. export retains t (the
 * registry's reference), marks it shared and gives a token (a number below 2^53, never
 * 0, not an address) that `imports` (>= 1) imports may redeem; import gives a new
 * reference in *out, the first one also moving t's charge to the calling thread's
 * session (mx_tensor_adopt); revoke drops an export's remaining imports. A token that
 * is not live (never exported, used up, revoked) is an MX_EINVAL error, never a crash.
 * Thread-safe. */
int mx_tensor_export(mx_tensor *t, int64_t imports, uint64_t *token);
int mx_tensor_import(uint64_t token, mx_tensor **out);
int mx_tensor_export_revoke(uint64_t token);
/* Imports left for a token (0: not live). */
int64_t mx_tensor_export_left(uint64_t token);

/* ---- random ------------------------------------------------------------------- */
/* Seeds the current session's generator. Same seed, same stream. */
void mx_random_seed(uint64_t seed);
/* Reserves n consecutive counters of the current session's stream and returns the
 * first (the seed goes to *seed). Random ops do this inside mx_op_invoke, in program
 * order, whatever the engine's schedule; custom C code drawing numbers may use it. */
uint64_t mx_random_reserve_counters(uint64_t n, uint64_t *seed);

/* ---- memory ------------------------------------------------------------------- */
typedef struct mx_memory_stats {
  int64_t bytes_in_use;    /* bytes held by live storages (all CPU tensors) */
  int64_t bytes_pooled;    /* bytes kept in the free pool for reuse */
  int64_t peak_bytes;      /* max of bytes_in_use since start / reset */
  int64_t num_allocs;      /* storages allocated (pool hits included) */
  int64_t pool_hits;       /* of which served from the pool */
} mx_memory_stats;
void mx_memory_get_stats(int dev_type, mx_memory_stats *out);
/* Bytes held by live storages charged to the calling thread's current session (what
 * that Lua state's tensors hold): a lock-free approximate read, cheap enough for the
 * binding to poll when deciding to step Lua's GC. Other sessions' memory does not
 * count, so one state's tensors never force another state's collections. */
int64_t mx_memory_bytes_in_use(void);
/* Gives pooled blocks back to the system. */
void mx_memory_empty_cache(int dev_type);
/* Gives back the pooled blocks of every size that no allocation asked for since the
 * previous trim (sizes a phase of the program stopped using: an evaluation's batches
 * during training). Thread-safe. On the CPU the blocks go to malloc, which may keep
 * them (the example's peak RSS rose 4 MB when mx.nd trimmed after every collection:
 * it does not); on a GPU they go back to the device. */
void mx_memory_trim(int dev_type);
void mx_memory_reset_peak(int dev_type);

/* ---- threads ------------------------------------------------------------------ */
/* The thread budget: intra-op threads for kernels, BLAS and oneDNN, shared by every
 * session, engine worker and inline caller in the process, so N Lua states never run
 * more kernel threads than this at once. <=0: the number of cores. */
void mx_set_num_threads(int n);
int mx_get_num_threads(void);
/* Threads of the budget in use right now (diagnostics, specs). */
int mx_threads_in_use(void);
/* The most threads of the budget held at once since start or the last reset (a team's
 * threads count from acquire to release; a kernel that found fewer than 2 free runs
 * alone on its caller's thread and holds none). Diagnostics, specs. */
int mx_threads_peak(void);
void mx_threads_reset_peak(void);

/* ---- engine (engine.c; docs/engine.md) ------------------------------------------
 * Every op goes through the dependency engine: inputs are reads and outputs writes
 * of their storages' variables; ops on unrelated storages run in parallel on worker
 * threads, and an op whose dependencies are done and that is small runs inline on
 * the calling thread. All functions are thread-safe. */
enum { MX_ENGINE_NAIVE = 0, MX_ENGINE_THREADED = 1 };
/* Switch mode (MX_ENGINE=naive at start-up sets naive). Waits for every queued op
 * first; returns that wait's status (MX_EASYNC: an earlier op failed) but switches
 * either way. MX_EINVAL for an unknown mode. */
int mx_engine_set_mode(int mode);
int mx_engine_get_mode(void);
/* Sync point for one tensor: returns when every op queued so far that writes its
 * storage (wait_to_read) or uses it at all (wait_to_write) has finished. MX_EASYNC
 * when the storage carries an asynchronous error: the message names the failing op,
 * its input shapes and the Lua line that queued it. The error stays on the tensor. */
int mx_tensor_wait_to_read(mx_tensor *t);
int mx_tensor_wait_to_write(mx_tensor *t);
/* Waits for every op the current session queued. MX_EASYNC with the earliest-queued
 * failure of the session since its last wait_all that no other sync point has reported
 * yet; the list is cleared either way and the engine stays usable. Other sessions'
 * ops are not waited for. */
int mx_engine_wait_all(void);
/* Waits until no op of any session is queued or running; leaves the recorded errors to
 * each session's wait_all (the profiler's readers call it first). */
void mx_engine_wait_idle(void);
/* Pushes any function through the engine, ordered like an op: reads[] are waited for
 * as reads and writes[] as writes of their storages; fn(arg) runs once they are done,
 * on a worker or inline (naive mode, or nothing pending), on device (dev_type, dev_id)
 * with stream (NULL: the default; GPU work names its stream so its completion can be
 * tracked). A non-zero return from fn is an asynchronous error carried by the writes
 * (and raised at the next sync point, naming `name`), exactly as for an op; fn sets its
 * message with mx_set_last_error. At most 4096 reads and writes in all. While fn runs, the ops it
 * issues through mx_op_invoke run inline on its thread before it returns (a graph
 * executor runs its nodes so), and waits inside it return at once. free_arg(arg) (may be NULL) runs after fn, or at once
 * when fn is not run (an input carries an earlier error). Returns MX_OK when queued or
 * run, else the error (fn not run, free_arg called). When fn runs inline (naive mode, or
 * its dependencies are done and it is small), push_fn returns fn's error itself, its
 * message naming `name`. */
int mx_engine_push_fn(const char *name, int (*fn)(void *arg), void *arg,
                      void (*free_arg)(void *arg), int nread, mx_tensor *const *reads,
                      int nwrite, mx_tensor *const *writes, int dev_type, int dev_id,
                      void *stream);
/* Waits for every queued op without raising or clearing errors (diagnostics). */
void mx_engine_wait_idle(void);
/* Binding support for error messages: true when the calling thread's last op was
 * queued (not run inline) and mx_engine_set_site has not named it yet; set_site
 * gives that op the caller's source position ("file.lua:12"; copied). */
bool mx_engine_queued(void);
void mx_engine_set_site(const char *where);
/* Ops touching at most this many elements (inputs + outputs) whose dependencies are
 * done run inline; larger ones go to a worker. 0: queue everything (tests). Default
 * 12288 or MX_ENGINE_INLINE_MAX. */
void mx_engine_set_inline_max(int64_t n);
int64_t mx_engine_get_inline_max(void);
/* Debug: after each kernel, fail the op if a floating output holds a NaN
 * (MX_ENGINE_DEBUG_NAN=1 at start-up). */
void mx_engine_set_nan_check(bool on);
bool mx_engine_get_nan_check(void);
/* CPU worker threads running queued ops (default 1 as in MXNet, or
 * MX_CPU_WORKER_NTHREADS). More workers overlap independent ops; see docs/engine.md
 * for the cost (OpenMP teams per worker). MX_EINVAL outside 1..64. */
int mx_engine_set_num_workers(int n);
int mx_engine_get_num_workers(void);
typedef struct mx_engine_stats {
  int64_t ops_inline;   /* ran inline on the calling thread (this thread's count) */
  int64_t ops_queued;   /* went through the worker pool */
  int64_t ops_skipped;  /* not run: an input carried an asynchronous error */
  int64_t ops_failed;   /* kernels that failed on a worker */
  int64_t pending;      /* queued and not finished now */
  int64_t workers;      /* worker threads started */
} mx_engine_stats;
void mx_engine_get_stats(mx_engine_stats *out);

/* ---- profiler (profiler.c) -------------------------------------------------------
 * While running, every kernel run is recorded (op name, thread, start, duration).
 * The readers below report the runs that have finished: call mx_engine_wait_idle
 * first for the ops still queued. Thread-safe. */
void mx_profiler_set_state(int running);  /* 1 run, 0 stop */
int mx_profiler_get_state(void);
void mx_profiler_reset(void);             /* drop recorded events */
int64_t mx_profiler_num_events(void);
/* Write a Chrome trace (chrome://tracing, Perfetto) of the recorded events. MX_EIO when
 * the file cannot be written. */
int mx_profiler_dump(const char *path);
/* An aggregate table per op (count, total, min, max, avg in microseconds), sorted by
 * total time; reset != 0 drops the events afterwards. New string: free with
 * mx_free. NULL when out of memory. */
char *mx_profiler_dumps(int reset);

/* ---- files -------------------------------------------------------------------- */
/* MXNet .params (NDArray list) save: V2 records (V3 when a tensor is 0-d or empty,
 * which V2 cannot express). names may be NULL (list save) or an array of n strings
 * (dict save). Written atomically: temp file + fsync + rename, the old file kept on
 * any failure (MX_EIO). A sync point; GPU tensors are written from a host copy.
 * Formats and policies: docs/file-formats.md. */
int mx_nd_save(const char *path, int n, mx_tensor *const *arrays,
               const char *const *names);
/* Load a .params (V1/V2/V3 and legacy), .npy or .npz file. On success *n arrays are
 * returned in *arrays (caller frees the array with mx_free and releases each
 * tensor) and, when the file has names, *names (caller frees each string and the
 * array with mx_free; *names is NULL for a list file or .npy). Tensors are on the CPU.
 * Malformed input: MX_EFORMAT, message naming the file, array and problem; nothing
 * is returned and no tensor was allocated from a size the file cannot back. Sparse
 * arrays are rejected. A missing/unreadable file: MX_EIO. */
int mx_nd_load(const char *path, int *n, mx_tensor ***arrays, char ***names);
/* Same, from memory. */
int mx_nd_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays,
                     char ***names);
void mx_free(void *p);
/* ---- safetensors (safetensors.c; docs/file-formats.md "safetensors") -------------
 * Hugging Face's format: dtypes F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL (the others,
 * U16/U32/U64/F8, are MX_EFORMAT naming the tensor). load maps the file privately and
 * returns tensors backed by its pages (zero-copy; pages are read when first touched, so
 * a file larger than RAM loads; a write to a tensor copies the page it touches and never
 * reaches the file). A tensor whose data is not aligned to its element size is copied.
 * flags MX_SAFETENSORS_COPY: copy every tensor instead (the mapping is gone on return).
 * The file must not be truncated by another process while its tensors live (a read of
 * a page past the new end is SIGBUS, as with any mapping). Results: *n tensors (CPU) in
 * file order, their names, and (nmeta/meta may be NULL) the __metadata__ strings as
 * 2 * *nmeta key, value pairs; free every string and each array with mx_free, release
 * the tensors. Malformed file: MX_EFORMAT naming the file, the tensor and the field,
 * nothing returned (checks: docs/file-formats.md). A missing file: MX_EIO.
 * Thread-safe. mx_nd_load hands a safetensors file to this function too (without its
 * metadata). */
enum { MX_SAFETENSORS_COPY = 1 };
int mx_safetensors_load(const char *path, int flags, int *n, mx_tensor ***arrays,
                        char ***names, int *nmeta, char ***meta);
/* Same from memory (the tensors are copies). */
int mx_safetensors_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays,
                              char ***names, int *nmeta, char ***meta);
/* Writes n named tensors (names unique, UTF-8, not "__metadata__") and nmeta metadata
 * strings, as the reference writer lays them out (larger dtypes first, then by name;
 * header padded to 8 bytes), atomically (as mx_nd_save). A sync point; GPU tensors are
 * written from a host copy. */
int mx_safetensors_save(const char *path, int n, mx_tensor *const *arrays,
                        const char *const *names, int nmeta, const char *const *meta_keys,
                        const char *const *meta_vals);
/* ---- PyTorch checkpoints (torchfile.c, pickle.c; docs/file-formats.md) -----------
 * A torch.save'd state_dict: the zip layout (torch >= 1.6) or the legacy pickle layout.
 * The pickle is read by a restricted unpickler that allows only the globals a state_dict
 * uses (collections.OrderedDict, torch._utils._rebuild_tensor_v2 and friends, torch.Size,
 * torch.<T>Storage for luamx's dtypes): any other global, and every opcode that builds
 * objects, is MX_EFORMAT naming it; nothing from the file is ever executed. Results as
 * mx_nd_load's: *n CPU tensors (contiguous copies, in the dict's order) and their names
 * (nested dicts give "outer.inner"; non-tensor values are skipped). Malformed file:
 * MX_EFORMAT naming the file and the problem. Thread-safe. */
int mx_torch_load(const char *path, int *n, mx_tensor ***arrays, char ***names);
int mx_torch_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays,
                        char ***names);
/* Writes len bytes to path atomically (temp file beside it + fsync + rename + fsync of
 * the directory): readers see the old file or the new one; on any failure the old
 * file stays and MX_EIO says why. Thread-safe. */
int mx_file_write_atomic(const char *path, const void *data, size_t len);
/* zlib's CRC-32 and the size in bytes of the file at path. MX_EIO when it cannot be read. */
int mx_file_crc32(const char *path, uint32_t *crc, int64_t *size);
/* Read an IDX file (MNIST / Fashion-MNIST format), plain or gzip-compressed
 * (detected from its first bytes), into a new CPU tensor with the file's shape.
 * Element types: u8 -> uint8, i8 -> int8, i16 and i32 -> int32, f32 -> float32,
 * f64 -> float64 (converted from the file's big-endian order). The magic, the
 * dimensions and the byte count are checked against the file's size (for gzip:
 * its length trailer and deflate's maximum ratio) before anything is allocated;
 * a short, long or malformed file fails with MX_EFORMAT, a missing one with
 * MX_EIO. */
int mx_idx_load(const char *path, mx_tensor **out);
/* Same, from len bytes in memory (plain or gzip); messages name '<memory>'. */
int mx_idx_load_bytes(const void *buf, size_t len, mx_tensor **out);
/* ---- RecordIO (MXNet's .rec files; core/src/recordio.c, docs/file-formats.md) ---- */
typedef struct mx_recordio mx_recordio;
/* Opens path for reading (mode "r") or writing ("w"). A writer writes a temporary
 * beside path that close renames over it (atomic: a crash leaves the old file). One
 * thread at a time per handle; handles are independent. MX_EIO when the file cannot
 * be opened, MX_EINVAL for a bad mode. */
int mx_recordio_open(const char *path, const char *mode, mx_recordio **out);
/* A reader over len bytes of memory (not copied: they must outlive the reader). */
int mx_recordio_open_bytes(const void *data, size_t len, mx_recordio **out);
/* Appends one record of len bytes (< 2^29; data holding the magic word is split into
 * parts as dmlc-core does). MX_EIO on a failed write (close then keeps the old file). */
int mx_recordio_write(mx_recordio *r, const void *data, size_t len);
/* Reads the next record: *data points into the reader's buffer (valid until the next
 * read, seek or close), *len is its size. At the end: MX_OK with *data NULL. A
 * malformed or truncated file: MX_EFORMAT naming the file, byte offset and problem. */
int mx_recordio_read(mx_recordio *r, const void **data, size_t *len);
/* Byte offset of the next record (reader) or of the end (writer): an index's position. */
int64_t mx_recordio_tell(const mx_recordio *r);
/* Reader: continue at byte pos (a record's start, from tell or an .idx file). */
int mx_recordio_seek(mx_recordio *r, int64_t pos);
/* Closes; a writer commits its file (MX_EIO if that fails: the old file stays). */
int mx_recordio_close(mx_recordio *r);
/* ---- data loader queues (queue.c; docs/design/data.md "Worker threads") ----------
 * A bounded blocking FIFO of items between threads (the DataLoader's job and result
 * queues between its Lua state and its worker states). push takes over the item's
 * tensor references and copies msg; pop hands both to the caller, who releases the
 * tensors it does not keep and frees msg with mx_queue_item_clear (or mx_free). Waits
 * last at most timeout_s seconds (<= 0: do not wait). A closed queue refuses pushes and
 * wakes every waiter; pop still hands out what it holds. Reference counted: the last
 * release frees the queue and what it still holds. Thread-safe; never calls Lua. */
enum { MX_QUEUE_MAX_FIELDS = 8, MX_QUEUE_TIMEOUT = 1, MX_QUEUE_CLOSED = 2 };
typedef struct mx_queue mx_queue;
typedef struct mx_queue_item {
  int64_t id;          /* the job / batch number */
  int32_t kind;        /* the users' tag (the loader: 0 batch, 1 error) */
  int32_t n;           /* tensors in t[] */
  mx_tensor *t[MX_QUEUE_MAX_FIELDS];
  char *msg;           /* NULL or a text (an error with its traceback) */
} mx_queue_item;
/* NULL when out of memory. capacity < 1 counts as 1. */
mx_queue *mx_queue_new(int capacity);
void mx_queue_retain(mx_queue *q);
void mx_queue_release(mx_queue *q);
void mx_queue_close(mx_queue *q);
int mx_queue_count(mx_queue *q);
/* MX_OK, MX_QUEUE_TIMEOUT (full), MX_QUEUE_CLOSED, or MX_EINVAL / MX_ENOMEM. */
int mx_queue_push(mx_queue *q, const mx_queue_item *item, double timeout_s);
/* MX_OK, MX_QUEUE_TIMEOUT (empty), MX_QUEUE_CLOSED (closed and empty), or MX_EINVAL. */
int mx_queue_pop(mx_queue *q, mx_queue_item *out, double timeout_s);
/* Releases the item's tensors and frees its msg. */
void mx_queue_item_clear(mx_queue_item *item);
/* ---- image codecs ---- */
/* core/src/imgcodec.c (docs/image.md). Decodes len bytes of JPEG or PNG (told apart by
 * their first bytes) into a new CPU uint8 tensor (H, W, C), OpenCV's imdecode rules:
 * flag 1: C = 3 (gray replicated, CMYK converted, alpha dropped, palette expanded,
 * 16-bit cut to 8); flag 0: C = 1 (luma); flag -1: as stored (1, 3 or 4 channels).
 * to_rgb nonzero: channels R, G, B(, A), else B, G, R(, A) as OpenCV. Not an image,
 * corrupt or truncated data, or more than 2^28 pixels (65535 per side, checked before
 * allocating): MX_EFORMAT naming the problem. */
int mx_image_decode(const void *buf, size_t len, int flag, int to_rgb, mx_tensor **out);
/* Encodes img (CPU uint8 (H, W, C)) as JPEG (fmt 0, param = quality 1..100, C 1 or 3,
 * 4:2:0 like OpenCV) or PNG (fmt 1, param = zlib level 0..9, C 1, 3 or 4); from_rgb
 * nonzero: img's channels are R, G, B(, A), else B, G, R(, A). *out is malloc'd (free
 * with mx_free), *len its size. MX_EINVAL for a bad image or parameter. */
int mx_image_encode(mx_tensor *img, int fmt, int param, int from_rgb, void **out, size_t *len);
/* The size JPEG or PNG bytes declare (their header only: nothing is decoded, so a caller
 * can refuse an image before its pixels exist): *h, *w and the stored channels *c.
 * MX_EFORMAT as mx_image_decode for what is not one of them or a corrupt header. */
int mx_image_info(const void *buf, size_t len, int64_t *h, int64_t *w, int *c);
/* ---- graphs (graph.c; docs/design/graph.md) --------------------------------------
 * MXNet's nnvm graph as a flat node array in topological order: a node is a variable
 * (op -1, an argument or auxiliary state, maybe with a constant value) or an op of the
 * op table with a filled params struct and inputs (node, output index) that are earlier
 * nodes; each output is an entry numbered as MXNet's node_row_ptr; heads are the
 * graph's outputs. The symbol API, the JSON reader/writer, the passes, the executor and
 * hybridize all work on it. A graph is not thread-safe: one thread builds or reads it
 * at a time (distinct graphs are independent). Strings returned are owned by the graph
 * and valid until it is freed. Node-building calls return the new node's id (>= 0) or
 * a negative MX_E* code with the message naming the node. */
typedef struct mx_graph mx_graph;
mx_graph *mx_graph_new(void);                 /* NULL when out of memory */
void mx_graph_free(mx_graph *g);              /* also releases the constant values */
int mx_graph_add_var(mx_graph *g, const char *name);
/* params: a filled struct mx_params_<op> (copied), or NULL for the op's defaults.
 * Checks the input count and that every input refers to an existing output. */
int mx_graph_add_op(mx_graph *g, int op, const char *name, const void *params, int nin,
                    const int *in_node, const int *in_out);
/* Same with MXNet string attributes (symbol JSON) parsed by mx_op_params_parse; keys
 * of the form "__x__" become node attributes instead. */
int mx_graph_add_op_attrs(mx_graph *g, int op, const char *name, int nattr,
                          const char *const *keys, const char *const *vals, int nin,
                          const int *in_node, const int *in_out);
/* Node attributes (strings: __shape__, __dtype__, __init__, __lr_mult__, user keys);
 * set replaces an existing key. get: NULL when absent. */
int mx_graph_set_attr(mx_graph *g, int node, const char *key, const char *val);
const char *mx_graph_get_attr(const mx_graph *g, int node, const char *key);
int mx_graph_num_attrs(const mx_graph *g, int node);
const char *mx_graph_attr_key(const mx_graph *g, int node, int k);
const char *mx_graph_attr_val(const mx_graph *g, int node, int k);
int mx_graph_set_heads(mx_graph *g, int n, const int *node, const int *out);
/* A variable's constant value (the graph takes a reference; NULL clears). Constant
 * folding evaluates what depends only on such variables. */
int mx_graph_set_value(mx_graph *g, int node, mx_tensor *t);
mx_tensor *mx_graph_node_value(const mx_graph *g, int node);   /* borrowed, or NULL */
int mx_graph_num_nodes(const mx_graph *g);
int mx_graph_node_op(const mx_graph *g, int node);             /* -1: variable */
const char *mx_graph_node_name(const mx_graph *g, int node);
const void *mx_graph_node_params(const mx_graph *g, int node); /* NULL: none */
int mx_graph_node_num_inputs(const mx_graph *g, int node);
/* The node that input k reads (-1 if out of range); *out_idx gets its output index. */
int mx_graph_node_input(const mx_graph *g, int node, int k, int *out_idx);
int mx_graph_node_num_outputs(const mx_graph *g, int node);
int mx_graph_num_heads(const mx_graph *g);
int mx_graph_head(const mx_graph *g, int k, int *out_idx);      /* the head's node */
int mx_graph_num_entries(const mx_graph *g);
int mx_graph_entry(const mx_graph *g, int node, int out_idx);  /* -1 if out of range */
/* Shape/dtype inference over the whole graph. entries[mx_graph_num_entries]: the
 * caller sets the variables' entries (ndim -1, dims -1, dtype -1: unknown; a variable's
 * constant value counts as given), the op entries are filled; parameter variables
 * whose dims the data determines are filled in (fully_connected's weight). Unknowns
 * that nothing determines stay -1. MX_EINVAL naming the node and op where the known
 * parts conflict. */
int mx_graph_infer(const mx_graph *g, mx_desc *entries);
/* MXNet 1.x symbol JSON (graph_json.c; docs/symbol.md). from_json reads a file's text
 * (1.x nodes with `attrs`, or the older `param` / `attr`), checking every field (types,
 * node references earlier than the node, output and head indices, op names and their
 * attributes): MX_EFORMAT naming the node, the field and the problem, *out untouched.
 * to_json writes nodes, arg_nodes, node_row_ptr, heads and attrs {mxnet_version}, ops
 * under their MXNet name (broadcast_* where the op has one) with their required and
 * non-default params; *out is a new string (free with mx_free). */
int mx_graph_from_json(const char *json, mx_graph **out);
int mx_graph_to_json(const mx_graph *g, char **out);

/* Graph passes (graph_pass.c, graph_fuse.c): a new graph (*out, free with
 * mx_graph_free) from g, which is not changed; every pass keeps g's variables, in order,
 * and its heads. name: "dce" (ops no head needs; ops updating an auxiliary state stay),
 * "cse" (equal ops on equal inputs merged; random and in-place ops never), "fold" (ops
 * whose inputs are all constants evaluated now: their outputs become variables with
 * values), "fuse" (chains of float32 unary/binary/scalar ops of one shape become one
 * fused node, op -2, run in one pass over memory), "fold_bn" (inference BatchNorm after
 * a convolution folded into its weight and bias), "fuse_act" (an inference graph's
 * convolution absorbs the relu / Activation(relu) / clip(0, 6) after it, or the add of a
 * residual and a relu after that: convolution_sum; graph_fuse_act.c). entries: g's
 * descriptors from mx_graph_infer, needed by fuse, fold_bn and fuse_act (NULL is fine
 * for the others). */
int mx_graph_pass(const mx_graph *g, const char *name, const mx_desc *entries, mx_graph **out);
/* Instructions of a fused node (0 for any other node). */
int mx_graph_node_fused_size(const mx_graph *g, int node);

/* Memory plan of g's op entries (graph_plan.c): entries (from mx_graph_infer) must be
 * known for every planned entry. skip[e] nonzero (skip may be NULL): entry e is not
 * planned; heads and variables never are. slot[e] gets the buffer entry e lives in (-1:
 * none), slot_bytes[0..*nslots) the buffers' sizes (both arrays hold num_entries),
 * *total_bytes their sum. An output shares its input's buffer where the op table
 * declares the pair in place and the input is read for the last time there; buffers
 * are reused by liveness otherwise. */
int mx_graph_plan_memory(const mx_graph *g, const mx_desc *entries, const uint8_t *skip,
                         int *slot, int64_t *slot_bytes, int *nslots, int64_t *total_bytes);

/* The executor (graph_exec.c): g compiled for one input signature. Inputs are g's
 * variables without a constant value, in node order (in[k]: fully known descriptors,
 * all on one device); g is copied (later changes to it do not matter). Every entry's
 * shape must follow from the inputs. flags: MX_GRAPH_STATIC_ALLOC keeps the planned
 * buffers between runs (else they come from the pool per run); MX_GRAPH_TRAINING sets
 * the train-mode param ("training": dropout, batch_norm, rrelu) of every node, else it
 * is cleared (MXNet's forward(is_train=)); MX_GRAPH_OPTIMIZE runs dce, cse, fold,
 * fuse_act (not training) and fuse first, and with MX_GRAPH_FOLD_BN (not training)
 * fold_bn before fold: for graphs whose
 * parameters are constants (their folded weights are then computed once). A handle is
 * used from one thread at a time; runs queue like ops. */
enum { MX_GRAPH_STATIC_ALLOC = 1, MX_GRAPH_TRAINING = 2, MX_GRAPH_OPTIMIZE = 4, MX_GRAPH_FOLD_BN = 8 };
typedef struct mx_graph_exec mx_graph_exec;
int mx_graph_exec_new(const mx_graph *g, int nin, const mx_desc *in, int flags,
                      mx_graph_exec **out);
/* The same for inference on given tensors: the inputs k with frozen[k] != 0 become
 * constants holding in[k] (borrowed; the executor keeps a reference), so that BatchNorm
 * folds into the convolution (MX_GRAPH_FOLD_BN is implied without MX_GRAPH_TRAINING)
 * and weights are laid out for their kernels once. Runs still take all nin inputs, the
 * frozen ones included: a write into a constant seen by the core (an op's out= or
 * in-place update, a copy into it, a host write) makes the next run rebuild, and a
 * frozen input given as another tensor becomes the constant from then on.
 * mx_graph_exec_num_inputs / _input_node then count the inputs not frozen. Hybridized
 * blocks' inference calls run on it (their parameters frozen). */
int mx_graph_exec_new_frozen(const mx_graph *g, int nin, mx_tensor *const *in,
                             const uint8_t *frozen, int flags, mx_graph_exec **out);
/* Frees the handle; queued runs finish first (they hold their own reference). */
void mx_graph_exec_free(mx_graph_exec *e);
int mx_graph_exec_num_inputs(const mx_graph_exec *e);
int mx_graph_exec_input_node(const mx_graph_exec *e, int k);   /* node id of input k */
int mx_graph_exec_num_outputs(const mx_graph_exec *e);
int mx_graph_exec_output_desc(const mx_graph_exec *e, int k, mx_desc *out);
int mx_graph_exec_entry_desc(const mx_graph_exec *e, int entry, mx_desc *out);
/* Bytes of the planned buffers (the intermediate entries' memory) and their count. */
int64_t mx_graph_exec_planned_bytes(const mx_graph_exec *e);
int mx_graph_exec_num_buffers(const mx_graph_exec *e);
/* Runs the graph as ONE engine op: reads the inputs (and constants), writes the
 * outputs, the inputs an op updates in place (BatchNorm's moving statistics) and the
 * planned buffers. in: borrowed, matching the compiled signature (else MX_EINVAL naming
 * the input and both shapes). out[k]: NULL gets a new tensor (new reference), non-NULL
 * is written into (same shape and dtype). An op failing inside is an asynchronous
 * error on the outputs naming the node (or returned at once when the run was inline). */
int mx_graph_exec_run(mx_graph_exec *e, int nin, mx_tensor *const *in, int nout,
                      mx_tensor **out);
/* ---- ONNX (core/src/onnx/; docs/onnx.md) ----------------------------------------
 * mx_onnx_import reads an ONNX model (protobuf-c over Debian's onnx.proto) into a new
 * graph (*graph, free with mx_graph_free): its variables are the model's inputs (no
 * value, in the model's order) and its parameters (variables with constant values, named
 * as the initializers, or <node>_const<k> for values computed from them at import time);
 * its heads are the model's outputs, whose names come back in *out_names (nout strings;
 * free each and the array with mx_free). Values computed only from constants are
 * evaluated at import time with the op table's kernels (shape arithmetic, Constant,
 * folded weights). in[0..nin) may give an input's descriptor (desc.ndim -1: keep the
 * model's; unknown dims -1; dtype -1: the model's) or a constant value (value non-NULL:
 * the input becomes a constant, what makes an input a shape or an attribute can be).
 * Errors: MX_EFORMAT for a file that is not a model, MX_EINVAL naming the node and op for
 * what luamx cannot express, with "unsupported:" in the message when an op, an attribute
 * value, a type or a dynamic input is outside what luamx supports. External data is read
 * only from regular files under the model's directory. Thread-safe. */
typedef struct mx_onnx_input {
  const char *name;
  mx_desc desc;
  mx_tensor *value;
} mx_onnx_input;
int mx_onnx_import(const char *path, int nin, const mx_onnx_input *in, mx_graph **graph,
                   int *nout, char ***out_names);
/* Same from memory; dir: where external data files are (NULL: none allowed). */
int mx_onnx_import_bytes(const void *buf, size_t len, const char *dir, int nin,
                         const mx_onnx_input *in, mx_graph **graph, int *nout,
                         char ***out_names);
/* A serialized TensorProto file (ONNX's test data input_0.pb...) as a new CPU tensor;
 * *name (may be NULL) gets its name (free with mx_free). */
int mx_onnx_load_tensor(const char *path, mx_tensor **out, char **name);
/* The model's inputs (initializers left out) and outputs with their declared descriptors
 * (unknown dims -1): MXNet's get_model_metadata. Free the names and arrays with mx_free. */
int mx_onnx_model_info(const char *path, int *nin, char ***in_names, mx_desc **in_descs,
                       int *nout, char ***out_names, mx_desc **out_descs);
/* Writes graph g as an ONNX model (opset 17) to path (atomically): variables with a value
 * become initializers, the others the model's inputs, in node order, with descriptors
 * in[0..nin); the shapes are inferred from them. flags MX_ONNX_DYNAMIC: the first dim of
 * every input and output is symbolic ("N") and reshapes keep it (0). An op with no ONNX
 * form is MX_EINVAL naming the node and the op (docs/onnx.md, "Export"). */
enum { MX_ONNX_DYNAMIC = 1 };
int mx_onnx_export(const mx_graph *g, int nin, const mx_desc *in, int flags, const char *path);
/* ONNX string tensors (core/src/onnx/onnx_strings.c; docs/onnx.md, "Strings"). luamx
 * has no string dtype: a string tensor is this host-side list of byte strings (UTF-8 by
 * ONNX's rule), row-major, outside mx_tensor and the graph IR. mx_onnx_model_info
 * reports a string input or output with dtype MX_ONNX_STRING. */
enum { MX_ONNX_STRING = -2 };
typedef struct mx_onnx_strings {
  int ndim;
  int64_t shape[8];
  int64_t n;   /* elements: the product of shape */
  char **s;    /* n strings, each NUL-terminated after its len bytes */
  size_t *len; /* their byte lengths (a string may hold NUL bytes) */
} mx_onnx_strings;
/* A new string tensor of shape[0..ndim) with every element "" (fill s/len in place:
 * replace an element with mx_onnx_strings_set). Free with mx_onnx_strings_free. */
int mx_onnx_strings_new(int ndim, const int64_t *shape, mx_onnx_strings **out);
int mx_onnx_strings_set(mx_onnx_strings *t, int64_t i, const char *s, size_t len);
void mx_onnx_strings_free(mx_onnx_strings *t);
/* A serialized STRING TensorProto (ONNX's test data .pb) as a string tensor; *name (may
 * be NULL) gets its name. MX_EINVAL "not a string tensor" for another element type. */
int mx_onnx_load_strings(const char *path, mx_onnx_strings **out, char **name);
/* Writes one TensorProto file (atomically): t (a numeric tensor) or s (strings), the
 * other NULL; name may be NULL. */
int mx_onnx_save_tensor(const char *path, mx_tensor *t, const mx_onnx_strings *s,
                        const char *name);
/* Runs a model whose values are all string tensors (string ops only: StringNormalizer,
 * Identity) on in[0..nin) named names[..]: *out gets the model's outputs in its order
 * (free each with mx_onnx_strings_free and the array with mx_free), *out_names their
 * names. A node of another op is MX_EINVAL "unsupported:" naming it. */
int mx_onnx_run_strings(const char *path, int nin, const char *const *names,
                        const mx_onnx_strings *const *in, int *nout, char ***out_names,
                        mx_onnx_strings ***out);
/* MX_FFI_END */

#ifdef __cplusplus
}
#endif
#endif /* MX_H */
