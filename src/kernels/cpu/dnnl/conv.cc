// Conv (ai.onnx opsets 1-17) and com.gearbox.FusedConv on oneDNN, cpu.dnnl engine.
//
// Handled here: float32 (X, Z and Y also bf16: see Reduced precision), 1-D, 2-D and 3-D
// (NCW, NCHW, NCDHW; the layout passes' kernels 2-D only), any group
// (depthwise included), strides, dilations, explicit pads and every auto_pad (the geometry
// comes from the reference's make_window, so both engines agree on output sizes and errors).
// FusedConv's bias, residual Z (same shape as Y; added with a sum post-op before the
// activation) and activation (eltwise post-ops) run inside the convolution. Everything else
// (other ranks, other dtypes, a Z that broadcasts, an activation oneDNN lacks, empty tensors) is
// refused by conv_supports(), so the node runs on the next engine of the list (cpu.ref).
//
// Layouts: for Conv/FusedConv, source and destination use the primitive's preferred layout
// (format_tag::any), with a reorder from/to NCHW on each run. com.gearbox.NhwcConv (written by
// the layout pass, src/graph/passes/layout_nhwc.cc) reads and writes channels-last tensors
// directly, with no reorder; com.gearbox.Nchw16cConv (src/graph/passes/layout_blocked.cc)
// likewise reads and writes oneDNN's blocked nChw16c layout, as [N, C/16, H, W, 16] tensors.
// Initializer weights are reordered once and cached (dnnl_util.h reordered_weights).
//
// Algorithm: a 3x3, stride-1, undilated, ungrouped convolution with at least 64 input and
// output channels and an output of at least 7x7 runs as oneDNN's Winograd convolution
// (F(2x2,3x3) or F(4x4,3x3) tiles) where oneDNN implements it for the shape: it does
// 2.25-4x fewer multiplications, and on this machine ResNet-50's 3x3 layers of 14x14 and
// more run ~1.4-2x faster than with the direct kernel, the reorders to and from Winograd's
// blocked layout included (docs/performance.md); its 7x7 stride-1 layers 0.89 -> 0.70 ms at
// batch 1 and 5.4 -> 3.9 ms at batch 8 in the blocked layout, 5.3 -> 4.1 ms channels-last
// with the reorders (gearbox profile). Smaller outputs were not measured. Its rounding
// differs from the direct sum's, within the parity tolerance.
// SessionOptions::conv_winograd = 0 (GEARBOX_CONV_WINOGRAD=0, --no-winograd) turns it off
// (direct convolution everywhere).
//
// Reduced precision: a node the precision pass lowered to bf16 (runtime/precision.h) runs a
// bf16 primitive where the CPU has bf16 arithmetic: a float32 X is converted to bf16 on its
// way into the primitive's layout (the reorder that NCHW tensors take anyway), W once into the
// cached blocked copy, and the products accumulate in fp32, bias, residual and activation
// applied in fp32. X, Z and Y are stored as the graph types them: float32, or bf16 for a value
// the pass stores in bf16 between lowered nodes -- a bf16 X or Z is read as it lies, and a
// bf16 Y is the primitive's destination (one rounding, after the post-ops). Where the CPU has
// no bf16 arithmetic the node computes in fp32: bf16 X and Z are converted to fp32 (exactly)
// and the fp32 result is rounded into a bf16 Y by the reorder out. oneDNN 2.6 has no bf16
// Winograd, so a node computing in bf16 runs the direct algorithm (VDPBF16PS does twice the
// products of an fp32 FMA per instruction, which is what Winograd's 2.25x fewer products gave).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/buffer_version.h"
#include "base/logging.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/kernel_options.h"
#include "kernels/supports_util.h"

