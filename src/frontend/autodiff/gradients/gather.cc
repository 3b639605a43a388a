// Gradients of Gather on axis 0 (nn::embedding): the output gradient's rows scatter-added
// (ScatterND, reduction add) into zeros of the data's shape, so repeated ids sum; and of
// GatherElements (the class-id losses): the output gradient scatter-added (ScatterElements)
// at the same indices on the same axis.
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

void register_gather_gradients(GradientRegistry& r) {
  r.add("", "Gather", [](const TapeNode& n, const std::vector<Tensor>& g) -> std::vector<Tensor> {
    const Tensor &data = n.inputs[0], &ids = n.inputs[1];
    auto it = n.attrs.find("axis");
    if (it != n.attrs.end() && it->second.i != 0)
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "the Gather gradient handles axis 0 only (",
                                       "got axis ", it->second.i, ")"));
    // Rows of the data: [n_ids, row...]; ids as ScatterND's [n_ids, 1] index tuples.
    std::vector<int64_t> rows{ids.numel()};
    rows.insert(rows.end(), data.shape().begin() + 1, data.shape().end());
    return {
        apply1({"ScatterND"}, {Tensor::zeros(data.shape(), data.dtype()), reshape(ids, {-1, 1}), reshape(g[0], rows)},
               {{"reduction", gearbox::attr_string("add")}}),
        Tensor()};
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
