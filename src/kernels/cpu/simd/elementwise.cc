// Element-wise ops on the cpu.simd engine: Add, Sub, Mul, Div (ai.onnx 7-17) and Relu, Neg,
// Abs, Sqrt, Sigmoid, Tanh, Exp (6-17), float32.
//
// Binary ops take the broadcasts that need no index arithmetic: equal element counts (same
// data, dims that differ only by leading 1s), a one-element side, and a side repeated over
// blocks of the output (blocked_broadcast: a bias row [N] against [M, N], the BERT mask and
// embedding adds, a squeeze-excite scale [N, C, 1, 1] or [N, 1, 1, C] at any batch, a per-channel
// [1, C, 1, 1] against a batch); spans
// run in OpenMP chunks. Other broadcasts, other dtypes and invalid
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

// Whether `small` broadcasts over `out` as [rep, outer, mid, row] blocks: its dims (left-padded
// with 1s) are 1 over a leading run (rep elements, possibly none), equal out's on the next run
// (outer) and on a trailing run (row), and are 1 over the run between those (mid > 1
// elements). Then element (r, o, m, w) of out reads element (o, w) of small: a bias row ([N]
// against [M, N]: outer 1), a per-channel scale of NCHW ([N, C, 1, 1]: row 1; [1, C, 1, 1] at
// batch > 1: rep N, a BatchNormalization's scale) or of channels-last at any batch ([N, 1, 1, C]).
bool blocked_runs(const Dims& small, const Dims& out, size_t i, int64_t* outer, int64_t* mid, int64_t* row) {
  const size_t pad = out.size() - small.size();
  auto s_at = [&](size_t k) { return k < pad ? int64_t{1} : small[k - pad]; };
  *outer = *mid = *row = 1;
  while (i < out.size() && s_at(i) == out[i]) *outer *= out[i++];
  while (i < out.size() && s_at(i) == 1) *mid *= out[i++];
  while (i < out.size() && s_at(i) == out[i]) *row *= out[i++];
  return i == out.size() && *mid > 1;
}

bool blocked_broadcast(const Dims& small, const Dims& out, int64_t* rep, int64_t* outer, int64_t* mid, int64_t* row) {
  if (small.size() > out.size()) return false;
  *rep = 1;
  if (blocked_runs(small, out, 0, outer, mid, row)) return true;
  const size_t pad = out.size() - small.size();
  size_t i = 0;
  int64_t r = 1;
  while (i < out.size() && (i < pad || small[i - pad] == 1)) r *= out[i++];
  if (r <= 1 || !blocked_runs(small, out, i, outer, mid, row)) return false;
  *rep = r;
  return true;
}

// How a binary op's sides are read: the broadcasts binary() implements (above). False for any
// other broadcast, or shapes that do not broadcast.
struct BinaryPlan {
  Dims out_dims;
  int64_t n = 0;
  bool blocked = false;  // the smaller side repeats over blocks: rep x outer x mid x row (blocked_broadcast)
  int64_t rep = 1, outer = 1, mid = 1, row = 1;
  bool a_is_small = false;
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
  if (na == n && blocked_broadcast(b, p->out_dims, &p->rep, &p->outer, &p->mid, &p->row)) return p->blocked = true;
  if (nb == n && blocked_broadcast(a, p->out_dims, &p->rep, &p->outer, &p->mid, &p->row)) {
    p->a_is_small = true;
    return p->blocked = true;
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
                  " is not equal counts, a scalar side or a side repeated over blocks");
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
  const int64_t n = p.n, a_step = p.a_step, b_step = p.b_step;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, out_dims));
  float* yp = y.data<float>();
  if (p.blocked) {
    // Work items: (repeat, outer block, middle index) spans of `row` elements, or with row 1
    // one span of `mid` elements per (repeat, outer block) against one element of the small side.
    const int64_t row = p.row, mid = p.mid, outer = p.outer;
    const bool per_row = row > 1;
    const int64_t items = p.rep * (per_row ? outer * mid : outer);
    for_each_index(items, n > 2 * kChunk, [&](int64_t it) {
      const int64_t o = (per_row ? it / mid : it) % outer;
      const int64_t big = per_row ? it * row : it * mid, len = per_row ? row : mid;
      const int64_t small = o * row, step = per_row ? 1 : 0;
      if (p.a_is_small) binary_span(kOp, ap + small, step, bp + big, 1, yp + big, len);
      else binary_span(kOp, ap + big, 1, bp + small, step, yp + big, len);
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
