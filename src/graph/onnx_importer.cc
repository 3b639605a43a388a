// ONNX import on libonnx's protobuf classes. Everything read from the file is validated
// before use: tensor sizes against their dims, external-data locations against the model's
// folder, names against the values defined so far.
#include "graph/onnx_importer.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "base/logging.h"
#include "base/strings.h"
#include "graph/contrib_ops.h"
#include "graph/legacy_opsets.h"
#include "graph/onnx_int4.h"
#include "graph/onnx_nesting.h"
#include "graph/onnx_newer_opsets.h"
#include "kernels/kernel.h"

namespace gearbox {

static_assert(kMaxOpset == kNewestOnnxOpset, "the importer accepts the opsets the kernel registry serves");

namespace fs = std::filesystem;
namespace {

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error(ErrorCode::FILE_NOT_FOUND, "'", path, "' does not exist");
  if (fs::is_directory(path, ec))
    return make_error(ErrorCode::FILE_NOT_FOUND, "'", path, "' is a directory, not a model file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return make_error(ErrorCode::FILE_NOT_FOUND, "cannot open '", path, "' for reading");
  // One read into a buffer of the right size: models are hundreds of MB.
  const std::streamoff size = in.tellg();
  if (size <= 0) return make_error(ErrorCode::FILE_EMPTY, "'", path, "' is empty (0 bytes)");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  if (!in) return make_error(ErrorCode::FILE_NOT_FOUND, "reading '", path, "' failed");
  return bytes;
}

// Resolves an external-data location inside base_dir; refuses anything that leaves it.
Result<std::string> resolve_external(const std::string& base_dir, const std::string& location,
                                     const std::string& tensor) {
  if (base_dir.empty())
    return make_error(ErrorCode::EXTERNAL_DATA_INVALID, "tensor '", tensor,
                      "' uses external data but the model was not loaded from a file");
  fs::path loc(location);
  if (location.empty() || loc.is_absolute())
    return make_error(ErrorCode::EXTERNAL_DATA_INVALID, "tensor '", tensor, "': external data location '", location,
                      "' must be a relative path inside the model's folder");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  fs::path full = fs::weakly_canonical(base / loc, ec);
  auto rel = full.lexically_relative(base);
  if (ec || rel.empty() || *rel.begin() == "..")
    return make_error(ErrorCode::EXTERNAL_DATA_INVALID, "tensor '", tensor, "': external data location '", location,
                      "' resolves outside the model's folder ", base.string(), "; refused");
  return full.string();
}

// Where a tensor's external data lies: checked (location inside the model's folder, offset and
// length inside the file and equal to the tensor's bytes) before the tensor is allocated, so a
// hostile model cannot make gearbox allocate what its dims claim and then fail.
struct ExternalRange {
  std::string file;
  uint64_t offset = 0;
};

Result<ExternalRange> locate_external(const onnx::TensorProto& tp, const std::string& base_dir, uint64_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length") length = std::atoll(kv.value().c_str());
  }
  GBX_ASSIGN_OR_RETURN(std::string file, resolve_external(base_dir, location, tp.name()));
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return make_error(ErrorCode::EXTERNAL_DATA_INVALID, "tensor '", tp.name(), "': cannot read '", file, "'");
  if (length < 0) length = static_cast<int64_t>(std::min<uint64_t>(expected, INT64_MAX));
  if (offset < 0 || static_cast<uint64_t>(length) != expected || static_cast<uint64_t>(offset) > size ||
      expected > size - static_cast<uint64_t>(offset))
    return make_error(ErrorCode::EXTERNAL_DATA_INVALID, "tensor '", tp.name(), "': offset ", offset, " + length ",
                      length, " does not fit '", file, "' (", size, " bytes) or the tensor's ", expected, " bytes");
  return ExternalRange{std::move(file), static_cast<uint64_t>(offset)};
}

Status read_external(const onnx::TensorProto& tp, const ExternalRange& where, char* dst, size_t bytes) {
  std::ifstream in(where.file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(where.offset));
  if (bytes != 0) in.read(dst, static_cast<std::streamsize>(bytes));
  if (!in)
    return make_error(ErrorCode::EXTERNAL_DATA_INVALID, "tensor '", tp.name(), "': short read from '", where.file, "'");
  return Status::OK();
}

template <typename Field>
Status check_count(const onnx::TensorProto& tp, const Field& f, int64_t n) {
  if (static_cast<int64_t>(f.size()) != n)
    return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has ", f.size(), " values for ", n,
                      " elements");
  return Status::OK();
}

