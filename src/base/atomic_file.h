// Crash-safe file replacement: every file gearbox writes for the user (.gbm, --output-dir
// arrays, tensor dumps, reports) goes through here, so that a crash, kill -9 or power loss
// while writing leaves either the old file or the complete new one, never a truncated mix.
// How: write a temporary file in the target's folder (same file system, so rename is atomic),
// fsync it, rename it over the target, then fsync the folder so the rename itself is durable.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gearbox {

// One replacement in progress. open() creates the temporary file, write() appends to it,
// commit() publishes it under the target name. Destroying an uncommitted AtomicFile removes
// the temporary file and leaves the target as it was. Errors are FILE_WRITE_FAILED.
class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  Status open(const std::string& path);
  Status write(const void* data, size_t size);
  Status write(std::string_view bytes) { return write(bytes.data(), bytes.size()); }
  Status commit();

 private:
  void discard();
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
};

// The whole file in one call.
Status write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace gearbox
