// Session: model loading, input validation, thread settings and the executor.
#include "runtime/session.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "base/buffer_version.h"
#include "base/logging.h"
#include "base/strings.h"
#include "device/device.h"
#include "device/memory_pool.h"
#include "device/openmp.h"
#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_reader.h"
#include "graph/onnx_importer.h"
#include "runtime/executor.h"
#include "runtime/plan_cache.h"
#include "runtime/plugin_loader.h"
#include "runtime/profiler.h"

namespace gearbox {

Session::~Session() = default;

namespace {

// Sets OpenMP's thread count of the calling thread for a scope and restores the previous one.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int threads) : previous_(omp_get_max_threads()) {
    if (threads > 0 && threads != previous_) omp_set_num_threads(threads);
  }
  ~ThreadCountScope() {
    if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
  }
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int previous_;
};

std::string describe_io(const IoInfo& io) { return "'" + io.name + "' (" + to_string(io.type) + ")"; }

// What a prepared plan is specific to: the dtype and dims of every input, in input order,
// e.g. "float32[1,3,224,224];int64[1,128]".
std::string shape_signature(const std::vector<RuntimeValue>& inputs) {
  std::string sig;
  for (const RuntimeValue& v : inputs) {
    if (!sig.empty()) sig += ';';
    if (v.is_tensor()) {
      sig += describe(v.tensor());
    } else if (v.is_sequence()) {
      sig += "seq<" + std::string(dtype_name(v.sequence().elem_dtype)) + ">(";
      for (const Tensor& t : v.sequence().tensors) sig += to_string(t.dims());
      sig += ')';
    } else {
      sig += "none";
    }
  }
  return sig;
}

// The plugin engines ("plugin.<name>") the nodes of a compiled model ran on, each with the ops
// it ran, that are not in `engines` (a .gbm keeps each node's engine: runtime/partitioner.h).
void missing_plugin_engines(const Graph& g, const std::vector<std::string>& engines,
                            std::map<std::string, std::set<std::string>>* missing) {
  for (const auto& n : g.nodes) {
    if (n->engine.rfind("plugin.", 0) == 0 && std::find(engines.begin(), engines.end(), n->engine) == engines.end())
      (*missing)[n->engine].insert(n->qualified_op());
    for_each_subgraph(*n, [&](const Graph& sub) { missing_plugin_engines(sub, engines, missing); });
  }
}

// PLUGIN_MISSING when a compiled model's plugin ops have no plugin of that name in this session.
// A plugin of that name with another version than the one compiled against loads with a warning:
// its ABI was checked when it loaded, and a version is the plugin author's to keep compatible.
Status check_compiled_plugins(const Model& model, const std::string& engine_list) {
  const std::vector<std::string> engines = split_list(engine_list);
  for (const PluginInfo& p : registered_plugins()) {
    if (std::find(engines.begin(), engines.end(), p.engine) == engines.end()) continue;
    auto v = model.plugin_versions.find(p.name);
    if (v != model.plugin_versions.end() && v->second != p.version)
      GBX_LOG_WARN("SESSION", "the compiled model{} was compiled with plugin '{}' {}; this session loaded {} ({})",
                   model.path.empty() ? "" : " '" + model.path + "'", p.name, v->second, p.version, p.path);
  }
  std::map<std::string, std::set<std::string>> missing;
  missing_plugin_engines(*model.graph, engines, &missing);
  if (missing.empty()) return Status::OK();
  std::vector<std::string> names;
  for (const auto& [engine, ops] : missing) {
    const std::string name = engine.substr(7);
    auto v = model.plugin_versions.find(name);
    names.push_back("'" + name + "'" + (v == model.plugin_versions.end() ? "" : " " + v->second) + " (" +
                    join({ops.begin(), ops.end()}) + ")");
  }
  return make_error(ErrorCode::PLUGIN_MISSING, "the compiled model", model.path.empty() ? "" : " '" + model.path + "'",
                    " needs the plugin(s) ", join(names),
                    ", which this session did not load: put their libraries on GEARBOX_OP_PATH or pass --op-path",
                    op_path_note());
}

}  // namespace

Result<std::unique_ptr<Session>> Session::load(const std::string& path, SessionOptions options) {
  // A compiled model (.gbm, told by its magic bytes) holds the optimized graph already:
  // running the passes again could change it, so the optimizer is off for it.
  if (gbm::is_gbm_file(path)) {
    GBX_ASSIGN_OR_RETURN(Model model, gbm::read_file(path));
    return create_compiled(std::move(model), std::move(options));
  }
  ImportOptions io;
  io.check_model = options.check_model;
  GBX_ASSIGN_OR_RETURN(Model model, import_onnx_file(path, io));
  return create(std::move(model), std::move(options));
}

