// .npy format: magic "\x93NUMPY", version, header length, a Python-dict header
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded to 64 bytes, then
// the raw little-endian data. The header is parsed strictly, to the grammar numpy accepts
// (HeaderParser below): it comes from outside.
#include "base/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "base/atomic_file.h"

namespace gearbox {
namespace {

struct NpyDescr {
  const char* descr;
  DType dtype;
};
constexpr NpyDescr kDescrs[] = {
    {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16}, {"i1", DType::I8},
    {"u1", DType::U8},  {"i2", DType::I16}, {"u2", DType::U16}, {"i4", DType::I32},
    {"u4", DType::U32}, {"i8", DType::I64}, {"u8", DType::U64}, {"b1", DType::Bool},
};

Status invalid(const std::string& what, const std::string& why) {
  return make_error(ErrorCode::NPY_INVALID, "'", what, "': ", why);
}

// The header is a Python dict literal, which numpy reads with ast.literal_eval and then checks:
// exactly the keys 'descr', 'fortran_order' and 'shape', a str, a bool and a tuple of ints. This
// reader accepts that grammar and nothing more, so a file numpy refuses is refused here too
// (and one it accepts is read the same way): whitespace, quotes of either kind, a trailing comma.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view h) : h_(h) {}

  struct Fields {
    std::string descr;
    bool structured = false;  // descr is a list of fields
    bool fortran_order = false;
    Dims shape;
  };

  // Fills `out`, or returns why the header is not what numpy accepts.
  std::string parse(Fields* out) {
    skip_space();
    if (!eat('{')) return "header is not a dict";
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    while (!peek('}')) {
      std::string key;
      if (!string_literal(&key)) return "a header key is not a quoted string";
      skip_space();
      if (!eat(':')) return "no ':' after key '" + key + "'";
      skip_space();
      if (key == "descr") {
        if (have_descr) return "key 'descr' appears twice";
        if (peek('[')) {  // a structured dtype's field list: well-formed for numpy, not a tensor
          const size_t end = h_.find(']', pos_);
          if (end == std::string_view::npos) return "unterminated 'descr' list";
          out->structured = true;
          pos_ = end + 1;
        } else if (!string_literal(&out->descr)) {
          return "'descr' is not a string";
        }
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) return "key 'fortran_order' appears twice";
        if (word("True")) out->fortran_order = true;
        else if (word("False")) out->fortran_order = false;
        else return "'fortran_order' is not True or False";
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) return "key 'shape' appears twice";
        std::string why = tuple_of_ints(&out->shape);
        if (!why.empty()) return why;
        have_shape = true;
      } else {
        return "unexpected key '" + key + "' (numpy headers have only descr, fortran_order and shape)";
      }
      skip_space();
      if (eat(',')) {
        skip_space();
        continue;
      }
      if (!peek('}')) return "expected ',' or '}' in the header dict";
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != h_.size()) return "text after the header dict";
    if (!have_descr) return "header has no 'descr'";
    if (!have_order) return "header has no 'fortran_order'";
    if (!have_shape) return "header has no 'shape'";
    return {};
  }

 private:
  bool peek(char c) const { return pos_ < h_.size() && h_[pos_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void skip_space() {
    while (pos_ < h_.size() && (h_[pos_] == ' ' || h_[pos_] == '\t' || h_[pos_] == '\n' || h_[pos_] == '\r')) ++pos_;
  }
  // A keyword not followed by more identifier characters ("True", not "Truex").
  bool word(std::string_view w) {
    if (h_.substr(pos_, w.size()) != w) return false;
    const size_t after = pos_ + w.size();
    if (after < h_.size() && (std::isalnum(static_cast<unsigned char>(h_[after])) || h_[after] == '_')) return false;
    pos_ = after;
    return true;
  }
  // 'text' or "text" without escapes (no numpy header field needs one).
  bool string_literal(std::string* out) {
    if (!peek('\'') && !peek('"')) return false;
    const char q = h_[pos_++];
    const size_t end = h_.find(q, pos_);
    if (end == std::string_view::npos) return false;
    std::string_view body = h_.substr(pos_, end - pos_);
    if (body.find('\\') != std::string_view::npos || body.find('\n') != std::string_view::npos) return false;
    *out = std::string(body);
    pos_ = end + 1;
    return true;
  }
  // A Python int literal as literal_eval reads it: no leading zeros, no sign.
  bool int_literal(int64_t* v) {
    const size_t begin = pos_;
    while (pos_ < h_.size() && std::isdigit(static_cast<unsigned char>(h_[pos_]))) ++pos_;
    const size_t n = pos_ - begin;
    if (n == 0 || n > 18 || (n > 1 && h_[begin] == '0')) return false;
    *v = std::stoll(std::string(h_.substr(begin, n)));
    return true;
  }
  // () or (a,) or (a, b[, ...][,]): "(2)" is an int in Python, not a tuple.
  std::string tuple_of_ints(Dims* dims) {
    if (!eat('(')) return "'shape' is not a tuple";
    skip_space();
    if (eat(')')) return {};
    bool trailing_comma = false;
    while (true) {
      int64_t d = 0;
      if (!int_literal(&d)) return "'shape' holds something other than non-negative ints";
      dims->push_back(d);
      skip_space();
      trailing_comma = eat(',');
      skip_space();
      if (eat(')')) break;
      if (!trailing_comma) return "unterminated 'shape' tuple";
    }
    if (dims->size() == 1 && !trailing_comma) return "'shape' (n) is not a tuple: a 1-tuple is written (n,)";
    return {};
  }

  std::string_view h_;
  size_t pos_ = 0;
};

}  // namespace

