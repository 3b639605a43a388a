// Tests for the shared GEMM (gemm_core) and the MatMul / Gemm kernels built on it. The fast
// GEMM is checked against a naive triple loop written here, on odd sizes that exercise every
// edge of the MR x NR tiles and the K blocking; small op cases carry values computed with
// numpy when the test was written.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ref/gemm_core.h"
#include "kernels/kernel_test_util.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

template <typename T>
std::vector<T> random_vec(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g));
  return v;
}

// C = alpha * op(A) op(B) + beta * C, naively, in double.
template <typename T>
void naive_gemm(const ref::GemmShape& s, double alpha, const T* a, const T* b, double beta, T* c) {
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.k; ++k) {
        const double av = s.trans_a ? a[k * s.lda + i] : a[i * s.lda + k];
        const double bv = s.trans_b ? b[j * s.ldb + k] : b[k * s.ldb + j];
        acc += av * bv;
      }
      T& cv = c[i * s.ldc + j];
      cv = static_cast<T>(alpha * acc + (beta == 0 ? 0.0 : beta * static_cast<double>(cv)));
    }
}

template <typename T>
void check_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha, double beta, double tol) {
  ref::GemmShape s;
  s.trans_a = ta;
  s.trans_b = tb;
  s.m = m;
  s.n = n;
  s.k = k;
  // Leading dims larger than the logical width, to catch stride mistakes.
  s.lda = (ta ? m : k) + 3;
  s.ldb = (tb ? k : n) + 5;
  s.ldc = n + 2;
  const auto a = random_vec<T>(static_cast<size_t>((ta ? k : m) * s.lda), 1);
  const auto b = random_vec<T>(static_cast<size_t>((tb ? n : k) * s.ldb), 2);
  auto c = random_vec<T>(static_cast<size_t>(m * s.ldc), 3);
  if (beta == 0) std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());  // must not be read
  auto expect = c;
  naive_gemm<T>(s, alpha, a.data(), b.data(), beta, expect.data());
  ref::gemm<T>(s, static_cast<T>(alpha), a.data(), b.data(), static_cast<T>(beta), c.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t o = static_cast<size_t>(i * s.ldc + j);
      ASSERT_NEAR(c[o], expect[o], tol * (1 + std::sqrt(static_cast<double>(k))))
          << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb << " at " << i << "," << j;
    }
  // Padding columns between n and ldc are untouched.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n; j < s.ldc; ++j) {
      const size_t o = static_cast<size_t>(i * s.ldc + j);
      if (beta != 0)
        ASSERT_EQ(c[o], expect[o]);
      else
        ASSERT_TRUE(std::isnan(c[o]));
    }
}

TEST(GemmCore, OddSizesAllTransposesF32) {
  const int64_t sizes[] = {1, 7, 33, 65, 257};
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : {int64_t(1), int64_t(33), int64_t(300)})
        for (int t = 0; t < 4; ++t) check_gemm<float>(m, n, k, t & 1, t & 2, 1.0, 0.0, 2e-5);
}

TEST(GemmCore, AlphaBetaF32) {
  check_gemm<float>(65, 33, 257, false, false, 0.5, 2.0, 2e-5);
  check_gemm<float>(7, 257, 65, true, false, -1.5, 1.0, 2e-5);
  check_gemm<float>(33, 7, 600, false, true, 1.0, -0.25, 2e-5);
}

TEST(GemmCore, OddSizesF64) {
  for (int64_t m : {1, 13, 65})
    for (int64_t n : {1, 17, 70})
      for (int t = 0; t < 4; ++t) check_gemm<double>(m, n, 291, t & 1, t & 2, 0.75, 0.5, 1e-12);
}

TEST(GemmCore, KZeroScalesC) {
  ref::GemmShape s{false, false, 2, 3, 0, 1, 3, 3};
  std::vector<float> c{1, 2, 3, 4, 5, 6};
  ref::gemm<float>(s, 1.0f, nullptr, nullptr, 2.0f, c.data());
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST(GemmCore, BatchedMatchesSingle) {
  ref::GemmShape s{false, true, 20, 30, 40, 40, 40, 30};
  std::vector<std::vector<float>> as, bs, cs, expect;
  std::vector<ref::GemmPtrs<float>> ptrs;
  for (int i = 0; i < 5; ++i) {
    as.push_back(random_vec<float>(20 * 40, 10 + i));
    bs.push_back(random_vec<float>(30 * 40, 20 + i));
    cs.emplace_back(20 * 30, 0.0f);
    expect.emplace_back(20 * 30, 0.0f);
  }
  for (int i = 0; i < 5; ++i) {
    ptrs.push_back({as[i].data(), bs[i].data(), cs[i].data()});
    naive_gemm<float>(s, 1.0, as[i].data(), bs[i].data(), 0.0, expect[i].data());
  }
  ref::gemm_batched(s, 1.0f, ptrs.data(), 5, 0.0f);
  for (int i = 0; i < 5; ++i)
    for (size_t j = 0; j < cs[i].size(); ++j) ASSERT_NEAR(cs[i][j], expect[i][j], 1e-4);
}

TEST(GemmOp, AlphaBetaVectorBiasMatchesNumpy) {
  // numpy: 0.5 * A @ B + 2 * C with A = arange(6).reshape(2,3) - 2,
  // B = arange(12).reshape(3,4) * 0.5, C = [1,2,3,4].
  std::vector<float> av{-2, -1, 0, 1, 2, 3}, bv(12), cv{1, 2, 3, 4};
  for (int i = 0; i < 12; ++i) bv[i] = 0.5f * i;
  KernelCall call = make_call(
      "Gemm", 13, {Tensor::from_vector(av, {2, 3}), Tensor::from_vector(bv, {3, 4}), Tensor::from_vector(cv, {4})});
  call.attrs["alpha"] = attr_float(0.5f);
  call.attrs["beta"] = attr_float(2.0f);
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{1.0f, 2.25f, 3.5f, 4.75f, 10.0f, 13.5f, 17.0f, 20.5f};
  ASSERT_EQ(out.value()[0].dims(), (Dims{2, 4}));
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out.value()[0].data<float>()[i], expect[i]);
}

