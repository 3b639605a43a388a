// Gradients of the activations and of Softmax/LogSoftmax, written with the saved outputs
// where the derivative is a function of the output (Sigmoid, Tanh, Exp-like), as torch does.
#include <cmath>

#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"
#include "kernels/kernel.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;
int64_t axis_of(const TapeNode& n) { return n.attrs.at("axis").i; }
}  // namespace

void register_activation_gradients(GradientRegistry& r) {
  // sign(relu(x)) is 1 where x > 0 and 0 elsewhere (torch's convention at 0).
  r.add("", "Relu", [](const TapeNode& n, const Grads& g) -> Grads { return {mul(g[0], sign(n.outputs[0]))}; });
  r.add("", "Sigmoid", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& y = n.outputs[0];
    return {mul(g[0], mul(y, sub(scalar_like(y, 1.0), y)))};
  });
  r.add("", "Tanh", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& y = n.outputs[0];
    return {mul(g[0], sub(scalar_like(y, 1.0), mul(y, y)))};
  });
  // gelu(x) = x Phi(x): Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi).
  r.add(std::string(gearbox::kGearboxDomain), "Gelu", [](const TapeNode& n, const Grads& g) -> Grads {
    if (n.attrs.count("approximate") && n.attrs.at("approximate").s != "none")
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                       "Gelu with approximate='tanh' has no gradient builder yet"));
    const Tensor& x = n.inputs[0];
    Tensor cdf = mul(scalar_like(x, 0.5), add(scalar_like(x, 1.0), erf(mul(x, scalar_like(x, M_SQRT1_2)))));
    Tensor pdf = mul(scalar_like(x, 0.5 * M_2_SQRTPI * M_SQRT1_2), exp(mul(mul(x, x), scalar_like(x, -0.5))));
    return {mul(g[0], add(cdf, mul(x, pdf)))};
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
