// Convolutions (ONNX Conv: 1-D and 2-D) and the 2-D transposed convolution (ConvTranspose),
// whose gradients are each other (autodiff/gradients/conv.cc).
#include <string>

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

namespace {

// Conv or ConvTranspose on x [N, C, spatial...] with per-axis stride, padding (symmetric) and
// dilation; `weight_in_channels` is the weight dim that must be C / groups (Conv: 1) or C
// (ConvTranspose: 0), and bias [C_out] is checked against the output's channels.
Tensor convolution(const char* name, const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                   const std::vector<int64_t>& dilation, int64_t groups, const std::vector<int64_t>& output_padding) {
  const bool transposed = std::string(op) == "ConvTranspose";
  const size_t nd = stride.size();
  bool ok = groups >= 1 && weight.defined() && weight.rank() == nd + 2 && x.dim(1) % groups == 0;
  int64_t c_out = 0;
  if (ok && transposed) {
    ok = weight.dim(0) == x.dim(1);
    c_out = weight.dim(1) * groups;
  } else if (ok) {
    ok = weight.dim(0) % groups == 0 && weight.dim(1) * groups == x.dim(1);
    c_out = weight.dim(0);
  }
  if (!ok || (bias.defined() && (bias.rank() != 1 || bias.dim(0) != c_out)))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, name, ": input ", x.describe(), ", weight ",
                                     weight.describe(), ", bias ", bias.describe(), ", groups ", groups,
                                     ": needs weight ",
                                     transposed ? "[C_in, C_out/groups, k...]" : "[C_out, C_in/groups, k...]",
                                     " with C_in (and C_out) divisible by groups and bias [C_out]"));
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  gearbox::AttributeMap attrs{{"strides", gearbox::attr_ints(stride)},
                              {"pads", gearbox::attr_ints(pads)},
                              {"dilations", gearbox::attr_ints(dilation)},
                              {"group", gearbox::attr_int(groups)}};
  if (transposed) {
    for (size_t i = 0; i < nd; ++i)
      if (output_padding[i] < 0 || (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i]))
        throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, name, ": output_padding ",
                                         output_padding[i], " must be >= 0 and smaller than the stride ", stride[i],
                                         " or the dilation ", dilation[i]));
    attrs["output_padding"] = gearbox::attr_ints(output_padding);
  }
  return apply1({op}, {x, weight, bias}, attrs);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  require_nchw(x, "conv2d");
  return convolution("conv2d", "Conv", x, weight, bias, pair_arg(stride, "conv2d", "stride", 1),
                     pair_arg(padding, "conv2d", "padding", 0), pair_arg(dilation, "conv2d", "dilation", 1), groups,
                     {});
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
                        std::vector<int64_t> padding, std::vector<int64_t> output_padding, int64_t groups,
                        std::vector<int64_t> dilation) {
  require_nchw(x, "conv_transpose2d");
  return convolution(
      "conv_transpose2d", "ConvTranspose", x, weight, bias, pair_arg(stride, "conv_transpose2d", "stride", 1),
      pair_arg(padding, "conv_transpose2d", "padding", 0), pair_arg(dilation, "conv_transpose2d", "dilation", 1),
      groups, pair_arg(output_padding, "conv_transpose2d", "output_padding", 0));
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  if (!x.defined() || x.rank() != 3)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "conv1d: input ", x.describe(),
                                     " must be 3-D [N, C, L]"));
  if (stride < 1 || padding < 0 || dilation < 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "conv1d: stride ", stride, ", padding ",
                                     padding, ", dilation ", dilation,
                                     ": needs stride >= 1, padding >= 0, dilation >= 1"));
  return convolution("conv1d", "Conv", x, weight, bias, {stride}, {padding}, {dilation}, groups, {});
}

}  // namespace gbx::nn
