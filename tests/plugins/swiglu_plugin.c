/* A test plugin (plain C, built against include/gearbox/plugin.h only): com.example.SwiGLU.
 *
 *   y[..., j] = silu(x[..., j]) * x[..., H + j],  j < H,  x's last dim 2H,  silu(a) = a / (1 + e^-a)
 *
 * for float32 and float64 x of any rank >= 1. Its shape function refuses an odd last dim
 * (the PLUGIN_SHAPE_FAILED test), its supports predicate refuses a scalar, and its cost
 * function gives 5 FLOPs per output element. The optional float attribute "beta" scales the
 * sigmoid's argument (silu_beta(a) = a / (1 + e^(-beta a)), default 1), to test attributes.
 *
 * Built twice: as swiglu (the working plugin) and, with -DSWIGLU_NAME=\"swiglu_copy\", as a
 * second library registering the same op (the PLUGIN_OP_DUPLICATE test). */
#include <math.h>
#include <stdio.h>

#include "gearbox/plugin.h"

#ifndef SWIGLU_NAME
#define SWIGLU_NAME "swiglu"
#endif

static int32_t swiglu_shape(const gbx_plugin_node* node, const gbx_plugin_shape* in, int32_t n_in,
                            gbx_plugin_shape* out, int32_t n_out) {
  (void)n_in;
  (void)n_out;
  const int64_t last = in[0].dims[in[0].rank - 1];
  if (last % 2 != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "the last dim of x must be even (it holds the two halves), not %lld", (long long)last);
    node->set_error(node, msg);
    return GBX_PLUGIN_ERROR;
  }
  out[0] = in[0];
  out[0].dims[in[0].rank - 1] = last / 2;
  return GBX_PLUGIN_OK;
}

static int32_t swiglu_supports(const gbx_plugin_node* node, const gbx_plugin_shape* in, int32_t n_in) {
  (void)n_in;
  if (in[0].rank < 1) {
    node->set_error(node, "x must have rank >= 1");
    return 0;
  }
  return 1;
}

#define SWIGLU_LOOP(T, EXP)                                     \
  do {                                                          \
    const T* x = (const T*)in[0].data;                          \
    T* y = (T*)out[0].data;                                     \
    for (int64_t r = 0; r < rows; ++r)                          \
      for (int64_t j = 0; j < h; ++j) {                         \
        const T a = x[r * 2 * h + j], b = x[r * 2 * h + h + j]; \
        y[r * h + j] = a / ((T)1 + EXP(-(T)beta * a)) * b;      \
      }                                                         \
  } while (0)

static int32_t swiglu_kernel(const gbx_plugin_node* node, const gbx_plugin_tensor* in, int32_t n_in,
                             gbx_plugin_tensor* out, int32_t n_out) {
  (void)n_in;
  (void)n_out;
  float beta = 1.0f;
  node->attr_float(node, "beta", &beta);
  const int64_t h = out[0].dims[out[0].rank - 1];
  int64_t rows = 1;
  for (int32_t d = 0; d + 1 < out[0].rank; ++d) rows *= out[0].dims[d];
  if (in[0].dtype == GBX_PLUGIN_F32) SWIGLU_LOOP(float, expf);
  else SWIGLU_LOOP(double, exp);
  return GBX_PLUGIN_OK;
}

static void swiglu_cost(const gbx_plugin_node* node, const gbx_plugin_shape* in, int32_t n_in,
                        const gbx_plugin_shape* out, int32_t n_out, gbx_plugin_cost* cost) {
  (void)node;
  (void)in;
  (void)n_in;
  (void)n_out;
  double n = 1;
  for (int32_t d = 0; d < out[0].rank; ++d) n *= (double)out[0].dims[d];
  cost->flops = 5 * n; /* exp, add, divide, multiply, multiply */
}

static const int32_t kFloats[] = {GBX_PLUGIN_F32, GBX_PLUGIN_F64, 0};
static const int32_t* const kDtypes[] = {kFloats};

static const gbx_plugin_op kOps[] = {{
    "com.example",
    "SwiGLU",
    1,
    0,
    1,
    1,
    kDtypes,
    kDtypes,
    swiglu_shape,
    swiglu_supports,
    swiglu_kernel,
    swiglu_cost,
}};

static const gbx_plugin kPlugin = {GBX_PLUGIN_ABI_VERSION, SWIGLU_NAME, "1.2.0", NULL, 1, kOps};

GBX_PLUGIN_EXPORT const gbx_plugin* gbx_plugin_get(void) { return &kPlugin; }
