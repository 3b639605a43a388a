// The precision modes (runtime/precision.h): which nodes each mode and list lowers, the bf16
// kernels of cpu.dnnl against fp32 within the format's error bound, a compiled model keeping
// its choices, and a CPU without bf16 arithmetic computing those nodes in fp32.
#include "runtime/precision.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/npy.h"
#include "base/strings.h"
#include "device/device.h"
#include "graph/gbm/gbm_reader.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/onnx_exporter.h"
#include "graph/onnx_importer.h"
#include "graph/pass_test_util.h"
#include "runtime/session.h"
#include "runtime/tensor_dump.h"

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

// The model as ONNX's shape inference types it (through the exporter and the importer), as an
// imported model is: the storage of values in bf16 needs float32 values of known shapes.
Model typed(Model m) {
  for (Value* out : m.graph->outputs)
    if (out->type.dtype == DType::Undefined) out->type.dtype = DType::F32;  // every output here is
  auto bytes = export_onnx_bytes(m);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  ImportOptions o;
  o.check_model = false;  // the outputs' shapes are left to the inference
  auto imported = import_onnx_bytes(*bytes, "", o);
  EXPECT_TRUE(imported.ok()) << imported.status().to_string();
  return std::move(*imported);
}

// v as bf16 rounds it (round to nearest even), kept in float32: what a value
// stored in bf16 holds.
Value* bf16_rounded(GraphBuilder& b, Value* v) {
  Value* h = b.op("Cast", {v}, {{"to", one_int(static_cast<int64_t>(DType::BF16))}});
  return b.op("Cast", {h}, {{"to", one_int(static_cast<int64_t>(DType::F32))}});
}

// x [2,13,9,11] -> Conv 3x3 (19 filters, pads 1) -> Relu -> Conv 1x1 stride 2 (24) ->
// GlobalAveragePool -> Flatten -> MatMul [24,37] -> Gemm (transB, C) -> Softmax.
// `rounded`: the Relu's output goes through bf16 (a Cast there and back), as the storage of
// allow_mix_precision_bf16 rounds it, for a float32 reference with the same roundings.
Model small_net(bool rounded = false) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {Dim(2), Dim(13), Dim(9), Dim(11)});
  Node* c1 = b.node("Conv", {x, b.constant("w1", random_tensor({19, 13, 3, 3}, 1)),
                             b.constant("b1", random_tensor({19}, 2))},
                    1, {{"pads", ints({1, 1, 1, 1})}});
  c1->name = "conv1";
  Value* r = b.op("Relu", {c1->outputs[0]});
  if (rounded) r = bf16_rounded(b, r);
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
  return typed(b.take());
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

// The node of g that reads the initializer `weight` (the passes rename the nodes they fuse and
// re-lay out; the weights keep their names).
const Node* node_reading(const Graph& g, const std::string& weight) {
  for (const auto& n : g.nodes)
    for (const Value* v : n->inputs)
      if (v && v->is_initializer && v->name == weight) return n.get();
  return nullptr;
}

