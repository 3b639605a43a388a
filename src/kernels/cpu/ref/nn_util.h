// Helpers private to the neural-network reference kernels (conv, pool, gemm, norms,
// softmax): running a float kernel on float16/bfloat16 by computing in f32, and the
// window geometry (kernel, strides, dilations, pads, auto_pad) that Conv, ConvTranspose
// and the pools share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/scratch.h"
#include "base/tensor.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref::nn {

inline bool is_half_like(DType t) { return t == DType::F16 || t == DType::BF16; }

// The population mean of x[0, n) and 1 / sqrt(variance + eps), accumulated in double in two
// passes (the normalizations' statistics: LayerNormalization's rows, InstanceNormalization's
// planes, GroupNormalization's groups).
struct MeanInvStd {
  double mean, inv_std;
};
template <typename T>
MeanInvStd mean_and_inv_std(const T* x, int64_t n, double eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  const double mean = n > 0 ? s / static_cast<double>(n) : 0.0;
  double q = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    q += d * d;
  }
  return {mean, 1.0 / std::sqrt((n > 0 ? q / static_cast<double>(n) : 0.0) + eps)};
}

// y = scale[c] * (x - mean) / sqrt(var + eps) + bias[c] over an [n, c, plane] tensor whose c
// channels form `groups` groups, each normalized by its own statistics: GroupNormalization
// (scale and bias per channel), and InstanceNormalization, whose groups are the channels.
template <typename T>
void normalize_channel_groups(const T* x, T* y, int64_t n, int64_t c, int64_t groups, int64_t plane,
                              const std::vector<double>& scale, const std::vector<double>& bias, double eps) {
  if (groups <= 0) return;  // no channels (InstanceNormalization of C = 0): nothing to write
  const int64_t per_group = c / groups, span = per_group * plane;
#pragma omp parallel for schedule(static) if (n * c * plane > 65536)
  for (int64_t ng = 0; ng < n * groups; ++ng) {
    const T* xg = x + ng * span;
    T* yg = y + ng * span;
    const auto [mean, inv_std] = mean_and_inv_std(xg, span, eps);
    const int64_t first_channel = (ng % groups) * per_group;
    for (int64_t k = 0; k < per_group; ++k) {
      const size_t ch = static_cast<size_t>(first_channel + k);
      const double a = scale[ch] * inv_std, b = bias[ch] - mean * a;
      for (int64_t i = 0; i < plane; ++i)
        yg[k * plane + i] = static_cast<T>(static_cast<double>(xg[k * plane + i]) * a + b);
    }
  }
}

// Converts a 16-bit float tensor to f32 (other tensors are returned unchanged).
inline Tensor widen_to_f32(const Tensor& t) {
  if (!is_half_like(t.dtype())) return t;
  Tensor out(DType::F32, t.dims());
  float* o = out.data<float>();
  if (t.dtype() == DType::F16) {
    const Half* in = t.data<Half>();
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = static_cast<float>(in[i]);
  } else {
    const BFloat16* in = t.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = static_cast<float>(in[i]);
  }
  return out;
}

inline Tensor narrow_from_f32(const Tensor& t, DType to) {
  if (t.dtype() != DType::F32 || !is_half_like(to)) return t;
  Tensor out(to, t.dims());
  const float* in = t.data<float>();
  if (to == DType::F16) {
    Half* o = out.data<Half>();
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = Half(in[i]);
  } else {
    BFloat16* o = out.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = BFloat16(in[i]);
  }
  return out;
}

// Runs `fn` (a kernel that handles f32) for a node whose float inputs are float16/bfloat16:
// 16-bit float inputs are widened to f32, and f32 outputs narrowed back to `dt`. Integer and
// bool inputs/outputs (indices, masks) pass through.
inline Status run_widened(KernelContext& ctx, DType dt, Status (*fn)(KernelContext&)) {
  std::vector<RuntimeValue> ins(ctx.num_inputs());
  std::vector<const RuntimeValue*> ptrs(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.input_value(i).is_tensor()) ins[i] = RuntimeValue(widen_to_f32(ctx.input(i)));
    else if (ctx.has_input(i)) ins[i] = ctx.input_value(i);
    ptrs[i] = &ins[i];
  }
  std::vector<RuntimeValue> outs(ctx.num_outputs());
  std::vector<bool> wanted(ctx.num_outputs());
  for (size_t i = 0; i < ctx.num_outputs(); ++i) wanted[i] = ctx.wants_output(i);
  KernelContext inner(ctx.op(), ptrs, &outs, wanted);
  inner.set_engines(ctx.engines());
  GBX_RETURN_IF_ERROR(fn(inner));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].is_tensor()) ctx.set_output(i, narrow_from_f32(outs[i].tensor(), dt));
    else if (!outs[i].is_none()) ctx.set_output_value(i, std::move(outs[i]));
  }
  return Status::OK();
}

