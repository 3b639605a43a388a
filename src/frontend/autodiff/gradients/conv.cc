// Gradient of Conv (2-D, any strides, pads, dilations, groups), on the convolution kernels
// themselves: the input gradient is ConvTranspose of the output gradient with the same
// weight (a Conv weight [M, C/g, k] is exactly ConvTranspose's [C_in = M, C_out/g = C/g, k]);
// the weight gradient is, per group, a Conv of the input with the output gradient as the
// filter, batch and channels swapped, where the forward stride becomes the dilation and the
// forward dilation the stride.
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;

std::vector<int64_t> ints_or(const TapeNode& n, const char* name, std::vector<int64_t> def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.ints;
}
}  // namespace

void register_conv_gradients(GradientRegistry& r) {
  r.add("", "Conv", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor &x = n.inputs[0], &w = n.inputs[1];
    if (!g[0].defined()) return {};
    if (x.rank() != 4)
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED,
                                       "the Conv gradient handles 2-D "
                                       "convolutions only; this one has input ",
                                       x.describe()));
    const std::vector<int64_t> s = ints_or(n, "strides", {1, 1}), d = ints_or(n, "dilations", {1, 1}),
                               p = ints_or(n, "pads", {0, 0, 0, 0});
    auto it = n.attrs.find("group");
    const int64_t groups = it == n.attrs.end() ? 1 : it->second.i;
    const Tensor& gy = g[0];
    Grads out(n.inputs.size());
    if (x.requires_grad()) {
      // ConvTranspose's output size is (in - 1) s - pads + d (k - 1) + 1; output_padding adds
      // the rows the forward stride skipped at the end.
      std::vector<int64_t> out_pad(2);
      for (size_t i = 0; i < 2; ++i)
        out_pad[i] = x.dim(2 + i) - ((gy.dim(2 + i) - 1) * s[i] - p[i] - p[i + 2] + d[i] * (w.dim(2 + i) - 1) + 1);
      out[0] = apply1({"ConvTranspose"}, {gy, w},
                      {{"strides", gearbox::attr_ints(s)},
                       {"pads", gearbox::attr_ints(p)},
                       {"dilations", gearbox::attr_ints(d)},
                       {"group", gearbox::attr_int(groups)},
                       {"output_padding", gearbox::attr_ints(out_pad)}});
    }
    if (w.requires_grad()) {
      const int64_t cg = x.dim(1) / groups, mg = w.dim(0) / groups;
      std::vector<Tensor> parts;
      for (int64_t k = 0; k < groups; ++k) {
        Tensor xg = groups == 1 ? x : slice(x, 1, k * cg, (k + 1) * cg);
        Tensor gg = groups == 1 ? gy : slice(gy, 1, k * mg, (k + 1) * mg);
        // [Cg, N, H, W] conv [Mg, N, Ho, Wo] -> [Cg, Mg, >= kH, >= kW]: entries past the kernel
        // come from the end padding and are dropped.
        Tensor dw = apply1({"Conv"}, {transpose(xg, {1, 0, 2, 3}), transpose(gg, {1, 0, 2, 3})},
                           {{"strides", gearbox::attr_ints(d)},
                            {"dilations", gearbox::attr_ints(s)},
                            {"pads", gearbox::attr_ints(p)}});
        if (dw.dim(2) != w.dim(2)) dw = slice(dw, 2, 0, w.dim(2));
        if (dw.dim(3) != w.dim(3)) dw = slice(dw, 3, 0, w.dim(3));
        parts.push_back(transpose(dw, {1, 0, 2, 3}));
      }
      out[1] = groups == 1 ? parts[0] : concat(parts, 0);
    }
    if (n.inputs.size() > 2 && n.inputs[2].defined()) out[2] = sum(gy, {0, 2, 3});
    return out;
  });
}

}  // namespace gbx::nn
