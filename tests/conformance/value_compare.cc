// Output comparison for the conformance runner (see value_compare.h for the rules).
#include "value_compare.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace gearbox::conformance {
namespace {

// "[1,2,0]": the multi-dimensional position of flat index i, which is what a kernel writer
// needs to find the wrong element.
std::string position(const Dims& dims, int64_t i) {
  if (dims.empty()) return "[]";
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    int64_t d = dims[k] > 0 ? dims[k] : 1;
    idx[k] = i % d;
    i /= d;
  }
  std::ostringstream os;
  os << '[';
  for (size_t k = 0; k < idx.size(); ++k) os << (k ? "," : "") << idx[k];
  os << ']';
  return os.str();
}

std::string fmt_double(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

bool floats_close(double a, double e, const Tolerance& tol) {
  if (std::isnan(e) || std::isnan(a)) return std::isnan(e) && std::isnan(a);
  if (std::isinf(e) || std::isinf(a)) return a == e;
  return std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
}

template <typename T>
CompareResult compare_typed(const Tensor& actual, const Tensor& expected, const Tolerance& tol) {
  using C = compute_t<T>;
  constexpr bool kFloat = std::is_floating_point_v<C>;
  const T* a = actual.data<T>();
  const T* e = expected.data<T>();
  const int64_t n = expected.numel();
  int64_t first = -1, mismatches = 0;
  double max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if constexpr (kFloat) {
      double av = static_cast<double>(static_cast<C>(a[i]));
      double ev = static_cast<double>(static_cast<C>(e[i]));
      ok = floats_close(av, ev, tol);
      if (std::isfinite(av) && std::isfinite(ev)) max_abs = std::max(max_abs, std::fabs(av - ev));
    } else {
      ok = static_cast<C>(a[i]) == static_cast<C>(e[i]);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (first < 0) return {};
  std::ostringstream os;
  auto show = [](T v) {
    if constexpr (kFloat) return fmt_double(static_cast<double>(static_cast<C>(v)));
    else if constexpr (std::is_same_v<T, bool>) return std::string(v ? "true" : "false");
    else return std::to_string(v);
  };
  os << mismatches << " of " << n << " elements differ; first at index " << first << " "
     << position(expected.dims(), first) << ": actual " << show(a[first]) << ", expected " << show(e[first]);
  if constexpr (kFloat) os << "; max abs error " << fmt_double(max_abs);
  return {false, os.str()};
}

CompareResult compare_strings(const Tensor& actual, const Tensor& expected) {
  const auto& a = actual.strings();
  const auto& e = expected.strings();
  if (a.size() != e.size())
    return {false, "string tensor holds " + std::to_string(a.size()) + " elements, expected " +
                       std::to_string(e.size())};
  for (size_t i = 0; i < e.size(); ++i) {
    if (a[i] != e[i])
      return {false, "first differing string at index " + std::to_string(i) + " " +
                         position(expected.dims(), static_cast<int64_t>(i)) + ": actual \"" + a[i] +
                         "\", expected \"" + e[i] + "\""};
  }
  return {};
}

const char* kind_name(const RuntimeValue& v) {
  return v.is_none() ? "none (empty optional)" : v.is_tensor() ? "tensor" : "sequence";
}

}  // namespace

CompareResult compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol) {
  if (!actual.defined() && !expected.defined()) return {};
  if (!actual.defined()) return {false, "actual tensor is undefined, expected " + describe(expected)};
  if (!expected.defined()) return {false, "expected tensor is undefined, actual " + describe(actual)};
  if (actual.dtype() != expected.dtype())
    return {false, "dtype " + std::string(dtype_name(actual.dtype())) + ", expected " +
                       std::string(dtype_name(expected.dtype()))};
  if (actual.dims() != expected.dims())
    return {false, "shape " + to_string(actual.dims()) + ", expected " + to_string(expected.dims())};
  if (expected.numel() == 0) return {};
  if (expected.dtype() == DType::String) return compare_strings(actual, expected);
  CompareResult result{false, "cannot compare dtype " + std::string(dtype_name(expected.dtype()))};
  visit_numeric(expected.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    result = compare_typed<T>(actual, expected, tol);
  });
  return result;
}

CompareResult compare_values(const RuntimeValue& actual, const RuntimeValue& expected, const Tolerance& tol) {
  if (actual.is_none() != expected.is_none() || actual.is_tensor() != expected.is_tensor())
    return {false, std::string("got a ") + kind_name(actual) + ", expected a " + kind_name(expected)};
  if (expected.is_none()) return {};
  if (expected.is_tensor()) return compare_tensors(actual.tensor(), expected.tensor(), tol);
  const auto& a = actual.sequence().tensors;
  const auto& e = expected.sequence().tensors;
  if (a.size() != e.size())
    return {false, "sequence of " + std::to_string(a.size()) + " tensors, expected " + std::to_string(e.size())};
  for (size_t i = 0; i < e.size(); ++i) {
    CompareResult r = compare_tensors(a[i], e[i], tol);
    if (!r.match) return {false, "sequence element " + std::to_string(i) + ": " + r.reason};
  }
  return {};
}

}  // namespace gearbox::conformance
