// Dropout: a host-drawn keep mask multiplied in, so its gradient is Mul's (the same mask).
#include <random>

#include "frontend/graph/trace_hook.h"
#include "frontend/ops/internal.h"
#include "frontend/random.h"

namespace gbx::nn {

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0.0 && p < 1.0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "dropout: p = ", p,
                                     " must be in [0, 1) (p = 1 would drop everything)"));
  if (!training || p == 0.0) return x;
  refuse_while_tracing("dropout in training mode",
                       "its mask is drawn on the host, so the graph would drop the same elements on every run; "
                       "call eval() on the module (or pass training = false) before tracing");
  std::bernoulli_distribution keep(1.0 - p);
  const double scale = 1.0 / (1.0 - p);
  // The mask in x's dtype, so Mul needs no cast (drawn in float64 for a float64 x, else in float32).
  auto draw = [&](auto zero) {
    std::vector<decltype(zero)> mask(static_cast<size_t>(x.numel()));
    for (auto& m : mask) m = keep(generator()) ? static_cast<decltype(zero)>(scale) : zero;
    return Tensor::from_vector(mask, x.shape());
  };
  return mul(x, x.dtype() == DType::Float64 ? draw(0.0) : draw(0.f).to(x.dtype()));
}

}  // namespace gbx::nn
