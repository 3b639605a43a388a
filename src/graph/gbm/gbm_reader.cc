// .gbm reader: header checks, checksum, FlatBuffers verification, ISA check, then the graph
// with every index and offset checked; initializers borrow the mmap'ed weight blob.
#include "graph/gbm/gbm_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>

#include "base/logging.h"
#include "base/strings.h"
#include "device/device.h"
#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_generated.h"

#ifndef GEARBOX_VERSION_STRING
#define GEARBOX_VERSION_STRING "unknown"
#endif

namespace gearbox::gbm {
namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The elements of an int64 vector. FlatBuffers' Verifier checks the alignment of a vector's
// length word (4 bytes), not of 8-byte elements, so a corrupted file can leave them misaligned:
// copy the bytes rather than dereference them (found by the bounded fuzz test under UBSan).
std::vector<int64_t> int64s(const flatbuffers::Vector<int64_t>& v) {
  std::vector<int64_t> out(v.size());
  if (!out.empty()) std::memcpy(out.data(), v.Data(), out.size() * sizeof(int64_t));
  return out;
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

class Reader {
 public:
  Reader(const uint8_t* data, size_t size, std::shared_ptr<const void> owner, std::string where)
      : data_(data), size_(size), owner_(std::move(owner)), where_(std::move(where)) {}

  Result<Model> run(Info* info) {
    if (size_ < 4 || std::memcmp(data_, kMagic, 4) != 0) {
      if (size_ < 4 && std::memcmp(data_, kMagic, size_) == 0)
        return make_error(ErrorCode::GBM_TRUNCATED, where_, " is ", size_, " bytes: shorter than the header");
      return make_error(ErrorCode::GBM_NOT_GBM, where_, " does not start with \"GBM1\"");
    }
    if (size_ < 8) return make_error(ErrorCode::GBM_TRUNCATED, where_, " ends inside the header");
    Header h;
    h.version = load<uint32_t>(data_ + 4);
    if (h.version > kFormatVersion)
      return make_error(ErrorCode::GBM_VERSION_NEWER, where_, " has format version ", h.version, writer_hint(),
                        "; this gearbox (", GEARBOX_VERSION_STRING, ") reads up to version ", kFormatVersion);
    if (h.version == 0) return make_error(ErrorCode::GBM_INVALID, where_, " has format version 0");
    if (size_ < kHeaderSize)
      return make_error(ErrorCode::GBM_TRUNCATED, where_, " is ", size_, " bytes: shorter than the ", kHeaderSize,
                        "-byte header");
    h.header_size = load<uint32_t>(data_ + 8);
    h.meta_offset = load<uint64_t>(data_ + 16);
    h.meta_size = load<uint64_t>(data_ + 24);
    h.blob_offset = load<uint64_t>(data_ + 32);
    h.blob_size = load<uint64_t>(data_ + 40);
    h.checksum = load<uint64_t>(data_ + 48);
    if (h.header_size != kHeaderSize)
      return make_error(ErrorCode::GBM_INVALID, where_, " declares a ", h.header_size, "-byte header, not ",
                        kHeaderSize);
    auto inside = [&](uint64_t off, uint64_t len) { return off <= size_ && len <= size_ - off; };
    if (!inside(h.meta_offset, h.meta_size) || !inside(h.blob_offset, h.blob_size))
      return make_error(ErrorCode::GBM_TRUNCATED, where_, " is ", size_, " bytes but declares metadata at [",
                        h.meta_offset, ", +", h.meta_size, ") and weights at [", h.blob_offset, ", +", h.blob_size,
                        ")");
    if (!metadata_placed_well(h.meta_offset) || h.blob_offset % kBlobAlignment != 0)
      return make_error(ErrorCode::GBM_INVALID, where_, " has a misplaced metadata or weight section");
    uint64_t sum = gbm_checksum(data_ + kHeaderSize, size_ - kHeaderSize);
    if (sum != h.checksum)
      return make_error(ErrorCode::GBM_CHECKSUM_MISMATCH, where_, ": checksum ", sum, " but the header says ",
                        h.checksum);
    flatbuffers::Verifier verifier(data_ + h.meta_offset, h.meta_size);
    if (!fb::VerifyModelBuffer(verifier))
      return make_error(ErrorCode::GBM_INVALID, where_, ": the metadata fails FlatBuffers verification");
    m_ = fb::GetModel(data_ + h.meta_offset);
    blob_ = data_ + h.blob_offset;
    blob_size_ = h.blob_size;
    if (m_->format_version() > kFormatVersion)
      return make_error(ErrorCode::GBM_VERSION_NEWER, where_, " has metadata version ", m_->format_version(),
                        " (written by gearbox ", str(m_->gearbox_version()), "); this gearbox (",
                        GEARBOX_VERSION_STRING, ") reads up to version ", kFormatVersion);
    GBX_RETURN_IF_ERROR(check_features());
    GBX_RETURN_IF_ERROR(check_isa());
    GBX_LOG_INFO("GBM", "{}: format version {}, compiled by gearbox {}{}", where_, m_->format_version(),
                 str(m_->gearbox_version()), required_isa_.empty() ? "" : ", requires " + join(required_isa_));
    if (info) {
      info->format_version = m_->format_version();
      info->gearbox_version = str(m_->gearbox_version());
      info->required_isa = required_isa_;
      info->required_features = required_features_;
      info->precision = str(m_->precision());
      info->optimizer_report_json = str(m_->optimizer_report());
      if (m_->memory()) {
        info->naive_bytes = m_->memory()->naive_bytes();
        info->planned_bytes = m_->memory()->planned_bytes();
        info->lower_bound_bytes = m_->memory()->lower_bound_bytes();
      }
    }
    return graph();
  }

 private:
  // After the header and 8-byte aligned, as the writer puts it. FlatBuffers' Verifier checks
  // alignment relative to the buffer's start, so a metadata section at an odd offset would pass
  // it and then be read with misaligned loads (undefined behaviour; found by fuzz/gbm_read).
  static bool metadata_placed_well(uint64_t off) { return off >= kHeaderSize && off % 8 == 0; }

  // " (written by gearbox X)" when a file of a newer format still has metadata this
  // gearbox can verify (fields are only ever appended), else "": for the error message only.
  std::string writer_hint() const {
    if (size_ < kHeaderSize) return "";
    const uint64_t off = load<uint64_t>(data_ + 16), size = load<uint64_t>(data_ + 24);
    if (!metadata_placed_well(off) || off > size_ || size > size_ - off) return "";
    flatbuffers::Verifier verifier(data_ + off, size);
    if (!fb::VerifyModelBuffer(verifier)) return "";
    std::string v = str(fb::GetModel(data_ + off)->gearbox_version());
    return v.empty() ? "" : " (written by gearbox " + v + ")";
  }

  // Every feature the file requires must be one this reader implements (none yet: the list
  // exists so that a later gearbox can mark a change older readers must not misread).
  Status check_features() {
    static const std::set<std::string> known;  // features this gearbox implements
    std::vector<std::string> unknown;
    if (m_->required_features())
      for (const auto* s : *m_->required_features()) {
        required_features_.push_back(str(s));
        if (!known.count(required_features_.back())) unknown.push_back(required_features_.back());
      }
    if (unknown.empty()) return Status::OK();
    return make_error(ErrorCode::GBM_FEATURE_UNKNOWN, where_, " was compiled by gearbox ", str(m_->gearbox_version()),
                      " and requires feature(s) ", join(unknown), " that this gearbox (", GEARBOX_VERSION_STRING,
                      ") does not implement");
  }

  Status check_isa() {
    if (m_->required_isa())
      for (const auto* s : *m_->required_isa()) required_isa_.push_back(str(s));
    if (required_isa_.empty()) return Status::OK();
    device::Capabilities caps = device::detect_cpu_capabilities();
    for (const std::string& f : required_isa_)
      if (!caps.has(f))
        return make_error(ErrorCode::GBM_ISA_MISSING, where_, " needs the CPU feature '", f, "', which this CPU lacks",
                          caps.simulated_missing.empty() ? "" : " (GEARBOX_SIMULATE_MISSING_ISA)",
                          "; recompile the .onnx with gearbox compile --target generic");
    return Status::OK();
  }

  Status bad(const std::string& what) const { return make_error(ErrorCode::GBM_INVALID, where_, ": ", what); }

  Result<Value*> value_at(int i, bool allow_none) const {
    if (i == -1 && allow_none) return static_cast<Value*>(nullptr);
    if (i < 0 || static_cast<size_t>(i) >= values_.size())
      return bad("value index " + std::to_string(i) + " out of range");
    // Not created yet: it belongs to a subgraph that is not this graph or one enclosing it.
    if (!values_[static_cast<size_t>(i)])
      return bad("value " + std::to_string(i) + " is used outside the subgraph that defines it");
    return values_[static_cast<size_t>(i)];
  }

  Result<Dims> dims_of(const fb::TensorData& t) const {
    Dims dims;
    if (t.dims())
      for (int64_t d : int64s(*t.dims())) {
        if (d < 0) return bad("a tensor has a negative dim");
        dims.push_back(d);
      }
    if (numel(dims) < 0) return bad("a tensor's element count overflows");
    return dims;
  }

  // An initializer (in the blob) or an attribute tensor (inline).
  Result<Tensor> tensor(const fb::TensorData* t, bool in_blob) const {
    if (!t) return bad("a tensor is missing");
    if (!dtype_is_known(t->dtype())) return bad("a tensor has dtype " + std::to_string(t->dtype()));
    DType dt = static_cast<DType>(t->dtype());
    GBX_ASSIGN_OR_RETURN(Dims dims, dims_of(*t));
    int64_t n = numel(dims);
    if (dt == DType::String) {
      if (!t->strings() || t->strings()->size() != static_cast<uint64_t>(n))
        return bad("a string tensor's element count does not match its shape");
      GBX_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(dt, dims));
      for (size_t i = 0; i < t->strings()->size(); ++i) out.strings()[i] = str(t->strings()->Get(i));
      return out;
    }
    size_t elem = dtype_size(dt);
    if (static_cast<uint64_t>(n) > UINT64_MAX / elem) return bad("a tensor's byte size overflows");
    uint64_t bytes = static_cast<uint64_t>(n) * elem;
    if (in_blob) {
      uint64_t off = t->blob_offset();
      if (t->blob_size() != bytes || off > blob_size_ || bytes > blob_size_ - off || off % kBlobAlignment != 0)
        return bad("an initializer lies outside the weight blob or has the wrong size");
      return Tensor::borrow(dt, dims, owner_, blob_ + off);
    }
    uint64_t have = t->inline_data() ? t->inline_data()->size() : 0;
    if (have != bytes) return bad("an attribute tensor's data does not match its shape");
    GBX_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate_uninitialized(dt, dims));
    if (bytes) std::memcpy(out.mutable_raw(), t->inline_data()->data(), bytes);
    return out;
  }

