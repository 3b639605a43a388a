// libFuzzer target: bytes -> the checkpoint reader (src/frontend/checkpoint): safetensors::decode
// (header length, JSON, dtypes, shapes, offsets tiling the data), then for files it accepts,
// load_checkpoint into a fixed small model and SGD-momentum optimizer (the key, shape and
// optimizer-state checks) and an encode/decode round trip. Beyond a crash or sanitizer report,
// an error code other than the reader's own (CHECKPOINT_INVALID, CHECKPOINT_MISMATCH) or a round
// trip that changes the file's contents aborts.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "frontend/checkpoint/safetensors.h"
#include "fuzz/fuzz_util.h"
#include "gearbox/nn.hpp"

namespace nn = gbx::nn;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gearbox::fuzz::InputFile input;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  nn::SafetensorsFile file;
  try {
    file = nn::safetensors::decode(bytes);
  } catch (const nn::Error& e) {
    if (e.code() != "CHECKPOINT_INVALID") std::abort();
    return 0;
  }
  // What decode accepted encodes and decodes to the same tensors and metadata.
  nn::SafetensorsFile again = nn::safetensors::decode(nn::safetensors::encode(file.tensors, file.metadata));
  if (again.metadata != file.metadata || again.tensors.size() != file.tensors.size()) std::abort();
  for (const auto& [name, t] : file.tensors) {
    const nn::Tensor& u = again.tensors.at(name);
    const size_t n = static_cast<size_t>(t.numel()) * (t.dtype() == nn::DType::Float32 ? 4 : 8);
    if (u.dtype() != t.dtype() || u.shape() != t.shape() || (n && std::memcmp(u.data(), t.data(), n) != 0))
      std::abort();
  }
  // The seeds (fuzz/corpus/checkpoint_read) hold this model's and optimizer's checkpoint.
  nn::Sequential net({std::make_shared<nn::Linear>(2, 2)});
  nn::SGD opt(net.parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  for (bool strict : {true, false}) {
    try {
      nn::load_checkpoint(input.write(data, size), net, &opt, strict);
    } catch (const nn::Error& e) {
      if (e.code() != "CHECKPOINT_INVALID" && e.code() != "CHECKPOINT_MISMATCH") std::abort();
    }
  }
  return 0;
}
