// Dropout: a host-drawn keep mask multiplied in, so its gradient is Mul's (the same mask).
#include <random>

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
  std::vector<double> mask(static_cast<size_t>(x.numel()));
  for (double& m : mask) m = keep(generator()) ? scale : 0.0;
  Tensor m = Tensor::from_vector(mask, x.shape());
  if (x.dtype() == DType::Float32) m = Tensor::from_vector(m.to_float_vector(), x.shape());
  return mul(x, m);
}

}  // namespace gbx::nn
