// gearbox._C.Session: a runtime Session (runtime/session.h) driven from Python with numpy
// arrays, and IoInfo, what it says about each model input and output. Both the gearbox API
// (gearbox.Session) and the ONNX Runtime-compatible InferenceSession (python/gearbox/_ort.py)
// stand on this class.
//
// Every run releases the GIL from when the inputs are converted until the outputs are back,
// so Python threads run one session (or several) in parallel; Session::run is thread-safe.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "base/atomic_file.h"
#include "python/bindings.h"
#include "python/ndarray.h"
#include "runtime/node_observer.h"
#include "runtime/plan_cache.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/profile_report.h"

namespace gearbox::python {

namespace {

// What a Python run may be given to stop it (gearbox._C._RunControl, held by the ONNX Runtime
// RunOptions of python/gearbox/_ort.py): the terminate flag, shared with the runs in flight so
// that setting it from another Python thread stops them (RUN_CANCELLED), and a timeout in
// seconds counted from each run's start (RUN_DEADLINE_EXCEEDED; 0: none).
struct RunControl {
  CancelToken terminate;
  double timeout = 0;
  RunOptions options() const {
    RunOptions o;
    o.terminate = terminate;
    if (timeout > 0) o.deadline = RunOptions::after(timeout);
    return o;
  }
};

// A model input or output: ONNX Runtime's NodeArg (name, type, shape) plus the numpy dtype.
struct IoInfoView {
  std::string name;
  ValueType type;
};

std::string type_string(const ValueType& t) {
  switch (t.kind) {
    case ValueType::Kind::Tensor:
      return ort_type_name(t.dtype);
    case ValueType::Kind::Sequence:
      return "seq(" + (t.elem ? type_string(*t.elem) : ort_type_name(t.dtype)) + ")";
    case ValueType::Kind::Optional:
      return "optional(" + (t.elem ? type_string(*t.elem) : ort_type_name(t.dtype)) + ")";
  }
  return "unknown";
}

// [1, 'batch', None]: a known dim, a named one, an unknown one (as ONNX Runtime reports them).
py::list shape_list(const Shape& s) {
  py::list l;
  for (const Dim& d : s.dims) {
    if (d.known()) l.append(d.value);
    else if (!d.symbol.empty()) l.append(d.symbol);
    else l.append(py::none());
  }
  return l;
}

// Records what each node's kernel was handed and what it produced: the data pointers of its
// input and output tensors (0 for a non-tensor). Test-only (Session._run_observed): how the
// Python tests show that an array's memory reaches the kernel without a copy.
class PointerObserver final : public NodeObserver {
 public:
  struct Record {
    std::string node, op_type;
    std::vector<uintptr_t> inputs, outputs;
  };
  Status before_node(const Node& node, int depth, const std::vector<const RuntimeValue*>& inputs) override {
    Record r{node.name, node.qualified_op(), {}, {}};
    for (const RuntimeValue* v : inputs) r.inputs.push_back(v && v->is_tensor() ? address(v->tensor()) : 0);
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(r));
    return Status::OK();
  }
  Status after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      if (it->node != node.name || !it->outputs.empty()) continue;
      for (const RuntimeValue& v : outputs) it->outputs.push_back(v.is_tensor() ? address(v.tensor()) : 0);
      break;
    }
    return Status::OK();
  }
  std::vector<Record> records() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_;
  }

 private:
  static uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()); }
  std::mutex mu_;
  std::vector<Record> pending_;
};

