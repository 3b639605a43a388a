// Shared by the cpu.dnnl kernel tests: random tensors and the comparison of a cpu.dnnl
// kernel's result with the cpu.ref kernel of the same op on the same call.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/engine_choice_test_util.h"
#include "kernels/kernel_test_util.h"

namespace gearbox::testing {

inline Tensor dnnl_random(Dims dims, std::mt19937& g) {
  Tensor t(DType::F32, dims);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

// Which engine must take the call in a session with "cpu.dnnl,cpu.ref": oneDNN's kernel, or
// cpu.ref because cpu.dnnl's declarations refuse it (configurations it does not handle;
// run_on_first_accepting), so a case oneDNN stopped taking cannot pass as "matches the
// reference".
enum class DnnlPath { OneDnn, Reference };

// Runs `call` on cpu.ref and on the engine "cpu.dnnl,cpu.ref" picks for it. Both must succeed
// with the same shape and values within abs 1e-5 * k + rel 1e-4 (k: the reduction length), or
// both fail with the same code; when the reference succeeds, the engine picked must be
// `path`'s (an invalid call may be refused by either).
inline void expect_dnnl_matches_ref(KernelCall call, int64_t k, const std::string& what,
                                    DnnlPath path = DnnlPath::OneDnn) {
  call.engine = std::string(kEngineRef);
  auto want = run_kernel(call);
  EngineRun run = run_on_first_accepting(call, {std::string(kEngineDnnl), std::string(kEngineRef)});
  const auto& got = run.result;
  if (want.ok() && path == DnnlPath::OneDnn) EXPECT_EQ(run.engine, kEngineDnnl) << what << ": cpu.dnnl refused it";
  if (want.ok() && path == DnnlPath::Reference)
    EXPECT_EQ(run.engine, kEngineRef) << what << ": expected cpu.dnnl to refuse it";
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
