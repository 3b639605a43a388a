// com.microsoft QLinearConcat / QLinearAveragePool / QLinearSoftmax (reference kernels): their
// values are judged against ONNX Runtime by the oracle suite (ms_QLinear*); here, a requantizing
// concatenation worked by hand and the refusals.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

KernelCall ms(const std::string& op, std::vector<Tensor> inputs) {
  KernelCall c = make_call(op, 1, std::move(inputs));
  c.domain = "com.microsoft";
  return c;
}

ErrorCode code_of(const KernelCall& c) {
  auto r = run_kernel(c);
  return r.ok() ? ErrorCode::OK : r.status().code();
}

// a = (q - 10) * 0.5 and b = (q - 0) * 1.0, concatenated and requantized at scale 0.25, zero 4:
// a's 12 and 14 are 1 and 2, b's 3 is 3; y = v / 0.25 + 4 = 8, 12, 16.
TEST(QLinearContrib, ConcatRequantizesEachInput) {
  auto c = ms("QLinearConcat",
              {Tensor::scalar<float>(0.25f), Tensor::scalar<uint8_t>(4), Tensor::from_vector<uint8_t>({12, 14}, {1, 2}),
               Tensor::scalar<float>(0.5f), Tensor::scalar<uint8_t>(10), Tensor::from_vector<uint8_t>({3}, {1, 1}),
               Tensor::scalar<float>(1.0f), Tensor::scalar<uint8_t>(0)});
  c.attrs["axis"] = attr_int(1);
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.dims(), (Dims{1, 3}));
  EXPECT_EQ(y.dtype(), DType::U8);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y.at_double(i), 8.0 + 4 * i) << i;
  // Without its axis; with an int8 input among uint8 ones.
  c.attrs.erase("axis");
  EXPECT_EQ(code_of(c), ErrorCode::ATTRIBUTE_INVALID);
  c.attrs["axis"] = attr_int(1);
  c.inputs[5] = Tensor::from_vector<int8_t>({3}, {1, 1});
  EXPECT_EQ(code_of(c), ErrorCode::INVALID_ARGUMENT);
}

TEST(QLinearContrib, PoolAndSoftmaxRefuseWhatTheyDoNotCompute) {
  Tensor x = Tensor::from_vector<uint8_t>(std::vector<uint8_t>(16, 100), {1, 1, 4, 4});
  auto pool = ms("QLinearAveragePool", {x, Tensor::scalar<float>(0.1f), Tensor::scalar<uint8_t>(0),
                                        Tensor::scalar<float>(0.1f), Tensor::scalar<uint8_t>(0)});
  pool.attrs["kernel_shape"] = attr_ints({2, 2});
  EXPECT_EQ(code_of(pool), ErrorCode::OK);
  pool.attrs["channels_last"] = attr_int(1);
  EXPECT_EQ(code_of(pool), ErrorCode::OP_UNSUPPORTED);
  auto soft = ms("QLinearSoftmax", {x, Tensor::scalar<float>(0.0f), Tensor::scalar<uint8_t>(0),
                                    Tensor::scalar<float>(1.0f / 256), Tensor::scalar<uint8_t>(0)});
  EXPECT_EQ(code_of(soft), ErrorCode::INVALID_ARGUMENT) << "a zero scale";
  soft.inputs[1] = Tensor::scalar<float>(0.1f);
  EXPECT_EQ(code_of(soft), ErrorCode::OK);
  soft.attrs["opset"] = attr_int(99);
  EXPECT_EQ(code_of(soft), ErrorCode::ATTRIBUTE_INVALID);
}

}  // namespace
}  // namespace gearbox::testing
