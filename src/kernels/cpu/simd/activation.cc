// Softmax (ai.onnx 1-17) and com.gearbox.Gelu on the cpu.simd engine.
//
// Softmax: float32 rows that are contiguous, i.e. the last axis from opset 13, and every
// axis before it (the input is coerced to 2-D there, so rows are always contiguous); each row
// runs simd_util.h softmax_row, rows threaded with OpenMP. Gelu: float32, erf form
// (approximate="none") or tanh form, chunks threaded. Other dtypes, another softmax axis and
// invalid attributes run the reference kernel (which produces the errors).
#include <string>

#include "kernels/cpu/simd/simd_util.h"

namespace gearbox::simd {
namespace {

Status softmax(KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.input_value(0).is_tensor()) return run_ref(ctx);
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32 || x.numel() == 0) return run_ref(ctx);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const bool legacy = ctx.opset() < 13;
  int64_t axis = ctx.attr_int("axis", legacy ? 1 : -1);
  if (axis < -rank || axis >= rank) return run_ref(ctx);
  if (axis < 0) axis += rank;
  if (!legacy && axis != rank - 1) return run_ref(ctx);
  int64_t len = 1;
  for (int64_t i = axis; i < rank; ++i) len *= x.dim(static_cast<size_t>(i));
  const int64_t rows = x.numel() / len;
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  for_each_index(rows, x.numel() > 32768, [&](int64_t r) { softmax_row(xd + r * len, yd + r * len, len); });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status gelu(KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.input_value(0).is_tensor()) return run_ref(ctx);
  const Tensor& x = ctx.input(0);
  const std::string approx = ctx.attr_string("approximate", "none");
  if (x.dtype() != DType::F32 || (approx != "none" && approx != "tanh")) return run_ref(ctx);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  const int64_t n = x.numel();
  constexpr int64_t kChunk = 16384;
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  const bool tanh_form = approx == "tanh";
  for_each_index((n + kChunk - 1) / kChunk, n > 2 * kChunk, [&](int64_t i) {
    const int64_t c = i * kChunk;
    gelu_span(xd + c, yd + c, std::min(kChunk, n - c), tanh_form);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "Softmax", 1, 17, kEngineSimd, {DType::F32}, softmax});
GBX_REGISTER_KERNEL({kGearboxDomain, "Gelu", 1, 1, kEngineSimd, {}, gelu});

}  // namespace gearbox::simd
