// What the fuzz targets share: quiet logging, and a file holding the input for the parsers whose
// entry point takes a path (a memfd, so that no file is written per input).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/logging.h"

namespace gearbox::fuzz {

// Every malformed input would otherwise log a WARN; the fuzzer's own output is what matters.
inline void quiet_logs() { log::set_level("off"); }

// A path that reads back `data`: /proc/self/fd/N of one memfd, truncated and rewritten per input.
class InputFile {
 public:
  InputFile() : fd_(memfd_create("gearbox-fuzz-input", 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace gearbox::fuzz
