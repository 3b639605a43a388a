// Indexing kernels: Gather, GatherElements, GatherND, Scatter, ScatterElements,
// ScatterND. Expected values come from the ONNX spec's examples or numpy
// (computed with /usr/bin/python3 while writing the test; the expression is in
// a comment). Out-of-range indices must be INVALID_ARGUMENT errors, never reads
// or writes outside the tensor.
#include "shape_test_util.h"

namespace gearbox::testing {
namespace {

using namespace shape;

TEST(Gather, AxisAndNegativeIndices) {
  Tensor x = arange_f32({3, 4});
  // numpy: np.take(np.arange(12).reshape(3,4), [[0,-1],[2,1]], axis=1)
  expect_values(run1({"Gather", 13, {x, make<int64_t>({0, -1, 2, 1}, {2, 2})}, {{"axis", attr_int(1)}}}), {3, 2, 2},
                {0, 3, 2, 1, 4, 7, 6, 5, 8, 11, 10, 9});
  // int32 indices on axis 0, scalar index drops the axis.
  expect_values(run1({"Gather", 13, {x, make<int32_t>({2}, {})}}), {4}, {8, 9, 10, 11});
  Tensor s = make<std::string>({"a", "b", "c"}, {3});
  Tensor g = run1({"Gather", 13, {s, make<int64_t>({2, 0}, {2})}});
  EXPECT_EQ(g.strings(), (std::vector<std::string>{"c", "a"}));
}

TEST(Gather, Errors) {
  Tensor x = arange_f32({3, 4});
  EXPECT_EQ(run_code({"Gather", 13, {x, make<int64_t>({3}, {1})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Gather", 13, {x, make<int64_t>({-4}, {1})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Gather", 13, {x, make<int64_t>({0}, {1})}, {{"axis", attr_int(2)}}}),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Gather", 13, {x, make<float>({0}, {1})}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(GatherElements, SpecExamples) {
  // ONNX spec gather_elements_0: [[1,2],[3,4]], indices [[0,0],[1,0]], axis 1
  // -> [[1,1],[4,3]]
  Tensor x = make<float>({1, 2, 3, 4}, {2, 2});
  expect_values(run1({"GatherElements", 13, {x, make<int64_t>({0, 0, 1, 0}, {2, 2})}, {{"axis", attr_int(1)}}}), {2, 2},
                {1, 1, 4, 3});
  // gather_elements_negative_indices: [[1,2,3],[4,5,6],[7,8,9]],
  // [[-1,-2,0],[-2,0,0]], axis 0
  Tensor y = make<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  expect_values(run1({"GatherElements", 13, {y, make<int32_t>({-1, -2, 0, -2, 0, 0}, {2, 3})}}), {2, 3},
                {7, 5, 3, 4, 2, 3});
  EXPECT_EQ(run_code({"GatherElements", 13, {x, make<int64_t>({0, 2}, {1, 2})}, {{"axis", attr_int(1)}}}),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"GatherElements", 13, {x, make<int64_t>({0, 0, 0}, {1, 3})}}), ErrorCode::SHAPE_MISMATCH);
}

TEST(GatherND, SpecExamples) {
  Tensor x = make<int32_t>({0, 1, 2, 3}, {2, 2});
  expect_values(run1({"GatherND", 13, {x, make<int64_t>({0, 0, 1, 1}, {2, 2})}}), {2}, {0, 3});
  expect_values(run1({"GatherND", 13, {x, make<int64_t>({1, 0}, {2, 1})}}), {2, 2}, {2, 3, 0, 1});
  // batch_dims 1: data [[[0,1],[2,3]],[[4,5],[6,7]]], indices [[1],[0]] ->
  // [[2,3],[4,5]]
  Tensor d = make<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  expect_values(run1({"GatherND", 13, {d, make<int64_t>({1, 0}, {2, 1})}, {{"batch_dims", attr_int(1)}}}), {2, 2},
                {2, 3, 4, 5});
  EXPECT_EQ(run_code({"GatherND", 13, {x, make<int64_t>({0, 2}, {1, 2})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"GatherND", 13, {x, make<int64_t>({0, 0, 0}, {1, 3})}}), ErrorCode::SHAPE_MISMATCH);
}

TEST(ScatterElements, SpecExamples) {
  // ONNX spec scatter_elements_without_axis
  Tensor data = make<float>({0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 3});
  Tensor ind = make<int64_t>({1, 0, 2, 0, 2, 1}, {2, 3});
  Tensor upd = make<float>({1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f}, {2, 3});
  expect_values(run1({"ScatterElements", 13, {data, ind, upd}}), {3, 3}, {2.0, 1.1, 0, 1.0, 0, 2.2, 0, 2.1, 1.2}, 1e-6);
  // The deprecated Scatter (opset 9) is the same operation.
  expect_values(run1({"Scatter", 9, {data, ind, upd}}), {3, 3}, {2.0, 1.1, 0, 1.0, 0, 2.2, 0, 2.1, 1.2}, 1e-6);
  // scatter_elements_with_negative_indices: [[1,2,3,4,5]], indices [[1,-3]],
  // axis 1
  Tensor row = make<float>({1, 2, 3, 4, 5}, {1, 5});
  expect_values(run1({"ScatterElements",
                      13,
                      {row, make<int64_t>({1, -3}, {1, 2}), make<float>({1.1f, 2.1f}, {1, 2})},
                      {{"axis", attr_int(1)}}}),
                {1, 5}, {1, 1.1, 2.1, 4, 5}, 1e-6);
  // scatter_elements_with_duplicate_indices, reduction add: [[1, 5.2, 3, 4, 5]]
  expect_values(run1({"ScatterElements",
                      16,
                      {row, make<int64_t>({1, 1}, {1, 2}), make<float>({1.1f, 2.1f}, {1, 2})},
                      {{"axis", attr_int(1)}, {"reduction", attr_string("add")}}}),
                {1, 5}, {1, 5.2, 3, 4, 5}, 1e-6);
  EXPECT_EQ(run_code({"ScatterElements",
                      13,
                      {row, make<int64_t>({5}, {1, 1}), make<float>({1}, {1, 1})},
                      {{"axis", attr_int(1)}}}),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"ScatterElements",
                      16,
                      {row, make<int64_t>({1}, {1, 1}), make<float>({1}, {1, 1})},
                      {{"reduction", attr_string("avg")}}}),
            ErrorCode::ATTRIBUTE_INVALID);
}

TEST(ScatterND, SpecExampleAndReductions) {
  // ONNX spec scatternd example 1: data [1..8], indices [[4],[3],[1],[7]],
  // updates [9..12]
  Tensor data = make<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  expect_values(run1({"ScatterND", 13, {data, make<int64_t>({4, 3, 1, 7}, {4, 1}), make<float>({9, 10, 11, 12}, {4})}}),
                {8}, {1, 11, 3, 10, 9, 6, 7, 12});
  // Duplicates with reductions (by hand): 1+5+6 = 12, 1*5*6 = 30.
  Tensor d4 = make<float>({1, 2, 3, 4}, {4});
  Tensor dup = make<int64_t>({0, 0}, {2, 1});
  Tensor u = make<float>({5, 6}, {2});
  expect_values(run1({"ScatterND", 16, {d4, dup, u}, {{"reduction", attr_string("add")}}}), {4}, {12, 2, 3, 4});
  expect_values(run1({"ScatterND", 16, {d4, dup, u}, {{"reduction", attr_string("mul")}}}), {4}, {30, 2, 3, 4});
  // Slices: 2-d data, indices pick rows.
  expect_values(run1({"ScatterND",
                      13,
                      {make<float>({1, 2, 3, 4}, {2, 2}), make<int64_t>({1}, {1, 1}), make<float>({8, 9}, {1, 2})}}),
                {2, 2}, {1, 2, 8, 9});
  EXPECT_EQ(run_code({"ScatterND", 13, {d4, make<int64_t>({4}, {1, 1}), make<float>({1}, {1})}}),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"ScatterND", 13, {d4, make<int64_t>({1}, {1, 1}), make<float>({1, 2}, {2})}}),
            ErrorCode::SHAPE_MISMATCH);
}

}  // namespace
}  // namespace gearbox::testing
