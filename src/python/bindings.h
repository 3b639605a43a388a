// The pieces of the gearbox._C extension (src/python/module.cc puts them together) and what
// they share: a gearbox Status crosses into Python as an exception of gearbox/_errors.py.
// The module is thin on purpose: each binding forwards to the C++ API (runtime/session.h, the
// CLI's commands through tools/cli_app.h) and converts arrays (ndarray.h); behaviour lives
// in C++ or in the pure-Python files of the package (python/gearbox/).
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <utility>

#include "base/status.h"

namespace gearbox::python {

namespace py = pybind11;

// A Status on its way to Python; the module's translator raises the matching class of
// gearbox._errors (GearboxError and its ONNX Runtime-named subclasses).
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.to_string()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

inline void check(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}
template <typename T>
T unwrap(Result<T>&& r) {
  if (!r.ok()) throw StatusError(r.status());
  return std::move(r).value();
}

void bind_errors(py::module_& m);   // errors.cc: the translator, error_info()
void bind_session(py::module_& m);  // session_binding.cc: Session, IoInfo
void bind_tools(py::module_& m);    // tools_binding.cc: the CLI's commands in-process, version
// The framework layer's training API (Tensor <-> numpy, Module, optimizers; issue 22) adds
// bind_framework(m) here, in a file of its own, and its Python half under python/gearbox/.

}  // namespace gearbox::python
