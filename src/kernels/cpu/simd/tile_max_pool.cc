// MaxPool with its Indices output on the cpu.simd engine, written with the kernel API
// (include/gearbox/kernel_api.hpp): float32, 1-D and 2-D windows (NCL / NCHW), every
// stride, pad, dilation, auto_pad and ceil_mode, storage_order 0.
//
// Why a kernel of its own: training asks MaxPool for Indices (its gradient scatters through
// them, com.gearbox.MaxPoolGrad), oneDNN's pooling has no ONNX Indices, and on the reference
// the data-dependent "is this tap the new maximum" branch mispredicts about every other tap on
// real activations (perf: 0.25 ms of the digits CNN's 1.2 ms training step). Here the decision
// is a mask: a vector of output positions at a time (flattened over the output plane, so a
// 4x4 output fills a vector too), each tap gathered, compared and blended.
//
// Same results as the reference, bit for bit: taps in the same order (rows, then columns),
// the first maximum keeps the index, a NaN wins over numbers and the first NaN stays, a window
// wholly in the padding gives -inf and index -1. Without the Indices output the node goes to
// cpu.dnnl (faster there); 3-D windows, other dtypes and storage_order 1 to the reference.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/tile_max_pool.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <algorithm>
#include <cstring>
#include <limits>

// The kernel API is a public header (include/), outside this target's include path.
#include "../../../../include/gearbox/kernel_api.hpp"

GBX_KAPI_BEGIN(gearbox::simd)

// One plane: x [in_h * in_w] -> y, local [out_plane] (local: the winning tap's position in
// the plane, or -1). start_h/start_w[o]: the top-left input position of output o's window
// (o's row and column times the stride, less the pad); taps at start + k * dilation.
void MaxPoolPlane(const float* x, float* y, int32_t* local, int64_t out_plane, const int32_t* start_h,
                  const int32_t* start_w, int32_t in_h, int32_t in_w, int32_t k_h, int32_t k_w, int32_t d_h,
                  int32_t d_w) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  using VI = hn::Vec<decltype(di)>;
  const int64_t n = Lanes();
  const VI before = hn::Set(di, -1), h_end = hn::Set(di, in_h), w_end = hn::Set(di, in_w), width = hn::Set(di, in_w);
  const VF minus_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (int64_t o = 0; o < out_plane; o += n) {
    const int64_t count = std::min(n, out_plane - o);
    const auto lanes = hn::FirstN(di, static_cast<size_t>(count));
    alignas(64) int32_t h_buf[HWY_MAX_BYTES / sizeof(int32_t)] = {}, w_buf[HWY_MAX_BYTES / sizeof(int32_t)] = {};
    std::memcpy(h_buf, start_h + o, static_cast<size_t>(count) * sizeof(int32_t));
    std::memcpy(w_buf, start_w + o, static_cast<size_t>(count) * sizeof(int32_t));
    const VI h0 = hn::Load(di, h_buf), w0 = hn::Load(di, w_buf);
    VF best = minus_inf;
    VI best_at = hn::Set(di, -1);
    auto found = hn::FirstN(d, 0);  // no valid tap seen yet
    for (int32_t a = 0; a < k_h; ++a) {
      const VI ih = hn::Add(h0, hn::Set(di, a * d_h));
      const auto row_ok = hn::And(lanes, hn::And(hn::Gt(ih, before), hn::Lt(ih, h_end)));
      for (int32_t b = 0; b < k_w; ++b) {
        const VI iw = hn::Add(w0, hn::Set(di, b * d_w));
        const auto ok_i = hn::And(row_ok, hn::And(hn::Gt(iw, before), hn::Lt(iw, w_end)));
        const VI at = hn::IfThenElseZero(ok_i, hn::Add(hn::Mul(ih, width), iw));  // 0: a safe address
        const VF v = hn::GatherIndex(d, x, at);
        const auto ok = hn::RebindMask(d, ok_i);
        // The first valid tap, a larger one, or a NaN over a number.
        const auto better = hn::Or(hn::Gt(v, best), hn::AndNot(hn::IsNaN(best), hn::IsNaN(v)));
        const auto take = hn::And(ok, hn::Or(hn::Not(found), better));
        best = hn::IfThenElse(take, v, best);
        best_at = hn::IfThenElse(hn::RebindMask(di, take), at, best_at);
        found = hn::Or(found, ok);
      }
    }
    StoreN(best, y + o, count);
    alignas(64) int32_t at_buf[HWY_MAX_BYTES / sizeof(int32_t)];
    hn::Store(best_at, di, at_buf);
    std::memcpy(local + o, at_buf, static_cast<size_t>(count) * sizeof(int32_t));
  }
}