  Result<Attribute> attribute(const fb::Attribute& a, const Graph& owner) {
    Attribute out;
    int type = a.type();
    if (type < static_cast<int>(AttrType::Float) || type > static_cast<int>(AttrType::Graphs))
      return bad("attribute '" + str(a.name()) + "' has type " + std::to_string(type));
    out.type = static_cast<AttrType>(type);
    out.f = a.f();
    out.i = a.i();
    out.s = str(a.s());
    if (out.type == AttrType::Tensor) {
      GBX_ASSIGN_OR_RETURN(out.t, tensor(a.t(), false));
    }
    if (a.floats()) out.floats.assign(a.floats()->begin(), a.floats()->end());
    if (a.ints()) out.ints = int64s(*a.ints());
    if (a.strings())
      for (const auto* s : *a.strings()) out.strings.push_back(str(s));
    if (a.tensors())
      for (const auto* t : *a.tensors()) {
        GBX_ASSIGN_OR_RETURN(Tensor x, tensor(t, false));
        out.tensors.push_back(std::move(x));
      }
    if (out.type == AttrType::Graph) {
      if (!a.g()) return bad("graph attribute '" + str(a.name()) + "' has no graph");
      GBX_ASSIGN_OR_RETURN(out.g, subgraph(*a.g(), owner));
    }
    if (a.graphs())
      for (const auto* sg : *a.graphs()) {
        GBX_ASSIGN_OR_RETURN(auto g, subgraph(*sg, owner));
        out.graphs.push_back(std::move(g));
      }
    return out;
  }

