// libFuzzer target: bytes -> import_onnx_bytes, the path of every .onnx `gearbox run`, compile
// and serve load (protobuf parse, onnx's checker and shape inference, initializers, attributes,
// subgraphs, external data, topological sort). External data is looked up in a folder holding
// one small file, so that offsets, lengths and paths (.., absolute, symlinks) into it are tried.
// A model that imports is also read by gearbox plan's transformer recognizer (tools/plan_model.h),
// which walks its shapes and initializers. An error Status is a correct answer; only a crash or a
// sanitizer report is a finding.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_util.h"
#include "graph/onnx_importer.h"
#include "tools/plan_model.h"

namespace fs = std::filesystem;

static std::string g_base_dir;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  g_base_dir = (fs::temp_directory_path() / ("gearbox-fuzz-onnx-" + std::to_string(getpid()))).string();
  fs::create_directories(g_base_dir);
  std::ofstream(g_base_dir + "/weights.bin", std::ios::binary) << std::string(4096, '\x3f');
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = gearbox::import_onnx_bytes(bytes, g_base_dir);
  if (model.ok()) (void)gearbox::cli::transformer_from_model(*model, 0);
  return 0;
}
