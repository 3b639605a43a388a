// NonZero (reference): the coordinates of non-zero elements, as int64 [rank,
// count], in row-major order like numpy.nonzero. Strings count as non-zero when
// non-empty.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status non_zero(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  if (x.dtype() == DType::String) {
    for (int64_t i = 0; i < x.numel(); ++i)
      if (!x.strings()[size_t(i)].empty()) hits.push_back(i);
  } else {
    const bool ok = visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = x.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i)
        if (static_cast<compute_t<T>>(p[i]) != compute_t<T>(0)) hits.push_back(i);
    });
    if (!ok) return ctx.unsupported_dtype(x.dtype());
  }
  // A scalar is treated as a 1-element vector (as onnxruntime does).
  const Dims dims = x.rank() == 0 ? Dims{1} : x.dims();
  const int64_t rank = int64_t(dims.size()), n = int64_t(hits.size());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, DType::I64, {rank, n}));
  int64_t* o = y.data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[size_t(j)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      o[d * n + j] = rem % dims[size_t(d)];
      rem /= dims[size_t(d)];
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "NonZero", 9, 18, kEngineRef, {}, non_zero});

}  // namespace
}  // namespace gearbox::ref