Result<std::unique_ptr<Session>> Session::create_compiled(Model model, SessionOptions options) {
  options.optimizer.enabled = false;
  options.optimizer.use_env = false;
  return create(std::move(model), std::move(options), /*compiled=*/true);
}

Result<std::unique_ptr<Session>> Session::load_bytes(const std::string& bytes, SessionOptions options) {
  if (bytes.size() >= sizeof(gbm::kMagic) && std::memcmp(bytes.data(), gbm::kMagic, sizeof(gbm::kMagic)) == 0) {
    GBX_ASSIGN_OR_RETURN(Model model, gbm::read_bytes(bytes.data(), bytes.size()));
    return create_compiled(std::move(model), std::move(options));
  }
  ImportOptions io;
  io.check_model = options.check_model;
  GBX_ASSIGN_OR_RETURN(Model model, import_onnx_bytes(bytes, /*base_dir=*/"", io));
  return create(std::move(model), std::move(options));
}

Result<std::unique_ptr<Session>> Session::create(Model model, SessionOptions options) {
  return create(std::move(model), std::move(options), /*compiled=*/false);
}

Result<OptimizedModel> optimize_and_partition(Model& model, const SessionOptions& o, bool compiled) {
  OptimizedModel out;
  GBX_ASSIGN_OR_RETURN(out.report, optimize(model, o.optimizer));
  // After the passes, which add and fuse nodes; before the executor, which runs each node
  // on the engine chosen here.
  progress_begin(o.optimizer.progress, "partition");
  GBX_ASSIGN_OR_RETURN(std::vector<EngineOverride> overrides, parse_engine_overrides(o.engine_overrides));
  GBX_ASSIGN_OR_RETURN(out.partition, gearbox::partition(model, split_list(o.engine), overrides, compiled));
  // What a .gbm written from this model records: the version of each plugin its nodes run on.
  if (!compiled) model.plugin_versions = plugin_versions_used(*model.graph);
  // After partitioning: a node is lowered only onto a kernel of its engine that computes in
  // the reduced precision. A compiled model keeps the choices it was compiled with.
  GBX_ASSIGN_OR_RETURN(const PrecisionMode mode, parse_precision_mode(o.precision));
  if (compiled) {
    const std::string had = model.precision_mode.empty() ? "force_fp32" : model.precision_mode;
    if (mode != PrecisionMode::ForceFp32 && had != precision_mode_name(mode))
      GBX_LOG_WARN("PRECISION", "{}: compiled with precision mode {}; the requested {} does not apply to a .gbm "
                   "(compile the .onnx again with it)", model.path, had, precision_mode_name(mode));
    return out;
  }
  PrecisionLists lists;
  if (!o.keep_dtype.empty()) GBX_RETURN_IF_ERROR(read_keep_dtype(o.keep_dtype, &lists));
  if (!o.modify_mixlist.empty()) GBX_RETURN_IF_ERROR(read_modify_mixlist(o.modify_mixlist, &lists));
  lists.keep_nodes.insert(o.keep_dtype_nodes.begin(), o.keep_dtype_nodes.end());
  if (mode == PrecisionMode::ForceFp32 && !lists.empty())
    GBX_LOG_WARN("PRECISION", "--keep-dtype / --modify-mixlist have no effect under force_fp32");
  // Values are stored in bf16 only for a CPU that computes in it (compile for this machine).
  const bool arithmetic = reduced_dtype(mode) != DType::BF16 || device::detect_cpu_capabilities().bf16_arithmetic();
  GBX_ASSIGN_OR_RETURN(out.precision,
                       assign_precision(model, out.partition, mode, lists, out.report.final_nodes(), arithmetic));
  if (out.precision.moved > 0) {
    // The regions and counts after the moves (the placements kept, overrides applied again).
    GBX_ASSIGN_OR_RETURN(out.partition, gearbox::partition(model, split_list(o.engine), overrides, true));
  }
  // The optimizer planned memory before the values stored in bf16 had their dtype: plan again
  // for the compile report (the arenas of the runs plan from the graph as it runs).
  if (out.precision.stored > 0 && o.optimizer.plan_memory)
    out.report.memory = plan_memory(*model.graph, o.optimizer.memory);
  model.precision_mode = mode == PrecisionMode::ForceFp32 ? "" : std::string(precision_mode_name(mode));
  if (mode != PrecisionMode::ForceFp32) GBX_LOG_INFO("PRECISION", "{}", out.precision.summary());
  for (const std::string& w : out.precision.warnings) GBX_LOG_WARN("PRECISION", "{}", w);
  return out;
}

