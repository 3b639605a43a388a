// Variadic broadcasting reductions across inputs (reference): Sum, Mean, Max, Min with 1..N
// inputs of one dtype. Inputs are folded pairwise (each step broadcasts), which yields the
// multidirectional broadcast of all shapes. Max/Min propagate NaN like numpy.maximum.
// One input is forwarded unchanged (tensors are never written in place).
#include <cmath>
#include <utility>

#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

constexpr int kLast = 18;

template <Dom D, typename F>
Status variadic_op(KernelContext& ctx, F f, bool mean) {
  const size_t n = ctx.num_inputs();
  if (n == 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "needs at least one input, got none");
  for (size_t i = 0; i < n; ++i) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    if (ctx.input(i).dtype() != ctx.input(0).dtype())
      return dtype_mismatch(ctx, ("input 0 and input " + std::to_string(i)).c_str(), ctx.input(0).dtype(),
                            ctx.input(i).dtype());
  }
  // Check all shapes up front so the error names every shape, not a partial fold.
  std::vector<Dims> shapes;
  for (size_t i = 0; i < n; ++i) shapes.push_back(ctx.input(i).dims());
  GBX_RETURN_IF_ERROR(broadcast_shapes(ctx, shapes).status());

  const DType dt = ctx.input(0).dtype();
  Status st = ctx.unsupported_dtype(dt);
  Tensor acc = ctx.input(0);
  visit_numeric(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_dom<D, T>()) {
      st = Status::OK();
      for (size_t i = 1; i < n; ++i) {
        const Tensor& in = ctx.input(i);
        Tensor out;
        BroadcastPlan<2> plan;
        st = prepare_binary(ctx, acc, in, dt, &out, &plan);
        if (!st.ok()) return;
        binary_apply(std::as_const(acc).data<T>(), in.data<T>(), out.data<T>(), plan, f);
        acc = std::move(out);
      }
      if (mean && n > 1) {
        using C = compute_t<T>;
        const C count = static_cast<C>(n);
        T* p = acc.data<T>();  // acc is this kernel's own tensor here
        for (int64_t i = 0; i < acc.numel(); ++i) p[i] = static_cast<T>(static_cast<C>(p[i]) / count);
      }
    }
  });
  if (!st.ok()) return st;
  ctx.set_output(0, std::move(acc));
  return Status::OK();
}

Status sum_op(KernelContext& ctx) {
  return variadic_op<Dom::Float>(
      ctx, [](auto a, auto b) { return a + b; }, false);
}
Status mean_op(KernelContext& ctx) {
  return variadic_op<Dom::Float>(
      ctx, [](auto a, auto b) { return a + b; }, true);
}
Status max_op(KernelContext& ctx) {
  return variadic_op<Dom::NumericNoBool>(
      ctx,
      [](auto a, auto b) {
        if constexpr (is_float_v<decltype(a)>) return std::isnan(a) || a >= b ? a : b;
        else return a >= b ? a : b;
      },
      false);
}
Status min_op(KernelContext& ctx) {
  return variadic_op<Dom::NumericNoBool>(
      ctx,
      [](auto a, auto b) {
        if constexpr (is_float_v<decltype(a)>) return std::isnan(a) || a <= b ? a : b;
        else return a <= b ? a : b;
      },
      false);
}

GBX_REGISTER_KERNEL({"", "Sum", 1, kLast, kEngineRef, {}, sum_op});
GBX_REGISTER_KERNEL({"", "Mean", 1, kLast, kEngineRef, {}, mean_op});
GBX_REGISTER_KERNEL({"", "Max", 1, kLast, kEngineRef, {}, max_op});
GBX_REGISTER_KERNEL({"", "Min", 1, kLast, kEngineRef, {}, min_op});

}  // namespace
}  // namespace gearbox::ref
