// Resize (ai.onnx 10-21) and Upsample (7-9) on the cpu.simd engine, float32: every mode
// (nearest, linear, cubic), coordinate transform, nearest_mode, antialias, exclude_outside,
// tf_crop_and_resize with its extrapolation value, axes and aspect-ratio policies, any rank
// and any resized axes (NCHW's H and W, or channels-last's).
//
// The geometry and the 1-D taps are the reference's (ref/resize_geometry.h), so both engines
// agree on every case and every error; this kernel differs in how it adds them up. The
// reference recomputes each output coordinate's taps for every outer index and accumulates in
// double through a copy of the whole tensor per axis, on one thread. Here each resized axis's
// taps are tabulated once (float weights, padded to the axis's widest tap count), and the axis
// is applied as one pass over float buffers, split over the OpenMP team:
//   - an axis with elements after it (H of NCHW, H and W of NHWC) blends whole contiguous
//     rows: y[o, x, :] = sum_t w[x, t] * x[o, idx[x, t], :];
//   - the last axis (W of NCHW) gathers: y[o, x] = sum_t w[x, t] * x[o, idx[x, t]], first when
//     it is upsampled, so on the smallest tensor.
#include <algorithm>
#include <vector>

#include "base/scratch.h"
#include "kernels/cpu/ref/resize_geometry.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

// One axis's taps: output coordinate x reads idx[x * width + t] with weight w[x * width + t]
// (unused taps weigh 0 at index 0); an extrapolated coordinate has no taps and gets `fill`.
struct AxisTaps {
  int64_t width = 0;
  std::vector<int64_t> idx;
  std::vector<float> w;
  std::vector<char> extrapolated;
};

AxisTaps tabulate(const ref::ResizeGeometry& geo, size_t axis, int64_t in_len) {
  const int64_t out_len = geo.out_dims[axis];
  std::vector<std::vector<ref::Tap>> all(static_cast<size_t>(out_len));
  AxisTaps t;
  for (int64_t x = 0; x < out_len; ++x) {
    all[static_cast<size_t>(x)] =
        ref::resize_taps(geo.params, x, in_len, out_len, geo.scales[axis], geo.roi_start(axis), geo.roi_end(axis));
    t.width = std::max<int64_t>(t.width, static_cast<int64_t>(all[static_cast<size_t>(x)].size()));
  }
  t.width = std::max<int64_t>(t.width, 1);
  t.idx.assign(static_cast<size_t>(out_len * t.width), 0);
  t.w.assign(t.idx.size(), 0.f);
  t.extrapolated.assign(static_cast<size_t>(out_len), 0);
  for (int64_t x = 0; x < out_len; ++x) {
    const auto& taps = all[static_cast<size_t>(x)];
    if (taps.empty()) t.extrapolated[static_cast<size_t>(x)] = 1;
    for (size_t k = 0; k < taps.size(); ++k) {
      t.idx[static_cast<size_t>(x * t.width) + k] = taps[k].idx;
      t.w[static_cast<size_t>(x * t.width) + k] = static_cast<float>(taps[k].w);
    }
  }
  return t;
}

// Output elements per work item, about.
constexpr int64_t kItemElements = 16384;