// The element count and byte size the dims give must match the data the TensorProto stores
// inline (raw_data bytes, or the values of its typed fields; ONNX stores each element as one
// value, 16-bit and 8-bit types in int32_data). External data is checked by locate_external.
Status check_stored_size(const onnx::TensorProto& tp, DType dt, const Dims& dims) {
  for (int64_t d : dims)
    if (d < 0) return Status::OK();  // MODEL_INVALID, reported by convert_tensor
  const int64_t n = numel(dims);
  const size_t elem = dtype_size(dt);
  if (n < 0 || (elem != 0 && static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / elem / 2))
    return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has dims ", to_string(dims),
                      " whose size overflows; it stores ", tp.has_raw_data() ? tp.raw_data().size() : 0,
                      " bytes of raw data");
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    // ONNX stores strings inline only; an external string tensor would be allocated by its dims
    // with nothing to check them against (found by fuzz/onnx_import: 24.7 G strings).
    if (dt == DType::String)
      return make_error(ErrorCode::MODEL_INVALID, "tensor '", tp.name(),
                        "' is a string tensor with external data; ONNX stores string tensors inline");
    return Status::OK();  // locate_external
  }
  if (tp.has_raw_data() && dt != DType::String) {
    const uint64_t want = static_cast<uint64_t>(n) * elem;
    if (tp.raw_data().size() != want)
      return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has dims ", to_string(dims), " (", n,
                        " ", dtype_name(dt), " elements, ", want, " bytes) but ", tp.raw_data().size(),
                        " bytes of raw data");
    return Status::OK();
  }
  const int64_t stored = tp.float_data_size() + tp.int32_data_size() + tp.int64_data_size() + tp.double_data_size() +
                         tp.uint64_data_size() + tp.string_data_size();
  if (stored != n)
    return make_error(ErrorCode::TENSOR_DATA_SIZE, "tensor '", tp.name(), "' has dims ", to_string(dims), " (", n,
                      " elements) but stores ", stored, " values");
  return Status::OK();
}

// The ONNX checker refuses a cycle as "not topologically sorted", the same words as for an
// acyclic graph listed out of order. Kahn's algorithm over the main graph's node inputs tells
// them apart: the name of the first node that can never run, or "" when every node can.
std::string first_node_in_cycle(const onnx::GraphProto& g) {
  std::unordered_set<std::string> available{""};  // "" is an omitted optional input
  for (const auto& v : g.input()) available.insert(v.name());
  for (const auto& t : g.initializer()) available.insert(t.name());
  std::vector<const onnx::NodeProto*> pending;
  for (const auto& n : g.node()) pending.push_back(&n);
  for (bool progress = true; progress && !pending.empty();) {
    progress = false;
    for (size_t i = 0; i < pending.size();) {
      const auto& n = *pending[i];
      bool ready = std::all_of(n.input().begin(), n.input().end(),
                               [&](const std::string& in) { return available.count(in) != 0; });
      if (!ready) {
        ++i;
        continue;
      }
      for (const auto& out : n.output()) available.insert(out);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      progress = true;
    }
  }
  if (pending.empty()) return "";
  return pending.front()->name().empty() ? pending.front()->op_type() : pending.front()->name();
}

