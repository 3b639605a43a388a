// Shared op helpers (see internal.h).
#include "frontend/ops/internal.h"

#include <numeric>

namespace gbx::nn {

Tensor scalar_like(const Tensor& x, double v) { return Tensor::scalar(v, x.dtype()); }

Tensor int64s(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }

int64_t normalize_axis(int64_t axis, size_t rank, const char* op) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, op, ": axis ", axis,
                                     " is out of range for a rank-", r, " tensor (valid: ", -r, "..", r - 1, ")"));
  return axis < 0 ? axis + r : axis;
}

Tensor sum_to(const Tensor& g, const std::vector<int64_t>& shape) {
  if (g.shape() == shape) return g;
  const size_t r = g.rank(), s = shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < r; ++i) {
    if (i < r - s) {
      axes.push_back(static_cast<int64_t>(i));
    } else if (shape[i - (r - s)] == 1 && g.dim(i) != 1) {
      axes.push_back(static_cast<int64_t>(i));
    }
  }
  Tensor summed = axes.empty() ? g : sum(g, axes, /*keepdims=*/true);
  return summed.shape() == shape ? summed : reshape(summed, shape);
}

Tensor expand(const Tensor& x, const std::vector<int64_t>& shape) {
  return apply1({"Expand"}, {x, int64s(shape)});
}

Tensor sign(const Tensor& x) { return apply1({"Sign"}, {x}); }
Tensor erf(const Tensor& x) { return apply1({"Erf"}, {x}); }

Tensor pad_zeros(const Tensor& x, const std::vector<int64_t>& pads) { return apply1({"Pad"}, {x, int64s(pads)}); }

Tensor transpose_last2(const Tensor& x) {
  std::vector<int64_t> perm(x.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

}  // namespace gbx::nn
