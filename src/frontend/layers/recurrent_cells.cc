// lstm_cell and gru_cell (see recurrent_cells.h). The arithmetic is torch's CPU cells', in their
// order of operations, so nn::LSTM / nn::GRU match torch's rounding.
#include "frontend/layers/recurrent_cells.h"

#include <vector>

namespace gbx::nn {

RecurrentState lstm_cell(const Tensor& x_proj, const RecurrentState& s, const Tensor& w_hh, const Tensor& b_hh,
                         LstmGateOrder order) {
  std::vector<Tensor> gates = split(add(x_proj, linear(s.h, w_hh, b_hh)), 1, 4);
  Tensor i = sigmoid(gates[order.input]), f = sigmoid(gates[order.forget]);
  Tensor g = tanh(gates[order.cell]), o = sigmoid(gates[order.output]);
  Tensor c = add(mul(f, s.c), mul(i, g));
  return {mul(o, tanh(c)), c};
}

RecurrentState gru_cell(const Tensor& x_proj, const RecurrentState& s, const Tensor& w_hh, const Tensor& b_hh,
                        GruGateOrder order) {
  std::vector<Tensor> x = split(x_proj, 1, 3), h = split(linear(s.h, w_hh, b_hh), 1, 3);
  Tensor r = sigmoid(add(x[order.reset], h[order.reset])), z = sigmoid(add(x[order.update], h[order.update]));
  Tensor n = tanh(add(x[order.candidate], mul(r, h[order.candidate])));
  return {add(mul(sub(s.h, n), z), n), Tensor()};
}

}  // namespace gbx::nn
