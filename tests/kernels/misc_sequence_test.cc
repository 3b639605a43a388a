// Sequence and optional operators, checked against the ONNX spec's semantics with
// hand-computed values.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

// run_kernel for RuntimeValue inputs/outputs (sequences, empty optionals).
Result<std::vector<RuntimeValue>> run_values(const std::string& op, int opset, std::vector<RuntimeValue> in,
                                             AttributeMap attrs = {}, size_t n_out = 1) {
  const KernelDef* def = KernelRegistry::global().find("", op, opset, kEngineRef, DType::Undefined);
  if (!def) return make_error(ErrorCode::OP_UNSUPPORTED, op);
  std::vector<const RuntimeValue*> ptrs;
  for (auto& v : in) ptrs.push_back(v.is_none() ? nullptr : &v);
  std::vector<RuntimeValue> outs(n_out);
  KernelContext ctx(OpInfo{"t", op, "", opset, &attrs}, ptrs, &outs, std::vector<bool>(n_out, true));
  GBX_RETURN_IF_ERROR(def->fn(ctx));
  return outs;
}

Tensor f(std::vector<float> v, Dims d = {}) { return Tensor::from_vector<float>(v, d); }

TEST(MiscSequence, ConstructInsertAtEraseLength) {
  auto s = run_values("SequenceConstruct", 11, {RuntimeValue(f({1})), RuntimeValue(f({2, 3}))});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto ins = run_values("SequenceInsert", 11,
                        {s.value()[0], RuntimeValue(f({9})), RuntimeValue(Tensor::scalar<int64_t>(0))});
  ASSERT_TRUE(ins.ok()) << ins.status().to_string();
  const auto& seq = ins.value()[0].sequence();
  ASSERT_EQ(seq.tensors.size(), 3u);
  EXPECT_EQ(seq.tensors[0].at_double(0), 9);
  auto at = run_values("SequenceAt", 11, {ins.value()[0], RuntimeValue(Tensor::scalar<int64_t>(-1))});
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at.value()[0].tensor().dims(), Dims{2});
  auto er = run_values("SequenceErase", 11, {ins.value()[0]});  // default: the last element
  ASSERT_TRUE(er.ok());
  auto len = run_values("SequenceLength", 11, {er.value()[0]});
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len.value()[0].tensor().data<int64_t>()[0], 2);
  auto bad = run_values("SequenceAt", 11, {ins.value()[0], RuntimeValue(Tensor::scalar<int64_t>(3))});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscSequence, SplitThenConcatWithNewAxis) {
  // [3, 2] split along axis 0 into rows (keepdims 0), then stacked back along axis 1.
  AttributeMap a;
  a["keepdims"] = attr_int(0);
  auto sp = run_values("SplitToSequence", 11, {RuntimeValue(f({1, 2, 3, 4, 5, 6}, {3, 2}))}, a);
  ASSERT_TRUE(sp.ok()) << sp.status().to_string();
  const auto& parts = sp.value()[0].sequence().tensors;
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].dims(), Dims{2});
  EXPECT_EQ(parts[1].at_double(1), 4);
  AttributeMap c;
  c["axis"] = attr_int(1);
  c["new_axis"] = attr_int(1);
  auto cat = run_values("ConcatFromSequence", 11, {sp.value()[0]}, c);
  ASSERT_TRUE(cat.ok()) << cat.status().to_string();
  const Tensor& y = cat.value()[0].tensor();
  ASSERT_EQ(y.dims(), (Dims{2, 3}));  // the transpose of the input
  const float want[] = {1, 3, 5, 2, 4, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.at_double(i), want[i]);
}

TEST(MiscSequence, SplitScalarChunksLastSmaller) {
  auto sp = run_values("SplitToSequence", 11,
                       {RuntimeValue(f({1, 2, 3, 4, 5})), RuntimeValue(Tensor::scalar<int64_t>(2))});
  ASSERT_TRUE(sp.ok()) << sp.status().to_string();
  const auto& parts = sp.value()[0].sequence().tensors;
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].dims(), Dims{1});
  EXPECT_EQ(parts[2].at_double(0), 5);
}

TEST(MiscSequence, Optionals) {
  auto has = run_values("OptionalHasElement", 15, {RuntimeValue()});
  ASSERT_TRUE(has.ok());
  EXPECT_FALSE(has.value()[0].tensor().data<bool>()[0]);
  auto opt = run_values("Optional", 15, {RuntimeValue(f({7}))});
  ASSERT_TRUE(opt.ok());
  auto get = run_values("OptionalGetElement", 15, {opt.value()[0]});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get.value()[0].tensor().at_double(0), 7);
  auto empty = run_values("OptionalGetElement", 15, {RuntimeValue()});
  EXPECT_FALSE(empty.ok());
}

TEST(MiscSequence, ConcatOfDifferentRanksIsAnError) {
  TensorSequence s{DType::F32, {f({1, 2}), f({1, 2, 3, 4}, {2, 2})}};
  AttributeMap c;
  c["axis"] = attr_int(0);
  auto r = run_values("ConcatFromSequence", 11, {RuntimeValue(s)}, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::SHAPE_MISMATCH);
}

}  // namespace
}  // namespace gearbox::testing
