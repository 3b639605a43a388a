// Gradients of the activations and of Softmax/LogSoftmax, written with the saved outputs
// where the derivative is a function of the output (Sigmoid, Tanh, Exp-like), as torch does.
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"
#include "kernels/kernel.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;
int64_t axis_of(const TapeNode& n) { return n.attrs.at("axis").i; }
}  // namespace

void register_activation_gradients(GradientRegistry& r) {
  // dY where relu(x) > 0, else 0 (torch's convention at 0), in one kernel.
  r.add("", "Relu", [](const TapeNode& n, const Grads& g) -> Grads {
    return {apply1({"ReluGrad", std::string(gearbox::kGearboxDomain), 1}, {g[0], n.outputs[0]})};
  });
  r.add("", "Sigmoid", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& y = n.outputs[0];
    return {mul(g[0], mul(y, sub(scalar_like(y, 1.0), y)))};
  });
  r.add("", "Tanh", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& y = n.outputs[0];
    return {mul(g[0], sub(scalar_like(y, 1.0), mul(y, y)))};
  });
  // One fused kernel, com.gearbox.GeluGrad (either form of the forward's approximate), where the
  // chain of element-wise ops spelling Phi(x) + x phi(x) cost 10-40 times the forward.
  r.add(std::string(gearbox::kGearboxDomain), "Gelu", [](const TapeNode& n, const Grads& g) -> Grads {
    gearbox::AttributeMap attrs;
    if (n.attrs.count("approximate")) attrs["approximate"] = n.attrs.at("approximate");
    return {apply1({"GeluGrad", std::string(gearbox::kGearboxDomain), 1}, {g[0], n.inputs[0]}, attrs)};
  });
  // y (g - sum(g y)) along the axis.
  r.add("", "Softmax", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& y = n.outputs[0];
    return {mul(y, sub(g[0], sum(mul(g[0], y), {axis_of(n)}, true)))};
  });
  // g - exp(y) sum(g) along the axis.
  r.add("", "LogSoftmax", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& y = n.outputs[0];
    return {sub(g[0], mul(exp(y), sum(g[0], {axis_of(n)}, true)))};
  });
}

}  // namespace gbx::nn
