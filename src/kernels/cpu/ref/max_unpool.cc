// MaxUnpool (opsets 9, 11+), reference: scatters X into a zero tensor at the flat indices
// MaxPool returned (indices over the whole output tensor). The output shape is the
// optional output_shape input, else (in - 1) * stride - pad_begin - pad_end + kernel.
#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

Status max_unpool(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() < 3 || ind.dims() != x.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X must be [N, C, ...] and I the same shape; got ", describe(x), ", ",
                     describe(ind));
  const size_t sd = x.rank() - 2;
  // Indices address the inferred output (in - 1) * stride - pads + kernel; an explicit
  // output_shape only enlarges the tensor they are placed into (coordinates are kept), as in
  // the ONNX test data and ONNX Runtime.
  std::vector<int64_t> k = ctx.attr_ints("kernel_shape");
  std::vector<int64_t> s = ctx.attr_ints("strides", std::vector<int64_t>(sd, 1));
  std::vector<int64_t> p = ctx.attr_ints("pads", std::vector<int64_t>(2 * sd, 0));
  if (k.size() != sd || s.size() != sd || p.size() != 2 * sd)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "kernel_shape/strides/pads do not match ", sd, " spatial dims");
  Dims inferred = {x.dim(0), x.dim(1)};
  for (size_t d = 0; d < sd; ++d) inferred.push_back((x.dim(2 + d) - 1) * s[d] - p[d] - p[d + sd] + k[d]);
  Dims out = inferred;
  if (ctx.has_input(2)) {
    GBX_ASSIGN_OR_RETURN(out, read_ints(ctx, ctx.input(2)));
    if (out.size() != x.rank())
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "output_shape ", to_string(out), " must have rank ", x.rank());
  }
  for (int64_t v : inferred)
    if (v < 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "inferred output shape ", to_string(inferred), " is negative");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), out));
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> idx, read_ints(ctx, ind));
  const int64_t n = numel(inferred);
  // Re-encodes a flat index of `inferred` into `out`; -1 if it falls outside.
  auto remap = [&](int64_t f) -> int64_t {
    if (out == inferred) return f;
    int64_t o = 0, mul = 1;
    for (size_t d = inferred.size(); d-- > 0;) {
      int64_t c = f % inferred[d];
      f /= inferred[d];
      if (c >= out[d]) return -1;
      o += c * mul;
      mul *= out[d];
    }
    return o;
  };
  bool ok = true;
  int64_t bad = 0;
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* o = y.data<T>();
    for (size_t i = 0; i < idx.size(); ++i) {
      int64_t at = idx[i] < 0 || idx[i] >= n ? -1 : remap(idx[i]);
      if (at < 0) {
        ok = false;
        bad = idx[i];
        return;
      }
      o[at] = in[i];
    }
  });
  if (!ok) return ctx.error(ErrorCode::INVALID_ARGUMENT, "index ", bad, " is outside the output ", describe(y));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "MaxUnpool", 9, 18, kEngineRef, float_dtypes(), max_unpool});

}  // namespace
}  // namespace gearbox::ref
