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

inline std::string serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

}  // namespace gearbox::testing
