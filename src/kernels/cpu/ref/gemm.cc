// Gemm (reference, opsets 7-17): Y = alpha * op(A) * op(B) + beta * C, with transA/transB,
// C unidirectionally broadcast to (M, N) and optional from opset 11. float32/float64
// (float16/bfloat16 computed in f32), through gemm_core.
#include <vector>

#include "kernels/cpu/ref/gemm_core.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void gemm_typed(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y, const GemmShape& s, T alpha, T beta) {
  T* yp = y.data<T>();
  T gemm_beta = T(0);
  if (c && beta != T(0)) {
    // Y starts as C broadcast to (M, N); the GEMM then adds alpha * A * B onto beta * Y.
    const std::vector<int64_t> cs = broadcast_strides(c->dims(), {s.m, s.n});
    const T* cp = c->data<T>();
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) yp[i * s.n + j] = cp[i * cs[0] + j * cs[1]];
    gemm_beta = beta;
  }
  gemm<T>(s, alpha, a.data<T>(), b.data<T>(), gemm_beta, yp);
}

Status gemm_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const DType dt = ctx.input(0).dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, gemm_op);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = nullptr;
  if (ctx.has_input(2)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
    c = &ctx.input(2);
  } else if (ctx.opset() < 11) {
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "input C is required before opset 11");
  }
  if (b.dtype() != dt || (c && c->dtype() != dt))
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "A, B and C must share a dtype; got A ", describe(a), ", B ",
                     describe(b), c ? ", C " + describe(*c) : std::string());
  if (a.rank() != 2 || b.rank() != 2)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "A ", to_string(a.dims()), " and B ", to_string(b.dims()),
                     " must be 2-D");
  GemmShape s;
  s.trans_a = ctx.attr_int("transA", 0) != 0;
  s.trans_b = ctx.attr_int("transB", 0) != 0;
  s.m = s.trans_a ? a.dim(1) : a.dim(0);
  s.k = s.trans_a ? a.dim(0) : a.dim(1);
  s.n = s.trans_b ? b.dim(0) : b.dim(1);
  const int64_t kb = s.trans_b ? b.dim(1) : b.dim(0);
  if (kb != s.k)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "A ", to_string(a.dims()), " (transA=", s.trans_a, ") and B ",
                     to_string(b.dims()), " (transB=", s.trans_b, ") have mismatched inner dims ", s.k, " vs ", kb);
  s.lda = a.dim(1);
  s.ldb = b.dim(1);
  s.ldc = s.n;
  if (c) {
    bool ok = c->rank() <= 2;
    if (ok && c->rank() >= 1) ok = c->dims().back() == s.n || c->dims().back() == 1;
    if (ok && c->rank() == 2) ok = c->dim(0) == s.m || c->dim(0) == 1;
    if (!ok)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "C ", to_string(c->dims()), " cannot be broadcast to [", s.m, ",",
                       s.n, "]");
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, {s.m, s.n}));
  const float alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  if (y.numel() > 0) {
    if (dt == DType::F32) gemm_typed<float>(a, b, c, y, s, alpha, beta);
    else gemm_typed<double>(a, b, c, y, s, alpha, beta);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Gemm", 7, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, gemm_op});

}  // namespace
}  // namespace gearbox::ref
