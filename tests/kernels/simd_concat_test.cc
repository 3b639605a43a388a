// cpu.simd Concat against cpu.ref: every axis of ranks 1-5, negative axes, opset 1's default
// axis, several dtypes, inputs empty along the axis, and sizes on both sides of the parallel
// threshold in both work splits (many short rows: a channels-last Concat over channels; few
// long rows: an NCHW Concat at batch 1); bit-exact, since both copy. Mismatched inputs are
// left to the reference, which reports them.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;
using testing::run_on_first_accepting;

Tensor random_of(DType dt, const Dims& d, std::mt19937& g) {
  Tensor t(dt, d);
  std::uniform_int_distribution<int> v(-100, 100);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int x = v(g);
    switch (dt) {
      case DType::F32:
        t.data<float>()[i] = static_cast<float>(x) * 0.37f;
        break;
      case DType::F64:
        t.data<double>()[i] = x * 0.37;
        break;
      case DType::I64:
        t.data<int64_t>()[i] = x * 1000003LL;
        break;
      case DType::U8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(x);
        break;
      case DType::Bool:
        t.data<bool>()[i] = x > 0;
        break;
      default:
        t.data<int32_t>()[i] = x;
        break;
    }
  }
  return t;
}

// cpu.simd takes the call and writes exactly the reference's bytes.
void expect_same_bytes(const KernelCall& call, const std::string& what) {
  KernelCall ref = call;
  ref.engine = std::string(kEngineRef);
  auto want = run_kernel(ref);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().to_string();
  auto run = run_on_first_accepting(call, {std::string(kEngineSimd), std::string(kEngineRef)});
  ASSERT_EQ(run.engine, kEngineSimd) << what;
  ASSERT_TRUE(run.result.ok()) << what << ": " << run.result.status().to_string();
  const Tensor& r = want.value()[0];
  const Tensor& s = run.result.value()[0];
  ASSERT_EQ(r.dims(), s.dims()) << what;
  ASSERT_EQ(r.dtype(), s.dtype()) << what;
  EXPECT_EQ(std::memcmp(r.raw(), s.raw(), r.numel() * dtype_size(r.dtype())), 0) << what;
}

TEST(SimdConcat, EveryAxisRankAndDtypeMatchesTheReference) {
  std::mt19937 g(5);
  int cases = 0;
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32, DType::U8, DType::Bool})
    for (const Dims& base : std::vector<Dims>{{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 5}, {1, 2, 3, 2, 3}})
      for (int64_t axis = -static_cast<int64_t>(base.size()); axis < static_cast<int64_t>(base.size()); ++axis) {
        const size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(base.size()) : axis);
        std::vector<Tensor> in;
        for (int64_t len : {base[a], int64_t{1}, int64_t{0}, base[a] + 2}) {
          Dims d = base;
          d[a] = len;
          in.push_back(random_of(dt, d, g));
        }
        KernelCall c = make_call("Concat", 13, in);
        c.attrs["axis"] = attr_int(axis);
        expect_same_bytes(c, std::string(dtype_name(dt)) + " " + to_string(base) + " axis " + std::to_string(axis));
        ++cases;
      }
  EXPECT_EQ(cases, 6 * (1 + 2 + 3 + 4 + 5) * 2);
}

TEST(SimdConcat, LargeTensorsInBothWorkSplits) {
  std::mt19937 g(6);
  // Channels-last fire-module outputs: 55 x 55 rows of 64 + 64 floats (many short rows).
  KernelCall nhwc =
      make_call("Concat", 13, {random_of(DType::F32, {1, 55, 55, 64}, g), random_of(DType::F32, {1, 55, 55, 64}, g)});
  nhwc.attrs["axis"] = attr_int(3);
  expect_same_bytes(nhwc, "NHWC over channels");
  // NCHW at batch 1: one long run per input, split into pieces (one not a whole number of them).
  KernelCall nchw =
      make_call("Concat", 13, {random_of(DType::F32, {1, 64, 55, 55}, g), random_of(DType::F32, {1, 3, 55, 55}, g)});
  nchw.attrs["axis"] = attr_int(1);
  expect_same_bytes(nchw, "NCHW over channels");
  // Two long rows (batch 2), and a Concat over the batch.
  KernelCall two =
      make_call("Concat", 13, {random_of(DType::F32, {2, 40, 60, 60}, g), random_of(DType::F32, {2, 8, 60, 60}, g)});
  two.attrs["axis"] = attr_int(1);
  expect_same_bytes(two, "batch 2 over channels");
  KernelCall batch =
      make_call("Concat", 13, {random_of(DType::I64, {3, 100, 300}, g), random_of(DType::I64, {1, 100, 300}, g)});
  batch.attrs["axis"] = attr_int(0);
  expect_same_bytes(batch, "int64 over the batch");
}

TEST(SimdConcat, OpsetOneDefaultAxisAndRefusals) {
  std::mt19937 g(8);
  // Concat-1 without an axis joins on axis 1.
  expect_same_bytes(make_call("Concat", 1, {random_of(DType::F32, {2, 3}, g), random_of(DType::F32, {2, 4}, g)}),
                    "Concat-1 default axis");
  // Inputs that differ off the axis, and a missing axis at opset 13: the reference reports them.
  for (KernelCall c : {make_call("Concat", 13, {random_of(DType::F32, {2, 3}, g), random_of(DType::F32, {3, 3}, g)}),
                       make_call("Concat", 13, {random_of(DType::F32, {2, 3}, g), random_of(DType::F32, {2, 3}, g)})}) {
    if (c.inputs[1].dim(0) == 3) c.attrs["axis"] = attr_int(1);
    auto run = run_on_first_accepting(c, {std::string(kEngineSimd), std::string(kEngineRef)});
    EXPECT_EQ(run.engine, kEngineRef);
    EXPECT_FALSE(run.result.ok());
  }
}

}  // namespace
}  // namespace gearbox
