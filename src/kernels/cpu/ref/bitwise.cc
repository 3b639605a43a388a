// BitShift (reference, opset 11): unsigned integers shifted LEFT or RIGHT by the
// broadcast second input. Shifts by the bit width or more give 0 (C++ leaves them
// undefined; numpy and ONNX Runtime's x86 results differ, 0 is the mathematical answer).
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

Status bitshift_op(KernelContext& ctx) {
  const std::string dir = ctx.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "direction must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
  const bool left = dir == "LEFT";
  return binary_op<Dom::Unsigned>(ctx, [left](auto x, auto s) {
    using C = decltype(x);
    constexpr unsigned bits = sizeof(C) * 8;
    if (s >= bits) return C(0);
    return left ? C(x << s) : C(x >> s);
  });
}

GBX_REGISTER_KERNEL({"", "BitShift", 11, 18, kEngineRef, {}, bitshift_op});

}  // namespace
}  // namespace gearbox::ref