  // Which subgraph (nullptr: the main graph) defines each entry of Model.values, from the
  // subgraphs' `values` lists; a value claimed twice is an error.
  Status claim_values(const flatbuffers::Vector<flatbuffers::Offset<fb::Node>>* nodes) {
    if (!nodes) return Status::OK();
    for (const auto* fn : *nodes) {
      if (!fn->attrs()) continue;
      for (const auto* fa : *fn->attrs()) {
        std::vector<const fb::Graph*> subs;
        if (fa->g()) subs.push_back(fa->g());
        if (fa->graphs())
          for (const auto* sg : *fa->graphs()) subs.push_back(sg);
        for (const fb::Graph* sg : subs) {
          if (sg->values())
            for (int32_t i : *sg->values()) {
              if (i < 0 || static_cast<size_t>(i) >= claimed_by_.size())
                return bad("subgraph value index " + std::to_string(i) + " out of range");
              if (claimed_by_[static_cast<size_t>(i)] != nullptr)
                return bad("value " + std::to_string(i) + " is claimed by two subgraphs");
              claimed_by_[static_cast<size_t>(i)] = sg;
            }
          GBX_RETURN_IF_ERROR(claim_values(sg->nodes()));
        }
      }
    }
    return Status::OK();
  }

  Status value_type(const fb::ValueType& t, const std::string& name, ValueType& out) const {
    if (t.dtype() != 0 && !dtype_is_known(t.dtype()))  // 0: dtype not known statically
      return bad("value '" + name + "' has dtype " + std::to_string(t.dtype()));
    if (t.kind() < 0 || t.kind() > static_cast<int>(ValueType::Kind::Optional))
      return bad("value '" + name + "' has type kind " + std::to_string(t.kind()));
    out.kind = static_cast<ValueType::Kind>(t.kind());
    out.dtype = static_cast<DType>(t.dtype());
    out.shape.ranked = t.ranked();
    if (t.dims())
      for (const auto* d : *t.dims()) {
        Dim dim;
        dim.value = d->value() < 0 ? -1 : d->value();
        dim.symbol = str(d->symbol());
        out.shape.dims.push_back(dim);
      }
    if (out.kind != ValueType::Kind::Tensor && t.elem()) {
      out.elem = std::make_shared<ValueType>();
      GBX_RETURN_IF_ERROR(value_type(*t.elem(), name, *out.elem));
    }
    return Status::OK();
  }

