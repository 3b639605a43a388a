// safetensors encode/decode (safetensors.h). Byte order: the format is little-endian and so is
// every CPU gearbox builds for (static_assert below), so data is copied as it is.
#include "frontend/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "frontend/tensor_impl.h"

namespace gbx::nn::safetensors {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr uint64_t kMaxEmptyDim = uint64_t{1} << 31;
constexpr size_t kMaxRank = 64;  // torch's limit too

const char* format_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::BFloat16:
      return "BF16";
    case DType::Float16:
      return "F16";
  }
  return "?";
}

size_t element_size(DType t) { return gearbox::dtype_size(to_internal(t)); }

template <typename... Args>
[[noreturn]] void invalid(const Args&... args) {
  throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, "safetensors: ", args...));
}

DType parse_dtype(const std::string& name, const std::string& tensor) {
  if (name == "F32") return DType::Float32;
  if (name == "F64") return DType::Float64;
  if (name == "I64") return DType::Int64;
  if (name == "BF16") return DType::BFloat16;
  if (name == "F16") return DType::Float16;
  static const char* const kOtherFormatDtypes[] = {"BOOL", "U8",  "I8",  "U16",     "I16",
                                                   "U32",  "I32", "U64", "F8_E4M3", "F8_E5M2"};
  for (const char* other : kOtherFormatDtypes)
    if (name == other)
      invalid("tensor '", tensor, "' has dtype ", name,
              ", which nn tensors cannot hold (F32, F64, I64, BF16, F16 only)");
  invalid("tensor '", tensor, "' has an unknown dtype '", name.substr(0, 32), "'");
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const nlohmann::json& j, uint64_t data_size) {
  if (!j.is_object()) invalid("entry '", name, "' is not a JSON object");
  if (j.size() != 3 || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
    invalid("entry '", name, "' must have exactly the keys dtype, shape, data_offsets");
  const nlohmann::json &dtype = j["dtype"], &shape = j["shape"], &offsets = j["data_offsets"];
  if (!dtype.is_string()) invalid("entry '", name, "': dtype is not a string");
  Entry e{name, parse_dtype(dtype.get<std::string>(), name), {}, 0, 0};
  if (!shape.is_array()) invalid("entry '", name, "': shape is not an array");
  if (shape.size() > kMaxRank) invalid("entry '", name, "': rank ", shape.size(), " exceeds ", kMaxRank);
  uint64_t numel = 1;
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_unsigned())
      invalid("entry '", name, "': shape holds a ", d.type_name(), ", not a non-negative integer");
    const uint64_t v = d.get<uint64_t>();
    // A dim larger than the data is only possible when another is 0; such an empty tensor still
    // gets no dim beyond 2^31, so that nothing downstream meets a huge extent.
    if (v > data_size && v > kMaxEmptyDim) invalid("entry '", name, "': dimension ", v, " exceeds the data");
    if (__builtin_mul_overflow(numel, v, &numel)) invalid("entry '", name, "': the shape's size overflows");
    e.shape.push_back(static_cast<int64_t>(v));
  }
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    invalid("entry '", name, "': data_offsets is not [begin, end] of non-negative integers");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    invalid("entry '", name, "': data_offsets [", e.begin, ", ", e.end, "] are outside the data (", data_size,
            " bytes)");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, element_size(e.dtype), &bytes) || bytes != e.end - e.begin)
    invalid("entry '", name, "': shape ", shape.dump(), " of ", dtype.get<std::string>(), " needs ", numel, " x ",
            element_size(e.dtype), " bytes but data_offsets span ", e.end - e.begin);
  return e;
}

}  // namespace

std::string encode(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> order(tensors.begin(), tensors.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return element_size(a.second.dtype()) > element_size(b.second.dtype());
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    if (name == "__metadata__")
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                       "safetensors: a tensor cannot be named __metadata__"));
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * element_size(t.dtype());
    header[name] = {
        {"dtype", format_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                     "safetensors: a tensor name or metadata string is not UTF-8: ", e.what()));
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  out.reserve(8 + json.size() + offset);
  out += json;
  for (const auto& [name, t] : order)
    out.append(static_cast<const char*>(t.data()), static_cast<size_t>(t.numel()) * element_size(t.dtype()));
  return out;
}

SafetensorsFile decode(std::string_view bytes) {
  if (bytes.size() < 8) invalid("the file has ", bytes.size(), " bytes, fewer than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8)
    invalid("the header length ", n, " exceeds the ", bytes.size() - 8, " bytes after it (truncated file?)");
  if (n > kMaxHeaderBytes) invalid("the header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) invalid("the header is not valid JSON");
  if (!header.is_object()) invalid("the header is not a JSON object");
  const std::string_view data = bytes.substr(8 + n);
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) invalid("__metadata__ is not a JSON object");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) invalid("__metadata__ value of '", key, "' is not a string");
        out.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, value, data.size()));
  }
  // The ranges must tile the data: sorted by start, each begins where the previous ended and the
  // last ends at the end of the file (no overlap, no hole, no trailing bytes).
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  for (const Entry* e : sorted) {
    if (e->begin != expected)
      invalid("tensor '", e->name, "' starts at byte ", e->begin, " of the data, expected ", expected,
              e->begin < expected ? " (ranges overlap)" : " (a gap)");
    expected = e->end;
  }
  if (expected != data.size())
    invalid("the tensors cover ", expected, " bytes of data but the file holds ", data.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::zeros(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.mutable_data(), data.data() + e.begin, e.end - e.begin);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace gbx::nn::safetensors
