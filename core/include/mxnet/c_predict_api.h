/* mxnet/c_predict_api.h — MXNet 1.9's C predict API, implemented by luamx's inference
 * runtime (core/src/runtime_predict.c over mx_runtime.h). Every function of MXNet
 * 1.9.1's header is declared here with the same signature and behaves as MXNet's, so a
 * program written for MXNet's predict API builds against luamx by changing only the
 * compiler's include and link flags (`pkg-config --cflags --libs luamx`).
 * docs/c-api.md, "MXNet's C predict API", lists where the behaviour differs (stricter
 * checks, no GPU).
 *
 * Conventions: every function returns 0 on success and -1 on failure, with the reason in
 * MXGetLastError() (thread-local). A PredictorHandle is used by one thread at a time;
 * distinct handles, including those of MXPredCreateMultiThread and MXPredReshape, which
 * share one immutable model, run concurrently on any threads. Nothing aborts on bad
 * input. Handles are owned by the caller and freed with MXPredFree / MXNDListFree.
 */
#ifndef MXNET_C_PREDICT_API_H_
#define MXNET_C_PREDICT_API_H_

#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MXNET_DLL
#define MXNET_DLL
#endif

typedef uint32_t mx_uint;
typedef float mx_float;
/* A predictor: one execution context of a model (mx_rt_ctx) and the model it holds. */
typedef void *PredictorHandle;
/* A list of arrays loaded from an MXNet .params file (MXNDListCreate). */
typedef void *NDListHandle;
/* In PredMonitorCallback: the array (an mx_tensor*, row-major, valid during the call;
 * mx.h's mx_tensor_* functions read it when the full libmx is linked). */
typedef void *NDArrayHandle;
typedef void (*PredMonitorCallback)(const char *, NDArrayHandle, void *);

/* The calling thread's last error message ("" if none). Borrowed: valid until the next
 * failing call on this thread. */
MXNET_DLL const char *MXGetLastError(void);

/* Creates a predictor from the symbol JSON text and the bytes of an MXNet .params file
 * (arrays named "arg:<name>" / "aux:<name>"; others are ignored, as in MXNet) for the
 * inputs input_keys[0..num_input_nodes) with shapes input_shape_data[indptr[i] ..
 * indptr[i+1]), float32. dev_type 1 (cpu), dev_id 0. Shapes are inferred and the graph
 * optimised and planned here; *out is a new handle (MXPredFree). Fails naming the input,
 * the node or the parameter at fault: an unknown input key, a variable with neither a
 * parameter nor an input, shapes that do not fit, dev_type 2. */
MXNET_DLL int MXPredCreate(const char *symbol_json_str, const void *param_bytes, int param_size,
                           int dev_type, int dev_id, uint32_t num_input_nodes,
                           const char **input_keys, const uint32_t *input_shape_indptr,
                           const uint32_t *input_shape_data, PredictorHandle *out);

/* MXPredCreate with dtypes: provided_arg_dtypes[i] (MXNet's type codes) for the input
 * or argument named provided_arg_dtype_names[i] (parameters keep their file's dtype). */
MXNET_DLL int MXPredCreateEx(const char *symbol_json_str, const void *param_bytes,
                             int param_size, int dev_type, int dev_id,
                             const uint32_t num_input_nodes, const char **input_keys,
                             const uint32_t *input_shape_indptr,
                             const uint32_t *input_shape_data,
                             const uint32_t num_provided_arg_dtypes,
                             const char **provided_arg_dtype_names,
                             const int *provided_arg_dtypes, PredictorHandle *out);

/* MXPredCreate whose outputs are the internal outputs output_keys[0..num_output_nodes):
 * each key names a node, whose output "<key>_output" is taken (MXNet's rule; a key that
 * already ends in "_output" or "_output<k>" is taken as it is). */
MXNET_DLL int MXPredCreatePartialOut(const char *symbol_json_str, const void *param_bytes,
                                     int param_size, int dev_type, int dev_id,
                                     uint32_t num_input_nodes, const char **input_keys,
                                     const uint32_t *input_shape_indptr,
                                     const uint32_t *input_shape_data,
                                     uint32_t num_output_nodes, const char **output_keys,
                                     PredictorHandle *out);

