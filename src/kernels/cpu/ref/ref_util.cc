// Shared reference-kernel helpers.
#include "kernels/cpu/ref/ref_util.h"

#include <array>

namespace gearbox::ref {

Result<int64_t> normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis ", axis, " is out of range for rank ", rank);
  return a;
}

Result<Dims> broadcast_shapes(const KernelContext& ctx, const std::vector<Dims>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Dims out(rank, 1);
  for (const auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += to_string(t) + " ";
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "shapes ", all, "cannot be broadcast together");
    }
  }
  return out;
}

std::vector<int64_t> strides_of(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::vector<int64_t> broadcast_strides(const Dims& in, const Dims& out) {
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> is = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : is[i];
  return s;
}

Result<std::vector<int64_t>> read_ints(const KernelContext& ctx, const Tensor& t) {
  std::vector<int64_t> out;
  if (!is_integer(t.dtype()))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "expected an integer tensor, got ", describe(t));
  out.reserve(static_cast<size_t>(t.numel()));
  visit_numeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<int64_t>(t.data<T>()[i]));
  });
  return out;
}

std::vector<double> read_doubles(const Tensor& t) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.at_double(i));
  return out;
}

}  // namespace gearbox::ref
