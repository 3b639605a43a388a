// ReverseSequence (reference): reverses the first sequence_lens[b] steps along
// time_axis for each batch entry b; the remaining steps are copied unchanged.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status reverse_sequence(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  const int64_t ta = ctx.attr_int("time_axis", 0), ba = ctx.attr_int("batch_axis", 1);
  if (rank < 2) return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must have rank >= 2, got ", describe(x));
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "time_axis ", ta, " and batch_axis ", ba,
                     " must be 0 and 1 in some order");
  GBX_ASSIGN_OR_RETURN(auto lens, read_ints(ctx, ctx.input(1)));
  const int64_t batch = x.dim(size_t(ba)), steps = x.dim(size_t(ta));
  if (int64_t(lens.size()) != batch)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "sequence_lens has ", lens.size(), " entries but batch is ", batch);
  for (int64_t l : lens)
    if (l < 0 || l > steps)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "sequence length ", l, " is outside [0, ", steps, "]");
  int64_t inner = 1;
  for (int64_t d = 2; d < rank; ++d) inner *= x.dim(size_t(d));
  const auto xs = strides_of(x.dims());
  const int64_t ts = xs[size_t(ta)], bs = xs[size_t(ba)];
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), x.dims()));
  const ElemCopier cp(x, y);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t src_t = t < lens[size_t(b)] ? lens[size_t(b)] - 1 - t : t;
      cp.run(b * bs + src_t * ts, b * bs + t * ts, inner);
    }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "ReverseSequence", 10, 18, kEngineRef, {}, reverse_sequence});

}  // namespace
}  // namespace gearbox::ref
