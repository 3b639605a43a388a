// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss against values computed with
// torch.nn.functional.nll_loss / cross_entropy (same semantics as the ONNX spec).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

Tensor scores() { return Tensor::from_vector<float>({1.0f, 2.0f, 0.5f, 0.1f, -1.0f, 3.0f}, {2, 3}); }

TEST(MiscLoss, NllWeightedMean) {
  KernelCall c = make_call("NegativeLogLikelihoodLoss", 13,
               {scores(), Tensor::from_vector<int64_t>({2, 1}), Tensor::from_vector<float>({0.2f, 0.5f, 1.5f})});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].rank(), 0u);
  EXPECT_NEAR(r.value()[0].at_double(0), -0.125, 1e-6);
}

TEST(MiscLoss, NllNone) {
  KernelCall c = make_call("NegativeLogLikelihoodLoss", 13, {scores(), Tensor::from_vector<int64_t>({2, 1})});
  c.attrs["reduction"] = attr_string("none");
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r.value()[0].dims(), Dims{2});
  EXPECT_NEAR(r.value()[0].at_double(0), -0.5, 1e-6);
  EXPECT_NEAR(r.value()[0].at_double(1), 1.0, 1e-6);
}

TEST(MiscLoss, NllTargetOutOfRangeIsAnError) {
  KernelCall c = make_call("NegativeLogLikelihoodLoss", 13, {scores(), Tensor::from_vector<int64_t>({2, 7})});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscLoss, SceWeightedMeanAndLogProb) {
  KernelCall c = make_call("SoftmaxCrossEntropyLoss", 13,
               {scores(), Tensor::from_vector<int64_t>({2, 1}), Tensor::from_vector<float>({0.2f, 0.5f, 1.5f})});
  c.num_outputs = 2;
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR(r.value()[0].at_double(0), 2.4909701347351074, 1e-5);
  const double lp[] = {-1.4643688201904297, -0.4643687903881073, -1.9643688201904297,
                       -2.9707744121551514, -4.070774078369141,  -0.07077422738075256};
  ASSERT_EQ(r.value()[1].dims(), (Dims{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(r.value()[1].at_double(i), lp[i], 1e-5);
}

TEST(MiscLoss, SceIgnoreIndexMean) {
  KernelCall c = make_call("SoftmaxCrossEntropyLoss", 13, {scores(), Tensor::from_vector<int64_t>({2, -1})});
  c.attrs["ignore_index"] = attr_int(-1);
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR(r.value()[0].at_double(0), 1.9643688201904297, 1e-5);
}

TEST(MiscLoss, SceBadTargetShape) {
  KernelCall c = make_call("SoftmaxCrossEntropyLoss", 13, {scores(), Tensor::from_vector<int64_t>({2, 1, 0})});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::SHAPE_MISMATCH);
}

}  // namespace
}  // namespace gearbox::testing
