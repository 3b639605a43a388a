// .gbm writer: graph -> FlatBuffers metadata + aligned weight blob + header with checksum.
#include "graph/gbm/gbm_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "base/atomic_file.h"
#include "base/logging.h"
#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_generated.h"

#ifndef GEARBOX_VERSION_STRING
#define GEARBOX_VERSION_STRING "unknown"
#endif

namespace gearbox::gbm {

uint64_t gbm_checksum(const uint8_t* data, size_t size) {
  uint64_t h = 14695981039346656037ull;
  const uint64_t prime = 1099511628211ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * prime;
  }
  for (; i < size; ++i) h = (h ^ data[i]) * prime;
  return h;
}

namespace {

namespace fbs = flatbuffers;

class Writer {
 public:
  Writer(const Model& model, const WriteOptions& options) : model_(model), options_(options) {}

  Result<std::string> run() {
    const Graph& g = *model_.graph;
    // One value table for all graphs: the main graph's values first (as in format version 1),
    // then each subgraph's, depth first.
    number_values(g);
    uint64_t weight_bytes = 0;
    for (const Value* v : all_values_)
      if (v->is_initializer && v->initializer.defined() && v->initializer.dtype() != DType::String)
        weight_bytes += v->initializer.nbytes();
    progress_begin(options_.progress, "pack weights", weight_bytes);
    std::vector<fbs::Offset<fb::Value>> values;
    for (const Value* v : all_values_) {
      GBX_ASSIGN_OR_RETURN(auto off, value(*v));
      values.push_back(off);
    }
    GBX_ASSIGN_OR_RETURN(auto nodes, node_list(g));
    std::vector<fbs::Offset<fb::Opset>> opsets;
    for (const auto& [domain, version] : model_.opsets)
      opsets.push_back(fb::CreateOpset(b_, b_.CreateString(domain), version));
    std::vector<fbs::Offset<fbs::String>> isa;
    for (const auto& f : options_.required_isa) isa.push_back(b_.CreateString(f));
    std::vector<fbs::Offset<fbs::String>> features;
    for (const auto& f : options_.required_features) features.push_back(b_.CreateString(f));
    const std::string version = options_.gearbox_version.empty() ? GEARBOX_VERSION_STRING : options_.gearbox_version;
    auto memory = fb::CreateMemoryPlan(b_, options_.memory.naive_bytes, options_.memory.planned_bytes,
                                       options_.memory.lower_bound_bytes, options_.memory.in_place_reuses,
                                       options_.memory.unsized_values);
    GBX_ASSIGN_OR_RETURN(auto inputs, indices(g.inputs));
    GBX_ASSIGN_OR_RETURN(auto outputs, indices(g.outputs));
    GBX_ASSIGN_OR_RETURN(auto inits, indices(g.initializers));
    std::vector<fbs::Offset<fb::Plugin>> plugins;
    for (const auto& [name, plugin_version] : model_.plugin_versions)
      plugins.push_back(fb::CreatePlugin(b_, b_.CreateString(name), b_.CreateString(plugin_version)));
    auto root = fb::CreateModel(
        b_, kFormatVersion, b_.CreateString(version), b_.CreateVector(isa), b_.CreateString(model_.precision_mode.empty() ? "fp32" : model_.precision_mode),
        model_.ir_version, b_.CreateString(model_.producer_name), b_.CreateString(model_.producer_version),
        b_.CreateString(g.name), b_.CreateVector(opsets), b_.CreateVector(values), nodes, b_.CreateVector(inputs),
        b_.CreateVector(outputs), b_.CreateVector(inits), memory, b_.CreateString(options_.optimizer_report_json),
        features.empty() ? 0 : b_.CreateVector(features), plugins.empty() ? 0 : b_.CreateVector(plugins));
    b_.Finish(root);

    Header h;
    h.meta_offset = kHeaderSize;
    h.meta_size = b_.GetSize();
    h.blob_offset = (h.meta_offset + h.meta_size + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment;
    h.blob_size = blob_.size();
    std::string out(h.blob_offset + h.blob_size, '\0');
    std::memcpy(out.data() + h.meta_offset, b_.GetBufferPointer(), h.meta_size);
    if (!blob_.empty()) std::memcpy(out.data() + h.blob_offset, blob_.data(), blob_.size());
    h.checksum = gbm_checksum(reinterpret_cast<const uint8_t*>(out.data()) + kHeaderSize, out.size() - kHeaderSize);
    char* p = out.data();
    std::memcpy(p, kMagic, 4);
    std::memcpy(p + 4, &h.version, 4);
    std::memcpy(p + 8, &h.header_size, 4);
    std::memcpy(p + 12, &h.flags, 4);
    std::memcpy(p + 16, &h.meta_offset, 8);
    std::memcpy(p + 24, &h.meta_size, 8);
    std::memcpy(p + 32, &h.blob_offset, 8);
    std::memcpy(p + 40, &h.blob_size, 8);
    std::memcpy(p + 48, &h.checksum, 8);
    return out;
  }

 private:
  void number_values(const Graph& g) {
    for (const auto& v : g.values) {
      index_[v.get()] = static_cast<int>(all_values_.size());
      all_values_.push_back(v.get());
    }
    for (const auto& n : g.nodes) for_each_subgraph(*n, [&](const Graph& sg) { number_values(sg); });
  }

  Result<int> index(const Value* v) const {
    if (!v) return -1;
    auto it = index_.find(v);
    if (it == index_.end())
      return make_error(ErrorCode::GBM_UNSUPPORTED, "value '", v->name, "' is not defined in any graph of the model");
    return it->second;
  }
  Result<std::vector<int>> indices(const std::vector<Value*>& vs) const {
    std::vector<int> out;
    for (const Value* v : vs) {
      GBX_ASSIGN_OR_RETURN(int i, index(v));
      out.push_back(i);
    }
    return out;
  }

  fbs::Offset<fb::TensorData> tensor(const Tensor& t, bool in_blob) {
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    auto d = b_.CreateVector(dims);
    if (t.dtype() == DType::String) {
      auto s = b_.CreateVectorOfStrings(t.strings());
      return fb::CreateTensorData(b_, static_cast<int>(t.dtype()), d, 0, 0, 0, s);
    }
    const auto* bytes = static_cast<const uint8_t*>(t.raw());
    if (!in_blob) {
      auto data = b_.CreateVector(bytes, t.nbytes());
      return fb::CreateTensorData(b_, static_cast<int>(t.dtype()), d, 0, 0, data);
    }
    size_t offset = (blob_.size() + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment;
    blob_.resize(offset + t.nbytes(), 0);
    if (t.nbytes()) std::memcpy(blob_.data() + offset, bytes, t.nbytes());
    packed_bytes_ += t.nbytes();
    progress_advance(options_.progress, packed_bytes_);
    return fb::CreateTensorData(b_, static_cast<int>(t.dtype()), d, offset, t.nbytes());
  }

  fbs::Offset<fb::ValueType> value_type(const ValueType& t) {
    fbs::Offset<fb::ValueType> elem = 0;
    if (t.kind != ValueType::Kind::Tensor && t.elem) elem = value_type(*t.elem);
    std::vector<fbs::Offset<fb::Dim>> dims;
    for (const Dim& d : t.shape.dims)
      dims.push_back(fb::CreateDim(b_, d.value, d.symbol.empty() ? 0 : b_.CreateString(d.symbol)));
    return fb::CreateValueType(b_, static_cast<int>(t.dtype), t.shape.ranked, b_.CreateVector(dims),
                               static_cast<int>(t.kind), elem);
  }

  Result<fbs::Offset<fb::Value>> value(const Value& v) {
    auto type = value_type(v.type);
    fbs::Offset<fb::TensorData> init = 0;
    // Passes leave the values of removed initializers behind without data: store none.
    if (v.is_initializer && v.initializer.defined()) init = tensor(v.initializer, /*in_blob=*/true);
    return fb::CreateValue(b_, b_.CreateString(v.name), type, init);
  }

  Result<fbs::Offset<fbs::Vector<fbs::Offset<fb::Node>>>> node_list(const Graph& g) {
    std::vector<fbs::Offset<fb::Node>> nodes;
    for (const auto& n : g.nodes) {
      GBX_ASSIGN_OR_RETURN(auto off, node(*n));
      nodes.push_back(off);
    }
    return b_.CreateVector(nodes);
  }

  Result<fbs::Offset<fb::Graph>> subgraph(const Graph& g) {
    std::vector<int> owned;
    for (const auto& v : g.values) owned.push_back(index_.at(v.get()));
    GBX_ASSIGN_OR_RETURN(auto nodes, node_list(g));
    GBX_ASSIGN_OR_RETURN(auto inputs, indices(g.inputs));
    GBX_ASSIGN_OR_RETURN(auto outputs, indices(g.outputs));
    GBX_ASSIGN_OR_RETURN(auto inits, indices(g.initializers));
    return fb::CreateGraph(b_, b_.CreateString(g.name), b_.CreateVector(owned), nodes, b_.CreateVector(inputs),
                           b_.CreateVector(outputs), b_.CreateVector(inits));
  }

  Result<fbs::Offset<fb::Node>> node(const Node& n) {
    std::vector<fbs::Offset<fb::Attribute>> attrs;
    for (const auto& [name, a] : n.attrs) {
      fbs::Offset<fb::TensorData> t = 0;
      if (a.type == AttrType::Tensor) t = tensor(a.t, false);
      std::vector<fbs::Offset<fb::TensorData>> ts;
      for (const Tensor& x : a.tensors) ts.push_back(tensor(x, false));
      fbs::Offset<fb::Graph> g = 0;
      if (a.type == AttrType::Graph) {
        if (!a.g)
          return make_error(ErrorCode::GBM_UNSUPPORTED, "node '", n.name, "' (", n.qualified_op(),
                            ") has an empty graph attribute '", name, "'");
        GBX_ASSIGN_OR_RETURN(g, subgraph(*a.g));
      }
      std::vector<fbs::Offset<fb::Graph>> gs;
      for (const auto& sg : a.graphs) {
        GBX_ASSIGN_OR_RETURN(auto off, subgraph(*sg));
        gs.push_back(off);
      }
      attrs.push_back(fb::CreateAttribute(b_, b_.CreateString(name), static_cast<int>(a.type), a.f, a.i,
                                          b_.CreateString(a.s), t, b_.CreateVector(a.floats), b_.CreateVector(a.ints),
                                          b_.CreateVectorOfStrings(a.strings), b_.CreateVector(ts), g,
                                          b_.CreateVector(gs)));
    }
    GBX_ASSIGN_OR_RETURN(auto ins, indices(n.inputs));
    GBX_ASSIGN_OR_RETURN(auto outs, indices(n.outputs));
    return fb::CreateNode(b_, b_.CreateString(n.name), b_.CreateString(n.op_type), b_.CreateString(n.domain), n.opset,
                          b_.CreateVector(ins), b_.CreateVector(outs), b_.CreateVector(attrs),
                          n.engine.empty() ? 0 : b_.CreateString(n.engine), static_cast<int>(n.compute_dtype));
  }

  const Model& model_;
  const WriteOptions& options_;
  fbs::FlatBufferBuilder b_{1 << 16};
  std::map<const Value*, int> index_;
  std::vector<const Value*> all_values_;
  std::vector<uint8_t> blob_;
  uint64_t packed_bytes_ = 0;  // initializer bytes copied into blob_ so far
};

}  // namespace

Result<std::string> serialize(const Model& model, const WriteOptions& options) {
  if (!model.graph) return make_error(ErrorCode::GBM_UNSUPPORTED, "the model has no graph");
  return Writer(model, options).run();
}

Status write_file(const Model& model, const std::string& path, const WriteOptions& options) {
  GBX_ASSIGN_OR_RETURN(std::string bytes, serialize(model, options));
  progress_begin(options.progress, "write", bytes.size());
  // Crash-safe: a kill or power loss mid-write leaves the previous .gbm, not a truncated one.
  AtomicFile f;
  GBX_RETURN_IF_ERROR(f.open(path));
  // In slices, so that a progress bar moves while a large model is written.
  constexpr size_t kSlice = size_t(64) << 20;
  for (size_t at = 0; at < bytes.size(); at += kSlice) {
    GBX_RETURN_IF_ERROR(f.write(bytes.data() + at, std::min(kSlice, bytes.size() - at)));
    progress_advance(options.progress, std::min(at + kSlice, bytes.size()));
  }
  GBX_RETURN_IF_ERROR(f.commit());
  GBX_LOG_INFO("GBM", "wrote {} ({} bytes)", path, bytes.size());
  return Status::OK();
}

}  // namespace gearbox::gbm
