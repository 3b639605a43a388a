// nn::init: torch.nn.init's initializers, in place (see nn.hpp). Each draws a fresh tensor of
// the target's shape and dtype from the manual_seed generator (Tensor::uniform/randn, so the
// draws are the same as the layers' own initialization) and copies it in.
#include <cmath>
#include <cstring>

#include "frontend/tensor_impl.h"

namespace gbx::nn::init {

namespace {

using gearbox::ErrorCode;

// Replaces t's values with `values` (same shape; converted to t's dtype).
void assign(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  const Tensor converted = values.to(t.dtype());
  const gearbox::Tensor& v = value_of(converted, "nn::init");
  std::memcpy(t.mutable_data(), v.raw(), v.nbytes());
}

void require_float(const Tensor& t, const char* what) {
  if (!t.defined() || t.dtype() == DType::Int64)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "nn::init::", what, ": ", t.describe(),
                                     " is not a float tensor"));
}

int64_t fan(const Tensor& t, FanMode mode) {
  const auto [in, out] = fans(t);
  return mode == FanMode::FanIn ? in : out;
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity.starts_with("conv")) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "nn::init::calculate_gain: unknown nonlinearity '",
                                   nonlinearity,
                                   "'; use linear, conv1d/2d/3d, conv_transpose*, sigmoid, tanh, relu, "
                                   "leaky_relu or selu"));
}

std::pair<int64_t, int64_t> fans(const Tensor& weight) {
  if (!weight.defined() || weight.rank() < 2)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "nn::init: fan in and fan out of ", weight.describe(),
                                     " need at least 2 dims ([out, in, kernel...])"));
  int64_t receptive = 1;
  for (size_t i = 2; i < weight.rank(); ++i) receptive *= weight.dim(i);
  return {weight.dim(1) * receptive, weight.dim(0) * receptive};
}

void uniform_(Tensor& t, double low, double high) {
  require_float(t, "uniform_");
  assign(t, Tensor::uniform(t.shape(), low, high, t.dtype() == DType::Float64 ? DType::Float64 : DType::Float32));
}

void normal_(Tensor& t, double mean, double std) {
  require_float(t, "normal_");
  const DType d = t.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  NoGradGuard no_grad;
  assign(t, add(mul(Tensor::randn(t.shape(), d), Tensor::scalar(std, d)), Tensor::scalar(mean, d)));
}

void constant_(Tensor& t, double value) {
  require_float(t, "constant_");
  assign(t, Tensor::full(t.shape(), value, t.dtype() == DType::Float64 ? DType::Float64 : DType::Float32));
}
void zeros_(Tensor& t) { constant_(t, 0.0); }
void ones_(Tensor& t) { constant_(t, 1.0); }

void xavier_uniform_(Tensor& t, double gain) {
  const auto [in, out] = fans(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  uniform_(t, -bound, bound);
}

void xavier_normal_(Tensor& t, double gain) {
  const auto [in, out] = fans(t);
  normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

void kaiming_uniform_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / static_cast<double>(fan(t, mode)));
  uniform_(t, -bound, bound);
}

void kaiming_normal_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode))));
}

}  // namespace gbx::nn::init