class PySession {
 public:
  PySession(py::object model, std::optional<std::string> engines, int threads, int plan_cache_size,
            std::optional<std::string> precision, std::vector<std::string> disabled_passes,
            std::vector<std::string> engine_overrides, bool optimize, bool check_model, bool profiling)
      : profiling_(profiling) {
    SessionOptions o;
    o.engine = engines.value_or("");
    o.threads = threads;
    o.plan_cache_size = plan_cache_size;
    o.engine_overrides = std::move(engine_overrides);
    o.optimizer.disabled_passes = std::move(disabled_passes);
    o.optimizer.enabled = optimize;
    o.check_model = check_model;
    // SessionOptions has no precision mode yet (issue 21 brings the field); until it does,
    // only the one mode there is, fp32, can be asked for.
    if (precision && *precision != "fp32")
      throw StatusError(make_error(ErrorCode::USAGE, "precision '", *precision,
                                   "' is not available in this gearbox: fp32 is its only precision mode"));
    if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model) ||
        py::isinstance<py::memoryview>(model)) {
      py::object copy = py::reinterpret_steal<py::object>(PyBytes_FromObject(model.ptr()));
      if (!copy) throw py::error_already_set();
      std::string bytes = copy.cast<std::string>();
      py::gil_scoped_release nogil;
      session_ = unwrap(Session::load_bytes(bytes, std::move(o)));
    } else {
      std::string path = py::str(py::module_::import("os").attr("fspath")(model));
      py::gil_scoped_release nogil;
      session_ = unwrap(Session::load(path, std::move(o)));
    }
    for (const IoInfo& io : session_->outputs()) output_names_.push_back(io.name);
    if (profiling) profiler_ = std::make_shared<Profiler>();
  }

  std::vector<IoInfoView> inputs() const { return views(session_->inputs()); }
  std::vector<IoInfoView> outputs() const { return views(session_->outputs()); }
  const std::string& engines() const { return session_->engines(); }

  // {name: array} for every output (`names` None) or the ones named, in that order.
  py::dict run(const py::dict& feeds, const std::optional<std::vector<std::string>>& names, const RunControl* control) {
    std::vector<size_t> which = select(names);
    std::vector<RuntimeValue> outs = execute(feeds, control);
    py::dict result;
    for (size_t i : which) {
      py::str name(output_names_[i]);
      if (!result.contains(name)) result[name] = python_from_value(std::move(outs[i]));
    }
    return result;
  }

  // ONNX Runtime's run(output_names, input_feed): a list in the order asked for.
  py::list run_list(const std::optional<std::vector<std::string>>& names, const py::dict& feeds,
                    const RunControl* control) {
    std::vector<size_t> which = select(names);
    std::vector<RuntimeValue> outs = execute(feeds, control);
    py::list result;
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = which[k];
      // An output asked for twice: the earlier arrays are copies, the last one takes the tensor.
      const bool again = std::find(which.begin() + static_cast<long>(k) + 1, which.end(), i) != which.end();
      result.append(again ? python_from_value(outs[i]) : python_from_value(std::move(outs[i])));
    }
    return result;
  }

  // Per op type and per node: calls, times, FLOPs and bytes of `loop` profiled runs after
  // `warmup` unprofiled ones (the rows of gearbox profile's op_summary.csv).
  py::list profile(const py::dict& feeds, int loop, int warmup) {
    if (loop < 1 || warmup < 0)
      throw StatusError(
          make_error(ErrorCode::USAGE, "loop must be >= 1 and warmup >= 0 (got ", loop, " and ", warmup, ")"));
    std::map<std::string, RuntimeValue> inputs = convert(feeds);
    cli::ProfileData d;
    {
      py::gil_scoped_release nogil;
      for (int i = 0; i < warmup; ++i) unwrap(session_->run_values(inputs));
      Profiler profiler;
      for (int i = 0; i < loop; ++i) unwrap(session_->run_values(inputs, &profiler));
      d.ops = profiler.ops();
      d.runs = profiler.runs();
    }
    py::list rows;
    const double run_ms = cli::total_run_ms(d) / static_cast<double>(d.runs.size());
    for (const cli::OpSummary& s : cli::summarize(d)) {
      py::dict r;
      r["kind"] = s.kind;
      r["name"] = s.name;
      r["op_type"] = s.op_type;
      r["engine"] = s.engine;
      r["calls"] = s.calls;
      r["total_ms"] = s.total_ms;
      r["mean_ms"] = s.mean_ms();
      r["min_ms"] = s.min_ms;
      r["max_ms"] = s.max_ms;
      r["share_of_run"] = run_ms > 0 ? s.total_ms / loop / run_ms : 0.0;
      r["flops"] = s.flops;
      r["bytes"] = s.bytes;
      r["gflops_per_s"] = s.gflops_per_s();
      r["gb_per_s"] = s.gb_per_s();
      r["intensity"] = s.intensity();
      rows.append(r);
    }
    return rows;
  }

  // ONNX Runtime's end_profiling(): the runs profiled since the session was created, as a
  // Chrome trace (gearbox profile's trace.json) in `path`; returns path ("" when the session
  // does not profile). Profiling ends with it, as in ONNX Runtime.
  std::string end_profiling(const std::string& path) {
    std::shared_ptr<Profiler> profiler;
    {
      std::lock_guard<std::mutex> lock(profiler_mu_);
      profiler = std::move(profiler_);
    }
    if (!profiler) return "";
    cli::ProfileData d;
    d.model = model_name();
    d.ops = profiler->ops();
    d.runs = profiler->runs();
    if (Status st = write_file_atomically(path, cli::trace_json(d)); !st.ok()) throw StatusError(st);
    return path;
  }

  py::tuple run_observed(const py::dict& feeds) {
    std::map<std::string, RuntimeValue> inputs = convert(feeds);
    PointerObserver observer;
    std::vector<RuntimeValue> outs;
    {
      py::gil_scoped_release nogil;
      outs = unwrap(session_->run_values(inputs, nullptr, &observer));
    }
    py::dict result;
    for (size_t i = 0; i < outs.size(); ++i) result[py::str(output_names_[i])] = python_from_value(std::move(outs[i]));
    py::list nodes;
    for (const auto& r : observer.records()) {
      py::dict n;
      n["node"] = r.node;
      n["op_type"] = r.op_type;
      n["inputs"] = r.inputs;
      n["outputs"] = r.outputs;
      nodes.append(n);
    }
    return py::make_tuple(result, nodes);
  }

  // bench/python_overhead.py's baseline: `runs` calls of the C++ Session::run on these feeds
  // (converted once), each timed; seconds per call.
  std::vector<double> time_cpp_runs(const py::dict& feeds, int runs) {
    std::map<std::string, RuntimeValue> inputs = convert(feeds);
    std::vector<double> seconds;
    py::gil_scoped_release nogil;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      unwrap(session_->run_values(inputs));
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return seconds;
  }

  bool prepare() {
    py::gil_scoped_release nogil;
    return unwrap(session_->prepare());
  }

  py::dict plan_cache_stats() const {
    PlanCacheStats s = session_->plan_cache_stats();
    py::dict d;
    d["capacity"] = s.capacity;
    d["size"] = s.size;
    d["prepared"] = s.prepared;
    d["reused"] = s.reused;
    d["evicted"] = s.evicted;
    d["fresh_buffers"] = s.fresh_buffers;
    d["reused_buffers"] = s.reused_buffers;
    return d;
  }

  py::dict partition() const {
    const Partition& p = session_->partition();
    py::dict d;
    d["engines"] = p.engines;
    d["nodes"] = p.nodes;
    d["node_counts"] = p.node_counts;
    d["regions"] = p.regions.size();
    d["summary"] = p.summary();
    return d;
  }

  std::string optimizer_report_json() const { return session_->optimizer_report().to_json(); }
  std::string producer_name() const { return session_->model().producer_name; }
  std::string model_name() const { return session_->model().path; }

 private:
  static std::vector<IoInfoView> views(const std::vector<IoInfo>& ios) {
    std::vector<IoInfoView> v;
    for (const IoInfo& io : ios) v.push_back({io.name, io.type});
    return v;
  }

  std::vector<size_t> select(const std::optional<std::vector<std::string>>& names) const {
    std::vector<size_t> which;
    if (!names || names->empty()) {
      for (size_t i = 0; i < output_names_.size(); ++i) which.push_back(i);
      return which;
    }
    for (const std::string& n : *names) {
      auto it = std::find(output_names_.begin(), output_names_.end(), n);
      if (it == output_names_.end()) {
        std::string all;
        for (const std::string& o : output_names_) all += (all.empty() ? "'" : ", '") + o + "'";
        throw StatusError(
            make_error(ErrorCode::OUTPUT_UNKNOWN, "'", n, "' is not an output of the model; its outputs are ", all));
      }
      which.push_back(static_cast<size_t>(it - output_names_.begin()));
    }
    return which;
  }

  // The feeds as the run takes them; a name the model lacks is converted as a tensor and then
  // refused by the run (INPUT_UNKNOWN, with the model's inputs).
  std::map<std::string, RuntimeValue> convert(const py::dict& feeds) const {
    std::map<std::string, RuntimeValue> inputs;
    for (auto [key, value] : feeds) {
      std::string name = py::str(key);
      const ValueType* declared = nullptr;
      for (const IoInfo& io : session_->inputs())
        if (io.name == name) declared = &io.type;
      inputs.emplace(name, value_from_python(name, value, declared));
    }
    return inputs;
  }

  std::vector<RuntimeValue> execute(const py::dict& feeds, const RunControl* control = nullptr) {
    std::map<std::string, RuntimeValue> inputs = convert(feeds);
    std::optional<RunOptions> run_options;
    if (control) run_options = control->options();
    std::shared_ptr<Profiler> profiler;
    if (profiling_) {
      std::lock_guard<std::mutex> lock(profiler_mu_);
      profiler = profiler_;
    }
    std::optional<Result<std::vector<RuntimeValue>>> outs;
    {
      py::gil_scoped_release nogil;
      outs.emplace(session_->run_values(inputs, profiler.get(), nullptr, run_options ? &*run_options : nullptr));
    }
    // `inputs` dies here, with the GIL held: its tensors drop their references to the arrays.
    return unwrap(std::move(*outs));
  }

  std::unique_ptr<Session> session_;
  std::vector<std::string> output_names_;
  // ONNX Runtime's enable_profiling: every run is recorded until end_profiling().
  const bool profiling_;
  std::mutex profiler_mu_;
  std::shared_ptr<Profiler> profiler_;
};

}  // namespace