namespace gearbox::dnnl_engine {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvPrim : ConvLayouts {
  dnnl::convolution_forward prim;
  bool winograd = false;
  DType y_dtype = DType::F32;  // F32, or BF16 where the precision pass stores Y in bf16
};

std::atomic<int64_t> g_winograd_runs{0};
std::atomic<int64_t> g_state_reuses{0};
std::atomic<int64_t> g_subsampled_runs{0};

// SessionOptions::conv_winograd (GEARBOX_CONV_WINOGRAD, read once at Session::create).
bool winograd_enabled() { return current_kernel_options().conv_winograd; }

// Where Winograd pays (the shapes measured above); with few channels the transforms cost
// more than the multiplications they save, on small images the partial tiles.
bool winograd_candidate(int64_t group, int64_t c, int64_t m, const std::vector<int64_t>& kernel,
                        const ref::nn::Window& win) {
  return group == 1 && c >= 64 && m >= 64 && kernel == std::vector<int64_t>{3, 3} &&
         win.strides == std::vector<int64_t>{1, 1} && win.dilations == std::vector<int64_t>{1, 1} && win.out[0] >= 7 &&
         win.out[1] >= 7;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += std::to_string(x) + ",";
  return s;
}

// What conv_impl keeps for a node of a plan (KernelContext::node_cache) whose W and bias are
// constants: the primitive of its last run and W in the primitive's layout. A run with the
// same X dims, the same W and bias (the model's initializers), a Z of Y's shape or none as
// before, and the same Winograd choice reuses them, skipping the signature, the window and
// the look-ups in both caches (~8% of a MobileNetV2 run at two threads, docs/performance.md).
struct ConvNodeState {
  Dims x_dims, y_dims;
  DType x_dtype = DType::F32, z_dtype = DType::F32;
  int64_t sub_sh = 0, sub_sw = 0;  // both non-zero: X's pixels at these strides are gathered first (strided_1x1)
  const void* w = nullptr;
  const void* b = nullptr;
  uint64_t w_version = 0, b_version = 0;  // base/buffer_version.h: a weight updated in place misses
  bool z = false;
  bool winograd_candidate = false, winograd_on = false;
  std::shared_ptr<ConvPrim> prim;
  dnnl::memory weights;
};
const char kConvStateOwner = 0;  // its address tags ConvNodeState values in a NodeCache

// The node's state when it fits this run's inputs, else null.
std::shared_ptr<ConvNodeState> fitting_state(NodeCache* cache, const Tensor& x, const Tensor& w, const Tensor* b,
                                             const Tensor* z, bool winograd) {
  auto st = std::static_pointer_cast<ConvNodeState>(cache->get(&kConvStateOwner));
  if (!st || st->x_dims != x.dims() || st->x_dtype != x.dtype() || st->w != w.raw() ||
      st->b != (b ? b->raw() : nullptr) || st->z != (z != nullptr))
    return nullptr;
  if (st->w_version != buffer_version(w) || st->b_version != (b ? buffer_version(*b) : 0)) return nullptr;
  if (z && (z->dtype() != st->z_dtype || z->dims() != st->y_dims)) return nullptr;
  if (st->winograd_candidate && winograd != st->winograd_on) return nullptr;
  return st;
}

// A strided 1x1 convolution without padding reads only the pixels at its strides: it is the
// same convolution at unit stride over those pixels. Gathering them once (a parallel copy of
// 1/(sh sw) of X) and running the unit-stride primitive beats oneDNN 2.6's strided
// brgconv_1x1 where that one is slow: ResNet-50's 28x28x512 -> 14x14x1024 downsample took
// 727-754 -> 616-644 us in the model at batch 1 and 5.2 -> 4.7 ms at batch 8 (gearbox profile,
// two runs each); its other two downsamples moved by -8% to +4%. Channels-last only
// (NhwcConv; the NCHW kernels reorder X anyway).
bool strided_1x1(bool nhwc, const std::vector<int64_t>& kernel, const ref::nn::Window& win) {
  return nhwc && kernel == std::vector<int64_t>{1, 1} && (win.strides[0] > 1 || win.strides[1] > 1) &&
         win.pad_begin == std::vector<int64_t>{0, 0} && win.pad_end == std::vector<int64_t>{0, 0};
}

// X[b, i sh, j sw, :] for i < oh, j < ow, of a channels-last X: [N, oh, ow, C] (float32 or
// bf16, as X is stored). Not the reference's ref::strided_copy: that one stays on one thread
// below 1 MiB, and this gather of cold memory needs both (with it, ResNet-50's downsample
// layers at batch 1 took 40-127 us longer for the 800 KB gather and 7-68 us for the 400 KB
// one; gearbox profile, three runs).
Result<Tensor> subsample_nhwc(const Tensor& x, int64_t sh, int64_t sw, int64_t oh, int64_t ow) {
  const int64_t h = x.dim(1), w = x.dim(2), c = x.dim(3);
  GBX_ASSIGN_OR_RETURN(Tensor s, Tensor::allocate_uninitialized(x.dtype(), {x.dim(0), oh, ow, c}));
  g_subsampled_runs.fetch_add(1, std::memory_order_relaxed);
  const size_t pixel = static_cast<size_t>(c) * dtype_size(x.dtype());
  const auto* src = static_cast<const unsigned char*>(x.raw());
  auto* dst = static_cast<unsigned char*>(s.mutable_raw());
  const int64_t rows = x.dim(0) * oh;
#pragma omp parallel for schedule(static) if (rows * ow * c > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned char* in = src + static_cast<size_t>(((r / oh) * h + (r % oh) * sh) * w) * pixel;
    unsigned char* out = dst + static_cast<size_t>(r * ow) * pixel;
    for (int64_t i = 0; i < ow; ++i) std::memcpy(out + i * pixel, in + i * sw * pixel, pixel);
  }
  return s;
}

