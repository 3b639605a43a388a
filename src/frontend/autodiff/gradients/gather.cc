// Gradients of Gather (nn::embedding on axis 0; any axis in imported models): the output
// gradient's rows scatter-added (ScatterND, reduction add) into zeros of the data's shape, so
// repeated ids sum; and of
// GatherElements (the class-id losses): the output gradient scatter-added (ScatterElements)
// at the same indices on the same axis.
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

void register_gather_gradients(GradientRegistry& r) {
  r.add("", "Gather", [](const TapeNode& n, const std::vector<Tensor>& g) -> std::vector<Tensor> {
    const Tensor &data = n.inputs[0], &ids = n.inputs[1];
    auto it = n.attrs.find("axis");
    const int64_t axis = normalize_axis(it == n.attrs.end() ? 0 : it->second.i, data.rank(), "Gather");
    const Tensor zeros = Tensor::zeros(data.shape(), data.dtype());
    const gearbox::AttributeMap add{{"reduction", gearbox::attr_string("add")}};
    if (axis == 0) {
      // Rows of the data: [n_ids, row...]; ids as ScatterND's [n_ids, 1] index tuples.
      std::vector<int64_t> rows{ids.numel()};
      rows.insert(rows.end(), data.shape().begin() + 1, data.shape().end());
      return {apply1({"ScatterND"}, {zeros, reshape(ids, {-1, 1}), reshape(g[0], rows)}, add), Tensor()};
    }
    // Another axis (an exported x[:, -1], for one): the gathered axis brought to the front,
    // [before, ids, after] -> [ids, before, after], scattered the same way into
    // [data's axis, before, after], and put back.
    int64_t before = 1, after = 1;
    for (int64_t a = 0; a < axis; ++a) before *= data.dim(static_cast<size_t>(a));
    for (size_t a = static_cast<size_t>(axis) + 1; a < data.rank(); ++a) after *= data.dim(a);
    const int64_t size = data.dim(static_cast<size_t>(axis));
    const Tensor updates = transpose(reshape(g[0], {before, ids.numel(), after}), {1, 0, 2});
    const Tensor scattered =
        apply1({"ScatterND"}, {reshape(zeros, {size, before, after}), reshape(ids, {-1, 1}), updates}, add);
    return {reshape(transpose(scattered, {1, 0, 2}), data.shape()), Tensor()};
  });
  r.add("", "GatherElements", [](const TapeNode& n, const std::vector<Tensor>& g) -> std::vector<Tensor> {
    const Tensor& data = n.inputs[0];
    auto it = n.attrs.find("axis");
    const int64_t axis = it == n.attrs.end() ? 0 : it->second.i;
    return {apply1({"ScatterElements"}, {Tensor::zeros(data.shape(), data.dtype()), n.inputs[1], g[0]},
                   {{"axis", gearbox::attr_int(axis)}, {"reduction", gearbox::attr_string("add")}}),
            Tensor()};
  });
}

}  // namespace gbx::nn
