// The accuracy budget (runtime/accuracy_budget.h): its syntax, its metrics on tensors whose
// answers are known by construction, and the search on a model with one planted sensitive
// layer among ordinary ones (planted_precision.h), where the budget must fall back exactly that
// layer and the result, rebuilt independently, must meet the budget.
#include "runtime/accuracy_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/planted_precision.h"
#include "runtime/precision_compare.h"

namespace gearbox {
namespace {

using testing::cpu_has_bf16;
using testing::planted_model;
using testing::random_tensor;

Tensor rows(const std::vector<std::vector<float>>& r) {
  Tensor t(DType::F32, {static_cast<int64_t>(r.size()), static_cast<int64_t>(r[0].size())});
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = 0; j < r[i].size(); ++j) t.data<float>()[i * r[0].size() + j] = r[i][j];
  return t;
}

TEST(AccuracyBudget, ParsesBudgetsAndRefusesMalformedOnes) {
  auto b = parse_accuracy_budget(" cosine>=0.9999, top1 >= 0.995 ");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_DOUBLE_EQ(*b->cosine, 0.9999);
  EXPECT_DOUBLE_EQ(*b->top1, 0.995);
  EXPECT_FALSE(b->relative);
  EXPECT_EQ(b->text(), "cosine>=0.9999,top1>=0.995");
  auto r = parse_accuracy_budget("relative<=0.01");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(*r->relative, 0.01);
  for (const char* bad :
       {"", ",", "cosine", "cosine>0.9", "cosine<=0.9", "cosine>=1.5", "top1>=-0.1", "relative>=0.1", "relative<=-1",
        "cosine>=abc", "cosine>=0.9x", "psnr>=30", "cosine>=0.9,cosine>=0.99", "cosine>=nan", "cosine>=inf"}) {
    auto p = parse_accuracy_budget(bad);
    ASSERT_FALSE(p.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(p.status().code(), ErrorCode::ACCURACY_BUDGET_INVALID) << bad;
  }
}

TEST(AccuracyBudget, MeasuresAgreementOverRowsAndTheWorstOutput) {
  // Sample 0: row 0 agrees (argmax 2 both), row 1 does not (0 against 2). Sample 1: both agree.
  const std::vector<std::vector<Tensor>> fp32{{rows({{1, 2, 3}, {3, 2, 1}})}, {rows({{0, 5, 1}, {9, 1, 1}})}};
  const std::vector<std::vector<Tensor>> reduced{{rows({{1, 2, 3}, {1, 2, 3}})}, {rows({{0, 5, 1}, {9, 1, 1}})}};
  const AccuracyMeasure m = measure_accuracy(fp32, reduced);
  EXPECT_EQ(m.rows, 4u);
  EXPECT_DOUBLE_EQ(m.top1, 0.75);
  // The worst sample is the first: [1,2,3,3,2,1] against [1,2,3,1,2,3]: cosine 24/28, and the
  // largest difference 2 over the largest |fp32| 3.
  EXPECT_NEAR(m.cosine, 24.0 / 28.0, 1e-12);
  EXPECT_NEAR(m.relative, 2.0 / 3.0, 1e-12);
  AccuracyBudget b;
  b.top1 = 0.75;
  EXPECT_TRUE(m.meets(b));
  b.top1 = 0.76;
  EXPECT_FALSE(m.meets(b));
  b.top1.reset();
  b.cosine = 0.86;
  EXPECT_FALSE(m.meets(b));
  EXPECT_NE(m.describe(b).find("no"), std::string::npos) << m.describe(b);
}

SessionOptions reduced_options() {
  SessionOptions o;
  o.precision = "allow_mix_precision_bf16";
  return o;
}

// Four deterministic samples of the planted model's input.
std::vector<std::map<std::string, Tensor>> calibration() {
  std::vector<std::map<std::string, Tensor>> s;
  for (uint32_t i = 0; i < 4; ++i) s.push_back({{"x", random_tensor({4, 64}, 100 + i)}});
  return s;
}

SessionFactory planted_factory() {
  return [](const SessionOptions& o) { return Session::create(planted_model(3, 2), o); };
}

// The running node that computes the model's node `name`, in a comparison.
const NodeError* find(const PrecisionComparison& c, const std::string& name) {
  for (const NodeError& n : c.nodes)
    if (n.node == name || std::find(n.from.begin(), n.from.end(), name) != n.from.end()) return &n;
  return nullptr;
}

TEST(AccuracyBudget, FallsBackOnlyThePlantedSensitiveLayer) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 arithmetic (avx512_bf16/amx_bf16)";
  auto budget = parse_accuracy_budget("cosine>=0.9999");
  ASSERT_TRUE(budget.ok());
  BudgetOptions bo;
  bo.timing_runs = 1;
  auto r = fit_accuracy_budget(planted_factory(), reduced_options(), *budget, calibration(), bo);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->mode, "allow_mix_precision_bf16");
  EXPECT_GE(r->lowered, 6u) << r->summary();  // the five ordinary MatMuls and the sensitive one
  EXPECT_LT(r->without.cosine, 0.9999) << r->summary();
  ASSERT_TRUE(r->met) << r->summary();
  EXPECT_FALSE(r->all_kept) << r->summary();
  ASSERT_EQ(r->kept_nodes().size(), 1u) << r->summary();
  EXPECT_GE(r->achieved.cosine, 0.9999) << r->summary();

