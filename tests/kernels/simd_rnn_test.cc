// cpu.simd RNN, GRU and LSTM against the cpu.ref kernels (themselves checked against torch in
// misc_rnn_test.cc and the ONNX node suite): every output (Y, Y_h, Y_c) of randomly drawn
// configurations -- directions, layouts, batch and sequence sizes, odd input and hidden
// sizes, biases, sequence lengths (0 and partial, so reverse rows start at their own end),
// initial states, peepholes, clip, input_forget, linear_before_reset both ways, constant and
// run-time weights -- and the cases the simd kernel leaves to the reference.
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using gearbox::attr_strings;
using testing::attr_float;
using testing::attr_int;
using testing::attr_string;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;
using testing::run_on_first_accepting;
using testing::simd_random;

struct Config {
  std::string op;  // RNN, GRU, LSTM
  std::string direction;
  int64_t layout = 0, s = 1, b = 1, in = 1, h = 1;
  bool bias = false, lens = false, init_h = false, init_c = false, peep = false, clip = false;
  bool input_forget = false, lbr = false, constant = true;

  std::string name() const {
    std::string n = op + " " + direction + " layout " + std::to_string(layout) + " S" + std::to_string(s) + " B" +
                    std::to_string(b) + " I" + std::to_string(in) + " H" + std::to_string(h);
    for (auto [on, what] : std::vector<std::pair<bool, const char*>>{{bias, "bias"},
                                                                     {lens, "lens"},
                                                                     {init_h, "h0"},
                                                                     {init_c, "c0"},
                                                                     {peep, "peepholes"},
                                                                     {clip, "clip"},
                                                                     {input_forget, "input_forget"},
                                                                     {lbr, "linear_before_reset"},
                                                                     {!constant, "run-time weights"}})
      if (on) n += std::string(" ") + what;
    return n;
  }
};

KernelCall make_rnn_call(const Config& c, std::mt19937& g) {
  const int64_t gates = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const Dims xd = c.layout ? Dims{c.b, c.s, c.in} : Dims{c.s, c.b, c.in};
  const Dims state = c.layout ? Dims{c.b, dirs, c.h} : Dims{dirs, c.b, c.h};
  std::vector<Tensor> in{simd_random(xd, g, -2.f, 2.f), simd_random({dirs, gates * c.h, c.in}, g, -0.6f, 0.6f),
                         simd_random({dirs, gates * c.h, c.h}, g, -0.6f, 0.6f)};
  in.push_back(c.bias ? simd_random({dirs, 2 * gates * c.h}, g) : Tensor());
  if (c.lens) {
    Tensor l(DType::I32, {c.b});
    std::uniform_int_distribution<int32_t> len(0, static_cast<int32_t>(c.s));
    for (int64_t i = 0; i < c.b; ++i) l.data<int32_t>()[i] = i == 0 ? static_cast<int32_t>(c.s) : len(g);
    in.push_back(l);
  } else {
    in.push_back(Tensor());
  }
  in.push_back(c.init_h ? simd_random(state, g) : Tensor());
  if (c.op == "LSTM") {
    in.push_back(c.init_c ? simd_random(state, g) : Tensor());
    in.push_back(c.peep ? simd_random({dirs, 3 * c.h}, g) : Tensor());
  }
  while (!in.empty() && !in.back().defined()) in.pop_back();
  KernelCall call = make_call(c.op, 14, in);
  call.attrs["direction"] = attr_string(c.direction);
  call.attrs["hidden_size"] = attr_int(c.h);
  call.attrs["layout"] = attr_int(c.layout);
  if (c.clip) call.attrs["clip"] = attr_float(0.7f);
  if (c.input_forget) call.attrs["input_forget"] = attr_int(1);
  if (c.op == "GRU") call.attrs["linear_before_reset"] = attr_int(c.lbr ? 1 : 0);
  call.num_outputs = c.op == "LSTM" ? 3 : 2;
  call.constant_inputs.assign(call.inputs.size(), false);
  call.constant_inputs[1] = call.constant_inputs[2] = c.constant;
  return call;
}

