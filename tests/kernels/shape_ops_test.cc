// Tensor-manipulation kernels: Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Transpose, Concat, Split, Slice, Pad, Expand, Tile, Shape, Size,
// ConstantOfShape, Constant, Range, EyeLike, DepthToSpace, SpaceToDepth, Trilu,
// OneHot, Compress, NonZero, ReverseSequence. Expected values come from the
// ONNX spec's examples or numpy (computed with /usr/bin/python3 while writing
// the test; the expression is in a comment).
#include "shape_test_util.h"

namespace gearbox::testing {
namespace {

using namespace shape;

// ---- Reshape family
// -----------------------------------------------------------------------

TEST(Reshape, ZeroCopyAndZeroMinusOne) {
  Tensor x = arange_f32({2, 3, 4});
  Tensor y = run1({"Reshape", 14, {x, i64({0, -1})}});
  ASSERT_EQ(y.dims(), (Dims{2, 12}));
  EXPECT_EQ(y.raw(), x.raw());  // shares the buffer
  EXPECT_EQ(run1({"Reshape", 13, {x, i64({4, -1, 2})}}).dims(), (Dims{4, 3, 2}));
}

TEST(Reshape, AllowZero) {
  // ONNX spec reshape_allowzero_reordered: [0,3,4] -> [3,4,0] with allowzero=1.
  Tensor x = make<float>({}, {0, 3, 4});
  EXPECT_EQ(run1({"Reshape", 14, {x, i64({3, 4, 0})}, {{"allowzero", attr_int(1)}}}).dims(), (Dims{3, 4, 0}));
  // Without allowzero, 0 copies the input dim.
  Tensor z = arange_f32({2, 3});
  EXPECT_EQ(run1({"Reshape", 14, {z, i64({0, 3})}}).dims(), (Dims{2, 3}));
  // allowzero=1 with 0 and -1 together is invalid.
  EXPECT_EQ(run_code({"Reshape", 14, {z, i64({0, -1})}, {{"allowzero", attr_int(1)}}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Reshape, Errors) {
  Tensor x = arange_f32({2, 3});
  EXPECT_EQ(run_code({"Reshape", 13, {x, i64({4, 2})}}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code({"Reshape", 13, {x, i64({-1, -1})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Reshape", 13, {x, i64({4, -1})}}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code({"Reshape", 13, {x, i64({-2, 3})}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Flatten, Axes) {
  Tensor x = arange_f32({2, 3, 4, 5});
  EXPECT_EQ(run1({"Flatten", 13, {x}}).dims(), (Dims{2, 60}));
  EXPECT_EQ(run1({"Flatten", 13, {x}, {{"axis", attr_int(0)}}}).dims(), (Dims{1, 120}));
  EXPECT_EQ(run1({"Flatten", 13, {x}, {{"axis", attr_int(4)}}}).dims(), (Dims{120, 1}));
  EXPECT_EQ(run1({"Flatten", 13, {x}, {{"axis", attr_int(-1)}}}).dims(), (Dims{24, 5}));
  EXPECT_EQ(run_code({"Flatten", 13, {x}, {{"axis", attr_int(5)}}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Squeeze, AttributeBefore13InputFrom13) {
  Tensor x = arange_f32({1, 3, 1, 5});
  EXPECT_EQ(run1({"Squeeze", 11, {x}, {{"axes", attr_ints({0, -2})}}}).dims(), (Dims{3, 5}));
  EXPECT_EQ(run1({"Squeeze", 13, {x, i64({2})}}).dims(), (Dims{1, 3, 5}));
  EXPECT_EQ(run1({"Squeeze", 13, {x}}).dims(), (Dims{3, 5}));
  EXPECT_EQ(run_code({"Squeeze", 13, {x, i64({1})}}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code({"Squeeze", 13, {x, i64({4})}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Unsqueeze, AttributeBefore13InputFrom13) {
  Tensor x = arange_f32({3, 4, 5});
  // ONNX spec unsqueeze_unsorted_axes: [3,4,5] with axes [5,4,2] ->
  // [3,4,1,5,1,1]
  EXPECT_EQ(run1({"Unsqueeze", 13, {x, i64({5, 4, 2})}}).dims(), (Dims{3, 4, 1, 5, 1, 1}));
  EXPECT_EQ(run1({"Unsqueeze", 11, {x}, {{"axes", attr_ints({-1})}}}).dims(), (Dims{3, 4, 5, 1}));
  EXPECT_EQ(run_code({"Unsqueeze", 13, {x, i64({1, 1})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Unsqueeze", 13, {x, i64({4})}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Identity, ForwardsStrings) {
  Tensor s = make<std::string>({"a", "bc"}, {2});
  Tensor y = run1({"Identity", 16, {s}});
  ASSERT_EQ(y.dtype(), DType::String);
  EXPECT_EQ(y.strings(), (std::vector<std::string>{"a", "bc"}));
}

// ---- Transpose, Concat, Split
// -------------------------------------------------------------

TEST(Transpose, PermAndDefault) {
  Tensor x = arange_f32({2, 3, 4});
  // numpy: np.arange(24).reshape(2,3,4).transpose(1,2,0)
  expect_values(run1({"Transpose", 13, {x}, {{"perm", attr_ints({1, 2, 0})}}}), {3, 4, 2},
                {0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23});
  // numpy: .transpose()
  expect_values(run1({"Transpose", 13, {x}}), {4, 3, 2},
                {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23});
  EXPECT_EQ(run_code({"Transpose", 13, {x}, {{"perm", attr_ints({0, 0, 1})}}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Transpose", 13, {x}, {{"perm", attr_ints({0, 1})}}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Transpose, StringsAndInt8) {
  Tensor s = make<std::string>({"a", "b", "c", "d", "e", "f"}, {2, 3});
  Tensor y = run1({"Transpose", 13, {s}});
  ASSERT_EQ(y.dims(), (Dims{3, 2}));
  EXPECT_EQ(y.strings(), (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
  expect_values(run1({"Transpose", 13, {make<int8_t>({1, 2, 3, 4, 5, 6}, {2, 3})}}), {3, 2}, {1, 4, 2, 5, 3, 6});
}

TEST(Concat, AxesAndErrors) {
  Tensor a = make<float>({1, 2, 3, 4}, {2, 2}), b = make<float>({5, 6, 7, 8}, {2, 2});
  // ONNX spec concat 2d: axis 1 -> [[1,2,5,6],[3,4,7,8]]; axis -2 stacks rows.
  expect_values(run1({"Concat", 13, {a, b}, {{"axis", attr_int(1)}}}), {2, 4}, {1, 2, 5, 6, 3, 4, 7, 8});
  expect_values(run1({"Concat", 13, {a, b}, {{"axis", attr_int(-2)}}}), {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor e = make<float>({}, {2, 0});
  expect_values(run1({"Concat", 13, {a, e}, {{"axis", attr_int(1)}}}), {2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run_code({"Concat", 13, {a, make<float>({1, 2, 3}, {3, 1})}, {{"axis", attr_int(1)}}}),
            ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code({"Concat", 13, {a, b}, {{"axis", attr_int(2)}}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(Split, AttributeInputAndEqual) {
  Tensor x = make<float>({1, 2, 3, 4, 5, 6}, {6});
  auto eq = run({"Split", 13, {x}, {}, 3});
  ASSERT_TRUE(eq.ok());
  expect_values(eq.value()[1], {2}, {3, 4});
  auto v11 = run({"Split", 11, {x}, {{"split", attr_ints({2, 4})}}, 2});
  ASSERT_TRUE(v11.ok());
  expect_values(v11.value()[1], {4}, {3, 4, 5, 6});
  auto v13 = run({"Split", 13, {x, i64({1, 0, 5})}, {}, 3});
  ASSERT_TRUE(v13.ok());
  expect_values(v13.value()[0], {1}, {1});
  EXPECT_EQ(v13.value()[1].dims(), (Dims{0}));
  // 2-d on axis 1: [[1,2,3],[4,5,6]] -> [[1],[4]] and [[2,3],[5,6]]
  auto two = run({"Split", 13, {make<float>({1, 2, 3, 4, 5, 6}, {2, 3}), i64({1, 2})}, {{"axis", attr_int(1)}}, 2});
  ASSERT_TRUE(two.ok());
  expect_values(two.value()[1], {2, 2}, {2, 3, 5, 6});
  EXPECT_EQ(run_code({"Split", 13, {x, i64({2, 2})}, {}, 2}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code({"Split", 13, {x}, {}, 4}), ErrorCode::SHAPE_MISMATCH);
}

// ---- Slice
// --------------------------------------------------------------------------------

TEST(Slice, NegativeStepsAndClamping) {
  Tensor x = arange_f32({4, 5});
  // numpy: b[3:0:-2, ::-1]
  expect_values(run1({"Slice", 13, {x, i64({3, -1}), i64({0, INT64_MIN}), i64({0, 1}), i64({-2, -1})}}), {2, 5},
                {19, 18, 17, 16, 15, 9, 8, 7, 6, 5});
  // numpy: b[1:1000, -100:3]
  expect_values(run1({"Slice", 13, {x, i64({1, -100}), i64({1000, 3})}}), {3, 3}, {5, 6, 7, 10, 11, 12, 15, 16, 17});
  // Start past the end gives an empty slice.
  EXPECT_EQ(run1({"Slice", 13, {x, i64({10}), i64({20}), i64({1})}}).dims(), (Dims{4, 0}));
}

TEST(Slice, AttributesBeforeOpset10) {
  Tensor x = arange_f32({4, 5});
  // numpy: b[:, 1:3]
  expect_values(
      run1({"Slice", 9, {x}, {{"starts", attr_ints({1})}, {"ends", attr_ints({3})}, {"axes", attr_ints({1})}}}), {4, 2},
      {1, 2, 6, 7, 11, 12, 16, 17});
}

TEST(Slice, Errors) {
  Tensor x = arange_f32({4, 5});
  EXPECT_EQ(run_code({"Slice", 13, {x, i64({0}), i64({1}), i64({0}), i64({0})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Slice", 13, {x, i64({0}), i64({1}), i64({2})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Slice", 13, {x, i64({0, 0}), i64({1, 1}), i64({1, -1})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Slice", 13, {x, i64({0, 0}), i64({1})}}), ErrorCode::INVALID_ARGUMENT);
}

// ---- Pad, Expand, Tile
// --------------------------------------------------------------------

TEST(Pad, Modes) {
  Tensor x = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // numpy: np.pad(x, ((1,1),(2,2)), 'reflect')
  expect_values(run1({"Pad", 13, {x, i64({1, 2, 1, 2})}, {{"mode", attr_string("reflect")}}}), {4, 7},
                {6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1});
  // numpy: np.pad(x, ((0,1),(2,1)), 'edge')
  expect_values(run1({"Pad", 13, {x, i64({0, 2, 1, 1})}, {{"mode", attr_string("edge")}}}), {3, 6},
                {1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6});
  // numpy: np.pad(x, ((1,0),(0,2)), 'constant', constant_values=9)
  expect_values(run1({"Pad", 13, {x, i64({1, 0, 0, 2}), make<float>({9}, {})}}), {3, 5},
                {9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9});
  // Negative pads crop: np.pad(x, ((0,0),(1,0)))[:, :-2]
  expect_values(run1({"Pad", 13, {x, i64({0, 1, 0, -2})}}), {2, 2}, {0, 1, 0, 4});
}

TEST(Pad, AttributesBeforeOpset11) {
  Tensor x = make<int32_t>({1, 2}, {2});
  expect_values(run1({"Pad", 2, {x}, {{"pads", attr_ints({1, 2})}, {"value", attr_float(7)}}}), {5}, {7, 1, 2, 7, 7});
  EXPECT_EQ(run_code({"Pad", 13, {x, i64({1, 2, 3})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Pad", 13, {x, i64({-3, 0})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Pad", 13, {x, i64({0, 0})}, {{"mode", attr_string("wrap")}}}), ErrorCode::ATTRIBUTE_INVALID);
}

TEST(Pad, HostileSizes) {
  Tensor x = make<float>({1, 2}, {2});
  EXPECT_EQ(run_code({"Pad", 13, {x, i64({INT64_MAX, INT64_MAX})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Pad", 13, {x, i64({INT64_MIN, 0})}}), ErrorCode::INVALID_ARGUMENT);
  // 2^39 elements per side is a valid pad but far too large to allocate.
  EXPECT_EQ(run_code({"Pad", 13, {x, i64({int64_t(1) << 39, int64_t(1) << 39})}}), ErrorCode::OUT_OF_MEMORY);
}

TEST(ExpandTile, Values) {
  // numpy: np.broadcast_to([[1],[2]], (3,2,2))
  expect_values(run1({"Expand", 13, {make<int64_t>({1, 2}, {2, 1}), i64({3, 1, 2})}}), {3, 2, 2},
                {1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2});
  EXPECT_EQ(run_code({"Expand", 13, {make<int64_t>({1, 2, 3}, {3}), i64({2})}}), ErrorCode::SHAPE_MISMATCH);
  Tensor x = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // numpy: np.tile(x, (2,2))
  expect_values(run1({"Tile", 13, {x, i64({2, 2})}}), {4, 6},
                {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  EXPECT_EQ(run_code({"Tile", 13, {x, i64({2})}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Tile", 13, {x, i64({-1, 1})}}), ErrorCode::INVALID_ARGUMENT);
}

// ---- Shape, Size, ConstantOfShape, Constant, Range, EyeLike
// -------------------------------

TEST(ShapeOps, ShapeStartEnd) {
  Tensor x = arange_f32({2, 3, 4});
  expect_values(run1({"Shape", 13, {x}}), {3}, {2, 3, 4});
  expect_values(run1({"Shape", 15, {x}, {{"start", attr_int(1)}}}), {2}, {3, 4});
  expect_values(run1({"Shape", 15, {x}, {{"start", attr_int(-10)}, {"end", attr_int(-1)}}}), {2}, {2, 3});
  expect_values(run1({"Shape", 15, {x}, {{"start", attr_int(2)}, {"end", attr_int(1)}}}), {0}, {});
  expect_values(run1({"Size", 13, {x}}), {}, {24});
}

TEST(ShapeOps, ConstantOfShapeAndConstant) {
  Attribute v;
  v.type = AttrType::Tensor;
  v.t = make<int32_t>({7}, {1});
  Tensor y = run1({"ConstantOfShape", 9, {i64({2, 3})}, {{"value", v}}});
  EXPECT_EQ(y.dtype(), DType::I32);
  expect_values(y, {2, 3}, {7, 7, 7, 7, 7, 7});
  Tensor z = run1({"ConstantOfShape", 9, {i64({2})}});
  EXPECT_EQ(z.dtype(), DType::F32);
  expect_values(z, {2}, {0, 0});
  EXPECT_EQ(run_code({"ConstantOfShape", 9, {i64({2, -1})}}), ErrorCode::INVALID_ARGUMENT);

  expect_values(run1({"Constant", 13, {}, {{"value_ints", attr_ints({4, 5})}}}), {2}, {4, 5});
  expect_values(run1({"Constant", 13, {}, {{"value_float", attr_float(2.5f)}}}), {}, {2.5});
  expect_values(run1({"Constant", 13, {}, {{"value", v}}}), {1}, {7});
  EXPECT_EQ(run_code({"Constant", 11, {}, {{"value_float", attr_float(2.5f)}}}), ErrorCode::ATTRIBUTE_INVALID);
}

TEST(ShapeOps, Range) {
  // numpy: np.arange(10, 6, -3), np.arange(1.0, 5.0, 1.5)
  expect_values(run1({"Range", 11, {make<int32_t>({10}, {}), make<int32_t>({6}, {}), make<int32_t>({-3}, {})}}), {2},
                {10, 7});
  expect_values(run1({"Range", 11, {make<float>({1}, {}), make<float>({5}, {}), make<float>({1.5f}, {})}}), {3},
                {1, 2.5, 4});
  expect_values(run1({"Range", 11, {i64s(5), i64s(1), i64s(1)}}), {0}, {});
  EXPECT_EQ(run_code({"Range", 11, {i64s(0), i64s(5), i64s(0)}}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Range", 11, {make<float>({0}, {}), make<float>({1e30f}, {}), make<float>({1e-30f}, {})}}),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code({"Range", 11, {i64s(INT64_MIN), i64s(INT64_MAX), i64s(1)}}), ErrorCode::INVALID_ARGUMENT);
}

TEST(ShapeOps, EyeLike) {
  Tensor x = make<int32_t>({0, 0, 0, 0, 0, 0}, {2, 3});
  Tensor y = run1({"EyeLike", 9, {x}, {{"k", attr_int(1)}, {"dtype", attr_int(int64_t(DType::F64))}}});
  EXPECT_EQ(y.dtype(), DType::F64);
  expect_values(y, {2, 3}, {0, 1, 0, 0, 0, 1});
}

// ---- DepthToSpace, SpaceToDepth, Trilu
// ----------------------------------------------------

TEST(DepthSpace, ModesAndInverse) {
  Tensor x = arange_f32({1, 8, 2, 2});
  // numpy: x.reshape(1,2,2,2,2,2).transpose(0,3,4,1,5,2).reshape(1,2,4,4) (DCR)
  expect_values(run1({"DepthToSpace", 13, {x}, {{"blocksize", attr_int(2)}}}), {1, 2, 4, 4},
                {0, 8,  1, 9,  16, 24, 17, 25, 2, 10, 3, 11, 18, 26, 19, 27,
                 4, 12, 5, 13, 20, 28, 21, 29, 6, 14, 7, 15, 22, 30, 23, 31});
  // numpy: x.reshape(1,2,2,2,2,2).transpose(0,1,4,2,5,3).reshape(1,2,4,4) (CRD)
  expect_values(run1({"DepthToSpace", 13, {x}, {{"blocksize", attr_int(2)}, {"mode", attr_string("CRD")}}}),
                {1, 2, 4, 4}, {0,  4,  1,  5,  8,  12, 9,  13, 2,  6,  3,  7,  10, 14, 11, 15,
                               16, 20, 17, 21, 24, 28, 25, 29, 18, 22, 19, 23, 26, 30, 27, 31});
  // numpy: s.reshape(1,1,2,2,2,2).transpose(0,3,5,1,2,4).reshape(1,4,2,2)
  expect_values(run1({"SpaceToDepth", 13, {arange_f32({1, 1, 4, 4})}, {{"blocksize", attr_int(2)}}}), {1, 4, 2, 2},
                {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15});
  EXPECT_EQ(run_code({"DepthToSpace", 13, {arange_f32({1, 3, 2, 2})}, {{"blocksize", attr_int(2)}}}),
            ErrorCode::SHAPE_MISMATCH);
}

TEST(Trilu, UpperLower) {
  Tensor x = arange_f32({3, 4});
  // numpy: np.triu(t, 1), np.tril(t, -1)
  expect_values(run1({"Trilu", 14, {x, i64s(1)}}), {3, 4}, {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
  expect_values(run1({"Trilu", 14, {x, i64s(-1)}, {{"upper", attr_int(0)}}}), {3, 4},
                {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
  EXPECT_EQ(run_code({"Trilu", 14, {make<float>({1}, {1})}}), ErrorCode::SHAPE_MISMATCH);
}

// ---- OneHot, Compress, NonZero, ReverseSequence
// -------------------------------------------

TEST(OneHot, AxisAndOutOfRange) {
  // ONNX spec onehot_negative_indices: indices [0,-7,-8], depth 10, values
  // [1,3]
  expect_values(
      run1({"OneHot", 11, {make<int64_t>({0, -7, -8}, {3}), make<float>({10}, {}), make<float>({1, 3}, {2})}}), {3, 10},
      {3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1});
  // axis 0: indices [1, 5] depth 3 -> [3, 2]; 5 is out of range (all off).
  expect_values(
      run1({"OneHot", 11, {make<int64_t>({1, 5}, {2}), i64s(3), make<int32_t>({0, 1}, {2})}, {{"axis", attr_int(0)}}}),
      {3, 2}, {0, 0, 1, 0, 0, 0});
  // Indices far outside int64 give all-off rows rather than undefined casts.
  expect_values(run1({"OneHot", 11, {make<float>({1e30f, -1e30f}, {2}), i64s(2), make<int32_t>({0, 1}, {2})}}), {2, 2},
                {0, 0, 0, 0});
}

TEST(Compress, AxisAndFlat) {
  Tensor x = make<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor cond = make<bool>({false, true, true}, {3});
  // ONNX spec compress_0: axis 0 -> [[3,4],[5,6]]
  expect_values(run1({"Compress", 11, {x, cond}, {{"axis", attr_int(0)}}}), {2, 2}, {3, 4, 5, 6});
  // No axis: flattened input, condition shorter than it.
  expect_values(run1({"Compress", 11, {x, cond}}), {2}, {2, 3});
  EXPECT_EQ(run_code({"Compress", 11, {x, make<bool>({false, false, true}, {3})}, {{"axis", attr_int(1)}}}),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(NonZero, Example) {
  // ONNX spec nonzero_example: [[1,0],[1,1]] -> [[0,1,1],[0,0,1]]
  expect_values(run1({"NonZero", 13, {make<bool>({true, false, true, true}, {2, 2})}}), {2, 3}, {0, 1, 1, 0, 0, 1});
}

TEST(ReverseSequence, BatchAndTime) {
  // ONNX spec reversesequence_time: x [4,4] (time_axis 0, batch_axis 1), lens
  // [4,3,2,1]
  Tensor x = make<float>({0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}, {4, 4});
  expect_values(run1({"ReverseSequence", 10, {x, i64({4, 3, 2, 1})}}), {4, 4},
                {3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15});
  EXPECT_EQ(run_code({"ReverseSequence", 10, {x, i64({5, 1, 1, 1})}}), ErrorCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace gearbox::testing