// The dtype the graph gives input `i` of the node that reads `weight`.
DType input_dtype(const Graph& g, const std::string& weight, size_t i) {
  const Node* n = node_reading(g, weight);
  return n && i < n->inputs.size() && n->inputs[i] ? n->inputs[i]->type.dtype : DType::Undefined;
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
  if (!cpu_has_bf16()) GTEST_SKIP() << "values are stored in bf16 only for a CPU with bf16 arithmetic";
  auto resolved = resolve_session_options(with_mode("allow_mix_precision_bf16"));
  ASSERT_TRUE(resolved.ok());
  Model m = small_net();
  auto optimized = optimize_and_partition(m, *resolved);
  ASSERT_TRUE(optimized.ok()) << optimized.status().to_string();
  // As gearbox compile writes it: the weights only lowered convolutions read (w1, w2) in bf16,
  // the biases and the MatMul/Gemm weights (their kernels read float32) as they were.
  const WeightStorageReport weights = store_weights_reduced(m);
  EXPECT_EQ(weights.weights, 2u);
  EXPECT_EQ(weights.bytes_before, (19u * 13 * 3 * 3 + 24u * 19) * 4);
  EXPECT_EQ(weights.bytes_after, weights.bytes_before / 2);
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
  // The Relu's output, between the two lowered convolutions, is stored in bf16, and the .gbm
  // keeps it; the model's input and output keep their dtypes.
  EXPECT_EQ(input_dtype(*m.graph, "w2", 0), DType::BF16);
  EXPECT_EQ(input_dtype(*read->graph, "w2", 0), DType::BF16);
  EXPECT_EQ(input_dtype(*read->graph, "w1", 0), DType::F32);
  EXPECT_EQ(read->graph->outputs[0]->type.dtype, DType::F32);
  std::map<std::string, DType> stored;
  for (const Value* v : read->graph->initializers) stored[v->name] = v->initializer.dtype();
  EXPECT_EQ(stored.at("w1"), DType::BF16);
  EXPECT_EQ(stored.at("w2"), DType::BF16);
  EXPECT_EQ(stored.at("b1"), DType::F32);
  EXPECT_EQ(stored.at("w3"), DType::F32);
  EXPECT_EQ(stored.at("w4"), DType::F32);

  // Loaded without a mode (or with another one), it runs as compiled: the same outputs as the
  // session that compiled from the .onnx (float32 weights the kernels convert), bit for bit.
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

// `m` compiled in allow_mix_precision_bf16 as for a CPU with bf16 arithmetic (values and
// convolution weights stored in bf16), whatever this CPU has, and written to a .gbm in the test
// folder: its path.
std::string compile_for_bf16_cpu(Model m, const std::string& file) {
  auto resolved = resolve_session_options(with_mode("allow_mix_precision_bf16"));
  EXPECT_TRUE(resolved.ok());
  auto optimized = optimize_and_partition(m, *resolved);
  EXPECT_TRUE(optimized.ok()) << optimized.status().to_string();
  auto again = assign_precision(m, optimized->partition, PrecisionMode::AllowMixBf16, {},
                                optimized->report.final_nodes(), /*arithmetic=*/true);
  EXPECT_TRUE(again.ok()) << again.status().to_string();
  store_weights_reduced(m);  // as gearbox compile writes it: the convolutions' weights in bf16
  std::filesystem::create_directories(GEARBOX_TEST_TMP);
  const std::string path = std::string(GEARBOX_TEST_TMP) + "/" + file;
  EXPECT_TRUE(gbm::write_file(m, path, {}).ok());
  return path;
}

TEST(Precision, WithoutBf16ArithmeticLoweredNodesComputeInFp32OrFailWhenAsked) {
  const std::string gbm_path = compile_for_bf16_cpu(small_net(), "precision_small_net_bf16_cpu.gbm");
  ScopedEnv hide("GEARBOX_SIMULATE_MISSING_ISA", "avx512_bf16,amx_bf16");
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({2, 13, 9, 11}, 31)}};
  // Compiled here, on a CPU without bf16 arithmetic: the nodes are lowered (the choice is the
  // model's; the CPU decides at run time) but nothing is stored in bf16.
  auto here = Session::create(small_net(), with_mode("allow_mix_precision_bf16"));
  auto fp32 = Session::create(small_net(), with_mode("force_fp32"));
  ASSERT_TRUE(here.ok() && fp32.ok()) << here.status().to_string();
  EXPECT_EQ(lowered(**here).size(), 4u);
  EXPECT_EQ(input_dtype(*(*here)->model().graph, "w2", 0), DType::F32);
  EXPECT_TRUE((*here)->precision_report().storage_skipped);
  auto a = (*here)->run(feeds);
  auto b = (*fp32)->run(feeds);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string();
  // fp32 arithmetic on both sides; the MatMul and the Gemm moved to cpu.dnnl, whose sums may
  // run in another order than cpu.simd's: within fp32 reassociation (probabilities, K <= 37),
  // far below the 2^-9 a bf16 product would show.
  for (int64_t i = 0; i < (*a)[0].numel(); ++i)
    ASSERT_NEAR((*a)[0].data<float>()[i], (*b)[0].data<float>()[i], 1e-6) << i;

  // Compiled for a CPU with bf16 arithmetic: the Relu's output is stored in bf16, and the
  // kernels here convert it: the reference is float32 with that one rounding.
  auto compiled = Session::load(gbm_path, {});
  auto rounded = Session::create(small_net(/*rounded=*/true), with_mode("force_fp32"));
  ASSERT_TRUE(compiled.ok() && rounded.ok()) << compiled.status().to_string();
  EXPECT_EQ(input_dtype(*(*compiled)->model().graph, "w2", 0), DType::BF16);
  auto c = (*compiled)->run(feeds);
  auto r = (*rounded)->run(feeds);
  ASSERT_TRUE(c.ok() && r.ok()) << c.status().to_string();
  for (int64_t i = 0; i < (*c)[0].numel(); ++i)
    ASSERT_NEAR((*c)[0].data<float>()[i], (*r)[0].data<float>()[i], 1e-6) << i;

  SessionOptions strict = with_mode("allow_mix_precision_bf16");
  strict.precision_fallback = false;
  auto s = Session::create(small_net(), strict);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::PRECISION_ISA_MISSING);
  EXPECT_NE(s.status().message().find("4 nodes"), std::string::npos) << s.status().to_string();
}

