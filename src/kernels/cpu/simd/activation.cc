// Softmax (ai.onnx 1-17), com.gearbox.Gelu and its gradient GeluGrad on the cpu.simd engine.
//
// Softmax: float32 rows that are contiguous, i.e. the last axis from opset 13, and every
// axis before it (the input is coerced to 2-D there, so rows are always contiguous); each row
// runs simd_util.h softmax_row, rows threaded with OpenMP. Gelu: float32, erf form
// (approximate="none") or tanh form, chunks threaded. Other dtypes, another softmax axis and
// invalid attributes are refused by the supports() predicates (the reference kernel takes
// those nodes and produces the errors).
#include <string>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

// Softmax's axis, normalized, when this kernel handles it: in range, and the last axis from
// opset 13 (before it, the input is coerced to 2-D at the axis: rows are contiguous anyway).
bool softmax_axis(int64_t rank, int opset, int64_t axis, int64_t* out) {
  const bool legacy = opset < 13;
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  if (!legacy && axis != rank - 1) return false;
  *out = axis;
  return true;
}

Verdict softmax_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0}); !v.accepted()) return v;
  if (q.rank(0) < 0) return later();
  int64_t axis = 0;
  if (!softmax_axis(q.rank(0), q.opset(), q.attr_int("axis", q.opset() < 13 ? 1 : -1), &axis))
    return refuse("axis " + std::to_string(q.attr_int("axis", q.opset() < 13 ? 1 : -1)) + " of a rank-" +
                  std::to_string(q.rank(0)) + " input is not its last (or out of range)");
  return accept();
}

Status softmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = 0;
  if (!softmax_axis(rank, ctx.opset(), ctx.attr_int("axis", ctx.opset() < 13 ? 1 : -1), &axis))
    return outside_supports(ctx, "this axis");
  if (x.numel() == 0) {  // nothing to normalize
    ctx.set_output(0, Tensor(DType::F32, x.dims()));
    return Status::OK();
  }
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

Verdict gelu_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0}); !v.accepted()) return v;
  const std::string approx = q.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") return refuse("approximate='" + approx + "'");
  return accept();
}

Status gelu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string approx = ctx.attr_string("approximate", "none");
  if (x.dtype() != DType::F32 || (approx != "none" && approx != "tanh"))
    return outside_supports(ctx, "this dtype or approximate");
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

Verdict gelu_grad_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  const std::string approx = q.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") return refuse("approximate='" + approx + "'");
  return accept();
}

Status gelu_grad(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const std::string approx = ctx.attr_string("approximate", "none");
  if (dy.dims() != x.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "GeluGrad: dY ", to_string(dy.dims()), " and X ", to_string(x.dims()),
                     " must have one shape");
  if (x.dtype() != DType::F32 || dy.dtype() != DType::F32 || (approx != "none" && approx != "tanh"))
    return outside_supports(ctx, "these dtypes or approximate");
  GBX_ASSIGN_OR_RETURN(Tensor dx, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  const int64_t n = x.numel();
  constexpr int64_t kChunk = 16384;
  const float* dyd = dy.data<float>();
  const float* xd = x.data<float>();
  float* dxd = dx.data<float>();
  const bool tanh_form = approx == "tanh";
  for_each_index((n + kChunk - 1) / kChunk, n > 2 * kChunk, [&](int64_t i) {
    const int64_t c = i * kChunk;
    gelu_grad_span(dyd + c, xd + c, dxd + c, std::min(kChunk, n - c), tanh_form);
  });
  ctx.set_output(0, std::move(dx));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "Softmax", 1, 18, kEngineSimd, {DType::F32}, softmax});
GBX_KERNEL_SUPPORT(softmax, {.supports = softmax_supports});
GBX_REGISTER_KERNEL({kGearboxDomain, "Gelu", 1, 1, kEngineSimd, {DType::F32}, gelu});
GBX_KERNEL_SUPPORT(gelu, {.supports = gelu_supports});
GBX_REGISTER_KERNEL({kGearboxDomain, "GeluGrad", 1, 1, kEngineSimd, {DType::F32}, gelu_grad});
GBX_KERNEL_SUPPORT(gelu_grad, {.supports = gelu_grad_supports});

}  // namespace gearbox::simd
