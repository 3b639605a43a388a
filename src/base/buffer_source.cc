// Tensor storage sources: the heap and the per-thread routing scope.
#include "base/buffer_source.h"

#include <cstdlib>
#include <cstring>

namespace gearbox {
namespace {
thread_local BufferSource* t_source = nullptr;
}  // namespace

std::shared_ptr<void> heap_buffer(size_t bytes, bool zero) {
  void* p = std::aligned_alloc(kTensorAlignment, bytes);
  if (!p) return nullptr;
  if (zero) std::memset(p, 0, bytes);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

BufferSource* current_buffer_source() { return t_source; }

ScopedBufferSource::ScopedBufferSource(BufferSource* source) : previous_(t_source) { t_source = source; }
ScopedBufferSource::~ScopedBufferSource() { t_source = previous_; }

}  // namespace gearbox
