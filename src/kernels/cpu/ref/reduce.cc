// ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (reference).
//
// Axes: ReduceSum takes them as an input from opset 13 (with
// noop_with_empty_axes); the others take the attribute through opset 17 and the
// input (with noop_with_empty_axes) from 18. Float types accumulate in double; integers in
// int64/uint64. Empty reductions give the identity of the operation as opset 18
// defines it (Sum 0, Prod 1, Max lowest/-inf, Min highest/+inf, LogSum(Exp)
// -inf, Mean NaN).
#include <cmath>
#include <limits>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

enum class Op { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// The accumulator: double for floats and for the ops that leave the integers
// (sqrt, log); 64-bit integers otherwise so integer sums stay exact.
template <Op K, typename T>
using acc_t =
    std::conditional_t<std::is_floating_point_v<compute_t<T>> || K == Op::L2 || K == Op::LogSum || K == Op::LogSumExp,
                       double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// Max/Min of integers start from T's own bounds, so an empty reduction yields them exactly.
template <Op K, typename T, typename A>
A init_value() {
  if constexpr (K == Op::Prod) {
    return A(1);
  } else if constexpr (K == Op::Max) {
    if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
    else return A(std::numeric_limits<T>::lowest());
  } else if constexpr (K == Op::Min) {
    if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
    else return A(std::numeric_limits<T>::max());
  } else {
    return A(0);
  }
}

template <typename A>
inline bool nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  else return false;
}

template <Op K, typename A>
inline void combine(A& acc, A v, double shift) {
  if constexpr (K == Op::Sum || K == Op::Mean || K == Op::LogSum) {
    acc = wrap_add(acc, v);
  } else if constexpr (K == Op::L1) {
    if constexpr (std::is_unsigned_v<A>) acc = wrap_add(acc, v);
    else acc = wrap_add(acc, v < A(0) ? wrap_mul(v, A(-1)) : v);
  } else if constexpr (K == Op::L2 || K == Op::SumSquare) {
    acc = wrap_add(acc, wrap_mul(v, v));
  } else if constexpr (K == Op::Prod) {
    acc = wrap_mul(acc, v);
  } else if constexpr (K == Op::Max) {
    if (!nan(acc) && (v > acc || nan(v))) acc = v;  // NaN propagates, as in numpy
  } else if constexpr (K == Op::Min) {
    if (!nan(acc) && (v < acc || nan(v))) acc = v;
  } else if constexpr (K == Op::LogSumExp) {
    acc += std::exp(double(v) - shift);
  }
}

// Integer results wrap to T like numpy's and onnxruntime's same-type accumulation; doubles
// headed for an integer type (L2, LogSum of ints) are range-checked first, since casting an
// out-of-range double is undefined.
template <typename T, typename A>
T to_output(A v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if constexpr (std::is_floating_point_v<A>) {
      if (!(v == v)) return T(0);
      if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
      if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  } else {
    return static_cast<T>(static_cast<compute_t<T>>(v));
  }
}

