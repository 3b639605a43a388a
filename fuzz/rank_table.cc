// libFuzzer target: bytes -> comm::parse_rank_table, the rank-table JSON that `gearbox launch`
// and the communicators read (ranks, devices, servers, group_list).
#include "comm/rank_table.h"

#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = gearbox::comm::parse_rank_table(std::string(reinterpret_cast<const char*>(data), size), "<fuzz>");
  (void)r;
  return 0;
}
