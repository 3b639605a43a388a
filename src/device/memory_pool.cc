#include "device/memory_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/logging.h"
#include "base/scratch.h"

// Under AddressSanitizer, a block given back is poisoned until it is handed out again, so a
// use after free of pool memory is reported like one of heap memory. Only blocks that were
// handed out are ever poisoned: poisoning the whole reserved region up front would commit
// shadow memory for all of it.
#include "base/asan_poison.h"

namespace gearbox::device {

Result<std::unique_ptr<MemoryPool>> MemoryPool::create(size_t capacity, size_t min_block) {
  if (min_block < 64 || !std::has_single_bit(min_block))
    return make_error(ErrorCode::DEVICE_MEMORY_INVALID, "minimum block ", min_block,
                      " bytes is not a power of two >= 64");
  capacity = capacity / min_block * min_block;
  if (capacity == 0)
    return make_error(ErrorCode::DEVICE_MEMORY_INVALID, "pool capacity must be at least one block (",
                      min_block, " bytes)");
  std::unique_ptr<MemoryPool> pool(new MemoryPool());
  // Reserve kMaxAlign extra so the base can be aligned to kMaxAlign: every block is then
  // aligned to min(its size, kMaxAlign) in absolute terms.
  pool->mapping_bytes_ = capacity + kMaxAlign;
  void* m = mmap(nullptr, pool->mapping_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return make_error(ErrorCode::POOL_RESERVE_FAILED, "mmap of ", format_bytes(capacity), " failed: ",
                      std::strerror(errno));
  pool->mapping_ = m;
  auto addr = reinterpret_cast<uintptr_t>(m);
  pool->base_ = reinterpret_cast<uint8_t*>((addr + kMaxAlign - 1) & ~(uintptr_t{kMaxAlign} - 1));
  pool->capacity_ = capacity;
  pool->min_block_ = min_block;
  pool->min_shift_ = std::countr_zero(min_block);
  pool->free_.resize(PoolStats::kMaxOrders);
  // Split the capacity into power-of-two roots, largest first, so each root's offset is a
  // multiple of its size (buddy arithmetic then works inside each root).
  size_t units = capacity >> pool->min_shift_, offset = 0;
  for (int k = PoolStats::kMaxOrders - 1; k >= 0; --k) {
    if (units & (size_t{1} << k)) {
      pool->roots_.emplace_back(offset, k);
      pool->free_[k].insert(offset);
      offset += min_block << k;
    }
  }
  pool->stats_.capacity = capacity;
  pool->stats_.min_block = min_block;
  GBX_LOG_DEBUG("MEM_ALLOC", "pool reserved {} at {} ({} roots)", format_bytes(capacity),
                static_cast<void*>(pool->base_), pool->roots_.size());
  return pool;
}

MemoryPool::~MemoryPool() {
  if (!live_.empty())
    GBX_LOG_WARN("MEM_ALLOC", "pool destroyed with {} live allocations ({})", live_.size(),
                 format_bytes(stats_.used));
  // AddressSanitizer keeps a region's poison after munmap: whatever the kernel maps there
  // next (libomp's registration page at exit did) would read as use-after-poison. Only
  // blocks below poisoned_end_ were ever poisoned, so the shadow of the rest stays untouched.
  GBX_UNPOISON(base_, poisoned_end_);
  if (mapping_) munmap(mapping_, mapping_bytes_);
}

int MemoryPool::order_for(size_t bytes, size_t align) const {
  size_t need = std::max({bytes, align, min_block_, size_t{1}});
  if (need > (size_t{1} << 62)) return -1;
  size_t block = std::bit_ceil(need);
  int order = std::countr_zero(block) - min_shift_;
  return order < PoolStats::kMaxOrders ? order : -1;
}

size_t MemoryPool::block_size_for(size_t bytes, size_t align) const {
  int order = order_for(bytes, align);
  return order < 0 ? 0 : min_block_ << order;
}

int MemoryPool::root_order_at(size_t offset) const {
  for (const auto& [root_offset, order] : roots_)
    if (offset >= root_offset && offset < root_offset + (min_block_ << order)) return order;
  return -1;
}

size_t MemoryPool::largest_free_locked() const {
  for (int k = PoolStats::kMaxOrders - 1; k >= 0; --k)
    if (!free_[k].empty()) return min_block_ << k;
  return 0;
}

size_t MemoryPool::live_allocations_locked() const {
  size_t n = live_.size();
  for (const auto& [start, others] : ranges_) n -= others.size();  // a range is one allocation
  return n;
}

size_t MemoryPool::used_span_locked() const {
  size_t end = 0;
  for (const auto& [offset, live] : live_) end = std::max(end, offset + (min_block_ << live.order));
  return end;
}

double MemoryPool::fragmentation_locked() const {
  const size_t span = used_span_locked();
  // Free blocks never straddle the span's end (the block just below it is live), so the free
  // bytes inside it are the span less the live blocks, and a free block lies inside it when
  // it starts there.
  const size_t free_in_span = span - stats_.used;
  if (free_in_span == 0) return 0.0;
  size_t largest = 0;
  for (int k = PoolStats::kMaxOrders - 1; k >= 0 && largest == 0; --k)
    if (!free_[k].empty() && *free_[k].begin() < span) largest = min_block_ << k;
  return 1.0 - static_cast<double>(largest) / static_cast<double>(free_in_span);
}

Status MemoryPool::failure_locked(size_t bytes, size_t align, int order) const {
  size_t free_bytes = capacity_ - stats_.used;
  size_t largest = largest_free_locked();
  double frag = fragmentation_locked();
  std::ostringstream os;
  os << "cannot allocate " << bytes << " bytes (" << format_bytes(bytes) << ", block "
     << (order < 0 ? std::string("larger than any block") : format_bytes(min_block_ << order))
     << ", alignment " << align << ") from the " << format_bytes(capacity_) << " device pool: total free "
     << free_bytes << " bytes (" << format_bytes(free_bytes) << "), largest free block " << largest << " bytes ("
     << format_bytes(largest) << "), fragmentation " << std::fixed;
  os.precision(1);
  os << frag * 100 << "%, " << live_allocations_locked() << " live allocations using " << format_bytes(stats_.used);
  // "Enough in total" is judged against what the caller asked for: the caller cannot see the
  // buddy rounding, and reporting it as fragmentation points at the right fix.
  ErrorCode code = bytes <= free_bytes && order >= 0 ? ErrorCode::POOL_FRAGMENTED : ErrorCode::POOL_EXHAUSTED;
  return Status(code, os.str());
}

int MemoryPool::free_order_locked(int order) const {
  if (order < 0) return -1;
  int k = order;
  while (k < PoolStats::kMaxOrders && free_[k].empty()) ++k;
  return k < PoolStats::kMaxOrders ? k : -1;
}

void* MemoryPool::take_locked(int k, int order, size_t bytes) {
  // Take the lowest-addressed block of the smallest sufficient order, split it down.
  size_t offset = *free_[k].begin();
  free_[k].erase(free_[k].begin());
  while (k > order) {
    --k;
    free_[k].insert(offset + (min_block_ << k));  // the upper half stays free
  }
  live_.emplace(offset, Live{order, bytes});
  size_t block = min_block_ << order;
  stats_.used += block;
  stats_.requested += bytes;
  stats_.peak_used = std::max(stats_.peak_used, stats_.used);
  ++stats_.alloc_count;
  ++stats_.histogram[order];
  GBX_UNPOISON(base_ + offset, block);
  return static_cast<void*>(base_ + offset);
}

Result<void*> MemoryPool::allocate(size_t bytes, size_t align) {
  if (align == 0 || !std::has_single_bit(align) || align > kMaxAlign)
    return make_error(ErrorCode::INVALID_ARGUMENT, "pool alignment ", align,
                      " is not a power of two up to ", kMaxAlign);
  int order = order_for(bytes, align);
  std::lock_guard<std::mutex> lock(mu_);
  int k = free_order_locked(order);
  if (k < 0) {
    ++stats_.failed_count;
    Status s = failure_locked(bytes, align, order);
    GBX_LOG_DEBUG("MEM_ALLOC", "{}", s.to_string());
    return s;
  }
  return take_locked(k, order, bytes);
}

void* MemoryPool::try_allocate(size_t bytes, size_t align) {
  if (align == 0 || !std::has_single_bit(align) || align > kMaxAlign) return nullptr;
  int order = order_for(bytes, align);
  std::lock_guard<std::mutex> lock(mu_);
  int k = free_order_locked(order);
  return k < 0 ? nullptr : take_locked(k, order, bytes);
}

Result<std::shared_ptr<void>> MemoryPool::allocate_shared(size_t bytes, size_t align) {
  GBX_ASSIGN_OR_RETURN(void* p, allocate(bytes, align));
  // If the control block cannot be allocated, shared_ptr calls the deleter before throwing.
  return std::shared_ptr<void>(p, [this](void* q) { deallocate(q); });
}

Status MemoryPool::release(void* p) {
  if (p == nullptr) return Status::OK();
  auto* bp = static_cast<uint8_t*>(p);
  if (bp < base_ || bp >= base_ + capacity_)
    return make_error(ErrorCode::POOL_INVALID_FREE, "pointer ", p, " lies outside the pool [",
                      static_cast<void*>(base_), ", +", capacity_, ")");
  size_t offset = static_cast<size_t>(bp - base_);
  std::lock_guard<std::mutex> lock(mu_);
  if (live_.find(offset) == live_.end())
    return make_error(ErrorCode::POOL_INVALID_FREE, "pointer ", p, " (offset ", offset,
                      ") is not the start of a live allocation");
  ++stats_.free_count;
  if (auto r = ranges_.find(offset); r != ranges_.end()) {
    for (size_t other : r->second) GBX_RETURN_IF_ERROR(release_block_locked(other));
    ranges_.erase(r);
  }
  return release_block_locked(offset);
}

Status MemoryPool::release_block_locked(size_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end())
    return make_error(ErrorCode::INTERNAL, "pool block at offset ", offset, " is not live");
  int order = it->second.order;
  stats_.used -= min_block_ << order;
  stats_.requested -= it->second.requested;
  live_.erase(it);
  uint8_t* bp = base_ + offset;
  GBX_POISON(bp, min_block_ << order);
  poisoned_end_ = std::max(poisoned_end_, offset + (min_block_ << order));
  // Merge with the buddy while it is free and the merged block stays inside the root.
  int root_order = root_order_at(offset);
  while (order < root_order) {
    size_t buddy = offset ^ (min_block_ << order);
    auto b = free_[order].find(buddy);
    if (b == free_[order].end()) break;
    free_[order].erase(b);
    offset = std::min(offset, buddy);
    ++order;
  }
  free_[order].insert(offset);
  return Status::OK();
}

Result<void*> MemoryPool::allocate_range(size_t bytes) {
  const size_t need = (std::max<size_t>(bytes, 1) + min_block_ - 1) / min_block_ * min_block_;
  std::lock_guard<std::mutex> lock(mu_);
  // Free blocks in address order. The range starts at a free block from which a run of
  // adjacent free blocks is long enough; a run may cross from one root into the next (each
  // block of the range stays a block of its own root, and merges only inside it when the range
  // is freed). Of those starts, the highest: roots are laid out largest first, so the range
  // goes into the smaller roots and the later blocks, and leaves the large buddy blocks whole for
  // the power-of-two allocations that come after it (a plan's arena is taken first, then the
  // kernels' scratch: a 28 MiB pool = 16 + 8 + 4 MiB roots with a 6.5 MiB arena at offset 0
  // could no longer give ResNet-50's 10 MiB Winograd scratch its 16 MiB block).
  std::map<size_t, int> by_address;
  for (int k = 0; k < PoolStats::kMaxOrders; ++k)
    for (size_t off : free_[k]) by_address.emplace(off, k);
  size_t start = 0;
  bool found = false;
  size_t run_end = 0;     // the end of the run of adjacent free blocks that holds `off`, walking down
  size_t above = SIZE_MAX;  // the offset of the free block visited before (the next one up)
  for (auto it = by_address.rbegin(); it != by_address.rend(); ++it) {
    const size_t off = it->first, block_end = off + (min_block_ << it->second);
    if (block_end != above) run_end = block_end;  // not adjacent to the block above: a new run
    above = off;
    if (run_end - off >= need) {
      start = off;
      found = true;
      break;
    }
  }
  if (!found) {
    ++stats_.failed_count;
    Status st = failure_locked(bytes, min_block_, order_for(need, min_block_));
    GBX_LOG_DEBUG("MEM_ALLOC", "{}", st.to_string());
    return st;
  }
  // Take the run's blocks up to start + need; the last one is split down to the range's end.
  const size_t end = start + need;
  std::vector<std::pair<size_t, int>> taken;
  for (auto it = by_address.find(start); it != by_address.end() && it->first < end; ++it) {
    size_t off = it->first;
    int k = it->second;
    free_[k].erase(off);
    while (off + (min_block_ << k) > end) {  // straddles the end: split it
      if (off >= end) {  // wholly past the end (the upper half of the last split): free again
        free_[k].insert(off);
        off = end;
        break;
      }
      --k;
      if (off + (min_block_ << k) <= end) {  // the lower half is inside: take it, go on with the upper
        taken.emplace_back(off, k);
        off += min_block_ << k;
      } else {  // the upper half is outside: free, go on with the lower
        free_[k].insert(off + (min_block_ << k));
      }
    }
    if (off < end) taken.emplace_back(off, k);
  }
  std::vector<size_t> others;
  for (const auto& [off, k] : taken) {
    live_.emplace(off, Live{k, off == start ? bytes : 0});
    if (off != start) others.push_back(off);
    GBX_UNPOISON(base_ + off, min_block_ << k);
  }
  if (!others.empty()) ranges_.emplace(start, std::move(others));
  stats_.used += need;
  stats_.requested += bytes;
  stats_.peak_used = std::max(stats_.peak_used, stats_.used);
  ++stats_.alloc_count;
  return static_cast<void*>(base_ + start);
}

void MemoryPool::deallocate(void* p) {
  Status s = release(p);
  if (!s.ok()) GBX_LOG_ERROR("MEM_ALLOC", "{}", s.to_string());
}

bool MemoryPool::owns(const void* p) const {
  auto* bp = static_cast<const uint8_t*>(p);
  return bp >= base_ && bp < base_ + capacity_;
}

PoolStats MemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolStats s = stats_;
  s.free = capacity_ - s.used;
  s.largest_free = largest_free_locked();
  s.used_span = used_span_locked();
  s.thread_scratch = thread_scratch_bytes();
  s.thread_scratch_peak = thread_scratch_peak_bytes();
  s.fragmentation = fragmentation_locked();
  s.live_allocations = live_allocations_locked();
  for (int k = 0; k < PoolStats::kMaxOrders; ++k) s.free_blocks[k] = free_[k].size();
  return s;
}

