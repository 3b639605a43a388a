// Element-wise ops on the cpu.simd engine: Add, Sub, Mul, Div (ai.onnx 7-17) and Relu, Neg,
// Abs, Sqrt, Sigmoid, Tanh, Exp (6-17), float32.
//
// Binary ops take the broadcasts that need no index arithmetic: equal element counts (same
// data, dims that differ only by leading 1s), a one-element side, and a side that is a
// trailing row of the output (bias-like: [N] or [1, N] against [M, N], the BERT mask and
// embedding adds); spans run in OpenMP chunks. Other broadcasts, other dtypes and invalid
// shapes run the reference kernel (which reports the errors).
#include <algorithm>

#include "kernels/cpu/simd/elementwise.h"
#include "kernels/cpu/simd/simd_util.h"

namespace gearbox::simd {
namespace {

constexpr int64_t kChunk = 16384;  // floats per OpenMP work item

// The numpy broadcast of two shapes; false when they do not broadcast.
bool broadcast_dims(const Dims& a, const Dims& b, Dims* out) {
  const size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

// The length of the trailing row `small` repeats over in `out` (its dims with leading 1s
// stripped equal out's last dims), or 0 when it is not such a row.
int64_t trailing_row(const Dims& small, const Dims& out) {
  size_t first = 0;
  while (first < small.size() && small[first] == 1) ++first;
  const size_t k = small.size() - first;
  if (k == 0 || k > out.size()) return 0;
  int64_t len = 1;
  for (size_t i = 0; i < k; ++i) {
    if (small[first + i] != out[out.size() - k + i]) return 0;
    len *= small[first + i];
  }
  return len;
}

template <BinaryOp kOp>
Status binary(KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.input_value(0).is_tensor() || !ctx.input_value(1).is_tensor())
    return run_ref(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Dims out_dims;
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32 || !broadcast_dims(a.dims(), b.dims(), &out_dims))
    return run_ref(ctx);
  int64_t n = 1;
  for (int64_t d : out_dims) n *= d;
  if (n == 0) return run_ref(ctx);
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  int64_t row = 0;  // > 0: the smaller side repeats every `row` elements
  bool a_is_row = false;
  int64_t a_step = 1, b_step = 1;
  if (a.numel() == n && b.numel() == n) {
  } else if (a.numel() == n && b.numel() == 1) {
    b_step = 0;
  } else if (b.numel() == n && a.numel() == 1) {
    a_step = 0;
  } else if (a.numel() == n && (row = trailing_row(b.dims(), out_dims)) > 0) {
  } else if (b.numel() == n && (row = trailing_row(a.dims(), out_dims)) > 0) {
    a_is_row = true;
  } else {
    return run_ref(ctx);
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, out_dims));
  float* yp = y.data<float>();
  if (row > 0) {
    const int64_t rows = n / row;
    for_each_index(rows, n > 2 * kChunk, [&](int64_t r) {
      const int64_t o = r * row;
      if (a_is_row)
        binary_span(kOp, ap, 1, bp + o, 1, yp + o, row);
      else
        binary_span(kOp, ap + o, 1, bp, 1, yp + o, row);
    });
  } else {
    for_each_index((n + kChunk - 1) / kChunk, n > 2 * kChunk, [&](int64_t i) {
      const int64_t c = i * kChunk;
      binary_span(kOp, ap + c * a_step, a_step, bp + c * b_step, b_step, yp + c, std::min(kChunk, n - c));
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

template <UnaryOp kOp>
Status unary(KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.input_value(0).is_tensor()) return run_ref(ctx);
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32 || x.numel() == 0) return run_ref(ctx);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  const int64_t n = x.numel();
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for_each_index((n + kChunk - 1) / kChunk, n > 2 * kChunk, [&](int64_t i) {
    const int64_t c = i * kChunk;
    unary_span(kOp, xp + c, yp + c, std::min(kChunk, n - c));
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "Add", 7, 17, kEngineSimd, {DType::F32}, binary<BinaryOp::Add>});
GBX_REGISTER_KERNEL({"", "Sub", 7, 17, kEngineSimd, {DType::F32}, binary<BinaryOp::Sub>});
GBX_REGISTER_KERNEL({"", "Mul", 7, 17, kEngineSimd, {DType::F32}, binary<BinaryOp::Mul>});
GBX_REGISTER_KERNEL({"", "Div", 7, 17, kEngineSimd, {DType::F32}, binary<BinaryOp::Div>});
GBX_REGISTER_KERNEL({"", "Relu", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Relu>});
GBX_REGISTER_KERNEL({"", "Neg", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Neg>});
GBX_REGISTER_KERNEL({"", "Abs", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Abs>});
GBX_REGISTER_KERNEL({"", "Sqrt", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Sqrt>});
GBX_REGISTER_KERNEL({"", "Sigmoid", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Sigmoid>});
GBX_REGISTER_KERNEL({"", "Tanh", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Tanh>});
GBX_REGISTER_KERNEL({"", "Exp", 6, 17, kEngineSimd, {DType::F32}, unary<UnaryOp::Exp>});

}  // namespace gearbox::simd
