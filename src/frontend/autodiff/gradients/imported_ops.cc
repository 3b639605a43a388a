// Gradients of ONNX ops that imported models use and nn's own ops do not record
// (torch.onnx.export writes Flatten for torch.flatten, Squeeze/Unsqueeze around reductions,
// Identity, Dropout in inference mode: the output gradient reshaped to the input's shape; Pad,
// which it puts before AveragePool: the output gradient with the padding cut off; and Where, which
// masked_fill and attention masks export as: the gradient routed to the branch each element came
// from).
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;
// The gradient of data input 0 is g reshaped back; every other input (axes) takes none.
Grads reshaped_back(const TapeNode& n, const Grads& g) {
  Grads out(n.inputs.size());
  if (g.empty() || !g[0].defined()) return out;
  out[0] = reshape(g[0], n.inputs[0].shape());
  return out;
}
}  // namespace

void register_imported_op_gradients(GradientRegistry& r) {
  for (const char* op : {"Flatten", "Squeeze", "Unsqueeze", "Identity"}) r.add("", op, reshaped_back);
  // Dropout as exported for inference (no training_mode input, or false): the identity. A
  // training-mode Dropout's mask is its second output, which this builder does not read.
  r.add("", "Dropout", [](const TapeNode& n, const Grads& g) -> Grads {
    if (n.inputs.size() > 2 && n.inputs[2].defined() &&
        value_of(n.inputs[2], "Dropout's training_mode").at_double(0) != 0)
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED,
                                       "the Dropout gradient handles inference mode only (training_mode false)"));
    return reshaped_back(n, g);
  });
  // Where(condition, X, Y): X's gradient where the condition holds, Y's elsewhere, each summed back
  // to its own (broadcast) shape; the condition takes none.
  r.add("", "Where", [](const TapeNode& n, const Grads& g) -> Grads {
    Grads out(3);
    if (g.empty() || !g[0].defined()) return out;
    const Tensor& cond = n.inputs[0];
    const Tensor zero = scalar_like(g[0], 0.0);
    if (n.inputs[1].requires_grad()) out[1] = sum_to(apply1({"Where"}, {cond, g[0], zero}), n.inputs[1].shape());
    if (n.inputs[2].requires_grad()) out[2] = sum_to(apply1({"Where"}, {cond, zero, g[0]}), n.inputs[2].shape());
    return out;
  });
  // Constant-mode Pad with non-negative pads: the input sits at [begin, begin + dim) of the
  // output on each padded axis, so its gradient is that window of the output's.
  r.add("", "Pad", [](const TapeNode& n, const Grads& g) -> Grads {
    Grads out(n.inputs.size());
    if (g.empty() || !g[0].defined()) return out;
    auto mode = n.attrs.find("mode");
    if (mode != n.attrs.end() && mode->second.s != "constant")
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "the Pad gradient handles mode ",
                                       "'constant' only, not '", mode->second.s, "'"));
    const Tensor& x = n.inputs[0];
    const size_t rank = x.rank();
    const std::vector<int64_t> pads = n.inputs.at(1).to_int64_vector();
    std::vector<int64_t> axes(rank);
    for (size_t a = 0; a < rank; ++a) axes[a] = static_cast<int64_t>(a);
    if (n.inputs.size() > 3 && n.inputs[3].defined()) axes = n.inputs[3].to_int64_vector();
    if (pads.size() != 2 * axes.size())
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Pad: ", pads.size(), " pads for ",
                                       axes.size(), " axes"));
    Tensor gx = g[0];
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t axis = normalize_axis(axes[k], rank, "Pad");
      const int64_t begin = pads[k], end = pads[k + axes.size()];
      if (begin < 0 || end < 0)
        throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED,
                                         "the Pad gradient does not handle negative pads (cropping)"));
      if (begin != 0 || end != 0) gx = slice(gx, axis, begin, begin + x.dim(static_cast<size_t>(axis)));
    }
    out[0] = gx;
    return out;
  });
}

}  // namespace gbx::nn
