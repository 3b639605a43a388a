// Loop machinery shared by the element-wise reference kernels (unary, binary, variadic,
// Where, Clip, Cast): dtype sets, broadcast plans with collapsed dims, row loops whose
// innermost body is a plain contiguous (or scalar-broadcast) loop the compiler vectorizes,
// and wrapping integer arithmetic (signed overflow is UB in C++, hostile inputs must not
// trip it).
//
// Why collapsed rows instead of ref_util's per-element for_each_broadcast: real models
// (ResNet residual adds, BERT bias adds and attention masks) run through these kernels,
// and the same-shape and "tensor op row/scalar" patterns must be tight loops without
// index arithmetic per element.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {

// ---- dtype sets -------------------------------------------------------------------------
template <typename T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;

// Dtype domains of the ONNX type constraints, checked at compile time so that a kernel's
// body is only instantiated for the types it supports.
enum class Dom {
  Float,          // float16, bfloat16, float, double
  FloatSigned,    // Float + int8..int64
  NumericNoBool,  // Float + all integers
  Numeric,        // NumericNoBool + bool
  Bool,           // bool only
  Unsigned,       // uint8..uint64
  Integer,        // int8..int64 and uint8..uint64
};
template <Dom D, typename T>
constexpr bool in_dom() {
  if constexpr (D == Dom::Float) return is_float_v<T>;
  else if constexpr (D == Dom::FloatSigned) return is_float_v<T> || (is_int_v<T> && std::is_signed_v<T>);
  else if constexpr (D == Dom::NumericNoBool) return is_float_v<T> || is_int_v<T>;
  else if constexpr (D == Dom::Numeric) return true;
  else if constexpr (D == Dom::Bool) return std::is_same_v<T, bool>;
  else if constexpr (D == Dom::Integer) return is_int_v<T>;
  else return is_int_v<T> && std::is_unsigned_v<T>;
}

// ---- wrapping integer arithmetic --------------------------------------------------------
// Integers narrower than int are promoted to int, and e.g. uint16*uint16 can overflow a
// signed int; doing the arithmetic in an unsigned type of at least int's width is defined
// and gives the two's-complement wrapped result numpy and ONNX Runtime produce.
template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
inline T wrap_add(T a, T b) {
  if constexpr (is_int_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
  else return a + b;
}
template <typename T>
inline T wrap_sub(T a, T b) {
  if constexpr (is_int_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
  else return a - b;
}
template <typename T>
inline T wrap_mul(T a, T b) {
  if constexpr (is_int_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
  else return a * b;
}
template <typename T>
inline T wrap_neg(T a) {
  if constexpr (is_int_v<T>) return static_cast<T>(wrap_t<T>(0) - static_cast<wrap_t<T>>(a));
  else return -a;
}

// ---- float -> integer conversion --------------------------------------------------------
// C++ leaves out-of-range float->int conversion undefined; this gives the results numpy and
// ONNX Runtime show on x86-64: 32/64-bit targets take the "integer indefinite" value
// (the minimum) for NaN and out-of-range values, narrower ones go through int64 and wrap
// (np.float32(-1).astype(np.uint8) == 255, 200.0 -> int8 == -56).
template <typename T>
inline T float_to_int(double v) {
  static_assert(is_int_v<T>);
  constexpr double k2p63 = 9223372036854775808.0;
  if constexpr (std::is_same_v<T, int64_t>) {
    return v >= -k2p63 && v < k2p63 ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return v > -2147483649.0 && v < 2147483648.0 ? static_cast<int32_t>(v) : std::numeric_limits<int32_t>::min();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    if (v >= k2p63 && v < 2 * k2p63) return static_cast<uint64_t>(v);
    return static_cast<uint64_t>(float_to_int<int64_t>(v));
  } else {
    return static_cast<T>(float_to_int<int64_t>(v));  // modular since C++20
  }
}

// ---- broadcast plans --------------------------------------------------------------------
// The broadcast of N inputs with size-1 output dims dropped and adjacent dims merged
// wherever every input is contiguous (or broadcast) across both. The innermost collapsed
// dim has stride 0 or 1 for every input. A scalar output is dims {1}.
template <size_t N>
struct BroadcastPlan {
  Dims dims;
  std::array<std::vector<int64_t>, N> strides;
  int64_t inner() const { return dims.back(); }
  int64_t total() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  int64_t inner_stride(size_t k) const { return strides[k].back(); }
};

template <size_t N>
BroadcastPlan<N> make_plan(const Dims& out, const std::array<const Dims*, N>& ins) {
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) full[k] = broadcast_strides(*ins[k], out);
  BroadcastPlan<N> p;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (size_t k = 0; merge && k < N; ++k) merge = p.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      p.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) p.strides[k].back() = full[k][d];
    } else {
      p.dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) p.strides[k].push_back(full[k][d]);
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) p.strides[k].push_back(0);
  }
  return p;
}

// Calls fn(out_offset, in_offsets, col, len) for the row segments that cover flat output
// elements [e0, e1): each is `len` elements of one innermost row starting at column `col`,
// where input k's row starts at in_offsets[k].
template <size_t N, typename Fn>
void for_each_segment(const BroadcastPlan<N>& p, int64_t e0, int64_t e1, Fn&& fn) {
  const size_t r = p.dims.size();
  const int64_t inner = p.dims[r - 1];
  if (e0 >= e1 || inner <= 0) return;
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  int64_t rem = e0 / inner;
  for (size_t d = r - 1; d-- > 0;) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  int64_t col = e0 % inner;
  for (int64_t e = e0; e < e1;) {
    const int64_t len = std::min(inner - col, e1 - e);
    fn(e, off, col, len);
    e += len;
    col = 0;
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < p.dims[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += p.strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= p.strides[k][d] * (p.dims[d] - 1);
      idx[d] = 0;
    }
  }
}

