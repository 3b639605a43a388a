// 4-bit integers (ONNX INT4 = 22 and UINT4 = 21, IR 9 and opset 21): widened to 8 bits at
// import (issue 25 item 1).
//
// ONNX Runtime runs int4 where its CPU kernels have it: DequantizeLinear (weight-only quantized
// MatMuls: a blocked int4 weight with int4 zero points dequantized ahead of the MatMul),
// QuantizeLinear, and the data-movement ops between them (Transpose). An int4 value's meaning does
// not depend on its storage, so gearbox stores each element in its own byte (int8 / uint8,
// sign-extended), rewriting the model before libonnx (which knows no 4-bit types) sees it:
//   - every int4 tensor (initializers, Constant and ConstantOfShape values, in subgraphs too,
//     packed two per byte, the lower index in the lower nibble, in raw_data, int32_data or
//     external data) becomes an int8 / uint8 tensor of the same dims;
//   - value types declared int4 inside the graph become int8 / uint8;
//   - a QuantizeLinear whose output is 4-bit (an int4 zero point, or output_dtype INT4/UINT4)
//     quantizes to 8 bits and a Clip saturates to [-8, 7] / [0, 15]: the 4-bit result, since
//     saturation after rounding is a clamp.
// Refused with DTYPE_UNSUPPORTED naming the value or node: a main-graph input or output of a
// 4-bit type (gearbox feeds and returns whole-byte tensors; .npy has no 4-bit type), and Cast
// or CastLike to a 4-bit type. Constant folding then turns a constant int4 weight and its
// DequantizeLinear into a float32 weight at compile time, as for int8.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace gearbox {

inline constexpr int32_t kOnnxUint4 = 21;
inline constexpr int32_t kOnnxInt4 = 22;

// Reads `bytes` bytes of a tensor's external data (the importer's confined reader).
using ExternalBytesReader = std::function<Result<std::string>(const onnx::TensorProto&, uint64_t bytes)>;

// Widens the model's 4-bit integers in place, as the header comment says; returns how many
// tensors, value types and QuantizeLinear nodes it changed (0: the model has none).
Result<int> widen_int4(onnx::ModelProto& model, const ExternalBytesReader& read_external);

}  // namespace gearbox
