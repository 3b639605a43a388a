// nn::BatchNorm1d/2d, nn::LayerNorm and nn::GroupNorm: torch's parameters, buffers and
// train/eval behaviour.
#include <algorithm>

#include "frontend/graph/trace_hook.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

BatchNorm::BatchNorm(const char* name, std::vector<size_t> ranks, const char* shapes, int64_t num_features, double eps,
                     double momentum)
    : name_(name), shapes_(shapes), ranks_(std::move(ranks)), eps_(eps), momentum_(momentum) {
  if (num_features <= 0 || !(eps > 0) || !(momentum >= 0 && momentum <= 1))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, name, "(", num_features, ", eps=", eps,
                                     ", momentum=", momentum,
                                     "): needs num_features > 0, eps > 0 and momentum in [0, 1]"));
  weight_ = register_parameter("weight", Tensor::full({num_features}, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros({num_features}));
  running_mean_ = register_buffer("running_mean", Tensor::zeros({num_features}));
  running_var_ = register_buffer("running_var", Tensor::full({num_features}, 1.0));
  // torch's is a 0-d int64 tensor.
  num_batches_tracked_ = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::Int64));
}

int64_t BatchNorm::num_batches_tracked() const { return num_batches_tracked_.to_int64_vector()[0]; }

Tensor BatchNorm::forward(const Tensor& x) {
  if (!x.defined() || std::find(ranks_.begin(), ranks_.end(), x.rank()) == ranks_.end())
    throw_status(
        gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, name_, ": input ", x.describe(), " must be ", shapes_));
  Tensor y = batch_norm(x, running_mean_, running_var_, weight_, bias_, is_training(), momentum_, eps_);
  // Counted after the op succeeded, so a rejected batch leaves the buffers as they were.
  if (is_training()) {
    NoGradGuard no_grad;
    assign_state(num_batches_tracked_, add(num_batches_tracked_, Tensor::full({}, 1.0, DType::Int64)),
                 "BatchNorm2d's num_batches_tracked");
  }
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

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : groups_(num_groups), eps_(eps) {
  if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups != 0 || !(eps > 0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "GroupNorm(", num_groups, ", ", num_channels,
                                     ", eps=", eps,
                                     "): needs positive counts, num_channels divisible by num_groups and eps > 0"));
  if (!affine) return;
  weight_ = register_parameter("weight", Tensor::full({num_channels}, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros({num_channels}));
}

}  // namespace gbx::nn
