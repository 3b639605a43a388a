// 2-D convolution (ONNX Conv) and the transposed convolution its input gradient runs on.
#include "frontend/ops/conv_util.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

std::vector<int64_t> pair_arg(const std::vector<int64_t>& v, const char* op, const char* what, int64_t min) {
  if (v.size() != 1 && v.size() != 2)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, op, ": ", what, " has ", v.size(),
                                     " values; give one (both axes) or two (height, width)"));
  std::vector<int64_t> out = v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  for (int64_t e : out)
    if (e < min)
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, op, ": ", what, " value ", e, " must be >= ", min));
  return out;
}

void require_nchw(const Tensor& x, const char* op) {
  if (!x.defined() || x.rank() != 4)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, op, ": input ", x.describe(),
                                     " must be 4-D [N, C, H, W]"));
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  require_nchw(x, "conv2d");
  stride = pair_arg(stride, "conv2d", "stride", 1);
  padding = pair_arg(padding, "conv2d", "padding", 0);
  dilation = pair_arg(dilation, "conv2d", "dilation", 1);
  if (groups < 1 || !weight.defined() || weight.rank() != 4 || x.dim(1) % groups != 0 || weight.dim(0) % groups != 0 ||
      weight.dim(1) * groups != x.dim(1) || (bias.defined() && (bias.rank() != 1 || bias.dim(0) != weight.dim(0))))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "conv2d: input ", x.describe(), ", weight ",
                                     weight.describe(), ", bias ", bias.describe(), ", groups ", groups,
                                     ": needs weight [C_out, C_in/groups, kH, kW] with C_in and C_out divisible by "
                                     "groups and bias [C_out]"));
  return apply1({"Conv"}, {x, weight, bias},
                {{"strides", gearbox::attr_ints(stride)},
                 {"pads", gearbox::attr_ints({padding[0], padding[1], padding[0], padding[1]})},
                 {"dilations", gearbox::attr_ints(dilation)},
                 {"group", gearbox::attr_int(groups)}});
}

}  // namespace gbx::nn