// How a kernel's X, Z and Y are laid out: NCHW (Conv, FusedConv), channels-last [N, H, W, C]
// (NhwcConv) or blocked [N, C/16, H, W, 16] (Nchw16cConv).
enum class Layout { Nchw, Nhwc, Nchw16c };
constexpr int64_t kBlock = 16;

// True when X has the layout's form: NCHW-ordered 1-D, 2-D or 3-D ([N, C, L], [N, C, H, W],
// [N, C, D, H, W]); channels-last 2-D; blocked 2-D, rank 5 with blocks of 16.
bool has_form(const Dims& x, Layout layout) {
  if (layout == Layout::Nchw16c) return x.size() == 5 && x[4] == kBlock;
  if (layout == Layout::Nhwc) return x.size() == 4;
  return x.size() >= 3 && x.size() <= 5;
}

// The spatial part of NCHW-ordered dims.
std::vector<int64_t> spatial(const Dims& l) { return {l.begin() + 2, l.end()}; }

// X's dims in NCHW order (as oneDNN describes every layout); X has the layout's form.
Dims logical_dims(const Dims& x, Layout layout) {
  if (layout == Layout::Nhwc) return {x[0], x[3], x[1], x[2]};
  if (layout == Layout::Nchw16c) return {x[0], x[1] * kBlock, x[2], x[3]};
  return x;
}
Dims logical_dims(const Tensor& x, Layout layout) { return logical_dims(x.dims(), layout); }

// The stored dims of an NCHW-ordered `l` in the layout (m % 16 == 0 for Nchw16c).
Dims stored_dims(const Dims& l, Layout layout) {
  if (layout == Layout::Nhwc) return {l[0], l[2], l[3], l[1]};
  if (layout == Layout::Nchw16c) return {l[0], l[1] / kBlock, l[2], l[3], kBlock};
  return l;
}

