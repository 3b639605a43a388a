// The operators of the layout passes, reference kernels: com.gearbox.NhwcConv (FusedConv's
// inputs and attributes, with X, the residual Z and Y as [N, H, W, C]), NhwcMaxPool,
// NhwcAveragePool and NhwcGlobalAveragePool (the ai.onnx pool's attributes on [N, H, W, C]),
// written by src/graph/passes/layout_nhwc.cc, and com.gearbox.Nchw16cConv (NhwcConv's inputs
// and attributes with X, Z and Y in oneDNN's blocked layout, [N, C/16, H, W, 16]), written by
// src/graph/passes/layout_blocked.cc. Each rearranges its activations to NCHW, runs the
// reference kernel of the NCHW operator, and rearranges the result back: slow, but it computes
// exactly what the unrewritten graph computes on cpu.ref, which is what the pass tests compare.
// The fast kernels are the cpu.dnnl ones (src/kernels/cpu/dnnl/conv.cc, pool.cc), which read
// and write these layouts directly.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

// [N, A, B, C] -> [N, C, A, B] when to_nchw, else [N, A, B, C] seen as NCHW -> [N, B, C, A].
Tensor permute4(const Tensor& x, bool to_nchw) {
  const int64_t n = x.dim(0), d1 = x.dim(1), d2 = x.dim(2), d3 = x.dim(3);
  Tensor y(DType::F32, to_nchw ? Dims{n, d3, d1, d2} : Dims{n, d2, d3, d1});
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t plane = d1 * d2 * d3;
#pragma omp parallel for schedule(static) if (n * plane > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = xp + i * plane;
    float* yi = yp + i * plane;
    if (to_nchw) {  // x is N,H,W,C (d1=H, d2=W, d3=C)
      for (int64_t h = 0; h < d1; ++h)
        for (int64_t w = 0; w < d2; ++w)
          for (int64_t c = 0; c < d3; ++c) yi[(c * d1 + h) * d2 + w] = xi[(h * d2 + w) * d3 + c];
    } else {  // x is N,C,H,W (d1=C, d2=H, d3=W)
      for (int64_t c = 0; c < d1; ++c)
        for (int64_t h = 0; h < d2; ++h)
          for (int64_t w = 0; w < d3; ++w) yi[(h * d3 + w) * d1 + c] = xi[(c * d2 + h) * d3 + w];
    }
  }
  return y;
}

constexpr int64_t kBlock = 16;

// [N, C/16, H, W, 16] -> [N, C, H, W] when to_nchw, else the reverse (C a multiple of 16).
Tensor reblock16(const Tensor& x, bool to_nchw) {
  const int64_t n = x.dim(0), cb = to_nchw ? x.dim(1) : x.dim(1) / kBlock, hw = x.dim(2) * x.dim(3);
  Tensor y(DType::F32, to_nchw ? Dims{n, cb * kBlock, x.dim(2), x.dim(3)} : Dims{n, cb, x.dim(2), x.dim(3), kBlock});
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel for schedule(static) if (x.numel() > 65536)
  for (int64_t i = 0; i < n * cb; ++i)  // one 16-channel block of one image: hw x 16 floats either way
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t c = 0; c < kBlock; ++c) {
        const int64_t planar = (i * kBlock + c) * hw + p, blocked = (i * hw + p) * kBlock + c;
        if (to_nchw) yp[planar] = xp[blocked];
        else yp[blocked] = xp[planar];
      }
  return y;
}

enum class Layout { Nhwc, Nchw16c };