Result<Tensor> convert_tensor(const onnx::TensorProto& tp, const std::string& base_dir) {
  if (!dtype_is_known(tp.data_type()))
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, "tensor '", tp.name(), "' has ONNX data type ", tp.data_type(),
                      " which gearbox does not support (complex, float8 or undefined)");
  DType dt = static_cast<DType>(tp.data_type());
  Dims dims(tp.dims().begin(), tp.dims().end());
  for (int64_t d : dims)
    if (d < 0) return make_error(ErrorCode::MODEL_INVALID, "tensor '", tp.name(), "' has a negative dim ", d);
  // Check the stored data against the dims before allocating: huge dims over a few bytes of data
  // are a malformed tensor (TENSOR_DATA_SIZE), not a request for that much memory (OUT_OF_MEMORY).
  GBX_RETURN_IF_ERROR(check_stored_size(tp, dt, dims));
  std::optional<ExternalRange> external;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL && dt != DType::String) {
    GBX_ASSIGN_OR_RETURN(external, locate_external(tp, base_dir, static_cast<uint64_t>(numel(dims)) * dtype_size(dt)));
  }
  // Every byte is written below (or the import fails), so skip zero-filling.
  GBX_ASSIGN_OR_RETURN(Tensor t,
                       dt == DType::String ? Tensor::allocate(dt, dims) : Tensor::allocate_uninitialized(dt, dims));
  const int64_t n = t.numel();
  if (dt == DType::String) {
    GBX_RETURN_IF_ERROR(check_count(tp, tp.string_data(), n));
    for (int64_t i = 0; i < n; ++i) t.strings()[i] = tp.string_data(static_cast<int>(i));
    return t;
  }
  const size_t bytes = t.nbytes();
  auto* dst = static_cast<char*>(t.mutable_raw());
  // A 0-element tensor has no buffer and an empty repeated field no data(): memcpy with a null
  // pointer is undefined even for 0 bytes (UBSan; found by fuzz/onnx_import).
  auto copy = [&](const void* src) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  };
  if (external) {
    GBX_RETURN_IF_ERROR(read_external(tp, *external, dst, bytes));
    return t;
  }
  if (tp.has_raw_data()) {  // its size is `bytes`: check_stored_size above
    copy(tp.raw_data().data());
    return t;
  }
  switch (dt) {
    case DType::F32:
      GBX_RETURN_IF_ERROR(check_count(tp, tp.float_data(), n));
      copy(tp.float_data().data());
      break;
    case DType::F64:
      GBX_RETURN_IF_ERROR(check_count(tp, tp.double_data(), n));
      copy(tp.double_data().data());
      break;
    case DType::I64:
      GBX_RETURN_IF_ERROR(check_count(tp, tp.int64_data(), n));
      copy(tp.int64_data().data());
      break;
    case DType::U32:
    case DType::U64: {
      GBX_RETURN_IF_ERROR(check_count(tp, tp.uint64_data(), n));
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = tp.uint64_data(static_cast<int>(i));
        if (dt == DType::U32) t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        else t.data<uint64_t>()[i] = v;
      }
      break;
    }
    default: {
      // int32_data carries every type of 32 bits or less (f16/bf16 as their bit patterns).
      GBX_RETURN_IF_ERROR(check_count(tp, tp.int32_data(), n));
      visit_numeric(dt, [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t i = 0; i < n; ++i) {
          int32_t v = tp.int32_data(static_cast<int>(i));
          if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
            t.data<T>()[i].bits = static_cast<uint16_t>(v);
          } else {
            t.data<T>()[i] = static_cast<T>(v);
          }
        }
      });
    }
  }
  return t;
}

ValueType convert_type(const onnx::TypeProto& tp) {
  ValueType vt;
  if (tp.has_tensor_type()) {
    vt.kind = ValueType::Kind::Tensor;
    vt.dtype = dtype_is_known(tp.tensor_type().elem_type()) ? static_cast<DType>(tp.tensor_type().elem_type())
                                                            : DType::Undefined;
    if (tp.tensor_type().has_shape()) {
      std::vector<Dim> dims;
      for (const auto& d : tp.tensor_type().shape().dim()) {
        if (d.has_dim_value()) dims.emplace_back(d.dim_value());
        else dims.push_back(Dim::symbolic(d.dim_param()));
      }
      vt.shape = Shape(std::move(dims));
    }
  } else if (tp.has_sequence_type()) {
    vt.kind = ValueType::Kind::Sequence;
    vt.elem = std::make_shared<ValueType>(convert_type(tp.sequence_type().elem_type()));
    vt.dtype = vt.elem->dtype;
  } else if (tp.has_optional_type()) {
    vt.kind = ValueType::Kind::Optional;
    vt.elem = std::make_shared<ValueType>(convert_type(tp.optional_type().elem_type()));
    vt.dtype = vt.elem->dtype;
  }
  return vt;
}

class GraphImporter {
 public:
  GraphImporter(const OpsetMap& opsets, std::string base_dir) : opsets_(opsets), base_dir_(std::move(base_dir)) {}

