// The CLI's commands in-process (tools/cli_app.h): gearbox.compile, smi and doctor
// (python/gearbox/_tools.py) pass the same flags `gearbox` takes and read what it prints
// (--json, --report), so the Python functions follow the commands as they change.
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "tools/cli_app.h"

namespace gearbox::python {

void bind_tools(py::module_& m) {
  m.attr("__version__") = GEARBOX_VERSION_STRING;
  m.def(
      "_cli",
      [](const std::vector<std::string>& args) {
        cli::CliCapture c;
        {
          py::gil_scoped_release nogil;  // compile may take minutes; other threads go on
          c = cli::run_cli_captured(args);
        }
        if (!c.status.ok()) throw StatusError(c.status);
        return py::make_tuple(c.exit_code, c.out, c.err);
      },
      py::arg("args"), "Runs `gearbox ARGS...` in this process: (exit code, stdout, stderr); a reported error raises.");
}

}  // namespace gearbox::python