// Every output of cpu.simd's run equals cpu.ref's within float rounding of the gates.
void expect_all_outputs_match(const KernelCall& call, const std::string& what) {
  KernelCall ref = call;
  ref.engine = std::string(kEngineRef);
  auto want = run_kernel(ref);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().to_string();
  auto run = run_on_first_accepting(call, {std::string(kEngineSimd), std::string(kEngineRef)});
  ASSERT_EQ(run.engine, kEngineSimd) << what << ": cpu.simd refused it";
  ASSERT_TRUE(run.result.ok()) << what << ": " << run.result.status().to_string();
  const auto& got = run.result.value();
  ASSERT_EQ(got.size(), want.value().size());
  for (size_t o = 0; o < got.size(); ++o) {
    const Tensor& r = want.value()[o];
    const Tensor& s = got[o];
    ASSERT_EQ(r.dims(), s.dims()) << what << " output " << o;
    int bad = 0;
    for (int64_t i = 0; i < r.numel() && bad < 3; ++i) {
      const double rv = r.at_double(i), sv = s.at_double(i);
      if (std::fabs(rv - sv) > 2e-5 + 1e-4 * std::fabs(rv)) {
        ++bad;
        ADD_FAILURE() << what << ": output " << o << " element " << i << " ref " << rv << " simd " << sv;
      }
    }
  }
}

TEST(SimdRnn, RandomConfigurationsMatchTheReference) {
  std::mt19937 g(2026);
  auto pick = [&](auto... v) {
    const std::vector<int64_t> opts{v...};
    return opts[std::uniform_int_distribution<size_t>(0, opts.size() - 1)(g)];
  };
  auto coin = [&] { return std::bernoulli_distribution(0.5)(g); };
  const std::vector<std::string> ops{"RNN", "GRU", "LSTM"}, dirs{"forward", "reverse", "bidirectional"};
  int cases = 0;
  for (const auto& op : ops)
    for (const auto& direction : dirs)
      for (int rep = 0; rep < 24; ++rep) {
        Config c;
        c.op = op;
        c.direction = direction;
        c.layout = pick(0, 1);
        c.s = pick(1, 2, 7);
        c.b = pick(1, 3, 5);
        c.in = pick(1, 5, 17, 40);
        c.h = pick(1, 7, 16, 33);
        c.bias = coin();
        c.lens = coin();
        c.init_h = coin();
        c.init_c = op == "LSTM" && coin();
        c.peep = op == "LSTM" && coin();
        c.clip = rep % 5 == 0;
        c.input_forget = op == "LSTM" && rep % 7 == 0;
        c.lbr = op == "GRU" && rep % 2 == 0;
        c.constant = rep % 4 != 3;
        expect_all_outputs_match(make_rnn_call(c, g), c.name());
        ++cases;
      }
  EXPECT_EQ(cases, 216);
}

TEST(SimdRnn, CorpusSizedLayers) {
  // The shapes of the corpus's recognizers and voice-activity models (bench/corpus), where
  // a product splits into several register and cache blocks.
  std::mt19937 g(7);
  Config lstm{.op = "LSTM",
              .direction = "bidirectional",
              .s = 20,
              .b = 2,
              .in = 96,
              .h = 64,
              .bias = true,
              .init_h = true,
              .init_c = true};
  expect_all_outputs_match(make_rnn_call(lstm, g), lstm.name());
  Config gru{.op = "GRU",
             .direction = "forward",
             .s = 9,
             .b = 1,
             .in = 128,
             .h = 128,
             .bias = true,
             .init_h = true,
             .lbr = true};
  expect_all_outputs_match(make_rnn_call(gru, g), gru.name());
  gru.lbr = false;
  expect_all_outputs_match(make_rnn_call(gru, g), gru.name());
}

TEST(SimdRnn, LeavesOtherActivationsAndDtypesToTheReference) {
  std::mt19937 g(3);
  Config c{.op = "LSTM", .direction = "forward", .s = 3, .b = 2, .in = 4, .h = 5};
  KernelCall call = make_rnn_call(c, g);
  call.attrs["activations"] = attr_strings({"HardSigmoid", "Tanh", "Tanh"});
  auto run = run_on_first_accepting(call, {std::string(kEngineSimd), std::string(kEngineRef)});
  EXPECT_EQ(run.engine, kEngineRef);
  // The defaults spelled out (any case) are the kernel's own.
  call.attrs["activations"] = attr_strings({"sigmoid", "TANH", "Tanh"});
  expect_all_outputs_match(call, "LSTM with its default activations named");
  EXPECT_EQ(KernelRegistry::global().find("", "LSTM", 14, kEngineSimd, DType::F64), nullptr);
  // A misfit W is refused by the predicate and reported by the reference.
  call = make_rnn_call(c, g);
  call.inputs[1] = simd_random({1, 19, 4}, g);
  run = run_on_first_accepting(call, {std::string(kEngineSimd), std::string(kEngineRef)});
  EXPECT_EQ(run.engine, kEngineRef);
  EXPECT_FALSE(run.result.ok());
}

}  // namespace
}  // namespace gearbox
