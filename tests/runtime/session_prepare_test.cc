// Session::prepare: one run on zeros at load, so the first real run finds its oneDNN
// primitives and reordered weights ready (counted through dnnl_engine::weight_reorder_count)
// and still returns the right outputs; a model with a dynamic input is left alone.
#include <gtest/gtest.h>

#include "graph/pass_test_util.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

using testing::GraphBuilder;
using testing::random_tensor;
using testing::unoptimized_on;

Model conv_model(Dim batch) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {batch, 8, 10, 10});
  AttributeMap attrs;
  attrs["pads"] = testing::attr_ints({1, 1, 1, 1});
  b.output(b.op("Conv", {x, b.constant("w", random_tensor({16, 8, 3, 3}, 1)), b.constant("b", random_tensor({16}, 2))},
                attrs));
  return b.take();
}

TEST(SessionPrepare, FirstRunFindsWeightsReorderedAndIsCorrect) {
  auto s = Session::create(conv_model(2), unoptimized_on("cpu.dnnl,cpu.ref"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const int64_t before = dnnl_engine::weight_reorder_count();
  auto prepared = (*s)->prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status().to_string();
  EXPECT_TRUE(*prepared);
  EXPECT_GT(dnnl_engine::weight_reorder_count(), before) << "prepare did not reach the oneDNN conv";

  const std::map<std::string, Tensor> feeds{{"x", random_tensor({2, 8, 10, 10}, 3)}};
  const int64_t after_prepare = dnnl_engine::weight_reorder_count();
  auto got = (*s)->run(feeds);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(dnnl_engine::weight_reorder_count(), after_prepare) << "the first run reordered weights again";

  auto ref = Session::create(conv_model(2), unoptimized_on("cpu.ref"));
  ASSERT_TRUE(ref.ok());
  auto want = (*ref)->run(feeds);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ((*got)[0].dims(), (*want)[0].dims());
  for (int64_t i = 0; i < (*want)[0].numel(); ++i)
    ASSERT_NEAR((*got)[0].data<float>()[i], (*want)[0].data<float>()[i], 1e-4) << "element " << i;
}

TEST(SessionPrepare, DynamicInputIsLeftAlone) {
  auto s = Session::create(conv_model(Dim::symbolic("N")), unoptimized_on("cpu.dnnl,cpu.ref"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const int64_t before = dnnl_engine::weight_reorder_count();
  auto prepared = (*s)->prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status().to_string();
  EXPECT_FALSE(*prepared);
  EXPECT_EQ(dnnl_engine::weight_reorder_count(), before);
}

}  // namespace
}  // namespace gearbox
