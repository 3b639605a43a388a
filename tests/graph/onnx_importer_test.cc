// The ONNX importer: structure of the imported IR, topological order, initializers,
// external data confinement and the errors for malformed files.
#include "graph/onnx_importer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "graph/onnx_test_models.h"

namespace gearbox {
namespace {
namespace fs = std::filesystem;
using testing::add_relu_model;
using testing::serialize;

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::path(GEARBOX_TEST_TMP) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(OnnxImporter, ImportsGraphStructure) {
  auto r = import_onnx_bytes(serialize(add_relu_model()), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& g = *r->graph;
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.inputs[0]->name, "x");
  EXPECT_EQ(to_string(g.inputs[0]->type), "float32[batch,3]");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0]->op_type, "Add");
  EXPECT_EQ(g.nodes[1]->inputs[0], g.nodes[0]->outputs[0]);
  EXPECT_EQ(g.nodes[1]->opset, 13);
  EXPECT_EQ(r->opsets.at(""), 13);
}

TEST(OnnxImporter, SortsNodesTopologically) {
  onnx::ModelProto m = add_relu_model();
  // Swap the nodes: Relu first, reading Add's output.
  m.mutable_graph()->mutable_node()->SwapElements(0, 1);
  ImportOptions o;
  o.check_model = false;  // the checker rightly rejects unsorted graphs; the importer copes
  auto r = import_onnx_bytes(serialize(m), "", o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph->nodes[0]->op_type, "Add");
  EXPECT_EQ(r->graph->nodes[1]->op_type, "Relu");
}

TEST(OnnxImporter, DetectsCycles) {
  onnx::ModelProto m = add_relu_model();
  // Add reads Relu's output, Relu reads Add's: a cycle.
  m.mutable_graph()->mutable_node(0)->set_input(1, "z");
  ImportOptions o;
  o.check_model = false;
  auto r = import_onnx_bytes(serialize(m), "", o);
  EXPECT_EQ(r.status().code(), ErrorCode::GRAPH_CYCLE) << r.status().to_string();
}

TEST(OnnxImporter, ConvertsInitializers) {
  onnx::ModelProto m = add_relu_model();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("y");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(1);
  init->add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) init->add_float_data(v);
  m.mutable_graph()->mutable_input()->RemoveLast();
  auto r = import_onnx_bytes(serialize(m), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph->initializers.size(), 1u);
  EXPECT_EQ(r->graph->inputs.size(), 1u);
  EXPECT_FLOAT_EQ(r->graph->initializers[0]->initializer.data<float>()[2], 3.f);
}

// 0-element initializers stored in the typed fields (float_data, double_data, int64_data) and
// in raw_data: valid, imported as empty tensors. The copy of their (null) data was undefined
// behaviour that UBSan reports (memcpy from a null pointer, found by fuzz/onnx_import); `make
// test-asan` runs this under UBSan.
TEST(OnnxImporter, ImportsZeroElementInitializers) {
  onnx::ModelProto m = add_relu_model();
  const std::pair<const char*, int> kinds[] = {{"f32", onnx::TensorProto::FLOAT},
                                               {"f64", onnx::TensorProto::DOUBLE},
                                               {"i64", onnx::TensorProto::INT64},
                                               {"i32", onnx::TensorProto::INT32}};
  for (const auto& [name, type] : kinds) {
    auto* init = m.mutable_graph()->add_initializer();
    init->set_name(name);
    init->set_data_type(type);
    init->add_dims(0);
    init->add_dims(3);
  }
  auto* raw = m.mutable_graph()->add_initializer();
  raw->set_name("raw");
  raw->set_data_type(onnx::TensorProto::FLOAT);
  raw->add_dims(0);
  raw->set_raw_data("");
  auto r = import_onnx_bytes(serialize(m), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph->initializers.size(), 5u);
  for (const Value* v : r->graph->initializers) EXPECT_EQ(v->initializer.numel(), 0) << v->name;
}

