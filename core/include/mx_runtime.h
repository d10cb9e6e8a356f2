/* mx_runtime.h — luamx's inference runtime: run an exported model from C with no Lua.
 *
 * A MODEL is a symbol JSON (MXNet 1.x, luamx's or MXNet's `export`) and its parameters
 * (`.params` as both write, `.npy`/`.npz`), optimised once for the input signature it was
 * created with. It is immutable: any number of threads may use one model at once.
 * A CONTEXT is one thread's execution state for a model: its input and output buffers and
 * the planned intermediate buffers, allocated when the context is made (or reshaped), so
 * a warm mx_rt_run allocates nothing of its own. One thread uses a context at a time;
 * N threads run N contexts of one model concurrently, and get bitwise the outputs one
 * thread would.
 *
 * Conventions (every function):
 *  - Fallible calls return MX_RT_OK (0) or a negative MX_RT_E* code (the same values as
 *    mx.h's MX_E*), and leave a message in a thread-local buffer (mx_rt_last_error) that
 *    names what was wrong: the input, the shapes, the graph node, the file. Bad input
 *    never aborts the process.
 *  - Handles come back through out-pointers; the caller owns them and frees them with
 *    the matching _free. Strings and arrays passed in are copied; strings returned are
 *    borrowed from the handle and valid until it is freed (or reshaped, for shapes).
 *  - Shapes are int64 dims, 0-based indices, dtype codes are MXNet's (MX_RT_F32 = 0...).
 *  - Nothing here calls into Lua or needs a Lua state; the library may be the
 *    inference-only build (docs/embedding.md, "The inference runtime").
 */
#ifndef MX_RUNTIME_H
#define MX_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (equal to mx.h's MX_OK / MX_E*). */
enum {
  MX_RT_OK = 0,
  MX_RT_EINVAL = -1,  /* bad argument: unknown input name, wrong shape or size */
  MX_RT_ENOMEM = -2,  /* out of memory */
  MX_RT_EIO = -3,     /* a file could not be read */
  MX_RT_EFORMAT = -4, /* a file's content is malformed (symbol JSON, params) */
  MX_RT_EDEVICE = -5, /* the device is missing or not supported by the runtime */
  MX_RT_EASYNC = -6   /* (not returned by the runtime: runs are synchronous) */
};

/* dtype codes (MXNet's type_flag). */
enum {
  MX_RT_F32 = 0, MX_RT_F64 = 1, MX_RT_F16 = 2, MX_RT_U8 = 3, MX_RT_I32 = 4,
  MX_RT_I8 = 5, MX_RT_I64 = 6, MX_RT_BOOL = 7, MX_RT_BF16 = 12
};

/* Optimisation levels: the graph passes run when the model is made (docs/symbol.md). */
enum {
  MX_RT_OPT_NONE = 0,   /* the graph as written */
  MX_RT_OPT_BASIC = 1,  /* dead code, common subexpressions, constant folding */
  MX_RT_OPT_ALL = 2     /* + BatchNorm folded into the convolution before it, fused
                         *   elementwise chains (the default) */
};

#define MX_RT_MAX_DIM 8

/* How a model is made. Initialise with mx_rt_options_init, then set what differs. */
typedef struct mx_rt_options {
  int threads;          /* intra-op threads one run may use (0: the process budget,
                         * mx_set_num_threads / MX_NUM_THREADS, shared by every run);
                         * 1 for one context per core */
  int dev_type, dev_id; /* 1 = cpu (the only device the runtime runs on today), 0 */
  int opt_level;        /* MX_RT_OPT_* */
  int allow_reshape;    /* 1: contexts may change input shapes (mx_rt_ctx_reshape);
                         * 0: fixed shapes, reshape is MX_RT_EINVAL */
  int noutputs;         /* 0: the symbol's outputs; else these internal outputs ...  */
  const char *const *outputs; /* ... by name: a node ("fc1", its first output), or an
                         * output as MXNet lists it ("fc1_output", "bn_output1"):
                         * MXNet's MXPredCreatePartialOut */
} mx_rt_options;
void mx_rt_options_init(mx_rt_options *opt);

