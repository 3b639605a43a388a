// CLI input loading and deterministic random inputs.
#include "tools/model_inputs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <random>

#include "base/logging.h"
#include "base/npy.h"

namespace gearbox::cli {

Result<Tensor> random_input(const IoInfo& io, uint64_t sample) {
  if (io.type.kind != ValueType::Kind::Tensor)
    return make_error(ErrorCode::INPUT_MISSING, "input '", io.name, "' is a ", to_string(io.type),
                      "; --random-inputs only makes tensors");
  Dims dims;
  for (const Dim& d : io.type.shape.dims) dims.push_back(d.known() ? d.value : 1);
  DType dt = io.type.dtype == DType::Undefined ? DType::F32 : io.type.dtype;
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dt, dims));
  std::mt19937_64 rng(std::hash<std::string>{}(io.name) ^ 0x9e3779b97f4a7c15ull ^ (sample * 0xbf58476d1ce4e5b9ull));
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

namespace {
bool float_dtype(DType d) { return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64; }

// `t` in `to` (both float dtypes), each element rounded to nearest even.
Result<Tensor> convert_float(const Tensor& t, DType to) {
  GBX_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(to, t.dims()));
  visit_numeric(to, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    if constexpr (std::is_same_v<T, double>) {
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = t.at_double(i);
    } else if constexpr (!std::is_integral_v<T>) {
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(static_cast<float>(t.at_double(i)));
    }
  });
  return out;
}
}  // namespace

void add_input_flags(CLI::App* sub, InputFlags* f, const std::string& random_help) {
  sub->add_option("--input", f->inputs, "NAME=FILE.npy for a model input (repeatable)");
  sub->add_flag("--random-inputs", f->random, random_help);
  sub->add_flag("--npy-allow-trailing-bytes", f->npy.allow_trailing_bytes,
                "Read .npy inputs that have bytes after their data, ignoring them (as numpy does)");
  sub->add_flag("--strict-input-dtype", f->strict_dtype,
                "Refuse a .npy of another float dtype than its input's instead of converting it with a warning");
}

Result<std::map<std::string, Tensor>> load_inputs(const Session& session, const InputFlags& flags) {
  std::map<std::string, Tensor> feeds;
  for (const std::string& spec : flags.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return make_error(ErrorCode::USAGE, "--input '", spec, "' must be NAME=FILE.npy");
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    auto t = read_npy(file, flags.npy);
    if (!t.ok()) return t.status().with_context("input '" + name + "': ");
    Tensor value = std::move(t).value();
    // float32 data for a float16 (or bfloat16) model, and the other ways round: converted, as
    // a user means it, unless --strict-input-dtype (then the session refuses the dtype).
    for (const IoInfo& io : session.inputs())
      if (io.name == name && !flags.strict_dtype && float_dtype(io.type.dtype) && float_dtype(value.dtype()) &&
          io.type.dtype != value.dtype()) {
        const bool narrows = dtype_size(io.type.dtype) < dtype_size(value.dtype()) ||
                             (io.type.dtype == DType::BF16 && value.dtype() == DType::F16);
        GBX_LOG_WARN("INPUT", "input '{}' is {} and {} holds {}: converted{} (--strict-input-dtype refuses instead)",
                     name, dtype_name(io.type.dtype), file, dtype_name(value.dtype()),
                     narrows ? ", each value rounded to the nearest " + std::string(dtype_name(io.type.dtype)) : "");
        GBX_ASSIGN_OR_RETURN(value, convert_float(value, io.type.dtype));
      }
    feeds[name] = std::move(value);
  }
  if (flags.random)
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

namespace {
namespace fs = std::filesystem;

std::vector<fs::path> sorted_entries(const fs::path& dir, bool folders) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (folders ? e.is_directory(ec) : (e.is_regular_file(ec) && e.path().extension() == ".npy"))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One sample: INPUT.npy for every input, from `folder`.
Result<std::map<std::string, Tensor>> read_sample(const std::vector<IoInfo>& inputs, const fs::path& folder,
                                                  const NpyReadOptions& npy) {
  std::map<std::string, Tensor> feeds;
  for (const IoInfo& io : inputs) {
    const fs::path file = folder / (sanitize_file_name(io.name) + ".npy");
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
      return make_error(ErrorCode::USAGE, "calibration sample ", folder.string(), " has no ", file.filename().string(),
                        " for input '", io.name, "': a sample folder holds INPUT.npy for every model input");
    auto t = read_npy(file.string(), npy);
    if (!t.ok()) return t.status().with_context("calibration input '" + io.name + "': ");
    feeds[io.name] = std::move(t).value();
  }
  return feeds;
}
}  // namespace

Result<std::vector<std::map<std::string, Tensor>>> load_calibration(const std::vector<IoInfo>& inputs,
                                                                    const std::string& dir, size_t random,
                                                                    const NpyReadOptions& npy) {
  std::vector<std::map<std::string, Tensor>> samples;
  if (dir.empty()) {
    for (size_t s = 0; s < random; ++s) {
      std::map<std::string, Tensor> feeds;
      for (const IoInfo& io : inputs) {
        GBX_ASSIGN_OR_RETURN(feeds[io.name], random_input(io, s));
      }
      samples.push_back(std::move(feeds));
    }
    return samples;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(ErrorCode::USAGE, "--calibration ", dir,
                      " is not a folder (of .npy files, or of one folder "
                      "of INPUT.npy files per sample)");
  const auto folders = sorted_entries(dir, true);
  const auto files = sorted_entries(dir, false);
  if (!folders.empty()) {
    for (const fs::path& f : folders) {
      GBX_ASSIGN_OR_RETURN(auto feeds, read_sample(inputs, f, npy));
      samples.push_back(std::move(feeds));
    }
  } else if (inputs.size() == 1 && !files.empty()) {
    for (const fs::path& f : files) {
      auto t = read_npy(f.string(), npy);
      if (!t.ok()) return t.status().with_context("calibration sample " + f.string() + ": ");
      samples.push_back({{inputs.front().name, std::move(t).value()}});
    }
  } else if (!files.empty()) {
    GBX_ASSIGN_OR_RETURN(auto feeds, read_sample(inputs, dir, npy));
    samples.push_back(std::move(feeds));
  }
  if (samples.empty())
    return make_error(ErrorCode::USAGE, "--calibration ", dir, " holds no .npy files and no sample folders");
  return samples;
}

}  // namespace gearbox::cli
