// The safetensors layout (github.com/huggingface/safetensors, "Format"): the bytes of a file,
// in and out, independent of where they are stored. checkpoint.cc puts them in files; the fuzz
// target (fuzz/checkpoint_read.cc) feeds decode() arbitrary bytes.
#pragma once

#include <string>
#include <string_view>

#include "gearbox/nn.hpp"

namespace gbx::nn::safetensors {

// Header JSON larger than this is refused before it is parsed (the safetensors package's own
// limit is 100 MB).
inline constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// The file's bytes: tensors ordered by element size (largest first) then name, so that every
// tensor's data starts aligned to its element size; the header is padded with spaces so that the
// data starts at a multiple of 8. INVALID_ARGUMENT for a name that is "__metadata__" or not UTF-8.
std::string encode(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata);

// Parses and checks everything: the header length against the size, the JSON's shape, dtype
// names, shapes, byte ranges (in range, not overlapping, covering the data exactly, each the
// shape's size). CHECKPOINT_INVALID, saying what is wrong, on any problem; never reads out of
// bounds, whatever the bytes.
SafetensorsFile decode(std::string_view bytes);

}  // namespace gbx::nn::safetensors
