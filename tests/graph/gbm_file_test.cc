// The compiled model file (.gbm): a round trip runs bit-identically to the .onnx it came
// from; corrupted and incompatible files each fail with their own code; a bounded fuzz run
// of the loader never crashes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_reader.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "runtime/partitioner.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

void add_init(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, uint32_t seed) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (int64_t i = 0; i < n; ++i) t->add_float_data(dist(rng) - (i % 3 == 0 ? 1.0f : 0.0f));
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out[0]);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// x[batch,3,8,8] -> Conv(pads) -> BatchNormalization -> LeakyRelu(alpha) -> GlobalAveragePool
// -> Flatten -> Gemm(transB, alpha) + Constant(tensor attribute): initializers, int, ints,
// float and tensor attributes, and a Conv+BN pair the optimizer folds.
std::string conv_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("gbm_test");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "3", "8", "8"});
  testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "5"});
  add_init(g, "w", {4, 3, 3, 3}, 1);
  add_init(g, "b", {4}, 2);
  add_init(g, "scale", {4}, 3);
  add_init(g, "bias", {4}, 4);
  add_init(g, "mean", {4}, 5);
  add_init(g, "var", {4}, 6);
  add_init(g, "fc", {5, 4}, 7);
  auto* conv = add_node(g, "Conv", {"x", "w", "b"}, {"c"});
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  add_node(g, "BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"});
  auto* lr = add_node(g, "LeakyRelu", {"bn"}, {"a"});
  auto* alpha = lr->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.125f);
  add_node(g, "GlobalAveragePool", {"a"}, {"p"});
  add_node(g, "Flatten", {"p"}, {"f"});
  auto* gemm = add_node(g, "Gemm", {"f", "fc"}, {"q"});
  auto* tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  auto* cst = add_node(g, "Constant", {}, {"k"});
  auto* val = cst->add_attribute();
  val->set_name("value");
  val->set_type(onnx::AttributeProto::TENSOR);
  val->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  val->mutable_t()->add_dims(5);
  for (int i = 0; i < 5; ++i) val->mutable_t()->add_float_data(0.25f * static_cast<float>(i) - 0.5f);
  add_node(g, "Add", {"q", "k"}, {"y"});
  return testing::serialize(m);
}