  Result<std::shared_ptr<Graph>> import(const onnx::GraphProto& gp, const Graph* parent) {
    auto g = std::make_shared<Graph>();
    g->name = gp.name();
    g->parent = parent;
    std::map<std::string, const onnx::TypeProto*> declared;
    for (const auto& vi : gp.value_info()) declared[vi.name()] = &vi.type();
    for (const auto& vi : gp.output()) declared[vi.name()] = &vi.type();

    for (const auto& init : gp.initializer()) {
      if (init.name().empty()) return make_error(ErrorCode::MODEL_INVALID, "an initializer has no name");
      if (g->find_value(init.name()))
        return make_error(ErrorCode::MODEL_INVALID, "initializer '", init.name(), "' is defined twice");
      GBX_ASSIGN_OR_RETURN(Tensor t, convert_tensor(init, base_dir_));
      Value* v = g->add_value(init.name());
      v->is_initializer = true;
      v->type.dtype = t.dtype();
      v->type.shape = Shape::from_dims(t.dims());
      v->initializer = std::move(t);
      g->initializers.push_back(v);
    }
    for (const auto& in : gp.input()) {
      if (Value* existing = g->find_value(in.name())) {
        // Older exporters list initializers among the inputs: keep them constant.
        if (existing->is_initializer) continue;
        return make_error(ErrorCode::MODEL_INVALID, "graph input '", in.name(), "' is declared twice");
      }
      Value* v = g->add_value(in.name());
      v->type = convert_type(in.type());
      g->inputs.push_back(v);
    }
    // Create every node output first so that subgraphs and out-of-order nodes resolve.
    for (const auto& np : gp.node())
      for (const auto& out : np.output()) {
        if (out.empty()) continue;
        if (g->find_value(out))
          return make_error(ErrorCode::MODEL_INVALID, "value '", out, "' is produced twice (node '", np.name(), "', ",
                            np.op_type(), ")");
        Value* v = g->add_value(out);
        auto it = declared.find(out);
        if (it != declared.end()) v->type = convert_type(*it->second);
      }
    int unnamed = 0;
    for (const auto& np : gp.node()) {
      Node* n =
          g->add_node(np.op_type(), np.name().empty() ? np.op_type() + "_" + std::to_string(unnamed++) : np.name());
      n->domain = np.domain() == "ai.onnx" ? "" : np.domain();
      auto op_it = opsets_.find(n->domain);
      if (op_it == opsets_.end())
        return make_error(ErrorCode::MODEL_INVALID, "node '", n->name, "' uses domain '", n->domain,
                          "' which the model does not import (opset_import)");
      n->opset = static_cast<int>(op_it->second);
      for (const auto& in : np.input()) {
        if (in.empty()) {
          n->inputs.push_back(nullptr);
          continue;
        }
        Value* v = lookup(*g, in);
        if (!v)
          return make_error(ErrorCode::GRAPH_CYCLE, "node '", n->name, "' (", n->op_type, ") reads '", in,
                            "' which no input, initializer or node defines");
        n->inputs.push_back(v);
      }
      for (const auto& out : np.output()) {
        Value* v = out.empty() ? nullptr : g->find_value(out);
        if (v) v->producer = n;
        n->outputs.push_back(v);
      }
      for (const auto& ap : np.attribute()) {
        GBX_ASSIGN_OR_RETURN(Attribute a, convert_attribute(ap, *g, *n));
        n->attrs[ap.name()] = std::move(a);
      }
    }
    for (const auto& out : gp.output()) {
      Value* v = lookup(*g, out.name());
      if (!v)
        return make_error(ErrorCode::MODEL_INVALID, "graph output '", out.name(), "' is not produced by any node");
      if (v->type.dtype == DType::Undefined && v->type.kind == ValueType::Kind::Tensor)
        v->type = convert_type(out.type());
      g->outputs.push_back(v);
    }
    GBX_RETURN_IF_ERROR(topological_sort(*g));
    return g;
  }

 private:
  static Value* lookup(const Graph& g, const std::string& name) {
    for (const Graph* s = &g; s; s = s->parent)
      if (Value* v = s->find_value(name)) return v;
    return nullptr;
  }

  Result<Attribute> convert_attribute(const onnx::AttributeProto& ap, const Graph& g, const Node& n) {
    Attribute a;
    using AP = onnx::AttributeProto;
    switch (ap.type()) {
      case AP::FLOAT:
        a.type = AttrType::Float;
        a.f = ap.f();
        break;
      case AP::INT:
        a.type = AttrType::Int;
        a.i = ap.i();
        break;
      case AP::STRING:
        a.type = AttrType::String;
        a.s = ap.s();
        break;
      case AP::FLOATS:
        a.type = AttrType::Floats;
        a.floats.assign(ap.floats().begin(), ap.floats().end());
        break;
      case AP::INTS:
        a.type = AttrType::Ints;
        a.ints.assign(ap.ints().begin(), ap.ints().end());
        break;
      case AP::STRINGS:
        a.type = AttrType::Strings;
        a.strings.assign(ap.strings().begin(), ap.strings().end());
        break;
      case AP::TENSOR: {
        a.type = AttrType::Tensor;
        GBX_ASSIGN_OR_RETURN(a.t, convert_tensor(ap.t(), base_dir_));
        break;
      }
      case AP::TENSORS: {
        a.type = AttrType::Tensors;
        for (const auto& tp : ap.tensors()) {
          GBX_ASSIGN_OR_RETURN(Tensor t, convert_tensor(tp, base_dir_));
          a.tensors.push_back(std::move(t));
        }
        break;
      }
      case AP::GRAPH: {
        a.type = AttrType::Graph;
        GBX_ASSIGN_OR_RETURN(a.g, import(ap.g(), &g));
        break;
      }
      case AP::GRAPHS: {
        a.type = AttrType::Graphs;
        for (const auto& gp : ap.graphs()) {
          GBX_ASSIGN_OR_RETURN(auto sg, import(gp, &g));
          a.graphs.push_back(std::move(sg));
        }
        break;
      }
      case AP::TYPE_PROTO: {
        // Optional's 'type': kept as the element dtype only.
        a.type = AttrType::Int;
        a.i = ap.tp().has_tensor_type() ? ap.tp().tensor_type().elem_type() : 0;
        break;
      }
      default:
        return make_error(ErrorCode::ATTRIBUTE_INVALID, "node '", n.name, "' (", n.op_type, "): attribute '", ap.name(),
                          "' has a type gearbox does not support (", static_cast<int>(ap.type()), ")");
    }
    return a;
  }

