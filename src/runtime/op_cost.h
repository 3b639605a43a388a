// The cost model the profiler reports: FLOPs and bytes moved by one node execution, from
// the tensors it actually read and wrote.
//
// Conventions (stated so that hand computations can be checked against them):
//   * a multiply-add counts 2 FLOPs; bias adds, alpha/beta scaling and activations fused into
//     a convolution or matrix product are not counted (they are O(output) next to O(output*K));
//   * Conv / ConvInteger / QLinearConv / com.gearbox.FusedConv: 2 * numel(Y) * (C_in/group * prod(kernel));
//     ConvTranspose: 2 * numel(X) * (C_out/group * prod(kernel));
//   * MatMul / MatMulInteger / QLinearMatMul / com.gearbox.FusedMatMul: 2 * numel(Y) * K;
//     Gemm / com.gearbox.FusedGemm: 2 * M * N * K with K after transA;
//   * com.gearbox.Attention: with S = batch * Sq * Sk score elements (Q [.., Sq, D], K [.., D, Sk],
//     V [.., Sk, Dv] after its reshapes and transposes): 2 S D + 2 S Dv (the two matrix
//     products) + S (scale) + S (mask, when given) + 5 S (softmax: max, subtract, exp, sum, divide);
//   * data-movement and shape ops (Reshape, Transpose, Concat, Gather, Slice, Cast, Shape, ...): 0;
//   * everything else: one FLOP per output element (element-wise ops, reductions, pooling
//     counted by output, which makes them look as memory-bound as they are).
// Each op type's count is the cost function of its op descriptor (kernels/op_descriptor.h).
// Bytes: the sizes of all input tensors (read) and all output tensors (written); an op whose
// descriptor has a bytes function (a plugin op with a cost function) gives the total itself,
// and what it read is that total less the outputs written.
// A plugin op's FLOPs are its cost function's, else one per output element.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/kernel.h"

namespace gearbox {

struct OpCost {
  double flops = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};

// `ctx` after the kernel ran: inputs and the attributes it saw; `outs` what it produced.
OpCost op_cost(const KernelContext& ctx, const std::vector<RuntimeValue>& outs);

}  // namespace gearbox