namespace {
// Whether this CPU computes the bf16 the model's nodes were lowered to (KernelOptions::
// bf16_arithmetic); where it does not, those nodes compute in fp32 with a warning, or the
// session fails with PRECISION_ISA_MISSING when the options forbid the fallback.
Status check_reduced_precision(const Model& model, const SessionOptions& o, KernelOptions* kernel_options) {
  const device::Capabilities caps = device::detect_cpu_capabilities();
  kernel_options->bf16_arithmetic = caps.bf16_arithmetic();  // GEARBOX_SIMULATE_MISSING_ISA hides it
  const size_t bf16_nodes = count_lowered(model, DType::BF16);
  if (bf16_nodes == 0 || kernel_options->bf16_arithmetic) return Status::OK();
  const std::string simulated = caps.simulated_missing.empty() ? "" : " (GEARBOX_SIMULATE_MISSING_ISA)";
  if (!o.precision_fallback)
    return make_error(ErrorCode::PRECISION_ISA_MISSING, model.path.empty() ? "the model" : model.path, ": ",
                      bf16_nodes, " nodes compute in bf16 (", model.precision_mode,
                      ") and this CPU has no bf16 arithmetic (AVX512_BF16 or AMX-BF16)", simulated,
                      "; allow the fp32 fallback (drop --no-precision-fallback) or compile for this CPU");
  // Values stored in bf16 between lowered nodes (runtime/precision.h, Storage) keep their
  // rounding, and the kernels convert them to fp32 and back on every run.
  size_t stored = 0;
  for (const auto& n : model.graph->nodes)
    for (const Value* v : n->outputs) stored += n->compute_dtype == DType::BF16 && v && v->type.dtype == DType::BF16;
  if (stored == 0)
    GBX_LOG_WARN("PRECISION",
                 "{}: {} nodes were compiled to compute in bf16 ({}), but this CPU has no bf16 arithmetic{}: "
                 "they compute in fp32 (as accurate, and as fast as force_fp32)",
                 model.path.empty() ? "the model" : model.path, bf16_nodes, model.precision_mode, simulated);
  else
    GBX_LOG_WARN("PRECISION",
                 "{}: {} nodes were compiled to compute in bf16 ({}), but this CPU has no bf16 arithmetic{}: "
                 "they compute in fp32, converting the {} values stored in bf16 between them to fp32 and back "
                 "(their bf16 rounding stays, and the conversions make it slower than force_fp32)",
                 model.path.empty() ? "the model" : model.path, bf16_nodes, model.precision_mode, simulated, stored);
  return Status::OK();
}
}  // namespace

Result<std::unique_ptr<Session>> Session::create(Model model, SessionOptions options, bool compiled) {
  device::configure_openmp();  // before this process's first OpenMP call
  std::unique_ptr<Session> s(new Session());
  GBX_ASSIGN_OR_RETURN(s->options_, resolve_session_options(std::move(options)));
  if (compiled) GBX_RETURN_IF_ERROR(check_compiled_plugins(model, s->options_.engine));
  s->model_ = std::move(model);
  for (const Value* v : s->model_.graph->inputs) s->inputs_.push_back({v->name, v->type});
  for (const Value* v : s->model_.graph->outputs) s->outputs_.push_back({v->name, v->type});
  GBX_ASSIGN_OR_RETURN(OptimizedModel optimized, optimize_and_partition(s->model_, s->options_, compiled));
  s->optimizer_report_ = std::move(optimized.report);
  s->partition_ = std::move(optimized.partition);
  s->precision_report_ = std::move(optimized.precision);
  s->kernel_options_.conv_winograd = s->options_.conv_winograd != 0;
  GBX_RETURN_IF_ERROR(check_reduced_precision(s->model_, s->options_, &s->kernel_options_));
  GBX_ASSIGN_OR_RETURN(s->executor_, Executor::create(s->model_, s->options_.engine, s->partition_.forced));
  // Resolved now, so a bad GEARBOX_DEVICE_MEMORY is an error at load rather than at a run.
  s->device_pool_ = s->options_.device_pool;
  if (!s->device_pool_) {
    GBX_ASSIGN_OR_RETURN(s->device_pool_, device::default_pool());
  }
  s->plan_cache_ =
      std::make_unique<PlanCache>(static_cast<size_t>(s->options_.plan_cache_size), s->executor_->num_nodes());
  return s;
}

