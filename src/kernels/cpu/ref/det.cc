// Det (opset 11+), reference: determinants of the trailing [M, M] matrices by LU
// decomposition with partial pivoting, in double.
#include <cmath>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

Status det(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [..., M, M], got ", describe(x));
  const int64_t m = x.dim(x.rank() - 1);
  Dims out(x.dims().begin(), x.dims().end() - 2);
  const int64_t batch = numel(out);
  std::vector<double> v = read_doubles(x), res(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    double* a = &v[static_cast<size_t>(b * m * m)];
    double d = 1;
    for (int64_t c = 0; c < m && d != 0; ++c) {
      int64_t p = c;
      for (int64_t r = c + 1; r < m; ++r)
        if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
      if (a[p * m + c] == 0) {
        d = 0;
        break;
      }
      if (p != c) {
        for (int64_t k = 0; k < m; ++k) std::swap(a[p * m + k], a[c * m + k]);
        d = -d;
      }
      d *= a[c * m + c];
      for (int64_t r = c + 1; r < m; ++r) {
        double f = a[r * m + c] / a[c * m + c];
        for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
      }
    }
    res[static_cast<size_t>(b)] = d;
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, make_float_tensor(x.dtype(), out, res));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Det", 11, 18, kEngineRef, float_dtypes(), det});

}  // namespace
}  // namespace gearbox::ref