Result<Tensor> parse_npy(const std::string& bytes, const std::string& what, const NpyReadOptions& options) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return invalid(what, "missing the \\x93NUMPY magic: not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  size_t header_len = 0, header_start = 0;
  if (minor != 0 || major < 1 || major > 3)
    return invalid(what, "unknown .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                             " (numpy writes 1.0, 2.0 and 3.0)");
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else {
    if (bytes.size() < 12) return invalid(what, "truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  }
  if (header_len > bytes.size() - header_start) return invalid(what, "header is longer than the file");
  HeaderParser::Fields f;
  if (std::string why = HeaderParser(std::string_view(bytes).substr(header_start, header_len)).parse(&f); !why.empty())
    return invalid(what, why);

  if (f.structured)
    return make_error(ErrorCode::NPY_UNSUPPORTED_DTYPE, "'", what, "' holds a structured dtype (named fields)");
  const std::string& descr = f.descr;
  if (descr.size() < 2) return invalid(what, "bad descr '" + descr + "'");
  const char order = descr[0];
  const std::string code = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return invalid(what, "bad descr '" + descr + "': no byte-order character");
  DType dt = DType::Undefined;
  for (const auto& d : kDescrs)
    if (code == d.descr) dt = d.dtype;
  if (dt == DType::Undefined)
    return make_error(ErrorCode::NPY_UNSUPPORTED_DTYPE, "'", what, "' has dtype '", descr,
                      "'; gearbox reads float16/32/64, (u)int8-64 and bool");
  // Big-endian data ('>f4', written on or for a big-endian machine) is swapped on load, as
  // numpy does; one-byte types have no byte order.
  const bool swap_bytes = order == '>' && dtype_size(dt) > 1;
  if (f.fortran_order && f.shape.size() > 1)  // a 0-d or 1-d array is the same in either order
    return make_error(ErrorCode::NPY_UNSUPPORTED_DTYPE, "'", what, "' is in Fortran order");

  const Dims& dims = f.shape;
  int64_t n = numel(dims);
  if (n < 0) return invalid(what, "shape overflows");
  const size_t data_start = header_start + header_len;
  const size_t need = static_cast<size_t>(n) * dtype_size(dt);
  if (n > 0 && need / static_cast<size_t>(n) != dtype_size(dt)) return invalid(what, "shape overflows");
  const size_t have = bytes.size() - data_start;
  if (have < need)
    return invalid(what, "data is " + std::to_string(have) + " bytes but shape " + to_string(dims) + " needs " +
                             std::to_string(need));
  if (have > need && !options.allow_trailing_bytes)
    return invalid(what, std::to_string(have - need) + " bytes follow the " + std::to_string(need) +
                             " bytes of shape " + to_string(dims) +
                             " (a truncated rewrite or a concatenated file?); pass --npy-allow-trailing-bytes to "
                             "ignore them");
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dt, dims));
  if (need) std::memcpy(t.mutable_raw(), bytes.data() + data_start, need);
  if (swap_bytes) {
    auto* p = static_cast<unsigned char*>(t.mutable_raw());
    const size_t w = dtype_size(dt);
    for (size_t i = 0; i < need; i += w) std::reverse(p + i, p + i + w);
  }
  if (dt == DType::Bool) {
    auto* b = t.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) b[i] = b[i] ? 1 : 0;  // normalize: bool must be 0/1
  }
  return t;
}

Result<Tensor> read_npy(const std::string& path, const NpyReadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error(ErrorCode::FILE_NOT_FOUND, "'", path, "' does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::FILE_NOT_FOUND, "cannot open '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  if (bytes.empty()) return make_error(ErrorCode::FILE_EMPTY, "'", path, "' is empty (0 bytes)");
  return parse_npy(bytes, path, options);
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
  for (size_t i = 0; i < t.dims().size(); ++i)
    shape += std::to_string(t.dims()[i]) + (t.dims().size() == 1 ? "," : (i + 1 < t.dims().size() ? ", " : ""));
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
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, "cannot write a ", dtype_name(t.dtype()), " tensor to .npy ('",
                      path, "')");
  return write_file_atomically(path, serialize_npy(t));
}

}  // namespace gearbox
