// Broadcasting comparisons (reference): Equal, Greater, Less, GreaterOrEqual, LessOrEqual.
// Output is bool. Equal also takes bool and (as opset 19 allows, harmlessly earlier)
// string inputs; the ordered comparisons take every numeric type. Comparisons with NaN
// are false, as in IEEE and numpy.
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

constexpr int kLast = 18;

Status equal_strings(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor out;
  BroadcastPlan<2> plan;
  GBX_RETURN_IF_ERROR(prepare_binary(ctx, a, b, DType::Bool, &out, &plan));
  const std::string* pa = a.strings().data();
  const std::string* pb = b.strings().data();
  bool* po = out.data<bool>();
  const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
  for_each_segment(plan, 0, out.numel(), [&](int64_t oo, const std::array<int64_t, 2>& off, int64_t col, int64_t n) {
    for (int64_t i = col; i < col + n; ++i) po[oo + i - col] = pa[off[0] + i * sa] == pb[off[1] + i * sb];
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

Status equal_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  if (ctx.input(0).dtype() == DType::String && ctx.input(1).dtype() == DType::String) return equal_strings(ctx);
  return binary_op<Dom::Numeric, true>(ctx, [](auto a, auto b) { return a == b; });
}
Status greater_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool, true>(ctx, [](auto a, auto b) { return a > b; });
}
Status less_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool, true>(ctx, [](auto a, auto b) { return a < b; });
}
Status greater_equal_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool, true>(ctx, [](auto a, auto b) { return a >= b; });
}
Status less_equal_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool, true>(ctx, [](auto a, auto b) { return a <= b; });
}

GBX_REGISTER_KERNEL({"", "Equal", 7, kLast, kEngineRef, {}, equal_op});
GBX_REGISTER_KERNEL({"", "Greater", 7, kLast, kEngineRef, {}, greater_op});
GBX_REGISTER_KERNEL({"", "Less", 7, kLast, kEngineRef, {}, less_op});
GBX_REGISTER_KERNEL({"", "GreaterOrEqual", 12, kLast, kEngineRef, {}, greater_equal_op});
GBX_REGISTER_KERNEL({"", "LessOrEqual", 12, kLast, kEngineRef, {}, less_equal_op});

}  // namespace
}  // namespace gearbox::ref
