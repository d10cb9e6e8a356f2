/* internal.h — what the core's C files and the kernels share; not installed. */
#ifndef MX_INTERNAL_H
#define MX_INTERNAL_H

#include "mx.h"

/* The CUDA sources in kernels/cuda (C++17) include this header too: same layouts, C linkage.
 * std::atomic<int> has the layout of C11's atomic_int. Keep this header free of
 * C-only syntax (_Atomic, designated initialisers in inline functions, ...). */
#ifdef __cplusplus
#include <atomic>
#include <cstdio>
typedef std::atomic<int> atomic_int;
typedef std::atomic<unsigned> atomic_uint;
extern "C" {
#else
#include <stdatomic.h>
#include <stdio.h>
#endif

#if defined(__GNUC__)
#define MX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define MX_LIKELY(x) __builtin_expect(!!(x), 1)
#define MX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MX_PRINTF(a, b)
#define MX_LIKELY(x) (x)
#define MX_UNLIKELY(x) (x)
#endif

#define MX_ALIGN 64

/* ---- errors (error.c) ---- */
/* Formats the thread's message and returns code, so callers write
 * `return mx_err(MX_EINVAL, "add: ...", ...)`. */
int mx_err(int code, const char *fmt, ...) MX_PRINTF(2, 3);

/* Atomic file writes (atomic_file.c): begin opens a fresh temporary beside path (af->f,
 * binary); end with rc != 0 or !write_ok removes it and keeps the old file, else
 * flushes, fsyncs and renames it over path (then fsyncs the directory). `who` starts
 * the error messages. path must outlive the write. */
typedef struct mx_atomic_file { FILE *f; char *tmp; const char *path; } mx_atomic_file;
int mx_atomic_begin(mx_atomic_file *af, const char *path, const char *who);
int mx_atomic_end(mx_atomic_file *af, const char *who, int rc, bool write_ok);
/* Puts "op: " in front of the thread's message (unless it already starts so); returns
 * code. For errors of shared helpers (allocation) that do not know the op. */
int mx_err_prefix(int code, const char *op);
/* Formats a shape (or any int list up to an mx_tuple's 16 entries) as "(2, 3)" into buf
 * (at least 16*22+4 bytes: use MX_SHAPE_BUF). */
#define MX_SHAPE_BUF 360
const char *mx_shape_str(char *buf, int ndim, const int64_t *shape);

/* ---- storage (storage.c) ---- */
/* Sizes matter here: a 1-element tensor is one cached cell holding its header, its
 * storage and its data (storage.c), and header + storage must fit 192 bytes so the cell
 * is four cache lines (five cost the 1-element op ~15%). */
typedef struct mx_storage {
  atomic_int refcount;
  int16_t dev_type, dev_id;
  void *data;
  size_t nbytes;       /* bytes usable by tensors */
  size_t capacity;     /* bytes actually allocated (pool bucket size) */
  void (*deleter)(void *data, void *ctx); /* external memory; NULL for pooled */
  void *deleter_ctx;
  void *engine_var;    /* the engine's variable for this storage (engine.c) */
  struct mx_session *session; /* charged with capacity bytes (session.c); NULL: external */
  bool external;
  bool in_cell;        /* shares one cached block with its first tensor (storage.c) */
  bool shared;         /* handed to other threads' states (mx_tensor_share; __atomic
                        * loads/stores): the engine orders every op on it, none runs
                        * inline unlocked (engine.c) */
  atomic_uint version; /* its state's number in one process-wide sequence (the bools'
                          padding: the cell's three cache lines): mx_storage_touch */
} mx_storage;

mx_storage *mx_storage_alloc(size_t nbytes, int dev_type, int dev_id);
/* The same, charged to session se (dispatch passes the call's; the plain one reads the
 * thread's current session). */
mx_storage *mx_storage_alloc_in(struct mx_session *se, size_t nbytes, int dev_type, int dev_id);
mx_storage *mx_storage_wrap(void *data, size_t nbytes, void (*deleter)(void *, void *),
                            void *ctx);
void mx_storage_retain(mx_storage *s);
/* A write into s is on its way (an op pushed with it as an output, a mutable data pointer
 * handed out): s->version takes the next value of one process-wide sequence, so a
 * (storage address, version) pair names one state of one storage, even across a freed
 * storage's address coming back (mx_tensor_version; the int8 kernels' weight cache). */
void mx_storage_touch(mx_storage *s);
void mx_storage_release(mx_storage *s);
/* The engine's variable of a storage (engine_var) dies with the storage: the engine
 * hands storage.c the function that frees one, once, before it creates the first. */
void mx_storage_on_var_free(void (*fn)(void *var));
/* Small CPU tensors (data <= MX_CELL_BYTES) come as one cached block holding the
 * tensor header, its storage and the data: no malloc and no pool lock per op. The
 * returned tensor has refcount 1, storage set (refcount 1), other fields unset.
 * NULL when out of memory. The block goes back to the cache when the storage dies;
 * mx_tensor_release must not free() a tensor for which mx_cell_tensor is true. */
#define MX_CELL_BYTES 64
struct mx_tensor *mx_cell_alloc(size_t nbytes, struct mx_session *se);
bool mx_cell_tensor(const struct mx_tensor *t);

/* ---- tensors (tensor.c) ---- */
/* A sparse tensor's parts (stype.c): plain row-major tensors on the tensor's device.
 * Set by the kernel that writes the tensor (mx_sparse_alloc_*), immutable from then on:
 * a kernel writing a sparse output installs new parts, so parts may be shared. NULL
 * until the first write (a sparse output not computed yet).
 *   row_sparse: data (nnr, shape[1], ...) the stored rows; aux[0] (nnr) int64 their
 *               row ids, strictly ascending.
 *   csr (2-d):  data (nnz) the values; aux[0] (rows + 1) int64 indptr (row r holds
 *               entries indptr[r] .. indptr[r+1]-1); aux[1] (nnz) int64 column ids,
 *               strictly ascending within a row. */
typedef struct mx_sparse {
  struct mx_tensor *data;
  struct mx_tensor *aux[2];
} mx_sparse;

struct mx_tensor {
  atomic_int refcount;
  int ndim;
  int dtype;
  /* MX_STYPE_* (mx.h). A sparse tensor (stype != 0) is a handle whose storage holds no
   * data (it carries the engine variable that orders the tensor's readers and writers),
   * whose size is 0 (so nothing that reads size elements from storage can touch its
   * bytes) and whose values are its parts (sparse); its layout is always NULL. */
  int stype;
  int64_t shape[MX_MAX_DIM];
  int64_t size;        /* prod(shape); 0 for sparse tensors */
  mx_storage *storage;
  size_t offset;       /* bytes from storage->data */
  /* Memory layout: NULL is row-major (what every kernel sees unless its backend declares
   * otherwise); else an opaque backend layout (oneDNN blocked formats: layout.c), whose
   * data may be padded, converted to row-major whenever anything else reads it. */
  const struct mx_layout *layout;
  union {
    void *layout_md;   /* the layout's descriptor, owned by the tensor (layout != NULL) */
    mx_sparse *sparse; /* a sparse tensor's parts, owned by it (stype != 0) */
  };
};

/* A backend layout: how a tensor's data is arranged, and how to get row-major back. The
 * backend that owns it registers it when its library loads (mx_layout_register): the
 * core calls these hooks and knows nothing else of the format. */
typedef struct mx_layout {
  const char *name;
  int code;                                  /* MX_LAYOUT_* (mx.h) */
  /* src (this layout) into dst (row-major, same shape and dtype, CPU), synchronously;
   * src's pending writes are done */
  int (*to_row_major)(const mx_tensor *src, mx_tensor *dst);
  /* the reverse: src (row-major) into dst, a tensor in this layout */
  int (*from_row_major)(const mx_tensor *src, mx_tensor *dst);
  /* mx_tensor_to_layout for this layout: a new tensor of t's values in the backend's
   * format named `format` (its own vocabulary: oneDNN's "nChw16c") */
  int (*to_format)(mx_tensor *t, const char *format, mx_tensor **out);
  void (*free_md)(void *md);                 /* frees a tensor's layout_md */
  /* whether two tensors' descriptors arrange the same dims identically (one's memory
   * can stand for the other's: a planned buffer shared in place) */
  bool (*same_md)(const void *a, const void *b);
  /* where a tensor arranged as `part` lies inside one arranged as `whole` when it holds
   * whole's [off, off + its size) along axis, all its other dims whole's: the byte
   * offset, or -1 when that slice is not laid out exactly as part (a planned concat
   * whose inputs are written in its output; NULL: never) */
  int64_t (*slice_offset)(const void *whole, const void *part, int axis, int64_t off);
} mx_layout;

/* A new reference to a row-major tensor with t's values: t itself when it is row-major,
 * else a converted copy (waits for t's pending writes). */
int mx_tensor_plain(mx_tensor *t, mx_tensor **out);

/* Converts t to row-major in place: waits for every pending op on t, then swaps its
 * storage for a row-major one holding the same values, under a process-wide lock (two
 * readers of one blocked tensor convert it once). A no-op for row-major tensors; every
 * reader that is not a kernel accepting the layout calls it first (data, item, totable,
 * copies, views, save). */
int mx_tensor_make_plain_slow(mx_tensor *t);
static inline int mx_tensor_make_plain(mx_tensor *t) {
  return MX_UNLIKELY(t->layout != NULL) ? mx_tensor_make_plain_slow(t) : MX_OK;
}

/* A new CPU tensor (never a cell) whose storage is nbytes (a layout's padded size) and
 * whose layout is l with descriptor md (owned by the tensor from here on, even on
 * failure it is not: the caller frees md when this fails). l NULL: row-major. */
int mx_tensor_new_laid(int ndim, const int64_t *shape, int dtype, size_t nbytes,
                       const mx_layout *l, void *md, mx_tensor **out);

/* Validates a shape: 0..8 dims, no negative dim, element and byte counts fit. */
int mx_shape_check(const char *op, int ndim, const int64_t *shape, int dtype);
/* Allocate a tensor whose storage is fresh (pooled). */
int mx_tensor_new(int ndim, const int64_t *shape, int dtype, int dev_type, int dev_id,
                  mx_tensor **out);
/* The same, its storage charged to session se (one thread-local read per op, not two). */
int mx_tensor_new_in(struct mx_session *se, int ndim, const int64_t *shape, int dtype,
                     int dev_type, int dev_id, mx_tensor **out);
/* A row-major view of base's first bytes as another shape and dtype (the graph
 * executor's planned buffers): the bytes must fit in base's. New reference. */
int mx_tensor_view_bytes(mx_tensor *base, int ndim, const int64_t *shape, int dtype,
                         mx_tensor **out);
/* Whether a and b share any byte (the same storage and overlapping, non-empty byte
 * ranges): out= aliasing checks in dispatch and the graph executor. */
static inline bool mx_tensor_overlaps(const mx_tensor *a, const mx_tensor *b) {
  if (a->storage != b->storage) return false;
  size_t a0 = a->offset, a1 = a0 + (size_t)a->size * mx_dtype_size(a->dtype);
  size_t b0 = b->offset, b1 = b0 + (size_t)b->size * mx_dtype_size(b->dtype);
  return a0 < b1 && b0 < a1 && a1 > a0 && b1 > b0;
}
static inline void *mx_ptr(const mx_tensor *t) {
  return (char *)t->storage->data + t->offset;
}
static inline size_t mx_nbytes(const mx_tensor *t) {
  return (size_t)t->size * mx_dtype_size(t->dtype);
}
static inline int mx_dev(const mx_tensor *t) { return t->storage->dev_type; }
int64_t mx_shape_prod(int ndim, const int64_t *shape);
/* t's descriptor (shape, dtype, device; layout code from layout.c's table). */
void mx_desc_from(mx_desc *d, const mx_tensor *t);

/* ---- sparse tensors (stype.c; mx.h "sparse storage") ---- */
/* A sparse handle of stype with no parts yet (what dispatch makes for a sparse output;
 * its kernel installs the parts), its storage charged to se. CPU only. */
int mx_sparse_new_empty(struct mx_session *se, int stype, int ndim, const int64_t *shape,
                        int dtype, int dev_type, int dev_id, mx_tensor **out);
/* For kernels writing sparse output t: allocate new parts and install them, releasing
 * the old ones (contents uninitialised). row_sparse: nnr stored rows; csr: nnz values,
 * and indptr (rows + 1). Charged to t's session. MX_ENOMEM naming the sizes. */
int mx_sparse_alloc_rsp(mx_tensor *t, int64_t nnr);
int mx_sparse_alloc_csr(mx_tensor *t, int64_t nnz);
/* Shrinks the parts just allocated to n stored rows (row_sparse) or values (csr), for a
 * kernel that allocated an upper bound; n <= the allocated count. */
void mx_sparse_trim(mx_tensor *t, int64_t n);
/* Installs parts given by the caller (new references taken; aux1 NULL for row_sparse),
 * releasing the old ones. The parts must already be canonical (no check here). */
void mx_sparse_set_parts(mx_tensor *t, mx_tensor *data, mx_tensor *aux0, mx_tensor *aux1);
/* Parts of a sparse tensor, for kernels (its parts exist once it has been written). */
static inline int64_t mx_sparse_count(const mx_tensor *t) {
  return t->sparse && t->sparse->data ? t->sparse->data->shape[0] : 0;
}
static inline void *mx_sparse_values(const mx_tensor *t) {
  return (char *)t->sparse->data->storage->data + t->sparse->data->offset;
}
static inline int64_t *mx_sparse_index(const mx_tensor *t, int k) {
  const struct mx_tensor *a = t->sparse->aux[k];
  return (int64_t *)(void *)((char *)a->storage->data + a->offset);
}
/* Elements per stored row of a row_sparse tensor (prod(shape[1..])). */
static inline int64_t mx_sparse_row_elems(const mx_tensor *t) {
  int64_t n = 1;
  for (int i = 1; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* ---- dtypes (dtype.c) ---- */
bool mx_dtype_valid(int dtype);
bool mx_dtype_is_float(int dtype);
/* Result dtype of a binary op on a and b (NumPy-like, MXNet codes). */
int mx_dtype_promote(int a, int b);
/* Element i of a buffer of dtype as double, and the reverse (with f16/bf16 RNE). */
double mx_load_f64(const void *p, int dtype, int64_t i);
void mx_store_f64(void *p, int dtype, int64_t i, double v);
/* Convert n elements between dtypes (contiguous, CPU). */
void mx_convert(void *dst, int dst_dtype, const void *src, int src_dtype, int64_t n);

/* ---- special functions (specfun.c): the definitions of the ops built on them ---- */
double mx_sf_rint(double x);    /* MXNet's rint: halves toward -inf */
double mx_sf_erfinv(double y);
double mx_sf_gammaln(double x);
double mx_sf_digamma(double x);
double mx_sf_trigamma(double x);
double mx_sf_float_max(int dtype); /* largest finite value of a float dtype */

/* ---- devices (device.c) ----
 * A device backend: what the core needs from a device beyond the op kernels. The
 * CPU backend is built in; libmx_cuda provides the GPU one (mx_cuda_backend). */
typedef struct mx_device_backend {
  const char *name;
  void *(*alloc)(size_t nbytes, int dev_id);
  void (*free)(void *p, size_t nbytes, int dev_id);
  /* kind: 0 host->dev, 1 dev->host, 2 dev->dev */
  int (*copy)(void *dst, const void *src, size_t nbytes, int kind, int dev_id);
  int (*sync)(int dev_id);
  int (*count)(void);
} mx_device_backend;

/* Backend for a dev_type, NULL when unavailable (loads libmx_cuda on first use). */
const mx_device_backend *mx_backend(int dev_type);
/* Checks dev_type/dev_id names an available device; sets the message otherwise. */
int mx_device_check(const char *op, int dev_type, int dev_id);

/* ---- op table (ops_gen.c, generated; dispatch.c; docs/design/architecture.md) ---- */
typedef struct mx_op_def mx_op_def;

/* What inference hands the kernels, so that ref, cpu and cuda kernels do not re-decode
 * params: filled by the op's inference function (each field says which ops set it),
 * zeroed before. Plain data: the engine copies it with a queued op. */
typedef struct mx_op_info {
  /* -- zeroed by dispatch before inference -- */
  int axis;                      /* the normalised (0-based, non-negative) single axis
                                    (concat, stack: of the output; repeat: of align) */
  int align_ndim;                /* the rank `align` is on (see align) */
  int64_t rng_draws;             /* random counters the call consumes (ops with rng) */
  bool axes[MX_MAX_DIM];         /* normalised axis set over input 0's dims (reductions:
                                    every axis when none is given; flip: the axes reversed) */
  bool prefer_blocked;           /* set by the graph compiler, not by inference: a kernel that
                                    chooses its layouts takes oneDNN's channel-blocked one
                                    (nChw16c) over its own pick, so concats of its outputs can
                                    be planned in place (graph_compile.c) */
  /* -- not zeroed (a memset of all of it cost the 1-element op ~20 ns): the inference of
   *    each op that uses one sets it for every dim its kernels read -- */
  int perm[MX_MAX_DIM];          /* transpose, swapaxes: output axis d is input axis perm[d] */
  int64_t align[MX_MAX_DIM];     /* input 0's dims placed on align_ndim dims (broadcast_like,
                                    reduce_to with axis, tile): size 1 on the other axes;
                                    repeat: input 0 as the kernel sees it (its shape, or
                                    (size) with no axis) */
  int64_t begin[MX_MAX_DIM];     /* resolved slice box per axis of input 0 (slice ops): */
  int64_t step[MX_MAX_DIM];      /*   first index and step; the box's extent is the */
  int64_t extent[MX_MAX_DIM];    /*   output shape (slice) or here (slice_assign*) */
} mx_op_info;

/* Pure shape/dtype inference over descriptors (mx_desc, mx.h): validate the inputs and
 * params, fill out[0..nout) and info. Inputs whose dims are unknown (MX_DIM_UNKNOWN) may be
 * filled in where the data determines them (a parameter input: fully_connected's weight
 * is (num_hidden, in_units)); nothing else is written. No side effects: params are const,
 * no random counter moves. Errors name the op (def->name), the argument and the shapes.
 * Inputs' devices already match. */
typedef int (*mx_infer_fn)(const mx_op_def *def, const void *params, int nin,
                           mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info);

/* Backends of the kernel registry, in the order dispatch tries them on a device. */
enum { MX_BACKEND_REF = 0, MX_BACKEND_CPU, MX_BACKEND_DNNL, MX_BACKEND_CUDA, MX_NUM_BACKENDS };

/* The context every kernel gets: where it runs and with what. Filled by dispatch; a
 * queued op carries a copy (the engine owns it until the kernel returns). */
typedef struct mx_kctx {
  const mx_op_def *def;
  int backend;                   /* MX_BACKEND_* this kernel belongs to */
  int dev_type, dev_id;
  void *stream;                  /* the device queue: cudaStream_t on GPUs (NULL: the
                                    backend's default); NULL on the CPU */
  struct mx_session *session;    /* the session that issued the call (session.c) */
  uint64_t rng_seed, rng_first;  /* the call's random counters, reserved at dispatch in
                                    program order (ops declaring rng; info.rng_draws) */
  /* what the engine runs instead when the kernel returns MX_DECLINE (dispatch's: the
   * next backend of the registry's order); NULL: a decline is an error */
  int (*decline)(const struct mx_kctx *ctx, const void *params, int nin,
                 struct mx_tensor *const *in, int nout, struct mx_tensor *const *out);
  mx_op_info info;
} mx_kctx;

/* A kernel: outputs are allocated with the inferred shapes/dtypes; inputs hold the
 * dtypes the op declares (promotion happened before) in the layouts the backend
 * accepts (row-major unless it declares otherwise). */
typedef int (*mx_kernel_fn)(const mx_kctx *ctx, const void *params, int nin,
                            mx_tensor *const *in, int nout, mx_tensor *const *out);
/* Whether a backend takes this call (dtypes, layouts, params, what inference resolved),
 * decided before anything is queued. NULL: every call the op accepts. On false it may
 * set *why (static text). Declared in the op table (`supports = true`). */
typedef bool (*mx_supports_fn)(const mx_op_def *def, const void *params,
                               const mx_op_info *info, int nin, const mx_desc *in, int nout,
                               const mx_desc *out, const char **why);
/* Lets a backend's kernel choose its outputs' layout: before allocating output i of a
 * call that keeps an input in a layout the kernel takes (or of every call, for kernels
 * declared `choose_out`), dispatch calls it; it sets *out to a new tensor of od's shape
 * and dtype in the layout the kernel will write, or leaves it NULL (row-major). out=
 * slots stay as given. Declared in the op table (`out_layout = true`). */
typedef int (*mx_out_layout_fn)(const mx_op_def *def, const void *params,
                                const mx_op_info *info, int nin, mx_tensor *const *in, int i,
                                const mx_desc *od, mx_tensor **out);

/* Lets a backend's kernel read a constant input in a layout of its own: input k of a call
 * with these inputs holds a value nobody writes while the caller keeps the result (a
 * model's weights in a compiled graph: graph_compile.c asks once per graph). Sets *out to
 * a new tensor of the same values in the layout the kernel will read it in for such calls
 * (a convolution's weights in its primitive's blocked format: no reorder per call), or
 * leaves it NULL when the kernel reads it as it is. Declared in the op table
 * (`prepack = true`). */
typedef int (*mx_prepack_fn)(const mx_op_def *def, const void *params,
                             const mx_op_info *info, int nin, mx_tensor *const *in, int k,
                             mx_tensor **out);

/* In a kernel entry's layouts mask: call the out-layout function for every call, not only
 * for calls that keep an input in a backend layout, so an op can start a chain in its own
 * layout from row-major inputs (convolution: oneDNN's choice). */
#define MX_LAYOUTS_CHOOSE_OUT (1u << 31)

typedef struct mx_kernel_entry {
  mx_kernel_fn run;
  mx_supports_fn supports;
  mx_out_layout_fn out_layout;
  mx_prepack_fn prepack;
  uint32_t layouts;              /* bit L: accepts inputs in layout L (bit 0 row-major) */
} mx_kernel_entry;

/* What a kernel returns when it cannot run this call after all (a non-finite value its
 * library path mishandles, an index it leaves the reference kernel to report, a geometry
 * its library cannot take, a primitive oneDNN declines to build): dispatch then runs the
 * next backend of the registry's order on the same call (dispatch.c). Never reaches a
 * caller. Refusals that a dtype or a param decides belong in `supports`, which spares the
 * queued call. A fast kernel never calls a reference kernel itself: the oracle stays
 * independent of what it checks. */
#define MX_DECLINE 1

/* Scratch memory for the running kernel: valid until it returns, thread-local, grows
 * as needed; NULL when out of memory. Kernels must not keep it. */
void *mx_kctx_workspace(const mx_kctx *ctx, size_t nbytes);
/* Intra-op threads the kernel may use now (the process-wide thread budget less what
 * other running kernels hold: mx_threads_acquire). */
int mx_kctx_threads(const mx_kctx *ctx);

enum { MX_PT_INT = 1, MX_PT_FLOAT, MX_PT_BOOL, MX_PT_DTYPE, MX_PT_AXIS, MX_PT_AXES,
       MX_PT_SHAPE, MX_PT_INTS, MX_PT_ENUM, MX_PT_FLOATS };

typedef struct mx_param_def {
  const char *name;
  int type;
  size_t offset;
  bool optional;        /* nil default: has_<name> flag (scalars) or n=-1 (tuples) */
  size_t has_offset;    /* offset of the has_ flag for optional scalars */
  const char *mxnet;    /* MXNet's attribute name (symbol JSON) */
  const char *def;      /* the default in MXNet's string form ("(1, 1)", "True", "relu");
                           NULL: required or optional without a default */
  const char *const *values; /* enum names (index = C value), NULL-terminated */
} mx_param_def;

/* Declared properties of an op beyond its signature (op table fields). */
enum {
  MX_OPF_VARIADIC = 1,    /* any number >= 1 of inputs (concat) */
  MX_OPF_CREATION = 2,    /* no tensor inputs; device from params (ctx) */
  MX_OPF_RNG = 4,         /* draws random numbers: one resource, reserved at dispatch */
  MX_OPF_NONDIFF = 8,     /* no gradient */
  MX_OPF_PARTIAL = 16,    /* inference handles unknown dims (MX_DIM_UNKNOWN) */
  MX_OPF_HALF_ALL = 32,   /* float16 data inferred as float32, every output float16 */
  MX_OPF_HALF_OUT = 64,   /* the same, the first output float16, other inputs float32 */
};
enum { MX_AMP_SAFE = 0, MX_AMP_FP32, MX_AMP_WIDEST, MX_AMP_TARGET };

struct mx_op_def {
  const char *name;
  int nin;              /* -1: variadic (at least 1) */
  int nout;             /* -1: from params (nout_param) */
  int nin_min;          /* inputs that must be given (the rest are optional) */
  size_t params_size;
  int nparams;
  const mx_param_def *params;
  uint32_t dtype_mask;  /* bit d set: inputs of dtype d accepted */
  uint32_t flags;       /* MX_OPF_* */
  uint32_t promote;     /* bit i: input i joins the promotion to one common dtype */
  bool promote_float;   /* the common dtype is at least float32 (exp of an int) */
  int naux;             /* the last naux inputs are auxiliary states updated in place */
  int nout_param;       /* nout < 0: index into params of the int param giving it */
  int8_t inplace[4];    /* inplace[k] = i: output k may reuse input i's memory; -1 none */
  int amp;              /* MX_AMP_* */
  const char *const *mxnet_names; /* MXNet's operator names (NULL-terminated) */
  mx_infer_fn infer;
  mx_kernel_entry k[MX_NUM_BACKENDS];
  /* NULL, or the output count as a function of the params when no single int param gives
   * it (topk: ret_typ "both" has two); -1 for params it cannot count. Takes precedence. */
  int (*nout_fn)(const void *params);
  uint32_t shape_only;  /* bit i: input i is read for its shape and dtype only (no layout
                         * conversion at dispatch) */
  /* The op's kernels for storage types other than all-dense (the op table's `stypes`,
   * registered like the dense ones): dispatch runs the first whose input storage types
   * are the call's, whose output storage types fit the out= slots, that applies to the
   * params and that some backend supports; else sparse inputs fall back to dense. */
  int nstk;
  struct mx_stype_kernel *stk;
  bool stk_dense;       /* some entry takes all-dense inputs (embedding_backward's
                           row_sparse gradient): dispatch consults them for dense calls */
  /* NULL, or the input output k may reuse (-1 none) when it depends on the params and the
   * input count (quantized_conv's sum comes after an optional bias). Takes precedence
   * over inplace; read through mx_op_inplace. */
  int (*inplace_fn)(const void *params, int nin, int k);
};

/* Inputs of an op with storage-type kernels (at most) and outputs. */
#define MX_STK_MAX_IN 8
#define MX_STK_MAX_OUT 4
typedef struct mx_stype_kernel {
  uint8_t in[MX_STK_MAX_IN];    /* MX_STYPE_* of each input */
  uint8_t out[MX_STK_MAX_OUT];  /* MX_STYPE_* of each output */
  /* whether this entry serves a call with these params and input descriptors (dot's
   * transpose_a picks the row_sparse result; elementwise ops need equal shapes); NULL:
   * every call (core/ops/sparse.c: mx_stype_applies_<name>) */
  bool (*applies)(const void *params, int nin, const mx_desc *in);
  const char *name;             /* the kernels' base name: mx_<backend>_<name> */
  mx_kernel_entry k[MX_NUM_BACKENDS];
} mx_stype_kernel;
/* Registers backend's kernel of entry i of op's storage-type kernels (the generated
 * registration). MX_EINVAL for a bad op, entry, backend or kernel. registry.c. */
int mx_stype_kernel_register(int op, int i, int backend, const mx_kernel_entry *e);

extern mx_op_def mx_ops[];
extern const int mx_num_ops;
/* Hash of the generated op table text (names, param structs): mx_op_table_hash(). */
extern const uint64_t mx_ops_hash;

/* The op's output count for these params (nout, nout_fn's answer, or the nout_param's
 * value); -1 when the params give none. */
int mx_op_nout(const mx_op_def *def, const void *params);
/* The input (0-based) whose memory output k of a call with these params and nin inputs
 * may take over (op table `inplace` / `inplace_fn`), or -1. */
int mx_op_inplace(const mx_op_def *def, const void *params, int nin, int k);
/* Registers (or replaces) the kernel of op for a backend: the generated registration of
 * libmx's kernels (build/gen/mx_ops_gen.c) and of libmx_cuda's (mx_cuda_gen.c), from the
 * op table's declarations. e is copied; layouts always includes row-major. MX_EINVAL for
 * a bad op, backend or entry. registry.c. */
int mx_kernel_register(int op, int backend, const mx_kernel_entry *e);

/* The thread budget (parallel.c): every kernel that runs more than its own thread takes
 * them from here and gives them back, inline callers of every session and engine
 * workers alike. acquire returns how many of `want` threads (counting the caller) it
 * may run, at least 1; release gives that number back. When fewer than 2 threads are
 * free it returns 1 and takes nothing; release(n <= 1) is a no-op. */
int mx_threads_acquire(int want);
void mx_threads_release(int n);
int mx_threads_available(void);
/* A cap on the teams the calling thread's kernels take (0: none, the budget alone);
 * returns the previous cap. The inference runtime sets its context's thread count
 * around a run. */
int mx_threads_set_local_cap(int n);

/* Every kernel that splits work across the intra-op pool goes through this: below
 * `grain` items per thread it runs inline (no thread hand-off). fn(begin,end,ctx). */
typedef void (*mx_range_fn)(int64_t begin, int64_t end, void *ctx);
void mx_parallel_for(int64_t n, int64_t grain, mx_range_fn fn, void *ctx);
/* Grows the calling thread's OpenMP team to nt threads with all signals blocked (a
 * no-op when it has them); call before a library (oneDNN) opens a region of nt
 * threads on this thread. */
void mx_parallel_start_team(int nt);

/* ---- random (random.c) ---- */
/* Counter-based: value i of a draw is mx_random_bits(seed, first + i), where
 * first comes from mx_random_reserve(n). Reproducible for any thread count. */
uint64_t mx_random_reserve(uint64_t n, uint64_t *seed);
uint64_t mx_random_next(void);
static inline uint64_t mx_random_bits(uint64_t seed, uint64_t ctr) {
  /* splitmix64 of a seed-keyed counter: passes BigCrush, cheap, stateless */
  uint64_t z = ctr * 0x9e3779b97f4a7c15ULL + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  z += seed ^ 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* Uniform double in [0, 1) from 53 random bits. */
static inline double mx_random_unit(uint64_t bits) {
  return (double)(bits >> 11) * (1.0 / 9007199254740992.0);
}

#ifdef __cplusplus
}
#endif
#endif /* MX_INTERNAL_H */
