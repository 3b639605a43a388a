// nn::BatchNorm2d and nn::LayerNorm: torch's parameters, buffers and train/eval behaviour.
#include "frontend/tensor_impl.h"

namespace gbx::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum) : eps_(eps), momentum_(momentum) {
  if (num_features <= 0 || !(eps > 0) || !(momentum >= 0 && momentum <= 1))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "BatchNorm2d(", num_features, ", eps=", eps,
                                     ", momentum=", momentum,
                                     "): needs num_features > 0, eps > 0 and momentum in [0, 1]"));
  weight_ = register_parameter("weight", Tensor::full({num_features}, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros({num_features}));
  running_mean_ = register_buffer("running_mean", Tensor::zeros({num_features}));
  running_var_ = register_buffer("running_var", Tensor::full({num_features}, 1.0));
  // torch's is a 0-d int64 tensor.
  num_batches_tracked_ = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::Int64));
}

int64_t BatchNorm2d::num_batches_tracked() const { return num_batches_tracked_.to_int64_vector()[0]; }

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (!x.defined() || x.rank() != 4)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "BatchNorm2d: input ", x.describe(),
                                     " must be 4-D [N, C, H, W]"));
  Tensor y = batch_norm(x, running_mean_, running_var_, weight_, bias_, is_training(), momentum_, eps_);
  // Counted after the op succeeded, so a rejected batch leaves the buffers as they were.
  if (is_training()) ++*static_cast<int64_t*>(num_batches_tracked_.mutable_data());
  return y;
}

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps)
    : shape_(std::move(normalized_shape)), eps_(eps) {
  bool ok = !shape_.empty() && eps > 0;
  for (int64_t d : shape_) ok = ok && d > 0;
  if (!ok)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "LayerNorm: normalized_shape (",
                                     shape_.size(), " dims) must be non-empty with positive dims and eps ", eps,
                                     " > 0"));
  weight_ = register_parameter("weight", Tensor::full(shape_, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros(shape_));
}

}  // namespace gbx::nn