  // Rebuilt with that node kept: it is the sensitive MatMul, every ordinary one still computes
  // in bf16, and the output meets the budget on a sample the search never saw.
  SessionOptions kept = reduced_options();
  kept.keep_dtype_nodes = r->kept_nodes();
  SessionOptions fp32_options;
  fp32_options.precision = "force_fp32";
  auto fp32 = Session::create(planted_model(3, 2), fp32_options);
  auto chosen = Session::create(planted_model(3, 2), kept);
  ASSERT_TRUE(fp32.ok() && chosen.ok()) << chosen.status().to_string();
  const std::map<std::string, Tensor> unseen{{"x", random_tensor({4, 64}, 999)}};
  auto c = compare_precision(**fp32, **chosen, unseen);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const NodeError* sensitive = find(*c, "sensitive");
  ASSERT_TRUE(sensitive) << c->table(100);
  EXPECT_EQ(sensitive->node, r->kept_nodes()[0]);
  EXPECT_EQ(sensitive->compute_dtype, DType::Undefined) << c->table(100);
  for (const char* ordinary : {"ordinary", "ordinary1", "ordinary2", "tail0", "tail1"}) {
    const NodeError* n = find(*c, ordinary);
    ASSERT_TRUE(n) << ordinary;
    EXPECT_EQ(n->compute_dtype, DType::BF16) << ordinary;
  }
  ASSERT_EQ(c->model_outputs.size(), 1u);
  EXPECT_GE(c->model_outputs[0].cosine, 0.9999) << c->table(100);
  EXPECT_NE(r->summary().find(r->kept_nodes()[0]), std::string::npos) << r->summary();
}

TEST(AccuracyBudget, ALooseBudgetKeepsNothingAndAnExactOneKeepsEverything) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 arithmetic (avx512_bf16/amx_bf16)";
  BudgetOptions bo;
  bo.timing_runs = 1;
  auto loose_budget = parse_accuracy_budget("cosine>=0.5");
  auto exact_budget = parse_accuracy_budget("relative<=0");
  ASSERT_TRUE(loose_budget.ok() && exact_budget.ok());
  auto loose = fit_accuracy_budget(planted_factory(), reduced_options(), *loose_budget, calibration(), bo);
  ASSERT_TRUE(loose.ok()) << loose.status().to_string();
  EXPECT_TRUE(loose->met);
  EXPECT_EQ(loose->kept, 0u);
  EXPECT_TRUE(loose->tries.empty());
  // relative<=0: only fp32 itself is exact, so every lowered node falls back, and it says so.
  auto exact = fit_accuracy_budget(planted_factory(), reduced_options(), *exact_budget, calibration(), bo);
  ASSERT_TRUE(exact.ok()) << exact.status().to_string();
  EXPECT_TRUE(exact->met);
  EXPECT_TRUE(exact->all_kept) << exact->summary();
  EXPECT_EQ(exact->kept, exact->lowered);
  EXPECT_EQ(exact->achieved.relative, 0);
  EXPECT_NE(exact->summary().find("only with every lowered node in fp32"), std::string::npos) << exact->summary();
}

TEST(AccuracyBudget, RefusesForceFp32AndAnEmptyCalibrationSet) {
  auto budget = parse_accuracy_budget("cosine>=0.99");
  ASSERT_TRUE(budget.ok());
  auto none = fit_accuracy_budget(planted_factory(), reduced_options(), *budget, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::USAGE);
  SessionOptions fp32;
  fp32.precision = "force_fp32";
  auto plain = fit_accuracy_budget(planted_factory(), fp32, *budget, calibration());
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), ErrorCode::USAGE);
}

}  // namespace
}  // namespace gearbox
