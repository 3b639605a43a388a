// com.microsoft RotaryEmbedding (reference kernel): its values are judged against ONNX Runtime by
// the oracle suite (ms_RotaryEmbedding_*); here, a rotation by a known angle and the refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

KernelCall rotary(Tensor x, Tensor pos, Tensor cos, Tensor sin) {
  KernelCall c = make_call("RotaryEmbedding", 1, {std::move(x), std::move(pos), std::move(cos), std::move(sin)});
  c.domain = "com.microsoft";
  return c;
}

ErrorCode code_of(const KernelCall& c) {
  auto r = run_kernel(c);
  return r.ok() ? ErrorCode::OK : r.status().code();
}

// One head of size 2 is one complex number: position 1's angle of 90 degrees turns (1, 0) into (0, 1).
TEST(RotaryEmbedding, TurnsEachPairByItsPositionsAngle) {
  const float q = float(M_PI / 2);
  Tensor cos = Tensor::from_vector<float>({1.0f, std::cos(q)}, {2, 1});
  Tensor sin = Tensor::from_vector<float>({0.0f, std::sin(q)}, {2, 1});
  auto r = run_kernel(
      rotary(Tensor::from_vector<float>({1, 0, 1, 0}, {1, 2, 2}), Tensor::from_vector<int64_t>({0}), cos, sin));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  const double want[] = {1, 0, 0, 1};  // position 0 unturned, position 1 turned
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.at_double(i), want[i], 1e-6) << i;
}

TEST(RotaryEmbedding, RefusesPositionsOutsideTheCacheAndShapesThatDoNotFit) {
  Tensor cache = Tensor::from_vector<float>({1, 1, 1, 1}, {2, 2});
  Tensor x = Tensor::from_vector<float>(std::vector<float>(16, 1.0f), {1, 4, 4});
  EXPECT_EQ(code_of(rotary(x, Tensor::from_vector<int64_t>({0}), cache, cache)), ErrorCode::INVALID_ARGUMENT)
      << "4 tokens from offset 0 run past a 2-position cache";
  auto c = rotary(x, Tensor::from_vector<int64_t>({0, 1, 1, 0}, {1, 4}), cache, cache);
  EXPECT_EQ(code_of(c), ErrorCode::OK);
  c.attrs["rotary_embedding_dim"] = attr_int(4);  // without num_heads
  EXPECT_EQ(code_of(c), ErrorCode::ATTRIBUTE_INVALID);
  auto narrow = rotary(x, Tensor::from_vector<int64_t>({0}), Tensor::from_vector<float>({1, 1, 1}, {1, 3}),
                       Tensor::from_vector<float>({1, 1, 1}, {1, 3}));
  EXPECT_EQ(code_of(narrow), ErrorCode::SHAPE_MISMATCH) << "a head of 6 does not divide a hidden size of 4";
}

}  // namespace
}  // namespace gearbox::testing