/* One model input: a variable of the symbol that the caller feeds (not a parameter).
 * dtype -1: float32. shape: ndim dims, each >= 0. */
typedef struct mx_rt_input {
  const char *name;
  int ndim;
  const int64_t *shape;
  int dtype;
} mx_rt_input;

typedef struct mx_rt_model mx_rt_model;
typedef struct mx_rt_ctx mx_rt_ctx;

/* ---- models ---------------------------------------------------------------------
 * Made from the symbol JSON and the parameters, given as files or as bytes in memory
 * (params NULL / 0 bytes: no parameter file). Parameters are matched to the symbol's
 * variables by name, with or without MXNet's "arg:" / "aux:" prefix; those the symbol
 * does not use are ignored. Every variable must be an input or have a parameter:
 * otherwise MX_RT_EINVAL naming it. Shapes and dtypes are inferred for the inputs given
 * (MX_RT_EINVAL naming the node where they conflict), then the passes of opt_level run.
 * opt NULL: the defaults. The model keeps its own copies of everything passed in.
 * Thread-safe: a model is read-only once made; distinct models are independent. */
int mx_rt_model_load(const char *symbol_path, const char *params_path, int ninputs,
                     const mx_rt_input *inputs, const mx_rt_options *opt, mx_rt_model **out);
int mx_rt_model_from_memory(const char *symbol_json, const void *params, size_t params_len,
                            int ninputs, const mx_rt_input *inputs, const mx_rt_options *opt,
                            mx_rt_model **out);
/* The same from an ONNX model (docs/onnx.md: the operators and attributes the importer
 * takes): its initializers are the parameters, the inputs named here its graph inputs
 * (a dim the file leaves symbolic, such as the batch, gets its size from here).
 * MX_RT_EFORMAT for a file that is not an ONNX model, MX_RT_EINVAL naming the node for
 * what the importer cannot express. */
int mx_rt_model_load_onnx(const char *path, int ninputs, const mx_rt_input *inputs,
                          const mx_rt_options *opt, mx_rt_model **out);
/* Drops the caller's reference. The model lives on while contexts made from it do (each
 * holds a reference): free it whenever convenient, on any thread. NULL is a no-op. */
void mx_rt_model_free(mx_rt_model *m);
/* Inputs and outputs as the model was made: names (borrowed), shapes (ndim returned,
 * dims into shape[MX_RT_MAX_DIM]) and dtypes; -1 / NULL for a bad index. */
int mx_rt_model_num_inputs(const mx_rt_model *m);
int mx_rt_model_num_outputs(const mx_rt_model *m);
const char *mx_rt_model_input_name(const mx_rt_model *m, int k);
const char *mx_rt_model_output_name(const mx_rt_model *m, int k);
/* Operator nodes of the optimised graph (what mx_rt_run_steps counts). */
int mx_rt_model_num_nodes(const mx_rt_model *m);

/* ---- contexts -------------------------------------------------------------------
 * A context for m at the model's input shapes: its input buffers (zeroed), output
 * buffers and planned intermediates are allocated here; the first run also warms the
 * kernels' caches (oneDNN primitives). Thread-safe with respect to other contexts and
 * to m (several threads may make contexts of one model at once). A context is used by
 * one thread at a time (any thread, not necessarily the one that made it). */
int mx_rt_ctx_new(mx_rt_model *m, mx_rt_ctx **out);
/* Frees the context and its buffers, and drops its model reference. NULL is a no-op. */
void mx_rt_ctx_free(mx_rt_ctx *c);
/* New shapes for some inputs (by name; the others keep theirs): infers, re-plans and
 * reallocates the context's buffers. Bound buffers are unbound. On failure the context
 * is unchanged (MX_RT_EINVAL naming the input and the node that rejects the shape; a
 * model made with allow_reshape = 0 refuses). */
int mx_rt_ctx_reshape(mx_rt_ctx *c, int ninputs, const mx_rt_input *inputs);

