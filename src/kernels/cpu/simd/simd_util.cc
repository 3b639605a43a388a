#include "kernels/cpu/simd/simd_util.h"

#include <atomic>

#include "kernels/reference_fallback.h"

namespace gearbox::simd {
namespace {
std::atomic<int64_t> g_fallbacks{0};
}  // namespace

Status run_ref(KernelContext& ctx) {
  ++g_fallbacks;
  return run_reference_fallback(ctx);
}

int64_t ref_fallback_count() { return g_fallbacks.load(); }

}  // namespace gearbox::simd
