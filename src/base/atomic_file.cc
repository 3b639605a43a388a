#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace gearbox {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
  tmp_path_.clear();
}

Status AtomicFile::open(const std::string& path) {
  discard();
  path_ = path;
  // mkstemp: a unique name, so that two writers of the same target never share a temp file.
  static constexpr char kSuffix[] = ".tmp.XXXXXX";
  std::vector<char> tmpl(path.begin(), path.end());
  tmpl.insert(tmpl.end(), kSuffix, kSuffix + sizeof(kSuffix));  // with the terminating NUL
  fd_ = ::mkstemp(tmpl.data());
  if (fd_ < 0)
    return make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create a temporary file next to '", path, "': ", errno_text());
  tmp_path_ = tmpl.data();
  // mkstemp makes the file 0600; give it the mode a plain open() would (0666 less the umask).
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
  return Status::OK();
}

Status AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) return make_error(ErrorCode::FILE_WRITE_FAILED, "writing '", path_, "': the file is not open");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = make_error(ErrorCode::FILE_WRITE_FAILED, "writing '", path_, "' failed: ", errno_text());
      discard();
      return s;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status AtomicFile::commit() {
  if (fd_ < 0) return make_error(ErrorCode::FILE_WRITE_FAILED, "writing '", path_, "': the file is not open");
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    Status s = make_error(ErrorCode::FILE_WRITE_FAILED, "flushing '", path_, "' to disk failed: ", errno_text());
    discard();
    return s;
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    Status s = make_error(ErrorCode::FILE_WRITE_FAILED, "cannot replace '", path_, "': ", errno_text());
    discard();
    return s;
  }
  tmp_path_.clear();
  // The rename lives in the folder's entry list: fsync the folder too, or a power loss can
  // undo it. Failure here is not reported: the data is written, only its durability is weaker.
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

Status write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile f;
  GBX_RETURN_IF_ERROR(f.open(path));
  GBX_RETURN_IF_ERROR(f.write(bytes));
  return f.commit();
}

}  // namespace gearbox
