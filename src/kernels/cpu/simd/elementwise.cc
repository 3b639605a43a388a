// Element-wise ops on the cpu.simd engine: Add, Sub, Mul, Div (ai.onnx 7-17) and Relu, Neg,
// Abs, Sqrt, Sigmoid, Tanh, Exp (6-17), float32.
//
// Binary ops take the broadcasts that need no index arithmetic: equal element counts (same
// data, dims that differ only by leading 1s), a one-element side, and a side that is a
// trailing row of the output (bias-like: [N] or [1, N] against [M, N], the BERT mask and
// embedding adds); spans run in OpenMP chunks. Other broadcasts, other dtypes and invalid
// shapes are refused by the kernels' supports() predicates, so the partitioner (or, for
// shapes known only at run time, the executor) gives those nodes to the next engine.
#include "kernels/cpu/simd/elementwise.h"

#include <algorithm>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

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

// How a binary op's sides are read: the broadcasts binary() implements (above). False for any
// other broadcast, or shapes that do not broadcast.
struct BinaryPlan {
  Dims out_dims;
  int64_t n = 0;
  int64_t row = 0;  // > 0: the smaller side repeats every `row` elements
  bool a_is_row = false;
  int64_t a_step = 1, b_step = 1;
};

bool plan_binary(const Dims& a, const Dims& b, BinaryPlan* p) {
  if (!broadcast_dims(a, b, &p->out_dims)) return false;
  p->n = dims_numel(p->out_dims);
  const int64_t na = dims_numel(a), nb = dims_numel(b), n = p->n;
  if (na == n && nb == n) return true;
  if (na == n && nb == 1) {
    p->b_step = 0;
    return true;
  }
  if (nb == n && na == 1) {
    p->a_step = 0;
    return true;
  }
  if (na == n && (p->row = trailing_row(b, p->out_dims)) > 0) return true;
  if (nb == n && (p->row = trailing_row(a, p->out_dims)) > 0) {
    p->a_is_row = true;
    return true;
  }
  return false;
}

Verdict binary_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  const Dims* a = q.dims(0);
  const Dims* b = q.dims(1);
  if (!a || !b) return later();
  BinaryPlan p;
  if (!plan_binary(*a, *b, &p))
    return refuse("broadcast of " + to_string(*a) + " and " + to_string(*b) +
                  " is not equal counts, a scalar side or a trailing row");
  if (p.n == 0) return refuse("the output is empty");
  return accept();
}

template <BinaryOp kOp>
Status binary(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  BinaryPlan p;
  if (!plan_binary(a.dims(), b.dims(), &p)) return outside_supports(ctx, "this broadcast");
  const Dims& out_dims = p.out_dims;
  const int64_t n = p.n, row = p.row, a_step = p.a_step, b_step = p.b_step;
  const bool a_is_row = p.a_is_row;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, out_dims));
  float* yp = y.data<float>();
  if (row > 0) {
    const int64_t rows = n / row;
    for_each_index(rows, n > 2 * kChunk, [&](int64_t r) {
      const int64_t o = r * row;
      if (a_is_row) binary_span(kOp, ap, 1, bp + o, 1, yp + o, row);
      else binary_span(kOp, ap + o, 1, bp, 1, yp + o, row);
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
  const Tensor& x = ctx.input(0);
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

Verdict unary_supports(const KernelQuery& q) { return need_tensors(q, {0}); }

}  // namespace

GBX_REGISTER_KERNEL({"", "Add", 7, 18, kEngineSimd, {DType::F32}, binary<BinaryOp::Add>});
GBX_KERNEL_SUPPORT(binary<BinaryOp::Add>, {.inputs = {{DType::F32}, {DType::F32}}, .supports = binary_supports});
GBX_REGISTER_KERNEL({"", "Sub", 7, 18, kEngineSimd, {DType::F32}, binary<BinaryOp::Sub>});
GBX_KERNEL_SUPPORT(binary<BinaryOp::Sub>, {.inputs = {{DType::F32}, {DType::F32}}, .supports = binary_supports});
GBX_REGISTER_KERNEL({"", "Mul", 7, 18, kEngineSimd, {DType::F32}, binary<BinaryOp::Mul>});
GBX_KERNEL_SUPPORT(binary<BinaryOp::Mul>, {.inputs = {{DType::F32}, {DType::F32}}, .supports = binary_supports});
GBX_REGISTER_KERNEL({"", "Div", 7, 18, kEngineSimd, {DType::F32}, binary<BinaryOp::Div>});
GBX_KERNEL_SUPPORT(binary<BinaryOp::Div>, {.inputs = {{DType::F32}, {DType::F32}}, .supports = binary_supports});
GBX_REGISTER_KERNEL({"", "Relu", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Relu>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Relu>, {.supports = unary_supports});
GBX_REGISTER_KERNEL({"", "Neg", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Neg>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Neg>, {.supports = unary_supports});
GBX_REGISTER_KERNEL({"", "Abs", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Abs>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Abs>, {.supports = unary_supports});
GBX_REGISTER_KERNEL({"", "Sqrt", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Sqrt>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Sqrt>, {.supports = unary_supports});
GBX_REGISTER_KERNEL({"", "Sigmoid", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Sigmoid>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Sigmoid>, {.supports = unary_supports});
GBX_REGISTER_KERNEL({"", "Tanh", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Tanh>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Tanh>, {.supports = unary_supports});
GBX_REGISTER_KERNEL({"", "Exp", 6, 18, kEngineSimd, {DType::F32}, unary<UnaryOp::Exp>});
GBX_KERNEL_SUPPORT(unary<UnaryOp::Exp>, {.supports = unary_supports});

}  // namespace gearbox::simd
