// cpu.simd MaxPool with Indices (kernels/cpu/simd/tile_max_pool.cc) against the cpu.ref kernel:
// random windows (kernel, strides, pads, dilations, ceil_mode, auto_pad), 1-D and 2-D, inputs
// full of ties and NaNs, on every Highway target compiled in; both outputs must be equal to the
// reference's, bit for bit. And the calls it leaves to the other engines.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;
using testing::run_on_first_accepting;

// Values from a few integers (ties in most windows), some NaN, some -inf.
Tensor tie_heavy_input(const Dims& dims, std::mt19937& g) {
  Tensor t(DType::F32, dims);
  std::uniform_int_distribution<int> value(-3, 3), special(0, 40);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int s = special(g);
    t.data<float>()[i] = s == 0   ? std::nanf("")
                         : s == 1 ? -std::numeric_limits<float>::infinity()
                                  : static_cast<float>(value(g));
  }
  return t;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

// Returns whether the call succeeded (and was compared), not only failed the same way.
bool expect_equal_outputs(const KernelCall& call, const std::string& what) {
  KernelCall ref = call;
  ref.engine = std::string(kEngineRef);
  auto want = run_kernel(ref);
  auto run = run_on_first_accepting(call, {std::string(kEngineSimd), std::string(kEngineRef)});
  EXPECT_EQ(want.ok(), run.result.ok()) << what << ": ref " << want.status().to_string() << " / "
                                        << run.result.status().to_string();
  if (!want.ok() || !run.result.ok()) {
    EXPECT_EQ(want.status().code(), run.result.status().code()) << what;
    return false;
  }
  EXPECT_EQ(run.engine, kEngineSimd) << what << ": cpu.simd refused it";
  const Tensor &ry = want.value()[0], &ri = want.value()[1];
  const Tensor &sy = run.result.value()[0], &si = run.result.value()[1];
  EXPECT_EQ(ry.dims(), sy.dims()) << what;
  EXPECT_EQ(ri.dims(), si.dims()) << what;
  if (ry.dims() != sy.dims() || ri.dims() != si.dims()) return false;
  int bad = 0;
  for (int64_t i = 0; i < ry.numel() && bad < 5; ++i) {
    if (!same_bits(ry.data<float>()[i], sy.data<float>()[i]) || ri.data<int64_t>()[i] != si.data<int64_t>()[i]) {
      ++bad;
      ADD_FAILURE() << what << ": output " << i << " ref " << ry.data<float>()[i] << " at " << ri.data<int64_t>()[i]
                    << ", simd " << sy.data<float>()[i] << " at " << si.data<int64_t>()[i];
    }
  }
  return true;
}

TEST(SimdMaxPool, RandomWindowsWithTiesAndNaNsEqualTheReference) {
  std::mt19937 g(7);
  auto pick = [&g](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  const auto ran = testing::for_each_compiled_target([&](const std::string& target, int64_t) {
    int compared = 0;
    for (int trial = 0; trial < 60; ++trial) {
      const bool two_d = trial % 4 != 0;
      const int spatial = two_d ? 2 : 1;
      Dims dims{pick(1, 3), pick(1, 4)};
      std::vector<int64_t> kernel, strides, dilations, pads(2 * spatial);
      for (int a = 0; a < spatial; ++a) {
        dims.push_back(pick(1, 13));
        kernel.push_back(pick(1, 4));
        strides.push_back(pick(1, 3));
        dilations.push_back(pick(1, 2));
      }
      for (int a = 0; a < spatial; ++a) {
        // ONNX: each pad smaller than the kernel's extent.
        pads[a] = pick(0, static_cast<int>(kernel[a]) - 1);
        pads[a + spatial] = pick(0, static_cast<int>(kernel[a]) - 1);
      }
      KernelCall call = make_call("MaxPool", 12, {tie_heavy_input(dims, g)});
      call.attrs["kernel_shape"] = attr_ints(kernel);
      call.attrs["strides"] = attr_ints(strides);
      call.attrs["dilations"] = attr_ints(dilations);
      if (trial % 5 == 1) call.attrs["auto_pad"] = attr_string(trial % 2 ? "SAME_UPPER" : "SAME_LOWER");
      else call.attrs["pads"] = attr_ints(pads);
      if (trial % 3 == 2) call.attrs["ceil_mode"] = attr_int(1);
      call.num_outputs = 2;
      compared += expect_equal_outputs(call, target + " trial " + std::to_string(trial));
    }
    // Some random windows do not fit their input (an error on both engines); most must.
    EXPECT_GE(compared, 40) << target;
    std::printf("%s: %d of 60 windows compared\n", target.c_str(), compared);
  });
  EXPECT_FALSE(ran.empty());
}

// The digits CNN's pool: 2x2 stride 2 over [64, 16, 8, 8], real-valued data.
TEST(SimdMaxPool, TheTrainingCnnsPool) {
  std::mt19937 g(3);
  KernelCall call = make_call("MaxPool", 12, {testing::simd_random({64, 16, 8, 8}, g)});
  call.attrs["kernel_shape"] = attr_ints({2, 2});
  call.attrs["strides"] = attr_ints({2, 2});
  call.num_outputs = 2;
  expect_equal_outputs(call, "digits CNN pool");
}

// Without the Indices output (cpu.dnnl's), with 3-D windows, float64 or column-major indices,
// cpu.simd's declarations leave the call to the next engine.
TEST(SimdMaxPool, LeavesOtherCallsToTheOtherEngines) {
  std::mt19937 g(5);
  auto engine_of = [](KernelCall call) {
    return run_on_first_accepting(std::move(call), {std::string(kEngineSimd), std::string(kEngineRef)}).engine;
  };
  KernelCall plain = make_call("MaxPool", 12, {testing::simd_random({1, 2, 6, 6}, g)});
  plain.attrs["kernel_shape"] = attr_ints({2, 2});
  EXPECT_EQ(engine_of(plain), kEngineRef) << "no Indices wanted";
  KernelCall three_d = make_call("MaxPool", 12, {testing::simd_random({1, 2, 4, 4, 4}, g)});
  three_d.attrs["kernel_shape"] = attr_ints({2, 2, 2});
  three_d.num_outputs = 2;
  EXPECT_EQ(engine_of(three_d), kEngineRef) << "3-D window";
  KernelCall column_major = plain;
  column_major.attrs["storage_order"] = attr_int(1);
  column_major.num_outputs = 2;
  EXPECT_EQ(engine_of(column_major), kEngineRef) << "storage_order 1";
  KernelCall f64 = make_call("MaxPool", 12, {Tensor(DType::F64, Dims{1, 1, 4, 4})});
  f64.attrs["kernel_shape"] = attr_ints({2, 2});
  f64.num_outputs = 2;
  EXPECT_EQ(engine_of(f64), kEngineRef) << "float64";
}

}  // namespace
}  // namespace gearbox
