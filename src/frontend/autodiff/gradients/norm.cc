// Gradients of BatchNormalization (training mode: through the batch statistics, one fused
// kernel, com.gearbox.BatchNormalizationGrad; inference mode: the running statistics are
// constants) and LayerNormalization, the closed forms torch uses, written with eager ops. With
// x^ = (x - mean) * invstd and gg = g * scale:
//   dx = invstd * (gg - mean(gg) - x^ * mean(gg * x^))   (means over the normalized axes)
//   dscale = sum(g * x^), dbias = sum(g)                 (over the other axes)
#include <numeric>

#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"
#include "kernels/kernel.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;

float attr_eps(const TapeNode& n) {
  auto it = n.attrs.find("epsilon");
  return it == n.attrs.end() ? 1e-5f : it->second.f;
}

// invstd = (var + eps)^(-1/2).
Tensor inv_std(const Tensor& var, double eps) { return pow(add(var, scalar_like(var, eps)), -0.5); }
}  // namespace

void register_norm_gradients(GradientRegistry& r) {
  r.add("", "BatchNormalization", [](const TapeNode& n, const Grads& g) -> Grads {
    if (!g[0].defined()) return {};
    const Tensor &x = n.inputs[0], &scale = n.inputs[1];
    auto it = n.attrs.find("training_mode");
    const bool training = it != n.attrs.end() && it->second.i != 0;
    // Per-channel vectors as [1, C, 1, ...] to broadcast against x.
    std::vector<int64_t> cshape(x.rank(), 1);
    cshape[1] = x.dim(1);
    std::vector<int64_t> axes{0};
    for (size_t i = 2; i < x.rank(); ++i) axes.push_back(static_cast<int64_t>(i));
    // Training mode ran with momentum 0 (ops/norm.cc), so outputs 1 and 2 are the batch mean
    // and population variance; inference mode normalized with inputs 3 and 4.
    if (training) {
      auto m = n.attrs.find("momentum");
      if (m == n.attrs.end() || m->second.f != 0.0f)
        throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED,
                                         "the BatchNormalization training-mode gradient needs momentum=0 (the "
                                         "batch statistics as outputs 1 and 2), as nn::batch_norm records it"));
    }
    const Tensor& gy = g[0];
    if (training) {
      // One fused kernel (its closed form is the one above, with mean and var the forward's
      // batch statistics).
      std::vector<Tensor> grads =
          apply({"BatchNormalizationGrad", std::string(gearbox::kGearboxDomain), 1},
                {gy, x, scale, n.outputs[1], n.outputs[2]}, {{"epsilon", gearbox::attr_float(attr_eps(n))}}, 3);
      return {grads[0], grads[1], grads[2], Tensor(), Tensor()};
    }
    Tensor invstd = reshape(inv_std(n.inputs[4], attr_eps(n)), cshape);
    Tensor xhat = mul(sub(x, reshape(n.inputs[3], cshape)), invstd);
    return {mul(mul(gy, reshape(scale, cshape)), invstd), sum(mul(gy, xhat), axes), sum(gy, axes), Tensor(), Tensor()};
  });
  r.add("", "LayerNormalization", [](const TapeNode& n, const Grads& g) -> Grads {
    if (!g[0].defined()) return {};
    const Tensor &x = n.inputs[0], &scale = n.inputs[1];
    auto it = n.attrs.find("axis");
    const int64_t axis = normalize_axis(it == n.attrs.end() ? -1 : it->second.i, x.rank(), "LayerNormalization");
    std::vector<int64_t> axes(x.rank() - static_cast<size_t>(axis));
    std::iota(axes.begin(), axes.end(), axis);
    // The statistics again (the kernel's Mean/InvStdDev outputs are float32 by default).
    Tensor centered = sub(x, mean(x, axes, true));
    Tensor invstd = inv_std(mean(mul(centered, centered), axes, true), attr_eps(n));
    Tensor xhat = mul(centered, invstd);
    const Tensor& gy = g[0];
    Tensor gg = mul(gy, scale);
    Tensor dx = mul(invstd, sub(sub(gg, mean(gg, axes, true)), mul(xhat, mean(mul(gg, xhat), axes, true))));
    Grads out{dx, sum_to(mul(gy, xhat), scale.shape()), Tensor()};
    if (n.inputs.size() > 2 && n.inputs[2].defined()) out[2] = sum_to(gy, n.inputs[2].shape());
    return out;
  });
}

}  // namespace gbx::nn