template <Op K, typename T>
void reduce_typed(const Tensor& x, const std::vector<bool>& reduced, Tensor& y) {
  using A = acc_t<K, T>;
  const int64_t n_out = y.numel();
  const int64_t rank = int64_t(x.rank());
  int64_t count = 1;
  Dims kept_dims(x.dims());
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[size_t(d)]) {
      count *= x.dim(size_t(d));
      kept_dims[size_t(d)] = 1;
    }
  // Output strides in the keepdims layout, 0 on reduced axes.
  std::vector<int64_t> os = strides_of(kept_dims);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[size_t(d)]) os[size_t(d)] = 0;
  const T* in = x.data<T>();
  std::vector<A> acc(size_t(n_out), init_value<K, T, A>());
  std::vector<double> shift(K == Op::LogSumExp ? size_t(n_out) : 0, 0.0);

  // Calls fn(input index, output index) over every input element.
  // Reducing a trailing block of axes (ReduceMean over the hidden dim, the common case in
  // transformer exports) is a plain double loop over contiguous rows.
  int64_t first_reduced = rank;
  while (first_reduced > 0 && reduced[size_t(first_reduced - 1)]) --first_reduced;
  bool trailing = true;
  for (int64_t d = 0; d < first_reduced; ++d) trailing = trailing && !reduced[size_t(d)];
  auto for_each = [&](auto&& fn) {
    const int64_t total = x.numel();
    if (total <= 0) return;
    if (trailing) {
      for (int64_t o = 0; o < n_out; ++o)
        for (int64_t j = 0; j < count; ++j) fn(o * count + j, o);
      return;
    }
    std::vector<int64_t> idx(size_t(rank), 0);
    int64_t o = 0;
    for (int64_t i = 0; i < total; ++i) {
      fn(i, o);
      for (int64_t d = rank - 1; d >= 0; --d) {
        const size_t du = size_t(d);
        if (++idx[du] < x.dim(du)) {
          o += os[du];
          break;
        }
        o -= os[du] * (x.dim(du) - 1);
        idx[du] = 0;
      }
    }
  };
  if constexpr (K == Op::LogSumExp) {
    std::vector<double> mx(size_t(n_out), -std::numeric_limits<double>::infinity());
    for_each([&](int64_t i, int64_t o) {
      const double v = double(static_cast<compute_t<T>>(in[i]));
      if (v > mx[size_t(o)]) mx[size_t(o)] = v;
    });
    for (int64_t o = 0; o < n_out; ++o) shift[size_t(o)] = std::isfinite(mx[size_t(o)]) ? mx[size_t(o)] : 0.0;
  }
  for_each([&](int64_t i, int64_t o) {
    combine<K, A>(acc[size_t(o)], static_cast<A>(static_cast<compute_t<T>>(in[i])),
                  K == Op::LogSumExp ? shift[size_t(o)] : 0.0);
  });
  T* out = y.data<T>();
  for (int64_t o = 0; o < n_out; ++o) {
    A v = acc[size_t(o)];
    if constexpr (K == Op::Mean) {
      if constexpr (std::is_floating_point_v<A>) v = count > 0 ? v / A(count) : std::numeric_limits<A>::quiet_NaN();
      else v = count > 0 ? v / A(count) : A(0);
    } else if constexpr (K == Op::L2) {
      v = std::sqrt(v);
    } else if constexpr (K == Op::LogSum) {
      v = std::log(v);
    } else if constexpr (K == Op::LogSumExp) {
      v = std::log(v) + shift[size_t(o)];
    }
    out[o] = to_output<T>(v);
  }
}

template <Op K>
Status reduce(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  const bool axes_input = ctx.opset() >= (K == Op::Sum ? 13 : 18);
  GBX_ASSIGN_OR_RETURN(auto axes_opt, ints_from_input_or_attr(ctx, 1, axes_input, "axes"));
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool empty_axes = !axes_opt || axes_opt->empty();
  if (empty_axes && axes_input && ctx.attr_int("noop_with_empty_axes", 0) != 0) {
    ctx.set_output(0, x);
    return Status::OK();
  }
  std::vector<bool> reduced(size_t(rank), empty_axes);
  if (!empty_axes) {
    GBX_ASSIGN_OR_RETURN(auto axes, normalize_axes(ctx, *axes_opt, rank));
    for (int64_t a : axes) reduced[size_t(a)] = true;
  }
  Dims out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[size_t(d)]) out.push_back(x.dim(size_t(d)));
    else if (keepdims) out.push_back(1);
  }
  if (x.dtype() == DType::Bool || x.dtype() == DType::String) return ctx.unsupported_dtype(x.dtype());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) reduce_typed<K, T>(x, reduced, y);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "ReduceSum", 1, 18, kEngineRef, {}, reduce<Op::Sum>});
GBX_REGISTER_KERNEL({"", "ReduceMean", 1, 18, kEngineRef, {}, reduce<Op::Mean>});
GBX_REGISTER_KERNEL({"", "ReduceMax", 1, 18, kEngineRef, {}, reduce<Op::Max>});
GBX_REGISTER_KERNEL({"", "ReduceMin", 1, 18, kEngineRef, {}, reduce<Op::Min>});
GBX_REGISTER_KERNEL({"", "ReduceProd", 1, 18, kEngineRef, {}, reduce<Op::Prod>});
GBX_REGISTER_KERNEL({"", "ReduceL1", 1, 18, kEngineRef, {}, reduce<Op::L1>});
GBX_REGISTER_KERNEL({"", "ReduceL2", 1, 18, kEngineRef, {}, reduce<Op::L2>});
GBX_REGISTER_KERNEL({"", "ReduceLogSum", 1, 18, kEngineRef, {}, reduce<Op::LogSum>});
GBX_REGISTER_KERNEL({"", "ReduceLogSumExp", 1, 18, kEngineRef, {}, reduce<Op::LogSumExp>});
GBX_REGISTER_KERNEL({"", "ReduceSumSquare", 1, 18, kEngineRef, {}, reduce<Op::SumSquare>});

}  // namespace
}  // namespace gearbox::ref
