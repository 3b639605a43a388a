// numpy <-> Tensor conversions (see ndarray.h for what is borrowed and what is copied).
#include "python/ndarray.h"

#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/half.h"
#include "python/bindings.h"

namespace gearbox::python {

namespace {

// numpy's character codes per gearbox dtype ('e' float16 ... '?' bool).
DType dtype_from_numpy(const py::dtype& dt) {
  if (dt.kind() == 'U' || dt.kind() == 'S' || dt.kind() == 'O') return DType::String;
  if (dt.kind() == 'b' && dt.itemsize() == 1) return DType::Bool;
  const bool sint = dt.kind() == 'i', uint = dt.kind() == 'u', flt = dt.kind() == 'f';
  switch (dt.itemsize()) {
    case 1:
      return sint ? DType::I8 : uint ? DType::U8 : DType::Undefined;
    case 2:
      return sint ? DType::I16 : uint ? DType::U16 : flt ? DType::F16 : DType::Undefined;
    case 4:
      return sint ? DType::I32 : uint ? DType::U32 : flt ? DType::F32 : DType::Undefined;
    case 8:
      return sint ? DType::I64 : uint ? DType::U64 : flt ? DType::F64 : DType::Undefined;
    default:
      return DType::Undefined;
  }
}

bool native_byte_order(const py::dtype& dt) {
  const char order = dt.attr("byteorder").cast<std::string>()[0];
  return order == '=' || order == '|';
}

// Keeps `array` alive for as long as a tensor borrows its memory. The reference is dropped
// under the GIL, which the thread that drops the last tensor may not hold (it does in this
// module, but a tensor may outlive the call that made it), and not at all once the
// interpreter is shutting down.
std::shared_ptr<const void> hold(const py::array& array) {
  PyObject* ref = array.ptr();
  Py_INCREF(ref);
  return std::shared_ptr<const void>(array.data(), [ref](const void*) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(ref);
  });
}

Tensor copy_strings(const std::string& name, const py::array& a) {
  Dims dims(a.shape(), a.shape() + a.ndim());
  Tensor t = unwrap(Tensor::allocate(DType::String, dims));
  py::list flat = a.attr("ravel")().attr("tolist")();
  std::vector<std::string>& out = t.strings();
  for (size_t i = 0; i < out.size(); ++i) {
    py::handle e = flat[i];
    if (py::isinstance<py::bytes>(e)) {
      out[i] = e.cast<std::string>();
    } else if (py::isinstance<py::str>(e)) {
      out[i] = e.cast<std::string>();
    } else {
      throw StatusError(make_error(ErrorCode::INPUT_DTYPE_MISMATCH, "input '", name, "': element ", i, " is a ",
                                   std::string(py::str(e.get_type().attr("__name__"))),
                                   ", not a str (object arrays must hold strings)"));
    }
  }
  return t;
}

}  // namespace

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::F32:
    case DType::BF16:
      return py::dtype("float32");
    case DType::F64:
      return py::dtype("float64");
    case DType::F16:
      return py::dtype("float16");
    case DType::I8:
      return py::dtype("int8");
    case DType::U8:
      return py::dtype("uint8");
    case DType::I16:
      return py::dtype("int16");
    case DType::U16:
      return py::dtype("uint16");
    case DType::I32:
      return py::dtype("int32");
    case DType::U32:
      return py::dtype("uint32");
    case DType::I64:
      return py::dtype("int64");
    case DType::U64:
      return py::dtype("uint64");
    case DType::Bool:
      return py::dtype("bool");
    default:
      return py::dtype("object");
  }
}

std::string ort_type_name(DType t) {
  switch (t) {
    case DType::F32:
      return "tensor(float)";
    case DType::F64:
      return "tensor(double)";
    case DType::F16:
      return "tensor(float16)";
    case DType::BF16:
      return "tensor(bfloat16)";
    case DType::String:
      return "tensor(string)";
    case DType::Undefined:
      return "tensor(undefined)";
    default:
      return "tensor(" + std::string(dtype_name(t)) + ")";  // int64, uint8, bool, ...
  }
}

