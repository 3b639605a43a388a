// The precision modes (runtime/precision.h): which nodes each mode and list lowers, the bf16
// kernels of cpu.dnnl against fp32 within the format's error bound, a compiled model keeping
// its choices, and a CPU without bf16 arithmetic computing those nodes in fp32.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "device/device.h"
#include "graph/gbm/gbm_reader.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/pass_test_util.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

using testing::GraphBuilder;
using testing::random_tensor;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool cpu_has_bf16() {
  const device::Capabilities caps = device::detect_cpu_capabilities();
  return caps.has("avx512_bf16") || caps.has("amx_bf16");
}

Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.type = AttrType::Ints;
  a.ints = std::move(v);
  return a;
}
Attribute one_int(int64_t v) {
  Attribute a;
  a.type = AttrType::Int;
  a.i = v;
  return a;
}

Tensor abs_of(const Tensor& t) {
  Tensor a(DType::F32, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) a.data<float>()[i] = std::fabs(t.data<float>()[i]);
  return a;
}

// x [2,13,9,11] -> Conv 3x3 (19 filters, pads 1) -> Relu -> Conv 1x1 stride 2 (24) ->
// GlobalAveragePool -> Flatten -> MatMul [24,37] -> Gemm (transB, C) -> Softmax.
Model small_net() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {Dim(2), Dim(13), Dim(9), Dim(11)});
  Node* c1 = b.node("Conv", {x, b.constant("w1", random_tensor({19, 13, 3, 3}, 1)),
                             b.constant("b1", random_tensor({19}, 2))},
                    1, {{"pads", ints({1, 1, 1, 1})}});
  c1->name = "conv1";
  Value* r = b.op("Relu", {c1->outputs[0]});
  Node* c2 = b.node("Conv", {r, b.constant("w2", random_tensor({24, 19, 1, 1}, 3))}, 1, {{"strides", ints({2, 2})}});
  c2->name = "conv2";
  Value* p = b.op("GlobalAveragePool", {c2->outputs[0]});
  Value* f = b.op("Flatten", {p});
  Node* mm = b.node("MatMul", {f, b.constant("w3", random_tensor({24, 37}, 4))});
  mm->name = "fc1";
  Node* gemm = b.node("Gemm", {mm->outputs[0], b.constant("w4", random_tensor({10, 37}, 5)),
                               b.constant("c4", random_tensor({10}, 6))},
                      1, {{"transB", one_int(1)}});
  gemm->name = "fc2";
  Node* sm = b.node("Softmax", {gemm->outputs[0]});
  sm->name = "probs";
  b.output(sm->outputs[0]);
  return b.take();
}

SessionOptions with_mode(const std::string& mode) {
  SessionOptions o;
  o.precision = mode;
  return o;
}

