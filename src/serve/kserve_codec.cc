// KServe v2 request parsing and response encoding (JSON tensors + binary tensor data).
#include "serve/kserve_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace gearbox::serve {

using json = nlohmann::json;

namespace {

struct DatatypeName {
  std::string_view name;
  DType dtype;
};
constexpr DatatypeName kDatatypes[] = {
    {"BOOL", DType::Bool},  {"UINT8", DType::U8}, {"UINT16", DType::U16}, {"UINT32", DType::U32},
    {"UINT64", DType::U64}, {"INT8", DType::I8},  {"INT16", DType::I16},  {"INT32", DType::I32},
    {"INT64", DType::I64},  {"FP16", DType::F16}, {"BF16", DType::BF16},  {"FP32", DType::F32},
    {"FP64", DType::F64},
};

// Nested arrays are accepted as well as flat ones (both are in the protocol); the depth limit
// keeps a hostile body from recursing deeply.
constexpr int kMaxDataDepth = 64;

Status flatten(const json& j, std::vector<const json*>* out, int depth, const std::string& name) {
  if (!j.is_array()) {
    out->push_back(&j);
    return Status::OK();
  }
  if (depth > kMaxDataDepth)
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, "input '", name, "': data nests deeper than ", kMaxDataDepth,
                      " arrays");
  for (const auto& e : j) GBX_RETURN_IF_ERROR(flatten(e, out, depth + 1, name));
  return Status::OK();
}

// One JSON element into element i of a T buffer; false when it is not a value of T.
template <typename T>
bool store(const json& e, T* dst) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!e.is_boolean()) return false;
    *dst = e.get<bool>();
    return true;
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                       std::is_same_v<T, BFloat16>) {
    if (!e.is_number()) return false;
    double v = e.get<double>();
    // JSON has no inf/nan, so a non-finite result means the number overflowed the type
    // (1e39 as FP32, 70000 as FP16, 1e400 as FP64): refuse it rather than store inf.
    // Values that round to the type's largest finite value (65519 as FP16) are kept, as numpy does.
    if (!std::isfinite(v)) return false;
    if constexpr (std::is_same_v<T, double>) {
      *dst = v;
    } else if constexpr (std::is_same_v<T, float>) {
      if (!std::isfinite(static_cast<float>(v))) return false;
      *dst = static_cast<float>(v);
    } else {
      T narrowed(static_cast<float>(v));
      if (!std::isfinite(static_cast<float>(narrowed))) return false;
      *dst = narrowed;
    }
    return true;
  } else {
    // Integers: JSON integers in range, or floats with an integral value (Python clients
    // often send 3.0).
    if (e.is_number_unsigned()) {
      uint64_t v = e.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      *dst = static_cast<T>(v);
      return true;
    }
    if (e.is_number_integer()) {
      int64_t v = e.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        if (v < 0 || static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      } else {
        if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            v > static_cast<int64_t>(std::numeric_limits<T>::max()))
          return false;
      }
      *dst = static_cast<T>(v);
      return true;
    }
    if (e.is_number_float()) {
      double v = e.get<double>();
      if (!std::isfinite(v) || v != std::floor(v)) return false;
      // The upper bound is 2^digits, exclusive: it is exact in a double, whereas max() of a
      // 64-bit type is not (double(INT64_MAX) rounds up to 2^63, so 9223372036854775808.0
      // passed a `v > max()` check and its cast was undefined; found by fuzz/kserve_json).
      if (v < static_cast<double>(std::numeric_limits<T>::min()) ||
          v >= std::ldexp(1.0, std::numeric_limits<T>::digits))
        return false;
      *dst = static_cast<T>(v);
      return true;
    }
    return false;
  }
}

// Reads a field that must be a JSON object's string.
Result<std::string> string_field(const json& obj, const char* field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_string())
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, where, " needs a string \"", field, "\"");
  return it->get<std::string>();
}

bool bool_parameter(const json& obj, const char* name) {
  auto p = obj.find("parameters");
  if (p == obj.end() || !p->is_object()) return false;
  auto it = p->find(name);
  return it != p->end() && it->is_boolean() && it->get<bool>();
}

struct InputSpec {
  std::string name;
  DType dtype;
  Dims dims;
  int64_t numel;
  const json* data = nullptr;           // JSON data, or
  std::optional<uint64_t> binary_size;  // binary_data_size
};

