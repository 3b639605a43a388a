// nn::save_checkpoint / load_checkpoint and the plain safetensors file functions (nn.hpp,
// "checkpoints"): which names go where in the file, and the match against the module, optimizer
// scheduler and loss scaler, checked in full before anything is written into them.
#include <cstring>
#include <fstream>
#include <optional>
#include <set>

#include "base/atomic_file.h"
#include "frontend/checkpoint/safetensors.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_amp.hpp"

namespace gbx::nn {
namespace {

constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kSchedulerPrefix = "scheduler.";
constexpr const char* kScalerPrefix = "scaler.";
constexpr const char* kReservedMetadataPrefix = "gearbox.";
constexpr const char* kFormatVersionKey = "gearbox.format_version";
constexpr const char* kOptimizerKindKey = "gearbox.optimizer";
constexpr const char* kFormatVersion = "1";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Optimizer, scheduler or loss scaler state, not the module's.
bool is_training_state(const std::string& name) {
  return starts_with(name, kOptimizerPrefix) || starts_with(name, kSchedulerPrefix) || starts_with(name, kScalerPrefix);
}

template <typename... Args>
[[noreturn]] void checkpoint_mismatch(const Args&... args) {
  throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, args...));
}

// The entries under `prefix`, with the prefix taken off.
std::map<std::string, Tensor> under(const std::map<std::string, Tensor>& all, const char* prefix) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : all)
    if (starts_with(name, prefix)) out.emplace(name.substr(std::string(prefix).size()), t);
  return out;
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw_status(gearbox::make_error(gearbox::ErrorCode::FILE_NOT_FOUND, "checkpoint '", path, "' cannot be opened"));
  const std::streamoff size = in.tellg();
  if (size < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::FILE_NOT_FOUND, "checkpoint '", path, "' cannot be read"));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size))
    throw_status(gearbox::make_error(gearbox::ErrorCode::FILE_NOT_FOUND, "checkpoint '", path, "' cannot be read"));
  return bytes;
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  throw_if_error(gearbox::write_file_atomically(path, safetensors::encode(tensors, metadata)));
}

SafetensorsFile load_safetensors(const std::string& path) { return safetensors::decode(read_whole_file(path)); }

void save_checkpoint(const std::string& path, const Module& module, const Optimizer* optimizer,
                     const std::map<std::string, std::string>& metadata, const LRScheduler* scheduler,
                     const LossScaler* scaler) {
  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : metadata) {
    if (starts_with(key, kReservedMetadataPrefix))
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "save_checkpoint: metadata key '", key,
                                       "' is reserved (keys starting with 'gearbox.' are the format's)"));
    meta[key] = value;
  }
  meta.insert_or_assign(kFormatVersionKey, std::string(kFormatVersion));
  std::map<std::string, Tensor> tensors = module.state_dict();
  for (const auto& [name, t] : tensors)
    if (is_training_state(name))
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "save_checkpoint: the module's '", name,
                                       "' would collide with the optimizer's, scheduler's or loss scaler's entries"));
  if (optimizer) {
    meta[kOptimizerKindKey] = optimizer->kind();
    for (auto& [name, t] : optimizer->state_dict()) tensors.emplace(kOptimizerPrefix + name, std::move(t));
  }
  if (scheduler)
    for (auto& [name, t] : scheduler->state_dict()) tensors.emplace(kSchedulerPrefix + name, std::move(t));
  if (scaler)
    for (auto& [name, t] : scaler->state_dict()) tensors.emplace(kScalerPrefix + name, std::move(t));
  save_safetensors(path, tensors, meta);
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, Module& module, Optimizer* optimizer,
                                                   bool strict, LRScheduler* scheduler, LossScaler* scaler) {
  SafetensorsFile file = load_safetensors(path);
  auto version = file.metadata.find(kFormatVersionKey);
  // A file without the key is a plain safetensors state dict (e.g. written from Python): fine for
  // the module; a version from the future is not.
  if (version != file.metadata.end() && version->second != kFormatVersion)
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, "checkpoint '", path,
                                     "' has format version ", version->second.substr(0, 32),
                                     "; this gearbox reads version ", kFormatVersion));

  // Module: every key checked before any value is copied.
  std::map<std::string, Tensor> mine = module.state_dict();
  std::vector<std::pair<Tensor, Tensor>> copies;  // (module's, file's)
  for (const auto& [name, dst] : mine) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      if (strict)
        checkpoint_mismatch("checkpoint '", path, "' has no '", name, "', which the module has (", dst.describe(), ")");
      continue;
    }
    if (it->second.shape() != dst.shape() || it->second.dtype() != dst.dtype())
      checkpoint_mismatch("checkpoint '", path, "': '", name, "' is ", it->second.describe(), " in the file but ",
                          dst.describe(), " in the module");
    copies.emplace_back(dst, it->second);
  }
  if (strict)
    for (const auto& [name, t] : file.tensors)
      if (!is_training_state(name) && !mine.count(name))
        checkpoint_mismatch("checkpoint '", path, "' has '", name, "' (", t.describe(),
                            "), which the module does not have");

  // Optimizer, scheduler and scaler validate their whole state before they take it; the module's copy,
  // which cannot fail, comes last.
  std::optional<std::map<std::string, Tensor>> optimizer_previous;
  if (optimizer) {
    std::map<std::string, Tensor> state = under(file.tensors, kOptimizerPrefix);
    auto kind = file.metadata.find(kOptimizerKindKey);
    if (kind == file.metadata.end() && state.empty()) {
      if (strict)
        checkpoint_mismatch("checkpoint '", path, "' has no optimizer state for the ", optimizer->kind(), " given");
    } else {
      if (kind == file.metadata.end() || kind->second != optimizer->kind())
        checkpoint_mismatch("checkpoint '", path, "' holds the state of optimizer ",
                            kind == file.metadata.end() ? std::string("(unnamed)") : kind->second.substr(0, 32),
                            ", not of the ", optimizer->kind(), " given");
      optimizer_previous = optimizer->state_dict();
      optimizer->load_state_dict(state);
    }
  }
  std::optional<std::map<std::string, Tensor>> scheduler_previous;
  // Leaves the optimizer and scheduler as they were when a later part fails.
  auto restore = [&] {
    if (optimizer_previous) optimizer->load_state_dict(*optimizer_previous);
    if (scheduler_previous) scheduler->load_state_dict(*scheduler_previous);
  };
  if (scheduler) {
    std::map<std::string, Tensor> state = under(file.tensors, kSchedulerPrefix);
    if (!state.empty()) {
      try {
        scheduler_previous = scheduler->state_dict();
        scheduler->load_state_dict(state);
      } catch (...) {
        scheduler_previous.reset();
        restore();
        throw;
      }
    } else if (strict) {
      restore();
      checkpoint_mismatch("checkpoint '", path, "' has no scheduler state");
    }
  }
  if (scaler) {
    std::map<std::string, Tensor> state = under(file.tensors, kScalerPrefix);
    try {
      if (!state.empty()) scaler->load_state_dict(state);
      else if (strict) checkpoint_mismatch("checkpoint '", path, "' has no loss scaler state");
    } catch (...) {
      restore();
      throw;
    }
  }
  for (auto& [dst, src] : copies) {
    const size_t bytes = static_cast<size_t>(src.numel()) * gearbox::dtype_size(to_internal(src.dtype()));
    if (bytes) std::memcpy(dst.mutable_data(), src.data(), bytes);
  }
  return file.metadata;
}

}  // namespace gbx::nn