  const OpsetMap& opsets_;
  std::string base_dir_;
};

bool uses_external_data(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g() && uses_external_data(a.g())) return true;
      for (const auto& sg : a.graphs())
        if (uses_external_data(sg)) return true;
    }
  return false;
}

Status check_external_locations(const onnx::GraphProto& g, const std::string& base_dir) {
  for (const auto& t : g.initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    std::string location;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location") location = kv.value();
    GBX_RETURN_IF_ERROR(resolve_external(base_dir, location, t.name()).status());
  }
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) GBX_RETURN_IF_ERROR(check_external_locations(a.g(), base_dir));
      for (const auto& sg : a.graphs()) GBX_RETURN_IF_ERROR(check_external_locations(sg, base_dir));
    }
  return Status::OK();
}

// libonnx 1.12's convolution and pooling shape inference indexes the input's spatial axes by the
// kernel's rank without checking them against each other: a Conv whose input is declared rank 2
// with a 4-D weight crashes inside InferShapes (found by fuzz/onnx_import). So the declared ranks
// of these ops' inputs (graph inputs, value_info, initializers; in subgraphs too) are checked
// first, as ONNX defines them: input [N, C, spatial...] with at least one spatial axis, the
// weight of the same rank, kernel_shape/strides/dilations one positive value per spatial axis,
// pads two.
// (A rank that only inference would find is not checked: shape inference may still meet it.)
Status check_conv_pool_ranks(const onnx::GraphProto& g, std::map<std::string, int> ranks, const std::string& path) {
  auto note = [&ranks](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto& v : g.input()) note(v);
  for (const auto& v : g.value_info()) note(v);
  for (const auto& t : g.initializer()) ranks[t.name()] = t.dims_size();
  // Op type -> the index of its weight input (-1: none; pools have kernel_shape instead).
  static const std::map<std::string, int> kWeightInput = {{"Conv", 1},          {"ConvInteger", 1}, {"QLinearConv", 3},
                                                          {"ConvTranspose", 1}, {"MaxPool", -1},    {"AveragePool", -1},
                                                          {"LpPool", -1}};
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g()) GBX_RETURN_IF_ERROR(check_conv_pool_ranks(a.g(), ranks, path));
      for (const auto& sg : a.graphs()) GBX_RETURN_IF_ERROR(check_conv_pool_ranks(sg, ranks, path));
    }
    auto op = kWeightInput.find(n.op_type());
    if ((n.domain() != "" && n.domain() != "ai.onnx") || op == kWeightInput.end() || n.input_size() == 0) continue;
    // libonnx's shape inference divides by strides and dilations (a 0 stride raised SIGFPE,
    // found by fuzz/onnx_import) and sizes by kernel_shape: each must be positive.
    for (const auto& a : n.attribute())
      if (a.name() == "kernel_shape" || a.name() == "strides" || a.name() == "dilations")
        for (int64_t v : a.ints())
          if (v <= 0)
            return make_error(ErrorCode::MODEL_INVALID, "'", path, "': node '", n.name(), "' (", n.op_type(),
                              "): attribute ", a.name(), " holds ", v, "; each value must be positive");
    auto in = ranks.find(n.input(0));
    if (in == ranks.end()) continue;
    const int rank = in->second, spatial = rank - 2;
    auto refuse = [&](const std::string& why) {
      return make_error(ErrorCode::MODEL_INVALID, "'", path, "': node '", n.name(), "' (", n.op_type(), "): input '",
                        n.input(0), "' is declared rank ", rank, ", but ", why,
                        " (the input is [N, C, spatial axes...], with as many spatial axes as the kernel)");
    };
    if (spatial < 1) return refuse("it needs at least one spatial axis");
    if (op->second >= 0 && n.input_size() > op->second) {
      auto w = ranks.find(n.input(op->second));
      if (w != ranks.end() && w->second != rank)
        return refuse("the weight '" + n.input(op->second) + "' is rank " + std::to_string(w->second));
    }
    for (const auto& a : n.attribute()) {
      const bool per_axis = a.name() == "kernel_shape" || a.name() == "strides" || a.name() == "dilations";
      const int want = a.name() == "pads" ? 2 * spatial : per_axis ? spatial : -1;
      if (want >= 0 && a.ints_size() != want)
        return refuse("attribute " + a.name() + " has " + std::to_string(a.ints_size()) + " values, not " +
                      std::to_string(want));
    }
  }
  return Status::OK();
}