TEST(GemmOp, TransposesAndColumnBias) {
  // A^T B^T + C with C of shape [M, 1]: checked against the naive loop.
  const auto a = random_vec<float>(5 * 3, 4), b = random_vec<float>(4 * 5, 5), c = random_vec<float>(3, 6);
  KernelCall call = make_call(
      "Gemm", 11, {Tensor::from_vector(a, {5, 3}), Tensor::from_vector(b, {4, 5}), Tensor::from_vector(c, {3, 1})});
  call.attrs["transA"] = attr_int(1);
  call.attrs["transB"] = attr_int(1);
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = c[i];
      for (int k = 0; k < 5; ++k) acc += a[k * 3 + i] * b[j * 5 + k];
      EXPECT_NEAR(out.value()[0].data<float>()[i * 4 + j], acc, 1e-5);
    }
}

TEST(GemmOp, MismatchedInnerDimsIsAnError) {
  KernelCall call = make_call("Gemm", 13, {Tensor(DType::F32, {2, 3}), Tensor(DType::F32, {4, 5})});
  auto out = run_kernel(call);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::SHAPE_MISMATCH);
}

TEST(MatMulOp, BroadcastBatchMatchesNumpy) {
  // numpy: a = arange(12).reshape(2,1,2,3); b = arange(18).reshape(3,3,2) - 4; a @ b.
  std::vector<float> a(12), b(18);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  for (int i = 0; i < 18; ++i) b[i] = static_cast<float>(i - 4);
  auto out =
      run_kernel(make_call("MatMul", 13, {Tensor::from_vector(a, {2, 1, 2, 3}), Tensor::from_vector(b, {3, 3, 2})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{-2,  1,   -20, -8,  16, 19,  52,  64,  34,  37,  124, 136,
                                  -38, -17, -56, -26, 88, 109, 124, 154, 214, 235, 304, 334};
  ASSERT_EQ(out.value()[0].dims(), (Dims{2, 3, 2, 2}));
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_FLOAT_EQ(out.value()[0].data<float>()[i], expect[i]);
}

TEST(MatMulOp, VectorTimesBatchedMatrixMatchesNumpy) {
  // numpy: [1,2,3] @ (arange(18).reshape(3,3,2) - 4) -> shape (3, 2).
  std::vector<float> b(18);
  for (int i = 0; i < 18; ++i) b[i] = static_cast<float>(i - 4);
  auto out =
      run_kernel(make_call("MatMul", 13, {Tensor::from_vector<float>({1, 2, 3}), Tensor::from_vector(b, {3, 3, 2})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out.value()[0].dims(), (Dims{3, 2}));
  const std::vector<float> expect{-8, -2, 28, 34, 64, 70};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_FLOAT_EQ(out.value()[0].data<float>()[i], expect[i]);
}

TEST(MatMulOp, FoldedBatchAgainstNaive) {
  // [4, 33, 65] x [65, 17]: the batch folds into M.
  const auto a = random_vec<double>(4 * 33 * 65, 7), b = random_vec<double>(65 * 17, 8);
  auto out =
      run_kernel(make_call("MatMul", 13, {Tensor::from_vector(a, {4, 33, 65}), Tensor::from_vector(b, {65, 17})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ref::GemmShape s{false, false, 4 * 33, 17, 65, 65, 17, 17};
  std::vector<double> expect(4 * 33 * 17);
  naive_gemm<double>(s, 1.0, a.data(), b.data(), 0.0, expect.data());
  for (size_t i = 0; i < expect.size(); ++i) ASSERT_NEAR(out.value()[0].data<double>()[i], expect[i], 1e-12);
}

TEST(MatMulOp, Float16ComputedInF32) {
  std::vector<Half> a{Half(1.0f), Half(2.0f), Half(3.0f), Half(4.0f)};
  std::vector<Half> b{Half(0.5f), Half(-1.0f), Half(2.0f), Half(0.25f)};
  auto out = run_kernel(make_call("MatMul", 13, {Tensor::from_vector(a, {2, 2}), Tensor::from_vector(b, {2, 2})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out.value()[0].dtype(), DType::F16);
  // [[1,2],[3,4]] @ [[0.5,-1],[2,0.25]] = [[4.5,-0.5],[9.5,-2]]
  const float expect[] = {4.5f, -0.5f, 9.5f, -2.0f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<float>(out.value()[0].data<Half>()[i]), expect[i]);
}

TEST(MatMulOp, InnerDimMismatchIsAnError) {
  auto out = run_kernel(make_call("MatMul", 13, {Tensor(DType::F32, {2, 3}), Tensor(DType::F32, {4, 5})}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::SHAPE_MISMATCH);
}

}  // namespace
}  // namespace gearbox