// libonnx 1.12's Conv/pool shape inference crashes on a kernel with more spatial axes than the
// input (found by fuzz/onnx_import: a rank-2 input, a 4-D weight). The importer checks the
// declared ranks first: MODEL_INVALID naming the node, no crash. Each case on its own model.
TEST(OnnxImporter, ConvAndPoolRanksAreCheckedBeforeShapeInference) {
  auto conv_model = [](int input_rank, int weight_rank, std::vector<int64_t> pads, const char* op) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("g");
    auto* x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int d = 0; d < input_rank; ++d)
      x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
    auto* n = g->add_node();
    n->set_name("k");
    n->set_op_type(op);
    n->add_input("x");
    if (std::string(op) == "Conv") {
      n->add_input("w");
      auto* w = g->add_initializer();
      w->set_name("w");
      w->set_data_type(onnx::TensorProto::FLOAT);
      int64_t count = 1;
      for (int d = 0; d < weight_rank; ++d) w->add_dims(3), count *= 3;
      for (int64_t i = 0; i < count; ++i) w->add_float_data(0.5f);
    } else {
      auto* ks = n->add_attribute();
      ks->set_name("kernel_shape");
      ks->set_type(onnx::AttributeProto::INTS);
      for (int d = 0; d < weight_rank - 2; ++d) ks->add_ints(2);
    }
    if (!pads.empty()) {
      auto* a = n->add_attribute();
      a->set_name("pads");
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t p : pads) a->add_ints(p);
    }
    n->add_output("y");
    auto* y = g->add_output();
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int d = 0; d < input_rank; ++d)
      y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(d));
    return m;
  };
  struct Case {
    int input_rank, weight_rank;
    std::vector<int64_t> pads;
    const char* op;
    const char* says;
  };
  for (const Case& c : {Case{2, 4, {1, 1, 1, 1}, "Conv", "needs at least one spatial axis"},
                        Case{3, 4, {}, "Conv", "the weight 'w' is rank 4"},
                        Case{4, 4, {1, 1}, "Conv", "attribute pads has 2 values, not 4"},
                        Case{3, 4, {}, "MaxPool", "attribute kernel_shape has 2 values, not 1"}}) {
    auto r = import_onnx_bytes(serialize(conv_model(c.input_rank, c.weight_rank, c.pads, c.op)), "");
    ASSERT_FALSE(r.ok()) << c.op << " input rank " << c.input_rank;
    EXPECT_EQ(r.status().code(), ErrorCode::MODEL_INVALID) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().to_string();
  }
  // The control: consistent ranks import.
  auto ok = import_onnx_bytes(serialize(conv_model(4, 4, {1, 1, 1, 1}, "Conv")), "");
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST(OnnxImporter, RefusesInitializerWithWrongByteCount) {
  onnx::ModelProto m = add_relu_model();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("y");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(1000000);
  init->set_raw_data(std::string(8, '\0'));
  m.mutable_graph()->mutable_input()->RemoveLast();
  ImportOptions o;
  o.check_model = false;
  auto r = import_onnx_bytes(serialize(m), "", o);
  EXPECT_EQ(r.status().code(), ErrorCode::TENSOR_DATA_SIZE) << r.status().to_string();
}

TEST(OnnxImporter, LoadsExternalDataInsideTheModelFolder) {
  fs::path dir = temp_dir("extdata_ok");
  float vals[3] = {4.f, 5.f, 6.f};
  std::ofstream(dir / "weights.bin", std::ios::binary).write(reinterpret_cast<const char*>(vals), sizeof(vals));
  onnx::ModelProto m = add_relu_model();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("y");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(1);
  init->add_dims(3);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  m.mutable_graph()->mutable_input()->RemoveLast();
  std::ofstream(dir / "model.onnx", std::ios::binary) << serialize(m);
  auto r = import_onnx_file((dir / "model.onnx").string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ(r->graph->initializers[0]->initializer.data<float>()[1], 5.f);

  // The same location through a symlink that leaves the folder is refused.
  fs::path outside = temp_dir("extdata_outside");
  std::ofstream(outside / "secret.bin", std::ios::binary).write(reinterpret_cast<const char*>(vals), sizeof(vals));
  fs::remove(dir / "weights.bin");
  fs::create_symlink(outside / "secret.bin", dir / "weights.bin");
  auto bad = import_onnx_file((dir / "model.onnx").string(), ImportOptions{false, false});
  EXPECT_EQ(bad.status().code(), ErrorCode::EXTERNAL_DATA_INVALID) << bad.status().to_string();
}

// External data whose dims claim far more than the file holds (4 TiB of floats over a 12-byte
// file; found by fuzz/onnx_import with 45 GB): refused as EXTERNAL_DATA_INVALID before anything
// is allocated. The tensor used to be allocated first, so the import failed as OUT_OF_MEMORY (or,
// under ASan, aborted). Offsets whose sum with the length would overflow are refused too.
TEST(OnnxImporter, ExternalDataIsCheckedBeforeTheTensorIsAllocated) {
  fs::path dir = temp_dir("extdata_huge");
  float vals[3] = {4.f, 5.f, 6.f};
  std::ofstream(dir / "weights.bin", std::ios::binary).write(reinterpret_cast<const char*>(vals), sizeof(vals));
  for (const auto& [dims, offset] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{1 << 20, 1 << 20}, ""}, {{1, 3}, "9223372036854775800"}, {{1, 3}, "8"}}) {
    onnx::ModelProto m = add_relu_model();
    auto* init = m.mutable_graph()->add_initializer();
    init->set_name("y");
    init->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) init->add_dims(d);
    init->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = init->add_external_data();
    kv->set_key("location");
    kv->set_value("weights.bin");
    if (!offset.empty()) {
      kv = init->add_external_data();
      kv->set_key("offset");
      kv->set_value(offset);
    }
    m.mutable_graph()->mutable_input()->RemoveLast();
    std::ofstream(dir / "model.onnx", std::ios::binary | std::ios::trunc) << serialize(m);
    auto r = import_onnx_file((dir / "model.onnx").string(), ImportOptions{false, false});
    ASSERT_FALSE(r.ok()) << dims[0] << " offset " << offset;
    EXPECT_EQ(r.status().code(), ErrorCode::EXTERNAL_DATA_INVALID) << r.status().to_string();
  }
}

