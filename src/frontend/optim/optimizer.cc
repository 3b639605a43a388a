// nn::Optimizer's shared part: the parameter list and zero_grad.
#include "frontend/tensor_impl.h"

namespace gbx::nn {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const Tensor& p : params_)
    if (!p.defined() || !p.requires_grad() || p.dtype() != DType::Float32)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "optimizer: parameter ", p.describe(),
                                       " must be a float32 tensor that requires a gradient"));
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

}  // namespace gbx::nn
