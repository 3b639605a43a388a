// nn::Tensor basics, autodiff bookkeeping (accumulation, no_grad, leaves) and errors.
#include <gtest/gtest.h>

#include "gearbox/nn.hpp"

namespace gbx::nn {
namespace {

TEST(NnTensor, FromVectorShapeAndValues) {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.to_float_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.describe(), "float32[2,3]");
}

TEST(NnTensor, EagerOpsComputeOnTheKernels) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector(std::vector<float>{10, 20}, {2});
  EXPECT_EQ((a + b).to_float_vector(), (std::vector<float>{11, 22, 13, 24}));
  EXPECT_EQ(matmul(a, a).to_float_vector(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(sum(a, {1}).to_float_vector(), (std::vector<float>{3, 7}));
  EXPECT_EQ(transpose(a, {}).to_float_vector(), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(slice(a, 1, 1, 2).to_float_vector(), (std::vector<float>{2, 4}));
}

// float32 runs on cpu.simd/cpu.dnnl: the Gemm-based linear (with and without bias) equals
// matmul with the transposed weight plus the bias.
TEST(NnTensor, LinearMatchesMatmulInFloat32) {
  manual_seed(5);
  Tensor x = Tensor::uniform({7, 5}, -1, 1), w = Tensor::uniform({3, 5}, -1, 1), b = Tensor::uniform({3}, -1, 1);
  std::vector<float> want = add(matmul(x, transpose(w, {})), b).to_float_vector();
  std::vector<float> got = linear(x, w, b).to_float_vector();
  std::vector<float> want_nb = matmul(x, transpose(w, {})).to_float_vector();
  std::vector<float> got_nb = linear(x, w).to_float_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
    EXPECT_NEAR(got_nb[i], want_nb[i], 1e-5f) << i;
  }
}

TEST(NnTensor, BackwardAccumulatesAcrossCallsUntilZeroGrad) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}).set_requires_grad();
  sum(x * x).backward();
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{2, 4, 6}));
  sum(x * x).backward();
  EXPECT_EQ(x.grad().to_float_vector(), (std::vector<float>{4, 8, 12}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(NnTensor, NoGradRecordsNothing) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}).set_requires_grad();
  Tensor y;
  {
    NoGradGuard guard;
    y = x * 2.0;
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(NnTensor, ErrorsCarryCatalogueCodes) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3});
  Tensor b = Tensor::from_vector(std::vector<float>{1, 2});
  try {
    (void)add(a, b);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "SHAPE_MISMATCH") << e.what();
  }
  try {
    sum(a).backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "INVALID_ARGUMENT") << e.what();
    EXPECT_NE(std::string(e.what()).find("does not require a gradient"), std::string::npos) << e.what();
  }
  Tensor logits = Tensor::zeros({2, 3});
  try {
    (void)cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{0, 3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "INVALID_ARGUMENT");
    EXPECT_NE(std::string(e.what()).find("target 1 is 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW((void)softmax(a, 3), Error);
  EXPECT_THROW((void)Tensor().shape(), Error);
}

}  // namespace
}  // namespace gbx::nn
