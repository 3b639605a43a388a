// Logical operators on bool tensors (reference): And, Or, Xor (broadcasting) and Not.
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

constexpr int kLast = 18;

Status and_op(KernelContext& ctx) {
  return binary_op<Dom::Bool>(ctx, [](bool a, bool b) { return a && b; });
}
Status or_op(KernelContext& ctx) {
  return binary_op<Dom::Bool>(ctx, [](bool a, bool b) { return a || b; });
}
Status xor_op(KernelContext& ctx) {
  return binary_op<Dom::Bool>(ctx, [](bool a, bool b) { return a != b; });
}
Status not_op(KernelContext& ctx) {
  return unary_op<Dom::Bool>(ctx, [](bool a) { return !a; });
}

GBX_REGISTER_KERNEL({"", "And", 7, kLast, kEngineRef, {}, and_op});
GBX_REGISTER_KERNEL({"", "Or", 7, kLast, kEngineRef, {}, or_op});
GBX_REGISTER_KERNEL({"", "Xor", 7, kLast, kEngineRef, {}, xor_op});
GBX_REGISTER_KERNEL({"", "Not", 1, kLast, kEngineRef, {}, not_op});

}  // namespace
}  // namespace gearbox::ref
