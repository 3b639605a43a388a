// .npy format: magic "\x93NUMPY", version, header length, a Python-dict header
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded to 64 bytes, then
// the raw little-endian data. The header is parsed strictly: it comes from outside.
#include "base/npy.h"

#include "base/atomic_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gearbox {
namespace {

struct NpyDescr {
  const char* descr;
  DType dtype;
};
constexpr NpyDescr kDescrs[] = {
    {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16}, {"i1", DType::I8},  {"u1", DType::U8},
    {"i2", DType::I16}, {"u2", DType::U16}, {"i4", DType::I32}, {"u4", DType::U32}, {"i8", DType::I64},
    {"u8", DType::U64}, {"b1", DType::Bool},
};

Status invalid(const std::string& what, const std::string& why) {
  return make_error(ErrorCode::NPY_INVALID, "'", what, "': ", why);
}

// Finds the value text after 'key': in the header dict.
bool find_value(const std::string& h, const std::string& key, size_t* pos) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return false;
  size_t c = h.find(':', k);
  if (c == std::string::npos) return false;
  *pos = c + 1;
  while (*pos < h.size() && h[*pos] == ' ') ++*pos;
  return *pos < h.size();
}

}  // namespace

Result<Tensor> parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return invalid(what, "missing the \\x93NUMPY magic: not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid(what, "truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return invalid(what, "unknown .npy format version " + std::to_string(major));
  }
  if (header_len > bytes.size() - header_start) return invalid(what, "header is longer than the file");
  std::string h = bytes.substr(header_start, header_len);
  if (h.empty() || h.find('{') == std::string::npos || h.find('}') == std::string::npos)
    return invalid(what, "header is not a dict");

  size_t p = 0;
  if (!find_value(h, "descr", &p) || (h[p] != '\'' && h[p] != '"')) return invalid(what, "header has no 'descr'");
  size_t e = h.find(h[p], p + 1);
  if (e == std::string::npos) return invalid(what, "unterminated 'descr'");
  std::string descr = h.substr(p + 1, e - p - 1);
  if (descr.size() < 2) return invalid(what, "bad descr '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  DType dt = DType::Undefined;
  for (const auto& d : kDescrs)
    if (code == d.descr) dt = d.dtype;
  if (dt == DType::Undefined || order == '>')
    return make_error(ErrorCode::NPY_UNSUPPORTED_DTYPE, "'", what, "' has dtype '", descr,
                      "'; gearbox reads little-endian float16/32/64, (u)int8-64 and bool");

  if (!find_value(h, "fortran_order", &p)) return invalid(what, "header has no 'fortran_order'");
  if (h.compare(p, 4, "True") == 0)
    return make_error(ErrorCode::NPY_UNSUPPORTED_DTYPE, "'", what, "' is in Fortran order");
  if (h.compare(p, 5, "False") != 0) return invalid(what, "bad 'fortran_order'");

  if (!find_value(h, "shape", &p) || h[p] != '(') return invalid(what, "header has no 'shape' tuple");
  size_t close = h.find(')', p);
  if (close == std::string::npos) return invalid(what, "unterminated 'shape'");
  Dims dims;
  std::string inner = h.substr(p + 1, close - p - 1);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos) continue;
    item = item.substr(a, b - a + 1);
    if (item.empty() || item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos)
      return invalid(what, "bad dim '" + item + "' in shape");
    dims.push_back(std::stoll(item));
  }
  int64_t n = numel(dims);
  if (n < 0) return invalid(what, "shape overflows");
  const size_t data_start = header_start + header_len;
  const size_t need = static_cast<size_t>(n) * dtype_size(dt);
  if (n > 0 && need / static_cast<size_t>(n) != dtype_size(dt)) return invalid(what, "shape overflows");
  if (bytes.size() - data_start < need)
    return invalid(what, "data is " + std::to_string(bytes.size() - data_start) + " bytes but shape " + to_string(dims) +
                             " needs " + std::to_string(need));
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dt, dims));
  if (need) std::memcpy(t.mutable_raw(), bytes.data() + data_start, need);
  if (dt == DType::Bool) {
    auto* b = t.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) b[i] = b[i] ? 1 : 0;  // normalize: bool must be 0/1
  }
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error(ErrorCode::FILE_NOT_FOUND, "'", path, "' does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::FILE_NOT_FOUND, "cannot open '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  if (bytes.empty()) return make_error(ErrorCode::FILE_EMPTY, "'", path, "' is empty (0 bytes)");
  return parse_npy(bytes, path);
}

std::string serialize_npy(const Tensor& input) {
  Tensor t = input;
  if (t.dtype() == DType::BF16) {
    Tensor f(DType::F32, t.dims());
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.data<BFloat16>()[i]);
    t = f;
  }
  const char* descr = "<f4";
  for (const auto& d : kDescrs)
    if (d.dtype == t.dtype()) descr = d.descr;
  std::string full = std::string(dtype_size(t.dtype()) == 1 ? "|" : "<") + descr;
  std::string shape = "(";
  for (size_t i = 0; i < t.dims().size(); ++i) shape += std::to_string(t.dims()[i]) + (t.dims().size() == 1 ? "," : (i + 1 < t.dims().size() ? ", " : ""));
  shape += ")";
  std::string header = "{'descr': '" + full + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Tensor& t) {
  if (!visit_numeric(t.dtype(), [](auto) {}))
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, "cannot write a ", dtype_name(t.dtype()), " tensor to .npy ('", path, "')");
  return write_file_atomically(path, serialize_npy(t));
}

}  // namespace gearbox
