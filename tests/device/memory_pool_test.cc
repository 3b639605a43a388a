// MemoryPool: random alloc/free sequences checked against an independent model of the
// region (one flag per minimum block), the fragmentation scenario behind "out of memory
// with enough free memory", bad frees, threads, and the size parser.
#include "device/memory_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace gearbox::device {
namespace {

constexpr size_t kMin = 256;

// The reference: which minimum-size units are taken, and the roots the capacity splits into
// (largest power of two first). With complete coalescing, the largest block a buddy
// allocator can hand out is the largest aligned power-of-two run of free units inside one
// root; so the model predicts success, the largest free block and every statistic without
// sharing code with the pool.
struct Model {
  explicit Model(size_t capacity) : units(capacity / kMin, false) {
    size_t n = units.size(), off = 0;
    for (int k = 62; k >= 0; --k)
      if (n & (size_t{1} << k)) {
        roots.push_back({off, size_t{1} << k});
        off += size_t{1} << k;
      }
  }
  static size_t block_units(size_t bytes, size_t align) {
    size_t need = std::max({bytes, align, kMin});
    size_t b = kMin;
    while (b < need) b <<= 1;
    return b / kMin;
  }
  bool run_free(size_t first, size_t n) const {
    for (size_t i = first; i < first + n; ++i)
      if (units[i]) return false;
    return true;
  }
  size_t largest_free_units() const {
    size_t best = 0;
    for (auto [off, size] : roots)
      for (size_t b = size; b > best; b >>= 1)
        for (size_t s = off; s < off + size; s += b)
          if (run_free(s, b)) {
            best = std::max(best, b);
            break;
          }
    return best;
  }
  size_t used_units() const { return static_cast<size_t>(std::count(units.begin(), units.end(), true)); }
  // Units up to and including the highest taken one: the span the live blocks cover.
  size_t span_units() const {
    for (size_t i = units.size(); i-- > 0;)
      if (units[i]) return i + 1;
    return 0;
  }
  // The largest aligned power-of-two free run inside one root and wholly inside the span.
  size_t largest_free_units_in_span() const {
    const size_t span = span_units();
    size_t best = 0;
    for (auto [off, size] : roots)
      for (size_t b = size; b > best; b >>= 1)
        for (size_t s = off; s < off + size && s + b <= span; s += b)
          if (run_free(s, b)) {
            best = std::max(best, b);
            break;
          }
    return best;
  }
  // 1 - largest free / free, both over the span (PoolStats::fragmentation).
  double fragmentation() const {
    const size_t free_in_span = span_units() - used_units();
    return free_in_span == 0 ? 0.0 : 1.0 - double(largest_free_units_in_span()) / double(free_in_span);
  }
  std::vector<bool> units;
  std::vector<std::pair<size_t, size_t>> roots;  // (first unit, units)
};

struct Alloc {
  uint8_t* p;
  size_t bytes, units;
  uint8_t tag;
};

void random_sequence(size_t capacity, unsigned seed, int steps) {
  auto pool_r = MemoryPool::create(capacity, kMin);
  ASSERT_TRUE(pool_r.ok()) << pool_r.status().to_string();
  MemoryPool& pool = **pool_r;
  const auto* base = static_cast<const uint8_t*>(pool.base());
  Model m(capacity);
  std::mt19937 rng(seed);
  std::vector<Alloc> live;
  uint64_t allocs = 0, frees = 0, failures = 0;
  size_t peak = 0, requested = 0;
  std::map<size_t, uint64_t> hist;  // block units -> successful allocations
  for (int step = 0; step < steps; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      // Sizes spread over 1 B .. capacity/2 on a log scale, so every order gets traffic.
      int shift = static_cast<int>(rng() % 20);
      size_t bytes = (size_t{1} << shift) + rng() % ((size_t{1} << shift) + 1);
      bytes = std::min(bytes, capacity / 2 + rng() % 7);
      size_t align = size_t{1} << (rng() % 13);  // 1 .. 4096
      size_t b = Model::block_units(bytes, align);
      size_t free_bytes = capacity - m.used_units() * kMin;
      bool expect_ok = m.largest_free_units() >= b;
      auto r = pool.allocate(bytes, align);
      ASSERT_EQ(r.ok(), expect_ok) << "step " << step << " bytes " << bytes << " align " << align;
      if (!r.ok()) {
        ++failures;
        ASSERT_EQ(r.status().code(),
                  bytes <= free_bytes ? ErrorCode::POOL_FRAGMENTED : ErrorCode::POOL_EXHAUSTED);
        continue;
      }
      auto* p = static_cast<uint8_t*>(*r);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
      ASSERT_GE(p, base);
      size_t first = static_cast<size_t>(p - base);
      ASSERT_EQ(first % (b * kMin), 0u) << "block not aligned to its size";
      first /= kMin;
      ASSERT_LE(first + b, m.units.size());
      for (size_t u = first; u < first + b; ++u) {
        ASSERT_FALSE(m.units[u]) << "block overlaps a live block at unit " << u;
        m.units[u] = true;
      }
      live.push_back({p, bytes, b, static_cast<uint8_t>(rng())});
      std::memset(p, live.back().tag, bytes);
      ++allocs;
      requested += bytes;
      ++hist[b];
      peak = std::max(peak, m.used_units() * kMin);
    } else {
      size_t i = rng() % live.size();
      Alloc a = live[i];
      for (size_t j = 0; j < a.bytes; ++j) ASSERT_EQ(a.p[j], a.tag) << "allocation overwritten";
      ASSERT_TRUE(pool.release(a.p).ok());
      size_t first = static_cast<size_t>(a.p - base) / kMin;
      for (size_t u = first; u < first + a.units; ++u) m.units[u] = false;
      live.erase(live.begin() + static_cast<long>(i));
      ++frees;
      requested -= a.bytes;
    }
    PoolStats s = pool.stats();
    size_t used = m.used_units() * kMin, free_bytes = capacity - used, largest = m.largest_free_units() * kMin;
    ASSERT_EQ(s.capacity, capacity);
    ASSERT_EQ(s.used, used);
    ASSERT_EQ(s.free, free_bytes);
    ASSERT_EQ(s.largest_free, largest) << "step " << step << ": free blocks not fully coalesced";
    ASSERT_EQ(s.used_span, m.span_units() * kMin) << "step " << step;
    ASSERT_DOUBLE_EQ(s.fragmentation, m.fragmentation()) << "step " << step;
    ASSERT_EQ(s.alloc_count, allocs);
    ASSERT_EQ(s.free_count, frees);
    ASSERT_EQ(s.failed_count, failures);
    ASSERT_EQ(s.peak_used, peak);
    ASSERT_EQ(s.requested, requested);
    ASSERT_EQ(s.live_allocations, live.size());
    for (int k = 0; k < PoolStats::kMaxOrders; ++k) {
      auto it = hist.find(size_t{1} << k);
      ASSERT_EQ(s.histogram[k], it == hist.end() ? 0u : it->second) << "order " << k;
    }
  }
  ASSERT_GT(allocs, 0u);
  for (const Alloc& a : live) ASSERT_TRUE(pool.release(a.p).ok());
  // Everything merged back: one free block per root.
  PoolStats s = pool.stats();
  EXPECT_EQ(s.used, 0u);
  EXPECT_EQ(s.largest_free, m.roots.front().second * kMin);
  EXPECT_EQ(s.used_span, 0u);
  EXPECT_EQ(s.fragmentation, 0.0) << "nothing live: nothing fragmented";
  uint64_t blocks = 0;
  for (auto n : s.free_blocks) blocks += n;
  EXPECT_EQ(blocks, m.roots.size());
}

