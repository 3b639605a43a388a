// Random generators (range, reproducibility with a seed, degenerate Bernoulli
// probabilities) and StringNormalizer (the ONNX spec examples).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

TEST(MiscRandom, UniformLikeSeededIsReproducibleAndInRange) {
  auto c = make_call("RandomUniformLike", 15, {Tensor(DType::F32, {4, 5})});
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
  auto r = run_kernel(make_call("Bernoulli", 15, {Tensor::from_vector<double>({0, 1, 0, 1})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r.value()[0].dtype(), DType::F64);
  const double want[] = {0, 1, 0, 1};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.value()[0].at_double(i), want[i]);
}

TEST(MiscString, StopwordsCaseInsensitiveUpper) {
  auto c = make_call("StringNormalizer", 10,
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
  auto c = make_call("StringNormalizer", 10, {Tensor::from_vector<std::string>({"monday", "monday"})});
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

namespace gearbox::testing {
namespace {

KernelCall tfidf_call(int64_t max_skip) {
  KernelCall c;
  c.op_type = "TfIdfVectorizer";
  c.opset = 9;
  c.inputs = {Tensor::from_vector<int32_t>({1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8})};
  c.attrs["mode"] = attr_string("TF");
  c.attrs["min_gram_length"] = attr_int(2);
  c.attrs["max_gram_length"] = attr_int(2);
  c.attrs["max_skip_count"] = attr_int(max_skip);
  c.attrs["ngram_counts"] = attr_ints({0, 4});
  c.attrs["ngram_indexes"] = attr_ints({0, 1, 2, 3, 4, 5, 6});
  c.attrs["pool_int64s"] = attr_ints({2, 3, 5, 4, 5, 6, 7, 8, 6, 7});
  return c;
}

// The spec examples tf_only_bigrams_skip0 and tf_onlybigrams_skip5.
TEST(MiscString, TfIdfBigrams) {
  auto r0 = run_kernel(tfidf_call(0));
  ASSERT_TRUE(r0.ok()) << r0.status().to_string();
  const float want0[] = {0, 0, 0, 0, 1, 1, 1};
  ASSERT_EQ(r0.value()[0].dims(), Dims{7});
  for (int i = 0; i < 7; ++i) EXPECT_EQ(r0.value()[0].data<float>()[i], want0[i]) << i;
  auto r5 = run_kernel(tfidf_call(5));
  ASSERT_TRUE(r5.ok()) << r5.status().to_string();
  const float want5[] = {0, 0, 0, 0, 1, 3, 1};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(r5.value()[0].data<float>()[i], want5[i]) << i;
}

}  // namespace
}  // namespace gearbox::testing