Tensor tensor_from_python(const std::string& name, py::handle value, bool* borrowed) {
  if (borrowed) *borrowed = false;
  py::array a = py::isinstance<py::array>(value) ? py::reinterpret_borrow<py::array>(value)
                                                 : py::array(py::module_::import("numpy").attr("asarray")(value));
  const py::dtype dt = a.dtype();
  const DType type = dtype_from_numpy(dt);
  if (type == DType::Undefined)
    throw StatusError(make_error(ErrorCode::INPUT_DTYPE_MISMATCH, "input '", name, "' is a numpy ",
                                 std::string(py::str(py::handle(dt))), " array, a dtype gearbox has no tensors of"));
  if (type == DType::String) return copy_strings(name, a);
  Dims dims(a.shape(), a.shape() + a.ndim());
  const int flags = a.flags();
  constexpr int kBorrowable =
      static_cast<int>(py::array::c_style) | static_cast<int>(py::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if ((flags & kBorrowable) == kBorrowable && native_byte_order(dt)) {
    if (borrowed) *borrowed = true;
    return Tensor::borrow(type, std::move(dims), hold(a), a.data());
  }
  // One copy, by numpy (it knows strides and byte orders): into a view of the new tensor.
  Tensor t = unwrap(Tensor::allocate_uninitialized(type, dims));
  if (t.numel() > 0) {
    void* dst = t.mutable_raw();
    // The view's base keeps nothing alive: the view dies before the tensor, in this scope.
    py::array view(numpy_dtype(type), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()), dst,
                   py::capsule(dst, "gearbox.view"));
    view[py::ellipsis()] = a;
  }
  return t;
}

py::object array_from_tensor(Tensor t) {
  const DType type = t.dtype();
  std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end());
  if (type == DType::String) {
    py::list items;
    for (const std::string& s : t.strings()) {
      // str like ONNX Runtime; bytes that are not UTF-8 stay bytes rather than fail the run.
      PyObject* text = PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), nullptr);
      if (text) {
        items.append(py::reinterpret_steal<py::str>(text));
      } else {
        PyErr_Clear();
        items.append(py::bytes(s));
      }
    }
    py::object dims = py::cast(shape);
    return py::module_::import("numpy").attr("array")(items, "object").attr("reshape")(dims);
  }
  if (type == DType::BF16) {
    py::array_t<float> out(shape);
    const BFloat16* src = t.data<BFloat16>();
    float* dst = out.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = static_cast<float>(src[i]);
    return out;
  }
  const py::dtype dt = numpy_dtype(type);
  if (t.numel() == 0 || !t.owns_buffer_alone()) {
    py::array out(dt, shape);
    if (t.nbytes()) std::memcpy(out.mutable_data(), t.raw(), t.nbytes());
    return out;
  }
  void* data = const_cast<void*>(t.raw());
  auto owned = std::make_unique<Tensor>(std::move(t));
  py::capsule base(owned.get(), kTensorCapsuleName, [](PyObject* capsule) {
    std::unique_ptr<Tensor>(static_cast<Tensor*>(PyCapsule_GetPointer(capsule, kTensorCapsuleName)));
  });
  owned.release();  // the capsule owns it now
  return py::array(dt, shape, data, base);
}

RuntimeValue value_from_python(const std::string& name, py::handle value, const ValueType* declared) {
  if (declared && declared->kind == ValueType::Kind::Optional) {
    if (value.is_none()) return RuntimeValue();
    declared = declared->elem.get();
  }
  if (!declared || declared->kind != ValueType::Kind::Sequence) return tensor_from_python(name, value);
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
    throw StatusError(make_error(ErrorCode::INPUT_DTYPE_MISMATCH, "input '", name, "' is a ", to_string(*declared),
                                 ": pass a list of arrays, not a ",
                                 std::string(py::str(value.get_type().attr("__name__")))));
  TensorSequence seq;
  seq.elem_dtype = declared->elem ? declared->elem->dtype : declared->dtype;
  for (py::handle item : value) seq.tensors.push_back(tensor_from_python(name, item));
  if (seq.elem_dtype == DType::Undefined && !seq.tensors.empty()) seq.elem_dtype = seq.tensors.front().dtype();
  return seq;
}

py::object python_from_value(RuntimeValue v) {
  if (v.is_tensor()) return array_from_tensor(std::move(v.tensor()));
  if (v.is_sequence()) {
    py::list items;
    for (Tensor& t : v.sequence().tensors) items.append(array_from_tensor(std::move(t)));
    return items;
  }
  return py::none();
}

}  // namespace gearbox::python