// Per process: ctest runs each test of this file in its own process, in parallel, and
// several of them write the same model files.
std::string tmp_path(const std::string& name) {
  std::filesystem::create_directories(GEARBOX_TEST_TMP);
  return std::string(GEARBOX_TEST_TMP) + "/" + std::to_string(::getpid()) + "_" + name;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// What gearbox compile does: import, optimize with `opts`, serialize.
std::string compile(const std::string& onnx_path, const OptimizerOptions& opts, std::vector<std::string> isa = {}) {
  auto model = import_onnx_file(onnx_path);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  auto rep = optimize(*model, opts);
  EXPECT_TRUE(rep.ok()) << rep.status().to_string();
  gbm::WriteOptions wo;
  wo.required_isa = std::move(isa);
  wo.optimizer_report_json = rep->to_json(/*with_timings=*/false);  // as compile_command.cc
  wo.memory = rep->memory;
  auto bytes = gbm::serialize(*model, wo);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : std::string();
}

std::string valid_file() {
  static const std::string bytes = [] {
    std::string onnx = tmp_path("gbm_valid.onnx");
    write(onnx, conv_model());
    return compile(onnx, OptimizerOptions{});
  }();
  return bytes;
}

// Issue 30 item 4: the same model compiled twice with the same options gives the same bytes
// (nothing in the file may depend on time, addresses or hash-map order).
TEST(GbmFile, CompilingTwiceIsByteIdentical) {
  std::string onnx = tmp_path("gbm_repro.onnx");
  write(onnx, conv_model());
  std::string first = compile(onnx, OptimizerOptions{});
  std::string second = compile(onnx, OptimizerOptions{});
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(first.size(), second.size());
  EXPECT_TRUE(first == second) << "two compiles of the same model differ";
}

ErrorCode load_code(const std::string& bytes) {
  auto m = gbm::read_bytes(bytes.data(), bytes.size());
  return m.ok() ? ErrorCode::OK : m.status().code();
}

void refresh_checksum(std::string& bytes) {
  uint64_t sum = gbm::gbm_checksum(reinterpret_cast<const uint8_t*>(bytes.data()) + gbm::kHeaderSize,
                                   bytes.size() - gbm::kHeaderSize);
  std::memcpy(bytes.data() + 48, &sum, 8);
}

Tensor input(int64_t batch) {
  Tensor x(DType::F32, {batch, 3, 8, 8});
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  return x;
}

void expect_bit_identical(const OptimizerOptions& opts, const std::string& tag) {
  std::string onnx = tmp_path("gbm_rt_" + tag + ".onnx"), gbmf = tmp_path("gbm_rt_" + tag + ".gbm");
  write(onnx, conv_model());
  write(gbmf, compile(onnx, opts));
  SessionOptions so;
  so.optimizer = opts;
  auto a = Session::load(onnx, so);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = Session::load(gbmf, so);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  // The .gbm holds the optimized graph: same node list as the session over the .onnx.
  ASSERT_EQ((*a)->model().graph->nodes.size(), (*b)->model().graph->nodes.size());
  for (size_t i = 0; i < (*a)->model().graph->nodes.size(); ++i)
    EXPECT_EQ((*a)->model().graph->nodes[i]->op_type, (*b)->model().graph->nodes[i]->op_type);
  ASSERT_EQ((*b)->inputs().size(), 1u);
  EXPECT_EQ(to_string((*b)->inputs()[0].type.shape), "[batch,3,8,8]");
  for (int64_t batch : {1, 3}) {
    auto ya = (*a)->run({{"x", input(batch)}});
    auto yb = (*b)->run({{"x", input(batch)}});
    ASSERT_TRUE(ya.ok()) << ya.status().to_string();
    ASSERT_TRUE(yb.ok()) << yb.status().to_string();
    ASSERT_EQ(ya->size(), 1u);
    ASSERT_EQ(yb->size(), 1u);
    const Tensor &ta = (*ya)[0], &tb = (*yb)[0];
    ASSERT_EQ(ta.dims(), (Dims{batch, 5}));
    ASSERT_EQ(ta.dims(), tb.dims());
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << tag << " batch " << batch;
  }
}

TEST(GbmFile, RoundTripIsBitIdenticalWithPassesOn) {
  OptimizerOptions opts;
  expect_bit_identical(opts, "on");
  // The Conv+BN pair is folded in the stored graph unless the environment turns passes off.
  const char* env = std::getenv("GEARBOX_DISABLE_PASSES");
  if (!env || !*env) {
    std::string f = valid_file();
    auto m = gbm::read_bytes(f.data(), f.size());
    ASSERT_TRUE(m.ok());
    for (const auto& n : m->graph->nodes) EXPECT_NE(n->op_type, "BatchNormalization");
  }
}

TEST(GbmFile, RoundTripIsBitIdenticalWithPassesOff) {
  OptimizerOptions opts;
  opts.enabled = false;
  expect_bit_identical(opts, "off");
}

TEST(GbmFile, RecordsMetadata) {
  std::string f = valid_file();
  gbm::Info info;
  auto m = gbm::read_bytes(f.data(), f.size(), &info);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(info.format_version, gbm::kFormatVersion);
  EXPECT_EQ(info.precision, "fp32");
  EXPECT_NE(info.optimizer_report_json.find("\"passes\""), std::string::npos);
  EXPECT_NE(info.optimizer_report_json.find("\"memory\""), std::string::npos);
  // With a symbolic batch no intermediate has a static size: the stored plan says so.
  EXPECT_EQ(info.naive_bytes, 0u);
  // Initializers come out of the 64-byte-aligned blob.
  for (const Value* v : m->graph->initializers)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->initializer.raw()) % 64, 0u) << v->name;
}

