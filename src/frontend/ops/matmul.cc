// MatMul and the Gemm-based linear layer op.
#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || b.rank() < 2)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "matmul: ", a.describe(), " @ ", b.describe(),
                                     ": both operands need rank >= 2 (reshape vectors to [1,K] / [K,1])"));
  return apply1({"MatMul"}, {a, b});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.rank() < 1 || weight.rank() != 2 || x.shape().back() != weight.dim(1) ||
      (bias.defined() && (bias.rank() != 1 || bias.dim(0) != weight.dim(0))))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "linear: input ", x.describe(), ", weight ",
                                     weight.describe(), ", bias ", bias.describe(),
                                     ": needs input [..., in], weight [out, in], bias [out]"));
  if (x.rank() == 2) return apply1({"Gemm"}, {x, weight, bias}, {{"transB", gearbox::attr_int(1)}});
  // Gemm is 2-D: the leading axes are folded into rows and unfolded after (torch's F.linear
  // takes any leading shape).
  std::vector<int64_t> out_shape = x.shape();
  out_shape.back() = weight.dim(0);
  Tensor y = linear(reshape(x, {-1, weight.dim(1)}), weight, bias);
  return reshape(y, out_shape);
}

}  // namespace gbx::nn
