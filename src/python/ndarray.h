// numpy arrays <-> gearbox Tensors, without a copy where that is safe.
//
// In: a C-contiguous, aligned, native-byte-order array of a dtype gearbox has is borrowed: the
// tensor points into the array's memory and holds a reference to the array (dropped under the
// GIL when the last tensor sharing it dies). Kernels never write their inputs
// (base/tensor.h), so the array is read, not changed. Anything else (a strided view, a
// big-endian array, a list) is copied once into a fresh tensor by numpy's own assignment.
// Strings (numpy 'U', 'S' or object arrays of str) are copied.
//
// Out: a numeric tensor whose buffer no other tensor shares becomes a numpy array over that
// buffer; its base is a capsule named "gearbox.Tensor" that owns the tensor, so the buffer
// lives as long as the array and goes back to gearbox's pool when numpy frees it. A tensor
// that shares its buffer (an output that is an input, an initializer, a .gbm's mmap'ed weight
// or another output of the same run) is copied: writing into the array must not change them.
// bfloat16, which numpy lacks, comes out as float32 (exact).
//
// Sequences are Python lists of arrays both ways; an empty optional is None.
//
// Every function here needs the GIL.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "base/tensor.h"
#include "graph/ir.h"
#include "kernels/kernel.h"

namespace gearbox::python {

namespace py = pybind11;

inline constexpr const char* kTensorCapsuleName = "gearbox.Tensor";

// `value` as a tensor for input `name` (named in errors). *borrowed tells whether it shares
// the array's memory.
Tensor tensor_from_python(const std::string& name, py::handle value, bool* borrowed = nullptr);
// The tensor as a numpy array (see above); consumes the tensor.
py::object array_from_tensor(Tensor t);
// A run's input or output value: a tensor is an array (as above), a sequence a list of arrays,
// an empty optional None. `declared` (the model's type for the input; may be null) tells a
// sequence (a list or tuple of arrays) from a tensor (anything numpy.asarray takes).
RuntimeValue value_from_python(const std::string& name, py::handle value, const ValueType* declared);
py::object python_from_value(RuntimeValue v);
// numpy's dtype for a gearbox dtype (float32 for bfloat16, object for strings).
py::dtype numpy_dtype(DType t);
// ONNX Runtime's type string for a tensor of this dtype: "tensor(float)", "tensor(int64)".
std::string ort_type_name(DType t);

}  // namespace gearbox::python
