// Reshape, Transpose, Concat, Slice (one axis, step 1), Split (equal parts).
#include <algorithm>
#include <numeric>

#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor reshape(const Tensor& x, std::vector<int64_t> shape) { return apply1({"Reshape"}, {x, int64s(shape)}); }

Tensor transpose(const Tensor& x, std::vector<int64_t> perm) {
  if (perm.empty()) {
    perm.resize(x.rank());
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  return apply1({"Transpose"}, {x}, {{"perm", gearbox::attr_ints(perm)}});
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "concat: no tensors to concatenate"));
  return apply1({"Concat"}, xs, {{"axis", gearbox::attr_int(normalize_axis(axis, xs[0].rank(), "concat"))}});
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end) {
  axis = normalize_axis(axis, x.rank(), "slice");
  return apply1({"Slice"}, {x, int64s({start}), int64s({end}), int64s({axis})});
}

std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t parts) {
  axis = normalize_axis(axis, x.rank(), "split");
  if (parts < 1 || x.dim(static_cast<size_t>(axis)) % parts != 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "split: axis ", axis, " of ", x.describe(),
                                     " cannot be split into ", parts, " equal parts"));
  return apply({"Split"}, {x}, {{"axis", gearbox::attr_int(axis)}}, static_cast<size_t>(parts));
}

Tensor flatten(const Tensor& x, int64_t start_axis) {
  start_axis = normalize_axis(start_axis, x.rank(), "flatten");
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + start_axis);
  shape.push_back(-1);
  return reshape(x, shape);
}

}  // namespace gbx::nn
