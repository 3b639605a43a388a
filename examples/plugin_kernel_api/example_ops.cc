// A custom-op plugin written with gearbox's kernel API (include/gearbox/kernel_api.hpp), built
// out of tree (CMakeLists.txt here): float32 kernels for
//   com.example.SwiGLU           y[..., j] = silu(x[..., j]) * x[..., H + j], x's last dim 2H;
//   com.example.RotaryEmbedding  x [..., S, D] (D even) rotated per position s along axis -2,
//                                GPT-NeoX style: with t_i = s * base^(-2i/D), i < D/2,
//                                y[i] = x[i] cos t_i - x[i + D/2] sin t_i,
//                                y[i + D/2] = x[i + D/2] cos t_i + x[i] sin t_i
//                                (attribute `base`, default 10000).
// Each kernel is a per-target row function (compiled once per instruction set: the
// foreach_target lines below) called through HWY_DYNAMIC_DISPATCH on tiles of rows that
// kapi::parallel_for spreads over gearbox's OpenMP threads.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "example_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <gearbox/kernel_api.hpp>

GBX_KAPI_BEGIN(example)

// Rows [r0, r1) of x [rows, 2h] into y [rows, h].
void SwiGluRows(const float* x, float* y, int64_t r0, int64_t r1, int64_t h) {
  for (int64_t r = r0; r < r1; ++r)
    Map2(x + r * 2 * h, x + r * 2 * h + h, y + r * h, h, [](VF a, VF b) HWY_ATTR { return hn::Mul(Silu(a), b); });
}

// Rows [r0, r1) of x [rows, d]; row r sits at position r % seq. inv_freq[i] = base^(-2i/d).
// The angles of one row go through a local tile (cos in row 0, sin in row 1), then the two
// halves are rotated with them.
void RotaryRows(const float* x, float* y, int64_t r0, int64_t r1, int64_t seq, int64_t d, const float* inv_freq) {
  const int64_t half = d / 2;
  constexpr int64_t kMaxHalf = 1024;  // D up to 2048 (the shape function checks it)
  Tile<float, 2, kMaxHalf> trig;
  for (int64_t r = r0; r < r1; ++r) {
    const VF pos = hn::Set(DF(), static_cast<float>(r % seq));
    Map(inv_freq, trig.row(0), half, [&](VF f) HWY_ATTR { return Cos(hn::Mul(pos, f)); });
    Map(inv_freq, trig.row(1), half, [&](VF f) HWY_ATTR { return Sin(hn::Mul(pos, f)); });
    const float* a = x + r * d;
    const float* b = a + half;
    float* ya = y + r * d;
    float* yb = ya + half;
    for (int64_t i = 0; i < half; i += Lanes()) {
      const int64_t n = half - i;
      const VF va = LoadN(a + i, n), vb = LoadN(b + i, n);
      const VF c = LoadN(trig.row(0) + i, n), s = LoadN(trig.row(1) + i, n);
      StoreN(hn::NegMulAdd(vb, s, hn::Mul(va, c)), ya + i, n);
      StoreN(hn::MulAdd(va, s, hn::Mul(vb, c)), yb + i, n);
    }
  }
}

GBX_KAPI_END(example)

#if HWY_ONCE
#include <gearbox/plugin.h>

#include <cmath>
#include <vector>