TEST(MemoryPool, RandomSequencesMatchReferencePowerOfTwo) {
  for (unsigned seed = 1; seed <= 4; ++seed) {
    random_sequence(size_t{1} << 20, seed, 1500);
    if (HasFatalFailure()) return;
  }
}

TEST(MemoryPool, RandomSequencesMatchReferenceOddCapacity) {
  // 1 MiB + 256 KiB + 768 B: three roots that must never merge with each other.
  for (unsigned seed = 11; seed <= 13; ++seed) {
    random_sequence((size_t{1} << 20) + (size_t{1} << 18) + 3 * kMin, seed, 1500);
    if (HasFatalFailure()) return;
  }
}

// "Out of memory while the monitor shows free memory": half the pool is free, but only in
// 256 KiB pieces, so a 300 KiB request cannot be served.
TEST(MemoryPool, FragmentationScenarioExplainsItself) {
  auto pool = std::move(MemoryPool::create(size_t{1} << 20, kMin)).value();
  std::vector<void*> quarter;
  for (int i = 0; i < 4; ++i) quarter.push_back(pool->allocate(256 * 1024).value());
  pool->deallocate(quarter[0]);
  pool->deallocate(quarter[2]);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.free, 512u * 1024);
  EXPECT_EQ(s.largest_free, 256u * 1024);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.5);

  auto r = pool->allocate(300 * 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::POOL_FRAGMENTED);
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("cannot allocate 307200 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("total free 524288 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest free block 262144 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fragmentation 50.0%"), std::string::npos) << msg;
  // The fix comes from the catalogue and names the remedies.
  const std::string help = r.status().to_string_with_help();
  EXPECT_NE(help.find("GBX-E7002 POOL_FRAGMENTED"), std::string::npos) << help;
  EXPECT_NE(help.find("planned arena"), std::string::npos) << help;
  EXPECT_NE(help.find("fixed batch"), std::string::npos) << help;
  EXPECT_NE(help.find("GEARBOX_DEVICE_MEMORY"), std::string::npos) << help;
  EXPECT_EQ(pool->stats().failed_count, 1u);

  // Exhausted: more than the total free.
  auto big = pool->allocate(600 * 1024);
  EXPECT_EQ(big.status().code(), ErrorCode::POOL_EXHAUSTED);
  EXPECT_NE(big.status().message().find("total free 524288 bytes"), std::string::npos);

  // Freeing a neighbour coalesces: the 512 KiB lower half is whole again.
  pool->deallocate(quarter[1]);
  auto ok = pool->allocate(300 * 1024);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(*ok, quarter[0]);
  pool->deallocate(*ok);
  pool->deallocate(quarter[3]);
  EXPECT_EQ(pool->stats().largest_free, size_t{1} << 20);
}