TEST(GbmFile, BadMagic) {
  std::string f = valid_file();
  f[0] = 'X';
  EXPECT_EQ(load_code(f), ErrorCode::GBM_NOT_GBM);
  EXPECT_EQ(load_code(conv_model()), ErrorCode::GBM_NOT_GBM);
  EXPECT_FALSE(gbm::is_gbm_file(tmp_path("gbm_valid.onnx")));
}

TEST(GbmFile, TruncatedAtSeveralOffsets) {
  std::string f = valid_file();
  ASSERT_GT(f.size(), 256u);
  for (size_t cut :
       {size_t(2), size_t(6), size_t(20), size_t(63), size_t(64), size_t(100), f.size() / 2, f.size() - 1}) {
    EXPECT_EQ(load_code(f.substr(0, cut)), ErrorCode::GBM_TRUNCATED) << "cut at " << cut;
  }
}

TEST(GbmFile, FlippedBytesFailTheChecksum) {
  std::string f = valid_file();
  for (size_t pos : {size_t(64), size_t(100), f.size() / 2, f.size() - 1}) {
    std::string g = f;
    g[pos] = static_cast<char>(g[pos] ^ 0x10);
    EXPECT_EQ(load_code(g), ErrorCode::GBM_CHECKSUM_MISMATCH) << "flipped byte " << pos;
  }
}

TEST(GbmFile, NewerFormatVersion) {
  std::string f = valid_file();
  uint32_t v = gbm::kFormatVersion + 1;
  std::memcpy(f.data() + 4, &v, 4);
  auto m = gbm::read_bytes(f.data(), f.size());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::GBM_VERSION_NEWER);
}

// The file records the gearbox that wrote it; a reader names that version when it refuses a
// newer format, and refuses a required feature it does not implement (issue 21).
TEST(GbmFile, RecordsTheGearboxVersionThatCompiledIt) {
  std::string f = valid_file();
  gbm::Info info;
  ASSERT_TRUE(gbm::read_bytes(f.data(), f.size(), &info).ok());
  EXPECT_FALSE(info.gearbox_version.empty());
  EXPECT_NE(info.gearbox_version, "unknown") << "the build passes GEARBOX_VERSION_STRING to the writer";
  EXPECT_TRUE(info.required_features.empty());

  uint32_t v = gbm::kFormatVersion + 1;
  std::memcpy(f.data() + 4, &v, 4);
  auto newer = gbm::read_bytes(f.data(), f.size());
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), ErrorCode::GBM_VERSION_NEWER);
  EXPECT_NE(newer.status().message().find("written by gearbox " + info.gearbox_version), std::string::npos)
      << newer.status().to_string();
}

TEST(GbmFile, UnknownRequiredFeatureIsRefusedNamingTheWriter) {
  std::string onnx = tmp_path("gbm_features.onnx");
  write(onnx, conv_model());
  auto model = import_onnx_file(onnx);
  ASSERT_TRUE(model.ok());
  gbm::WriteOptions wo;
  wo.required_features = {"int4_weights"};
  wo.gearbox_version = "99.1.0";  // a gearbox from the future
  auto bytes = gbm::serialize(*model, wo);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto m = gbm::read_bytes(bytes->data(), bytes->size());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::GBM_FEATURE_UNKNOWN);
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("99.1.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("int4_weights"), std::string::npos) << msg;
  // The same through a file and a Session, as gearbox run would load it.
  std::string path = tmp_path("gbm_features.gbm");
  write(path, *bytes);
  auto s = Session::load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::GBM_FEATURE_UNKNOWN);
  EXPECT_NE(s.status().message().find("99.1.0"), std::string::npos);
  // Without the feature the same writer's file loads.
  wo.required_features.clear();
  auto plain = gbm::serialize(*model, wo);
  ASSERT_TRUE(plain.ok());
  gbm::Info info;
  ASSERT_TRUE(gbm::read_bytes(plain->data(), plain->size(), &info).ok());
  EXPECT_EQ(info.gearbox_version, "99.1.0");
}

