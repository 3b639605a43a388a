// Relu (reference): y = max(x, 0). Opsets 6/13 cover the float types, opset 14 adds
// int8..int64; one kernel serves them all (other dtypes: DTYPE_UNSUPPORTED). The simplest
// element-wise kernel; see elementwise.h for the loop helpers new ones share.
//
// Also com.gearbox.ReluGrad(dY, Y) -> dX = Y > 0 ? dY : 0, Relu's gradient from its output as
// torch's threshold_backward computes it (a NaN output passes no gradient), in one pass where
// the framework's autodiff spelled it Sign and Mul.
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

Status relu(KernelContext& ctx) {
  return unary_op<Dom::FloatSigned>(ctx, [](auto v) {
    using C = decltype(v);
    return v < C(0) ? C(0) : v;  // NaN < 0 is false: NaN stays NaN, as numpy.maximum
  });
}

Status relu_grad(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  if (ctx.input(0).dims() != ctx.input(1).dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "ReluGrad: dY ", to_string(ctx.input(0).dims()), " and Y ",
                     to_string(ctx.input(1).dims()), " must have one shape");
  return binary_op<Dom::Float>(ctx, [](auto g, auto y) {
    using C = decltype(g);
    return y > decltype(y)(0) ? g : C(0);
  });
}

GBX_REGISTER_KERNEL({"", "Relu", 1, 18, kEngineRef, {}, relu});
GBX_REGISTER_KERNEL({kGearboxDomain, "ReluGrad", 1, 1, kEngineRef, {}, relu_grad});

}  // namespace
}  // namespace gearbox::ref
