// gearbox._C: the compiled half of the `gearbox` Python package (python/gearbox/ is the other).
#include "device/openmp.h"
#include "python/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "gearbox's C++ runtime for Python; use the `gearbox` package, which wraps this module";
  // Before this process's first OpenMP call (a session's), as the CLI's main does.
  gearbox::device::configure_openmp();
  gearbox::python::bind_errors(m);
  gearbox::python::bind_session(m);
  gearbox::python::bind_tools(m);
}
