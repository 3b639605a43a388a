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

#include "kernels/cpu/ref/shape_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

enum class Layout { Nhwc, Nchw16c };
constexpr int64_t kBlock = 16;

// x, stored in `layout`, as an NCHW tensor.
Tensor to_nchw(const Tensor& x, Layout layout) {
  if (layout == Layout::Nhwc) {  // [N, H, W, C]
    const int64_t h = x.dim(1), w = x.dim(2), c = x.dim(3);
    Tensor y(DType::F32, {x.dim(0), c, h, w});
    strided_copy(x, 0, y.dims(), {h * w * c, 1, w * c, c}, y);
    return y;
  }
  // [N, C/16, H, W, 16], read in NCHW order: image, block, lane, row, column.
  const int64_t cb = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor y(DType::F32, {x.dim(0), cb * kBlock, h, w});
  strided_copy(x, 0, {x.dim(0), cb, kBlock, h, w}, {cb * h * w * kBlock, h * w * kBlock, 1, w * kBlock, kBlock}, y);
  return y;
}

// An NCHW y stored in `layout` (its channels a multiple of 16 for Nchw16c).
Tensor from_nchw(const Tensor& y, Layout layout) {
  const int64_t n = y.dim(0), c = y.dim(1), h = y.dim(2), w = y.dim(3);
  if (layout == Layout::Nhwc) {
    Tensor out(DType::F32, {n, h, w, c});
    strided_copy(y, 0, out.dims(), {c * h * w, w, 1, h * w}, out);
    return out;
  }
  Tensor out(DType::F32, {n, c / kBlock, h, w, kBlock});
  strided_copy(y, 0, out.dims(), {c * h * w, kBlock * h * w, w, 1, h * w}, out);
  return out;
}

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
    values[i] = act ? RuntimeValue(to_nchw(ctx.input(i), layout)) : ctx.input_value(i);
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
  ctx.set_output(0, from_nchw(y, layout));
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