/* num_threads predictors into out[0..num_threads) sharing one model (its parameters are
 * held once): one per thread, each used by its own thread. (MXNet requires
 * MXNET_ENGINE_TYPE=NaiveEngine for this; luamx's runs are synchronous and need
 * nothing.) */
MXNET_DLL int MXPredCreateMultiThread(const char *symbol_json_str, const void *param_bytes,
                                      int param_size, int dev_type, int dev_id,
                                      uint32_t num_input_nodes, const char **input_keys,
                                      const uint32_t *input_shape_indptr,
                                      const uint32_t *input_shape_data, int num_threads,
                                      PredictorHandle *out);

/* A new predictor (*out) sharing handle's model with the inputs named in input_keys at
 * new shapes (the others keep handle's shapes and get a copy of its current data);
 * handle stays valid and unchanged. Parameters' shapes must not change. */
MXNET_DLL int MXPredReshape(uint32_t num_input_nodes, const char **input_keys,
                            const uint32_t *input_shape_indptr,
                            const uint32_t *input_shape_data, PredictorHandle handle,
                            PredictorHandle *out);

/* Output index's shape: *shape_data points into the handle (valid until its next
 * MXPred* call), *shape_ndim its length. */
MXNET_DLL int MXPredGetOutputShape(PredictorHandle handle, uint32_t index,
                                   uint32_t **shape_data, uint32_t *shape_ndim);

/* Output out_index's dtype code into *out_dtype. (MXNet 1.9 writes out_dtype[out_index],
 * past a single int for any index but 0; luamx writes *out_dtype.) */
MXNET_DLL int MXPredGetOutputType(PredictorHandle handle, uint32_t out_index, int *out_dtype);

/* Copies size elements (exactly the input's element count) of the input called key from
 * data, in the input's dtype (float32 unless MXPredCreateEx said otherwise). */
MXNET_DLL int MXPredSetInput(PredictorHandle handle, const char *key, const float *data,
                             uint32_t size);

/* Runs the model on the current inputs, synchronously. */
MXNET_DLL int MXPredForward(PredictorHandle handle);

/* Runs operator node `step` of the optimised graph only; *step_left gets the nodes left
 * after it. Call with step = 0, 1, ... until *step_left is 0 for a whole forward. */
MXNET_DLL int MXPredPartialForward(PredictorHandle handle, int step, int *step_left);

/* Copies output index (size = its element count exactly) into data. */
MXNET_DLL int MXPredGetOutput(PredictorHandle handle, uint32_t index, float *data,
                              uint32_t size);

/* Frees the predictor (its model goes with the last predictor using it). NULL: no-op. */
MXNET_DLL int MXPredFree(PredictorHandle handle);

/* Loads an MXNet .params file's bytes (a mean image) as a list; *out_length arrays. */
MXNET_DLL int MXNDListCreate(const char *nd_file_bytes, int nd_file_size, NDListHandle *out,
                             uint32_t *out_length);

/* Array index of the list: its key ("" for a list file), data (converted to float32),
 * shape and ndim; pointers valid until MXNDListFree (the shape until the next Get). */
MXNET_DLL int MXNDListGet(NDListHandle handle, uint32_t index, const char **out_key,
                          const float **out_data, const uint32_t **out_shape,
                          uint32_t *out_ndim);

/* After each operator node of a forward, callback(name, array, callback_handle) for each
 * output ("<node>_output", "<node>_output<k>"); monitor_all: for each input first
 * (variables by their names). NULL callback: off. Monitored runs copy (debugging). */
MXNET_DLL int MXPredSetMonitorCallback(PredictorHandle handle, PredMonitorCallback callback,
                                       void *callback_handle, bool monitor_all);

/* Frees the list. NULL: no-op. */
MXNET_DLL int MXNDListFree(NDListHandle handle);

#ifdef __cplusplus
}
#endif

#endif /* MXNET_C_PREDICT_API_H_ */
