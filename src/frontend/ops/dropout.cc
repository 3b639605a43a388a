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
  std::bernoulli_distribution keep(1.0 - p);
  const double scale = 1.0 / (1.0 - p);
  // The mask is drawn in float64 for a float64 x, else in float32 (cast to x's dtype by an op,
  // so that the draw itself is host work only).
  const std::vector<int64_t> shape = x.shape();
  const bool f64 = x.dtype() == DType::Float64;
  auto draw = [keep, scale, shape, f64]() mutable {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto mask_of = [&](auto zero) {
      std::vector<decltype(zero)> mask(static_cast<size_t>(n));
      for (auto& m : mask) m = keep(generator()) ? static_cast<decltype(zero)>(scale) : zero;
      return Tensor::from_vector(mask, shape).impl()->value;
    };
    return f64 ? mask_of(0.0) : mask_of(0.f);
  };
  Tensor mask = wrap(draw());
  // In a training graph the mask is an input drawn afresh for every step (the same draws, in
  // the same order, as eager mode's); an inference trace refuses.
  if (TraceHook* hook = active_trace_hook()) hook->random_input(mask.impl()->value, draw, "dropout in training mode");
  return mul(x, mask.to(x.dtype()));
}

}  // namespace gbx::nn
