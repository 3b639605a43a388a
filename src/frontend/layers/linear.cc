// nn::Linear, with torch.nn.Linear's default initialization.
#include <cmath>

#include "frontend/tensor_impl.h"

namespace gbx::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias) {
  if (in_features <= 0 || out_features <= 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Linear(", in_features, ", ",
                                     out_features, "): feature counts must be positive"));
  // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + a^2)) = sqrt(1/3), bound = gain *
  // sqrt(3 / fan_in) = 1 / sqrt(fan_in); the bias takes the same bound.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight_ = register_parameter("weight", Tensor::uniform({out_features, in_features}, -bound, bound));
  if (bias) bias_ = register_parameter("bias", Tensor::uniform({out_features}, -bound, bound));
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight_, bias_); }

}  // namespace gbx::nn