/* Index of the input / output called name (-1 with MX_RT_EINVAL set if none). Outputs
 * answer to the names mx_rt_model_output_name gives. */
int mx_rt_input_index(const mx_rt_ctx *c, const char *name);
int mx_rt_output_index(const mx_rt_ctx *c, const char *name);
int mx_rt_num_inputs(const mx_rt_ctx *c);
int mx_rt_num_outputs(const mx_rt_ctx *c);
/* Shape of input / output k at the context's current shapes: returns ndim (dims into
 * shape[MX_RT_MAX_DIM], which may be NULL), *dtype (may be NULL) its dtype; negative on
 * a bad index. */
int mx_rt_input_shape(const mx_rt_ctx *c, int k, int64_t *shape, int *dtype);
int mx_rt_output_shape(const mx_rt_ctx *c, int k, int64_t *shape, int *dtype);
/* Bytes of input / output k (elements times the dtype's size); 0 on a bad index. */
size_t mx_rt_input_bytes(const mx_rt_ctx *c, int k);
size_t mx_rt_output_bytes(const mx_rt_ctx *c, int k);

/* Copies nbytes (exactly mx_rt_input_bytes) of data, in the input's dtype, row-major,
 * into input k's buffer. A bound input gets unbound first. */
int mx_rt_set_input(mx_rt_ctx *c, int k, const void *data, size_t nbytes);
/* Zero-copy: runs read input k straight from data (nbytes exactly the input's bytes)
 * until it is bound again, unbound (data NULL) or the context is reshaped. data stays
 * owned by the caller, must stay valid and unchanged while a run reads it, and be aligned
 * to its elements (4 bytes for float32: MX_RT_EINVAL otherwise; 64 is fastest). */
int mx_rt_bind_input(mx_rt_ctx *c, int k, const void *data, size_t nbytes);
/* Zero-copy: runs write output k straight into data (nbytes exactly the output's
 * bytes, aligned as for bind_input) until it is bound again, unbound (NULL) or reshaped. */
int mx_rt_bind_output(mx_rt_ctx *c, int k, void *data, size_t nbytes);
/* Runs the model on the current inputs, synchronously on the calling thread (kernels
 * may use the intra-op threads of opt.threads). A kernel failing is MX_RT_EINVAL (or
 * what it returned) naming the graph node; outputs are then unspecified. */
int mx_rt_run(mx_rt_ctx *c);
/* Copies output k (nbytes exactly mx_rt_output_bytes) into data. */
int mx_rt_get_output(const mx_rt_ctx *c, int k, void *data, size_t nbytes);
/* Output k's buffer (the bound one if bound): valid until the next run, reshape, bind
 * or free of c; NULL on a bad index. */
const void *mx_rt_output_data(const mx_rt_ctx *c, int k);

/* Runs operator nodes [first, first + n) of the optimised graph only: a run split in
 * pieces (MXNet's PartialForward). Nodes must be run in order from 0 for the outputs to
 * be right; n may run past the end (it stops there). */
int mx_rt_run_steps(mx_rt_ctx *c, int first, int n);
/* Called after each operator node of a run, once per output of the node, with the
 * output's name as MXNet lists it ("conv0_output", "bn0_output1") and its values
 * (row-major, dtype and shape as given; valid during the call only); NULL stops it. For
 * debugging: monitored runs copy and allocate. */
typedef void (*mx_rt_monitor_fn)(const char *name, int ndim, const int64_t *shape, int dtype,
                                 const void *data, void *user);
int mx_rt_set_monitor(mx_rt_ctx *c, mx_rt_monitor_fn fn, void *user);

/* Bytes of the context's planned intermediate buffers (one block, shared by entries
 * whose lifetimes do not overlap; inputs, outputs and the model's parameters excluded). */
int64_t mx_rt_ctx_planned_bytes(const mx_rt_ctx *c);

/* The calling thread's last error message ("" if none). Borrowed: valid until the next
 * failing call on this thread. */
const char *mx_rt_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* MX_RUNTIME_H */
