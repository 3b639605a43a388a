// Shared by the cpu.dnnl kernel tests: random tensors and the comparison of a cpu.dnnl
// kernel's result with the cpu.ref kernel of the same op on the same call.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/kernel_test_util.h"

namespace gearbox::testing {

inline Tensor dnnl_random(Dims dims, std::mt19937& g) {
  Tensor t(DType::F32, dims);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

// Which path the cpu.dnnl kernel must take: oneDNN itself, or its hand-over to the reference
// kernel (configurations it does not handle). Checked through dnnl_engine::ref_fallback_count,
// so a oneDNN failure that silently falls back cannot pass as "matches the reference".
enum class DnnlPath { OneDnn, Reference };

// Runs `call` on cpu.ref and on cpu.dnnl. Both must succeed with the same shape and values
// within abs 1e-5 * k + rel 1e-4 (k: the reduction length), or both fail with the same code;
// when the reference succeeds, the dnnl kernel must have taken `path` (an invalid call may be
// refused by either path).
inline void expect_dnnl_matches_ref(KernelCall call, int64_t k, const std::string& what,
                                    DnnlPath path = DnnlPath::OneDnn) {
  call.engine = std::string(kEngineRef);
  auto want = run_kernel(call);
  call.engine = std::string(kEngineDnnl);
  const int64_t fallbacks_before = dnnl_engine::ref_fallback_count();
  auto got = run_kernel(call);
  const int64_t fell_back = dnnl_engine::ref_fallback_count() - fallbacks_before;
  if (want.ok() && path == DnnlPath::OneDnn) EXPECT_EQ(fell_back, 0) << what << ": oneDNN did not run";
  if (want.ok() && path == DnnlPath::Reference) EXPECT_GT(fell_back, 0) << what << ": expected the reference fall-back";
  ASSERT_EQ(want.ok(), got.ok()) << what << ": ref " << want.status().to_string() << " / dnnl "
                                 << got.status().to_string();
  if (!want.ok()) {
    EXPECT_EQ(want.status().code(), got.status().code()) << what;
    return;
  }
  const Tensor& r = want.value()[0];
  const Tensor& d = got.value()[0];
  ASSERT_EQ(r.dims(), d.dims()) << what;
  ASSERT_EQ(d.dtype(), DType::F32) << what;
  const double abs_tol = 1e-5 * static_cast<double>(std::max<int64_t>(1, k));
  int bad = 0;
  for (int64_t i = 0; i < r.numel() && bad < 5; ++i) {
    const double rv = r.data<float>()[i], dv = d.data<float>()[i];
    if (!(rv == dv || std::fabs(rv - dv) <= abs_tol + 1e-4 * std::fabs(rv))) {  // == : equal infinities
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " ref " << rv << " dnnl " << dv;
    }
  }
}

}  // namespace gearbox::testing