// Runs `p` into a new Y (or into Z's buffer, see below).
Status run_conv(KernelContext& ctx, const ConvPrim& p, const Tensor& x, const dnnl::memory& weights, const Tensor* b,
                const Tensor* z, const Dims& ydims) {
  // A residual read for the last time becomes the output: the sum post-op then adds into
  // it where it lies, instead of after a copy of Z into a new buffer.
  const bool y_is_z = z && ctx.may_overwrite_input(3) && p.dst_md == p.dst_plain && z->dtype() == p.y_dtype;
  Tensor y;
  if (y_is_z) {
    y = *z;
  } else {
    GBX_ASSIGN_OR_RETURN(y, Tensor::allocate_uninitialized(p.y_dtype, ydims));
  }
  GBX_RETURN_IF_ERROR(execute_conv_like(p.prim, p, x, weights, b, z, y_is_z, y));
  if (p.winograd) g_winograd_runs.fetch_add(1, std::memory_order_relaxed);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// The checks of conv_supports() on concrete dims x, w, b (null: no bias) and z (null: no
// residual); "" when this kernel handles them, else why not. `attrs` has the node's attributes.
std::string conv_refusal(const KernelContext& attrs, Layout layout, const Dims& x, const Dims& w, const Dims* b,
                         const Dims* z) {
  if (!has_form(x, layout) || w.size() != logical_dims(x, layout).size())
    return "X " + to_string(x) + " or W " + to_string(w) + " is not a 1-D, 2-D or 3-D convolution of this layout";
  if (dims_numel(x) == 0) return "X is empty";
  const int64_t group = attrs.attr_int("group", 1);
  const Dims xl = logical_dims(x, layout);
  const int64_t n = xl[0], c = xl[1], m = w[0];
  if (group < 1 || c % group != 0 || m % group != 0 || w[1] != c / group) return "group and channels do not fit";
  if (layout == Layout::Nchw16c && m % kBlock != 0) return "M is not a multiple of 16";
  const std::vector<int64_t> kernel = spatial(w);
  if (attrs.has_attr("kernel_shape") && attrs.attr_ints("kernel_shape") != kernel) return "kernel_shape differs from W";
  if (b && (b->size() != 1 || (*b)[0] != m)) return "B " + to_string(*b) + " is not [M]";
  auto win = ref::nn::make_window(attrs, spatial(xl), kernel);
  if (!win.ok()) return "the window is invalid (the reference reports it)";
  Dims yl{n, m};
  yl.insert(yl.end(), win->out.begin(), win->out.end());
  if (z && *z != stored_dims(yl, layout))
    return "Z " + to_string(*z) + " broadcasts to Y";  // the reference broadcasts it
  return "";
}

template <bool kFused, Layout kLayout>
Verdict conv_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  if (q.has_input(2)) {
    if (Verdict v = need_tensors(q, {2}); !v.accepted()) return v;
  }
  const bool with_z = kFused && q.has_input(3);
  if (with_z) {
    if (Verdict v = need_tensors(q, {3}); !v.accepted()) return v;
  }
  if (kFused && !has_dnnl_activation(q)) return refuse("activation '" + q.attr_string("activation", "") + "'");
  const Dims* x = q.dims(0);
  const Dims* w = q.dims(1);
  const Dims* b = q.has_input(2) ? q.dims(2) : nullptr;
  const Dims* z = with_z ? q.dims(3) : nullptr;
  if (!x || !w || (q.has_input(2) && !b) || (with_z && !z)) return later();
  std::vector<RuntimeValue> none;
  const KernelContext attrs(q.op(), {}, &none, {});  // the window reads attributes only
  const std::string why = conv_refusal(attrs, kLayout, *x, *w, b, z);
  return why.empty() ? accept() : refuse(why);
}

