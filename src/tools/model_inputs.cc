// CLI input loading and deterministic random inputs.
#include "tools/model_inputs.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "base/npy.h"

namespace gearbox::cli {

Result<Tensor> random_input(const IoInfo& io) {
  if (io.type.kind != ValueType::Kind::Tensor)
    return make_error(ErrorCode::INPUT_MISSING, "input '", io.name, "' is a ", to_string(io.type),
                      "; --random-inputs only makes tensors");
  Dims dims;
  for (const Dim& d : io.type.shape.dims) dims.push_back(d.known() ? d.value : 1);
  DType dt = io.type.dtype == DType::Undefined ? DType::F32 : io.type.dtype;
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dt, dims));
  std::mt19937_64 rng(std::hash<std::string>{}(io.name) ^ 0x9e3779b97f4a7c15ull);
  std::string lower = io.name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool mask = lower.find("mask") != std::string::npos;
  // Token-type / segment ids index tiny tables (often 2 rows): keep them 0.
  const bool segment = lower.find("type") != std::string::npos || lower.find("segment") != std::string::npos;
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> ids(0, 63);
  if (dt == DType::String) {
    for (auto& s : t.strings()) s = "gearbox";
    return t;
  }
  bool ok = visit_numeric(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) p[i] = true;
      else if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(mask ? 1 : segment ? 0 : ids(rng));
      else p[i] = static_cast<T>(static_cast<float>(uni(rng)));
    }
  });
  if (!ok) return make_error(ErrorCode::DTYPE_UNSUPPORTED, "cannot make random data of dtype ", dtype_name(dt));
  return t;
}

Result<std::map<std::string, Tensor>> load_inputs(const Session& session, const std::vector<std::string>& specs,
                                                  bool random, const NpyReadOptions& npy) {
  std::map<std::string, Tensor> feeds;
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return make_error(ErrorCode::USAGE, "--input '", spec, "' must be NAME=FILE.npy");
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    auto t = read_npy(file, npy);
    if (!t.ok()) return t.status().with_context("input '" + name + "': ");
    feeds[name] = std::move(t).value();
  }
  if (random)
    for (const IoInfo& io : session.inputs())
      if (!feeds.count(io.name)) {
        GBX_ASSIGN_OR_RETURN(feeds[io.name], random_input(io));
      }
  return feeds;
}

std::string sanitize_file_name(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

}  // namespace gearbox::cli
