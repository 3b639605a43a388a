// MatMul (reference, opsets 1-17): numpy matmul semantics — batch dims broadcast, a 1-D
// A is a row vector and a 1-D B a column vector, and the inserted dim is dropped from the
// result. float32/float64 (float16/bfloat16 computed in f32), all through gemm_core.
//
// When B has no batch dims (weights in a Linear layer), A's batch dims are folded into M so
// the whole op is one large GEMM instead of many small ones.
#include <vector>

#include "kernels/cpu/ref/gemm_core.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void matmul_typed(const Tensor& a, const Tensor& b, Tensor& y, const Dims& a3, const Dims& b3, const Dims& batch) {
  // a3/b3: A and B viewed as [batch..., M, K] / [batch..., K, N] with their own batch dims.
  const int64_t m = a3[a3.size() - 2], k = a3.back(), n = b3.back();
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* yp = y.data<T>();
  GemmShape s;
  s.k = k;
  s.n = n;
  s.lda = k;
  s.ldb = n;
  s.ldc = n;
  const Dims a_batch(a3.begin(), a3.end() - 2), b_batch(b3.begin(), b3.end() - 2);
  const int64_t nb = numel(batch);
  if (b_batch.empty() || numel(b_batch) == 1) {
    if (numel(a_batch) == nb) {
      // B shared by every batch entry, A's batch contiguous: one GEMM with M = batch * M.
      s.m = nb * m;
      gemm<T>(s, T(1), ap, bp, T(0), yp);
      return;
    }
  }
  s.m = m;
  const std::vector<int64_t> as = broadcast_strides(a_batch, batch), bs = broadcast_strides(b_batch, batch);
  std::vector<GemmPtrs<T>> ptrs;
  ptrs.reserve(static_cast<size_t>(nb));
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t ao = 0, bo = 0;
  for (int64_t i = 0; i < nb; ++i) {
    ptrs.push_back({ap + ao * m * k, bp + bo * k * n, yp + i * m * n});
    for (size_t d = batch.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) {
        ao += as[d];
        bo += bs[d];
        break;
      }
      ao -= as[d] * (batch[d] - 1);
      bo -= bs[d] * (batch[d] - 1);
      idx[d] = 0;
    }
  }
  gemm_batched(s, T(1), ptrs.data(), nb, T(0));
}

Status matmul(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const DType dt = ctx.input(0).dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, matmul);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (b.dtype() != dt)
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "B has dtype ", dtype_name(b.dtype()), " but A has ",
                     dtype_name(dt));
  if (a.rank() == 0 || b.rank() == 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "MatMul operands must have rank >= 1, got A ", to_string(a.dims()),
                     " and B ", to_string(b.dims()));
  Dims a3 = a.dims(), b3 = b.dims();
  if (a3.size() == 1) a3.insert(a3.begin(), 1);
  if (b3.size() == 1) b3.push_back(1);
  if (a3.back() != b3[b3.size() - 2])
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "A ", to_string(a.dims()), " and B ", to_string(b.dims()),
                     " have mismatched inner dims ", a3.back(), " vs ", b3[b3.size() - 2]);
  GBX_ASSIGN_OR_RETURN(Dims batch,
                       broadcast_shapes(ctx, {Dims(a3.begin(), a3.end() - 2), Dims(b3.begin(), b3.end() - 2)}));
  Dims ydims = batch;
  if (a.rank() > 1) ydims.push_back(a3[a3.size() - 2]);
  if (b.rank() > 1) ydims.push_back(b3.back());
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, ydims));
  if (y.numel() > 0) {
    if (dt == DType::F32) matmul_typed<float>(a, b, y, a3, b3, batch);
    else matmul_typed<double>(a, b, y, a3, b3, batch);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "MatMul", 1, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, matmul});

}  // namespace
}  // namespace gearbox::ref
