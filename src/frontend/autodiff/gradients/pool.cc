// Gradients of the 2-D pools. MaxPool: the output gradient added at the positions its Indices
// output names (com.gearbox.MaxPoolGrad; flat over N, C, H, W, as the reference kernel writes
// them). AveragePool: a depthwise ConvTranspose of the output
// gradient divided by each window's divisor (the window size, or with count_include_pad=0 the
// number of unpadded elements, computed here from the geometry). GlobalAveragePool: the
// gradient spread evenly over the plane.
#include <algorithm>

#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"
#include "kernels/kernel.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;

std::vector<int64_t> ints_or(const TapeNode& n, const char* name, std::vector<int64_t> def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.ints;
}

// [1, 1, Ho, Wo] divisors of AveragePool's windows.
Tensor divisors(const TapeNode& n, const Tensor& x, const Tensor& y) {
  const std::vector<int64_t> k = n.attrs.at("kernel_shape").ints, s = ints_or(n, "strides", k),
                             p = ints_or(n, "pads", {0, 0, 0, 0});
  auto it = n.attrs.find("count_include_pad");
  const bool include_pad = it != n.attrs.end() && it->second.i != 0;
  const int64_t ho = y.dim(2), wo = y.dim(3);
  std::vector<double> div(static_cast<size_t>(ho * wo));
  for (int64_t i = 0; i < ho; ++i)
    for (int64_t j = 0; j < wo; ++j) {
      // The window's extent clipped to the padded input (include_pad) or to the input.
      auto extent = [&](int64_t o, size_t a, bool padded) {
        const int64_t lo = o * s[a] - p[a], hi = lo + k[a];
        const int64_t min = padded ? -p[a] : 0, max = padded ? x.dim(2 + a) + p[a + 2] : x.dim(2 + a);
        return std::max<int64_t>(0, std::min(hi, max) - std::max(lo, min));
      };
      div[static_cast<size_t>(i * wo + j)] = static_cast<double>(extent(i, 0, include_pad) * extent(j, 1, include_pad));
    }
  return Tensor::from_vector(div, {1, 1, ho, wo}).to(x.dtype());
}
}  // namespace

void register_pool_gradients(GradientRegistry& r) {
  r.add("", "MaxPool", [](const TapeNode& n, const Grads& g) -> Grads {
    if (!g[0].defined()) return {};
    const Tensor& x = n.inputs[0];
    if (n.outputs.size() < 2)
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::INTERNAL, "MaxPool was recorded without its Indices output"));
    return {apply1({"MaxPoolGrad", std::string(gearbox::kGearboxDomain), 1},
                   {g[0], n.outputs[1], Tensor::from_vector(x.shape(), {static_cast<int64_t>(x.rank())})})};
  });
  r.add("", "AveragePool", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& x = n.inputs[0];
    if (x.rank() != 4)
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED,
                                       "the AveragePool gradient handles 2-D pools only; this input is ",
                                       x.describe()));
    auto ceil = n.attrs.find("ceil_mode");
    if (ceil != n.attrs.end() && ceil->second.i != 0)
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED,
                                       "the AveragePool gradient does not handle ceil_mode=1"));
    const std::vector<int64_t> k = n.attrs.at("kernel_shape").ints, s = ints_or(n, "strides", k),
                               p = ints_or(n, "pads", {0, 0, 0, 0});
    const Tensor& gy = g[0];
    const int64_t c = x.dim(1);
    std::vector<int64_t> out_pad(2);
    for (size_t i = 0; i < 2; ++i) out_pad[i] = x.dim(2 + i) - ((gy.dim(2 + i) - 1) * s[i] - p[i] - p[i + 2] + k[i]);
    Tensor ones = Tensor::full({c, 1, k[0], k[1]}, 1.0, x.dtype());
    return {apply1({"ConvTranspose"}, {div(gy, divisors(n, x, gy)), ones},
                   {{"strides", gearbox::attr_ints(s)},
                    {"pads", gearbox::attr_ints(p)},
                    {"group", gearbox::attr_int(c)},
                    {"output_padding", gearbox::attr_ints(out_pad)}})};
  });
  r.add("", "GlobalAveragePool", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& x = n.inputs[0];
    const double plane = static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(1, g[0].numel()));
    return {div(expand(g[0], x.shape()), scalar_like(x, plane))};
  });
}

}  // namespace gbx::nn
