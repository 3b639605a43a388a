// ONNX LSTM and GRU nodes of an imported model, written out step by step in nn's ops so that
// `gearbox train` can fine-tune their W, R and B (issue 22 item 3). The graph engine's
// recurrent kernels return only Y, Y_h and Y_c, not the gates a backward pass through time
// needs; rather than a second kernel that recomputes them, the trained path runs the cells the
// way nn::LSTM / nn::GRU do (layers/recurrent.cc), and autodiff differentiates through time
// with the gradients the element-wise ops, Gemm, Split and Concat already have. Only the
// training forward takes this path; inference and the compiled model keep the fused kernels.
#pragma once

#include <string>
#include <vector>

#include "gearbox/nn.hpp"

namespace gearbox {
struct Node;
}

namespace gbx::nn::onnx_training {

// Whether `op_type` (domain ai.onnx) is run by lower_recurrent on a trained path.
bool is_lowered_recurrent(const std::string& op_type);

// ""  when lower_recurrent can run the node, else why not (non-default activations, clip,
// input_forget, peepholes): load() refuses such a node with OP_UNSUPPORTED before training.
std::string recurrent_lowering_refusal(const gearbox::Node& n);

// The node's first `num_outputs` outputs (Y, Y_h, Y_c; unused ones undefined) from its inputs
// (X, W, R, B, sequence_lens, initial_h[, initial_c, P]; absent optional ones undefined), with
// ONNX's gate orders (LSTM i, o, f, c; GRU z, r, h), directions, layout and GRU's
// linear_before_reset. sequence_lens is accepted when every length is the full sequence.
std::vector<Tensor> lower_recurrent(const gearbox::Node& n, const std::vector<Tensor>& ins, size_t num_outputs);

}  // namespace gbx::nn::onnx_training