Result<InputSpec> parse_input_spec(const json& in, size_t index) {
  std::string where = "inputs[" + std::to_string(index) + "]";
  if (!in.is_object()) return make_error(ErrorCode::SERVE_REQUEST_INVALID, where, " must be an object");
  InputSpec s;
  GBX_ASSIGN_OR_RETURN(s.name, string_field(in, "name", where));
  where = "input '" + s.name + "'";
  GBX_ASSIGN_OR_RETURN(std::string datatype, string_field(in, "datatype", where));
  s.dtype = dtype_from_kserve(datatype);
  if (s.dtype == DType::Undefined)
    return make_error(ErrorCode::SERVE_DATATYPE_UNKNOWN, where, " has datatype \"", datatype,
                      "\"; gearbox serves BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, "
                      "FP32, FP64");
  auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array())
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, where, " needs a \"shape\" array");
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return make_error(ErrorCode::SERVE_REQUEST_INVALID, where, " has shape ", shape->dump(),
                        "; dims must be non-negative integers");
    s.dims.push_back(d.get<int64_t>());
  }
  s.numel = gearbox::numel(s.dims);
  if (s.numel < 0)
    return make_error(ErrorCode::SERVE_TENSOR_DATA_INVALID, where, " has shape ", to_string(s.dims),
                      " whose element count overflows");
  auto params = in.find("parameters");
  if (params != in.end() && params->is_object()) {
    auto b = params->find("binary_data_size");
    if (b != params->end()) {
      if (!b->is_number_unsigned() && !(b->is_number_integer() && b->get<int64_t>() >= 0))
        return make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, where,
                          " has a binary_data_size that is not a non-negative integer");
      s.binary_size = b->get<uint64_t>();
    }
  }
  auto data = in.find("data");
  if (data != in.end()) s.data = &*data;
  if (s.binary_size && s.data)
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, where, " has both \"data\" and binary_data_size");
  if (!s.binary_size && !s.data)
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, where,
                      " needs \"data\" or a binary_data_size parameter with binary tensor data");
  return s;
}

Result<Tensor> tensor_from_json(const InputSpec& s) {
  std::vector<const json*> elems;
  GBX_RETURN_IF_ERROR(flatten(*s.data, &elems, 0, s.name));
  if (static_cast<int64_t>(elems.size()) != s.numel)
    return make_error(ErrorCode::SERVE_TENSOR_DATA_INVALID, "input '", s.name, "' has shape ", to_string(s.dims), " (",
                      s.numel, " elements) but ", elems.size(), " data elements");
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate_uninitialized(s.dtype, s.dims));
  Status st;
  visit_numeric(s.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = t.data<T>();
    for (size_t i = 0; i < elems.size(); ++i) {
      if (!store<T>(*elems[i], dst + i)) {
        st = make_error(ErrorCode::SERVE_TENSOR_DATA_INVALID, "input '", s.name, "': element ", i, " (",
                        elems[i]->dump(), ") is not a ", kserve_datatype(s.dtype), " value");
        return;
      }
    }
  });
  if (!st.ok()) return st;
  return t;
}

json json_data(const Tensor& t) {
  json data = json::array();
  visit_numeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = t.data<T>();
    auto& arr = data.get_ref<json::array_t&>();
    arr.reserve(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        arr.emplace_back(static_cast<float>(src[i]));
      else arr.emplace_back(src[i]);
    }
  });
  return data;
}

}  // namespace

DType dtype_from_kserve(std::string_view name) {
  for (const auto& d : kDatatypes)
    if (d.name == name) return d.dtype;
  return DType::Undefined;
}

