// Tiny ONNX models built in code with onnx's protobuf classes, for importer and session
// tests: no files from the outside needed.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace gearbox::testing {

inline void add_tensor_io(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
                          const std::vector<std::string>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  for (const auto& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

// z = Relu(x + y) with x, y float [batch, 3].
inline onnx::ModelProto add_relu_model(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("add_relu");
  add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "3"});
  add_tensor_io(g->add_input(), "y", onnx::TensorProto::FLOAT, {"batch", "3"});
  add_tensor_io(g->add_output(), "z", onnx::TensorProto::FLOAT, {"batch", "3"});
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("x");
  add->add_input("y");
  add->add_output("s");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("s");
  relu->add_output("z");
  return m;
}

inline void add_scalar_io(onnx::ValueInfoProto* vi, const std::string& name, int elem_type) {
  add_tensor_io(vi, name, elem_type, {});
  vi->mutable_type()->mutable_tensor_type()->mutable_shape();
}

// x_final = Loop M times: x = tanh(x * k + 1), k = 0.5 an outer-scope initializer.
inline onnx::ModelProto tanh_loop_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("tanh_loop");
  add_scalar_io(g->add_input(), "M", onnx::TensorProto::INT64);
  add_tensor_io(g->add_input(), "x0", onnx::TensorProto::FLOAT, {"n", "3"});
  add_tensor_io(g->add_output(), "x_final", onnx::TensorProto::FLOAT, {"n", "3"});
  auto* k = g->add_initializer();
  k->set_name("k");
  k->set_data_type(onnx::TensorProto::FLOAT);
  k->add_float_data(0.5f);
  auto* loop = g->add_node();
  loop->set_op_type("Loop");
  loop->set_name("loop");
  loop->add_input("M");
  loop->add_input("");
  loop->add_input("x0");
  loop->add_output("x_final");
  auto* attr = loop->add_attribute();
  attr->set_name("body");
  attr->set_type(onnx::AttributeProto::GRAPH);
  auto* body = attr->mutable_g();
  body->set_name("body");
  add_scalar_io(body->add_input(), "i", onnx::TensorProto::INT64);
  add_scalar_io(body->add_input(), "cond", onnx::TensorProto::BOOL);
  add_tensor_io(body->add_input(), "x", onnx::TensorProto::FLOAT, {"n", "3"});
  add_scalar_io(body->add_output(), "cond_out", onnx::TensorProto::BOOL);
  add_tensor_io(body->add_output(), "y", onnx::TensorProto::FLOAT, {"n", "3"});
  auto* one = body->add_initializer();
  one->set_name("one");
  one->set_data_type(onnx::TensorProto::FLOAT);
  one->add_float_data(1.0f);
  auto add_node = [&](const char* op, std::vector<std::string> ins, const char* out) {
    auto* n = body->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& i : ins) n->add_input(i);
    n->add_output(out);
  };
  add_node("Identity", {"cond"}, "cond_out");
  add_node("Mul", {"x", "k"}, "a");
  add_node("Add", {"a", "one"}, "b");
  add_node("Tanh", {"b"}, "y");
  return m;
}

inline std::string serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

}  // namespace gearbox::testing
