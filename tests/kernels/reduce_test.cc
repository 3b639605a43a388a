// Reductions and ranking kernels: Reduce*, ArgMax/ArgMin, TopK, CumSum, Unique.
// Expected values come from the ONNX spec's examples, numpy (computed with
// /usr/bin/python3 while writing the test; the expression is in a comment) or
// hand calculation.
#include <limits>

#include "shape_test_util.h"

namespace gearbox::testing {
namespace {

using namespace shape;

// The ONNX spec's reduce example data, shape [3,2,2].
Tensor spec_data() { return make<float>({5, 1, 20, 2, 30, 1, 40, 2, 55, 1, 60, 2}, {3, 2, 2}); }

AttributeMap axes_keep(std::vector<int64_t> axes, int64_t keepdims) {
  return {{"axes", attr_ints(std::move(axes))}, {"keepdims", attr_int(keepdims)}};
}

TEST(Reduce, SumAxesInputFrom13) {
  // numpy: np.sum(x, axis=1, keepdims=True)
  expect_values(run1({"ReduceSum", 13, {spec_data(), i64({1})}}), {3, 1, 2}, {25, 3, 70, 3, 115, 3});
  // Before 13 the axes are an attribute.
  expect_values(run1({"ReduceSum", 11, {spec_data()}, axes_keep({-2}, 0)}), {3, 2}, {25, 3, 70, 3, 115, 3});
  // No axes: everything; noop_with_empty_axes returns the input.
  expect_values(run1({"ReduceSum", 13, {spec_data()}, {{"keepdims", attr_int(0)}}}), {}, {219});
  Tensor same = run1({"ReduceSum", 13, {spec_data(), i64({})}, {{"noop_with_empty_axes", attr_int(1)}}});
  EXPECT_EQ(same.dims(), (Dims{3, 2, 2}));
}

TEST(Reduce, AttributeOps) {
  Tensor x = spec_data();
  // numpy: np.mean(x, axis=1)
  expect_values(run1({"ReduceMean", 13, {x}, axes_keep({1}, 0)}), {3, 2}, {12.5, 1.5, 35, 1.5, 57.5, 1.5});
  expect_values(run1({"ReduceMax", 13, {x}}), {1, 1, 1}, {60});
  expect_values(run1({"ReduceMin", 13, {x}, axes_keep({-1}, 0)}), {3, 2}, {1, 2, 1, 2, 1, 2});
  expect_values(run1({"ReduceProd", 13, {x}, axes_keep({0}, 0)}), {2, 2}, {8250, 1, 48000, 8});
  expect_values(run1({"ReduceL1", 13, {x}, axes_keep({2}, 0)}), {3, 2}, {6, 22, 31, 42, 56, 62});
  // numpy: np.sqrt(np.sum(x*x, axis=2))
  expect_values(run1({"ReduceL2", 13, {x}, axes_keep({2}, 0)}), {3, 2},
                {5.099019527435303, 20.099750518798828, 30.01666259765625, 40.04996871948242, 55.009090423583984,
                 60.0333251953125},
                1e-6);
  // numpy: np.log(np.sum(x, axis=(0,2)))
  expect_values(run1({"ReduceLogSum", 13, {x}, axes_keep({0, 2}, 0)}), {2}, {4.532599449157715, 4.836281776428223},
                1e-6);
  // numpy: np.log(np.sum(np.exp(x), axis=1))
  expect_values(run1({"ReduceLogSumExp", 13, {x}, axes_keep({1}, 0)}), {3, 2},
                {20.0, 2.3132617473602295, 40.00004577636719, 2.3132617473602295, 60.0067138671875, 2.3132617473602295},
                1e-6);
  expect_values(run1({"ReduceSumSquare", 13, {x}, axes_keep({1}, 0)}), {3, 2}, {425, 5, 2500, 5, 6625, 5});
}

TEST(Reduce, StableLogSumExpAndIntegers) {
  // By hand: log(2 e^1000) = 1000 + ln 2, where a naive exp overflows.
  expect_values(run1({"ReduceLogSumExp", 13, {make<float>({1000, 1000}, {2})}, axes_keep({0}, 0)}), {},
                {1000.6931471805599}, 1e-6);
  // numpy: y.sum(axis=1) and integer mean (sum // 4) for [[3,1,4,1],[5,9,2,6]]
  Tensor y = make<int32_t>({3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  expect_values(run1({"ReduceSum", 13, {y, i64({1})}, {{"keepdims", attr_int(0)}}}), {2}, {9, 22});
  expect_values(run1({"ReduceMean", 13, {y}, axes_keep({1}, 0)}), {2}, {2, 5});
}

TEST(Reduce, EmptySets) {
  Tensor e = make<float>({}, {2, 0});
  constexpr double inf = std::numeric_limits<double>::infinity();
  expect_values(run1({"ReduceSum", 13, {e, i64({1})}, {{"keepdims", attr_int(0)}}}), {2}, {0, 0});
  expect_values(run1({"ReduceProd", 13, {e}, axes_keep({1}, 0)}), {2}, {1, 1});
  expect_values(run1({"ReduceMax", 13, {e}, axes_keep({1}, 0)}), {2}, {-inf, -inf});
  expect_values(run1({"ReduceMin", 13, {e}, axes_keep({1}, 0)}), {2}, {inf, inf});
  expect_values(run1({"ReduceLogSumExp", 13, {e}, axes_keep({1}, 0)}), {2}, {-inf, -inf});
}

TEST(Reduce, IntegerOverflowWrapsAndIntegerEmptySets) {
  // numpy: np.array([2147483647, 1], dtype=np.int32).sum(dtype=np.int32) == -2147483648
  Tensor big = make<int32_t>({2147483647, 1}, {2});
  expect_values(run1({"ReduceSum", 13, {big, i64({0})}, {{"keepdims", attr_int(0)}}}), {}, {-2147483648.0});
  // numpy: np.cumsum(..., dtype=np.int32) == [2147483647, -2147483648]
  expect_values(run1({"CumSum", 14, {big, i64s(0)}}), {2}, {2147483647, -2147483648.0});
  // Max/Min of an empty int32 set are the type's bounds.
  Tensor e = make<int32_t>({}, {0, 2});
  expect_values(run1({"ReduceMax", 13, {e}, axes_keep({0}, 0)}), {2}, {-2147483648.0, -2147483648.0});
  expect_values(run1({"ReduceMin", 13, {e}, axes_keep({0}, 0)}), {2}, {2147483647, 2147483647});
}

TEST(Reduce, Errors) {
  EXPECT_EQ(run_code({"ReduceSum", 13, {spec_data(), i64({3})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"ReduceMean", 13, {spec_data()}, axes_keep({0, -3}, 1)}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"ReduceMax", 13, {make<bool>({true}, {1})}}), ErrorCode::DTYPE_UNSUPPORTED);
}

TEST(ArgMinMax, SelectLastIndex) {
  // ONNX spec argmax select_last_index example: [[2,2],[3,10]], axis 1
  Tensor x = make<float>({2, 2, 3, 10}, {2, 2});
  AttributeMap a = {{"axis", attr_int(1)}, {"keepdims", attr_int(0)}};
  expect_values(run1({"ArgMax", 13, {x}, a}), {2}, {0, 1});
  a["select_last_index"] = attr_int(1);
  expect_values(run1({"ArgMax", 13, {x}, a}), {2}, {1, 1});
  // ArgMin keepdims default, axis 0: column minima at rows 0 and 0.
  expect_values(run1({"ArgMin", 13, {x}}), {1, 2}, {0, 0});
  EXPECT_EQ(run_code({"ArgMax", 13, {x}, {{"axis", attr_int(2)}}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(TopK, LargestSmallestAndTies) {
  Tensor t = arange_f32({3, 4});
  // numpy: -np.sort(-t, axis=1)[:, :3]
  auto r = run({"TopK", 11, {t, i64({3})}, {}, 2});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values(r.value()[0], {3, 3}, {3, 2, 1, 7, 6, 5, 11, 10, 9});
  expect_values(r.value()[1], {3, 3}, {3, 2, 1, 3, 2, 1, 3, 2, 1});
  // Ties go to the lower index: [3,1,3,2] largest 2 -> indices [0,2]; smallest
  // 2 -> [1,3].
  Tensor x = make<float>({3, 1, 3, 2}, {4});
  auto big = run({"TopK", 11, {x, i64({2})}, {}, 2});
  ASSERT_TRUE(big.ok());
  expect_values(big.value()[1], {2}, {0, 2});
  auto small = run({"TopK", 11, {x, i64({2})}, {{"largest", attr_int(0)}}, 2});
  ASSERT_TRUE(small.ok());
  expect_values(small.value()[0], {2}, {1, 2});
  expect_values(small.value()[1], {2}, {1, 3});
  // Opset 1: k is an attribute.
  auto v1 = run({"TopK", 1, {x}, {{"k", attr_int(1)}}, 2});
  ASSERT_TRUE(v1.ok());
  expect_values(v1.value()[0], {1}, {3});
  EXPECT_EQ(run_code({"TopK", 11, {x, i64({5})}, {}, 2}), ErrorCode::INVALID_ARGUMENT);
}

TEST(CumSum, ExclusiveReverse) {
  // ONNX spec cumsum examples on [1,2,3,4,5]
  Tensor x = make<double>({1, 2, 3, 4, 5}, {5});
  expect_values(run1({"CumSum", 14, {x, make<int32_t>({0}, {})}}), {5}, {1, 3, 6, 10, 15});
  expect_values(run1({"CumSum", 14, {x, make<int32_t>({0}, {})}, {{"exclusive", attr_int(1)}}}), {5}, {0, 1, 3, 6, 10});
  expect_values(run1({"CumSum", 14, {x, make<int32_t>({0}, {})}, {{"reverse", attr_int(1)}}}), {5}, {15, 14, 12, 9, 5});
  expect_values(
      run1({"CumSum", 14, {x, make<int32_t>({0}, {})}, {{"reverse", attr_int(1)}, {"exclusive", attr_int(1)}}}), {5},
      {14, 12, 9, 5, 0});
  // ONNX spec cumsum_2d_axis_1
  expect_values(run1({"CumSum", 14, {make<float>({1, 2, 3, 4, 5, 6}, {2, 3}), i64s(-1)}}), {2, 3}, {1, 3, 6, 4, 9, 15});
  EXPECT_EQ(run_code({"CumSum", 14, {x, i64s(1)}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Unique, SortedUnsortedAxis) {
  // ONNX spec unique examples on [2,1,1,3,4,3]
  Tensor x = make<float>({2, 1, 1, 3, 4, 3}, {6});
  auto u = run({"Unique", 11, {x}, {{"sorted", attr_int(0)}}, 4});
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  expect_values(u.value()[0], {4}, {2, 1, 3, 4});
  expect_values(u.value()[1], {4}, {0, 1, 3, 4});
  expect_values(u.value()[2], {6}, {0, 1, 1, 2, 3, 2});
  expect_values(u.value()[3], {4}, {1, 2, 2, 1});
  auto s = run({"Unique", 11, {x}, {}, 4});
  ASSERT_TRUE(s.ok());
  expect_values(s.value()[0], {4}, {1, 2, 3, 4});
  expect_values(s.value()[1], {4}, {1, 0, 3, 4});
  expect_values(s.value()[2], {6}, {1, 0, 0, 2, 3, 2});
  expect_values(s.value()[3], {4}, {2, 1, 2, 1});
  // unique_sorted_with_axis: [[1,0,0],[1,0,0],[2,3,4]], axis 0
  auto a = run({"Unique", 11, {make<int64_t>({1, 0, 0, 1, 0, 0, 2, 3, 4}, {3, 3})}, {{"axis", attr_int(0)}}, 4});
  ASSERT_TRUE(a.ok());
  expect_values(a.value()[0], {2, 3}, {1, 0, 0, 2, 3, 4});
  expect_values(a.value()[1], {2}, {0, 2});
  expect_values(a.value()[2], {3}, {0, 0, 1});
  expect_values(a.value()[3], {2}, {2, 1});
}

}  // namespace
}  // namespace gearbox::testing
