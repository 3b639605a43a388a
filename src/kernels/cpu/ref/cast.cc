// Cast (opsets 6, 9, 13) and CastLike (opset 15), reference: every pair of numeric dtypes
// (float16/bfloat16 included), bool, and conversions to and from string.
//
// Numeric rules: to bool is x != 0 (NaN is true, as numpy); from bool is 0/1; float to
// integer truncates toward zero, with NaN/out-of-range values handled as on x86 (see
// float_to_int); integer to integer wraps (C++20 modular conversion); anything to
// float16/bfloat16 goes through float and rounds to nearest even.
// Strings: numbers print as the shortest decimal that round-trips ("0.039187793"), with
// "NaN", "INF" and "-INF" for the special values (ONNX Runtime's spelling); strings parse
// as decimal or scientific numbers, "NaN", "INF", "+INF", "-INF", "inf", "infinity" in any
// case. A string that is not a number is INVALID_ARGUMENT.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

template <typename D, typename S>
D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else {
    using CS = compute_t<S>;
    const CS c = static_cast<CS>(v);
    if constexpr (std::is_same_v<D, bool>) return c != CS(0);
    else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) return D(static_cast<float>(c));
    else if constexpr (std::is_floating_point_v<D>) return static_cast<D>(c);
    else if constexpr (std::is_floating_point_v<CS>) return float_to_int<D>(static_cast<double>(c));
    else return static_cast<D>(c);
  }
}

// Shortest decimal that parses back to the same value of type T.
template <typename T>
std::string float_to_string(T v) {
  using C = compute_t<T>;
  const C c = static_cast<C>(v);
  if (std::isnan(c)) return "NaN";
  if (std::isinf(c)) return c < 0 ? "-INF" : "INF";
  if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), c);
    return std::string(buf, r.ptr);
  } else {
    // 16-bit floats: the fewest significant digits that round back to the same bits.
    char buf[64];
    for (int digits = 1; digits <= 9; ++digits) {
      std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(c));
      if (T(std::strtof(buf, nullptr)).bits == v.bits) break;
    }
    return buf;
  }
}

template <typename S>
std::string to_string_value(S v) {
  if constexpr (std::is_same_v<S, bool>) return v ? "1" : "0";
  else if constexpr (is_int_v<S>) return std::to_string(v);
  else return float_to_string(v);
}

// Parses s into *out; false if s is not a number.
template <typename D>
bool parse_value(const std::string& s, D* out) {
  const char* first = s.data();
  const char* last = s.data() + s.size();
  while (first < last && std::isspace(static_cast<unsigned char>(*first))) ++first;
  while (last > first && std::isspace(static_cast<unsigned char>(last[-1]))) --last;
  if (first < last && *first == '+') ++first;  // from_chars rejects an explicit plus
  if (first == last) return false;
  if constexpr (is_int_v<D>) {
    // Exact for the full int64/uint64 range; fall back to double for "1.5" or "1e3".
    D iv{};
    auto r = std::from_chars(first, last, iv);
    if (r.ec == std::errc() && r.ptr == last) {
      *out = iv;
      return true;
    }
  }
  if constexpr (std::is_same_v<D, float>) {
    float f;
    auto r = std::from_chars(first, last, f);
    if (r.ec != std::errc() || r.ptr != last) return false;
    *out = f;
    return true;
  } else {
    double d;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      d = std::strtod(std::string(first, last).c_str(), nullptr);  // +-inf or 0, as numpy
    } else if (r.ec != std::errc() || r.ptr != last) {
      return false;
    }
    *out = convert<D>(d);
    return true;
  }
}

Status cast_to(KernelContext& ctx, const Tensor& x, DType to) {
  auto alloc = Tensor::allocate(to, x.dims());
  if (!alloc.ok()) return alloc.status().with_context(ctx.node_prefix());
  Tensor y = std::move(alloc).value();
  const int64_t n = x.numel();
  Status st;
  const bool ok = visit_any(x.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    const bool ok_to = visit_any(to, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      if constexpr (std::is_same_v<S, std::string> && std::is_same_v<D, std::string>) {
        y.strings() = x.strings();
      } else if constexpr (std::is_same_v<S, std::string>) {
        const std::string* in = x.strings().data();
        D* out = y.data<D>();
        for (int64_t i = 0; i < n; ++i) {
          if (!parse_value(in[i], &out[i])) {
            st = ctx.error(ErrorCode::INVALID_ARGUMENT, "cannot cast string \"", in[i], "\" (element ", i, ") to ",
                           dtype_name(to));
            return;
          }
        }
      } else if constexpr (std::is_same_v<D, std::string>) {
        const S* in = x.data<S>();
        std::string* out = y.strings().data();
        for (int64_t i = 0; i < n; ++i) out[i] = to_string_value(in[i]);
      } else {
        const S* __restrict in = x.data<S>();
        D* __restrict out = y.data<D>();
        for (int64_t i = 0; i < n; ++i) out[i] = convert<D>(in[i]);
      }
    });
    if (!ok_to) st = ctx.unsupported_dtype(to);
  });
  if (!ok) return ctx.unsupported_dtype(x.dtype());
  GBX_RETURN_IF_ERROR(st);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status cast_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  if (!ctx.has_attr("to")) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "attribute 'to' is required");
  int64_t to = ctx.attr_int("to", 0);
  if (ctx.opset() < 6) {
    // Cast-1..5 name the type as a string: TensorProto.DataType's enum name.
    static constexpr std::pair<std::string_view, int64_t> kNames[] = {
        {"FLOAT", 1},  {"UINT8", 2}, {"INT8", 3},     {"UINT16", 4},  {"INT16", 5},   {"INT32", 6},  {"INT64", 7},
        {"STRING", 8}, {"BOOL", 9},  {"FLOAT16", 10}, {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}};
    const std::string name = ctx.attr_string("to", "");
    to = 0;
    for (const auto& [n, v] : kNames)
      if (n == name) to = v;
    if (to == 0)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "Cast-", ctx.opset(), ": 'to' names no type: '", name, "'");
  }
  if (to <= 0 || to > 64 || !dtype_is_known(static_cast<int32_t>(to)))
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "cannot cast to ONNX element type ", to);
  return cast_to(ctx, ctx.input(0), static_cast<DType>(to));
}

Status cast_like_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  return cast_to(ctx, ctx.input(0), ctx.input(1).dtype());
}

GBX_REGISTER_KERNEL({"", "Cast", 1, 18, kEngineRef, {}, cast_op});
GBX_REGISTER_KERNEL({"", "CastLike", 15, 18, kEngineRef, {}, cast_like_op});

}  // namespace
}  // namespace gearbox::ref