// A graph input or output declared as a tensor without a shape has an unknown rank (the ONNX IR
// makes the shape optional; ONNX Runtime accepts such models), but libonnx 1.12's checker
// requires the field. While it checks, such values get an empty shape, taken away again before
// shape inference, to which an empty shape would mean a scalar.
class UnrankedIoForChecker {
 public:
  explicit UnrankedIoForChecker(onnx::GraphProto& g) {
    for (auto* list : {g.mutable_input(), g.mutable_output()})
      for (auto& vi : *list)
        if (vi.type().has_tensor_type() && !vi.type().tensor_type().has_shape()) {
          vi.mutable_type()->mutable_tensor_type()->mutable_shape();
          patched_.push_back(vi.mutable_type()->mutable_tensor_type());
        }
  }
  ~UnrankedIoForChecker() {
    for (auto* t : patched_) t->clear_shape();
  }
  UnrankedIoForChecker(const UnrankedIoForChecker&) = delete;
  UnrankedIoForChecker& operator=(const UnrankedIoForChecker&) = delete;

 private:
  std::vector<onnx::TypeProto_Tensor*> patched_;
};

Result<Model> import_proto(onnx::ModelProto& mp, const std::string& base_dir, const std::string& path,
                           const ImportOptions& options) {
  if (!mp.has_graph() || (mp.graph().node_size() == 0 && mp.graph().output_size() == 0))
    return make_error(ErrorCode::MODEL_NOT_A_MODEL, "'", path, "' parses as protobuf but holds no ONNX graph");
  Model model;
  model.path = path;
  model.ir_version = mp.ir_version();
  model.producer_name = mp.producer_name();
  model.producer_version = mp.producer_version();
  for (const auto& op : mp.opset_import()) {
    std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    model.opsets[domain] = op.version();
  }
  if (mp.ir_version() > kMaxIrVersion)
    return make_error(ErrorCode::OPSET_UNSUPPORTED, "'", path, "' is ONNX IR version ", mp.ir_version(),
                      "; gearbox reads IR versions up to ", kMaxIrVersion, " (ai.onnx opsets up to ", kMaxOpset, ")");
  if (model.opsets.empty() && mp.ir_version() < 3) model.opsets[""] = 1;
  auto onnx_it = model.opsets.find("");
  if (onnx_it != model.opsets.end() && (onnx_it->second < kMinOpset || onnx_it->second > kMaxOpset))
    return make_error(ErrorCode::OPSET_UNSUPPORTED, "'", path, "' uses ai.onnx opset ", onnx_it->second,
                      "; gearbox supports opsets ", kMinOpset, " to ", kMaxOpset);

  // External-data locations are confined to the model's folder before anything (the ONNX
  // checker included) opens them.
  GBX_RETURN_IF_ERROR(check_external_locations(mp.graph(), base_dir));
  // libonnx knows no 4-bit types: they are widened to 8 bits first (graph/onnx_int4.h).
  GBX_ASSIGN_OR_RETURN(const int widened_int4,
                       widen_int4(mp, [&](const onnx::TensorProto& tp, uint64_t bytes) -> Result<std::string> {
                         GBX_ASSIGN_OR_RETURN(ExternalRange where, locate_external(tp, base_dir, bytes));
                         std::string data(bytes, '\0');
                         GBX_RETURN_IF_ERROR(read_external(tp, where, data.data(), bytes));
                         return data;
                       }));
  if (widened_int4 > 0)
    GBX_LOG_DEBUG("GRAPH", "{} 4-bit tensor(s), type(s) and quantizer(s) widened to 8 bits", widened_int4);
  auto phase_start = std::chrono::steady_clock::now();
  auto phase_done = [&](const char* what) {
    auto now = std::chrono::steady_clock::now();
    GBX_LOG_DEBUG("GRAPH", "{} took {:.1f} ms", what,
                  std::chrono::duration<double, std::milli>(now - phase_start).count());
    phase_start = now;
  };
  progress_begin(options.progress, "check");
  // libonnx judges the model through a CheckingView when it has ops libonnx's schemas do not
  // cover (opsets past 17, unknown ops): see graph/onnx_newer_opsets.h. The view is undone
  // before the conversion below.
  std::optional<CheckingView> view;
  view.emplace(mp, onnx_it == model.opsets.end() ? kLibOnnxMaxOpset : static_cast<int>(onnx_it->second));
  if (!view->newer_ops().empty())
    GBX_LOG_DEBUG("GRAPH", "{} node(s) checked against gearbox's ai.onnx opset-{} schemas: {}",
                  view->newer_ops().size(), onnx_it->second, join(view->newer_ops()));
  if (!view->unknown_ops().empty())
    GBX_LOG_DEBUG("GRAPH", "{} node(s) whose op no ONNX schema knows at this opset, left to the kernel registry: {}",
                  view->unknown_ops().size(), join(view->unknown_ops()));
  if (options.check_model) {
    // The ONNX checker reports some data/dims mismatches of initializers ("0-element but
    // contains data") as a generic failure; check the main graph's initializers first so they
    // get TENSOR_DATA_SIZE with both sizes (subgraphs' ones are checked when converted).
    for (const auto& init : mp.graph().initializer())
      if (dtype_is_known(init.data_type()))
        GBX_RETURN_IF_ERROR(check_stored_size(init, static_cast<DType>(init.data_type()),
                                              Dims(init.dims().begin(), init.dims().end())));
    try {
      if (!base_dir.empty() && uses_external_data(mp.graph())) {
        // The path form resolves external data against the model's folder; it reads the
        // file as written, so a model that needs a checking copy skips it (its external
        // data is still confined and size-checked by the conversion below).
        if (!view->rewritten() && widened_int4 == 0) onnx::checker::check_model(path);
        else
          GBX_LOG_DEBUG("GRAPH", "'{}': external data and newer ops or 4-bit types: the ONNX checker is skipped", path);
      } else {
        UnrankedIoForChecker unranked(*mp.mutable_graph());
        onnx::checker::check_model(mp);
      }
    } catch (const std::exception& e) {
      std::string what = e.what();
      // An op the ONNX schema registry does not know is an unsupported op, not a broken file.
      auto pos = what.find("No Op registered for ");
      if (pos != std::string::npos) {
        std::string rest = what.substr(pos + 21);
        return make_error(ErrorCode::OP_UNSUPPORTED, "operator ", rest.substr(0, rest.find('\n')),
                          " is not a known ONNX operator, and gearbox has no kernel for it");
      }
      if (what.find("topologically sorted") != std::string::npos) {
        std::string stuck = first_node_in_cycle(mp.graph());
        if (!stuck.empty())
          return make_error(ErrorCode::GRAPH_CYCLE, "'", path, "': node '", stuck,
                            "' can never run: its inputs depend on its own outputs (a cycle) or have no producer");
      }
      return make_error(ErrorCode::MODEL_INVALID, "'", path, "': ", what.substr(0, 600));
    }
  }
  phase_done("onnx checker");
  progress_begin(options.progress, "infer shapes");
  if (options.infer_shapes) {
    GBX_RETURN_IF_ERROR(check_conv_pool_ranks(mp.graph(), {}, path));
    try {
      onnx::shape_inference::InferShapes(mp);
    } catch (const std::exception& e) {
      GBX_LOG_WARN("GRAPH", "shape inference failed on '{}': {}; continuing with declared shapes", path,
                   std::string(e.what()).substr(0, 300));
    }
  }
  view.reset();
  phase_done("onnx shape inference");
  progress_begin(options.progress, "import");
  GraphImporter importer(model.opsets, base_dir);
  GBX_ASSIGN_OR_RETURN(model.graph, importer.import(mp.graph(), nullptr));
  GBX_ASSIGN_OR_RETURN(int legacy, upgrade_legacy_ops(*model.graph));
  if (legacy > 0) GBX_LOG_DEBUG("GRAPH", "{} node(s) of opsets 1-6 rewritten into their opset-7+ forms", legacy);
  GBX_ASSIGN_OR_RETURN(int contrib, lower_contrib_ops(*model.graph));
  if (contrib > 0) GBX_LOG_DEBUG("GRAPH", "{} ONNX Runtime contrib node(s) rewritten into ONNX ops", contrib);
  phase_done("conversion to the IR");
  GBX_LOG_INFO("GRAPH", "imported '{}': {} nodes, {} inputs, {} outputs, {} initializers, ai.onnx opset {}", path,
               model.graph->nodes.size(), model.graph->inputs.size(), model.graph->outputs.size(),
               model.graph->initializers.size(), onnx_it == model.opsets.end() ? 0 : onnx_it->second);
  return model;
}

