// Transpose (reference). The permuted copy goes through strided_copy, which
// coalesces dims that stay adjacent and memcpy's unit-stride runs (the common
// BERT case [B,S,H,D] -> [B,H,S,D] moves whole D-rows).
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status transpose(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  std::vector<int64_t> perm;
  if (ctx.has_attr("perm")) {
    perm = ctx.attr_ints("perm");
    if (int64_t(perm.size()) != rank)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "perm has ", perm.size(), " entries but input ", describe(x),
                       " has rank ", rank);
    GBX_ASSIGN_OR_RETURN(perm, normalize_axes(ctx, perm, rank));
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  const auto in_strides = strides_of(x.dims());
  Dims out_dims(static_cast<size_t>(rank));
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    out_dims[size_t(i)] = x.dim(size_t(perm[size_t(i)]));
    strides[size_t(i)] = in_strides[size_t(perm[size_t(i)])];
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out_dims));
  strided_copy(x, 0, out_dims, strides, y);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Transpose", 1, 18, kEngineRef, {}, transpose});

}  // namespace
}  // namespace gearbox::ref