// Issue 21: a few MB live in an 8 GiB pool used to read fragmentation ~0.5 (the first split
// of the 8 GiB root leaves a 4 GiB largest block out of ~8 GiB free). Only holes among the
// live blocks count now.
TEST(MemoryPool, AlmostEmptyPoolIsNotFragmented) {
  auto pool = std::move(MemoryPool::create(size_t{8} << 30, kMin)).value();  // address space only
  std::vector<void*> held;
  for (size_t bytes : {size_t{3} << 20, size_t{1} << 20, size_t{700} << 10, size_t{2} << 20})
    held.push_back(pool->allocate(bytes).value());
  PoolStats s = pool->stats();
  EXPECT_LT(s.used, size_t{16} << 20);
  EXPECT_EQ(s.largest_free, size_t{4} << 30);
  // 4 MiB (3 MiB) + 1 MiB + 1 MiB (700 KiB) + 2 MiB blocks, lowest address first: [0, 4M)
  // [4M, 5M) [5M, 6M) [6M, 8M): no hole, and the old figure 1 - 4G / (8G - 8M) was ~0.5.
  EXPECT_EQ(s.used_span, size_t{8} << 20);
  EXPECT_EQ(s.fragmentation, 0.0);
  // A hole among them counts: freeing the 1 MiB block at 4M leaves 1 MiB free of an 8 MiB span
  // in one piece (still 0); freeing the one at 5M too merges them into one 2 MiB block.
  pool->deallocate(held[1]);
  EXPECT_EQ(pool->stats().fragmentation, 0.0);
  pool->deallocate(held[0]);  // [0, 4M) and [4M, 5M) free: 5 MiB free, largest 4 MiB
  EXPECT_DOUBLE_EQ(pool->stats().fragmentation, 1.0 - 4.0 / 5.0);
  for (void* p : {held[2], held[3]}) pool->deallocate(p);
  EXPECT_EQ(pool->stats().fragmentation, 0.0);
  EXPECT_EQ(pool->stats().used_span, 0u);
}

