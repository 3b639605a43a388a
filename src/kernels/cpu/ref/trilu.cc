// Trilu (reference): keeps the upper (j - i >= k) or lower (j - i <= k)
// triangle of the last two dims and zeroes the rest; rows are copied as
// contiguous runs.
#include <algorithm>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status trilu(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error(ErrorCode::SHAPE_MISMATCH, "Trilu needs rank >= 2, got ", describe(x));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    GBX_ASSIGN_OR_RETURN(k, read_int_scalar(ctx, 1, "k"));
  }
  const bool upper = ctx.attr_int("upper", 1) != 0;
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), x.dims()));
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const int64_t mats = rows * cols > 0 ? x.numel() / (rows * cols) : 0;
  const ElemCopier cp(x, y);
  // Clamp k so i + k cannot overflow; beyond +-cols the result no longer
  // changes.
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = (m * rows + i) * cols;
      int64_t lo = 0, hi = cols;  // kept columns [lo, hi)
      if (upper) lo = std::clamp<int64_t>(i + k, 0, cols);
      else hi = std::clamp<int64_t>(i + k + 1, 0, cols);
      cp.run(row + lo, row + lo, hi - lo);
    }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Trilu", 14, 18, kEngineRef, {}, trilu});

}  // namespace
}  // namespace gearbox::ref
