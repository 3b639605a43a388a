// Gradients of the element-wise arithmetic ops; broadcast inputs get their gradient summed
// back to their own shape (sum_to).
#include <cmath>

#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;
const Tensor& in(const TapeNode& n, size_t i) { return n.inputs[i]; }
const Tensor& out(const TapeNode& n) { return n.outputs[0]; }
}  // namespace

void register_elementwise_gradients(GradientRegistry& r) {
  r.add("", "Add", [](const TapeNode& n, const Grads& g) -> Grads {
    return {sum_to(g[0], in(n, 0).shape()), sum_to(g[0], in(n, 1).shape())};
  });
  r.add("", "Sub", [](const TapeNode& n, const Grads& g) -> Grads {
    return {sum_to(g[0], in(n, 0).shape()), sum_to(neg(g[0]), in(n, 1).shape())};
  });
  r.add("", "Mul", [](const TapeNode& n, const Grads& g) -> Grads {
    return {sum_to(mul(g[0], in(n, 1)), in(n, 0).shape()), sum_to(mul(g[0], in(n, 0)), in(n, 1).shape())};
  });
  // d(a/b)/db = -a/b^2 = -y/b.
  r.add("", "Div", [](const TapeNode& n, const Grads& g) -> Grads {
    return {sum_to(div(g[0], in(n, 1)), in(n, 0).shape()),
            sum_to(neg(div(mul(g[0], out(n)), in(n, 1))), in(n, 1).shape())};
  });
  // A conversion's gradient is the output's converted back (autocast's float32 master weights get
  // float32 gradients); an integer input takes none.
  r.add("", "Cast", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& x = in(n, 0);
    if (!gearbox::is_float(x.impl()->value.dtype())) return {Tensor()};
    return {g[0].to(x.dtype())};
  });
  r.add("", "Neg", [](const TapeNode&, const Grads& g) -> Grads { return {neg(g[0])}; });
  r.add("", "Exp", [](const TapeNode& n, const Grads& g) -> Grads { return {mul(g[0], out(n))}; });
  r.add("", "Log", [](const TapeNode& n, const Grads& g) -> Grads { return {div(g[0], in(n, 0))}; });
  // erf'(x) = 2/sqrt(pi) exp(-x^2): what torch's exact GELU exports as (Div, Erf, Add, Mul, Mul), so
  // `gearbox train` can fine-tune it.
  r.add("", "Erf", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& x = in(n, 0);
    return {mul(g[0], mul(scalar_like(x, M_2_SQRTPI), exp(neg(mul(x, x)))))};
  });
  // x^p with a constant exponent p (nn::pow): p * x^(p-1); no gradient for p.
  r.add("", "Pow", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& p = in(n, 1);
    Tensor lower = apply1({"Pow"}, {in(n, 0), sub(p, scalar_like(p, 1.0))});
    return {sum_to(mul(mul(g[0], p), lower), in(n, 0).shape()), Tensor()};
  });
}

}  // namespace gbx::nn
