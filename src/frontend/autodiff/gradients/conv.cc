// Gradients of Conv and ConvTranspose (1-D to 3-D, any strides, pads, dilations, groups), on
// the convolution kernels themselves. Conv: the input gradient is ConvTranspose of the output
// gradient with the same weight (a Conv weight [M, C/g, k] is exactly ConvTranspose's
// [C_in = M, C_out/g = C/g, k]); the weight gradient is, per group, a Conv of the input with
// the output gradient as the filter, batch and channels swapped, where the forward stride
// becomes the dilation and the forward dilation the stride. ConvTranspose: the same two, the
// other way round (below).
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;

std::vector<int64_t> ints_or(const TapeNode& n, const char* name, std::vector<int64_t> def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.ints;
}

// A convolution node's strides, dilations, pads and groups, ONNX's defaults filled in, for
// `nd` spatial dims.
struct Geometry {
  std::vector<int64_t> strides, dilations, pads;
  int64_t groups = 1;
};

Geometry geometry(const TapeNode& n, const Tensor& x, const char* op) {
  if (x.rank() < 3 || x.rank() > 5)
    throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "the ", op,
                                     " gradient handles 1-D to 3-D convolutions; this one has input ", x.describe()));
  for (const char* unsupported : {"auto_pad", "output_shape"}) {
    auto it = n.attrs.find(unsupported);
    if (it != n.attrs.end() && !(it->second.s.empty() || it->second.s == "NOTSET"))
      throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "the ", op, " gradient needs explicit ",
                                       "pads; this node sets ", unsupported));
  }
  const size_t nd = x.rank() - 2;
  Geometry geo{ints_or(n, "strides", std::vector<int64_t>(nd, 1)), ints_or(n, "dilations", std::vector<int64_t>(nd, 1)),
               ints_or(n, "pads", std::vector<int64_t>(2 * nd, 0)), 1};
  auto it = n.attrs.find("group");
  if (it != n.attrs.end()) geo.groups = it->second.i;
  return geo;
}

// The axes permutation that swaps the first two (batch and channels).
std::vector<int64_t> swap01(size_t rank) {
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[0], perm[1]);
  return perm;
}

// The gradient of Conv(x, w) with respect to w (shape `w_shape`) for the output gradient gy:
// per group a Conv of x with gy as the filter, batch and channels swapped
// ([Cg, N, ...] conv [Mg, N, ...] -> [Cg, Mg, >= k...]), the forward stride as its dilation
// and the forward dilation as its stride; entries past the kernel come from the end padding
// and are dropped.
Tensor conv_weight_gradient(const Tensor& x, const Tensor& gy, const std::vector<int64_t>& w_shape,
                            const Geometry& geo) {
  const size_t rank = x.rank();
  const int64_t cg = x.dim(1) / geo.groups, mg = w_shape[0] / geo.groups;
  std::vector<Tensor> parts;
  for (int64_t k = 0; k < geo.groups; ++k) {
    Tensor xg = geo.groups == 1 ? x : slice(x, 1, k * cg, (k + 1) * cg);
    Tensor gg = geo.groups == 1 ? gy : slice(gy, 1, k * mg, (k + 1) * mg);
    Tensor dw = apply1({"Conv"}, {transpose(xg, swap01(rank)), transpose(gg, swap01(rank))},
                       {{"strides", gearbox::attr_ints(geo.dilations)},
                        {"dilations", gearbox::attr_ints(geo.strides)},
                        {"pads", gearbox::attr_ints(geo.pads)}});
    for (size_t i = 2; i < rank; ++i)
      if (dw.dim(i) != w_shape[i]) dw = slice(dw, static_cast<int64_t>(i), 0, w_shape[i]);
    parts.push_back(transpose(dw, swap01(rank)));
  }
  return geo.groups == 1 ? parts[0] : concat(parts, 0);
}

// The bias gradient: the output gradient summed over all but the channels.
Tensor bias_gradient(const Tensor& gy) {
  std::vector<int64_t> axes{0};
  for (size_t i = 2; i < gy.rank(); ++i) axes.push_back(static_cast<int64_t>(i));
  return sum(gy, axes);
}

gearbox::AttributeMap conv_attrs(const Geometry& geo) {
  return {{"strides", gearbox::attr_ints(geo.strides)},
          {"pads", gearbox::attr_ints(geo.pads)},
          {"dilations", gearbox::attr_ints(geo.dilations)},
          {"group", gearbox::attr_int(geo.groups)}};
}

}  // namespace

void register_conv_gradients(GradientRegistry& r) {
  r.add("", "Conv", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor &x = n.inputs[0], &w = n.inputs[1];
    if (!g[0].defined()) return {};
    const Geometry geo = geometry(n, x, "Conv");
    const size_t nd = x.rank() - 2;
    const Tensor& gy = g[0];
    Grads out(n.inputs.size());
    if (x.requires_grad()) {
      // ConvTranspose's output size is (in - 1) s - pads + d (k - 1) + 1; output_padding adds
      // the rows the forward stride skipped at the end.
      std::vector<int64_t> out_pad(nd);
      for (size_t i = 0; i < nd; ++i)
        out_pad[i] = x.dim(2 + i) - ((gy.dim(2 + i) - 1) * geo.strides[i] - geo.pads[i] - geo.pads[i + nd] +
                                     geo.dilations[i] * (w.dim(2 + i) - 1) + 1);
      gearbox::AttributeMap attrs = conv_attrs(geo);
      attrs["output_padding"] = gearbox::attr_ints(out_pad);
      out[0] = apply1({"ConvTranspose"}, {gy, w}, attrs);
    }
    if (w.requires_grad()) out[1] = conv_weight_gradient(x, gy, w.shape(), geo);
    if (n.inputs.size() > 2 && n.inputs[2].defined()) out[2] = bias_gradient(gy);
    return out;
  });
  // ConvTranspose(x, w) is the input gradient of Conv(., w) applied to x, so its own input
  // gradient is Conv(gy, w) with the same attributes, and its weight gradient Conv's weight
  // gradient with the roles swapped: <ConvTranspose(x, w), gy> = <x, Conv(gy, w)>.
  r.add("", "ConvTranspose", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor &x = n.inputs[0], &w = n.inputs[1];
    if (!g[0].defined()) return {};
    const Geometry geo = geometry(n, x, "ConvTranspose");
    const Tensor& gy = g[0];
    Grads out(n.inputs.size());
    if (x.requires_grad()) out[0] = apply1({"Conv"}, {gy, w}, conv_attrs(geo));
    if (w.requires_grad()) out[1] = conv_weight_gradient(gy, x, w.shape(), geo);
    if (n.inputs.size() > 2 && n.inputs[2].defined()) out[2] = bias_gradient(gy);
    return out;
  });
}

}  // namespace gbx::nn
