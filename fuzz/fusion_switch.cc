// libFuzzer target: bytes -> read_fusion_switch_file, the --fusion-switch FILE.json reader
// ({"pass": "on" | "off", ...}); the file is a memfd holding the input.
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "graph/optimizer.h"

static gearbox::fuzz::InputFile* g_file;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  g_file = new gearbox::fuzz::InputFile();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = gearbox::read_fusion_switch_file(g_file->write(data, size));
  (void)r;
  return 0;
}
