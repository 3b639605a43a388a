// libFuzzer target: bytes -> serve::parse_infer_request without Inference-Header-Content-Length:
// a KServe v2 JSON request body as `gearbox serve` receives it (inputs, datatypes, shapes, data,
// parameters, requested outputs).
#include <cstdint>
#include <optional>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "serve/kserve_codec.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r =
      gearbox::serve::parse_infer_request(std::string_view(reinterpret_cast<const char*>(data), size), std::nullopt);
  (void)r;
  return 0;
}