// `layout`: how X, Z and Y are stored (W stays OIHW in all three).
Status conv_impl(KernelContext& ctx, bool fused, Layout layout = Layout::Nchw) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  // B and Z (conv_supports accepted only tensors for them).
  const Tensor* b_in = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* z_in = fused && ctx.has_input(3) ? &ctx.input(3) : nullptr;
  // A node whose weights are constants keeps its primitive between runs.
  NodeCache* cache = ctx.input_is_constant(1) && (!ctx.has_input(2) || (b_in && ctx.input_is_constant(2)))
                         ? ctx.node_cache()
                         : nullptr;
  if (cache && (z_in || !(fused && ctx.has_input(3)))) {
    if (auto st = fitting_state(cache, x, w, b_in, z_in, winograd_enabled() && !computes_bf16(ctx))) {
      g_state_reuses.fetch_add(1, std::memory_order_relaxed);
      Tensor sub;
      if (st->sub_sh) {
        GBX_ASSIGN_OR_RETURN(sub, subsample_nhwc(x, st->sub_sh, st->sub_sw, st->y_dims[1], st->y_dims[2]));
      }
      try {
        return run_conv(ctx, *st->prim, st->sub_sh ? sub : x, st->weights, b_in, z_in, st->y_dims);
      } catch (const dnnl::error& e) {
        return dnnl_refused(ctx, e);
      }
    }
  }
  if (std::string why =
          conv_refusal(ctx, layout, x.dims(), w.dims(), b_in ? &b_in->dims() : nullptr, z_in ? &z_in->dims() : nullptr);
      !why.empty())
    return outside_supports(ctx, why);
  const int64_t group = ctx.attr_int("group", 1);
  Dims xl = logical_dims(x, layout);
  const int64_t n = xl[0], c = xl[1], m = w.dim(0);
  const std::vector<int64_t> kernel = spatial(w.dims());
  const Tensor* b = b_in;
  GBX_ASSIGN_OR_RETURN(ref::nn::Window win, ref::nn::make_window(ctx, spatial(xl), kernel));
  Dims yl{n, m};
  yl.insert(yl.end(), win.out.begin(), win.out.end());
  const Dims ydims = stored_dims(yl, layout);
  const Tensor* z = z_in;
  // A strided 1x1 convolution runs at unit stride on the pixels it reads (strided_1x1).
  const bool gather = strided_1x1(layout == Layout::Nhwc, kernel, win);
  const int64_t sub_sh = gather ? win.strides[0] : 0, sub_sw = gather ? win.strides[1] : 0;
  Tensor sub;
  if (gather) {
    GBX_ASSIGN_OR_RETURN(sub, subsample_nhwc(x, sub_sh, sub_sw, win.out[0], win.out[1]));
    xl = {n, c, win.out[0], win.out[1]};
    win.in = win.out;
    win.strides = {1, 1};
  }
  const Tensor& xin = gather ? sub : x;

  dnnl::post_ops po;
  std::string act_sig;
  if (z) po.append_sum(1.f);  // dst holds Z before the run: conv + b + Z, then the activation
  if (fused && !append_activation(ctx, po, &act_sig)) return outside_supports(ctx, "this activation");

  const bool bf16 = computes_bf16(ctx);
  const bool try_winograd = winograd_candidate(group, c, m, kernel, win) && winograd_enabled() && !bf16;
  // How X, Z and Y are stored: float32, or bf16 where the precision pass stores a value
  // between lowered nodes in bf16 (runtime/precision.h; Y: the graph's type of the output).
  const DType xdt = xin.dtype(), ydt = ctx.op().output_dtype == DType::BF16 ? DType::BF16 : DType::F32;
  const DType zdt = z ? z->dtype() : ydt;
  static const char* const kKeyPrefix[] = {"conv|", "conv_nhwc|", "conv_nchw16c|"};
  const std::string key = std::string(kKeyPrefix[static_cast<int>(layout)]) + (try_winograd ? "wino|" : "") +
                          (bf16 ? "bf16|" : "") + (xdt == DType::BF16 ? "xb" : "") + (ydt == DType::BF16 ? "yb" : "") +
                          (zdt == DType::BF16 ? "zb" : "") + (w.dtype() == DType::BF16 ? "wb" : "") +
                          to_string(xin.dims()) + to_string(w.dims()) + "g" + std::to_string(group) + "s" +
                          join(win.strides) + "d" + join(win.dilations) + "p" + join(win.pad_begin) +
                          join(win.pad_end) + (b ? "b" : "") + (z ? "z" : "") + act_sig;
  try {
    auto p = cached<ConvPrim>(key, [&] {
      auto cp = std::make_shared<ConvPrim>();
      const memory::dims src_d = to_dims(xl), dst_d = to_dims(yl);
      memory::dims wei_d = to_dims(w.dims());
      if (group > 1) {
        wei_d = {group, m / group, c / group};
        wei_d.insert(wei_d.end(), kernel.begin(), kernel.end());
      }
      const tag plain_tag = kernel.size() == 1 ? tag::ncw : kernel.size() == 2 ? tag::nchw : tag::ncdhw;
      const tag act_tag = layout == Layout::Nhwc ? tag::nhwc : layout == Layout::Nchw16c ? tag::nChw16c : plain_tag;
      const auto f32 = memory::data_type::f32;
      const auto stored = [](DType t) { return t == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32; };
      cp->src_plain = memory::desc(src_d, stored(xdt), act_tag);
      cp->wei_plain = plain_md(wei_d, stored(w.dtype()));
      cp->dst_plain = memory::desc(dst_d, stored(ydt), act_tag);
      if (zdt != ydt) cp->z_plain = memory::desc(dst_d, stored(zdt), act_tag);
      cp->bias_plain = plain_md({m});
      cp->y_dtype = ydt;
      // The products' type: X and W are converted to it where they are stored otherwise.
      const auto in_dt = bf16 ? memory::data_type::bf16 : f32;
      // The primitive's destination: Y's own dtype when it computes in bf16 and Z, if any, is
      // stored as Y is (a bf16 Y is then written directly, the bias, sum and activation
      // applied in fp32 before the one rounding; a bf16 Z is read by the sum as it lies);
      // fp32 otherwise, reordered into a bf16 Y after the run: the conversion path of a CPU
      // without bf16 arithmetic, and a float32 Z, which the sum reads in the destination's
      // dtype (rounding it to bf16 first would be a second rounding).
      const auto out_dt = bf16 && zdt == ydt ? stored(ydt) : f32;
      // Channels-last and blocked activations are taken as they are (no reorder per run, but
      // a conversion where the stored dtype is not the primitive's); NCHW ones let the
      // primitive pick its layout and are reordered in and out.
      const bool as_stored = layout != Layout::Nchw;
      memory::desc src_any = memory::desc(src_d, in_dt, as_stored ? act_tag : tag::any);
      memory::desc dst_any = memory::desc(dst_d, out_dt, as_stored ? act_tag : tag::any);
      memory::desc wei_any(wei_d, in_dt, tag::any);
      const memory::dims strides(win.strides.begin(), win.strides.end());
      memory::dims dil;
      for (int64_t d : win.dilations) dil.push_back(d - 1);  // oneDNN counts the gaps
      const memory::dims pl(win.pad_begin.begin(), win.pad_begin.end()), pr(win.pad_end.begin(), win.pad_end.end());
      const auto prop = dnnl::prop_kind::forward_inference;
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      // User scratchpad: each run brings its own, so concurrent runs of one cached
      // primitive never share scratch memory.
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      auto make_pd = [&](dnnl::algorithm algo, const memory::desc& src, const memory::desc& dst) {
        auto desc =
            b ? dnnl::convolution_forward::desc(prop, algo, src, wei_any, cp->bias_plain, dst, strides, dil, pl, pr)
              : dnnl::convolution_forward::desc(prop, algo, src, wei_any, dst, strides, dil, pl, pr);
        return dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
      };
      dnnl::convolution_forward::primitive_desc pd;
      if (try_winograd) {
        // Winograd works in its own blocked layout (nChw16c): channels-last tensors are
        // reordered in and out around it (cheap next to the multiplications it saves), blocked
        // ones are already in it.
        try {
          pd = make_pd(dnnl::algorithm::convolution_winograd, memory::desc(src_d, f32, tag::any),
                       memory::desc(dst_d, f32, tag::any));
          cp->winograd = true;
        } catch (const dnnl::error&) {
          // oneDNN has no Winograd kernel for this shape or CPU: the direct one below.
        }
      }
      if (!cp->winograd) pd = make_pd(dnnl::algorithm::convolution_direct, src_any, dst_any);
      cp->src_md = pd.src_desc();
      cp->wei_md = pd.weights_desc();
      cp->dst_md = pd.dst_desc();
      cp->scratch_md = pd.scratchpad_desc();
      cp->prim = dnnl::convolution_forward(pd);
      return cp;
    });

    const dnnl::memory weights = reordered_weights(w, p->wei_plain, p->wei_md, ctx.input_is_constant(1));
    GBX_RETURN_IF_ERROR(run_conv(ctx, *p, xin, weights, b, z, ydims));
    if (cache) {
      auto st = std::make_shared<ConvNodeState>();
      st->x_dims = x.dims();
      st->x_dtype = x.dtype();
      st->z_dtype = zdt;
      st->sub_sh = sub_sh;
      st->sub_sw = sub_sw;
      st->y_dims = ydims;
      st->w = w.raw();
      st->b = b ? b->raw() : nullptr;
      st->w_version = buffer_version(w);
      st->b_version = b ? buffer_version(*b) : 0;
      st->z = z != nullptr;
      st->winograd_candidate = winograd_candidate(group, c, m, kernel, win);
      st->winograd_on = try_winograd;
      st->prim = p;
      st->weights = weights;
      cache->set(&kConvStateOwner, std::move(st));
    }
    return Status::OK();
  } catch (const dnnl::error& e) {
    return dnnl_refused(ctx, e);
  }
}

