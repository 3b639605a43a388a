// Gradients of the data-movement ops: Reshape, Transpose, Concat, Slice, Split.
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;
}  // namespace

void register_shape_gradients(GradientRegistry& r) {
  r.add("", "Reshape", [](const TapeNode& n, const Grads& g) -> Grads {
    return {reshape(g[0], n.inputs[0].shape()), Tensor()};
  });
  r.add("", "Transpose", [](const TapeNode& n, const Grads& g) -> Grads {
    const std::vector<int64_t>& perm = n.attrs.at("perm").ints;
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    return {transpose(g[0], inverse)};
  });
  // Each input's gradient is its stretch of the output's along the axis.
  r.add("", "Concat", [](const TapeNode& n, const Grads& g) -> Grads {
    const int64_t axis = n.attrs.at("axis").i;
    Grads out;
    int64_t offset = 0;
    for (const Tensor& x : n.inputs) {
      const int64_t len = x.dim(static_cast<size_t>(axis));
      out.push_back(slice(g[0], axis, offset, offset + len));
      offset += len;
    }
    return out;
  });
  // The output's gradient put back at its place in zeros of the input's shape (step 1).
  r.add("", "Slice", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor& x = n.inputs[0];
    const size_t rank = x.rank();
    const std::vector<int64_t> starts = n.inputs[1].to_int64_vector(), axes = n.inputs[3].to_int64_vector();
    std::vector<int64_t> pads(2 * rank, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      const size_t axis = static_cast<size_t>(axes[k]);
      const int64_t dim = x.dim(axis);
      int64_t start = starts[k] < 0 ? starts[k] + dim : starts[k];
      start = std::min(std::max<int64_t>(start, 0), dim);
      pads[axis] = start;
      pads[rank + axis] = dim - start - g[0].dim(axis);
    }
    return {pad_zeros(g[0], pads), Tensor(), Tensor(), Tensor()};
  });
  // The pieces' gradients side by side again; a piece that got none contributes zeros.
  r.add("", "Split", [](const TapeNode& n, const Grads& g) -> Grads {
    Grads pieces;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Tensor& y = n.outputs[i];
      pieces.push_back(i < g.size() && g[i].defined() ? g[i] : Tensor::zeros(y.shape(), y.dtype()));
    }
    return {concat(pieces, n.attrs.at("axis").i)};
  });
}

}  // namespace gbx::nn
