// ONNX LSTM and GRU nodes as `gearbox train` runs them on a trained path
// (onnx_training/recurrent_lowering.h): the step-by-step lowering against the graph engine's
// recurrent kernels (cpu.ref, itself checked by the ONNX node suite) in float64, its gradients
// against finite differences, and the variants it refuses. check_train_torch.py trains
// torch-exported LSTM and GRU models against torch end to end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/autodiff/tape.h"
#include "frontend/onnx_training/recurrent_lowering.h"
#include "gradcheck.h"
#include "graph/ir.h"

namespace gbx::nn {
namespace {

using onnx_training::lower_recurrent;
using onnx_training::recurrent_lowering_refusal;
using testing::gradcheck;
using testing::random_f64;

struct Case {
  std::string op;  // "LSTM" or "GRU"
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true;
  bool initial_state = false;
  int64_t linear_before_reset = 0;
};

std::string describe(const Case& c) {
  return c.op + " " + c.direction + " layout " + std::to_string(c.layout) + (c.bias ? " bias" : " no bias") +
         (c.initial_state ? " initial state" : "") + " lbr " + std::to_string(c.linear_before_reset);
}

constexpr int64_t kSeq = 3, kBatch = 2, kInput = 3, kHidden = 2;

gearbox::Node node_of(const Case& c) {
  gearbox::Node n;
  n.name = "rnn";
  n.op_type = c.op;
  n.attrs["hidden_size"] = gearbox::attr_int(kHidden);
  n.attrs["direction"] = gearbox::attr_string(c.direction);
  n.attrs["layout"] = gearbox::attr_int(c.layout);
  if (c.op == "GRU") n.attrs["linear_before_reset"] = gearbox::attr_int(c.linear_before_reset);
  return n;
}

// X, W, R, B, sequence_lens (undefined), initial_h[, initial_c]: random float64 leaves.
std::vector<Tensor> inputs_of(const Case& c) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1, gates = c.op == "LSTM" ? 4 : 3;
  auto leaf = [](std::vector<int64_t> shape) { return random_f64(std::move(shape)).set_requires_grad(); };
  std::vector<Tensor> ins{c.layout == 0 ? leaf({kSeq, kBatch, kInput}) : leaf({kBatch, kSeq, kInput}),
                          leaf({dirs, gates * kHidden, kInput}), leaf({dirs, gates * kHidden, kHidden}),
                          c.bias ? leaf({dirs, 2 * gates * kHidden}) : Tensor(), Tensor()};
  if (c.initial_state) {
    const std::vector<int64_t> state =
        c.layout == 0 ? std::vector<int64_t>{dirs, kBatch, kHidden} : std::vector<int64_t>{kBatch, dirs, kHidden};
    ins.push_back(leaf(state));
    if (c.op == "LSTM") ins.push_back(leaf(state));
  }
  return ins;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* op : {"LSTM", "GRU"})
    for (const char* dir : {"forward", "reverse", "bidirectional"})
      for (int64_t layout : {0, 1})
        for (bool bias : {true, false})
          for (bool state : {false, true})
            for (int64_t lbr : {0, 1}) {
              if (std::string(op) == "LSTM" && lbr) continue;
              cases.push_back({op, dir, layout, bias, state, lbr});
            }
  return cases;
}

// Every output of the lowering equals the kernel's (float64: only the summation order differs).
TEST(ImportedRecurrent, LoweringMatchesTheKernels) {
  manual_seed(3);
  for (const Case& c : all_cases()) {
    const gearbox::Node n = node_of(c);
    const std::vector<Tensor> ins = inputs_of(c);
    const size_t outputs = c.op == "LSTM" ? 3 : 2;
    std::vector<Tensor> want, got;
    {
      NoGradGuard no_grad;
      want = apply(OpSpec{c.op, "", 14}, ins, n.attrs, outputs);
      got = lower_recurrent(n, ins, outputs);
    }
    ASSERT_EQ(got.size(), outputs) << describe(c);
    for (size_t k = 0; k < outputs; ++k) {
      ASSERT_EQ(got[k].shape(), want[k].shape()) << describe(c) << ", output " << k;
      const std::vector<double> g = got[k].to_double_vector(), w = want[k].to_double_vector();
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g[i], w[i], 1e-12) << describe(c) << ", output " << k << "[" << i << "]";
    }
  }
}

// The gradients through time of X, W, R, B and the initial states, against central differences
// of a weighted sum of every output.
TEST(ImportedRecurrent, GradientsMatchFiniteDifferences) {
  manual_seed(4);
  for (const Case& c : all_cases()) {
    if (!c.initial_state || (c.layout == 1) != c.bias) continue;  // a spread of the cases: 18 of them
    const gearbox::Node n = node_of(c);
    std::vector<Tensor> ins = inputs_of(c);
    const bool lstm = c.op == "LSTM";
    // The inputs gradcheck perturbs, in order; the fixed undefined sequence_lens is put back.
    std::vector<Tensor> leaves;
    for (const Tensor& t : ins)
      if (t.defined()) leaves.push_back(t);
    gradcheck(
        describe(c),
        [&](const std::vector<Tensor>& x) {
          std::vector<Tensor> full;
          size_t k = 0;
          for (const Tensor& t : ins) full.push_back(t.defined() ? x[k++] : Tensor());
          std::vector<Tensor> out = lower_recurrent(n, full, lstm ? 3 : 2);
          std::vector<Tensor> flat;
          for (const Tensor& o : out) flat.push_back(reshape(o, {-1}));
          return concat(flat, 0);
        },
        leaves);
  }
}

TEST(ImportedRecurrent, RefusesWhatItDoesNotLower) {
  gearbox::Node n = node_of({"LSTM"});
  EXPECT_EQ(recurrent_lowering_refusal(n), "");
  gearbox::Node clipped = n;
  clipped.attrs["clip"] = gearbox::attr_float(3.0f);
  EXPECT_NE(recurrent_lowering_refusal(clipped).find("clip"), std::string::npos);
  gearbox::Node relu = n;
  relu.attrs["activations"].type = gearbox::AttrType::Strings;
  relu.attrs["activations"].strings = {"Sigmoid", "Relu", "Tanh"};
  EXPECT_NE(recurrent_lowering_refusal(relu).find("Relu"), std::string::npos);
  gearbox::Node coupled = n;
  coupled.attrs["input_forget"] = gearbox::attr_int(1);
  EXPECT_NE(recurrent_lowering_refusal(coupled).find("input_forget"), std::string::npos);

  // Sequences shorter than the batch's: OP_UNSUPPORTED, not a silently wrong gradient.
  std::vector<Tensor> ins = inputs_of({"LSTM"});
  ins[4] = Tensor::from_vector(std::vector<int64_t>{kSeq, kSeq - 1}, {kBatch});
  try {
    lower_recurrent(n, ins, 3);
    ADD_FAILURE() << "a short sequence was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "OP_UNSUPPORTED") << e.what();
  }
  // W that does not fit R: SHAPE_MISMATCH.
  ins = inputs_of({"LSTM"});
  ins[1] = random_f64({1, 4 * kHidden, kInput + 1});
  try {
    lower_recurrent(n, ins, 3);
    ADD_FAILURE() << "a W of the wrong input size was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "SHAPE_MISMATCH") << e.what();
  }
}

}  // namespace
}  // namespace gbx::nn