// Sliding-window geometry over the spatial dims of an N x C x D1 x ... x Dk tensor.
struct Window {
  size_t rank = 0;                 // number of spatial dims k
  std::vector<int64_t> in;         // input spatial sizes
  std::vector<int64_t> kernel;     // kernel spatial sizes
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> dilations;  // default 1
  std::vector<int64_t> pad_begin;  // pads[0..k)
  std::vector<int64_t> pad_end;    // pads[k..2k)
  std::vector<int64_t> out;        // output spatial sizes
};

// Reads strides/dilations/pads/auto_pad and computes the output size of a Conv or pool
// window. `ceil_mode` rounds the output size up (pools), dropping a last window that would
// start in the end padding.
inline Result<Window> make_window(const KernelContext& ctx, const std::vector<int64_t>& in_spatial,
                                  const std::vector<int64_t>& kernel, bool ceil_mode = false,
                                  bool allow_dilations = true) {
  Window w;
  w.rank = in_spatial.size();
  w.in = in_spatial;
  w.kernel = kernel;
  const size_t k = w.rank;
  if (kernel.size() != k)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "kernel has ", kernel.size(), " spatial dims but the input has ", k);
  w.strides = ctx.attr_ints("strides", std::vector<int64_t>(k, 1));
  w.dilations = allow_dilations ? ctx.attr_ints("dilations", std::vector<int64_t>(k, 1)) : std::vector<int64_t>(k, 1);
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (w.strides.size() != k || w.dilations.size() != k || pads.size() != 2 * k)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "strides/dilations/pads have ", w.strides.size(), "/",
                     w.dilations.size(), "/", pads.size(), " values; expected ", k, "/", k, "/", 2 * k);
  for (size_t i = 0; i < k; ++i) {
    if (w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[i + k] < 0)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "spatial dim ", i, ": kernel ", kernel[i], ", stride ",
                       w.strides[i], ", dilation ", w.dilations[i], ", pads ", pads[i], "/", pads[i + k],
                       " (kernel/stride/dilation must be >= 1, pads >= 0)");
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<long>(k));
  w.pad_end.assign(pads.begin() + static_cast<long>(k), pads.end());
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  w.out.resize(k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t ext = (kernel[i] - 1) * w.dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (w.in[i] + w.strides[i] - 1) / w.strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + ext - w.in[i]);
      const int64_t small = total / 2;
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pad_end[i] = total - w.pad_begin[i];
      w.out[i] = out;
    } else if (auto_pad == "VALID") {
      w.pad_begin[i] = w.pad_end[i] = 0;
      w.out[i] = w.in[i] >= ext ? (w.in[i] - ext) / w.strides[i] + 1 : 0;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      const int64_t span = w.in[i] + w.pad_begin[i] + w.pad_end[i] - ext;
      if (span < 0) {
        w.out[i] = 0;
      } else if (ceil_mode) {
        int64_t out = (span + w.strides[i] - 1) / w.strides[i] + 1;
        // The last window must start inside the input or the begin padding.
        if ((out - 1) * w.strides[i] >= w.in[i] + w.pad_begin[i]) --out;
        w.out[i] = out;
      } else {
        w.out[i] = span / w.strides[i] + 1;
      }
    } else {
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "auto_pad '", auto_pad,
                       "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    if (w.out[i] <= 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "spatial dim ", i, " of size ", w.in[i],
                       " is smaller than the kernel extent ", ext, " (with pads ", w.pad_begin[i], "/", w.pad_end[i],
                       ")");
  }
  return w;
}