  // Creates the values `owner` (nullptr: the main graph) defines, in index order, in g.
  Status add_values(Graph& g, const fb::Graph* owner) {
    const auto& fvs = *m_->values();
    for (size_t i = 0; i < fvs.size(); ++i) {
      if (claimed_by_[i] != owner) continue;
      const fb::Value* fv = fvs.Get(static_cast<flatbuffers::uoffset_t>(i));
      std::string name = str(fv->name());
      if (!name.empty() && g.find_value(name)) return bad("two values are named '" + name + "'");
      Value* v = g.add_value(name);
      values_[i] = v;
      value_graph_[i] = &g;
      if (fv->type()) GBX_RETURN_IF_ERROR(value_type(*fv->type(), name, v->type));
      if (fv->initializer()) {
        GBX_ASSIGN_OR_RETURN(v->initializer, tensor(fv->initializer(), true));
        v->is_initializer = true;
      }
    }
    return Status::OK();
  }

  // Value i as read by graph g: it must be defined by g or a graph enclosing it.
  Result<Value*> visible_value(int i, const Graph& g, bool allow_none) const {
    GBX_ASSIGN_OR_RETURN(Value * v, value_at(i, allow_none));
    if (!v) return v;
    for (const Graph* s = &g; s; s = s->parent)
      if (value_graph_[static_cast<size_t>(i)] == s) return v;
    return bad("graph '" + g.name + "' reads value '" + v->name + "', which is defined in another subgraph");
  }

