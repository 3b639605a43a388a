// libFuzzer target: bytes -> plan::load_network, `gearbox plan --network FILE.json` (a
// transformer's layers, hidden size, heads, vocabulary, sequence, dtype); the file is a memfd.
#include <cstdint>

#include "comm/plan/network.h"
#include "fuzz/fuzz_util.h"

static gearbox::fuzz::InputFile* g_file;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  g_file = new gearbox::fuzz::InputFile();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = gearbox::comm::plan::load_network(g_file->write(data, size));
  (void)r;
  return 0;
}