// Storage between lowered convolutions (runtime/precision.h, Storage). x [1,16,8,8] ->
//   E: Relu(Conv 1x1 (16) + x)            -> e   (Z float32, Y stored)
//   A: Relu(Conv 3x3 (32, pads 1) + bias) -> a   (X stored, Y stored)
//   B: Relu(Conv 1x1 (32) + bias + a)     -> s   (X and Z stored, Y stored)
//   C: Conv 1x1 (24)(s)                   -> y1  (a model output)
//   D: Conv 1x1 (32)(s) + a               -> y2  (X and Z stored, a model output)
// The residual Adds are fused as the convolutions' sum input. `abs_values`: every weight, bias
// and input by magnitude (the error bound's sum|x w|); `rounded`: e, a and s go through bf16,
// a float32 model with the storage's roundings.
// `rounded`: the roundings a .gbm compiled for a bf16 CPU makes, in fp32 arithmetic: the values
// stored in bf16 (Cast pairs) and the convolution weights (rounded to bf16 as gearbox compile
// stores them; the biases stay float32).
Model residual_chain(bool abs_values = false, bool rounded = false) {
  auto values = [&](Dims d, uint32_t seed) {
    return abs_values ? abs_of(random_tensor(d, seed)) : random_tensor(d, seed);
  };
  auto w = [&](Dims d, uint32_t seed) {
    Tensor t = values(d, seed);
    if (rounded)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(BFloat16(t.data<float>()[i]));
    return t;
  };
  auto stored = [&](GraphBuilder& b, Value* v) { return rounded ? bf16_rounded(b, v) : v; };
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(16), Dim(8), Dim(8)});
  Node* ce = b.node("Conv", {x, b.constant("we", w({16, 16, 1, 1}, 40))});
  Value* e = stored(b, b.op("Relu", {b.op("Add", {ce->outputs[0], x})}));
  Node* ca = b.node("Conv", {e, b.constant("wa", w({32, 16, 3, 3}, 41)), b.constant("ba", values({32}, 42))}, 1,
                    {{"pads", ints({1, 1, 1, 1})}});
  Value* a = stored(b, b.op("Relu", {ca->outputs[0]}));
  Node* cb = b.node("Conv", {a, b.constant("wb", w({32, 32, 1, 1}, 43)), b.constant("bb", values({32}, 44))});
  Value* s = stored(b, b.op("Relu", {b.op("Add", {cb->outputs[0], a})}));
  b.output(b.node("Conv", {s, b.constant("wc", w({24, 32, 1, 1}, 45))})->outputs[0]);
  b.output(b.op("Add", {b.node("Conv", {s, b.constant("wd", w({32, 32, 1, 1}, 46))})->outputs[0], a}));
  return typed(b.take());
}

// Records the dtype of each node's outputs as they ran, by the weight the node reads.
class OutputDtypes final : public NodeObserver {
 public:
  Status before_node(const Node&, int, const std::vector<const RuntimeValue*>&) override { return Status::OK(); }
  Status after_node(const Node& node, int, const std::vector<RuntimeValue>& outputs) override {
    if (node.inputs.size() > 1 && node.inputs[1] && node.inputs[1]->is_initializer && !outputs.empty() &&
        outputs[0].is_tensor())
      dtypes[node.inputs[1]->name] = outputs[0].tensor().dtype();
    return Status::OK();
  }
  std::map<std::string, DType> dtypes;
};

