// cpu.dnnl Transpose (a oneDNN reorder) against the cpu.ref kernel: a copy, so bit-exact.
// Randomized ranks 1-6, perms (including negative axes and the default reversal), odd
// sizes, the four dtypes it handles; then what it hands to the reference (other dtypes,
// empty tensors) and the errors both report alike (a perm that is not a permutation).
#include <random>
#include <string>
#include <vector>

#include "kernels/dnnl_test_util.h"

namespace gearbox {
namespace {

using testing::attr_ints;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

Tensor random_of(DType dt, const Dims& dims, std::mt19937& g) {
  Tensor t(dt, dims);
  std::uniform_int_distribution<int> d(-100, 100);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int v = d(g);
    switch (dt) {
      case DType::F32: t.data<float>()[i] = static_cast<float>(v) * 0.37f; break;
      case DType::I32: t.data<int32_t>()[i] = v * 1000; break;
      case DType::I8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::U8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v + 100); break;
      case DType::I64: t.data<int64_t>()[i] = v; break;
      default: break;
    }
  }
  return t;
}

// Same dims, same bytes; and which path ran.
void expect_same_copy(KernelCall call, const std::string& what, testing::DnnlPath path) {
  call.engine = std::string(kEngineRef);
  auto want = run_kernel(call);
  testing::EngineRun run = testing::run_on_first_accepting(call, {std::string(kEngineDnnl), std::string(kEngineRef)});
  const auto& got = run.result;
  const bool fell_back = run.engine == kEngineRef;
  ASSERT_EQ(want.ok(), got.ok()) << what << ": " << want.status().to_string() << " / " << got.status().to_string();
  if (!want.ok()) {
    EXPECT_EQ(want.status().code(), got.status().code()) << what;
    return;
  }
  EXPECT_EQ(fell_back, path == testing::DnnlPath::Reference) << what;
  const Tensor &r = want.value()[0], &d = got.value()[0];
  ASSERT_EQ(r.dims(), d.dims()) << what;
  ASSERT_EQ(r.dtype(), d.dtype()) << what;
  EXPECT_EQ(std::memcmp(r.raw(), d.raw(), r.nbytes()), 0) << what;
}

TEST(DnnlTranspose, RandomizedAgainstReference) {
  std::mt19937 g(20261130);
  const std::vector<DType> dtypes{DType::F32, DType::I32, DType::I8, DType::U8};
  for (int it = 0; it < 60; ++it) {
    const size_t rank = 1 + static_cast<size_t>(it) % 6;
    Dims dims;
    for (size_t i = 0; i < rank; ++i) dims.push_back(std::uniform_int_distribution<int64_t>(1, rank > 4 ? 5 : 13)(g));
    std::vector<int64_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
    std::shuffle(perm.begin(), perm.end(), g);
    if (it % 5 == 1) perm[0] -= static_cast<int64_t>(rank);  // a negative axis
    KernelCall call = make_call("Transpose", 13, {random_of(dtypes[static_cast<size_t>(it) % 4], dims, g)});
    if (it % 7 != 3) call.attrs["perm"] = attr_ints(perm);  // else the default: reversed dims
    expect_same_copy(call, "case " + std::to_string(it), testing::DnnlPath::OneDnn);
  }
  // The layout pass's boundary: an image batch to channels-last and back.
  expect_same_copy([&] {
    KernelCall c = make_call("Transpose", 13, {random_of(DType::F32, {2, 3, 224, 224}, g)});
    c.attrs["perm"] = attr_ints({0, 2, 3, 1});
    return c;
  }(), "NCHW->NHWC", testing::DnnlPath::OneDnn);
}

TEST(DnnlTranspose, OtherCasesRunTheReference) {
  std::mt19937 g(5);
  KernelCall i64 = make_call("Transpose", 13, {random_of(DType::I64, {3, 4}, g)});
  expect_same_copy(i64, "int64", testing::DnnlPath::Reference);
  KernelCall empty = make_call("Transpose", 13, {Tensor(DType::F32, {0, 4})});
  expect_same_copy(empty, "empty", testing::DnnlPath::Reference);
  KernelCall dup = make_call("Transpose", 13, {random_of(DType::F32, {3, 4}, g)});
  dup.attrs["perm"] = attr_ints({1, 1});
  expect_same_copy(dup, "repeated axis", testing::DnnlPath::Reference);  // both report the error
  KernelCall short_perm = make_call("Transpose", 13, {random_of(DType::F32, {3, 4, 5}, g)});
  short_perm.attrs["perm"] = attr_ints({1, 0});
  expect_same_copy(short_perm, "perm of the wrong length", testing::DnnlPath::Reference);
}

}  // namespace
}  // namespace gearbox
