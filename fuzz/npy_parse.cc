// libFuzzer target: bytes -> parse_npy, the .npy reader behind `gearbox run --input` and
// --output-dir comparisons (magic, versions 1-3, the header dict, dtype, shape, data size), with
// and without allow_trailing_bytes (the last input byte chooses).
#include <cstdint>
#include <string>

#include "base/npy.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  gearbox::NpyReadOptions options;
  options.allow_trailing_bytes = data[size - 1] & 1;
  auto t = gearbox::parse_npy(std::string(reinterpret_cast<const char*>(data), size - 1), "<fuzz>", options);
  (void)t;
  return 0;
}