TEST(GbmFile, MissingIsaSimulated) {
  std::string onnx = tmp_path("gbm_isa.onnx");
  write(onnx, conv_model());
  std::string f = compile(onnx, OptimizerOptions{}, {"avx2"});
  const char* old = std::getenv("GEARBOX_SIMULATE_MISSING_ISA");
  std::string saved = old ? old : "";
  setenv("GEARBOX_SIMULATE_MISSING_ISA", "avx2", 1);
  auto m = gbm::read_bytes(f.data(), f.size());
  if (old) setenv("GEARBOX_SIMULATE_MISSING_ISA", saved.c_str(), 1);
  else unsetenv("GEARBOX_SIMULATE_MISSING_ISA");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::GBM_ISA_MISSING);
  EXPECT_NE(m.status().message().find("avx2"), std::string::npos);
  EXPECT_NE(m.status().message().find("--target generic"), std::string::npos);
  // A generic file (no required features) loads under the same simulation.
  setenv("GEARBOX_SIMULATE_MISSING_ISA", "avx2", 1);
  std::string gfile = valid_file();
  auto ok = gbm::read_bytes(gfile.data(), gfile.size());
  if (old) setenv("GEARBOX_SIMULATE_MISSING_ISA", saved.c_str(), 1);
  else unsetenv("GEARBOX_SIMULATE_MISSING_ISA");
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST(GbmFile, GarbageMetadataWithValidChecksumIsInvalid) {
  std::string f = valid_file();
  for (size_t i = gbm::kHeaderSize; i < gbm::kHeaderSize + 32; ++i) f[i] = static_cast<char>(0xEE);
  refresh_checksum(f);
  EXPECT_EQ(load_code(f), ErrorCode::GBM_INVALID);
}

// x[2,3] and c (bool): If(c) then x+x else x*x, both branches reading the outer x; then a
// Loop of n iterations whose body adds the outer x to its carried value and also emits it as
// a scan output. Subgraphs, outer-scope reads and branch-local names that repeat across
// sibling branches ("b") are what format version 2 stores.
std::string control_flow_model() {
  auto scalar_io = [](onnx::ValueInfoProto* vi, const std::string& name, int elem_type) {
    testing::add_tensor_io(vi, name, elem_type, {});
    vi->mutable_type()->mutable_tensor_type()->mutable_shape();  // rank 0, not unranked
  };
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("cf");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "3"});
  scalar_io(g->add_input(), "c", onnx::TensorProto::BOOL);
  scalar_io(g->add_input(), "n", onnx::TensorProto::INT64);
  testing::add_tensor_io(g->add_output(), "v", onnx::TensorProto::FLOAT, {"2", "3"});
  testing::add_tensor_io(g->add_output(), "scan", onnx::TensorProto::FLOAT, {"k", "2", "3"});
  auto branch = [&](onnx::GraphProto* b, const std::string& name, const std::string& op) {
    b->set_name(name);
    testing::add_tensor_io(b->add_output(), "b", onnx::TensorProto::FLOAT, {"2", "3"});
    add_node(b, op, {"x", "x"}, {"b"});
  };
  auto* iff = add_node(g, "If", {"c"}, {"r"});
  auto* then_a = iff->add_attribute();
  then_a->set_name("then_branch");
  then_a->set_type(onnx::AttributeProto::GRAPH);
  branch(then_a->mutable_g(), "then", "Add");
  auto* else_a = iff->add_attribute();
  else_a->set_name("else_branch");
  else_a->set_type(onnx::AttributeProto::GRAPH);
  branch(else_a->mutable_g(), "else", "Mul");
  auto* loop = add_node(g, "Loop", {"n", "", "r"}, {"v", "scan"});
  auto* body_a = loop->add_attribute();
  body_a->set_name("body");
  body_a->set_type(onnx::AttributeProto::GRAPH);
  auto* body = body_a->mutable_g();
  body->set_name("body");
  scalar_io(body->add_input(), "i", onnx::TensorProto::INT64);
  scalar_io(body->add_input(), "cond_in", onnx::TensorProto::BOOL);
  testing::add_tensor_io(body->add_input(), "acc", onnx::TensorProto::FLOAT, {"2", "3"});
  scalar_io(body->add_output(), "cond_out", onnx::TensorProto::BOOL);
  testing::add_tensor_io(body->add_output(), "acc_out", onnx::TensorProto::FLOAT, {"2", "3"});
  testing::add_tensor_io(body->add_output(), "emit", onnx::TensorProto::FLOAT, {"2", "3"});
  add_node(body, "Identity", {"cond_in"}, {"cond_out"});
  add_node(body, "Add", {"acc", "x"}, {"acc_out"});
  add_node(body, "Identity", {"acc_out"}, {"emit"});
  return testing::serialize(m);
}

