// BitwiseAnd, BitwiseOr, BitwiseXor (broadcast) and BitwiseNot (reference, opset 18): the
// bit operations on signed and unsigned integer tensors, as numpy's bitwise_and/or/xor/not.
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

// The operands arrive widened to compute_t<T>; the bits that survive the cast back to T are
// the same as if the operation had run in T.
Status bitwise_and(KernelContext& ctx) {
  return binary_op<Dom::Integer>(ctx, [](auto a, auto b) { return decltype(a)(a & b); });
}
Status bitwise_or(KernelContext& ctx) {
  return binary_op<Dom::Integer>(ctx, [](auto a, auto b) { return decltype(a)(a | b); });
}
Status bitwise_xor(KernelContext& ctx) {
  return binary_op<Dom::Integer>(ctx, [](auto a, auto b) { return decltype(a)(a ^ b); });
}
Status bitwise_not(KernelContext& ctx) {
  return unary_op<Dom::Integer>(ctx, [](auto x) { return decltype(x)(~x); });
}

GBX_REGISTER_KERNEL({"", "BitwiseAnd", 18, 18, kEngineRef, {}, bitwise_and});
GBX_REGISTER_KERNEL({"", "BitwiseOr", 18, 18, kEngineRef, {}, bitwise_or});
GBX_REGISTER_KERNEL({"", "BitwiseXor", 18, 18, kEngineRef, {}, bitwise_xor});
GBX_REGISTER_KERNEL({"", "BitwiseNot", 18, 18, kEngineRef, {}, bitwise_not});

}  // namespace
}  // namespace gearbox::ref
