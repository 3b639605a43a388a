/* gearbox C API: embed gearbox in any language with a C FFI.
 *
 * Stable ABI: opaque handles, plain C types, no exceptions. Every fallible call returns a
 * gbx_status: 0 (GBX_OK) or a gearbox error code from the catalogue (docs/errors.md; e.g.
 * 4001 INPUT_MISSING). The message of the last failure on the calling thread is
 * gbx_last_error_message(); `gearbox explain CODE` prints the cause and fix.
 *
 * Ownership: every handle a gbx_*_create / gbx_*_load / output call returns belongs to the
 * caller and is released with the matching gbx_*_destroy (destroy on NULL is a no-op).
 * Handles may be used from several threads; a model may be executed concurrently.
 *
 *   gbx_context ctx; gbx_model model;
 *   gbx_context_create(&ctx);
 *   if (gbx_model_load_file(ctx, "model.onnx", &model)) puts(gbx_last_error_message());
 */
#ifndef GEARBOX_GEARBOX_H_
#define GEARBOX_GEARBOX_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GBX_API __declspec(dllimport)
#else
#define GBX_API __attribute__((visibility("default")))
#endif

/* Bumped only when the ABI changes incompatibly. */
#define GBX_API_VERSION 1

typedef int32_t gbx_status;
#define GBX_OK 0

typedef struct gbx_context_s* gbx_context;         /* a device selection plus its resources */
typedef struct gbx_model_s* gbx_model;             /* a loaded model, ready to execute */
typedef struct gbx_tensor_s* gbx_tensor;           /* a dense tensor (owns or shares its buffer) */
typedef struct gbx_stream_s* gbx_stream;           /* an in-order queue of executions */
typedef struct gbx_event_s* gbx_event;             /* completion of one queued execution */
typedef struct gbx_run_options_s* gbx_run_options; /* a timeout and a terminate flag for executions */

typedef enum gbx_device_kind { GBX_DEVICE_CPU = 0, GBX_DEVICE_CUDA = 1 } gbx_device_kind;

/* Element types, numbered as in ONNX's TensorProto.DataType. */
typedef enum gbx_dtype {
  GBX_DTYPE_UNDEFINED = 0,
  GBX_DTYPE_FLOAT32 = 1,
  GBX_DTYPE_UINT8 = 2,
  GBX_DTYPE_INT8 = 3,
  GBX_DTYPE_UINT16 = 4,
  GBX_DTYPE_INT16 = 5,
  GBX_DTYPE_INT32 = 6,
  GBX_DTYPE_INT64 = 7,
  GBX_DTYPE_BOOL = 9,
  GBX_DTYPE_FLOAT16 = 10,
  GBX_DTYPE_FLOAT64 = 11,
  GBX_DTYPE_UINT32 = 12,
  GBX_DTYPE_UINT64 = 13,
  GBX_DTYPE_BFLOAT16 = 16
} gbx_dtype;

/* A model input or output as the model declares it. Pointers stay valid while the model
 * lives. A symbolic dimension is -1 in dims and named in dim_names[i] ("" otherwise). */
typedef struct gbx_io_desc {
  const char* name;
  int32_t dtype; /* gbx_dtype */
  int32_t rank;  /* -1 when the rank is unknown */
  const int64_t* dims;
  const char* const* dim_names;
} gbx_io_desc;

/* ---- library and errors ---------------------------------------------------------- */
GBX_API const char* gbx_version(void); /* "0.1.0" */
GBX_API int32_t gbx_api_version(void); /* GBX_API_VERSION of the loaded library */
/* The last failure on this thread ("" when none): "GBX-E<code> <NAME>: <message>". */
GBX_API const char* gbx_last_error_message(void);
GBX_API gbx_status gbx_last_error_code(void);

/* ---- devices ---------------------------------------------------------------------- */
GBX_API gbx_status gbx_device_count(gbx_device_kind kind, int32_t* count);
/* Selects the device new contexts on this thread use (default: CPU 0). 7006
 * DEVICE_NOT_FOUND when there is no such device. */
GBX_API gbx_status gbx_device_set(gbx_device_kind kind, int32_t index);
/* Returns this thread's selection to the default device (CPU 0). */
GBX_API gbx_status gbx_device_reset(void);
/* Pool statistics of the current device, in bytes. Any pointer may be NULL. */
GBX_API gbx_status gbx_device_memory(size_t* capacity, size_t* used, size_t* largest_free, double* fragmentation);

/* ---- contexts and models ----------------------------------------------------------- */
GBX_API gbx_status gbx_context_create(gbx_context* out);
GBX_API void gbx_context_destroy(gbx_context ctx);
/* Custom-op plugins for the models this context loads from now on (include/gearbox/plugin.h):
 * a colon-separated list of folders (every .so in them) and plugin libraries, searched before
 * GEARBOX_OP_PATH. NULL or "": GEARBOX_OP_PATH only. A plugin's load error is the load's. */
