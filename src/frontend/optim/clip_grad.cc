// nn::clip_grad_norm: gradient clipping on the total 2-norm (torch.nn.utils.clip_grad_norm_).
#include <cmath>

#include "frontend/tensor_impl.h"

namespace gbx::nn {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm > 0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "clip_grad_norm: max_norm ", max_norm,
                                     " must be positive"));
  // Summed in double: the norm decides whether and how much every gradient is scaled, and
  // data-parallel ranks must agree on it bit for bit (they do: same values, same order).
  double sq = 0;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.impl()->grad.defined()) continue;
    const gearbox::Tensor& g = p.impl()->grad;
    if (g.dtype() != gearbox::DType::F32)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "clip_grad_norm: gradient ",
                                       gearbox::describe(g), " is not float32"));
    const float* d = g.data<float>();
    for (int64_t i = 0; i < g.numel(); ++i) sq += static_cast<double>(d[i]) * d[i];
  }
  const double norm = std::sqrt(sq);
  // torch multiplies by min(coef, 1) in float32; a factor of 1 leaves the values as they are.
  const float coef = static_cast<float>(max_norm / (norm + 1e-6));
  if (coef < 1.0f)
    for (const Tensor& p : params) {
      if (!p.defined() || !p.impl()->grad.defined()) continue;
      gearbox::Tensor& g = p.impl()->grad;
      float* d = g.data<float>();
      for (int64_t i = 0; i < g.numel(); ++i) d[i] *= coef;
    }
  return norm;
}

}  // namespace gbx::nn
