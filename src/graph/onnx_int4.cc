// 4-bit integers widened to 8 bits at import: see onnx_int4.h.
#include "graph/onnx_int4.h"

#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace gearbox {
namespace {

bool is_four_bit(int32_t t) { return t == kOnnxInt4 || t == kOnnxUint4; }

int32_t widened(int32_t t) { return t == kOnnxInt4 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8; }

const char* four_bit_name(int32_t t) { return t == kOnnxInt4 ? "int4" : "uint4"; }

// Unpacks a 4-bit tensor (two elements per byte, the lower index in the lower nibble) into one
// sign- or zero-extended byte per element. The stored size is checked against the dims before
// anything is allocated, as the importer does for every tensor.
Status widen_tensor(onnx::TensorProto& tp, const ExternalBytesReader& read_external) {
  const int32_t type = tp.data_type();
  int64_t n = 1;
  for (int64_t d : tp.dims()) {
    if (d < 0) return make_error(ErrorCode::MODEL_INVALID, "tensor '", tp.name(), "' has a negative dim ", d);
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has dims whose size overflows");
    n *= d;
  }
  const uint64_t packed = (static_cast<uint64_t>(n) + 1) / 2;
  std::string bytes;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    GBX_ASSIGN_OR_RETURN(bytes, read_external(tp, packed));
  } else if (tp.has_raw_data()) {
    if (tp.raw_data().size() != packed)
      return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has ", n, " ", four_bit_name(type),
                        " elements (", packed, " bytes, two per byte) but ", tp.raw_data().size(),
                        " bytes of raw data");
    bytes = std::move(*tp.mutable_raw_data());
  } else {
    // int32_data holds one packed byte (two elements) per entry, as onnx's helper writes it.
    if (static_cast<uint64_t>(tp.int32_data_size()) != packed)
      return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has ", n, " ", four_bit_name(type),
                        " elements (", packed, " packed bytes) but stores ", tp.int32_data_size(),
                        " int32_data values");
    bytes.resize(packed);
    for (uint64_t i = 0; i < packed; ++i) {
      const int32_t v = tp.int32_data(static_cast<int>(i));
      if (v < 0 || v > 0xFF)
        return make_error(ErrorCode::MODEL_INVALID, "tensor '", tp.name(), "': int32_data value ", v,
                          " is not a byte of two packed 4-bit elements");
      bytes[i] = static_cast<char>(v);
    }
  }
  std::string out(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) {
    const int nibble = (static_cast<uint8_t>(bytes[static_cast<size_t>(i / 2)]) >> (4 * (i % 2))) & 0xF;
    out[static_cast<size_t>(i)] = static_cast<char>(type == kOnnxInt4 && nibble >= 8 ? nibble - 16 : nibble);
  }
  tp.clear_int32_data();
  tp.clear_external_data();
  tp.set_data_location(onnx::TensorProto::DEFAULT);
  tp.set_raw_data(std::move(out));
  tp.set_data_type(widened(type));
  return Status::OK();
}

// Widens the 4-bit element types inside a value type (tensors, and sequences, optionals and
// maps of them); returns how many it changed.
int widen_type(onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType:
      if (!is_four_bit(t.tensor_type().elem_type())) return 0;
      t.mutable_tensor_type()->set_elem_type(widened(t.tensor_type().elem_type()));
      return 1;
    case onnx::TypeProto::kSequenceType:
      return widen_type(*t.mutable_sequence_type()->mutable_elem_type());
    case onnx::TypeProto::kOptionalType:
      return widen_type(*t.mutable_optional_type()->mutable_elem_type());
    case onnx::TypeProto::kMapType:
      return widen_type(*t.mutable_map_type()->mutable_value_type());
    default:
      return 0;
  }
}

// The 4-bit type of a value, when its declaration says it is one.
int32_t declared_four_bit(const onnx::TypeProto& t) {
  return t.has_tensor_type() && is_four_bit(t.tensor_type().elem_type()) ? t.tensor_type().elem_type() : 0;
}

bool is_onnx_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

class Widener {
 public:
  Widener(const ExternalBytesReader& read_external, int64_t onnx_opset)
      : read_external_(read_external), onnx_opset_(onnx_opset) {}