void bind_session(py::module_& m) {
  py::class_<IoInfoView>(m, "IoInfo", "A model input or output: name, type ('tensor(float)'), shape, dtype")
      .def_readonly("name", &IoInfoView::name)
      .def_property_readonly("type", [](const IoInfoView& v) { return type_string(v.type); })
      .def_property_readonly("shape", [](const IoInfoView& v) { return shape_list(v.type.shape); })
      .def_property_readonly("dtype",
                             [](const IoInfoView& v) -> py::object {
                               if (v.type.kind != ValueType::Kind::Tensor || v.type.dtype == DType::Undefined)
                                 return py::none();
                               return numpy_dtype(v.type.dtype);
                             })
      .def("__repr__", [](const IoInfoView& v) {
        return "IoInfo(name=" + std::string(py::repr(py::str(v.name))) + ", type='" + type_string(v.type) +
               "', shape=" + std::string(py::repr(shape_list(v.type.shape))) + ")";
      });

  py::class_<RunControl>(m, "_RunControl", "A terminate flag and a per-run timeout for Session.run")
      .def(py::init<>())
      .def_property(
          "terminate", [](const RunControl& c) { return c.terminate.cancelled(); },
          [](RunControl& c, bool on) { on ? c.terminate.cancel() : c.terminate.reset(); },
          "Set: every run given this control, running or started later, stops with RUN_CANCELLED")
      .def_property(
          "timeout", [](const RunControl& c) { return c.timeout; },
          [](RunControl& c, double seconds) {
            if (!(seconds >= 0) || seconds == std::numeric_limits<double>::infinity())
              throw StatusError(make_error(ErrorCode::API_INVALID_ARGUMENT,
                                           "timeout must be a finite number of "
                                           "seconds >= 0 (0: none), got ",
                                           seconds));
            c.timeout = seconds;
          },
          "Seconds each run may take (0: no limit)");

  py::class_<PySession>(m, "Session",
                        "A loaded model (.onnx or .gbm, by path or bytes), ready to run on numpy arrays. "
                        "Thread-safe: several Python threads may run one session at once.")
      .def(py::init<py::object, std::optional<std::string>, int, int, std::optional<std::string>,
                    std::vector<std::string>, std::vector<std::string>, bool, bool, bool>(),
           py::arg("model"), py::kw_only(), py::arg("engines") = py::none(), py::arg("threads") = 0,
           py::arg("plan_cache_size") = -1, py::arg("precision") = py::none(),
           py::arg("disabled_passes") = std::vector<std::string>{},
           py::arg("engine_overrides") = std::vector<std::string>{}, py::arg("optimize") = true,
           py::arg("check_model") = true, py::arg("profiling") = false)
      .def_property_readonly("inputs", &PySession::inputs)
      .def_property_readonly("outputs", &PySession::outputs)
      .def_property_readonly("engines", &PySession::engines)
      .def_property_readonly("partition", &PySession::partition)
      .def_property_readonly("_optimizer_report_json", &PySession::optimizer_report_json)
      .def_property_readonly("_producer_name", &PySession::producer_name)
      .def("run", &PySession::run, py::arg("feeds"), py::arg("outputs") = py::none(), py::arg("run_control") = nullptr,
           "Runs the model; returns {output name: numpy array} (all outputs, or those named). With a "
           "_RunControl, the run stops with RUN_CANCELLED once its flag is set (from any thread) or "
           "RUN_DEADLINE_EXCEEDED after its timeout.")
      .def("_run_list", &PySession::run_list, py::arg("output_names"), py::arg("input_feed"),
           py::arg("run_control") = nullptr)
      .def("_run_observed", &PySession::run_observed, py::arg("feeds"),
           "Test hook: (outputs, per node the data pointers its kernel got and produced).")
      .def("profile", &PySession::profile, py::arg("feeds"), py::arg("loop") = 10, py::arg("warmup") = 1,
           "Profiles `loop` runs after `warmup`: the op summary, per op type then per node, as dicts.")
      .def("_end_profiling", &PySession::end_profiling, py::arg("path"))
      .def("_time_cpp_runs", &PySession::time_cpp_runs, py::arg("feeds"), py::arg("runs"))
      .def("prepare", &PySession::prepare, "Runs once on zeros so the first real run finds its plan ready.")
      .def("plan_cache_stats", &PySession::plan_cache_stats);
}

}  // namespace gearbox::python
