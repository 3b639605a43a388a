// 2-D pooling: MaxPool (with its Indices output, which the gradient scatters through),
// AveragePool, GlobalAveragePool, and torch's adaptive average pool built from them.
#include "frontend/ops/conv_util.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {

gearbox::AttributeMap window_attrs(const Tensor& x, const char* op, const std::vector<int64_t>& kernel_size,
                                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  require_nchw(x, op);
  const std::vector<int64_t> k = pair_arg(kernel_size, op, "kernel_size", 1);
  const std::vector<int64_t> s = stride.empty() ? k : pair_arg(stride, op, "stride", 1);
  const std::vector<int64_t> p = pair_arg(padding, op, "padding", 0);
  // torch's rule: the padding may not exceed half the window (a window of padding only).
  for (size_t i = 0; i < 2; ++i)
    if (p[i] * 2 > k[i])
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, op, ": padding ", p[i],
                                       " exceeds half the kernel size ", k[i]));
  for (size_t i = 0; i < 2; ++i)
    if (x.dim(2 + i) + 2 * p[i] < k[i])
      throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, op, ": input ", x.describe(),
                                       " is smaller than the kernel ", k[0], "x", k[1], " with padding ", p[0], ",",
                                       p[1]));
  return {{"kernel_shape", gearbox::attr_ints(k)},
          {"strides", gearbox::attr_ints(s)},
          {"pads", gearbox::attr_ints({p[0], p[1], p[0], p[1]})}};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                  std::vector<int64_t> padding) {
  // Two outputs: the Indices output is what the gradient scatters the output gradient through.
  return apply({"MaxPool"}, {x}, window_attrs(x, "max_pool2d", kernel_size, stride, padding), 2)[0];
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool count_include_pad) {
  gearbox::AttributeMap attrs = window_attrs(x, "avg_pool2d", kernel_size, stride, padding);
  attrs["count_include_pad"] = gearbox::attr_int(count_include_pad);
  return apply1({"AveragePool"}, {x}, std::move(attrs));
}

// torch's adaptive windows: output cell i covers [floor(i H / out), ceil((i + 1) H / out)).
// 1x1 is GlobalAveragePool; sizes dividing the input are an AveragePool with kernel = stride
// = H / out; other sizes average each window's slices (few cells in practice).
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  require_nchw(x, "adaptive_avg_pool2d");
  const std::vector<int64_t> o = pair_arg(output_size, "adaptive_avg_pool2d", "output_size", 1);
  const int64_t h = x.dim(2), w = x.dim(3);
  if (h == 0 || w == 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "adaptive_avg_pool2d: input ", x.describe(),
                                     " has an empty spatial extent"));
  if (o[0] == 1 && o[1] == 1) return apply1({"GlobalAveragePool"}, {x});
  if (h % o[0] == 0 && w % o[1] == 0) return avg_pool2d(x, {h / o[0], w / o[1]});
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < o[0]; ++i) {
    Tensor band = slice(x, 2, i * h / o[0], ((i + 1) * h + o[0] - 1) / o[0]);
    std::vector<Tensor> cells;
    for (int64_t j = 0; j < o[1]; ++j)
      cells.push_back(mean(slice(band, 3, j * w / o[1], ((j + 1) * w + o[1] - 1) / o[1]), {2, 3}, true));
    rows.push_back(concat(cells, 3));
  }
  return concat(rows, 2);
}

}  // namespace gbx::nn