GBX_KAPI_END(gearbox::simd)

#if HWY_ONCE
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
HWY_EXPORT(MaxPoolPlane);

namespace {

// In-plane positions must fit the int32 lanes the gathers index with.
constexpr int64_t kMaxPlane = int64_t{1} << 30;

Verdict max_pool_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0}); !v.accepted()) return v;
  if (!q.wants_output(1)) return refuse("the Indices output is not wanted (cpu.dnnl pools faster)");
  if (q.rank(0) >= 0 && q.rank(0) != 3 && q.rank(0) != 4) return refuse("the input is not 3-D or 4-D");
  if (q.attr_int("storage_order", 0) != 0) return refuse("storage_order 1 (column-major Indices)");
  return accept();
}

Status max_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32) return outside_supports(ctx, "this dtype");
  if (x.rank() != 3 && x.rank() != 4) return outside_supports(ctx, "this rank");
  if (ctx.attr_int("storage_order", 0) != 0) return outside_supports(ctx, "storage_order 1");
  const std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.empty()) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "attribute kernel_shape is required");
  const std::vector<int64_t> in_spatial(x.dims().begin() + 2, x.dims().end());
  // The reference's window arithmetic: the same output sizes and the same errors.
  GBX_ASSIGN_OR_RETURN(ref::nn::Window win,
                       ref::nn::make_window(ctx, in_spatial, kernel, ctx.attr_int("ceil_mode", 0) != 0));
  const ref::nn::Geom3 g = ref::nn::to_geom3(win);  // 1-D and 2-D as [1, h, w]
  const int64_t in_plane = g.in[1] * g.in[2], out_plane = g.out[1] * g.out[2];
  if (in_plane >= kMaxPlane || out_plane >= kMaxPlane) return outside_supports(ctx, "a plane this large");
  Dims ydims{x.dim(0), x.dim(1)};
  for (int64_t o : win.out) ydims.push_back(o);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, ydims));
  GBX_ASSIGN_OR_RETURN(Tensor indices, Tensor::allocate_uninitialized(DType::I64, ydims));
  // Each output position's window origin, shared by every plane.
  std::vector<int32_t> start_h(static_cast<size_t>(out_plane)), start_w(static_cast<size_t>(out_plane));
  for (int64_t oh = 0, o = 0; oh < g.out[1]; ++oh)
    for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
      start_h[static_cast<size_t>(o)] = static_cast<int32_t>(oh * g.s[1] - g.p[1]);
      start_w[static_cast<size_t>(o)] = static_cast<int32_t>(ow * g.s[2] - g.p[2]);
    }
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  int64_t* ip = indices.data<int64_t>();
  const int64_t planes = x.dim(0) * x.dim(1);
  // ~8K outputs a chunk: tens of microseconds of gathers, well over a fork's cost.
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(out_plane, 1));
  gbx::kapi::parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
    std::vector<int32_t> local(static_cast<size_t>(out_plane));
    for (int64_t p = begin; p < end; ++p) {
      HWY_DYNAMIC_DISPATCH(MaxPoolPlane)
      (xp + p * in_plane, yp + p * out_plane, local.data(), out_plane, start_h.data(), start_w.data(),
       static_cast<int32_t>(g.in[1]), static_cast<int32_t>(g.in[2]), static_cast<int32_t>(g.k[1]),
       static_cast<int32_t>(g.k[2]), static_cast<int32_t>(g.d[1]), static_cast<int32_t>(g.d[2]));
      int64_t* ic = ip + p * out_plane;
      for (int64_t o = 0; o < out_plane; ++o) {
        const int32_t at = local[static_cast<size_t>(o)];
        ic[o] = at < 0 ? -1 : p * in_plane + at;
      }
    }
  });
  ctx.set_output(0, std::move(y));
  ctx.set_output(1, std::move(indices));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "MaxPool", 8, 18, kEngineSimd, {DType::F32}, max_pool});
GBX_KERNEL_SUPPORT(max_pool, {.supports = max_pool_supports});

}  // namespace gearbox::simd
#endif