// Found by fuzz/onnx_import (inputs in fuzz/regressions/onnx_import): libonnx's pooling shape
// inference divides by the strides (strides [0, 2] raised SIGFPE), and a string tensor marked
// external was allocated by its dims (24.7 G strings) with no data to check them against. Both are
// MODEL_INVALID now, before shape inference and before any allocation.
TEST(OnnxImporter, ZeroStridesAndExternalStringsAreRefusedBeforeTheyCrash) {
  for (const char* attr : {"strides", "dilations", "kernel_shape"}) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto* g = m.mutable_graph();
    g->set_name("g");
    auto* x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 3, 6, 6})
      x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    auto* y = g->add_output();
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* n = g->add_node();
    n->set_name("pool");
    n->set_op_type("MaxPool");
    n->add_input("x");
    n->add_output("y");
    for (const char* name : {"kernel_shape", "strides", "dilations"}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(std::string(name) == attr ? 0 : 2);
      a->add_ints(2);
    }
    auto r = import_onnx_bytes(serialize(m), "");
    ASSERT_FALSE(r.ok()) << attr;
    EXPECT_EQ(r.status().code(), ErrorCode::MODEL_INVALID) << r.status().to_string();
    EXPECT_NE(r.status().message().find(attr), std::string::npos) << r.status().to_string();
  }
  onnx::ModelProto m = add_relu_model();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("y");
  init->set_data_type(onnx::TensorProto::STRING);
  init->add_dims(5888);
  init->add_dims(4194303);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  m.mutable_graph()->mutable_input()->RemoveLast();
  fs::path dir = temp_dir("extdata_string");  // a folder whose weights.bin exists, as the fuzzer's
  std::ofstream(dir / "weights.bin", std::ios::binary) << std::string(64, '?');
  auto r = import_onnx_bytes(serialize(m), dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::MODEL_INVALID) << r.status().to_string();
  EXPECT_NE(r.status().message().find("string"), std::string::npos) << r.status().to_string();
}

TEST(OnnxImporter, ErrorsForBadFiles) {
  EXPECT_EQ(import_onnx_file("/nonexistent/model.onnx").status().code(), ErrorCode::FILE_NOT_FOUND);
  EXPECT_EQ(import_onnx_bytes("", "").status().code(), ErrorCode::FILE_EMPTY);
  std::string good = serialize(add_relu_model());
  EXPECT_EQ(import_onnx_bytes(good.substr(0, good.size() / 2), "").status().code(), ErrorCode::MODEL_PARSE_FAILED);
  EXPECT_EQ(import_onnx_bytes(serialize(add_relu_model(99)), "").status().code(), ErrorCode::OPSET_UNSUPPORTED);
  EXPECT_EQ(import_onnx_bytes(serialize(add_relu_model(0)), "").status().code(), ErrorCode::OPSET_UNSUPPORTED);
  EXPECT_EQ(import_onnx_bytes(serialize(add_relu_model(22)), "").status().code(), ErrorCode::OPSET_UNSUPPORTED);
  // An op no ONNX schema knows is not a broken file: the import keeps it (in its own domain)
  // for the kernel registry, whose OP_UNSUPPORTED names the node (runtime/session_test.cc).
  onnx::ModelProto unknown = add_relu_model();
  unknown.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  auto r = import_onnx_bytes(serialize(unknown), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph->nodes[1]->op_type, "NoSuchOp");
  EXPECT_EQ(r->graph->nodes[1]->domain, "");
  EXPECT_EQ(r->graph->nodes[1]->opset, 13);
}

