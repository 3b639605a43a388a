// Shared by the cpu.simd kernel tests: random tensors and the comparison of a cpu.simd
// kernel's result with the cpu.ref kernel of the same op on the same call.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <hwy/targets.h>

#include "kernels/cpu/simd/attention_core.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/engine_choice_test_util.h"
#include "kernels/kernel_test_util.h"

namespace gearbox::testing {

inline Tensor simd_random(Dims dims, std::mt19937& g, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::F32, dims);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

// Which engine must take the call in a session with "cpu.simd,cpu.ref": cpu.simd's kernel, or
// cpu.ref because cpu.simd's declarations refuse it (run_on_first_accepting), so a case the
// simd kernel stopped taking cannot pass as "matches the reference".
enum class SimdPath { Simd, Reference };

// Runs `call` on cpu.ref and on the engine "cpu.simd,cpu.ref" picks for it. Both must succeed
// with the same shape and values within abs_tol + rel_tol * |ref| or equal (infinities), NaN
// only where the reference has NaN, or both fail with the same code; when the reference
// succeeds, the engine picked must be `path`'s.
inline void expect_simd_matches_ref(KernelCall call, const std::string& what, SimdPath path = SimdPath::Simd,
                                    double abs_tol = 2e-5, double rel_tol = 1e-4) {
  call.engine = std::string(kEngineRef);
  auto want = run_kernel(call);
  EngineRun run = run_on_first_accepting(call, {std::string(kEngineSimd), std::string(kEngineRef)});
  const auto& got = run.result;
  if (want.ok() && path == SimdPath::Simd) EXPECT_EQ(run.engine, kEngineSimd) << what << ": cpu.simd refused it";
  if (want.ok() && path == SimdPath::Reference)
    EXPECT_EQ(run.engine, kEngineRef) << what << ": expected cpu.simd to refuse it";
  ASSERT_EQ(want.ok(), got.ok()) << what << ": ref " << want.status().to_string() << " / simd "
                                 << got.status().to_string();
  if (!want.ok()) {
    EXPECT_EQ(want.status().code(), got.status().code()) << what;
    return;
  }
  const Tensor& r = want.value()[0];
  const Tensor& s = got.value()[0];
  ASSERT_EQ(r.dims(), s.dims()) << what;
  ASSERT_EQ(r.dtype(), s.dtype()) << what;
  int bad = 0;
  for (int64_t i = 0; i < r.numel() && bad < 5; ++i) {
    const double rv = r.at_double(i), sv = s.at_double(i);
    const bool ok = std::isnan(rv) ? std::isnan(sv) : rv == sv || std::fabs(rv - sv) <= abs_tol + rel_tol * std::fabs(rv);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " ref " << rv << " simd " << sv;
    }
  }
}

// Runs body(target name, target bit) once per Highway target compiled into the cpu.simd files
// (one list for all of them: attention_core.h names it) that this CPU supports, each forced
// in turn and checked to have taken; the dispatcher's own choice is restored afterwards.
// Returns the names that ran (the caller checks the dispatcher's default is among them).
template <class F>
std::vector<std::string> for_each_compiled_target(F&& body) {
  std::vector<std::string> ran;
  const int64_t targets = simd::attend_compiled_targets() & hwy::SupportedTargets();
  for (int64_t rest = targets; rest != 0; rest &= rest - 1) {
    const int64_t t = rest & -rest;
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    EXPECT_EQ(std::string(simd::dispatch_target_name()), name) << "forcing " << name << " did not take";
    body(name, t);
    ran.push_back(name);
  }
  hwy::SetSupportedTargetsForTest(0);
  return ran;
}

}  // namespace gearbox::testing