std::string_view kserve_datatype(DType t) {
  for (const auto& d : kDatatypes)
    if (d.dtype == t) return d.name;
  return "";
}

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> header_length) {
  std::string_view head = body, binary;
  if (header_length) {
    if (*header_length > body.size())
      return make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "Inference-Header-Content-Length is ", *header_length,
                        " but the body has only ", body.size(), " bytes");
    head = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  json j = json::parse(head.begin(), head.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, "the request",
                      header_length ? " header (first Inference-Header-Content-Length bytes)" : " body",
                      " is not valid JSON");
  if (!j.is_object()) return make_error(ErrorCode::SERVE_REQUEST_INVALID, "the request must be a JSON object");

  InferRequest req;
  if (auto id = j.find("id"); id != j.end()) {
    if (!id->is_string()) return make_error(ErrorCode::SERVE_REQUEST_INVALID, "\"id\" must be a string");
    req.id = id->get<std::string>();
  }
  req.binary_outputs_default = bool_parameter(j, "binary_data_output");

  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array())
    return make_error(ErrorCode::SERVE_REQUEST_INVALID, "the request needs an \"inputs\" array");
  size_t offset = 0;  // into the binary section, consumed in input order
  for (size_t i = 0; i < inputs->size(); ++i) {
    GBX_ASSIGN_OR_RETURN(InputSpec s, parse_input_spec((*inputs)[i], i));
    if (req.inputs.count(s.name))
      return make_error(ErrorCode::SERVE_REQUEST_INVALID, "input '", s.name, "' is given twice");
    Tensor t;
    if (s.binary_size) {
      if (!header_length)
        return make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "input '", s.name,
                          "' has binary_data_size but the request has no Inference-Header-Content-Length header");
      const uint64_t expect = static_cast<uint64_t>(s.numel) * dtype_size(s.dtype);
      if (*s.binary_size != expect)
        return make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "input '", s.name, "' (", kserve_datatype(s.dtype), " ",
                          to_string(s.dims), ") needs ", expect, " bytes but binary_data_size is ", *s.binary_size);
      if (*s.binary_size > binary.size() - offset)
        return make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "input '", s.name, "' needs ", *s.binary_size,
                          " bytes of binary data but only ", binary.size() - offset, " remain in the body");
      GBX_ASSIGN_OR_RETURN(t, Tensor::allocate_uninitialized(s.dtype, s.dims));
      if (expect) std::memcpy(t.mutable_raw(), binary.data() + offset, expect);
      if (s.dtype == DType::Bool) {
        // Any non-zero byte is true; normalising keeps bool loads well defined.
        auto* b = static_cast<unsigned char*>(t.mutable_raw());
        for (uint64_t k = 0; k < expect; ++k) b[k] = b[k] ? 1 : 0;
      }
      offset += expect;
    } else {
      GBX_ASSIGN_OR_RETURN(t, tensor_from_json(s));
    }
    req.inputs.emplace(s.name, std::move(t));
  }
  if (offset != binary.size())
    return make_error(ErrorCode::SERVE_BINARY_DATA_INVALID, "the body has ", binary.size(),
                      " bytes of binary data but the inputs' binary_data_size add up to ", offset);

  if (auto outs = j.find("outputs"); outs != j.end()) {
    if (!outs->is_array()) return make_error(ErrorCode::SERVE_REQUEST_INVALID, "\"outputs\" must be an array");
    for (size_t i = 0; i < outs->size(); ++i) {
      const json& o = (*outs)[i];
      std::string where = "outputs[" + std::to_string(i) + "]";
      if (!o.is_object()) return make_error(ErrorCode::SERVE_REQUEST_INVALID, where, " must be an object");
      GBX_ASSIGN_OR_RETURN(std::string name, string_field(o, "name", where));
      bool binary_flag = req.binary_outputs_default;
      if (auto p = o.find("parameters"); p != o.end() && p->is_object()) {
        if (auto b = p->find("binary_data"); b != p->end() && b->is_boolean()) binary_flag = b->get<bool>();
      }
      req.outputs.push_back({std::move(name), binary_flag});
    }
  }
  return req;
}

EncodedResponse encode_infer_response(const std::string& model, const std::string& version, const std::string& id,
                                      const std::vector<NamedOutput>& outputs) {
  json j{{"model_name", model}, {"model_version", version}};
  if (!id.empty()) j["id"] = id;
  json outs = json::array();
  std::string binary;
  bool any_binary = false;
  for (const auto& o : outputs) {
    json e{{"name", o.name}, {"datatype", std::string(kserve_datatype(o.tensor.dtype()))}, {"shape", o.tensor.dims()}};
    if (o.binary) {
      any_binary = true;
      e["parameters"] = {{"binary_data_size", o.tensor.nbytes()}};
      binary.append(static_cast<const char*>(o.tensor.raw()), o.tensor.nbytes());
    } else {
      e["data"] = json_data(o.tensor);
    }
    outs.push_back(std::move(e));
  }
  j["outputs"] = std::move(outs);
  EncodedResponse r;
  r.body = j.dump();
  if (any_binary) {
    r.header_length = r.body.size();
    r.body += binary;
  }
  return r;
}

}  // namespace gearbox::serve
