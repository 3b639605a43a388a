// ConvTranspose (ai.onnx opsets 1-17) on oneDNN's deconvolution, cpu.dnnl engine.
//
// Handled here: float32, 2-D (NCHW), any group, strides, dilations, pads, output_padding,
// output_shape and every auto_pad, with optional bias. The geometry comes from the
// reference's make_transpose_window, so both engines agree on output sizes and errors. ONNX
// stores W as [C, M/group, kH, kW] (input channels first): oneDNN reads it as the iohw /
// giohw layout of its [M, C, kH, kW] weights, reordered once into the primitive's layout
// and cached like Conv's. Activations use the primitive's preferred layout with a reorder
// from/to NCHW per run (conv.cc's NCHW path). Everything else (1-D/3-D, other dtypes,
// empty tensors, a negative begin pad from an output_shape past the natural size, invalid input)
// is refused by conv_transpose_supports(), so the node runs on the next engine (cpu.ref).
#include <string>
#include <vector>

#include "base/logging.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/cpu/ref/nn_util.h"

namespace gearbox::dnnl_engine {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct DeconvPrim : ConvLayouts {
  dnnl::deconvolution_forward prim;
};

// The checks on concrete dims x, w and b (null: no bias); "" when handled, else why not.
std::string conv_transpose_refusal(const KernelContext& attrs, const Dims& x, const Dims& w, const Dims* b) {
  if (x.size() != 4 || w.size() != 4) return "X or W is not 4-D";
  if (dims_numel(x) == 0) return "X is empty";
  const int64_t group = attrs.attr_int("group", 1);
  const int64_t c = x[1];
  if (group < 1 || c % group != 0 || w[0] != c) return "group and channels do not fit";  // the reference's error
  const int64_t m = w[1] * group;
  const std::vector<int64_t> kernel{w[2], w[3]};
  if (attrs.has_attr("kernel_shape") && attrs.attr_ints("kernel_shape") != kernel) return "kernel_shape differs from W";
  if (b && (b->size() != 1 || (*b)[0] != m)) return "B " + to_string(*b) + " is not [M]";
  auto win = ref::nn::make_transpose_window(attrs, {x[2], x[3]}, kernel);
  if (!win.ok()) return "the window is invalid (the reference reports it)";
  // A negative begin pad (an output_shape or SAME output past the natural size, extra
  // positions split to both ends) is refused by oneDNN; a negative end pad it takes.
  if (win->pad_begin[0] < 0 || win->pad_begin[1] < 0) return "a begin pad is negative";
  return "";
}

Verdict conv_transpose_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  if (q.has_input(2)) {
    if (Verdict v = need_tensors(q, {2}); !v.accepted()) return v;
  }
  if ((q.rank(0) >= 0 && q.rank(0) != 4) || (q.rank(1) >= 0 && q.rank(1) != 4)) return refuse("X or W is not 4-D");
  const Dims* x = q.dims(0);
  const Dims* w = q.dims(1);
  const Dims* b = q.has_input(2) ? q.dims(2) : nullptr;
  if (!x || !w || (q.has_input(2) && !b)) return later();
  std::vector<RuntimeValue> none;
  const KernelContext attrs(q.op(), {}, &none, {});  // the window reads attributes only
  const std::string why = conv_transpose_refusal(attrs, *x, *w, b);
  return why.empty() ? accept() : refuse(why);
}

Status conv_transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (std::string why = conv_transpose_refusal(ctx, x.dims(), w.dims(), b ? &b->dims() : nullptr); !why.empty())
    return outside_supports(ctx, why);
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t mg = w.dim(1), m = mg * group;
  const std::vector<int64_t> kernel{w.dim(2), w.dim(3)};
  auto win = ref::nn::make_transpose_window(ctx, {x.dim(2), x.dim(3)}, kernel);
  if (!win.ok()) return win.status();
  const Dims ydims{n, m, win->out[0], win->out[1]};
  const std::string key = "deconv|" + to_string(x.dims()) + to_string(w.dims()) + "g" + std::to_string(group) + "s" +
                          to_string(win->strides) + "d" + to_string(win->dilations) + "p" + to_string(win->pad_begin) +
                          to_string(win->pad_end) + "o" + to_string(win->out) + (b ? "b" : "");
  try {
    auto p = cached<DeconvPrim>(key, [&] {
      auto dp = std::make_shared<DeconvPrim>();
      const auto f32 = memory::data_type::f32;
      const memory::dims src_d = to_dims(x.dims()), dst_d = to_dims(ydims);
      const memory::dims wei_d = group > 1 ? memory::dims{group, mg, c / group, kernel[0], kernel[1]}
                                           : memory::dims{m, c, kernel[0], kernel[1]};
      dp->src_plain = plain_md(src_d);
      dp->dst_plain = plain_md(dst_d);
      dp->wei_plain = memory::desc(wei_d, f32, group > 1 ? tag::giohw : tag::iohw);
      dp->bias_plain = plain_md({m});
      const memory::desc src_any(src_d, f32, tag::any), dst_any(dst_d, f32, tag::any), wei_any(wei_d, f32, tag::any);
      const memory::dims strides{win->strides[0], win->strides[1]};
      const memory::dims dil{win->dilations[0] - 1, win->dilations[1] - 1};
      const memory::dims pl{win->pad_begin[0], win->pad_begin[1]}, pr{win->pad_end[0], win->pad_end[1]};
      const auto prop = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::deconvolution_direct;
      auto desc = b ? dnnl::deconvolution_forward::desc(prop, alg, src_any, wei_any, dp->bias_plain, dst_any, strides,
                                                        dil, pl, pr)
                    : dnnl::deconvolution_forward::desc(prop, alg, src_any, wei_any, dst_any, strides, dil, pl, pr);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per-run scratch (conv.cc)
      dnnl::deconvolution_forward::primitive_desc pd(desc, attr, cpu_engine());
      dp->src_md = pd.src_desc();
      dp->wei_md = pd.weights_desc();
      dp->dst_md = pd.dst_desc();
      dp->scratch_md = pd.scratchpad_desc();
      dp->prim = dnnl::deconvolution_forward(pd);
      return dp;
    });

    GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, ydims));
    GBX_RETURN_IF_ERROR(execute_conv_like(p->prim, *p, x, w, ctx.input_is_constant(1), b, nullptr, false, y));
    ctx.set_output(0, std::move(y));
    return Status::OK();
  } catch (const dnnl::error& e) {
    return dnnl_refused(ctx, e);
  }
}

GBX_REGISTER_KERNEL({"", "ConvTranspose", 1, 18, kEngineDnnl, {DType::F32}, conv_transpose});
GBX_KERNEL_SUPPORT(conv_transpose,
                   {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}}, .supports = conv_transpose_supports});

}  // namespace
}  // namespace gearbox::dnnl_engine