// allocate_range: one contiguous range of any multiple of min_block, tiled by buddy blocks,
// checked against the unit model; freed as one, it merges back completely.
TEST(MemoryPool, RangesAreContiguousExactAndMergeBack) {
  const size_t capacity = (size_t{1} << 20) + (size_t{1} << 18);  // roots 1 MiB + 256 KiB
  auto pool = std::move(MemoryPool::create(capacity, kMin)).value();
  const auto* base = static_cast<const uint8_t*>(pool->base());
  void* filler = pool->allocate(256 * 1024).value();  // the whole 256 KiB root, for now
  EXPECT_EQ(static_cast<const uint8_t*>(filler) - base, 1 << 20);
  void* small = pool->allocate(1000).value();  // a 1 KiB block at 0
  EXPECT_EQ(small, pool->base());
  auto r = pool->allocate_range(300 * 1024 + 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto* p = static_cast<uint8_t*>(*r);
  const size_t need = (300 * 1024 + 1 + kMin - 1) / kMin * kMin;
  // The highest start from which a free run holds it: the 512 KiB block (the range takes the
  // later, smaller-root end of the free space and leaves the blocks below it whole).
  EXPECT_EQ(static_cast<size_t>(p - base), 512u << 10);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.used, (256 << 10) + 1024 + need) << "a range is not rounded to a power of two";
  EXPECT_EQ(s.live_allocations, 3u) << "a range is one allocation";
  std::memset(p, 0x5a, need);  // every byte of the range is ours
  void* other = pool->allocate(4096).value();
  auto* o = static_cast<uint8_t*>(other);
  EXPECT_TRUE(o + 4096 <= p || o >= p + need) << "a block inside the range was handed out again";
  EXPECT_EQ(static_cast<size_t>(o - base), 4096u) << "the lowest free 4 KiB block";
  // Free now: [1024, 4096), [8192, 524288) (516096 bytes) and, once the filler goes, the
  // range's end 832512 up to 1310720, which runs on from the 1 MiB root into the 256 KiB one
  // (478208 bytes). One block more than the longest run is fragmentation; the run that crosses
  // the roots is where a range of its length goes (the highest start that holds it).
  pool->deallocate(filler);
  const size_t free_now = capacity - 1024 - need - 4096;
  EXPECT_EQ(pool->stats().free, free_now);
  auto too_long = pool->allocate_range(516096 + kMin);
  EXPECT_EQ(too_long.status().code(), ErrorCode::POOL_FRAGMENTED) << too_long.status().to_string();
  auto across = pool->allocate_range(478208);
  ASSERT_TRUE(across.ok()) << across.status().to_string();
  EXPECT_EQ(static_cast<size_t>(static_cast<uint8_t*>(*across) - base), 832512u);
  std::memset(*across, 0x33, 478208);
  EXPECT_EQ(pool->stats().free, free_now - 478208);
  EXPECT_TRUE(pool->release(*across).ok());
  EXPECT_TRUE(pool->release(p).ok());
  EXPECT_EQ(pool->release(p).code(), ErrorCode::POOL_INVALID_FREE) << "freed twice";
  pool->deallocate(other);
  pool->deallocate(small);
  s = pool->stats();
  EXPECT_EQ(s.used, 0u);
  EXPECT_EQ(s.requested, 0u);
  EXPECT_EQ(s.largest_free, size_t{1} << 20);
  uint64_t blocks = 0;
  for (auto n : s.free_blocks) blocks += n;
  EXPECT_EQ(blocks, 2u) << "one free block per root: the range's blocks merged back";
  // A range as large as a root.
  auto whole = pool->allocate_range(size_t{1} << 20);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(*whole, pool->base());
  EXPECT_TRUE(pool->release(*whole).ok());
}

TEST(MemoryPool, SharedBlocksReturnWithTheLastOwner) {
  auto pool = std::move(MemoryPool::create(size_t{1} << 16, kMin)).value();
  auto a = pool->allocate_shared(1000);
  ASSERT_TRUE(a.ok());
  std::shared_ptr<void> copy = *a;
  EXPECT_EQ(pool->stats().used, 1024u);
  a->reset();
  EXPECT_EQ(pool->stats().used, 1024u);  // still owned by the copy
  copy.reset();
  EXPECT_EQ(pool->stats().used, 0u);
  EXPECT_EQ(pool->stats().free_count, 1u);
  EXPECT_EQ(pool->allocate_shared(size_t{1} << 17).status().code(), ErrorCode::POOL_EXHAUSTED);
}