bool parse_model(const std::string& bytes, onnx::ModelProto& mp) {
  // Protobuf's parser is robust against malformed input; any failure is a parse error.
  return mp.ParseFromString(bytes);
}

// Why protobuf refused the bytes: subgraphs nested past its recursion limit (the bytes are
// otherwise well-formed along the way), or a truncated or corrupt file.
Status parse_failure(const std::string& bytes, const std::string& what) {
  if (auto depth = onnx_graph_nesting_depth(bytes); depth && *depth > kMaxGraphNesting)
    return make_error(ErrorCode::MODEL_NESTING_TOO_DEEP, what, " (", bytes.size(), " bytes) nests subgraphs ", *depth,
                      " levels deep (the main graph is level 1), past protobuf's limit of 100 nested messages: ",
                      kMaxGraphNesting, " levels always parse, 34 never do");
  return make_error(ErrorCode::MODEL_PARSE_FAILED, what, " (", bytes.size(),
                    " bytes) is not a valid ONNX protobuf: truncated or corrupt");
}

}  // namespace

Result<Model> import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& options) {
  progress_begin(options.progress, "read");
  if (bytes.empty()) return make_error(ErrorCode::FILE_EMPTY, "the model is empty (0 bytes)");
  onnx::ModelProto mp;
  if (!parse_model(bytes, mp)) return parse_failure(bytes, "the model");
  return import_proto(mp, base_dir, "<memory>", options);
}

