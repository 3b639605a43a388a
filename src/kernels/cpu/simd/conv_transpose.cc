// ConvTranspose (ai.onnx 1-21) on the cpu.simd engine for the upsampling form decoders use
// (U-Net, FPN and DB-style heads): float32, 2-D NCHW, group 1, kernel equal to the strides, no
// pads, dilations or output_padding. Then every output pixel has exactly one tap,
//   Y[n, m, h kh + i, w kw + j] = B[m] + sum_c X[n, c, h, w] W[c, m, i, j],
// which is one GEMM per image, T = W^T X (the (m, i, j) rows by the h w columns, K = C), and a
// scatter of T's rows into the output planes with the bias added. oneDNN 2.6's deconvolution
// ran these at 1-17 GFLOP/s on this machine (db_text_detector's 24 -> 1 head: 15.8 ms for 20
// MFLOP); every other ConvTranspose is refused and runs on cpu.dnnl or cpu.ref.
#include <algorithm>
#include <string>
#include <vector>

#include "base/scratch.h"
#include "kernels/cpu/simd/gemm.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

// "" when the node is the upsampling form on X and W of these dims, else why not.
template <class Q>
std::string refusal(const Q& q, const Dims& x, const Dims& w, const Dims* b) {
  if (x.size() != 4 || w.size() != 4) return "not a 2-D convolution";
  if (dims_numel(x) == 0 || dims_numel(w) == 0) return "an empty tensor";
  if (q.attr_int("group", 1) != 1) return "groups";
  if (w[0] != x[1]) return "W does not fit X's channels";  // the reference reports it
  const std::vector<int64_t> kernel{w[2], w[3]};
  if (q.has_attr("kernel_shape") && q.attr_ints("kernel_shape") != kernel) return "kernel_shape differs from W";
  if (q.attr_ints("strides", {1, 1}) != kernel) return "strides other than the kernel";
  if (q.attr_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1}) return "dilations";
  for (int64_t p : q.attr_ints("pads", {}))
    if (p != 0) return "pads";
  for (int64_t p : q.attr_ints("output_padding", {}))
    if (p != 0) return "output_padding";
  if (q.has_attr("output_shape")) return "output_shape";
  const std::string auto_pad = q.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return "auto_pad " + auto_pad;
  if (b && (b->size() != 1 || (*b)[0] != w[1])) return "B does not fit";
  return "";
}

Verdict upsampling_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  if (q.has_input(2)) {
    if (Verdict v = need_tensors(q, {2}); !v.accepted()) return v;
  }
  const Dims* x = q.dims(0);
  const Dims* w = q.dims(1);
  const Dims* b = q.has_input(2) ? q.dims(2) : nullptr;
  if (!x || !w || (q.has_input(2) && !b)) return later();
  const std::string why = refusal(q, *x, *w, b);
  return why.empty() ? accept() : refuse(why);
}

Status conv_transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (std::string why = refusal(ctx, x.dims(), w.dims(), b ? &b->dims() : nullptr); !why.empty())
    return outside_supports(ctx, why);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t m = w.dim(1), kh = w.dim(2), kw = w.dim(3), mk = m * kh * kw, hw = h * wd;
  const int64_t oh = h * kh, ow = wd * kw;
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, {n, m, oh, ow}));
  // T is rebuilt per image: the calling thread's grow-only buffer, not a fresh (zeroed,
  // page-faulting) allocation of up to tens of MB per call.
  thread_local ThreadScratch<float> scratch;
  float* t = scratch.get(static_cast<size_t>(mk * hw));
  if (!t) return ctx.error(ErrorCode::OUT_OF_MEMORY, "no memory for the ", mk, " x ", hw, " product");
  const float* bias = b ? b->data<float>() : nullptr;
  for (int64_t img = 0; img < n; ++img) {
    // T (mk x hw) = W^T (A(r, cc) = W[cc][r]: read transposed) times X[img] (c x hw, row-major).
    gemm::Problem p;
    p.a = w.data<float>();
    p.a_rs = 1;
    p.a_cs = mk;
    p.y = t;
    p.ldy = hw;
    p.m = mk;
    p.n = hw;
    p.k = c;
    p.beta = 0.f;
    gemm::multiply_with_b(p, x.data<float>() + img * c * hw, hw, 1);
    // Row r = (mm, i, j) of T fills plane mm's pixels (hh kh + i, ww kw + j).
    float* out = y.data<float>() + img * m * oh * ow;
    for_each_index(mk, mk * hw > (1 << 16), [&](int64_t r) {
      const int64_t mm = r / (kh * kw), i = (r / kw) % kh, j = r % kw;
      const float add = bias ? bias[mm] : 0.f;
      const float* src = t + r * hw;
      float* plane = out + mm * oh * ow;
      for (int64_t hh = 0; hh < h; ++hh) {
        float* row = plane + (hh * kh + i) * ow + j;
        const float* in = src + hh * wd;
        for (int64_t ww = 0; ww < wd; ++ww) row[ww * kw] = in[ww] + add;
      }
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "ConvTranspose", 1, 18, kEngineSimd, {DType::F32}, conv_transpose});
GBX_KERNEL_SUPPORT(conv_transpose,
                   {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}}, .supports = upsampling_supports});

}  // namespace gearbox::simd