  // four_bit: the 4-bit values visible from an enclosing graph (name -> INT4 or UINT4).
  Status widen_graph(onnx::GraphProto& g, std::map<std::string, int32_t> four_bit, bool main_graph) {
    for (auto* io : {g.mutable_input(), g.mutable_output()})
      for (auto& v : *io) {
        const int32_t t = declared_four_bit(v.type());
        if (t == 0) continue;
        if (main_graph)
          return make_error(ErrorCode::DTYPE_UNSUPPORTED, "graph ", io == g.mutable_input() ? "input" : "output", " '",
                            v.name(), "' is ", four_bit_name(t),
                            "; gearbox reads 4-bit weights (widened to 8 bits at import) but takes and returns "
                            "whole-byte tensors only: declare it int8/uint8, or dequantize inside the model");
        four_bit[v.name()] = t;
      }
    for (auto& v : *g.mutable_value_info())
      if (int32_t t = declared_four_bit(v.type())) four_bit[v.name()] = t;
    for (auto& init : *g.mutable_initializer())
      if (is_four_bit(init.data_type())) four_bit[init.name()] = init.data_type();
    for (auto& sparse : *g.mutable_sparse_initializer())
      if (is_four_bit(sparse.values().data_type())) four_bit[sparse.values().name()] = sparse.values().data_type();
    for (const auto& n : g.node())
      if ((n.op_type() == "Constant" || n.op_type() == "ConstantOfShape") && is_onnx_domain(n) && n.output_size() == 1)
        for (const auto& a : n.attribute())
          if (a.name() == "value" && is_four_bit(a.t().data_type())) four_bit[n.output(0)] = a.t().data_type();

    for (auto* io : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
      for (auto& v : *io) changed_ += widen_type(*v.mutable_type());
    for (auto& init : *g.mutable_initializer()) GBX_RETURN_IF_ERROR(widen(init));
    for (auto& sparse : *g.mutable_sparse_initializer()) GBX_RETURN_IF_ERROR(widen(*sparse.mutable_values()));

    std::vector<onnx::NodeProto> saturations;  // a Clip after each 4-bit QuantizeLinear, by node index
    std::vector<int> after;
    for (int i = 0; i < g.node_size(); ++i) {
      onnx::NodeProto& n = *g.mutable_node(i);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_t()) GBX_RETURN_IF_ERROR(widen(*a.mutable_t()));
        for (auto& t : *a.mutable_tensors()) GBX_RETURN_IF_ERROR(widen(t));
        if (a.has_sparse_tensor()) GBX_RETURN_IF_ERROR(widen(*a.mutable_sparse_tensor()->mutable_values()));
        if (a.has_g()) GBX_RETURN_IF_ERROR(widen_graph(*a.mutable_g(), four_bit, false));
        for (auto& sg : *a.mutable_graphs()) GBX_RETURN_IF_ERROR(widen_graph(sg, four_bit, false));
      }
      if (!is_onnx_domain(n)) continue;
      GBX_RETURN_IF_ERROR(refuse_four_bit_cast(n, four_bit));
      if (n.op_type() != "QuantizeLinear" || n.output_size() < 1) continue;
      GBX_ASSIGN_OR_RETURN(int32_t out_type, quantized_four_bit(n, four_bit));
      if (out_type == 0) continue;
      saturations.push_back(saturate(g, n, out_type));
      after.push_back(i);
      four_bit[n.output(0)] = out_type;
    }
    if (saturations.empty()) return Status::OK();
    // Each Clip goes right after its QuantizeLinear, keeping the node list topologically sorted.
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    nodes.Swap(g.mutable_node());
    size_t next = 0;
    for (int i = 0; i < nodes.size(); ++i) {
      *g.add_node() = std::move(nodes[i]);
      if (next < after.size() && after[next] == i) *g.add_node() = std::move(saturations[next++]);
    }
    return Status::OK();
  }

  int changed() const { return changed_; }

 private:
  Status widen(onnx::TensorProto& tp) {
    if (!is_four_bit(tp.data_type())) return Status::OK();
    GBX_RETURN_IF_ERROR(widen_tensor(tp, read_external_));
    ++changed_;
    return Status::OK();
  }

  static std::string node_label(const onnx::NodeProto& n) {
    return "node '" + (n.name().empty() ? n.output_size() > 0 ? n.output(0) : std::string() : n.name()) + "' (" +
           n.op_type() + ")";
  }

  // Cast and CastLike to a 4-bit type: ONNX's conversion wraps or saturates by source type,
  // which gearbox has no kernel for.
  static Status refuse_four_bit_cast(const onnx::NodeProto& n, const std::map<std::string, int32_t>& four_bit) {
    int32_t target = 0;
    if (n.op_type() == "Cast")
      for (const auto& a : n.attribute())
        if (a.name() == "to" && is_four_bit(static_cast<int32_t>(a.i()))) target = static_cast<int32_t>(a.i());
    if (n.op_type() == "CastLike" && n.input_size() > 1)
      if (auto it = four_bit.find(n.input(1)); it != four_bit.end()) target = it->second;
    if (target == 0) return Status::OK();
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, node_label(n), " casts to ", four_bit_name(target),
                      "; gearbox has no 4-bit Cast: quantize with QuantizeLinear (4-bit zero point) instead");
  }

  // The 4-bit type a QuantizeLinear produces (its zero point's type, else output_dtype), or 0.
  Result<int32_t> quantized_four_bit(onnx::NodeProto& n, const std::map<std::string, int32_t>& four_bit) const {
    int32_t type = 0;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      if (auto it = four_bit.find(n.input(2)); it != four_bit.end()) type = it->second;
    }
    for (auto& a : *n.mutable_attribute())
      if (a.name() == "output_dtype" && is_four_bit(static_cast<int32_t>(a.i()))) {
        type = static_cast<int32_t>(a.i());
        a.set_i(widened(type));
      }
    if (type != 0 && onnx_opset_ < 11)
      return make_error(ErrorCode::DTYPE_UNSUPPORTED, node_label(n), " quantizes to ", four_bit_name(type),
                        " at ai.onnx opset ", onnx_opset_, "; 4-bit QuantizeLinear is opset 21");
    return type;
  }

  // Renames the QuantizeLinear's output and returns the Clip that saturates it to the 4-bit range
  // under the old name, with its bounds as new initializers of g.
  onnx::NodeProto saturate(onnx::GraphProto& g, onnx::NodeProto& q, int32_t type) {
    const std::string y = q.output(0);
    const std::string q8 = fresh(g, y + "__int8");
    const std::string lo = fresh(g, y + "__int4_min"), hi = fresh(g, y + "__int4_max");
    q.set_output(0, q8);
    for (const auto& [name, value] :
         {std::pair{lo, type == kOnnxInt4 ? -8 : 0}, std::pair{hi, type == kOnnxInt4 ? 7 : 15}}) {
      auto* bound = g.add_initializer();
      bound->set_name(name);
      bound->set_data_type(widened(type));
      bound->set_raw_data(std::string(1, static_cast<char>(value)));
    }
    onnx::NodeProto clip;
    clip.set_op_type("Clip");
    clip.set_name((q.name().empty() ? y : q.name()) + "__int4_saturation");
    clip.add_input(q8);
    clip.add_input(lo);
    clip.add_input(hi);
    clip.add_output(y);
    ++changed_;
    return clip;
  }

  // A value name not yet used in g (names only need to be unique where they are visible).
  static std::string fresh(const onnx::GraphProto& g, std::string name) {
    std::set<std::string> used;
    for (const auto& v : g.initializer()) used.insert(v.name());
    for (const auto& v : g.input()) used.insert(v.name());
    for (const auto& n : g.node())
      for (const auto& o : n.output()) used.insert(o);
    while (used.count(name)) name += "_";
    return name;
  }

  const ExternalBytesReader& read_external_;
  int64_t onnx_opset_;
  int changed_ = 0;
};

}  // namespace

Result<int> widen_int4(onnx::ModelProto& model, const ExternalBytesReader& read_external) {
  int64_t onnx_opset = 1;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") onnx_opset = op.version();
  Widener w(read_external, onnx_opset);
  GBX_RETURN_IF_ERROR(w.widen_graph(*model.mutable_graph(), {}, true));
  return w.changed();
}

}  // namespace gearbox
