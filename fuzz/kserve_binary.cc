// libFuzzer target: bytes -> serve::parse_infer_request with Inference-Header-Content-Length: the
// KServe binary tensor extension (a JSON header, then the tensors' raw bytes, each input's
// "binary_data_size" parameter saying how many). Input layout: 4 bytes little-endian, the header
// length as the client sends it (not necessarily <= the body: a lying client is what is tested),
// then the body.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "serve/kserve_codec.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gearbox::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t header_length;
  std::memcpy(&header_length, data, 4);
  auto r = gearbox::serve::parse_infer_request(std::string_view(reinterpret_cast<const char*>(data) + 4, size - 4),
                                               size_t(header_length));
  (void)r;
  return 0;
}
