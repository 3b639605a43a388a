// Pad folding: a zero constant Pad becomes the padding of the Conv or AveragePool after it;
// outputs equal the unoptimized graph's on the reference engine.
#include <gtest/gtest.h>

#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

const std::map<std::string, Tensor> kFeeds{{"x", random_tensor({2, 3, 7, 6}, 90)}};

// x -> Pad(pads, mode, value) -> op(attrs); pads over [N, C, H, W] begins then ends.
Model pad_then(const std::string& op, std::vector<int64_t> pads, AttributeMap attrs,
               const std::string& mode = "constant", float value = 0.f) {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::F32, {2, 3, 7, 6});
  std::vector<Value*> pad_in{x, b.constant("pads", ints(pads))};
  if (value != 0.f) pad_in.push_back(b.constant("value", scalar_f(value)));
  Value* p = b.op("Pad", pad_in, {{"mode", attr_string(mode)}});
  std::vector<Value*> in{p};
  if (op == "Conv") in.push_back(b.constant("w", random_tensor({4, 3, 3, 3}, 91)));
  b.output(b.op(op, in, std::move(attrs)));
  return b.take();
}

TEST(PadFoldPass, ZeroPadBecomesThePoolsOrConvsPadding) {
  const std::vector<int64_t> pads{0, 0, 1, 2, 0, 0, 2, 1};
  struct Case {
    std::string op;
    AttributeMap attrs;
  };
  const std::vector<Case> cases{
      {"AveragePool", {{"kernel_shape", attr_ints({3, 3})}}},  // Inception's branch pool (count_include_pad 0)
      {"AveragePool",
       {{"kernel_shape", attr_ints({2, 3})}, {"strides", attr_ints({2, 1})}, {"count_include_pad", attr_int(1)}}},
      {"Conv", {{"kernel_shape", attr_ints({3, 3})}}},
      {"Conv", {{"pads", attr_ints({1, 0, 0, 1})}, {"strides", attr_ints({2, 2})}}},  // its own pads add up
  };
  for (const Case& c : cases) {
    OptimizerReport rep;
    std::shared_ptr<Graph> g;
    expect_same_outputs([&] { return pad_then(c.op, pads, c.attrs); }, kFeeds, only_passes({"pad_fold"}), 1e-5f, &rep,
                        &g);
    EXPECT_EQ(rep.matches("pad_fold"), 1) << c.op;
    EXPECT_EQ(count_op(*g, "Pad"), 0u) << c.op;
  }
}

TEST(PadFoldPass, PadsThatAreNotTheOpsOwnPaddingStay) {
  auto matches = [](Model m) {
    auto rep = optimize(m, only_passes({"pad_fold"}));
    EXPECT_TRUE(rep.ok()) << rep.status().to_string();
    return rep.ok() ? rep->matches("pad_fold") : -1;
  };
  const AttributeMap pool{{"kernel_shape", attr_ints({3, 3})}};
  const std::vector<int64_t> spatial{0, 0, 1, 1, 0, 0, 1, 1};
  EXPECT_EQ(matches(pad_then("AveragePool", spatial, pool, "reflect")), 0);
  EXPECT_EQ(matches(pad_then("AveragePool", spatial, pool, "constant", 1.5f)), 0);  // not zeros
  EXPECT_EQ(matches(pad_then("AveragePool", {0, 1, 1, 1, 0, 0, 1, 1}, pool)), 0);   // the channel axis
  EXPECT_EQ(matches(pad_then("AveragePool", {0, 0, -1, 1, 0, 0, 1, 1}, pool)), 0);  // a crop
  EXPECT_EQ(matches(pad_then("MaxPool", spatial, pool)), 0);                        // pads with -inf
  AttributeMap ceil = pool;
  ceil["ceil_mode"] = attr_int(1);
  EXPECT_EQ(matches(pad_then("AveragePool", spatial, ceil)), 0);
}

}  // namespace
}  // namespace gearbox::testing