// One axis: src is [outer, in_len, inner], dst [outer, out_len, inner].
void resize_axis(const AxisTaps& t, const float* src, float* dst, int64_t outer, int64_t in_len, int64_t out_len,
                 int64_t inner, float fill) {
  const int64_t total = outer * out_len * inner;
  // Work items: (outer index, block of output coordinates).
  const int64_t xs_per_item = std::max<int64_t>(1, std::min(out_len, kItemElements / std::max<int64_t>(1, inner)));
  const int64_t blocks = (out_len + xs_per_item - 1) / xs_per_item;
  for_each_index(outer * blocks, total > 2 * kItemElements, [&](int64_t item) {
    const int64_t o = item / blocks, x0 = (item % blocks) * xs_per_item, x1 = std::min(out_len, x0 + xs_per_item);
    const float* s = src + o * in_len * inner;
    float* d = dst + o * out_len * inner;
    for (int64_t x = x0; x < x1; ++x) {
      const int64_t* ix = &t.idx[static_cast<size_t>(x * t.width)];
      const float* wx = &t.w[static_cast<size_t>(x * t.width)];
      if (inner == 1) {
        if (t.extrapolated[static_cast<size_t>(x)]) {
          d[x] = fill;
          continue;
        }
        float acc = 0.f;
        for (int64_t k = 0; k < t.width; ++k) acc += wx[k] * s[ix[k]];
        d[x] = acc;
        continue;
      }
      float* row = d + x * inner;
      if (t.extrapolated[static_cast<size_t>(x)]) {
        std::fill(row, row + inner, fill);
        continue;
      }
      const float* r0 = s + ix[0] * inner;
      const float w0 = wx[0];
      for (int64_t j = 0; j < inner; ++j) row[j] = w0 * r0[j];
      for (int64_t k = 1; k < t.width; ++k) {
        const float wk = wx[k];
        if (wk == 0.f) continue;
        const float* rk = s + ix[k] * inner;
        for (int64_t j = 0; j < inner; ++j) row[j] += wk * rk[j];
      }
    }
  });
}

Status resize(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(ref::ResizeGeometry geo, ref::resize_geometry(ctx));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, geo.out_dims));
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  if (x.numel() == 0) {  // nothing to sample: the reference gives zeros
    std::fill(y.data<float>(), y.data<float>() + y.numel(), 0.f);
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  std::vector<size_t> axes;
  for (size_t a = 0; a < x.rank(); ++a)
    if (geo.resizes(a, x.dim(a))) axes.push_back(a);
  // The last axis gathers one element per tap, the others blend whole rows at vector speed: an
  // upsampled last axis goes first, while the tensor is smallest (NCHW's W before H: the
  // gather then runs on H_in rows, not H_out; 2-8x fewer in an FPN's upsampling).
  if (axes.size() > 1 && axes.back() == x.rank() - 1 && geo.out_dims[axes.back()] > x.dim(axes.back()))
    std::rotate(axes.begin(), axes.end() - 1, axes.end());
  if (axes.empty()) {
    std::copy_n(x.data<float>(), x.numel(), y.data<float>());
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  const float fill = static_cast<float>(geo.params.extrapolation);
  Dims dims = x.dims();
  const float* src = x.data<float>();
  // Intermediate results (one per resized axis but the last) go into the calling thread's
  // grow-only scratch: a fresh vector per call was zeroed and faulted in each time, tens of MB
  // for an FPN's upsampling at batch 8.
  thread_local ThreadScratch<float> buf[2];
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = axes[i];
    const int64_t in_len = dims[a], out_len = geo.out_dims[a];
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < a; ++k) outer *= dims[k];
    for (size_t k = a + 1; k < dims.size(); ++k) inner *= dims[k];
    const AxisTaps taps = tabulate(geo, a, in_len);
    float* dst = y.data<float>();
    if (i + 1 < axes.size()) {
      dst = buf[i % 2].get(static_cast<size_t>(outer * out_len * inner));
      if (!dst)
        return ctx.error(ErrorCode::OUT_OF_MEMORY, "Resize: no memory for an intermediate of ", outer * out_len * inner,
                         " floats");
    }
    resize_axis(taps, src, dst, outer, in_len, out_len, inner, fill);
    dims[a] = out_len;
    src = dst;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "Resize", 10, 21, kEngineSimd, {DType::F32}, resize});
GBX_REGISTER_KERNEL({"", "Upsample", 7, 9, kEngineSimd, {DType::F32}, resize});
GBX_KERNEL_SUPPORT(resize, {.inputs = {{DType::F32}}, .supports = nullptr});

}  // namespace gearbox::simd