// The nodes of a session's graph that compute in bf16, by name.
std::vector<std::string> lowered(const Session& s) {
  std::vector<std::string> names;
  for (const auto& n : s.model().graph->nodes)
    if (n->compute_dtype == DType::BF16) names.push_back(n->name);
  return names;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string write_temp(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(GEARBOX_TEST_TMP);
  const std::string path = std::string(GEARBOX_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Precision, ModesChooseTheContractionsAndTheListsMoveThem) {
  {
    auto s = Session::create(small_net(), with_mode("force_fp32"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE(lowered(**s).empty());
  }
  {
    auto s = Session::create(small_net(), with_mode("allow_mix_precision_bf16"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const std::vector<std::string> low = lowered(**s);
    // The two convolutions (fused with the Relu or not), the MatMul and the Gemm: 4 nodes.
    EXPECT_EQ(low.size(), 4u) << join(low);
    EXPECT_TRUE(contains(low, "fc1") && contains(low, "fc2")) << join(low);
    EXPECT_FALSE(contains(low, "probs"));
    const PrecisionReport& r = (*s)->precision_report();
    EXPECT_EQ(r.lowered.size(), 4u);
    EXPECT_EQ(r.kept.count("black list: Softmax"), 1u) << r.summary();
    EXPECT_EQ((*s)->model().precision_mode, "allow_mix_precision_bf16");
    // cpu.simd comes first and runs the MatMul and the Gemm in fp32: they moved to cpu.dnnl,
    // and the partition's counts say so.
    EXPECT_GE(r.moved, 2u);
    for (const auto& n : (*s)->model().graph->nodes)
      if (n->compute_dtype == DType::BF16) EXPECT_EQ(n->engine, "cpu.dnnl") << n->name;
  }
  // Conv moved to the black list: mixed precision keeps it, allow_fp32_to_bf16 lowers it, and
  // force_bf16 lowers it with a warning.
  SessionOptions o = with_mode("allow_mix_precision_bf16");
  o.modify_mixlist = write_temp("mixlist.json", R"({"black-list": {"to-add": ["Conv"]}})");
  {
    auto s = Session::create(small_net(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(lowered(**s), (std::vector<std::string>{"fc1", "fc2"}));
  }
  o.precision = "allow_fp32_to_bf16";
  {
    auto s = Session::create(small_net(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(lowered(**s).size(), 4u);
    EXPECT_TRUE((*s)->precision_report().warnings.empty());
  }
  o.precision = "force_bf16";
  {
    auto s = Session::create(small_net(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(lowered(**s).size(), 4u);
    EXPECT_EQ((*s)->precision_report().warnings.size(), 2u);  // both convolutions
  }
  // --keep-dtype: a node by name and an op type.
  SessionOptions k = with_mode("allow_mix_precision_bf16");
  k.keep_dtype = write_temp("keep.txt", "# kept in fp32\nfc1\nOpType::Gemm\n");
  {
    auto s = Session::create(small_net(), k);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const std::vector<std::string> low = lowered(**s);
    EXPECT_EQ(low.size(), 2u) << join(low);
    EXPECT_FALSE(contains(low, "fc1") || contains(low, "fc2")) << join(low);
    EXPECT_EQ((*s)->precision_report().kept.at("--keep-dtype"), 2u);
  }
  // No kernel computes in fp16 here: every node stays, and the report says why.
  {
    auto s = Session::create(small_net(), with_mode("allow_mix_precision_fp16"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE(lowered(**s).empty());
    EXPECT_EQ((*s)->precision_report().kept.count("no float16 kernel for MatMul"), 1u)
        << (*s)->precision_report().summary();
  }
}

TEST(Precision, BadModesAndListsAreErrorsWithTheirCodes) {
  auto mode = Session::create(small_net(), with_mode("mixed_bf16"));
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.status().code(), ErrorCode::PRECISION_MODE_UNKNOWN);
  EXPECT_NE(mode.status().message().find("allow_mix_precision_bf16"), std::string::npos);

  auto expect_list_error = [](SessionOptions o, const std::string& needle) {
    auto s = Session::create(small_net(), o);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.status().code(), ErrorCode::PRECISION_LIST_INVALID) << s.status().to_string();
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().to_string();
  };
  SessionOptions o = with_mode("allow_mix_precision_bf16");
  o.keep_dtype = write_temp("keep_unknown.txt", "conv_one\n");
  expect_list_error(o, "conv_one");
  o.keep_dtype = std::string(GEARBOX_TEST_TMP) + "/no_such_keep_file.txt";
  expect_list_error(o, "cannot be read");
  o.keep_dtype.clear();
  o.modify_mixlist = write_temp("mix_bad_json.json", "{\"black-list\": ");
  expect_list_error(o, "not a JSON object");
  o.modify_mixlist = write_temp("mix_unknown_op.json", R"({"black-list": {"to-add": ["Konv"]}})");
  expect_list_error(o, "Konv");
  o.modify_mixlist = write_temp("mix_unknown_key.json", R"({"blacklist": {"to-add": ["Conv"]}})");
  expect_list_error(o, "blacklist");
  o.modify_mixlist = write_temp("mix_two_lists.json", R"({"black-list": {"to-add": ["Conv"]},
                                                        "white-list": {"to-add": ["Conv"]}})");
  expect_list_error(o, "both");
}

// y_bf16 against y_fp32 for single ops: the error of bf16 products with fp32 accumulation is
// at most (2u + u^2) sum|x w| with u = 2^-9 (each factor rounded to 8 significant bits), plus
// the fp32 sums' own K 2^-24 sum|x w| on both sides; sum|x w| is the same op on |x| and |W| in
// fp32. The largest error must also exceed what fp32 alone could make, or bf16 did not run.
struct OpCase {
  std::string name;
  std::function<Model(bool abs_values)> build;
  std::map<std::string, Tensor> feeds;
  int64_t k;  // reduction length
};

void expect_within_bf16_bound(const OpCase& c) {
  SCOPED_TRACE(c.name);
  auto bf16 = Session::create(c.build(false), with_mode("allow_mix_precision_bf16"));
  auto fp32 = Session::create(c.build(false), with_mode("force_fp32"));
  auto magnitude = Session::create(c.build(true), with_mode("force_fp32"));
  ASSERT_TRUE(bf16.ok() && fp32.ok() && magnitude.ok()) << bf16.status().to_string();
  ASSERT_EQ(lowered(**bf16).size(), 1u);
  std::map<std::string, Tensor> abs_feeds;
  for (const auto& [name, t] : c.feeds) abs_feeds[name] = abs_of(t);
  auto y = (*bf16)->run(c.feeds);
  auto ref = (*fp32)->run(c.feeds);
  auto mag = (*magnitude)->run(abs_feeds);
  ASSERT_TRUE(y.ok() && ref.ok() && mag.ok()) << y.status().to_string();
  const Tensor &a = (*y)[0], &r = (*ref)[0], &m = (*mag)[0];
  ASSERT_EQ(a.dims(), r.dims());
  const double u = std::ldexp(1.0, -9), fp32_sum = static_cast<double>(c.k) * std::ldexp(1.0, -23);
  double worst = 0;  // the largest error relative to sum|x w|
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double err = std::fabs(static_cast<double>(a.data<float>()[i]) - r.data<float>()[i]);
    const double s = m.data<float>()[i];
    const double bound = (2 * u + u * u + fp32_sum) * s + std::ldexp(std::fabs(r.data<float>()[i]), -22) + 1e-30;
    ASSERT_LE(err, bound) << "element " << i << ": bf16 " << a.data<float>()[i] << " fp32 " << r.data<float>()[i];
    if (s > 0) worst = std::max(worst, err / s);
  }
  EXPECT_GT(worst, 4 * fp32_sum) << "no error beyond fp32's: the node did not compute in bf16";
}

TEST(Precision, Bf16KernelsStayWithinTheFormatsBoundOfFp32) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 arithmetic (avx512_bf16/amx_bf16)";
  const Tensor w_conv = random_tensor({19, 13, 3, 3}, 11), b_conv = random_tensor({19}, 12);
  const Tensor x_conv = random_tensor({2, 13, 9, 11}, 13);
  const Tensor w_mm = random_tensor({45, 37}, 14), a_mm = random_tensor({3, 5, 45}, 15);
  const Tensor w_gemm = random_tensor({29, 45}, 16), a_gemm = random_tensor({45, 7}, 17);
  const Tensor c_gemm = random_tensor({29}, 18), b_rt = random_tensor({3, 45, 21}, 19);
  auto maybe_abs = [](const Tensor& t, bool abs) { return abs ? abs_of(t) : t; };
  std::vector<OpCase> cases;
  cases.push_back({"Conv 3x3 with bias, odd channels",
                   [&](bool abs) {
                     GraphBuilder b;
                     Value* x = b.input("x", DType::F32, {Dim(2), Dim(13), Dim(9), Dim(11)});
                     // The bias is added in fp32 after the sum: zero in the magnitude model.
                     Node* n = b.node("Conv",
                                      {x, b.constant("w", maybe_abs(w_conv, abs)),
                                       b.constant("b", abs ? Tensor(DType::F32, {19}) : b_conv)},
                                      1, {{"pads", ints({1, 1, 1, 1})}});
                     b.output(n->outputs[0]);
                     return b.take();
                   },
                   {{"x", x_conv}},
                   13 * 9});
  cases.push_back({"Conv 3x3 grouped, stride 2",
                   [&](bool abs) {
                     GraphBuilder b;
                     Value* x = b.input("x", DType::F32, {Dim(2), Dim(13), Dim(9), Dim(11)});
                     Tensor w = random_tensor({26, 1, 3, 3}, 20);
                     Node* n = b.node("Conv", {x, b.constant("w", maybe_abs(w, abs))}, 1,
                                      {{"group", one_int(13)}, {"strides", ints({2, 2})}});
                     b.output(n->outputs[0]);
                     return b.take();
                   },
                   {{"x", x_conv}},
                   9});
  cases.push_back({"MatMul, constant B, batched A",
                   [&](bool abs) {
                     GraphBuilder b;
                     Value* a = b.input("a", DType::F32, {Dim(3), Dim(5), Dim(45)});
                     Node* n = b.node("MatMul", {a, b.constant("w", maybe_abs(w_mm, abs))});
                     b.output(n->outputs[0]);
                     return b.take();
                   },
                   {{"a", a_mm}},
                   45});
  cases.push_back({"MatMul, both operands computed",
                   [&](bool) {
                     GraphBuilder b;
                     Value* a = b.input("a", DType::F32, {Dim(3), Dim(5), Dim(45)});
                     Value* w = b.input("w", DType::F32, {Dim(3), Dim(45), Dim(21)});
                     Node* n = b.node("MatMul", {a, w});
                     b.output(n->outputs[0]);
                     return b.take();
                   },
                   {{"a", a_mm}, {"w", b_rt}},
                   45});
  cases.push_back({"Gemm transA transB alpha beta C",
                   [&](bool abs) {
                     GraphBuilder b;
                     Value* a = b.input("a", DType::F32, {Dim(45), Dim(7)});
                     Node* n = b.node("Gemm",
                                      {a, b.constant("w", maybe_abs(w_gemm, abs)),
                                       b.constant("c", abs ? Tensor(DType::F32, {29}) : c_gemm)},
                                      1,
                                      {{"transA", one_int(1)},
                                       {"transB", one_int(1)},
                                       {"alpha", attr_float(0.75f)},
                                       {"beta", attr_float(0.5f)}});
                     b.output(n->outputs[0]);
                     return b.take();
                   },
                   {{"a", a_gemm}},
                   45});
  for (const OpCase& c : cases) expect_within_bf16_bound(c);
}

TEST(Precision, CompiledModelKeepsItsChoicesAndRunsAsTheOnnxSession) {
  auto resolved = resolve_session_options(with_mode("allow_mix_precision_bf16"));
  ASSERT_TRUE(resolved.ok());
  Model m = small_net();
  auto optimized = optimize_and_partition(m, *resolved);
  ASSERT_TRUE(optimized.ok()) << optimized.status().to_string();
  const std::string path = std::string(GEARBOX_TEST_TMP) + "/precision_small_net.gbm";
  std::filesystem::create_directories(GEARBOX_TEST_TMP);
  ASSERT_TRUE(gbm::write_file(m, path, {}).ok());
  gbm::Info info;
  auto read = gbm::read_file(path, &info);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(info.precision, "allow_mix_precision_bf16");
  EXPECT_EQ(read->precision_mode, "allow_mix_precision_bf16");
  size_t bf16_nodes = 0;
  for (const auto& n : read->graph->nodes) bf16_nodes += n->compute_dtype == DType::BF16;
  EXPECT_EQ(bf16_nodes, 4u);

  // Loaded without a mode (or with another one), it runs as compiled: the same outputs as the
  // session that compiled from the .onnx, bit for bit.
  auto from_gbm = Session::load(path, with_mode("force_fp32"));
  auto from_onnx = Session::create(small_net(), with_mode("allow_mix_precision_bf16"));
  ASSERT_TRUE(from_gbm.ok() && from_onnx.ok()) << from_gbm.status().to_string();
  EXPECT_EQ(lowered(**from_gbm).size(), 4u);
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({2, 13, 9, 11}, 30)}};
  auto a = (*from_gbm)->run(feeds);
  auto b = (*from_onnx)->run(feeds);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)[0].numel(), (*b)[0].numel());
  for (int64_t i = 0; i < (*a)[0].numel(); ++i) ASSERT_EQ((*a)[0].data<float>()[i], (*b)[0].data<float>()[i]) << i;
}

TEST(Precision, WithoutBf16ArithmeticLoweredNodesComputeInFp32OrFailWhenAsked) {
  ScopedEnv hide("GEARBOX_SIMULATE_MISSING_ISA", "avx512_bf16,amx_bf16");
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({2, 13, 9, 11}, 31)}};
  auto mixed = Session::create(small_net(), with_mode("allow_mix_precision_bf16"));
  auto fp32 = Session::create(small_net(), with_mode("force_fp32"));
  ASSERT_TRUE(mixed.ok() && fp32.ok()) << mixed.status().to_string();
  EXPECT_EQ(lowered(**mixed).size(), 4u);  // the choice is the model's; the CPU decides at run time
  auto a = (*mixed)->run(feeds);
  auto b = (*fp32)->run(feeds);
  ASSERT_TRUE(a.ok() && b.ok());
  // fp32 on both sides; the MatMul and the Gemm moved to cpu.dnnl, whose sums may run in
  // another order than cpu.simd's: within fp32 reassociation (probabilities, K <= 37), far
  // below the 2^-9 a bf16 product would show.
  for (int64_t i = 0; i < (*a)[0].numel(); ++i)
    ASSERT_NEAR((*a)[0].data<float>()[i], (*b)[0].data<float>()[i], 1e-6) << i;

  SessionOptions strict = with_mode("allow_mix_precision_bf16");
  strict.precision_fallback = false;
  auto s = Session::create(small_net(), strict);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::PRECISION_ISA_MISSING);
  EXPECT_NE(s.status().message().find("4 nodes"), std::string::npos) << s.status().to_string();
}

}  // namespace
}  // namespace gearbox
