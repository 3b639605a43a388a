// nn::Conv2d, with torch.nn.Conv2d's default initialization.
#include <cmath>

#include "frontend/ops/conv_util.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, Conv2dOptions options)
    : opt_(std::move(options)) {
  const std::vector<int64_t> k = pair_arg(kernel_size, "Conv2d", "kernel_size", 1);
  if (in_channels <= 0 || out_channels <= 0 || opt_.groups < 1 || in_channels % opt_.groups != 0 ||
      out_channels % opt_.groups != 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Conv2d(", in_channels, ", ", out_channels,
                                     ", groups=", opt_.groups,
                                     "): channel counts must be positive and divisible by groups"));
  // Checked now rather than at the first forward.
  pair_arg(opt_.stride, "Conv2d", "stride", 1);
  pair_arg(opt_.padding, "Conv2d", "padding", 0);
  pair_arg(opt_.dilation, "Conv2d", "dilation", 1);
  // kaiming_uniform_(a=sqrt(5)) gives U(±1/sqrt(fan_in)); the bias takes the same bound.
  const int64_t fan_in = in_channels / opt_.groups * k[0] * k[1];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight_ = register_parameter("weight",
                               Tensor::uniform({out_channels, in_channels / opt_.groups, k[0], k[1]}, -bound, bound));
  if (opt_.bias) bias_ = register_parameter("bias", Tensor::uniform({out_channels}, -bound, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight_, bias_, opt_.stride, opt_.padding, opt_.dilation, opt_.groups);
}

}  // namespace gbx::nn
