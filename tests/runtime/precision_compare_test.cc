// The precision debugger (runtime/precision_compare.h) on a planted sensitive layer
// (planted_precision.h): that MatMul must be named as the first jump, not the ordinary bf16
// MatMul before it.
#include "runtime/precision_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/planted_precision.h"

namespace gearbox {
namespace {

using testing::cpu_has_bf16;
using testing::GraphBuilder;
using testing::random_tensor;

Model planted() { return testing::planted_model(); }

SessionOptions mode(const std::string& m, const std::string& keep = "") {
  SessionOptions o;
  o.precision = m;
  o.keep_dtype = keep;
  return o;
}

// The node that computes the model's node `name` (itself, or the one the passes fused it into).
const NodeError* find(const PrecisionComparison& c, const std::string& name) {
  for (const NodeError& n : c.nodes)
    if (n.node == name || std::find(n.from.begin(), n.from.end(), name) != n.from.end()) return &n;
  return nullptr;
}

TEST(PrecisionCompare, NamesThePlantedSensitiveLayerFirst) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 arithmetic (avx512_bf16/amx_bf16)";
  auto fp32 = Session::create(planted(), mode("force_fp32"));
  auto bf16 = Session::create(planted(), mode("allow_mix_precision_bf16"));
  ASSERT_TRUE(fp32.ok() && bf16.ok()) << bf16.status().to_string();
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({4, 64}, 3)}};
  auto c = compare_precision(**fp32, **bf16, feeds);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const NodeError* ordinary = find(*c, "ordinary");
  const NodeError* sensitive = find(*c, "sensitive");
  ASSERT_TRUE(ordinary && sensitive) << c->table(100);
  EXPECT_EQ(ordinary->compute_dtype, DType::BF16);
  EXPECT_EQ(sensitive->compute_dtype, DType::BF16);
  // The ordinary MatMul's error is one bf16 rounding's worth; no jump there.
  EXPECT_GT(ordinary->error, 0);
  EXPECT_FALSE(ordinary->jump) << c->table(100);
  ASSERT_TRUE(c->first_jump) << c->table(100);
  EXPECT_EQ(&c->nodes[*c->first_jump], sensitive) << c->table(100);
  EXPECT_NE(c->table(100).find("line '" + sensitive->node + "'"), std::string::npos) << c->table(100);
  ASSERT_EQ(c->model_outputs.size(), 1u);
  EXPECT_LT(c->model_outputs[0].cosine, 0.999) << c->table(100);

  // Kept in fp32 by its model name (the passes fused it with the Relu), it stops being a jump,
  // and the output agrees with fp32 again.
  const std::string keep = std::string(GEARBOX_TEST_TMP) + "/keep_sensitive.txt";
  std::filesystem::create_directories(GEARBOX_TEST_TMP);
  std::ofstream(keep) << "sensitive\n";
  auto kept = Session::create(planted(), mode("allow_mix_precision_bf16", keep));
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  auto k = compare_precision(**fp32, **kept, feeds);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_FALSE(k->first_jump) << k->table(100);
  EXPECT_GT(k->model_outputs[0].cosine, 0.9999) << k->table(100);
}

TEST(PrecisionCompare, IdenticalSessionsShowNoErrorAndMismatchedGraphsAreRefused) {
  auto a = Session::create(planted(), mode("force_fp32"));
  auto b = Session::create(planted(), mode("force_fp32"));
  ASSERT_TRUE(a.ok() && b.ok());
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({4, 64}, 3)}};
  auto c = compare_precision(**a, **b, feeds);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->nodes.size(), (*a)->model().graph->nodes.size());
  for (const NodeError& n : c->nodes) EXPECT_EQ(n.error, 0) << n.node;
  EXPECT_FALSE(c->first_jump);
  EXPECT_EQ(c->unmatched, 0u);

  GraphBuilder g;
  Value* x = g.input("x", DType::F32, {Dim(4), Dim(64)});
  g.output(g.op("Relu", {x}));
  auto other = Session::create(g.take(), mode("force_fp32"));
  ASSERT_TRUE(other.ok());
  auto bad = compare_precision(**a, **other, feeds);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::USAGE);
}

}  // namespace
}  // namespace gearbox