// y = ReduceMean(x, axes) at ai.onnx opset 18, which Debian's libonnx (opset <= 17) has no
// schema for: checked and shape-inferred against gearbox's opset-18 schema.
onnx::ModelProto reduce_mean18(bool axes_input, bool axes_attr, int extra_inputs = 0) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(18);
  auto* g = m.mutable_graph();
  g->set_name("reduce_mean18");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
  // The mean feeds an Identity, so its own shape comes from shape inference, not a declaration.
  testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"a", "b", "c"});
  auto* axes = g->add_initializer();
  axes->set_name("axes");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(1);
  auto* n = g->add_node();
  n->set_op_type("ReduceMean");
  n->set_name("mean");
  n->add_input("x");
  if (axes_input) n->add_input("axes");
  for (int i = 0; i < extra_inputs; ++i) n->add_input("axes");
  n->add_output("mean_out");
  auto* id = g->add_node();
  id->set_op_type("Identity");
  id->set_name("id");
  id->add_input("mean_out");
  id->add_output("y");
  if (axes_attr) {
    auto* a = n->add_attribute();
    a->set_name("axes");
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(1);
  }
  return m;
}

TEST(OnnxImporter, AcceptsOpset18WithItsOwnSchemas) {
  auto r = import_onnx_bytes(serialize(reduce_mean18(true, false)), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Node& n = *r->graph->nodes[0];
  EXPECT_EQ(n.domain, "");  // the checking view is undone
  EXPECT_EQ(n.opset, 18);
  EXPECT_EQ(r->opsets.size(), 1u);  // no shadow domain left behind
  // Shape inference ran on the opset-18 form: ReduceSum-13's rule with the axes initializer.
  EXPECT_EQ(to_string(n.outputs[0]->type.shape), "[2,1,4]");
  // The opset-17 form (axes attribute) is not opset-18 ReduceMean, and neither is a third input.
  auto attr = import_onnx_bytes(serialize(reduce_mean18(false, true)), "");
  EXPECT_EQ(attr.status().code(), ErrorCode::MODEL_INVALID) << attr.status().to_string();
  EXPECT_NE(attr.status().message().find("axes"), std::string::npos) << attr.status().to_string();
  auto extra = import_onnx_bytes(serialize(reduce_mean18(true, false, 1)), "");
  EXPECT_EQ(extra.status().code(), ErrorCode::MODEL_INVALID) << extra.status().to_string();
}

// x -> Cast(saturate) -> QuantizeLinear(output_dtype = int8, no zero point) -> Identity -> y at
// ai.onnx `opset`: attributes that appeared at opsets 19 and 21.
onnx::ModelProto cast_quantize(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("cast_quantize");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "3"});
  testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::INT8, {"2", "3"});
  auto* s = g->add_initializer();
  s->set_name("s");
  s->set_data_type(onnx::TensorProto::FLOAT);
  s->add_float_data(0.5f);
  auto attr_int = [](onnx::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto* cast = g->add_node();
  cast->set_op_type("Cast");
  cast->set_name("cast");
  cast->add_input("x");
  cast->add_output("c");
  attr_int(cast, "to", onnx::TensorProto::FLOAT);
  attr_int(cast, "saturate", 1);
  auto* q = g->add_node();
  q->set_op_type("QuantizeLinear");
  q->set_name("q");
  q->add_input("c");
  q->add_input("s");
  q->add_output("q_out");
  attr_int(q, "output_dtype", onnx::TensorProto::INT8);
  auto* id = g->add_node();
  id->set_op_type("Identity");
  id->set_name("id");
  id->add_input("q_out");
  id->add_output("y");
  return m;
}

TEST(OnnxImporter, AcceptsOpsets19To21WithTheirNewAttributes) {
  auto r = import_onnx_bytes(serialize(cast_quantize(21)), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->opsets.size(), 1u);  // no shadow domain left behind
  // QuantizeLinear-21's output type came from output_dtype, not the uint8 default.
  EXPECT_EQ(r->graph->nodes[1]->outputs[0]->type.dtype, DType::I8);
  // Neither attribute exists at opset 18: libonnx's checker names the stray one.
  auto old = import_onnx_bytes(serialize(cast_quantize(18)), "");
  EXPECT_EQ(old.status().code(), ErrorCode::MODEL_INVALID) << old.status().to_string();
}

// A bounded fuzz: every truncation and single-byte corruption of a valid model must end in
// an OK import or a catalogue error, never a crash (ASan/UBSan builds check memory too).
TEST(OnnxImporter, SurvivesTruncationAndByteFlips) {
  std::string good = serialize(add_relu_model());
  for (size_t n = 0; n < good.size(); ++n) (void)import_onnx_bytes(good.substr(0, n), "").ok();
  for (size_t i = 0; i < good.size(); ++i)
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      auto r = import_onnx_bytes(bad, "");
      if (!r.ok()) EXPECT_NE(r.status().code(), ErrorCode::INTERNAL);
    }
}

}  // namespace
}  // namespace gearbox