// ConvTranspose's output window (ONNX semantics): strides, dilations, output_padding, pads,
// output_shape (spatial or full N,C,... form) and auto_pad. With output_shape or SAME_*
// the pads are derived from the requested size: the smaller half first except for
// SAME_LOWER (the ONNX formula and the node suite's outputs); an output_shape larger than
// the natural size gives a negative end pad (extra positions at the end, left zero).
inline Result<Window> make_transpose_window(const KernelContext& ctx, const std::vector<int64_t>& in_spatial,
                                            const std::vector<int64_t>& kernel) {
  const size_t k = in_spatial.size();
  Window w;
  w.rank = k;
  w.in = in_spatial;
  w.kernel = kernel;
  w.strides = ctx.attr_ints("strides", std::vector<int64_t>(k, 1));
  w.dilations = ctx.attr_ints("dilations", std::vector<int64_t>(k, 1));
  const std::vector<int64_t> out_pad = ctx.attr_ints("output_padding", std::vector<int64_t>(k, 0));
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  std::vector<int64_t> out_shape = ctx.attr_ints("output_shape");
  if (out_shape.size() == k + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);  // full N,C,... form
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (kernel.size() != k || w.strides.size() != k || w.dilations.size() != k || out_pad.size() != k ||
      pads.size() != 2 * k || (!out_shape.empty() && out_shape.size() != k))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "strides/dilations/output_padding/pads/output_shape sizes ",
                     w.strides.size(), "/", w.dilations.size(), "/", out_pad.size(), "/", pads.size(), "/",
                     out_shape.size(), " do not match ", k, " spatial dims");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "auto_pad '", auto_pad, "' is not supported");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  w.pad_begin.resize(k);
  w.pad_end.resize(k);
  w.out.resize(k);
  for (size_t j = 0; j < k; ++j) {
    if (w.strides[j] < 1 || w.dilations[j] < 1 || kernel[j] < 1 || out_pad[j] < 0)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "spatial dim ", j, ": stride ", w.strides[j], ", dilation ",
                       w.dilations[j], ", kernel ", kernel[j], ", output_padding ", out_pad[j], " are invalid");
    const int64_t in = in_spatial[j];
    const int64_t ext = (kernel[j] - 1) * w.dilations[j] + 1;
    const int64_t full = w.strides[j] * (in - 1) + out_pad[j] + ext;
    int64_t out;
    if (!out_shape.empty() || same) {
      out = !out_shape.empty() ? out_shape[j] : in * w.strides[j];
      const int64_t total = full - out;
      pads[j] = auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
      pads[j + k] = total - pads[j];
    } else {
      if (auto_pad == "VALID") pads[j] = pads[j + k] = 0;
      out = full - pads[j] - pads[j + k];
    }
    if (out <= 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "spatial dim ", j, " gives output size ", out, " (input ", in,
                       ", pads ", pads[j], "/", pads[j + k], ")");
    w.pad_begin[j] = pads[j];
    w.pad_end[j] = pads[j + k];
    w.out[j] = out;
  }
  return w;
}

// Spatial geometry padded to exactly three dims (leading unit dims for 1-D/2-D).
struct Geom3 {
  int64_t in[3], k[3], s[3], d[3], p[3], pe[3], out[3];
};

inline Geom3 to_geom3(const nn::Window& w) {
  Geom3 g;
  const size_t lead = 3 - w.rank;
  for (size_t i = 0; i < 3; ++i) {
    if (i < lead) {
      g.in[i] = g.k[i] = g.s[i] = g.d[i] = g.out[i] = 1;
      g.p[i] = g.pe[i] = 0;
    } else {
      const size_t j = i - lead;
      g.in[i] = w.in[j];
      g.k[i] = w.kernel[j];
      g.s[i] = w.strides[j];
      g.d[i] = w.dilations[j];
      g.p[i] = w.pad_begin[j];
      g.pe[i] = w.pad_end[j];
      g.out[i] = w.out[j];
    }
  }
  return g;
}

// Scratch memory for im2col/col2im buffers, kept per thread across calls: fresh multi-MB
// allocations cost a page fault per 4 KiB page on every call, which on this (virtualized)
// machine costs more than the im2col itself. Buffers above kScratchCacheLimit bytes are not
// kept, so one huge layer does not pin its buffer for the process lifetime. The contents are
// unspecified; callers overwrite what they use.
inline constexpr size_t kScratchCacheLimit = size_t(256) << 20;
template <typename T>
class Scratch {
 public:
  explicit Scratch(size_t n) {
    static thread_local ThreadScratch<T> cache;  // counted in the pool statistics (base/scratch.h)
    if (n * sizeof(T) <= kScratchCacheLimit) {
      ptr_ = cache.get(n, /*zero_on_growth=*/true);
    } else {
      own_.resize(n);
      ptr_ = own_.data();
    }
  }
  T* data() { return ptr_; }

 private:
  std::vector<T> own_;
  T* ptr_ = nullptr;
};

inline int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The Conv/ConvTranspose bias epilogue: adds bias[c] to every element of channel plane c of
// y, laid out [n, m, plane].
template <typename T>
inline void add_channel_bias(T* y, const T* bias, int64_t n, int64_t m, int64_t plane) {
#pragma omp parallel for schedule(static) if (n * m * plane > 32768)
  for (int64_t pl = 0; pl < n * m; ++pl) {
    const T bv = bias[pl % m];
    T* yc = y + pl * plane;
    for (int64_t i = 0; i < plane; ++i) yc[i] += bv;
  }
}

}  // namespace gearbox::ref::nn