  // Value i as defined by graph g (an input, initializer or node output of g itself).
  Result<Value*> own_value(int i, const Graph& g) const {
    GBX_ASSIGN_OR_RETURN(Value * v, value_at(i, false));
    if (value_graph_[static_cast<size_t>(i)] != &g)
      return bad("graph '" + g.name + "' defines value '" + v->name + "', which another graph owns");
    return v;
  }

  using FbNodes = flatbuffers::Vector<flatbuffers::Offset<fb::Node>>;
  using FbIndices = flatbuffers::Vector<int32_t>;

  // Builds g's lists and nodes (recursing into subgraphs); its values already exist.
  Status build_graph(Graph& g, const FbNodes* nodes, const FbIndices* inputs, const FbIndices* outputs,
                     const FbIndices* initializers) {
    auto list = [&](const FbIndices* idx, std::vector<Value*>& out, bool own) -> Status {
      if (idx)
        for (int32_t i : *idx) {
          Result<Value*> v = own ? own_value(i, g) : visible_value(i, g, false);
          if (!v.ok()) return v.status();
          out.push_back(*v);
        }
      return Status::OK();
    };
    GBX_RETURN_IF_ERROR(list(inputs, g.inputs, true));
    GBX_RETURN_IF_ERROR(list(outputs, g.outputs, false));
    GBX_RETURN_IF_ERROR(list(initializers, g.initializers, true));
    for (const Value* v : g.initializers)
      if (!v->is_initializer) return bad("value '" + v->name + "' is listed as an initializer but has no data");
    for (Value* v : g.inputs) {
      if (v->is_initializer) return bad("value '" + v->name + "' is both an input and an initializer");
      if (!defined_.insert(v).second) return bad("value '" + v->name + "' is defined twice");
    }
    for (Value* v : g.initializers) defined_.insert(v);
    for (Value* v : g.outputs) used_.insert(v);
    if (nodes)
      for (const auto* fn : *nodes) {
        Node* n = g.add_node(str(fn->op_type()), str(fn->name()));
        n->domain = str(fn->domain());
        n->opset = fn->opset();
        n->engine = str(fn->engine());
        if (fn->compute_dtype() != 0) {
          // Only bf16 is a compute precision today; any other number is a newer writer's.
          if (fn->compute_dtype() != static_cast<int>(DType::BF16))
            return bad("node '" + n->name + "' has compute dtype " + std::to_string(fn->compute_dtype()));
          n->compute_dtype = DType::BF16;
        }
        if (n->op_type.empty()) return bad("a node has no op_type");
        if (fn->inputs())
          for (int32_t i : *fn->inputs()) {
            GBX_ASSIGN_OR_RETURN(Value * v, visible_value(i, g, true));
            if (v) used_.insert(v);
            n->inputs.push_back(v);
          }
        if (fn->outputs())
          for (int32_t i : *fn->outputs()) {
            Value* v = nullptr;
            if (i != -1) {
              GBX_ASSIGN_OR_RETURN(v, own_value(i, g));
              if (!defined_.insert(v).second)
                return bad("value '" + v->name + "' is defined twice (node '" + n->name + "')");
              v->producer = n;
            }
            n->outputs.push_back(v);
          }
        if (fn->attrs())
          for (const auto* fa : *fn->attrs()) {
            std::string name = str(fa->name());
            // A repeated name would replace the first attribute, and with it any subgraph whose
            // values this reader already recorded as read or defined (pointers left dangling).
            if (n->attrs.count(name)) return bad("node '" + n->name + "' has two attributes named '" + name + "'");
            GBX_ASSIGN_OR_RETURN(Attribute a, attribute(*fa, g));
            n->attrs[name] = std::move(a);
          }
      }
    Status sorted = topological_sort(g);
    if (!sorted.ok()) return bad("the graph is not well formed: " + sorted.message());
    return Status::OK();
  }

  Result<std::shared_ptr<Graph>> subgraph(const fb::Graph& fg, const Graph& parent) {
    auto g = std::make_shared<Graph>();
    g->name = str(fg.name());
    g->parent = &parent;
    GBX_RETURN_IF_ERROR(add_values(*g, &fg));
    GBX_RETURN_IF_ERROR(build_graph(*g, fg.nodes(), fg.inputs(), fg.outputs(), fg.initializers()));
    return g;
  }

