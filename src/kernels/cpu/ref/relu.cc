// Relu (reference): y = max(x, 0). Opsets 6/13 cover the float types, opset 14 adds
// int8..int64; one kernel serves them all (other dtypes: DTYPE_UNSUPPORTED). The simplest
// element-wise kernel; see elementwise.h for the loop helpers new ones share.
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

Status relu(KernelContext& ctx) {
  return unary_op<Dom::FloatSigned>(ctx, [](auto v) {
    using C = decltype(v);
    return v < C(0) ? C(0) : v;  // NaN < 0 is false: NaN stays NaN, as numpy.maximum
  });
}

GBX_REGISTER_KERNEL({"", "Relu", 1, 18, kEngineRef, {}, relu});

}  // namespace
}  // namespace gearbox::ref