Result<Model> import_onnx_file(const std::string& path, const ImportOptions& options) {
  progress_begin(options.progress, "read");
  GBX_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  onnx::ModelProto mp;
  if (!parse_model(bytes, mp)) return parse_failure(bytes, "'" + path + "'");
  std::string base_dir = fs::absolute(fs::path(path)).parent_path().string();
  return import_proto(mp, base_dir, path, options);
}

Result<Tensor> load_tensor_pb(const std::string& path) {
  GBX_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes))
    return make_error(ErrorCode::MODEL_PARSE_FAILED, "'", path, "' is not a valid TensorProto");
  return convert_tensor(tp, fs::absolute(fs::path(path)).parent_path().string());
}

namespace {
Result<RuntimeValue> convert_sequence(const onnx::SequenceProto& sp, const std::string& dir) {
  TensorSequence seq;
  for (const auto& tp : sp.tensor_values()) {
    GBX_ASSIGN_OR_RETURN(Tensor t, convert_tensor(tp, dir));
    seq.elem_dtype = t.dtype();
    seq.tensors.push_back(std::move(t));
  }
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.elem_type() != onnx::SequenceProto::UNDEFINED)
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, "sequences of non-tensors are not supported");
  return RuntimeValue(std::move(seq));
}
}  // namespace

Result<RuntimeValue> load_value_pb(const std::string& path, const ValueType& type) {
  GBX_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  std::string dir = fs::absolute(fs::path(path)).parent_path().string();
  const ValueType* t = &type;
  if (t->kind == ValueType::Kind::Optional) {
    onnx::OptionalProto op;
    if (!op.ParseFromString(bytes))
      return make_error(ErrorCode::MODEL_PARSE_FAILED, "'", path, "' is not an OptionalProto");
    if (op.has_tensor_value()) {
      GBX_ASSIGN_OR_RETURN(Tensor tensor, convert_tensor(op.tensor_value(), dir));
      return RuntimeValue(std::move(tensor));
    }
    if (op.has_sequence_value()) return convert_sequence(op.sequence_value(), dir);
    return RuntimeValue();
  }
  if (t->kind == ValueType::Kind::Sequence) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes))
      return make_error(ErrorCode::MODEL_PARSE_FAILED, "'", path, "' is not a SequenceProto");
    auto r = convert_sequence(sp, dir);
    if (r.ok() && type.elem) r->sequence().elem_dtype = type.elem->dtype;
    return r;
  }
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) return make_error(ErrorCode::MODEL_PARSE_FAILED, "'", path, "' is not a TensorProto");
  GBX_ASSIGN_OR_RETURN(Tensor tensor, convert_tensor(tp, dir));
  return RuntimeValue(std::move(tensor));
}

}  // namespace gearbox