TEST(MemoryPool, BadFreesAreErrors) {
  auto pool = std::move(MemoryPool::create(size_t{1} << 16, kMin)).value();
  void* p = pool->allocate(1000).value();
  int outside = 0;
  EXPECT_EQ(pool->release(&outside).code(), ErrorCode::POOL_INVALID_FREE);
  EXPECT_EQ(pool->release(static_cast<char*>(p) + 256).code(), ErrorCode::POOL_INVALID_FREE);
  EXPECT_TRUE(pool->release(p).ok());
  EXPECT_EQ(pool->release(p).code(), ErrorCode::POOL_INVALID_FREE);  // double free
  EXPECT_TRUE(pool->release(nullptr).ok());
  EXPECT_EQ(pool->stats().free_count, 1u);
  EXPECT_EQ(pool->allocate(8, 3).status().code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(pool->allocate(size_t{1} << 17).status().code(), ErrorCode::POOL_EXHAUSTED);
  EXPECT_EQ(pool->allocate(SIZE_MAX).status().code(), ErrorCode::POOL_EXHAUSTED);
  // 1 EiB is beyond any x86-64 address space (47 or 56 bits): the reservation itself fails.
  auto huge = MemoryPool::create(size_t{1} << 60, kMin);
  EXPECT_EQ(huge.status().code(), ErrorCode::POOL_RESERVE_FAILED);
  EXPECT_NE(huge.status().message().find("mmap"), std::string::npos);
  EXPECT_EQ(MemoryPool::create(100, 256).status().code(), ErrorCode::DEVICE_MEMORY_INVALID);
  EXPECT_EQ(MemoryPool::create(4096, 100).status().code(), ErrorCode::DEVICE_MEMORY_INVALID);
}

TEST(MemoryPool, ConcurrentAllocFreeKeepsBlocksDisjoint) {
  auto pool = std::move(MemoryPool::create(size_t{1} << 22, kMin)).value();
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 2000; ++i) {
        size_t n = 1 + rng() % 20000;
        auto r = pool->allocate(n);
        if (!r.ok()) continue;
        auto* p = static_cast<uint8_t*>(*r);
        std::memset(p, t + 1, n);
        for (size_t j = 0; j < n; j += 97)
          if (p[j] != t + 1) ++corrupt;
        pool->deallocate(p);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupt.load(), 0);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.used, 0u);
  EXPECT_EQ(s.alloc_count, s.free_count);
  EXPECT_EQ(s.largest_free, size_t{1} << 22);
}

TEST(MemoryPool, ParsesSizes) {
  EXPECT_EQ(parse_memory_size("4G").value(), size_t{4} << 30);
  EXPECT_EQ(parse_memory_size("512M").value(), size_t{512} << 20);
  EXPECT_EQ(parse_memory_size("64k").value(), size_t{64} << 10);
  EXPECT_EQ(parse_memory_size("1.5GiB").value(), size_t{3} << 29);
  EXPECT_EQ(parse_memory_size("65536").value(), 65536u);
  for (const char* bad : {"", "G", "4X", "-1G", "0", "4GG", "nan", "1e30T"})
    EXPECT_EQ(parse_memory_size(bad).status().code(), ErrorCode::DEVICE_MEMORY_INVALID) << bad;
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(size_t{3} << 29), "1.50 GiB");
}

TEST(MemoryPool, DefaultCapacityFollowsEnvironment) {
  setenv("GEARBOX_DEVICE_MEMORY", "3M", 1);
  EXPECT_EQ(default_pool_capacity().value(), size_t{3} << 20);
  setenv("GEARBOX_DEVICE_MEMORY", "lots", 1);
  auto bad = default_pool_capacity();
  EXPECT_EQ(bad.status().code(), ErrorCode::DEVICE_MEMORY_INVALID);
  EXPECT_NE(bad.status().message().find("GEARBOX_DEVICE_MEMORY"), std::string::npos);
  unsetenv("GEARBOX_DEVICE_MEMORY");
  size_t ram = system_memory().total;
  ASSERT_GT(ram, 0u);
  EXPECT_EQ(default_pool_capacity().value(), std::min(ram / 2, size_t{8} << 30));
}

}  // namespace
}  // namespace gearbox::device
