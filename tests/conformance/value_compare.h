// Output comparison for the conformance runner: does a value gearbox computed match the
// expected value stored in the ONNX suite's output_N.pb?
//
// Rules (the ONNX backend test's own): same kind (none / tensor / sequence), same dtype and
// shape; floats within |actual - expected| <= atol + rtol * |expected| (NaN matches NaN, an
// infinity matches the same infinity); integers, bools and strings exactly; sequences element
// by element; an empty optional matches only an empty optional.
#pragma once

#include <string>

#include "kernels/kernel.h"

namespace gearbox::conformance {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

struct CompareResult {
  bool match = true;
  // Why not, with the concrete values: the first mismatching index, actual and expected
  // values, the largest absolute error and how many elements differ.
  std::string reason;
};

CompareResult compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol);
CompareResult compare_values(const RuntimeValue& actual, const RuntimeValue& expected, const Tolerance& tol);

}  // namespace gearbox::conformance