namespace example {
HWY_EXPORT(SwiGluRows);
HWY_EXPORT(RotaryRows);

namespace {

int64_t rows_of(const gbx_plugin_tensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i + 1 < t.rank; ++i) n *= t.dims[i];
  return n;
}

// ---- SwiGLU ----
int32_t swiglu_shape(const gbx_plugin_node* node, const gbx_plugin_shape* in, int32_t, gbx_plugin_shape* out, int32_t) {
  if (in[0].rank < 1 || in[0].dims[in[0].rank - 1] % 2 != 0) {
    node->set_error(node, "x needs a last dim of even length");
    return GBX_PLUGIN_ERROR;
  }
  out[0] = in[0];
  out[0].dims[in[0].rank - 1] /= 2;
  return GBX_PLUGIN_OK;
}

int32_t swiglu_kernel(const gbx_plugin_node*, const gbx_plugin_tensor* in, int32_t, gbx_plugin_tensor* out, int32_t) {
  const int64_t h = in[0].dims[in[0].rank - 1] / 2, rows = rows_of(in[0]);
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  gbx::kapi::parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(h, 1)), [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(SwiGluRows)(x, y, b, e, h);
  });
  return GBX_PLUGIN_OK;
}

void swiglu_cost(const gbx_plugin_node*, const gbx_plugin_shape* in, int32_t, const gbx_plugin_shape* out, int32_t,
                 gbx_plugin_cost* cost) {
  double n = 1;
  for (int32_t i = 0; i < out[0].rank; ++i) n *= static_cast<double>(out[0].dims[i]);
  cost->flops = 5 * n;      // exp, add, divide (the sigmoid), two multiplies
  cost->bytes = 3 * 4 * n;  // x (2n floats) read, y (n floats) written
  (void)in;
}

// ---- RotaryEmbedding ----
int32_t rotary_shape(const gbx_plugin_node* node, const gbx_plugin_shape* in, int32_t, gbx_plugin_shape* out, int32_t) {
  const int64_t d = in[0].rank >= 2 ? in[0].dims[in[0].rank - 1] : 0;
  if (in[0].rank < 2 || d % 2 != 0 || d > 2048) {
    node->set_error(node, "x must be [..., S, D] with D even and at most 2048");
    return GBX_PLUGIN_ERROR;
  }
  out[0] = in[0];
  return GBX_PLUGIN_OK;
}

int32_t rotary_kernel(const gbx_plugin_node* node, const gbx_plugin_tensor* in, int32_t, gbx_plugin_tensor* out,
                      int32_t) {
  float base = 10000.f;
  node->attr_float(node, "base", &base);
  const int64_t d = in[0].dims[in[0].rank - 1], seq = in[0].dims[in[0].rank - 2], rows = rows_of(in[0]);
  std::vector<float> inv_freq(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i)
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(std::pow(static_cast<double>(base), -2.0 * i / d));
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  gbx::kapi::parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(d, 1)), [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(RotaryRows)(x, y, b, e, seq, d, inv_freq.data());
  });
  return GBX_PLUGIN_OK;
}

void rotary_cost(const gbx_plugin_node*, const gbx_plugin_shape*, int32_t, const gbx_plugin_shape* out, int32_t,
                 gbx_plugin_cost* cost) {
  double n = 1;
  for (int32_t i = 0; i < out[0].rank; ++i) n *= static_cast<double>(out[0].dims[i]);
  cost->flops = 3 * n + 2 * 20 * n / 2;  // 3 per element (mul, fma) + a sin and a cos (~20 each) per pair
  cost->bytes = 2 * 4 * n;
}

const int32_t kF32[] = {GBX_PLUGIN_F32, 0};
const int32_t* const kDtypes[] = {kF32};
const gbx_plugin_op kOps[] = {
    {"com.example", "SwiGLU", 1, 0, 1, 1, kDtypes, kDtypes, swiglu_shape, nullptr, swiglu_kernel, swiglu_cost},
    {"com.example", "RotaryEmbedding", 1, 0, 1, 1, kDtypes, kDtypes, rotary_shape, nullptr, rotary_kernel, rotary_cost},
};
const gbx_plugin kPlugin = {GBX_PLUGIN_ABI_VERSION, "example_ops", "0.1.0", nullptr, 2, kOps};

}  // namespace
}  // namespace example

extern "C" GBX_PLUGIN_EXPORT const gbx_plugin* gbx_plugin_get(void) { return &example::kPlugin; }
#endif