TEST(GbmFile, SubgraphsRoundTripBitIdentically) {
  std::string onnx = tmp_path("gbm_cf.onnx"), gbmf = tmp_path("gbm_cf.gbm");
  write(onnx, control_flow_model());
  write(gbmf, compile(onnx, OptimizerOptions{}));
  auto a = Session::load(onnx);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = Session::load(gbmf);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const Graph& g = *(*b)->model().graph;
  size_t subgraphs = 0;
  for (const auto& n : g.nodes)
    for_each_subgraph(*n, [&](const Graph& sg) {
      ++subgraphs;
      EXPECT_EQ(sg.parent, &g);
      EXPECT_FALSE(sg.nodes.empty());
    });
  EXPECT_EQ(subgraphs, 3u);  // then, else, body
  Tensor x(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = 0.5f * static_cast<float>(i) - 1.25f;
  for (bool c : {true, false}) {
    std::map<std::string, Tensor> feeds{{"x", x}, {"c", Tensor::scalar<bool>(c)}, {"n", Tensor::scalar<int64_t>(3)}};
    auto ya = (*a)->run(feeds);
    auto yb = (*b)->run(feeds);
    ASSERT_TRUE(ya.ok()) << ya.status().to_string();
    ASSERT_TRUE(yb.ok()) << yb.status().to_string();
    ASSERT_EQ(ya->size(), 2u);
    ASSERT_EQ(yb->size(), 2u);
    // Against the definition: v = branch(x) + 3x, scan[k] = branch(x) + (k+1)x.
    for (int i = 0; i < 6; ++i) {
      float xi = x.data<float>()[i], r = c ? xi + xi : xi * xi;
      EXPECT_EQ((*yb)[0].data<float>()[i], ((r + xi) + xi) + xi) << "c=" << c << " i=" << i;
    }
    EXPECT_EQ((*yb)[1].dims(), (Dims{3, 2, 3}));
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_EQ((*ya)[k].dims(), (*yb)[k].dims());
      EXPECT_EQ(std::memcmp((*ya)[k].raw(), (*yb)[k].raw(), (*ya)[k].nbytes()), 0) << "output " << k;
    }
  }
}

TEST(GbmFile, RecordsEachNodesEngine) {
  auto m = import_onnx_file([] {
    std::string onnx = tmp_path("gbm_engine.onnx");
    write(onnx, conv_model());
    return onnx;
  }());
  ASSERT_TRUE(m.ok());
  for (auto& n : m->graph->nodes) n->engine = n->op_type == "Conv" ? "cpu.dnnl" : "cpu.ref";
  auto bytes = gbm::serialize(*m, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto back = gbm::read_bytes(bytes->data(), bytes->size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->graph->nodes.size(), m->graph->nodes.size());
  for (size_t i = 0; i < m->graph->nodes.size(); ++i)
    EXPECT_EQ(back->graph->nodes[i]->engine, m->graph->nodes[i]->engine) << m->graph->nodes[i]->name;
}

// A graph attribute that lost its graph cannot be stored: GBM_UNSUPPORTED at write time.
TEST(GbmFile, GraphAttributeWithoutAGraphIsRefusedAtCompile) {
  Model m;
  m.graph = std::make_shared<Graph>();
  Value* c = m.graph->add_value("c");
  c->type.dtype = DType::Bool;
  m.graph->inputs.push_back(c);
  Node* n = m.graph->add_node("If", "if0");
  n->inputs.push_back(c);
  Attribute a;
  a.type = AttrType::Graph;  // and no a.g
  n->attrs["then_branch"] = a;
  auto bytes = gbm::serialize(m, {});
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), ErrorCode::GBM_UNSUPPORTED);
}

