// Activations and the softmax family.
#include "frontend/ops/internal.h"
#include "kernels/kernel.h"

namespace gbx::nn {

Tensor relu(const Tensor& x) { return apply1({"Relu"}, {x}); }
Tensor sigmoid(const Tensor& x) { return apply1({"Sigmoid"}, {x}); }
Tensor tanh(const Tensor& x) { return apply1({"Tanh"}, {x}); }
// ONNX has Gelu only from opset 20; gearbox's own com.gearbox.Gelu is the same function.
Tensor gelu(const Tensor& x) {
  return apply1({"Gelu", std::string(gearbox::kGearboxDomain), 1}, {x}, {{"approximate", gearbox::attr_string("none")}});
}
Tensor softmax(const Tensor& x, int64_t axis) {
  return apply1({"Softmax"}, {x}, {{"axis", gearbox::attr_int(normalize_axis(axis, x.rank(), "softmax"))}});
}
Tensor log_softmax(const Tensor& x, int64_t axis) {
  return apply1({"LogSoftmax"}, {x}, {{"axis", gearbox::attr_int(normalize_axis(axis, x.rank(), "log_softmax"))}});
}

}  // namespace gbx::nn
