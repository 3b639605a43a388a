// MatMul and the Gemm-based linear layer op.
#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || b.rank() < 2)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "matmul: ", a.describe(), " @ ",
                                     b.describe(), ": both operands need rank >= 2 (reshape vectors to [1,K] / [K,1])"));
  return apply1({"MatMul"}, {a, b});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.rank() != 2 || weight.rank() != 2 || x.dim(1) != weight.dim(1) ||
      (bias.defined() && (bias.rank() != 1 || bias.dim(0) != weight.dim(0))))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "linear: input ", x.describe(), ", weight ",
                                     weight.describe(), ", bias ", bias.describe(),
                                     ": needs input [N, in], weight [out, in], bias [out]"));
  return apply1({"Gemm"}, {x, weight, bias}, {{"transB", gearbox::attr_int(1)}});
}

}  // namespace gbx::nn
