// lower_recurrent (see recurrent_lowering.h): ONNX LSTM / GRU in nn's ops, one step at a time.
#include "frontend/onnx_training/recurrent_lowering.h"

#include "frontend/layers/recurrent_cells.h"
#include "frontend/tensor_impl.h"
#include "graph/ir.h"

namespace gbx::nn::onnx_training {

namespace {

using gearbox::ErrorCode;
using gearbox::make_error;

std::string label(const gearbox::Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

bool is_lstm(const gearbox::Node& n) { return n.op_type == "LSTM"; }

int64_t int_attr(const gearbox::Node& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.i;
}

std::string direction_of(const gearbox::Node& n) {
  auto it = n.attrs.find("direction");
  return it == n.attrs.end() ? "forward" : it->second.s;
}

// ONNX's GRU without linear_before_reset (its default; torch exports with it, gru_cell):
// h~ = tanh(x_h + (r h) R_h + Rb_h), the reset gate applied before the hidden projection.
RecurrentState gru_cell_reset_first(const Tensor& x_proj, const RecurrentState& s, const Tensor& r, const Tensor& rb) {
  std::vector<Tensor> x = split(x_proj, 1, 3);
  std::vector<Tensor> rs = split(r, 0, 3), rbs = rb.defined() ? split(rb, 0, 3) : std::vector<Tensor>(3);
  Tensor z = sigmoid(add(x[0], linear(s.h, rs[0], rbs[0])));
  Tensor reset = sigmoid(add(x[1], linear(s.h, rs[1], rbs[1])));
  Tensor candidate = tanh(add(x[2], linear(mul(reset, s.h), rs[2], rbs[2])));
  return {add(mul(sub(s.h, candidate), z), candidate), Tensor()};
}

// Row `d` of a [directions, ...] tensor as a tensor of `shape`.
Tensor direction_slice(const Tensor& t, int64_t d, std::vector<int64_t> shape) {
  return reshape(slice(t, 0, d, d + 1), std::move(shape));
}

}  // namespace

bool is_lowered_recurrent(const std::string& op_type) { return op_type == "LSTM" || op_type == "GRU"; }

std::string recurrent_lowering_refusal(const gearbox::Node& n) {
  const std::vector<std::string> defaults =
      is_lstm(n) ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : std::vector<std::string>{"Sigmoid", "Tanh"};
  auto act = n.attrs.find("activations");
  if (act != n.attrs.end())
    for (size_t i = 0; i < act->second.strings.size(); ++i)
      if (act->second.strings[i] != defaults[i % defaults.size()])
        return "activation '" + act->second.strings[i] + "' (only the defaults, Sigmoid and Tanh, are trained)";
  if (n.attrs.count("clip")) return "clip (cell clipping has no gradient in gearbox)";
  if (int_attr(n, "input_forget", 0) != 0) return "input_forget = 1";
  if (is_lstm(n) && n.inputs.size() > 7 && n.inputs[7]) return "peephole weights P";
  const std::string dir = direction_of(n);
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") return "direction '" + dir + "'";
  return "";
}

std::vector<Tensor> lower_recurrent(const gearbox::Node& n, const std::vector<Tensor>& ins, size_t num_outputs) {
  auto input = [&](size_t i) { return i < ins.size() ? ins[i] : Tensor(); };
  const bool lstm = is_lstm(n);
  const int64_t gates = lstm ? 4 : 3;
  const std::string dir = direction_of(n);
  const int64_t directions = dir == "bidirectional" ? 2 : 1;
  const bool batch_first = int_attr(n, "layout", 0) == 1;
  Tensor x = input(0), w = input(1), r = input(2), b = input(3);
  if (!x.defined() || !w.defined() || !r.defined() || x.rank() != 3 || w.rank() != 3 || r.rank() != 3 ||
      w.dim(0) != directions || r.dim(0) != directions || r.dim(1) != gates * r.dim(2) || w.dim(1) != r.dim(1) ||
      w.dim(2) != x.dim(2))
    throw_status(make_error(ErrorCode::SHAPE_MISMATCH, label(n), ": X ", x.defined() ? x.describe() : "missing", ", W ",
                            w.defined() ? w.describe() : "missing", ", R ", r.defined() ? r.describe() : "missing",
                            " do not fit ", directions, " direction(s) of ", gates, " gates"));
  const int64_t hidden = r.dim(2);
  if (batch_first) x = transpose(x, {1, 0, 2});  // [seq, batch, input] from here on
  const int64_t seq = x.dim(0), batch = x.dim(1);
  if (Tensor lens = input(4); lens.defined())
    for (int64_t len : lens.to_int64_vector())
      if (len != seq)
        throw_status(make_error(ErrorCode::OP_UNSUPPORTED, label(n), ": sequence_lens holds ", len,
                                " for a sequence of ", seq, "; training handles full-length sequences only"));
  // Initial states [directions, batch, hidden] ([batch, directions, hidden] in layout 1).
  auto initial = [&](size_t slot) {
    Tensor t = input(slot);
    if (t.defined() && batch_first) t = transpose(t, {1, 0, 2});
    return t;
  };
  const Tensor h0 = initial(5), c0 = lstm ? initial(6) : Tensor();
  const bool linear_before_reset = int_attr(n, "linear_before_reset", 0) != 0;

  // Pieces along an axis, without a Concat node when there is one.
  auto join = [](const std::vector<Tensor>& parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : concat(parts, axis);
  };
  std::vector<Tensor> y_dirs, h_last, c_last;
  for (int64_t d = 0; d < directions; ++d) {
    const bool backwards = dir == "reverse" || d == 1;
    const Tensor wd = direction_slice(w, d, {gates * hidden, x.dim(2)});
    const Tensor rd = direction_slice(r, d, {gates * hidden, hidden});
    Tensor wb, rb;
    if (b.defined()) {
      const Tensor bd = direction_slice(b, d, {2 * gates * hidden});
      wb = slice(bd, 0, 0, gates * hidden);
      rb = slice(bd, 0, gates * hidden, 2 * gates * hidden);
    }
    // Every step's input projection in one product, then one piece per step.
    const std::vector<Tensor> projected = split(linear(x, wd, wb), 0, seq);
    auto start = [&](const Tensor& given) {
      return given.defined() ? direction_slice(given, d, {batch, hidden}) : Tensor::zeros({batch, hidden}, x.dtype());
    };
    RecurrentState s{start(h0), lstm ? start(c0) : Tensor()};
    std::vector<Tensor> ys(static_cast<size_t>(seq));
    for (int64_t i = 0; i < seq; ++i) {
      const int64_t t = backwards ? seq - 1 - i : i;
      const Tensor xp = reshape(projected[static_cast<size_t>(t)], {batch, gates * hidden});
      s = lstm                  ? lstm_cell(xp, s, rd, rb, kOnnxLstmGates)
          : linear_before_reset ? gru_cell(xp, s, rd, rb, kOnnxGruGates)
                                : gru_cell_reset_first(xp, s, rd, rb);
      ys[static_cast<size_t>(t)] = reshape(s.h, {1, 1, batch, hidden});
    }
    y_dirs.push_back(join(ys, 0));  // [seq, 1, batch, hidden]
    h_last.push_back(reshape(s.h, {1, batch, hidden}));
    if (lstm) c_last.push_back(reshape(s.c, {1, batch, hidden}));
  }
  Tensor y = join(y_dirs, 1), y_h = join(h_last, 0), y_c = lstm ? join(c_last, 0) : Tensor();
  if (batch_first) {
    y = transpose(y, {2, 0, 1, 3});  // [batch, seq, directions, hidden]
    y_h = transpose(y_h, {1, 0, 2});
    if (lstm) y_c = transpose(y_c, {1, 0, 2});
  }
  std::vector<Tensor> outs{y, y_h, y_c};
  outs.resize(num_outputs);
  return outs;
}

}  // namespace gbx::nn::onnx_training
