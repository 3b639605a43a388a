// Tensor::to: ONNX Cast (gradient: the output's gradient cast back, autodiff/gradients/elementwise.cc).
#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor Tensor::to(DType dtype) const {
  if (this->dtype() == dtype) return *this;
  return apply1({"Cast"}, {*this}, {{"to", gearbox::attr_int(static_cast<int64_t>(to_internal(dtype)))}});
}

}  // namespace gbx::nn