TEST(Precision, ValuesBetweenLoweredConvolutionsAreStoredInBf16AndNoOthers) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "values are stored in bf16 only for a CPU with bf16 arithmetic";
  auto s = Session::create(residual_chain(), with_mode("allow_mix_precision_bf16"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const Graph& g = *(*s)->model().graph;
  EXPECT_EQ(lowered(**s).size(), 5u) << join(lowered(**s));
  const Node* nb = node_reading(g, "wb");
  const Node* nd = node_reading(g, "wd");
  ASSERT_TRUE(nb && nb->inputs.size() == 4 && nd && nd->inputs.size() == 4) << "a residual was not fused";
  EXPECT_EQ(nb->inputs[3], nb->inputs[0]);         // B reads a as X and as Z
  EXPECT_EQ(input_dtype(g, "we", 0), DType::F32);  // the model's input, also E's Z
  EXPECT_EQ(input_dtype(g, "we", 3), DType::F32);
  EXPECT_EQ(input_dtype(g, "wa", 0), DType::BF16);  // e
  EXPECT_EQ(input_dtype(g, "wb", 0), DType::BF16);  // a
  EXPECT_EQ(input_dtype(g, "wc", 0), DType::BF16);  // s
  EXPECT_EQ(input_dtype(g, "wd", 0), DType::BF16);  // s
  EXPECT_EQ(input_dtype(g, "wd", 3), DType::BF16);  // a
  for (const Value* out : g.outputs) EXPECT_EQ(out->type.dtype, DType::F32) << out->name;
  EXPECT_EQ((*s)->precision_report().stored, 3u) << (*s)->precision_report().summary();
  // The kernels write what the graph says.
  OutputDtypes seen;
  auto run = (*s)->run_values({{"x", random_tensor({1, 16, 8, 8}, 47)}}, nullptr, &seen);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ(seen.dtypes["we"], DType::BF16);
  EXPECT_EQ(seen.dtypes["wa"], DType::BF16);
  EXPECT_EQ(seen.dtypes["wb"], DType::BF16);
  EXPECT_EQ(seen.dtypes["wc"], DType::F32);
  EXPECT_EQ(seen.dtypes["wd"], DType::F32);
  for (const RuntimeValue& v : *run) EXPECT_EQ(v.tensor().dtype(), DType::F32);

  // No storage without a reduced mode.
  auto fp32 = Session::create(residual_chain(), with_mode("force_fp32"));
  ASSERT_TRUE(fp32.ok());
  EXPECT_EQ(input_dtype(*(*fp32)->model().graph, "wb", 0), DType::F32);
  EXPECT_EQ((*fp32)->precision_report().stored, 0u);

  // x -> P: Conv + Relu -> {Q: Conv -> q, Softmax -> p}: P's output has a float32 reader.
  // x -> R: Conv -> r, a model output that S: Conv reads too. The layout passes are off, so
  // these values run as built (with them, layout Transposes would stand between).
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(16), Dim(8), Dim(8)});
  Value* p = b.op("Relu", {b.node("Conv", {x, b.constant("wp", random_tensor({32, 16, 1, 1}, 48))})->outputs[0]});
  b.output(b.node("Conv", {p, b.constant("wq", random_tensor({32, 32, 1, 1}, 49))})->outputs[0]);
  b.output(b.op("Softmax", {p}, {{"axis", one_int(1)}}));
  Value* r = b.node("Conv", {x, b.constant("wr", random_tensor({32, 16, 1, 1}, 50))})->outputs[0];
  b.output(r);
  b.output(b.node("Conv", {r, b.constant("ws", random_tensor({32, 32, 1, 1}, 51))})->outputs[0]);
  SessionOptions o = with_mode("allow_mix_precision_bf16");
  o.optimizer.disabled_passes = {"layout_nhwc", "layout_blocked"};
  auto fork = Session::create(typed(b.take()), o);
  ASSERT_TRUE(fork.ok()) << fork.status().to_string();
  const Graph& f = *(*fork)->model().graph;
  EXPECT_EQ(lowered(**fork).size(), 4u) << join(lowered(**fork));
  EXPECT_EQ(input_dtype(f, "wq", 0), DType::F32);
  EXPECT_EQ(input_dtype(f, "ws", 0), DType::F32);
  EXPECT_EQ(node_reading(f, "wq")->inputs[0]->producer, node_reading(f, "wp"));  // nothing between
  EXPECT_EQ(node_reading(f, "ws")->inputs[0]->producer, node_reading(f, "wr"));
  EXPECT_EQ((*fork)->precision_report().stored, 0u);
  auto fork_run = (*fork)->run({{"x", random_tensor({1, 16, 8, 8}, 55)}});
  ASSERT_TRUE(fork_run.ok()) << fork_run.status().to_string();
  for (const Tensor& t : *fork_run) EXPECT_EQ(t.dtype(), DType::F32);
}

