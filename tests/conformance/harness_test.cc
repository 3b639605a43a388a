// Tests of the conformance harness itself: the comparison rules (value_compare.h) and the
// "OP_UNSUPPORTED names the op and its opset" rule (case_runner.h). The expected verdicts
// are worked out by hand from the tolerance formula |a - e| <= atol + rtol * |e|.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "baseline.h"
#include "case_runner.h"
#include "value_compare.h"

namespace gearbox::conformance {
namespace {

const Tolerance kTol;  // rtol 1e-3, atol 1e-7

// The per-case baseline: a regression fails the run even when another case started passing
// (the old pass count stayed the same here and let it through), and both are reported.
TEST(Baseline, RegressionIsCaughtWhenAnotherCaseStartsPassing) {
  auto baseline = parse_baseline("# comment\ntest_a\n\ntest_b  \ntest_c\n");
  ASSERT_TRUE(baseline);
  EXPECT_EQ(*baseline, (std::set<std::string>{"test_a", "test_b", "test_c"}));
  const std::vector<CaseResult> run{{"test_a", true, "PASS"}, {"test_b", false, "FAIL"}, {"test_c", true, "PASS"},
                                    {"test_d", true, "PASS"}};
  auto all = [](const std::string&) { return true; };
  BaselineDiff d = diff_baseline(run, *baseline, all);
  EXPECT_TRUE(d.failed());
  EXPECT_EQ(d.regressed, std::vector<std::string>{"test_b (FAIL)"});
  EXPECT_EQ(d.newly_passing, std::vector<std::string>{"test_d"});
  EXPECT_EQ(d.listed_ran, 3u);

  // Progress alone does not fail; a listed case missing from the suite does, unless the
  // filter left it out.
  const std::vector<CaseResult> better{{"test_a", true, "PASS"}, {"test_b", true, "PASS"}, {"test_d", true, "PASS"}};
  EXPECT_EQ(diff_baseline(better, *baseline, all).missing, std::vector<std::string>{"test_c"});
  EXPECT_TRUE(diff_baseline(better, *baseline, all).failed());
  auto not_c = [](const std::string& n) { return n != "test_c"; };
  EXPECT_FALSE(diff_baseline(better, *baseline, not_c).failed());
  // The old format, a single count, is refused rather than read as no cases.
  EXPECT_FALSE(parse_baseline("878\n"));
}

TEST(ValueCompare, FloatWithinRelativeTolerance) {
  // Allowed error for e = 1000 is 1e-7 + 1e-3 * 1000 = 1.0000001.
  EXPECT_TRUE(compare_tensors(Tensor::from_vector<double>({1001.0}), Tensor::from_vector<double>({1000.0}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<double>({1001.01}), Tensor::from_vector<double>({1000.0}), kTol).match);
}

TEST(ValueCompare, FloatAbsoluteToleranceNearZero) {
  // e = 0: only atol = 1e-7 is allowed.
  EXPECT_TRUE(compare_tensors(Tensor::from_vector<float>({5e-8f}), Tensor::from_vector<float>({0.f}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<float>({1e-6f}), Tensor::from_vector<float>({0.f}), kTol).match);
}

TEST(ValueCompare, NanAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(compare_tensors(Tensor::from_vector<float>({nan, inf, -inf}), Tensor::from_vector<float>({nan, inf, -inf}),
                              kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<float>({0.f}), Tensor::from_vector<float>({nan}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<float>({nan}), Tensor::from_vector<float>({0.f}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<float>({-inf}), Tensor::from_vector<float>({inf}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<float>({3e38f}), Tensor::from_vector<float>({inf}), kTol).match);
}

TEST(ValueCompare, ReasonNamesFirstMismatchAndMaxError) {
  Tensor e = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5.5f, 7}, {2, 3});
  CompareResult r = compare_tensors(a, e, kTol);
  ASSERT_FALSE(r.match);
  EXPECT_NE(r.reason.find("2 of 6 elements differ"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("index 4 [1,1]"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("actual 5.5, expected 5"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("max abs error 1"), std::string::npos) << r.reason;
}

TEST(ValueCompare, IntegersAndBoolsExact) {
  // 2^53 + 1 is not representable as a double: an exact int64 compare must still see it.
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_TRUE(compare_tensors(Tensor::from_vector<int64_t>({big}), Tensor::from_vector<int64_t>({big}), kTol).match);
  EXPECT_FALSE(
      compare_tensors(Tensor::from_vector<int64_t>({big - 1}), Tensor::from_vector<int64_t>({big}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<int32_t>({1000}), Tensor::from_vector<int32_t>({1001}), kTol).match);
  EXPECT_TRUE(compare_tensors(Tensor::from_vector<bool>({true, false}), Tensor::from_vector<bool>({true, false}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor::from_vector<bool>({true, true}), Tensor::from_vector<bool>({true, false}), kTol).match);
}

TEST(ValueCompare, DtypeAndShapeMustMatch) {
  CompareResult r = compare_tensors(Tensor::from_vector<double>({1}), Tensor::from_vector<float>({1}), kTol);
  EXPECT_FALSE(r.match);
  EXPECT_NE(r.reason.find("dtype float64, expected float32"), std::string::npos) << r.reason;
  r = compare_tensors(Tensor::from_vector<float>({1, 2}, {1, 2}), Tensor::from_vector<float>({1, 2}, {2}), kTol);
  EXPECT_FALSE(r.match);
  EXPECT_NE(r.reason.find("shape [1,2], expected [2]"), std::string::npos) << r.reason;
  // Empty tensors of the same shape match; of different shapes they do not.
  EXPECT_TRUE(compare_tensors(Tensor(DType::F32, {0, 3}), Tensor(DType::F32, {0, 3}), kTol).match);
  EXPECT_FALSE(compare_tensors(Tensor(DType::F32, {0, 3}), Tensor(DType::F32, {3, 0}), kTol).match);
}

TEST(ValueCompare, Strings) {
  using S = std::string;
  EXPECT_TRUE(compare_tensors(Tensor::from_vector<S>({"a", "bc"}), Tensor::from_vector<S>({"a", "bc"}), kTol).match);
  CompareResult r = compare_tensors(Tensor::from_vector<S>({"a", "bd"}), Tensor::from_vector<S>({"a", "bc"}), kTol);
  EXPECT_FALSE(r.match);
  EXPECT_NE(r.reason.find("index 1"), std::string::npos) << r.reason;
}

TEST(ValueCompare, SequencesAndOptionals) {
  TensorSequence s1{DType::F32, {Tensor::from_vector<float>({1}), Tensor::from_vector<float>({2})}};
  TensorSequence s2{DType::F32, {Tensor::from_vector<float>({1}), Tensor::from_vector<float>({2.5f})}};
  TensorSequence s3{DType::F32, {Tensor::from_vector<float>({1})}};
  EXPECT_TRUE(compare_values(RuntimeValue(s1), RuntimeValue(s1), kTol).match);
  CompareResult r = compare_values(RuntimeValue(s2), RuntimeValue(s1), kTol);
  EXPECT_FALSE(r.match);
  EXPECT_NE(r.reason.find("sequence element 1"), std::string::npos) << r.reason;
  EXPECT_FALSE(compare_values(RuntimeValue(s3), RuntimeValue(s1), kTol).match);
  EXPECT_TRUE(compare_values(RuntimeValue(), RuntimeValue(), kTol).match);
  EXPECT_FALSE(compare_values(RuntimeValue(Tensor::from_vector<float>({1})), RuntimeValue(), kTol).match);
  EXPECT_FALSE(compare_values(RuntimeValue(), RuntimeValue(Tensor::from_vector<float>({1})), kTol).match);
  EXPECT_FALSE(compare_values(RuntimeValue(s3), RuntimeValue(Tensor::from_vector<float>({1})), kTol).match);
}

TEST(UnsupportedRule, MessageMustNameOpAndOpset) {
  OpUses ops{{"Constant", 13}, {"Xor", 7}};
  CaseOutcome o{CaseStatus::Unsupported, "OP_UNSUPPORTED", 3001,
                "node 'Xor_0': operator Xor (opset 7) has no kernel on engine cpu.ref"};
  EXPECT_EQ(check_unsupported_message(o, ops), "");
  o.message = "operator has no kernel";
  EXPECT_NE(check_unsupported_message(o, ops), "");
  o.message = "operator Xor has no kernel";  // no opset
  EXPECT_NE(check_unsupported_message(o, ops), "");
  // Other codes and other statuses are not subject to the rule.
  o.code = "DTYPE_UNSUPPORTED";
  EXPECT_EQ(check_unsupported_message(o, ops), "");
  o = CaseOutcome{CaseStatus::Fail, "", 0, "mismatch"};
  EXPECT_EQ(check_unsupported_message(o, ops), "");
}

TEST(UnsupportedRule, DomainQualifiedOps) {
  OpUses ops{{"ai.onnx.preview.training.Adagrad", 1}};
  CaseOutcome o{CaseStatus::Unsupported, "OP_UNSUPPORTED", 3001,
                "operator ai.onnx.preview.training.Adagrad (opset 1) has no kernel"};
  EXPECT_EQ(check_unsupported_message(o, ops), "");
}

}  // namespace
}  // namespace gearbox::conformance
