// One step of an LSTM or GRU cell in nn's ops, shared by nn::LSTM / nn::GRU (torch's gate
// orders, layers/recurrent.cc) and by the training lowering of imported ONNX LSTM / GRU nodes
// (ONNX's orders, onnx_training/recurrent_lowering.cc). The gate order is the only difference
// between the two: where each gate sits among the stacked rows of the weights.
#pragma once

#include "gearbox/nn.hpp"

namespace gbx::nn {

struct RecurrentState {
  Tensor h, c;  // [batch, hidden]; c: LSTM only
};

// Positions of the gates among the 4 (LSTM) or 3 (GRU) stacked blocks.
struct LstmGateOrder {
  int input, forget, cell, output;
};
constexpr LstmGateOrder kTorchLstmGates{0, 1, 2, 3};  // i, f, g, o
constexpr LstmGateOrder kOnnxLstmGates{0, 2, 3, 1};   // i, o, f, c
struct GruGateOrder {
  int reset, update, candidate;
};
constexpr GruGateOrder kTorchGruGates{0, 1, 2};  // r, z, n
constexpr GruGateOrder kOnnxGruGates{1, 0, 2};   // z, r, h

// gates = x_proj + h W_hh^T + b_hh; c' = f c + i tanh(g), h' = o tanh(c').
RecurrentState lstm_cell(const Tensor& x_proj, const RecurrentState& s, const Tensor& w_hh, const Tensor& b_hh,
                         LstmGateOrder order);

// torch's GRU (ONNX's with linear_before_reset): r = σ(x_r + h_r), z = σ(x_z + h_z),
// n = tanh(x_n + r h_n) with the hidden projection's bias inside the product,
// h' = (h - n) z + n (= (1 - z) n + z h).
RecurrentState gru_cell(const Tensor& x_proj, const RecurrentState& s, const Tensor& w_hh, const Tensor& b_hh,
                        GruGateOrder order);

}  // namespace gbx::nn