Result<size_t> parse_memory_size(const std::string& text) {
  auto bad = [&] {
    return make_error(ErrorCode::DEVICE_MEMORY_INVALID, "'", text,
                      "' is not a memory size (examples: 4G, 512M, 65536)");
  };
  if (text.empty()) return bad();
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return bad();
  }
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() == 2 && (suffix[1] == 'i' || suffix[1] == 'I')) suffix.pop_back();  // "GiB"
  double scale = 1;
  if (suffix.size() > 1) return bad();
  if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'k': case 'K': scale = 1024.0; break;
      case 'm': case 'M': scale = 1024.0 * 1024; break;
      case 'g': case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: return bad();
    }
  }
  double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > 9.0e18) return bad();
  return static_cast<size_t>(bytes);
}

std::string format_bytes(size_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  if (u == 0) {
    os << bytes << " B";
  } else {
    os.setf(std::ios::fixed);
    os.precision(2);
    os << v << " " << units[u];
  }
  return os.str();
}

SystemMemory system_memory() {
  SystemMemory m;
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") m.total = kb * 1024;
    if (key == "MemAvailable:") m.available = kb * 1024;
  }
  return m;
}

size_t process_resident_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

Result<size_t> default_pool_capacity() {
  if (const char* env = std::getenv("GEARBOX_DEVICE_MEMORY"); env && *env) {
    auto r = parse_memory_size(env);
    if (!r.ok()) return r.status().with_context("GEARBOX_DEVICE_MEMORY: ");
    return r;
  }
  size_t ram = system_memory().total;
  size_t cap = size_t{8} << 30;
  if (ram != 0) cap = std::min(cap, ram / 2);
  return cap;
}

Result<MemoryPool*> default_pool() {
  static std::mutex mu;
  // Never destroyed: buffers drawn from it may outlive other static objects at exit.
  static MemoryPool* pool = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (pool) return pool;
  GBX_ASSIGN_OR_RETURN(size_t cap, default_pool_capacity());
  GBX_ASSIGN_OR_RETURN(auto created, MemoryPool::create(cap));
  pool = created.release();
  return pool;
}

}  // namespace gearbox::device