// What gearbox compile --engine does, end to end: the overridden engine is stored, and a
// session loading the .gbm with the default engine list keeps it (cpu.ref is in the list and
// has the kernel) instead of placing the node on cpu.dnnl again.
TEST(GbmFile, LoadedModelKeepsItsCompiledEngines) {
  std::string onnx = tmp_path("gbm_engines.onnx"), gbmf = tmp_path("gbm_engines.gbm");
  write(onnx, conv_model());
  auto m = import_onnx_file(onnx);
  ASSERT_TRUE(m.ok());
  OptimizerOptions opts;
  opts.use_env = false;
  opts.disabled_passes = {"layout_nhwc"};
  ASSERT_TRUE(optimize(*m, opts).ok());
  auto ov = parse_engine_overrides({"com.gearbox.FusedConv=cpu.ref"});
  ASSERT_TRUE(ov.ok());
  auto placed = partition(*m, {"cpu.dnnl", "cpu.simd", "cpu.ref"}, *ov);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_TRUE(gbm::write_file(*m, gbmf, {}).ok());
  SessionOptions so;
  so.engine = "cpu.dnnl,cpu.simd,cpu.ref";
  auto s = Session::load(gbmf, so);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  size_t convs = 0;
  for (const auto& n : (*s)->model().graph->nodes)
    if (n->op_type == "FusedConv") {
      ++convs;
      EXPECT_EQ(n->engine, "cpu.ref");
    } else if (n->op_type == "Gemm" || n->op_type == "FusedGemm") {
      EXPECT_EQ(n->engine, "cpu.dnnl");  // not forced: the list's first engine with the kernel
    }
  EXPECT_EQ(convs, 1u);
  EXPECT_EQ((*s)->partition().reassigned, 0u);
}