// The error of the chain against fp32, bounded stage by stage with u = 2^-9 (a rounding to
// bf16) and f = 2^-23 per fp32 addition, over the same chain run on magnitudes (M >= |value|
// at every stage: every term non-negative, the Relus identities), K the products per output:
//   E: reads x (float32: rounded) and W rounded, the bias and the residual x added in fp32:
//        |e' - e| <= g_E M_E, g_E = 2u + u^2 + (K_E + 2) f; stored, one more rounding:
//        |s_E - e| <= c_E M_E, c_E = g_E (1 + u) + u (each Relu is 1-Lipschitz).
//   A, B, C, D: read stored values exactly (they are bf16), W rounded; with c the largest c of
//   the stored values read (as X or as Z: both are parts of M):
//        g <= (1 + u) c + u + (K + 3) f (1 + u)(1 + c), stored: c' = g (1 + u) + u.
// Plus the fp32 reference's own error, (sum of K + 10) f M. A loose bound (every error at its
// worst, aligned), but it holds whatever the inputs; the run-time dtypes show the storage ran.
TEST(Precision, StoredValuesStayWithinTheFormatsBoundOfFp32) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 arithmetic (avx512_bf16/amx_bf16)";
  const Tensor x = random_tensor({1, 16, 8, 8}, 52);
  auto bf16 = Session::create(residual_chain(), with_mode("allow_mix_precision_bf16"));
  auto fp32 = Session::create(residual_chain(), with_mode("force_fp32"));
  auto magnitude = Session::create(residual_chain(/*abs_values=*/true), with_mode("force_fp32"));
  ASSERT_TRUE(bf16.ok() && fp32.ok() && magnitude.ok()) << bf16.status().to_string();
  ASSERT_EQ((*bf16)->precision_report().stored, 3u);
  OutputDtypes seen;
  auto y = (*bf16)->run_values({{"x", x}}, nullptr, &seen);
  auto ref = (*fp32)->run({{"x", x}});
  auto mag = (*magnitude)->run({{"x", abs_of(x)}});
  ASSERT_TRUE(y.ok() && ref.ok() && mag.ok()) << y.status().to_string();
  ASSERT_EQ(seen.dtypes["wb"], DType::BF16);
  const double u = std::ldexp(1.0, -9), f = std::ldexp(1.0, -23);
  const double ke = 16, ka = 16 * 9, kb = 32, kc = 32, kd = 32;
  auto stage = [&](double c_in, double k) { return (1 + u) * c_in + u + (k + 3) * f * (1 + u) * (1 + c_in); };
  auto stored = [&](double g) { return g * (1 + u) + u; };
  const double c_e = stored(2 * u + u * u + (ke + 2) * f);
  const double c_a = stored(stage(c_e, ka)), c_b = stored(stage(c_a, kb));
  const double fp32_ref = (ke + ka + kb + kc + kd + 10) * f;
  const double bound[2] = {stage(c_b, kc) + fp32_ref, stage(c_b, kd) + fp32_ref};  // y1 = C, y2 = D
  double worst = 0;
  for (size_t o = 0; o < 2; ++o) {
    const Tensor &a = (*y)[o].tensor(), &r = (*ref)[o], &m = (*mag)[o];
    ASSERT_EQ(a.dims(), r.dims());
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double err = std::fabs(static_cast<double>(a.data<float>()[i]) - r.data<float>()[i]);
      const double mi = m.data<float>()[i] * (1 + 256 * f);  // M itself computed in fp32
      ASSERT_LE(err, bound[o] * mi + 1e-30) << "output " << o << " element " << i << ": bf16 " << a.data<float>()[i]
                                            << " fp32 " << r.data<float>()[i] << " magnitude " << mi;
      worst = std::max(worst, err / mi);
    }
  }
  // fp32 alone errs by a few f relative to M on such sums (their worst case, fp32_ref, is not
  // reached: the terms' signs are random); bf16 products and storage err by far more.
  EXPECT_GT(worst, 32 * f) << "no error beyond fp32's: the chain did not compute in bf16";
}

