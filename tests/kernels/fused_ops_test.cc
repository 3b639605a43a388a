// The com.gearbox fused operators' reference kernels against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/kernel_test_util.h"

namespace gearbox::testing {
namespace {

KernelCall gearbox_call(std::string op, std::vector<Tensor> in, AttributeMap attrs = {}) {
  KernelCall c = make_call(std::move(op), 1, std::move(in));
  c.domain = "com.gearbox";
  c.attrs = std::move(attrs);
  return c;
}

TEST(FusedOps, GeluErfAndTanh) {
  Tensor x = Tensor::from_vector<float>({-1.f, 0.f, 1.f, 2.f});
  auto erf = run_kernel(gearbox_call("Gelu", {x}));
  ASSERT_TRUE(erf.ok()) << erf.status().to_string();
  // 0.5 x (1 + erf(x / sqrt 2)): values from the normal CDF.
  const float want[] = {-0.15865526f, 0.f, 0.84134474f, 1.95449974f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR((*erf)[0].data<float>()[i], want[i], 1e-6f);
  auto tanh = run_kernel(gearbox_call("Gelu", {x}, {{"approximate", attr_string("tanh")}}));
  ASSERT_TRUE(tanh.ok());
  EXPECT_NEAR((*tanh)[0].data<float>()[2], 0.84119199f, 1e-6f);
  EXPECT_NEAR((*tanh)[0].data<float>()[0], -0.15880801f, 1e-6f);
}

TEST(FusedOps, FusedMatMulBiasRelu) {
  // [1, 2] x [[1, -1], [2, -3]] = [5, -7]; + [1, 1] = [6, -6]; Relu = [6, 0].
  Tensor a = Tensor::from_vector<float>({1.f, 2.f}, {1, 2});
  Tensor b = Tensor::from_vector<float>({1.f, -1.f, 2.f, -3.f}, {2, 2});
  Tensor bias = Tensor::from_vector<float>({1.f, 1.f});
  auto y = run_kernel(gearbox_call("FusedMatMul", {a, b, bias}, {{"activation", attr_string("Relu")}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dims(), (Dims{1, 2}));
  EXPECT_FLOAT_EQ((*y)[0].data<float>()[0], 6.f);
  EXPECT_FLOAT_EQ((*y)[0].data<float>()[1], 0.f);
}

TEST(FusedOps, FusedConvResidualClip) {
  // 1x1 conv with weight 2 and bias 1 on [0.5, -1, 3]: [2, -1, 7]; + z [1, 1, 1] = [3, 0, 8];
  // Clip(0, 6) = [3, 0, 6].
  Tensor x = Tensor::from_vector<float>({0.5f, -1.f, 3.f}, {1, 1, 3});
  Tensor w = Tensor::from_vector<float>({2.f}, {1, 1, 1});
  Tensor b = Tensor::from_vector<float>({1.f});
  Tensor z = Tensor::from_vector<float>({1.f, 1.f, 1.f}, {1, 1, 3});
  AttributeMap attrs{{"activation", attr_string("Clip")}};
  Attribute p;
  p.type = AttrType::Floats;
  p.floats = {0.f, 6.f};
  attrs["activation_params"] = p;
  auto y = run_kernel(gearbox_call("FusedConv", {x, w, b, z}, attrs));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const float want[] = {3.f, 0.f, 6.f};
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ((*y)[0].data<float>()[i], want[i]);
}

TEST(FusedOps, SkipLayerNorm) {
  // x + skip = [1, 2, 3, 6]: mean 3, var 3.5; gamma 1, beta 0.
  Tensor x = Tensor::from_vector<float>({0.f, 1.f, 2.f, 3.f}, {1, 4});
  Tensor skip = Tensor::from_vector<float>({1.f, 1.f, 1.f, 3.f}, {1, 4});
  Tensor gamma = Tensor::from_vector<float>({1.f, 1.f, 1.f, 1.f});
  Tensor beta = Tensor::from_vector<float>({0.f, 0.f, 0.f, 0.f});
  auto y = run_kernel(gearbox_call("SkipLayerNormalization", {x, skip, gamma, beta},
                                   {{"axis", attr_int(-1)}, {"epsilon", attr_float(0.f)}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const float in[] = {1.f, 2.f, 3.f, 6.f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR((*y)[0].data<float>()[i], (in[i] - 3.f) / std::sqrt(3.5f), 1e-6f);
}

TEST(FusedOps, UnknownActivationIsAnError) {
  Tensor a = Tensor::from_vector<float>({1.f}, {1, 1});
  auto y = run_kernel(gearbox_call("FusedMatMul", {a, a}, {{"activation", attr_string("Swish2")}}));
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), ErrorCode::ATTRIBUTE_INVALID);
}

}  // namespace
}  // namespace gearbox::testing