// Threading: none. These loops stream memory at 5-8 elements/ns on one core (the
// transcendental ones are vectorized polynomials or libm), so a second thread gains little,
// while an OpenMP parallel region on a busy machine stalls for a scheduler slice: measured
// here, a 450 us Erf took 8-11 ms with two threads while other jobs ran. Heavier fused
// kernels (GEMM, Conv) are where threads pay.

// out = f(a, b) over a broadcast plan. f receives compute_t values and returns a value
// convertible to TO. Each row segment is one of four simple loops (both contiguous, one
// side a repeated scalar, both scalar) so the compiler vectorizes the common cases.
template <typename TA, typename TB, typename TO, typename F>
void binary_apply(const TA* a, const TB* b, TO* o, const BroadcastPlan<2>& p, F f) {
  using CA = compute_t<TA>;
  using CB = compute_t<TB>;
  const bool sa = p.inner_stride(0) != 0, sb = p.inner_stride(1) != 0;
  for_each_segment(p, 0, p.total(), [&](int64_t oo, const std::array<int64_t, 2>& off, int64_t col, int64_t n) {
    const TA* __restrict pa = a + off[0] + (sa ? col : 0);
    const TB* __restrict pb = b + off[1] + (sb ? col : 0);
    TO* __restrict po = o + oo;
    if (sa && sb) {
      for (int64_t i = 0; i < n; ++i) po[i] = static_cast<TO>(f(static_cast<CA>(pa[i]), static_cast<CB>(pb[i])));
    } else if (sa) {
      const CB vb = static_cast<CB>(pb[0]);
      for (int64_t i = 0; i < n; ++i) po[i] = static_cast<TO>(f(static_cast<CA>(pa[i]), vb));
    } else if (sb) {
      const CA va = static_cast<CA>(pa[0]);
      for (int64_t i = 0; i < n; ++i) po[i] = static_cast<TO>(f(va, static_cast<CB>(pb[i])));
    } else {
      const TO v = static_cast<TO>(f(static_cast<CA>(pa[0]), static_cast<CB>(pb[0])));
      for (int64_t i = 0; i < n; ++i) po[i] = v;
    }
  });
}

// Broadcasts a and b, allocates the output (checked: a broadcast of two legal tensors can
// still be absurdly large) and builds the plan.
inline Status prepare_binary(const KernelContext& ctx, const Tensor& a, const Tensor& b, DType out_dtype, Tensor* out,
                             BroadcastPlan<2>* plan) {
  GBX_ASSIGN_OR_RETURN(Dims dims, broadcast_shapes(ctx, {a.dims(), b.dims()}));
  auto t = Tensor::allocate(out_dtype, dims);
  if (!t.ok()) return t.status().with_context(ctx.node_prefix());
  *out = std::move(t).value();
  *plan = make_plan<2>(out->dims(), {&a.dims(), &b.dims()});
  return Status::OK();
}

// out[i] = f(in[i]) for contiguous tensors of the same shape.
template <typename TI, typename TO, typename F>
void unary_apply(const TI* __restrict in, TO* __restrict out, int64_t n, F f) {
  using C = compute_t<TI>;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<TO>(f(static_cast<C>(in[i])));
}

// Same-shape unary kernel over the dtypes of domain D: y = f(x), y has x's dtype (or
// OutBool: bool). f receives compute_t<T> values.
template <Dom D, bool OutBool = false, typename F>
Status unary_op(KernelContext& ctx, F f) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  Tensor y;
  bool handled = false;
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_dom<D, T>()) {
      using TO = std::conditional_t<OutBool, bool, T>;
      y = Tensor(dtype_of<TO>(), x.dims());  // same size as an existing tensor: cannot be absurd
      unary_apply(x.data<T>(), y.data<TO>(), x.numel(), f);
      handled = true;
    }
  });
  if (!handled) return ctx.unsupported_dtype(x.dtype());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// DTYPE_UNSUPPORTED naming both dtypes when two inputs that must agree do not.
inline Status dtype_mismatch(const KernelContext& ctx, const char* what, DType a, DType b) {
  return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, what, " dtypes differ: ", dtype_name(a), " vs ", dtype_name(b));
}

// Broadcasting binary kernel over inputs 0 and 1 of the same dtype in domain D:
// out = f(a, b), out has the inputs' dtype (or OutBool: bool). `check(tag, b)` runs before
// computing a non-empty output and may reject values (integer division by zero).
struct NoCheck {
  template <typename Tag>
  Status operator()(Tag, const Tensor&) const {
    return Status::OK();
  }
};

template <Dom D, bool OutBool = false, typename F, typename Check = NoCheck>
Status binary_op(KernelContext& ctx, F f, Check check = {}) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return dtype_mismatch(ctx, "input", a.dtype(), b.dtype());
  Status st = ctx.unsupported_dtype(a.dtype());
  Tensor out;
  visit_numeric(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_dom<D, T>()) {
      using TO = std::conditional_t<OutBool, bool, T>;
      BroadcastPlan<2> plan;
      st = prepare_binary(ctx, a, b, dtype_of<TO>(), &out, &plan);
      if (!st.ok() || out.numel() == 0) return;
      st = check(tag, b);
      if (!st.ok()) return;
      binary_apply(a.data<T>(), b.data<T>(), out.data<TO>(), plan, f);
    }
  });
  if (!st.ok()) return st;
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace gearbox::ref