// Without bf16 arithmetic the kernels compute in fp32 and convert: the stored values are
// rounded to bf16 all the same (the model says so), read back exactly, and nothing else is
// rounded -- the float32 model with Casts through bf16 where the storage is computes the same,
// up to the order of fp32 sums (the same primitives here).
TEST(Precision, WithoutBf16ArithmeticStoredValuesAreConvertedWithTheSameRoundings) {
  const std::string gbm_path = compile_for_bf16_cpu(residual_chain(), "precision_residual_chain_bf16_cpu.gbm");
  ScopedEnv hide("GEARBOX_SIMULATE_MISSING_ISA", "avx512_bf16,amx_bf16");
  const Tensor x = random_tensor({1, 16, 8, 8}, 53);
  auto mixed = Session::load(gbm_path, {});
  auto rounded = Session::create(residual_chain(false, /*rounded=*/true), with_mode("force_fp32"));
  auto magnitude = Session::create(residual_chain(/*abs_values=*/true), with_mode("force_fp32"));
  ASSERT_TRUE(mixed.ok() && rounded.ok() && magnitude.ok()) << mixed.status().to_string();
  OutputDtypes seen;
  auto a = (*mixed)->run_values({{"x", x}}, nullptr, &seen);
  auto r = (*rounded)->run({{"x", x}});
  auto m = (*magnitude)->run({{"x", abs_of(x)}});
  ASSERT_TRUE(a.ok() && r.ok() && m.ok()) << a.status().to_string();
  EXPECT_EQ(seen.dtypes["we"], DType::BF16);
  EXPECT_EQ(seen.dtypes["wa"], DType::BF16);
  EXPECT_EQ(seen.dtypes["wb"], DType::BF16);
  for (size_t o = 0; o < 2; ++o) {
    const Tensor &y = (*a)[o].tensor(), &ref = (*r)[o], &mag = (*m)[o];
    ASSERT_EQ(y.dims(), ref.dims());
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_LE(std::fabs(y.data<float>()[i] - ref.data<float>()[i]), std::ldexp(mag.data<float>()[i], -18))
          << "output " << o << " element " << i;
  }
}

// A dump of a value stored in bf16 is a float32 .npy (numpy has no bf16) holding the stored
// values exactly, and the index says what the engine held.
TEST(Precision, DumpsOfBf16ValuesAreFloat32AndSaySo) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "values are stored in bf16 only for a CPU with bf16 arithmetic";
  auto s = Session::create(residual_chain(), with_mode("allow_mix_precision_bf16"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string dir = std::string(GEARBOX_TEST_TMP) + "/precision_dump";
  std::filesystem::remove_all(dir);
  auto dumper = TensorDumper::create({parse_dump_pattern("*:pre").value(), parse_dump_pattern("*:post").value()}, dir,
                                     &(*s)->optimizer_report());
  ASSERT_TRUE(dumper.ok()) << dumper.status().to_string();
  auto run = (*s)->run_values({{"x", random_tensor({1, 16, 8, 8}, 54)}}, nullptr, dumper->get());
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  ASSERT_TRUE((*dumper)->write_index().ok());
  std::ifstream in(dir + "/index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  size_t stored = 0;
  for (const auto& e : index["files"]) {
    if (!e.contains("stored_dtype")) {
      EXPECT_NE(e["dtype"], "bfloat16") << e.dump();
      continue;
    }
    ++stored;
    EXPECT_EQ(e["stored_dtype"], "bfloat16") << e.dump();
    EXPECT_EQ(e["dtype"], "float32") << e.dump();
    auto t = read_npy(dir + "/" + e["file"].get<std::string>());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    ASSERT_EQ(t->dtype(), DType::F32);
    for (int64_t i = 0; i < t->numel(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, t->data<float>() + i, sizeof(bits));
      ASSERT_EQ(bits & 0xffffu, 0u) << e["file"] << " element " << i << " is not a bf16 value";
    }
  }
  // e, a and s as their producers wrote them and their consumers read them: e twice (E, A),
  // a four times (A; B as X and Z; D as Z), s three times (B, C, D).
  EXPECT_EQ(stored, 9u) << index.dump(1);
}

}  // namespace
}  // namespace gearbox
