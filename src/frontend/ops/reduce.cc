// ReduceSum / ReduceMean over axes (empty: all).
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
std::vector<int64_t> normalized(const std::vector<int64_t>& axes, size_t rank, const char* op) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  return out;
}
}  // namespace

Tensor sum(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  axes = normalized(axes, x.rank(), "sum");
  // ReduceSum-13 takes the axes as an input; omitted means all.
  return apply1({"ReduceSum"}, {x, axes.empty() ? Tensor() : int64s(axes)}, {{"keepdims", gearbox::attr_int(keepdims)}});
}

Tensor mean(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  axes = normalized(axes, x.rank(), "mean");
  gearbox::AttributeMap attrs{{"keepdims", gearbox::attr_int(keepdims)}};
  if (!axes.empty()) attrs["axes"] = gearbox::attr_ints(axes);  // ReduceMean-17: an attribute
  return apply1({"ReduceMean"}, {x}, std::move(attrs));
}

}  // namespace gbx::nn
