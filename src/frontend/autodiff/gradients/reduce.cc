// Gradients of ReduceSum / ReduceMean (the gradient broadcast back over the reduced axes)
// and of Expand (the broadcast's own reduction).
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;

// The output's shape with the reduced axes kept as 1 (what keepdims=1 gives).
std::vector<int64_t> kept_shape(const std::vector<int64_t>& in_shape, std::vector<int64_t> axes) {
  std::vector<int64_t> s = in_shape;
  if (axes.empty())
    for (size_t i = 0; i < s.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  for (int64_t a : axes) s[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(s.size()) : a)] = 1;
  return s;
}

Tensor spread(const Tensor& g, const Tensor& x, const std::vector<int64_t>& axes) {
  return expand(reshape(g, kept_shape(x.shape(), axes)), x.shape());
}
}  // namespace

void register_reduce_gradients(GradientRegistry& r) {
  r.add("", "ReduceSum", [](const TapeNode& n, const Grads& g) -> Grads {
    std::vector<int64_t> axes = n.inputs.size() > 1 && n.inputs[1].defined() ? n.inputs[1].to_int64_vector() : std::vector<int64_t>{};
    return {spread(g[0], n.inputs[0], axes), Tensor()};
  });
  r.add("", "ReduceMean", [](const TapeNode& n, const Grads& g) -> Grads {
    auto it = n.attrs.find("axes");
    std::vector<int64_t> axes = it == n.attrs.end() ? std::vector<int64_t>{} : it->second.ints;
    const Tensor& x = n.inputs[0];
    const double count = static_cast<double>(x.numel()) / static_cast<double>(n.outputs[0].numel());
    return {div(spread(g[0], x, axes), scalar_like(x, count))};
  });
  r.add("", "Expand", [](const TapeNode& n, const Grads& g) -> Grads {
    return {sum_to(g[0], n.inputs[0].shape()), Tensor()};
  });
}

}  // namespace gbx::nn
