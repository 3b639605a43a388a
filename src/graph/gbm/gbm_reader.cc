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
#include "device/device.h"
#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_generated.h"

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
      return make_error(ErrorCode::GBM_VERSION_NEWER, where_, " has format version ", h.version,
                        "; this gearbox reads up to version ", kFormatVersion);
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
      return make_error(ErrorCode::GBM_INVALID, where_, " declares a ", h.header_size, "-byte header, not ", kHeaderSize);
    auto inside = [&](uint64_t off, uint64_t len) { return off <= size_ && len <= size_ - off; };
    if (!inside(h.meta_offset, h.meta_size) || !inside(h.blob_offset, h.blob_size))
      return make_error(ErrorCode::GBM_TRUNCATED, where_, " is ", size_, " bytes but declares metadata at [",
                        h.meta_offset, ", +", h.meta_size, ") and weights at [", h.blob_offset, ", +", h.blob_size,
                        ")");
    if (h.meta_offset < kHeaderSize || h.blob_offset % kBlobAlignment != 0)
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
                        "; this gearbox reads up to version ", kFormatVersion);
    GBX_RETURN_IF_ERROR(check_isa());
    if (info) {
      info->format_version = m_->format_version();
      info->gearbox_version = str(m_->gearbox_version());
      info->required_isa = required_isa_;
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
  Status check_isa() {
    if (m_->required_isa())
      for (const auto* s : *m_->required_isa()) required_isa_.push_back(str(s));
    if (required_isa_.empty()) return Status::OK();
    device::Capabilities caps = device::detect_cpu_capabilities();
    for (const std::string& f : required_isa_)
      if (!caps.has(f))
        return make_error(ErrorCode::GBM_ISA_MISSING, where_, " needs the CPU feature '", f,
                          "', which this CPU lacks",
                          caps.simulated_missing.empty() ? "" : " (GEARBOX_SIMULATE_MISSING_ISA)",
                          "; recompile the .onnx with gearbox compile --target generic");
    return Status::OK();
  }

  Status bad(const std::string& what) const { return make_error(ErrorCode::GBM_INVALID, where_, ": ", what); }

  Result<Value*> value_at(int i, bool allow_none) const {
    if (i == -1 && allow_none) return static_cast<Value*>(nullptr);
    if (i < 0 || static_cast<size_t>(i) >= values_.size()) return bad("value index " + std::to_string(i) + " out of range");
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

  Result<Attribute> attribute(const fb::Attribute& a) const {
    Attribute out;
    int type = a.type();
    if (type < static_cast<int>(AttrType::Float) || type > static_cast<int>(AttrType::Tensors) ||
        type == static_cast<int>(AttrType::Graph))
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
    return out;
  }

  Result<Model> graph() {
    Model model;
    model.graph = std::make_shared<Graph>();
    Graph& g = *model.graph;
    g.name = str(m_->graph_name());
    model.ir_version = m_->ir_version();
    model.producer_name = str(m_->producer_name());
    model.producer_version = str(m_->producer_version());
    if (m_->opsets())
      for (const auto* o : *m_->opsets()) model.opsets[str(o->domain())] = o->version();
    std::set<std::string> names;
    if (m_->values())
      for (const auto* fv : *m_->values()) {
        std::string name = str(fv->name());
        if (!name.empty() && !names.insert(name).second) return bad("two values are named '" + name + "'");
        Value* v = g.add_value(name);
        values_.push_back(v);
        if (const auto* t = fv->type()) {
          if (t->dtype() != 0 && !dtype_is_known(t->dtype()))  // 0: dtype not known statically
            return bad("value '" + name + "' has dtype " + std::to_string(t->dtype()));
          v->type.dtype = static_cast<DType>(t->dtype());
          v->type.shape.ranked = t->ranked();
          if (t->dims())
            for (const auto* d : *t->dims()) {
              Dim dim;
              dim.value = d->value() < 0 ? -1 : d->value();
              dim.symbol = str(d->symbol());
              v->type.shape.dims.push_back(dim);
            }
        }
        if (fv->initializer()) {
          GBX_ASSIGN_OR_RETURN(v->initializer, tensor(fv->initializer(), true));
          v->is_initializer = true;
        }
      }
    auto list = [&](const flatbuffers::Vector<int32_t>* idx, std::vector<Value*>& out) -> Status {
      if (idx)
        for (int32_t i : *idx) {
          GBX_ASSIGN_OR_RETURN(Value* v, value_at(i, false));
          out.push_back(v);
        }
      return Status::OK();
    };
    GBX_RETURN_IF_ERROR(list(m_->inputs(), g.inputs));
    GBX_RETURN_IF_ERROR(list(m_->outputs(), g.outputs));
    GBX_RETURN_IF_ERROR(list(m_->initializers(), g.initializers));
    for (const Value* v : g.initializers)
      if (!v->is_initializer) return bad("value '" + v->name + "' is listed as an initializer but has no data");
    for (const Value* v : g.inputs)
      if (v->is_initializer) return bad("value '" + v->name + "' is both an input and an initializer");
    std::set<const Value*> defined(g.inputs.begin(), g.inputs.end());
    defined.insert(g.initializers.begin(), g.initializers.end());
    if (m_->nodes())
      for (const auto* fn : *m_->nodes()) {
        Node* n = g.add_node(str(fn->op_type()), str(fn->name()));
        n->domain = str(fn->domain());
        n->opset = fn->opset();
        if (n->op_type.empty()) return bad("a node has no op_type");
        if (fn->inputs())
          for (int32_t i : *fn->inputs()) {
            GBX_ASSIGN_OR_RETURN(Value* v, value_at(i, true));
            n->inputs.push_back(v);
          }
        if (fn->outputs())
          for (int32_t i : *fn->outputs()) {
            GBX_ASSIGN_OR_RETURN(Value* v, value_at(i, true));
            if (v && !defined.insert(v).second)
              return bad("value '" + v->name + "' is defined twice (node '" + n->name + "')");
            if (v) v->producer = n;
            n->outputs.push_back(v);
          }
        if (fn->attrs())
          for (const auto* fa : *fn->attrs()) {
            std::string name = str(fa->name());
            GBX_ASSIGN_OR_RETURN(Attribute a, attribute(*fa));
            n->attrs[name] = std::move(a);
          }
      }
    for (const Value* v : g.outputs)
      if (!defined.count(v)) return bad("graph output '" + v->name + "' is not produced");
    Status sorted = topological_sort(g);
    if (!sorted.ok()) return bad("the graph is not well formed: " + sorted.message());
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
  std::vector<Value*> values_;
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
