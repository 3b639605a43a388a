// libFuzzer target: bytes -> plan::load_hardware, `gearbox plan --links FILE.json` (devices per
// node, intra/inter-node bandwidth and latency, the device's peak, memory and efficiency); the
// file is a memfd.
#include <cstdint>

#include "comm/plan/cost_model.h"
#include "fuzz/fuzz_util.h"

static gearbox::fuzz::InputFile* g_file;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  g_file = new gearbox::fuzz::InputFile();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = gearbox::comm::plan::load_hardware(g_file->write(data, size), gearbox::comm::plan::Hardware{});
  (void)r;
  return 0;
}
