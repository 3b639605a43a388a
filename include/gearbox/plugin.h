/* gearbox custom-op plugin ABI: add operators to gearbox from a shared library, without
 * rebuilding gearbox (docs/custom_ops.md).
 *
 * A plugin is a shared library that exports one C function, gbx_plugin_get(), returning a
 * descriptor (gbx_plugin) that lists its ops. gearbox dlopen()s every library on the op path
 * (GEARBOX_OP_PATH, --op-path, SessionOptions::op_path, gbx_context_set_op_path) when a
 * session is created, once per process per library, and runs each op's kernel on an engine
 * named "plugin.<name>" after its built-in engines.
 *
 * The ABI is plain C: plain structs, function pointers, no C++ types cross it and the plugin
 * calls nothing in gearbox (what it may ask of gearbox comes as function pointers in
 * gbx_plugin_node). A plugin built with another compiler or against another gearbox loads
 * as long as its abi_version equals the GBX_PLUGIN_ABI_VERSION of the gearbox loading it.
 *
 *   static const gbx_plugin kPlugin = {GBX_PLUGIN_ABI_VERSION, "myops", "1.0", NULL, 1, kOps};
 *   GBX_PLUGIN_EXPORT const gbx_plugin* gbx_plugin_get(void) { return &kPlugin; }
 *
 * Every function a plugin provides returns GBX_PLUGIN_OK (0) on success; anything else is a
 * failure, whose message the plugin gives with node->set_error (or init's error buffer). The
 * functions are called concurrently from several threads (runs of several sessions) and must
 * not keep the pointers they are given beyond the call.
 */
#ifndef GEARBOX_PLUGIN_H_
#define GEARBOX_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever any struct or function type below changes. */
#define GBX_PLUGIN_ABI_VERSION 1

/* The entry point's name, for dlsym. */
#define GBX_PLUGIN_ENTRY_POINT "gbx_plugin_get"

#if defined(_WIN32)
#define GBX_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GBX_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#define GBX_PLUGIN_OK 0
#define GBX_PLUGIN_ERROR 1

/* Most dims a tensor of a plugin op may have. */
#define GBX_PLUGIN_MAX_RANK 8

/* Element types, numbered as in ONNX's TensorProto.DataType (and gearbox.h's gbx_dtype). */
#define GBX_PLUGIN_ANY 0 /* in a dtype list: any dtype */
#define GBX_PLUGIN_F32 1
#define GBX_PLUGIN_U8 2
#define GBX_PLUGIN_I8 3
#define GBX_PLUGIN_U16 4
#define GBX_PLUGIN_I16 5
#define GBX_PLUGIN_I32 6
#define GBX_PLUGIN_I64 7
#define GBX_PLUGIN_BOOL 9
#define GBX_PLUGIN_F16 10
#define GBX_PLUGIN_F64 11
#define GBX_PLUGIN_U32 12
#define GBX_PLUGIN_U64 13
#define GBX_PLUGIN_BF16 16

/* A tensor's type and shape (what shape, supports and cost functions see). */
typedef struct gbx_plugin_shape {
  int32_t dtype; /* GBX_PLUGIN_F32, ... */
  int32_t rank;  /* 0..GBX_PLUGIN_MAX_RANK */
  int64_t dims[GBX_PLUGIN_MAX_RANK];
} gbx_plugin_shape;

/* A dense, contiguous, row-major tensor a kernel reads (inputs: never write through `data`)
 * or writes (outputs: gearbox allocated it with the dims the shape function promised; the
 * kernel fills every element and changes neither dims nor data). */
typedef struct gbx_plugin_tensor {
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  void* data;
} gbx_plugin_tensor;

/* The node a function is called for: its identity, its attributes, and where to put an error
 * message. Valid during the call only. */
