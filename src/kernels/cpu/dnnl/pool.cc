// MaxPool (ai.onnx opsets 1-18), AveragePool (1-21; dilated windows on the reference) and GlobalAveragePool on oneDNN,
// cpu.dnnl engine.
//
// Handled here: float32, 2-D (NCHW) windows with strides, explicit pads, every auto_pad,
// ceil_mode, MaxPool dilations (pooling_v2) and AveragePool's count_include_pad. The window
// geometry comes from the reference's make_window, so both engines agree on output sizes and
// errors; oneDNN takes explicit pads only, so ceil_mode becomes a larger end pad (max and
// exclude-padding average ignore padded cells, so the result is the same). Everything else
// is refused by pool_supports(), so the node runs on the next engine (the reference):
// 1-D/3-D, other dtypes, MaxPool's Indices output, empty tensors, and an averaging window
// that counts padding past the declared end pad (ceil_mode with count_include_pad: the
// reference clamps the divisor to the padded extent, oneDNN divides by the kernel size).
// MaxPool of a window holding NaN: oneDNN's max does not propagate NaN as the reference does.
//
// Layouts: the primitive reads and writes the tensor's own buffer, NCHW for the ai.onnx ops
// and channels-last for the layout pass's com.gearbox.NhwcMaxPool / NhwcAveragePool /
// NhwcGlobalAveragePool (same attributes, [N, H, W, C] tensors); no reorder runs.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/logging.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/cpu/ref/nn_util.h"

namespace gearbox::dnnl_engine {
namespace {

using dnnl::memory;

enum class Kind { Max, Average, GlobalAverage };

struct PoolPrim {
  dnnl::pooling_v2_forward prim;
  memory::desc src_md, dst_md, scratch_md;
};

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += std::to_string(x) + ",";
  return s;
}

// The window and algorithm of a pool over x (`attrs`: a context with the node's attributes;
// kNhwc: channels-last x); "" when this kernel handles it, else why not (a case the reference
// takes, with its result or its error).
template <Kind kKind, bool kNhwc>
std::string pool_plan(const KernelContext& attrs, const Dims& x, ref::nn::Window* out, dnnl::algorithm* out_alg) {
  if (x.size() != 4) return "the input is not 4-D";
  if (dims_numel(x) == 0) return "the input is empty";
  const Dims xl = kNhwc ? Dims{x[0], x[3], x[1], x[2]} : x;  // logical NCHW
  const std::vector<int64_t> in{xl[2], xl[3]};
  ref::nn::Window win;
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  if constexpr (kKind == Kind::GlobalAverage) {
    win.kernel = in;
    win.out = {1, 1};
    win.strides = win.dilations = {1, 1};
    win.pad_begin = win.pad_end = {0, 0};
    alg = dnnl::algorithm::pooling_avg_exclude_padding;
  } else {
    std::vector<int64_t> kernel = attrs.attr_ints("kernel_shape");
    if (kernel.size() != 2) return "the window is not 2-D";  // its error, or a 1-D/3-D window
    const bool ceil_mode = attrs.attr_int("ceil_mode", 0) != 0;
    const bool dilated_average = kKind == Kind::Average && attrs.opset() >= 19;  // AveragePool-19's dilations
    auto w = ref::nn::make_window(attrs, in, kernel, ceil_mode, kKind == Kind::Max || dilated_average);
    if (!w.ok()) return "the window is invalid (the reference reports it)";
    win = *w;
    if (dilated_average && (win.dilations[0] != 1 || win.dilations[1] != 1)) return "a dilated AveragePool window";
    if constexpr (kKind == Kind::Max) {
      const int64_t storage_order = attrs.attr_int("storage_order", 0);
      if (storage_order != 0 && storage_order != 1) return "storage_order is not 0 or 1";  // its error
    } else {
      const bool include_pad = attrs.attr_int("count_include_pad", 0) != 0;
      alg = include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding;
    }
    for (size_t i = 0; i < 2; ++i) {
      // A window wholly inside the padding: the reference's -inf / 0 results are its own.
      const int64_t ext = (win.kernel[i] - 1) * win.dilations[i] + 1;
      if (win.pad_begin[i] >= ext || win.pad_end[i] >= ext) return "a window lies wholly in the padding";
      // The end pad oneDNN needs for this output size (larger than the declared one under
      // ceil_mode); never smaller than the declared one, which floor division already allows.
      const int64_t need = (win.out[i] - 1) * win.strides[i] + ext - win.in[i] - win.pad_begin[i];
      if (need > win.pad_end[i]) {
        if (alg == dnnl::algorithm::pooling_avg_include_padding) return "ceil_mode with count_include_pad";
        win.pad_end[i] = need;
      }
    }
  }
  *out = win;
  *out_alg = alg;
  return "";
}

template <Kind kKind, bool kNhwc = false>
Verdict pool_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0}); !v.accepted()) return v;
  if (kKind == Kind::Max && q.wants_output(1)) return refuse("the Indices output is wanted");
  if (q.rank(0) >= 0 && q.rank(0) != 4) return refuse("the input is not 4-D");
  const Dims* x = q.dims(0);
  if (!x) return later();
  std::vector<RuntimeValue> none;
  const KernelContext attrs(q.op(), {}, &none, {});  // pool_plan reads attributes only
  ref::nn::Window win;
  dnnl::algorithm alg;
  const std::string why = pool_plan<kKind, kNhwc>(attrs, *x, &win, &alg);
  return why.empty() ? accept() : refuse(why);
}

