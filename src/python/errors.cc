// Status -> Python exception: the class comes from gearbox._errors (one table maps each
// catalogue code to an ONNX Runtime-named class, all subclasses of GearboxError), the
// instance carries the code, name, message and the catalogue's cause and fix.
#include "python/bindings.h"
#include "tools/commands.h"

namespace gearbox::python {

namespace {

void raise_status(const Status& s) {
  const ErrorInfo& info = error_info(s.code());
  py::object make = py::module_::import("gearbox._errors").attr("_from_status");
  py::object exc = make(static_cast<int>(s.code()), std::string(info.name), s.message(), s.to_string(),
                        std::string(info.cause), std::string(info.fix));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

py::dict info_dict(const ErrorInfo& e) {
  py::dict d;
  d["code"] = e.code;
  d["name"] = std::string(e.name);
  d["summary"] = std::string(e.summary);
  d["cause"] = std::string(e.cause);
  d["fix"] = std::string(e.fix);
  return d;
}

}  // namespace

void bind_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      raise_status(e.status());
    }
  });
  m.def(
      "error_info",
      [](py::object spec) -> py::dict {
        std::string text =
            py::isinstance<py::int_>(spec) ? std::to_string(spec.cast<long long>()) : std::string(py::str(spec));
        const ErrorInfo* e = cli::find_error_spec(text);
        if (!e)
          throw StatusError(
              make_error(ErrorCode::UNKNOWN_ERROR_CODE, "'", text, "' is not a gearbox error code or name"));
        return info_dict(*e);
      },
      py::arg("code"), "The catalogue entry (code, name, summary, cause, fix) of a code, printed code or name.");
  m.def("error_catalogue", [] {
    size_t n = 0;
    const ErrorInfo* all = all_errors(&n);
    py::list l;
    for (size_t i = 0; i < n; ++i) l.append(info_dict(all[i]));
    return l;
  });
}

}  // namespace gearbox::python