namespace {
// ONNX Runtime's one input leniency (issue 25): a declared scalar fed a one-element 1-D
// array, and a declared [1] fed a scalar, hold the same single value; real applications pass
// them (sample-rate and step-count inputs). Returns the dims the value runs with, or nullopt
// when the shape is not one of those two cases (every other mismatch stays an error).
std::optional<Dims> lenient_dims(const Shape& declared, const Dims& got) {
  if (!declared.ranked) return std::nullopt;
  if (declared.dims.empty() && got == Dims{1}) return Dims{};
  if (declared.dims.size() == 1 && declared.dims[0].known() && declared.dims[0].value == 1 && got.empty())
    return Dims{1};
  return std::nullopt;
}

// The value as the graph declares it: a tensor `lenient_dims` accepts, reshaped (same buffer).
RuntimeValue conform_input(const IoInfo& io, const RuntimeValue& value) {
  if (io.type.kind != ValueType::Kind::Tensor || !value.is_tensor() || io.type.shape.accepts(value.tensor().dims()))
    return value;
  std::optional<Dims> dims = lenient_dims(io.type.shape, value.tensor().dims());
  if (!dims) return value;
  GBX_LOG_DEBUG("EXEC", "input '{}' declared {} given {}: accepted as {} (same single value)", io.name,
                to_string(io.type.shape), to_string(value.tensor().dims()), to_string(*dims));
  return RuntimeValue(value.tensor().reshaped(*dims));
}
}  // namespace

Result<bool> Session::prepare() const {
  std::map<std::string, Tensor> zeros;
  for (const IoInfo& io : inputs_) {
    const ValueType& t = io.type;
    if (t.kind != ValueType::Kind::Tensor || t.dtype == DType::Undefined || !t.shape.ranked) return false;
    Dims dims;
    for (const Dim& d : t.shape.dims) {
      if (!d.known()) return false;
      dims.push_back(d.value);
    }
    GBX_ASSIGN_OR_RETURN(Tensor z, Tensor::allocate(t.dtype, dims));  // zero-filled
    zeros.emplace(io.name, std::move(z));
  }
  GBX_ASSIGN_OR_RETURN(std::vector<Tensor> unused, run(zeros));
  (void)unused;
  return true;
}

Status Session::validate(const std::map<std::string, RuntimeValue>& feeds) const {
  for (const auto& [name, value] : feeds) {
    // Captured by an init-capture: clang before 16 cannot capture a structured binding.
    auto it = std::find_if(inputs_.begin(), inputs_.end(), [&n = name](const IoInfo& io) { return io.name == n; });
    if (it == inputs_.end()) {
      std::string names;
      for (const auto& io : inputs_) names += (names.empty() ? "" : ", ") + describe_io(io);
      return make_error(ErrorCode::INPUT_UNKNOWN, "'", name, "' is not an input of the model; its inputs are: ", names);
    }
    if (it->type.kind != ValueType::Kind::Tensor || !value.is_tensor()) continue;
    const Tensor& t = value.tensor();
    if (it->type.dtype != DType::Undefined && t.dtype() != it->type.dtype)
      return make_error(ErrorCode::INPUT_DTYPE_MISMATCH, "input '", name, "' must be ", dtype_name(it->type.dtype),
                        " but got ", dtype_name(t.dtype()), " (shape ", to_string(t.dims()), ")");
    if (!it->type.shape.accepts(t.dims()) && !lenient_dims(it->type.shape, t.dims()))
      return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, "input '", name, "' must have shape ",
                        to_string(it->type.shape), " but got ", to_string(t.dims()));
  }
  for (const auto& io : inputs_)
    if (!feeds.count(io.name)) return make_error(ErrorCode::INPUT_MISSING, "input ", describe_io(io), " was not given");
  return Status::OK();
}

Status Session::validate(const std::map<std::string, Tensor>& feeds) const {
  std::map<std::string, RuntimeValue> values;
  for (const auto& [k, v] : feeds) values.emplace(k, RuntimeValue(v));
  return validate(values);
}