// kNhwc: the layout pass's com.gearbox.Nhwc* pools, on channels-last [N, H, W, C] tensors.
template <Kind kKind, bool kNhwc = false>
Status pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Dims xl = kNhwc ? Dims{x.dim(0), x.dim(3), x.dim(1), x.dim(2)} : x.dims();  // logical NCHW
  ref::nn::Window win;
  dnnl::algorithm alg;
  if (std::string why = pool_plan<kKind, kNhwc>(ctx, x.dims(), &win, &alg); !why.empty())
    return outside_supports(ctx, why);
  const Dims yl{xl[0], xl[1], win.out[0], win.out[1]};
  const Dims ydims = kNhwc ? Dims{xl[0], win.out[0], win.out[1], xl[1]} : yl;

  const std::string key = std::string(kNhwc ? "pool_nhwc|" : "pool|") + std::to_string(static_cast<int>(alg)) +
                          to_string(x.dims()) + "k" + join(win.kernel) + "s" + join(win.strides) + "d" +
                          join(win.dilations) + "p" + join(win.pad_begin) + join(win.pad_end);
  try {
    auto p = cached<PoolPrim>(key, [&] {
      auto pp = std::make_shared<PoolPrim>();
      const auto layout = kNhwc ? memory::format_tag::nhwc : memory::format_tag::nchw;
      pp->src_md = memory::desc(to_dims(xl), memory::data_type::f32, layout);
      pp->dst_md = memory::desc(to_dims(yl), memory::data_type::f32, layout);
      const memory::dims strides{win.strides[0], win.strides[1]}, kernel{win.kernel[0], win.kernel[1]};
      const memory::dims dil{win.dilations[0] - 1, win.dilations[1] - 1};
      const memory::dims pl{win.pad_begin[0], win.pad_begin[1]}, pr{win.pad_end[0], win.pad_end[1]};
      dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, pp->src_md, pp->dst_md, strides,
                                          kernel, dil, pl, pr);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per run: concurrent runs share no scratch
      dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, cpu_engine());
      pp->scratch_md = pd.scratchpad_desc();
      pp->prim = dnnl::pooling_v2_forward(pd);
      return pp;
    });
    dnnl::engine& eng = cpu_engine();
    dnnl::stream& s = thread_stream();
    GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, ydims));
    memory src(p->src_md, eng, const_cast<void*>(x.raw()));
    memory dst(p->dst_md, eng, y.data<float>());
    Tensor scratch_buf;
    GBX_ASSIGN_OR_RETURN(memory scratch, pooled_memory(p->scratch_md, &scratch_buf));
    p->prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratch}});
    s.wait();
    ctx.set_output(0, std::move(y));
    return Status::OK();
  } catch (const dnnl::error& e) {
    return dnnl_refused(ctx, e);
  }
}

GBX_REGISTER_KERNEL({"", "MaxPool", 1, 18, kEngineDnnl, {DType::F32}, pool<Kind::Max>});
GBX_KERNEL_SUPPORT(pool<Kind::Max>, {.supports = pool_supports<Kind::Max>});
GBX_REGISTER_KERNEL({"", "AveragePool", 1, 21, kEngineDnnl, {DType::F32}, pool<Kind::Average>});
GBX_KERNEL_SUPPORT(pool<Kind::Average>, {.supports = pool_supports<Kind::Average>});
GBX_REGISTER_KERNEL({"", "GlobalAveragePool", 1, 18, kEngineDnnl, {DType::F32}, pool<Kind::GlobalAverage>});
GBX_KERNEL_SUPPORT(pool<Kind::GlobalAverage>, {.supports = pool_supports<Kind::GlobalAverage>});
GBX_REGISTER_KERNEL({"com.gearbox", "NhwcMaxPool", 1, 1, kEngineDnnl, {DType::F32}, pool<Kind::Max, true>});
GBX_KERNEL_SUPPORT((pool<Kind::Max, true>),
                   {.layouts = {TensorLayout::Nhwc}, .supports = pool_supports<Kind::Max, true>});
GBX_REGISTER_KERNEL({"com.gearbox", "NhwcAveragePool", 1, 1, kEngineDnnl, {DType::F32}, pool<Kind::Average, true>});
GBX_KERNEL_SUPPORT((pool<Kind::Average, true>),
                   {.layouts = {TensorLayout::Nhwc}, .supports = pool_supports<Kind::Average, true>});
GBX_REGISTER_KERNEL(
    {"com.gearbox", "NhwcGlobalAveragePool", 1, 1, kEngineDnnl, {DType::F32}, pool<Kind::GlobalAverage, true>});
GBX_KERNEL_SUPPORT((pool<Kind::GlobalAverage, true>),
                   {.layouts = {TensorLayout::Nhwc}, .supports = pool_supports<Kind::GlobalAverage, true>});

}  // namespace
}  // namespace gearbox::dnnl_engine