  Result<Model> graph() {
    Model model;
    model.graph = std::make_shared<Graph>();
    Graph& g = *model.graph;
    g.name = str(m_->graph_name());
    model.ir_version = m_->ir_version();
    model.producer_name = str(m_->producer_name());
    model.producer_version = str(m_->producer_version());
    // "fp32" is what writers before the precision modes recorded.
    if (const std::string mode = str(m_->precision()); mode != "fp32") model.precision_mode = mode;
    if (m_->opsets())
      for (const auto* o : *m_->opsets()) model.opsets[str(o->domain())] = o->version();
    if (m_->plugins())
      for (const auto* p : *m_->plugins()) {
        const std::string name = str(p->name());
        if (name.empty() || model.plugin_versions.count(name))
          return bad("plugin list: an empty or repeated plugin name '" + name + "'");
        model.plugin_versions[name] = str(p->version());
      }
    size_t num_values = m_->values() ? m_->values()->size() : 0;
    claimed_by_.assign(num_values, nullptr);
    values_.assign(num_values, nullptr);
    value_graph_.assign(num_values, nullptr);
    GBX_RETURN_IF_ERROR(claim_values(m_->nodes()));
    if (num_values) GBX_RETURN_IF_ERROR(add_values(g, nullptr));
    GBX_RETURN_IF_ERROR(build_graph(g, m_->nodes(), m_->inputs(), m_->outputs(), m_->initializers()));
    // Every value read (a node input, a graph output) is defined somewhere: checked once all
    // graphs are built, since a subgraph may read an outer value that a later node produces.
    for (const Value* v : used_)
      if (!defined_.count(v)) return bad("value '" + v->name + "' is read but never defined");
    return model;
  }

  const uint8_t* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
  std::string where_;
  const fb::Model* m_ = nullptr;
  const uint8_t* blob_ = nullptr;
  uint64_t blob_size_ = 0;
  std::vector<std::string> required_isa_;
  std::vector<std::string> required_features_;
  std::vector<Value*> values_;                // Model.values index -> the value, once created
  std::vector<const fb::Graph*> claimed_by_;  // Model.values index -> defining subgraph (nullptr: main)
  std::vector<const Graph*> value_graph_;     // Model.values index -> the graph it was created in
  std::set<const Value*> defined_, used_;
};

// Owns an mmap'ed file.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

}  // namespace

bool is_gbm_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  if (!f.read(magic, 4)) return false;
  return std::memcmp(magic, kMagic, 4) == 0;
}

Result<Model> read_file(const std::string& path, Info* info) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::FILE_NOT_FOUND, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return make_error(ErrorCode::FILE_NOT_FOUND, "cannot stat '", path, "'");
  }
  auto map = std::make_shared<Mapping>();
  map->size = static_cast<size_t>(st.st_size);
  if (map->size > 0) {
    void* p = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return make_error(ErrorCode::FILE_NOT_FOUND, "cannot map '", path, "': ", std::strerror(errno));
    }
    map->addr = p;
  }
  ::close(fd);
  static const uint8_t empty = 0;
  const uint8_t* data = map->addr ? static_cast<const uint8_t*>(map->addr) : &empty;
  GBX_ASSIGN_OR_RETURN(Model model, Reader(data, map->size, map, "'" + path + "'").run(info));
  model.path = path;
  return model;
}

Result<Model> read_bytes(const void* data, size_t size, Info* info) {
  // A 64-byte-aligned private copy, so that the blob's alignment holds as in a mapped file.
  auto copy = std::make_shared<Tensor>(DType::U8, Dims{static_cast<int64_t>(size)});
  if (size) std::memcpy(copy->mutable_raw(), data, size);
  const auto* p = static_cast<const uint8_t*>(copy->raw());
  static const uint8_t empty = 0;
  return Reader(size ? p : &empty, size, copy, "the .gbm bytes").run(info);
}

}  // namespace gearbox::gbm
