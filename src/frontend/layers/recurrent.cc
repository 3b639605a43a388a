// nn::LSTM and nn::GRU: torch.nn.LSTM / torch.nn.GRU's parameters, initialization and
// arithmetic (torch's CPU cells: the input projection of every step computed at once, then per
// step the hidden projection, the gates and the state update), written with the framework's
// ops so that autodiff differentiates them through time.
#include <cmath>
#include <string>

#include "frontend/layers/recurrent_cells.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

using gearbox::ErrorCode;

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// concat without a node when there is one piece.
Tensor cat(const std::vector<Tensor>& xs, int64_t axis) { return xs.size() == 1 ? xs[0] : concat(xs, axis); }

}  // namespace

RNNBase::RNNBase(Cell cell, int64_t input_size, int64_t hidden_size, RNNOptions options)
    : cell_(cell), input_size_(input_size), hidden_size_(hidden_size), opt_(options) {
  if (input_size <= 0 || hidden_size <= 0 || options.num_layers <= 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, name(), "(", input_size, ", ", hidden_size,
                                     ", num_layers ", options.num_layers, "): sizes must be positive"));
  if (!(options.dropout >= 0 && options.dropout < 1))
    throw_status(
        gearbox::make_error(ErrorCode::INVALID_ARGUMENT, name(), ": dropout ", options.dropout, " must be in [0, 1)"));
  const int64_t directions = options.bidirectional ? 2 : 1, gates = cell == Cell::LSTM ? 4 : 3;
  // torch's reset_parameters: every parameter U(±1/sqrt(hidden)), drawn in registration order.
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto uniform = [bound](std::vector<int64_t> shape) { return Tensor::uniform(std::move(shape), -bound, bound); };
  for (int64_t k = 0; k < options.num_layers; ++k) {
    const int64_t in = k == 0 ? input_size : directions * hidden_size;
    for (int64_t d = 0; d < directions; ++d) {
      const std::string suffix = "_l" + std::to_string(k) + (d == 1 ? "_reverse" : "");
      Weights w;
      w.w_ih = register_parameter("weight_ih" + suffix, uniform({gates * hidden_size, in}));
      w.w_hh = register_parameter("weight_hh" + suffix, uniform({gates * hidden_size, hidden_size}));
      if (options.bias) {
        w.b_ih = register_parameter("bias_ih" + suffix, uniform({gates * hidden_size}));
        w.b_hh = register_parameter("bias_hh" + suffix, uniform({gates * hidden_size}));
      }
      weights_.push_back(std::move(w));
    }
  }
}

void RNNBase::check_state(const Tensor& state, const char* what, const std::vector<int64_t>& expected) const {
  if (state.shape() != expected)
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, name(), ": ", what, " is ", state.describe(),
                                     ", expected ", shape_string(expected),
                                     " (num_layers * directions, batch, hidden_size; no batch axis for an "
                                     "unbatched input)"));
}

RNNResult RNNBase::recur(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  if (!input.defined() || (input.rank() != 2 && input.rank() != 3) || input.shape().back() != input_size_ ||
      input.dim(0) == 0)
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, name(), ": input is ",
                                     input.defined() ? input.describe() : std::string("an undefined tensor"),
                                     ", expected ", opt_.batch_first ? "[batch, seq, " : "[seq, batch, ", input_size_,
                                     "] or unbatched [seq, ", input_size_, "] with seq >= 1"));
  const bool batched = input.rank() == 3;
  // Sequence-first [seq, batch, features] from here on.
  Tensor x = !batched ? reshape(input, {input.dim(0), 1, input_size_})
                      : (opt_.batch_first ? transpose(input, {1, 0, 2}) : input);
  const int64_t seq = x.dim(0), batch = x.dim(1), H = hidden_size_;
  const int64_t directions = opt_.bidirectional ? 2 : 1, states = opt_.num_layers * directions;
  const bool lstm = cell_ == Cell::LSTM;
  if (lstm && h0.defined() != c0.defined())
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, name(),
                                     ": give both initial states h0 and c0, or neither (got only ",
                                     h0.defined() ? "h0" : "c0", ")"));
  const std::vector<int64_t> state_shape =
      batched ? std::vector<int64_t>{states, batch, H} : std::vector<int64_t>{states, H};
  // Initial state of layer k, direction d at [k * directions + d].
  auto initial = [&](const Tensor& given, const char* what) {
    std::vector<Tensor> per_layer;
    if (!given.defined()) {
      per_layer.assign(static_cast<size_t>(states), Tensor::zeros({batch, H}, x.dtype()));
      return per_layer;
    }
    check_state(given, what, state_shape);
    for (const Tensor& s : split(given, 0, states)) per_layer.push_back(reshape(s, {batch, H}));
    return per_layer;
  };
  const std::vector<Tensor> h_init = initial(h0, "h0");
  const std::vector<Tensor> c_init = lstm ? initial(c0, "c0") : std::vector<Tensor>();

  std::vector<Tensor> h_n, c_n;  // [1, batch, H] each
  Tensor layer_input = x;
  for (int64_t k = 0; k < opt_.num_layers; ++k) {
    std::vector<Tensor> direction_outputs;
    for (int64_t d = 0; d < directions; ++d) {
      const size_t at = static_cast<size_t>(k * directions + d);
      const Weights& w = weights_[at];
      // Every step's input projection in one product, then one piece per step.
      const std::vector<Tensor> projected = split(linear(layer_input, w.w_ih, w.b_ih), 0, seq);
      RecurrentState s{h_init[at], lstm ? c_init[at] : Tensor()};
      std::vector<Tensor> outputs(static_cast<size_t>(seq));
      for (int64_t i = 0; i < seq; ++i) {
        const int64_t t = d == 0 ? i : seq - 1 - i;  // the reverse direction reads the sequence backwards
        const Tensor x_proj = reshape(projected[static_cast<size_t>(t)], {batch, -1});
        s = lstm ? lstm_cell(x_proj, s, w.w_hh, w.b_hh, kTorchLstmGates)
                 : gru_cell(x_proj, s, w.w_hh, w.b_hh, kTorchGruGates);
        outputs[static_cast<size_t>(t)] = reshape(s.h, {1, batch, H});
      }
      direction_outputs.push_back(cat(outputs, 0));
      h_n.push_back(reshape(s.h, {1, batch, H}));
      if (lstm) c_n.push_back(reshape(s.c, {1, batch, H}));
    }
    layer_input = cat(direction_outputs, 2);  // [seq, batch, directions * H]
    if (k + 1 < opt_.num_layers && opt_.dropout > 0) layer_input = dropout(layer_input, opt_.dropout, is_training());
  }

  RNNResult r;
  r.output = !batched ? reshape(layer_input, {seq, directions * H})
                      : (opt_.batch_first ? transpose(layer_input, {1, 0, 2}) : layer_input);
  r.h_n = reshape(cat(h_n, 0), state_shape);
  if (lstm) r.c_n = reshape(cat(c_n, 0), state_shape);
  return r;
}

}  // namespace gbx::nn