// A subgraph node that reads a value of a sibling subgraph is out of scope: GBM_INVALID, not
// a dangling pointer at run time.
TEST(GbmFile, SubgraphReadingASiblingsValueIsInvalid) {
  std::string onnx = tmp_path("gbm_cf_scope.onnx");
  write(onnx, control_flow_model());
  auto m = import_onnx_file(onnx);
  ASSERT_TRUE(m.ok());
  Node* iff = nullptr;
  Node* loop = nullptr;
  for (auto& n : m->graph->nodes) (n->op_type == "If" ? iff : loop) = n.get();
  ASSERT_TRUE(iff && loop);
  // The loop body's Add reads the then-branch's output instead of the outer x.
  Value* then_out = iff->attrs.at("then_branch").g->outputs[0];
  Graph& body = *loop->attrs.at("body").g;
  for (auto& n : body.nodes)
    if (n->op_type == "Add") n->inputs[1] = then_out;
  auto bytes = gbm::serialize(*m, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(load_code(*bytes), ErrorCode::GBM_INVALID);
}

// The metadata section moved to an odd offset (64 + 1; sections, header and checksum otherwise
// valid): FlatBuffers verifies alignment relative to the section, so the file passed and was then
// read with misaligned loads (UBSan; found by fuzz/gbm_read). Now GBM_INVALID.
TEST(GbmFile, MisalignedMetadataSectionIsInvalid) {
  const std::string f = valid_file();
  uint64_t meta_offset, meta_size, blob_offset, blob_size;
  std::memcpy(&meta_offset, f.data() + 16, 8);
  std::memcpy(&meta_size, f.data() + 24, 8);
  std::memcpy(&blob_offset, f.data() + 32, 8);
  std::memcpy(&blob_size, f.data() + 40, 8);
  ASSERT_EQ(meta_offset, gbm::kHeaderSize);
  std::string moved = f.substr(0, gbm::kHeaderSize) + '\0' + f.substr(meta_offset, meta_size);
  const uint64_t new_meta = gbm::kHeaderSize + 1;
  moved.resize((moved.size() + gbm::kBlobAlignment - 1) / gbm::kBlobAlignment * gbm::kBlobAlignment, '\0');
  const uint64_t new_blob = moved.size();
  moved += f.substr(blob_offset, blob_size);
  std::memcpy(moved.data() + 16, &new_meta, 8);
  std::memcpy(moved.data() + 32, &new_blob, 8);
  refresh_checksum(moved);
  auto loaded = gbm::read_bytes(moved.data(), moved.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::GBM_INVALID) << loaded.status().to_string();
}

// A node with two attributes of one name (the If's else_branch renamed then_branch in the
// file, checksum repaired): the second would replace the first subgraph, whose values the reader
// had already recorded, and the final check then read freed values (found by fuzz/gbm_read).
// Now GBM_INVALID naming the attribute.
TEST(GbmFile, RepeatedAttributeNameIsInvalid) {
  std::string onnx = tmp_path("gbm_cf_dup_attr.onnx");
  write(onnx, control_flow_model());
  auto m = import_onnx_file(onnx);
  ASSERT_TRUE(m.ok());
  auto bytes = gbm::serialize(*m, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  std::string b = *bytes;
  const size_t at = b.find("else_branch");
  ASSERT_NE(at, std::string::npos);
  b.replace(at, 11, "then_branch");
  refresh_checksum(b);
  auto loaded = gbm::read_bytes(b.data(), b.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::GBM_INVALID);
  EXPECT_NE(loaded.status().message().find("two attributes named 'then_branch'"), std::string::npos)
      << loaded.status().to_string();
}

// The plugins a compiled model needs (name -> version) travel in the file; a list naming one
// plugin twice is GBM_INVALID. (tests/plugins checks the compile that records them and the
// PLUGIN_MISSING that names them.)
TEST(GbmFile, RecordsThePluginVersionsItNeeds) {
  std::string onnx = tmp_path("gbm_plugins.onnx");
  write(onnx, conv_model());
  auto m = import_onnx_file(onnx);
  ASSERT_TRUE(m.ok());
  m->plugin_versions = {{"alpha", "1.2.0"}, {"betaa", "0.9"}};
  auto bytes = gbm::serialize(*m, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto back = gbm::read_bytes(bytes->data(), bytes->size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->plugin_versions, m->plugin_versions);
  std::string b = *bytes;
  const size_t at = b.find("betaa");
  ASSERT_NE(at, std::string::npos);
  b.replace(at, 5, "alpha");
  refresh_checksum(b);
  auto twice = gbm::read_bytes(b.data(), b.size());
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), ErrorCode::GBM_INVALID) << twice.status().to_string();
  EXPECT_NE(twice.status().message().find("repeated plugin name 'alpha'"), std::string::npos)
      << twice.status().to_string();
}

// 4000 random mutations of valid files: each loads or fails with a .gbm code, never
// crashes. Half of them get a fixed-up checksum so that the FlatBuffers verification and the
// graph checks behind it are reached too.
// The mutations start from a plain graph and, half of the time, from one with subgraphs.
TEST(GbmFile, BoundedFuzzOfTheLoader) {
  std::string onnx = tmp_path("gbm_cf_fuzz.onnx");
  write(onnx, control_flow_model());
  const std::string files[2] = {valid_file(), compile(onnx, OptimizerOptions{})};
  std::mt19937 rng(12345);
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const std::string& f = files[iter % 4 < 2 ? 0 : 1];
    std::string g = f;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = (rng() % 4 == 0) ? rng() % gbm::kHeaderSize : rng() % g.size();
      g[pos] = static_cast<char>(rng() & 0xFF);
    }
    if (rng() % 8 == 0) g.resize(rng() % g.size());
    if (iter % 2 == 0 && g.size() >= gbm::kHeaderSize) refresh_checksum(g);
    auto m = gbm::read_bytes(g.data(), g.size());
    if (m.ok()) {
      ++ok;
      continue;
    }
    ++failed;
    int code = static_cast<int>(m.status().code());
    EXPECT_TRUE(code >= 6003 && code <= 6008) << "iteration " << iter << ": " << m.status().to_string();
  }
  // The fuzz reached both outcomes: some mutations (in unused bytes, with a fixed-up
  // checksum) still load, and the rest fail with a .gbm code.
  EXPECT_GT(ok, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace gearbox