// Runs the reference kernel of (domain, op) on the NCHW form of activation inputs `acts`,
// stored in `layout`.
Status run_nchw(KernelContext& ctx, std::string_view domain, std::string_view op, int opset,
                const std::vector<size_t>& acts, Layout layout = Layout::Nhwc) {
  const bool blocked = layout == Layout::Nchw16c;
  for (size_t i : acts) {
    if (!ctx.has_input(i)) continue;
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    const Tensor& t = ctx.input(i);
    if (t.dtype() != DType::F32) return ctx.unsupported_dtype(t.dtype());
    if (!blocked && t.rank() != 4)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "input ", i, " ", to_string(t.dims()),
                       " must be a rank-4 channels-last tensor [N, H, W, C]");
    if (blocked && (t.rank() != 5 || t.dim(4) != kBlock))
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "input ", i, " ", to_string(t.dims()),
                       " must be a rank-5 blocked tensor [N, C/16, H, W, 16]");
  }
  std::vector<RuntimeValue> values(ctx.num_inputs());
  std::vector<const RuntimeValue*> ptrs(ctx.num_inputs(), nullptr);
  std::vector<bool> constant(ctx.num_inputs(), false);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const bool act = std::find(acts.begin(), acts.end(), i) != acts.end();
    values[i] = !act ? ctx.input_value(i)
                : RuntimeValue(blocked ? reblock16(ctx.input(i), true) : permute4(ctx.input(i), true));
    ptrs[i] = &values[i];
    constant[i] = ctx.input_is_constant(i);
  }
  const KernelDef* def = KernelRegistry::global().find(domain, op, opset, kEngineRef, DType::F32);
  if (!def) return ctx.error(ErrorCode::OP_UNSUPPORTED, "no reference ", op, " kernel");
  std::vector<RuntimeValue> outs(1);
  KernelContext inner(OpInfo{ctx.op().name, op, domain, opset, ctx.op().attrs}, ptrs, &outs, {true});
  inner.set_engines(ctx.engines());
  inner.set_constant_inputs(std::move(constant));
  GBX_RETURN_IF_ERROR(def->fn(inner));
  if (!outs[0].is_tensor() || outs[0].tensor().rank() != 4)
    return ctx.error(ErrorCode::INTERNAL, op, " did not produce a rank-4 tensor");
  const Tensor& y = outs[0].tensor();
  if (blocked && y.dim(1) % kBlock != 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, op, " has ", y.dim(1),
                     " output channels: the blocked layout [N, C/16, H, W, 16] needs a multiple of 16");
  ctx.set_output(0, blocked ? reblock16(y, false) : permute4(y, false));
  return Status::OK();
}

Status nhwc_conv(KernelContext& ctx) { return run_nchw(ctx, kGearboxDomain, "FusedConv", 1, {0, 3}); }
Status nhwc_max_pool(KernelContext& ctx) { return run_nchw(ctx, "", "MaxPool", 12, {0}); }
Status nhwc_avg_pool(KernelContext& ctx) { return run_nchw(ctx, "", "AveragePool", 11, {0}); }
Status nhwc_global_avg_pool(KernelContext& ctx) { return run_nchw(ctx, "", "GlobalAveragePool", 1, {0}); }
Status nchw16c_conv(KernelContext& ctx) {
  return run_nchw(ctx, kGearboxDomain, "FusedConv", 1, {0, 3}, Layout::Nchw16c);
}

GBX_REGISTER_KERNEL({kGearboxDomain, "NhwcConv", 1, 1, kEngineRef, {DType::F32}, nhwc_conv});
GBX_REGISTER_KERNEL({kGearboxDomain, "NhwcMaxPool", 1, 1, kEngineRef, {DType::F32}, nhwc_max_pool});
GBX_REGISTER_KERNEL({kGearboxDomain, "NhwcAveragePool", 1, 1, kEngineRef, {DType::F32}, nhwc_avg_pool});
GBX_REGISTER_KERNEL({kGearboxDomain, "NhwcGlobalAveragePool", 1, 1, kEngineRef, {DType::F32}, nhwc_global_avg_pool});
GBX_REGISTER_KERNEL({kGearboxDomain, "Nchw16cConv", 1, 1, kEngineRef, {DType::F32}, nchw16c_conv});

}  // namespace
}  // namespace gearbox::ref