GBX_API gbx_status gbx_context_set_op_path(gbx_context ctx, const char* op_path);
GBX_API gbx_status gbx_model_load_file(gbx_context ctx, const char* path, gbx_model* out);
GBX_API gbx_status gbx_model_load_memory(gbx_context ctx, const void* data, size_t size, gbx_model* out);
GBX_API void gbx_model_destroy(gbx_model model);
GBX_API gbx_status gbx_model_input_count(gbx_model model, size_t* count);
GBX_API gbx_status gbx_model_output_count(gbx_model model, size_t* count);
GBX_API gbx_status gbx_model_input(gbx_model model, size_t index, gbx_io_desc* out);
GBX_API gbx_status gbx_model_output(gbx_model model, size_t index, gbx_io_desc* out);

/* ---- tensors ----------------------------------------------------------------------- */
/* A zero-filled tensor. */
GBX_API gbx_status gbx_tensor_create(int32_t dtype, const int64_t* dims, size_t rank, gbx_tensor* out);
/* A tensor holding a copy of `bytes` bytes at data (bytes must equal the tensor's size). */
GBX_API gbx_status gbx_tensor_create_copy(int32_t dtype, const int64_t* dims, size_t rank, const void* data,
                                          size_t bytes, gbx_tensor* out);
GBX_API void gbx_tensor_destroy(gbx_tensor tensor);
GBX_API gbx_status gbx_tensor_dtype(gbx_tensor tensor, int32_t* dtype);
/* Writes up to `capacity` dims and the rank. */
GBX_API gbx_status gbx_tensor_shape(gbx_tensor tensor, int64_t* dims, size_t capacity, size_t* rank);
/* The tensor's buffer; writable, so inputs can be filled in place before execution. */
GBX_API gbx_status gbx_tensor_data(gbx_tensor tensor, void** data, size_t* bytes);

/* ---- execution ----------------------------------------------------------------------- */
/* Runs the model on named inputs and returns new output tensors in the model's output order
 * (outputs must hold n_outputs == the model's output count handles). */
GBX_API gbx_status gbx_execute(gbx_model model, const char* const* input_names, const gbx_tensor* inputs,
                               size_t n_inputs, gbx_tensor* outputs, size_t n_outputs);

/* ---- run options: stopping an execution (like ONNX Runtime's RunOptions.terminate) ---- */
/* Options an execution may be given (gbx_execute_with_options, gbx_execute_async_with_options).
 * An execution checks them before every node, in every Loop/Scan iteration and in long
 * kernels' outer loops; one that stops returns 4007 RUN_CANCELLED or 4008
 * RUN_DEADLINE_EXCEEDED, produces no outputs, and leaves the model ready for the next run. */
GBX_API gbx_status gbx_run_options_create(gbx_run_options* out);
/* May be destroyed while executions it was given still run: they keep its flag. */
GBX_API void gbx_run_options_destroy(gbx_run_options options);
/* Each execution given these options stops with RUN_DEADLINE_EXCEEDED once `seconds` have
 * passed since its gbx_execute*_with_options call (queue time included); 0: no limit (the
 * default). Negative or not finite: API_INVALID_ARGUMENT. */
GBX_API gbx_status gbx_run_options_set_timeout(gbx_run_options options, double seconds);
/* terminate != 0 sets the flag: every execution given these options, running or started later,
 * stops with RUN_CANCELLED at its next check; 0 clears it. Safe from any thread. */
GBX_API gbx_status gbx_run_options_set_terminate(gbx_run_options options, int32_t terminate);
/* gbx_execute / gbx_execute_async with run options (NULL: none, the same as without). */
GBX_API gbx_status gbx_execute_with_options(gbx_model model, const char* const* input_names, const gbx_tensor* inputs,
                                            size_t n_inputs, gbx_tensor* outputs, size_t n_outputs,
                                            gbx_run_options options);
GBX_API gbx_status gbx_execute_async_with_options(gbx_model model, const char* const* input_names,
                                                  const gbx_tensor* inputs, size_t n_inputs, gbx_stream stream,
                                                  gbx_run_options options, gbx_event* event);

/* A stream runs queued executions in order on its own worker thread; several streams run
 * concurrently. Destroying a stream waits for its queued work. */
GBX_API gbx_status gbx_stream_create(gbx_context ctx, gbx_stream* out);
GBX_API void gbx_stream_destroy(gbx_stream stream);
GBX_API gbx_status gbx_stream_synchronize(gbx_stream stream);
/* Queues an execution and returns at once. The inputs are captured (later changes to their
 * buffers do not affect it). The event reports completion and holds the outputs. */
GBX_API gbx_status gbx_execute_async(gbx_model model, const char* const* input_names, const gbx_tensor* inputs,
                                     size_t n_inputs, gbx_stream stream, gbx_event* event);
/* Blocks until the execution finishes; returns its status. */
GBX_API gbx_status gbx_event_wait(gbx_event event);
/* *done = 1 when finished, 0 otherwise; never blocks. */
GBX_API gbx_status gbx_event_query(gbx_event event, int32_t* done);
/* After a successful wait: the number of outputs. */
GBX_API gbx_status gbx_event_output_count(gbx_event event, size_t* count);
/* After a successful wait: output `index` (a new handle the caller destroys). */
GBX_API gbx_status gbx_event_output(gbx_event event, size_t index, gbx_tensor* out);
GBX_API void gbx_event_destroy(gbx_event event);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GEARBOX_GEARBOX_H_ */