Result<std::vector<RuntimeValue>> Session::run_values(const std::map<std::string, RuntimeValue>& feeds,
                                                      Profiler* profiler, NodeObserver* observer,
                                                      const RunOptions* run_options) const {
  GBX_RETURN_IF_ERROR(validate(feeds));
  // OpenMP's thread count is a per-thread setting: apply the session's on the calling thread
  // (server workers, streams) for this run, and give the thread its own back afterwards, so
  // the next session run on it does not inherit this one's.
  ThreadCountScope threads(options_.threads);
  KernelOptionsScope kernel_options(&kernel_options_);  // what the session's kernels may consult
  std::vector<RuntimeValue> ordered;
  ordered.reserve(inputs_.size());
  for (const auto& io : inputs_) ordered.push_back(conform_input(io, feeds.at(io.name)));
  std::string signature = shape_signature(ordered);
  bool prepared = false;
  std::shared_ptr<PreparedPlan> plan = plan_cache_->acquire(signature, &prepared);
  uint64_t runs = ++plan->runs;
  GBX_RETURN_IF_ERROR(plan->buffers.bind(device_pool_));  // the run's tensors come from it
  std::call_once(plan->arena_once, [&] {
    if (options_.arena) {
      std::vector<Dims> dims;
      for (const RuntimeValue& v : ordered) dims.push_back(v.is_tensor() ? v.tensor().dims() : Dims{});
      plan->arena = Arena::create(*model_.graph, dims, device_pool_, &plan->arena_why);
      if (!plan->arena) GBX_LOG_DEBUG("MEM_ALLOC", "no arena for {}: {}", signature, plan->arena_why);
    } else {
      plan->arena_why = "the session's arena option is off";
    }
    plan->arena_ready.store(true, std::memory_order_release);
  });
  if (prepared) {
    PlanCacheStats st = plan_cache_->stats();
    GBX_LOG_DEBUG("EXEC", "prepared plan for {} ({} of {} signatures cached)", signature, st.size, st.capacity);
  } else {
    GBX_LOG_DEBUG("EXEC", "reused plan for {} (run {})", signature, runs);
  }
  std::shared_lock<std::shared_mutex> weights_lock(weights_mu_);
  if (!profiler) return executor_->run(std::move(ordered), plan.get(), nullptr, 0, observer, run_options);
  const int run = profiler->begin_run();
  const int64_t begin_ns = profiler->now_ns();
  auto result = executor_->run(std::move(ordered), plan.get(), profiler, run, observer, run_options);
  profiler->end_run(run, begin_ns);
  return result;
}

device::Event Session::run_async(std::map<std::string, Tensor> inputs, device::Stream& stream,
                                 std::vector<Tensor>* outputs, RunOptions run_options) const {
  return stream.enqueue([this, inputs = std::move(inputs), outputs, run_options = std::move(run_options)]() -> Status {
    GBX_ASSIGN_OR_RETURN(*outputs, run(inputs, run_options));
    return Status::OK();
  });
}

PlanCacheStats Session::plan_cache_stats() const { return plan_cache_->stats(); }

Status Session::update_weight(const std::string& name, const Tensor& value) {
  Value* weight = nullptr;
  for (Value* v : model_.graph->initializers)
    if (v->name == name) weight = v;
  if (!weight) {
    std::vector<std::string> names;
    for (const Value* v : model_.graph->initializers) names.push_back(v->name);
    if (names.size() > 20) names.resize(20), names.push_back("...");
    return make_error(ErrorCode::INVALID_ARGUMENT, "update_weight: the session's graph has no weight '", name,
                      "' (misspelt, or an optimizer pass folded or rewrote it: create the session with that pass "
                      "disabled); its ",
                      model_.graph->initializers.size(), " weights are: ", join(names, ", "));
  }
  Tensor& w = weight->initializer;
  if (value.dtype() != w.dtype() || value.dims() != w.dims())
    return make_error(ErrorCode::INVALID_ARGUMENT, "update_weight: weight '", name, "' is ", describe(w),
                      ", the new value ", describe(value),
                      " (an update writes over the weight in place: pass its dtype and dims)");
  std::unique_lock<std::shared_mutex> lock(weights_mu_);
  if (w.dtype() == DType::String) {
    w.strings() = value.strings();
  } else if (w.nbytes() > 0) {
    std::memcpy(w.mutable_raw(), value.raw(), w.nbytes());  // a borrowed (mmap'ed) weight is copied first
  }
  mark_modified(w);
  return Status::OK();
}

Result<std::vector<Tensor>> Session::run(const std::map<std::string, Tensor>& feeds, Profiler* profiler,
                                         NodeObserver* observer, const RunOptions* run_options) const {
  std::map<std::string, RuntimeValue> values;
  for (const auto& [k, v] : feeds) values.emplace(k, RuntimeValue(v));
  GBX_ASSIGN_OR_RETURN(auto outs, run_values(values, profiler, observer, run_options));
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor())
      return make_error(ErrorCode::OUTPUT_MISSING, "output '", outputs_[i].name,
                        "' is a sequence or an empty optional, not a tensor");
    tensors.push_back(std::move(outs[i].tensor()));
  }
  return tensors;
}

}  // namespace gearbox
