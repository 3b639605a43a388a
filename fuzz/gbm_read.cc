// libFuzzer target: bytes -> gbm::read_bytes, the .gbm loader (header, checksum, FlatBuffers
// verification, every index/offset/dtype/size, scopes of subgraph values, topological order).
// A fuzzer rarely fixes up a checksum, so the target repairs it for half the inputs (the last
// input byte chooses): otherwise nearly every mutation would stop at GBM_CHECKSUM_MISMATCH and
// the metadata checks behind it would go untested.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_util.h"
#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_reader.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool repair = data[size - 1] & 1;
  std::string bytes(reinterpret_cast<const char*>(data), size - 1);
  if (repair && bytes.size() >= gearbox::gbm::kHeaderSize) {
    uint64_t sum =
        gearbox::gbm::gbm_checksum(reinterpret_cast<const uint8_t*>(bytes.data()) + gearbox::gbm::kHeaderSize,
                                   bytes.size() - gearbox::gbm::kHeaderSize);
    std::memcpy(bytes.data() + 48, &sum, 8);
  }
  auto model = gearbox::gbm::read_bytes(bytes.data(), bytes.size());
  (void)model;
  return 0;
}
