// 4-bit integers widened at import (graph/onnx_int4.h): the unpacking against ONNX's packing
// rule (two elements per byte, the lower index in the lower nibble, sign in bit 3), the
// saturating Clip after a 4-bit QuantizeLinear, and the refusals. The numbers of whole models
// are judged against ONNX Runtime by the oracle suite (its op21_int4_* / op21_uint4_* cases).
#include "graph/onnx_int4.h"

#include <gtest/gtest.h>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"

namespace gearbox {
namespace {

using testing::add_tensor_io;

// y = a + DequantizeLinear(w, 1.0) with w a 4-bit initializer [3] of the given packed bytes.
onnx::ModelProto dequantize_model(int32_t type, const std::string& packed, bool as_int32_data = false,
                                  int64_t elements = 3) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(21);
  auto* g = m.mutable_graph();
  g->set_name("g");
  add_tensor_io(g->add_input(), "a", onnx::TensorProto::FLOAT, {std::to_string(elements)});
  add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {std::to_string(elements)});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(type);
  w->add_dims(elements);
  if (as_int32_data)
    for (char b : packed) w->add_int32_data(static_cast<uint8_t>(b));
  else w->set_raw_data(packed);
  auto* s = g->add_initializer();
  s->set_name("s");
  s->set_data_type(onnx::TensorProto::FLOAT);
  s->add_float_data(1.0f);
  auto* dq = g->add_node();
  dq->set_op_type("DequantizeLinear");
  dq->set_name("dq");
  dq->add_input("w");
  dq->add_input("s");
  dq->add_output("wf");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("a");
  add->add_input("wf");
  add->add_output("y");
  return m;
}

template <typename T>
std::vector<int> initializer_values(const Graph& g, const std::string& name) {
  for (const Value* v : g.initializers)
    if (v->name == name) {
      const T* p = v->initializer.data<T>();
      return std::vector<int>(p, p + v->initializer.numel());
    }
  ADD_FAILURE() << "no initializer " << name;
  return {};
}

// Bytes 0x8F 0x07: elements 0xF, 0x8, 0x7 (the last byte's upper nibble is padding).
TEST(Int4Import, SignedNibblesAreSignExtendedLowerIndexFirst) {
  for (bool as_int32_data : {false, true}) {
    auto r = import_onnx_bytes(dequantize_model(kOnnxInt4, "\x8F\x07", as_int32_data).SerializeAsString(), "");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Value* w = r->graph->find_value("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->initializer.dtype(), DType::I8);
    EXPECT_EQ(initializer_values<int8_t>(*r->graph, "w"), (std::vector<int>{-1, -8, 7})) << as_int32_data;
  }
}

TEST(Int4Import, UnsignedNibblesAreZeroExtended) {
  auto r = import_onnx_bytes(dequantize_model(kOnnxUint4, "\x8F\x07").SerializeAsString(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph->find_value("w")->initializer.dtype(), DType::U8);
  EXPECT_EQ(initializer_values<uint8_t>(*r->graph, "w"), (std::vector<int>{15, 8, 7}));
}

TEST(Int4Import, StoredSizeIsCheckedBeforeAllocating) {
  // 3 elements need 2 packed bytes.
  auto r = import_onnx_bytes(dequantize_model(kOnnxInt4, "\x8F").SerializeAsString(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::TENSOR_DATA_SIZE) << r.status().to_string();
  // Dims claiming 10^12 elements over two bytes: refused, not allocated.
  r = import_onnx_bytes(dequantize_model(kOnnxInt4, "\x8F\x07", false, 1000000000000).SerializeAsString(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::TENSOR_DATA_SIZE) << r.status().to_string();
  // An int32_data entry that is not a byte.
  auto m = dequantize_model(kOnnxInt4, "\x8F\x07", true);
  m.mutable_graph()->mutable_initializer(0)->set_int32_data(1, 300);
  r = import_onnx_bytes(m.SerializeAsString(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::MODEL_INVALID) << r.status().to_string();
}

TEST(Int4Import, QuantizeLinearToFourBitsIsFollowedByASaturatingClip) {
  for (int32_t type : {kOnnxInt4, kOnnxUint4}) {
    auto m = dequantize_model(type, "\x8F\x07");
    auto* g = m.mutable_graph();
    // q = QuantizeLinear(a, s, z) with a 4-bit zero point; dq reads q instead of w.
    auto* z = g->add_initializer();
    z->set_name("z");
    z->set_data_type(type);
    z->set_raw_data(std::string(1, '\x01'));
    auto* q = g->add_node();
    q->set_op_type("QuantizeLinear");
    q->set_name("q");
    q->add_input("a");
    q->add_input("s");
    q->add_input("z");
    q->add_output("qa");
    g->mutable_node()->SwapElements(0, 2);  // q, add, dq -> keep q first
    g->mutable_node()->SwapElements(1, 2);  // q, dq, add
    g->mutable_node(1)->set_input(0, "qa");
    g->mutable_node(1)->add_input("z");
    auto r = import_onnx_bytes(m.SerializeAsString(), "");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Value* qa = r->graph->find_value("qa");
    ASSERT_NE(qa, nullptr);
    ASSERT_NE(qa->producer, nullptr);
    EXPECT_EQ(qa->producer->op_type, "Clip");
    const Node& clip = *qa->producer;
    ASSERT_EQ(clip.inputs.size(), 3u);
    EXPECT_EQ(clip.inputs[0]->producer->op_type, "QuantizeLinear");
    if (type == kOnnxInt4) {
      EXPECT_EQ(initializer_values<int8_t>(*r->graph, clip.inputs[1]->name), (std::vector<int>{-8}));
      EXPECT_EQ(initializer_values<int8_t>(*r->graph, clip.inputs[2]->name), (std::vector<int>{7}));
    } else {
      EXPECT_EQ(initializer_values<uint8_t>(*r->graph, clip.inputs[1]->name), (std::vector<int>{0}));
      EXPECT_EQ(initializer_values<uint8_t>(*r->graph, clip.inputs[2]->name), (std::vector<int>{15}));
    }
  }
}

TEST(Int4Import, FourBitGraphInputsOutputsAndCastsAreRefusedByName) {
  auto m = dequantize_model(kOnnxInt4, "\x8F\x07");
  add_tensor_io(m.mutable_graph()->add_input(), "packed_in", kOnnxInt4, {"4"});
  auto r = import_onnx_bytes(m.SerializeAsString(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_NE(r.status().message().find("packed_in"), std::string::npos) << r.status().to_string();

  m = dequantize_model(kOnnxInt4, "\x8F\x07");
  auto* cast = m.mutable_graph()->add_node();
  cast->set_op_type("Cast");
  cast->set_name("to_int4");
  cast->add_input("a");
  cast->add_output("c");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(kOnnxInt4);
  r = import_onnx_bytes(m.SerializeAsString(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_NE(r.status().message().find("to_int4"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace gearbox
