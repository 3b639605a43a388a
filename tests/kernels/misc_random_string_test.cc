// Random generators (range, reproducibility with a seed, degenerate Bernoulli
// probabilities) and StringNormalizer (the ONNX spec examples).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

KernelCall mk(std::string op, int opset, std::vector<Tensor> inputs) {
  KernelCall c;
  c.op_type = std::move(op);
  c.opset = opset;
  c.inputs = std::move(inputs);
  return c;
}

TEST(MiscRandom, UniformLikeSeededIsReproducibleAndInRange) {
  auto c = mk("RandomUniformLike", 15, {Tensor(DType::F32, {4, 5})});
  c.attrs["low"] = attr_float(2);
  c.attrs["high"] = attr_float(3);
  c.attrs["seed"] = attr_float(7);
  auto a = run_kernel(c), b = run_kernel(c);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a.value()[0].dims(), (Dims{4, 5}));
  for (int64_t i = 0; i < 20; ++i) {
    double v = a.value()[0].at_double(i);
    EXPECT_GE(v, 2.0);
    EXPECT_LT(v, 3.0);
    EXPECT_EQ(v, b.value()[0].at_double(i));
  }
}

TEST(MiscRandom, BernoulliDegenerateProbabilities) {
  auto r = run_kernel(mk("Bernoulli", 15, {Tensor::from_vector<double>({0, 1, 0, 1})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r.value()[0].dtype(), DType::F64);
  const double want[] = {0, 1, 0, 1};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.value()[0].at_double(i), want[i]);
}

TEST(MiscString, StopwordsCaseInsensitiveUpper) {
  auto c = mk("StringNormalizer", 10,
              {Tensor::from_vector<std::string>({"Monday", "tuesday", "wednesday", "Thursday"})});
  c.attrs["case_change_action"] = attr_string("UPPER");
  Attribute sw;
  sw.type = AttrType::Strings;
  sw.strings = {"monday"};
  c.attrs["stopwords"] = sw;
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.dims(), Dims{3});
  EXPECT_EQ(y.strings()[0], "TUESDAY");
  EXPECT_EQ(y.strings()[2], "THURSDAY");
}

TEST(MiscString, AllRemovedGivesOneEmptyString) {
  auto c = mk("StringNormalizer", 10, {Tensor::from_vector<std::string>({"monday", "monday"})});
  c.attrs["is_case_sensitive"] = attr_int(1);
  Attribute sw;
  sw.type = AttrType::Strings;
  sw.strings = {"monday"};
  c.attrs["stopwords"] = sw;
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r.value()[0].dims(), Dims{1});
  EXPECT_EQ(r.value()[0].strings()[0], "");
}

}  // namespace
}  // namespace gearbox::testing