typedef struct gbx_plugin_node {
  const char* name;    /* the node's name in the model */
  const char* domain;  /* the op's domain ("com.example") */
  const char* op_type; /* "SwiGLU" */
  int32_t opset;       /* the model's opset for the domain */
  int32_t num_inputs;
  int32_t num_outputs;
  void* host; /* gearbox's; pass it back untouched through the node */
  /* Attribute look-ups: 1 and *out set when the node has the attribute with that type, else 0. */
  int32_t (*attr_int)(const struct gbx_plugin_node* node, const char* name, int64_t* out);
  int32_t (*attr_float)(const struct gbx_plugin_node* node, const char* name, float* out);
  /* *out stays valid during the call. */
  int32_t (*attr_string)(const struct gbx_plugin_node* node, const char* name, const char** out);
  /* The message gearbox reports (naming node and plugin) when the function returns an error. */
  void (*set_error)(const struct gbx_plugin_node* node, const char* message);
} gbx_plugin_node;

/* The outputs' dtypes and dims from the inputs' (required). Called before every kernel call
 * with concrete dims; gearbox allocates the outputs with what it returns, and checks after the
 * kernel that it kept to it. */
typedef int32_t (*gbx_plugin_shape_fn)(const gbx_plugin_node* node, const gbx_plugin_shape* inputs, int32_t num_inputs,
                                       gbx_plugin_shape* outputs, int32_t num_outputs);

/* Whether the kernel handles these inputs (optional; NULL: every case its dtype lists admit).
 * Returns 1 to accept, 0 to refuse (a reason via set_error shows in the partition report). */
typedef int32_t (*gbx_plugin_supports_fn)(const gbx_plugin_node* node, const gbx_plugin_shape* inputs,
                                          int32_t num_inputs);

/* Computes the outputs (required). */
typedef int32_t (*gbx_plugin_kernel_fn)(const gbx_plugin_node* node, const gbx_plugin_tensor* inputs,
                                        int32_t num_inputs, gbx_plugin_tensor* outputs, int32_t num_outputs);

/* The profiler's cost of one call (optional; NULL: one FLOP per output element and the bytes
 * of the tensors read and written). Either field may be left negative for that default. */
typedef struct gbx_plugin_cost {
  double flops;
  double bytes; /* bytes moved to and from memory, read and written */
} gbx_plugin_cost;
typedef void (*gbx_plugin_cost_fn)(const gbx_plugin_node* node, const gbx_plugin_shape* inputs, int32_t num_inputs,
                                   const gbx_plugin_shape* outputs, int32_t num_outputs, gbx_plugin_cost* cost);

/* One operator. */
typedef struct gbx_plugin_op {
  const char* domain;    /* e.g. "com.example"; "" is ONNX's own domain */
  const char* op_type;   /* e.g. "SwiGLU" */
  int32_t since_version; /* opsets of `domain` served: [since_version, end_version] */
  int32_t end_version;   /* 0: every later opset too */
  int32_t num_inputs;    /* the node's input and output counts (fixed) */
  int32_t num_outputs;
  /* Per input / output, a list of the dtypes accepted / written, ended by 0; a NULL list or
   * NULL array: any dtype. */
  const int32_t* const* input_dtypes;
  const int32_t* const* output_dtypes;
  gbx_plugin_shape_fn shape;
  gbx_plugin_supports_fn supports; /* optional */
  gbx_plugin_kernel_fn kernel;
  gbx_plugin_cost_fn cost; /* optional */
} gbx_plugin_op;

/* What gbx_plugin_get returns; must stay valid while the library is loaded (a static). */
typedef struct gbx_plugin {
  uint32_t abi_version; /* GBX_PLUGIN_ABI_VERSION the plugin was built with; keep it first */
  const char* name;     /* [A-Za-z0-9_-]+: the engine is "plugin.<name>" */
  const char* version;  /* the plugin's own version, for reports and .gbm records */
  /* Called once, after the library is loaded and before any op is registered (optional).
   * Non-zero: the plugin is not used; the message goes in error[0..error_size). */
  int32_t (*init)(char* error, size_t error_size);
  int32_t num_ops;
  const gbx_plugin_op* ops;
} gbx_plugin;

typedef const gbx_plugin* (*gbx_plugin_get_fn)(void);

/* The entry point a plugin defines (GBX_PLUGIN_EXPORT it). */
GBX_PLUGIN_EXPORT const gbx_plugin* gbx_plugin_get(void);

#ifdef __cplusplus
}
#endif

#endif /* GEARBOX_PLUGIN_H_ */
