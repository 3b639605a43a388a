// nn::Conv1d, nn::Conv2d and nn::ConvTranspose2d, with torch's default initialization.
#include <cmath>

#include "frontend/ops/conv_util.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

namespace {

// kaiming_uniform_(a=sqrt(5)) gives U(±1/sqrt(fan_in)), and torch gives the bias the same
// bound; fan_in is torch's for the weight: its dim 1 times the kernel's size.
double init_bound(const std::vector<int64_t>& weight_shape) {
  int64_t fan_in = 1;
  for (size_t i = 1; i < weight_shape.size(); ++i) fan_in *= weight_shape[i];
  return 1.0 / std::sqrt(static_cast<double>(fan_in));
}

void check_channels(const char* layer, int64_t in, int64_t out, int64_t groups) {
  if (in <= 0 || out <= 0 || groups < 1 || in % groups != 0 || out % groups != 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, layer, "(", in, ", ", out, ", groups=",
                                     groups, "): channel counts must be positive and divisible by groups"));
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, Conv2dOptions options)
    : opt_(std::move(options)) {
  const std::vector<int64_t> k = pair_arg(kernel_size, "Conv2d", "kernel_size", 1);
  check_channels("Conv2d", in_channels, out_channels, opt_.groups);
  // Checked now rather than at the first forward.
  pair_arg(opt_.stride, "Conv2d", "stride", 1);
  pair_arg(opt_.padding, "Conv2d", "padding", 0);
  pair_arg(opt_.dilation, "Conv2d", "dilation", 1);
  const std::vector<int64_t> shape{out_channels, in_channels / opt_.groups, k[0], k[1]};
  const double bound = init_bound(shape);
  weight_ = register_parameter("weight", Tensor::uniform(shape, -bound, bound));
  if (opt_.bias) bias_ = register_parameter("bias", Tensor::uniform({out_channels}, -bound, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight_, bias_, opt_.stride, opt_.padding, opt_.dilation, opt_.groups);
}

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions options) : opt_(options) {
  check_channels("Conv1d", in_channels, out_channels, opt_.groups);
  if (kernel_size < 1 || opt_.stride < 1 || opt_.padding < 0 || opt_.dilation < 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Conv1d: kernel_size ", kernel_size,
                                     ", stride ", opt_.stride, ", padding ", opt_.padding, ", dilation ", opt_.dilation,
                                     ": needs kernel_size, stride, dilation >= 1 and padding >= 0"));
  const std::vector<int64_t> shape{out_channels, in_channels / opt_.groups, kernel_size};
  const double bound = init_bound(shape);
  weight_ = register_parameter("weight", Tensor::uniform(shape, -bound, bound));
  if (opt_.bias) bias_ = register_parameter("bias", Tensor::uniform({out_channels}, -bound, bound));
}

Tensor Conv1d::forward(const Tensor& x) {
  return conv1d(x, weight_, bias_, opt_.stride, opt_.padding, opt_.dilation, opt_.groups);
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                                 ConvTranspose2dOptions options)
    : opt_(std::move(options)) {
  check_channels("ConvTranspose2d", in_channels, out_channels, opt_.groups);
  const std::vector<int64_t> k = pair_arg(kernel_size, "ConvTranspose2d", "kernel_size", 1);
  pair_arg(opt_.stride, "ConvTranspose2d", "stride", 1);
  pair_arg(opt_.padding, "ConvTranspose2d", "padding", 0);
  pair_arg(opt_.output_padding, "ConvTranspose2d", "output_padding", 0);
  pair_arg(opt_.dilation, "ConvTranspose2d", "dilation", 1);
  const std::vector<int64_t> shape{in_channels, out_channels / opt_.groups, k[0], k[1]};
  const double bound = init_bound(shape);
  weight_ = register_parameter("weight", Tensor::uniform(shape, -bound, bound));
  if (opt_.bias) bias_ = register_parameter("bias", Tensor::uniform({out_channels}, -bound, bound));
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight_, bias_, opt_.stride, opt_.padding, opt_.output_padding, opt_.groups,
                          opt_.dilation);
}

}  // namespace gbx::nn
