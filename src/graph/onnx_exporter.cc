// ONNX export on libonnx's protobuf classes (see onnx_exporter.h).
#include "graph/onnx_exporter.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <unordered_set>

#include "base/atomic_file.h"

namespace gearbox {
namespace {

// ONNX 1.12 (opset 17) writes IR version 8; a reader of opset 17 models accepts it.
constexpr int64_t kIrVersion = 8;

Status convert_tensor(const Tensor& t, const std::string& name, onnx::TensorProto* tp) {
  tp->set_name(name);
  // gearbox's DType values are ONNX's TensorProto data types (base/dtype.h).
  tp->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.dims()) tp->add_dims(d);
  if (t.dtype() == DType::String) {
    for (const std::string& s : t.strings()) tp->add_string_data(s);
    return Status::OK();
  }
  if (t.nbytes() != 0) tp->set_raw_data(t.raw(), t.nbytes());
  return Status::OK();
}

void convert_type(const ValueType& vt, onnx::TypeProto* tp) {
  switch (vt.kind) {
    case ValueType::Kind::Tensor: {
      auto* tt = tp->mutable_tensor_type();
      tt->set_elem_type(static_cast<int32_t>(vt.dtype));
      if (!vt.shape.ranked) return;
      auto* shape = tt->mutable_shape();
      for (const Dim& d : vt.shape.dims) {
        auto* dim = shape->add_dim();
        if (d.known()) dim->set_dim_value(d.value);
        else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
      }
      return;
    }
    case ValueType::Kind::Sequence:
      if (vt.elem) convert_type(*vt.elem, tp->mutable_sequence_type()->mutable_elem_type());
      return;
    case ValueType::Kind::Optional:
      if (vt.elem) convert_type(*vt.elem, tp->mutable_optional_type()->mutable_elem_type());
      return;
  }
}

void value_info(const Value& v, onnx::ValueInfoProto* vi) {
  vi->set_name(v.name);
  if (v.type.dtype != DType::Undefined || v.type.kind != ValueType::Kind::Tensor)
    convert_type(v.type, vi->mutable_type());
}

Status convert_attribute(const Node& n, const std::string& name, const Attribute& a, onnx::AttributeProto* ap) {
  using AP = onnx::AttributeProto;
  ap->set_name(name);
  switch (a.type) {
    case AttrType::Float:
      ap->set_type(AP::FLOAT);
      ap->set_f(a.f);
      break;
    case AttrType::Int:
      ap->set_type(AP::INT);
      ap->set_i(a.i);
      break;
    case AttrType::String:
      ap->set_type(AP::STRING);
      ap->set_s(a.s);
      break;
    case AttrType::Floats:
      ap->set_type(AP::FLOATS);
      for (float f : a.floats) ap->add_floats(f);
      break;
    case AttrType::Ints:
      ap->set_type(AP::INTS);
      for (int64_t i : a.ints) ap->add_ints(i);
      break;
    case AttrType::Strings:
      ap->set_type(AP::STRINGS);
      for (const std::string& s : a.strings) ap->add_strings(s);
      break;
    case AttrType::Tensor:
      ap->set_type(AP::TENSOR);
      GBX_RETURN_IF_ERROR(convert_tensor(a.t, "", ap->mutable_t()));
      break;
    case AttrType::Tensors:
      ap->set_type(AP::TENSORS);
      for (const Tensor& t : a.tensors) GBX_RETURN_IF_ERROR(convert_tensor(t, "", ap->add_tensors()));
      break;
    default:
      return make_error(ErrorCode::GBM_UNSUPPORTED, "ONNX export: node '", n.name, "' (", n.qualified_op(),
                        ") has attribute '", name, "' of a kind the exporter does not write (a subgraph)");
  }
  return Status::OK();
}

Status convert_graph(const Graph& g, onnx::GraphProto* gp) {
  gp->set_name(g.name.empty() ? "gearbox" : g.name);
  for (const Value* v : g.initializers)
    GBX_RETURN_IF_ERROR(convert_tensor(v->initializer, v->name, gp->add_initializer()));
  for (const Value* v : g.inputs) value_info(*v, gp->add_input());
  for (const Value* v : g.outputs) value_info(*v, gp->add_output());
  std::unordered_set<const Value*> declared(g.inputs.begin(), g.inputs.end());
  declared.insert(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n->name);
    np->set_op_type(n->op_type);
    if (!n->domain.empty()) np->set_domain(n->domain);
    for (const Value* v : n->inputs) np->add_input(v ? v->name : "");
    for (const Value* v : n->outputs) {
      np->add_output(v ? v->name : "");
      // Intermediate types: a reader then needs no shape inference to know them.
      if (v && !declared.count(v) && v->type.dtype != DType::Undefined) value_info(*v, gp->add_value_info());
    }
    for (const auto& [name, a] : n->attrs) GBX_RETURN_IF_ERROR(convert_attribute(*n, name, a, np->add_attribute()));
  }
  return Status::OK();
}

}  // namespace

Result<std::string> export_onnx_bytes(const Model& model) {
  if (!model.graph) return make_error(ErrorCode::INVALID_ARGUMENT, "ONNX export: the model has no graph");
  onnx::ModelProto mp;
  mp.set_ir_version(model.ir_version > 0 ? model.ir_version : kIrVersion);
  mp.set_producer_name(model.producer_name.empty() ? "gearbox" : model.producer_name);
  if (!model.producer_version.empty()) mp.set_producer_version(model.producer_version);
  for (const auto& [domain, version] : model.opsets) {
    auto* op = mp.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  GBX_RETURN_IF_ERROR(convert_graph(*model.graph, mp.mutable_graph()));
  std::string bytes;
  if (!mp.SerializeToString(&bytes))
    return make_error(ErrorCode::FILE_WRITE_FAILED,
                      "ONNX export: the model does not serialize (over protobuf's 2 GB "
                      "limit?)");
  return bytes;
}

Status export_onnx_file(const Model& model, const std::string& path) {
  GBX_ASSIGN_OR_RETURN(std::string bytes, export_onnx_bytes(model));
  return write_file_atomically(path, bytes);
}

}  // namespace gearbox
