// RNN / GRU against independent results: a bidirectional GRU with linear_before_reset = 1
// against torch.nn.GRU (weights reordered from torch's r,z,n to ONNX's z,r,h gate order),
// and a 1-unit RNN with sequence_lens against a numpy loop.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

void expect_near(const Tensor& t, const Dims& d, const std::vector<float>& v) {
  ASSERT_EQ(t.dims(), d);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(t.at_double(int64_t(i)), v[i], 1e-5) << i;
}

TEST(MiscRnn, BidirectionalGruLinearBeforeResetMatchesTorch) {
  Tensor x = Tensor::from_vector<float>({0.54f, -0.96f, 0.27f, 0.5f, 0.f, -0.55f, -0.6f, 0.52f, -0.66f, -0.82f, 0.37f,
                                         0.91f},
                                        {3, 2, 2});
  Tensor w = Tensor::from_vector<float>({0.54f, -0.96f, 0.27f, 0.5f, 0.f, -0.55f, -0.6f, 0.52f, -0.66f, -0.82f,
                                         0.37f, 0.91f, 1.54f, 0.04f, 1.27f, 1.5f, 1.f, 0.45f, 0.4f, 1.52f, 0.34f,
                                         0.18f, 1.37f, 1.91f},
                                        {2, 6, 2});
  Tensor r = Tensor::from_vector<float>({0.54f, -0.96f, 0.27f, 0.5f, 0.f, -0.55f, -0.6f, 0.52f, -0.66f, -0.82f,
                                         0.37f, 0.91f, 0.04f, -1.46f, -0.23f, 0.f, -0.5f, -1.05f, -1.1f, 0.02f,
                                         -1.16f, -1.32f, -0.13f, 0.41f},
                                        {2, 6, 2});
  Tensor b = Tensor::from_vector<float>({-0.425f, 0.28f, -0.06f, 0.225f, 0.48f, 0.04f, -0.255f, 0.168f, -0.036f,
                                         0.135f, 0.288f, 0.024f, -0.425f, 0.28f, -0.06f, 0.225f, 0.48f, 0.04f,
                                         -0.155f, 0.268f, 0.064f, 0.235f, 0.388f, 0.124f},
                                        {2, 12});
  auto c = make_call("GRU", 14, {x, w, r, b});
  c.attrs["direction"] = attr_string("bidirectional");
  c.attrs["hidden_size"] = attr_int(2);
  c.attrs["linear_before_reset"] = attr_int(1);
  c.num_outputs = 2;
  auto res = run_kernel(c);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  expect_near(res.value()[0], {3, 2, 2, 2},
              {0.29404318f, -0.26138514f, 0.0068907123f, 0.17201006f, 0.48767969f, -0.80335587f, 0.42968103f,
               0.28435105f, 0.51665914f, -0.35815543f, 0.39240852f, 0.25222224f, 0.40600678f, -0.80176795f,
               0.31618479f, 0.15605152f, 0.68936801f, -0.57822734f, -0.332313f, 0.38676456f, 0.17339903f,
               -0.80712593f, 0.38305479f, 0.083090484f});
  expect_near(res.value()[1], {2, 2, 2},
              {0.68936801f, -0.57822734f, -0.332313f, 0.38676456f, 0.48767969f, -0.80335587f, 0.42968103f,
               0.28435105f});
}

TEST(MiscRnn, ReverseRnnWithSequenceLens) {
  Tensor x = Tensor::from_vector<float>({1, 0.5f, 2, -1, 3, 4}, {3, 2, 1});
  auto c = make_call("RNN", 14,
              {x, Tensor::from_vector<float>({1}, {1, 1, 1}), Tensor::from_vector<float>({0.5f}, {1, 1, 1}), Tensor(),
               Tensor::from_vector<int32_t>({3, 1})});
  c.attrs["direction"] = attr_string("reverse");
  c.attrs["hidden_size"] = attr_int(1);
  c.num_outputs = 2;
  auto res = run_kernel(c);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  // Y [3, 1, 2, 1]: row 1 stops after its one step; padded steps are zero.
  expect_near(res.value()[0], {3, 1, 2, 1}, {0.90392543f, 0.46211716f, 0.98654838f, 0.f, 0.99505475f, 0.f});
  expect_near(res.value()[1], {1, 2, 1}, {0.90392543f, 0.46211716f});
}

TEST(MiscRnn, WrongWeightShapeIsAnError) {
  auto c = make_call("LSTM", 14,
              {Tensor(DType::F32, {3, 2, 2}), Tensor(DType::F32, {1, 7, 2}), Tensor(DType::F32, {1, 8, 2})});
  auto res = run_kernel(c);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), ErrorCode::SHAPE_MISMATCH);
}

}  // namespace
}  // namespace gearbox::testing
