// Einsum against hand-computed results (numpy.einsum semantics).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

Result<std::vector<Tensor>> einsum(std::string eq, std::vector<Tensor> in) {
  KernelCall c;
  c.op_type = "Einsum";
  c.opset = 12;
  c.inputs = std::move(in);
  c.attrs["equation"] = attr_string(std::move(eq));
  return run_kernel(c);
}

void expect(const Tensor& t, Dims d, std::vector<double> v) {
  ASSERT_EQ(t.dims(), d);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_DOUBLE_EQ(t.at_double(int64_t(i)), v[i]) << i;
}

const Tensor m23 = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});

TEST(MiscEinsum, MatMul) {
  auto r = einsum("ij, jk -> ik", {m23, Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect(r.value()[0], {2, 2}, {4, 5, 10, 11});
}

TEST(MiscEinsum, ImplicitOutputIsSortedLabels) {
  auto r = einsum("ji", {m23});  // implicit output "ij": the transpose
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect(r.value()[0], {3, 2}, {1, 4, 2, 5, 3, 6});
}

TEST(MiscEinsum, DiagonalWithEllipsis) {
  auto r = einsum("...ii->...i", {Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect(r.value()[0], {2, 2}, {1, 4, 5, 8});
}

TEST(MiscEinsum, SumAll) {
  auto r = einsum("ij->", {m23});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect(r.value()[0], {}, {21});
}

TEST(MiscEinsum, SizeMismatchIsAnError) {
  auto r = einsum("ij,jk->ik", {m23, m23});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::SHAPE_MISMATCH);
}

}  // namespace
}  // namespace gearbox::testing