Status conv(KernelContext& ctx) { return conv_impl(ctx, false); }
Status fused_conv(KernelContext& ctx) { return conv_impl(ctx, true); }
Status nhwc_conv(KernelContext& ctx) { return conv_impl(ctx, true, Layout::Nhwc); }
Status nchw16c_conv(KernelContext& ctx) { return conv_impl(ctx, true, Layout::Nchw16c); }

}  // namespace

int64_t winograd_conv_runs() { return g_winograd_runs.load(); }

bool winograd_available() {
  // oneDNN has Winograd convolutions only for some ISAs (AVX-512 in 2.x): ask it once for a
  // shape every Winograd kernel covers (3x3, stride 1, 64 -> 64 channels).
  static const bool available = [] {
    using memory = dnnl::memory;
    const auto f32 = memory::data_type::f32;
    const memory::desc src({1, 64, 14, 14}, f32, memory::format_tag::any);
    const memory::desc wei({64, 64, 3, 3}, f32, memory::format_tag::any);
    const memory::desc dst({1, 64, 14, 14}, f32, memory::format_tag::any);
    try {
      const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_winograd, src, wei, dst, {1, 1}, {0, 0},
                                                 {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(desc, cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}
int64_t conv_state_reuses() { return g_state_reuses.load(); }
int64_t strided_1x1_subsamples() { return g_subsampled_runs.load(); }

namespace {

// X and Z as stored: float32, or bf16 where the precision pass stores them (a lowered node's
// output read only by lowered nodes); the kernel converts where the primitive computes in
// another dtype. W: the model's float32 weights (converted once, cached), or bf16 where a .gbm
// stores them so (store_weights_reduced, runtime/precision.h). B: float32. Y: float32, or bf16
// as the graph types it (OpInfo::output_dtype).
const std::vector<std::vector<DType>> kConvInputs{
    {DType::F32, DType::BF16}, {DType::F32, DType::BF16}, {DType::F32}, {DType::F32, DType::BF16}};
const std::vector<std::vector<DType>> kConvOutputs{{DType::F32, DType::BF16}};

GBX_REGISTER_KERNEL({"", "Conv", 1, 18, kEngineDnnl, {DType::F32, DType::BF16}, conv});
GBX_KERNEL_SUPPORT(conv, {.inputs = kConvInputs,
                          .outputs = kConvOutputs,
                          .supports = conv_supports<false, Layout::Nchw>,
                          .compute = {DType::BF16}});
GBX_REGISTER_KERNEL({"com.gearbox", "FusedConv", 1, 1, kEngineDnnl, {DType::F32, DType::BF16}, fused_conv});
GBX_KERNEL_SUPPORT(fused_conv, {.inputs = kConvInputs,
                                .outputs = kConvOutputs,
                                .supports = conv_supports<true, Layout::Nchw>,
                                .compute = {DType::BF16}});
GBX_REGISTER_KERNEL({"com.gearbox", "NhwcConv", 1, 1, kEngineDnnl, {DType::F32, DType::BF16}, nhwc_conv});
GBX_KERNEL_SUPPORT(nhwc_conv, {.inputs = kConvInputs,
                               .outputs = kConvOutputs,
                               .layouts = {TensorLayout::Nhwc},
                               .supports = conv_supports<true, Layout::Nhwc>,
                               .compute = {DType::BF16}});
GBX_REGISTER_KERNEL({"com.gearbox", "Nchw16cConv", 1, 1, kEngineDnnl, {DType::F32, DType::BF16}, nchw16c_conv});
GBX_KERNEL_SUPPORT(nchw16c_conv, {.inputs = kConvInputs,
                                  .outputs = kConvOutputs,
                                  .layouts = {TensorLayout::Nchw16c},
                                  .supports = conv_supports<true, Layout::Nchw16c>,
                                  .compute = {DType::BF16}});

}  // namespace
}  // namespace gearbox::dnnl_engine
