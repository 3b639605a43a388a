// Session: the one object the CLI, the tests (and later the C API and the server) use to
// run a model. It loads a model, checks inputs against the model's signature, and runs the
// executor.
//
//   GBX_ASSIGN_OR_RETURN(auto session, Session::load("model.onnx"));
//   std::map<std::string, Tensor> feeds{{"x", x}};
//   GBX_ASSIGN_OR_RETURN(auto outputs, session->run(feeds));  // in model output order
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/run_options.h"
#include "base/status.h"
#include "base/tensor.h"
#include "device/stream.h"
#include "graph/ir.h"
#include "graph/optimizer.h"
#include "kernels/kernel.h"
#include "kernels/kernel_options.h"
#include "runtime/partitioner.h"
#include "runtime/precision.h"

namespace gearbox {

namespace device {
class MemoryPool;
}

// The Highway vector kernels first (the GEMM family, attention, normalizations, softmax,
// GELU: on BERT-base the hand-written GEMM ends 6-8% faster than oneDNN's, docs/performance.md),
// then oneDNN (convolutions, pooling and their fused and channels-last forms), the reference
// engine for everything else.
inline constexpr std::string_view kDefaultEngines = "cpu.simd,cpu.dnnl,cpu.ref";

// Everything a session is built with, typed. The tools build it from their flags
// (tools/session_flags.h); what is left at its "unset" value is filled in by
// resolve_session_options() from the environment, the one place gearbox reads its session
// variables (runtime/session_options.cc; the C API and Python rely on them).
struct SessionOptions {
  int threads = 0;  // 0: GEARBOX_NUM_THREADS, else all cores
  // Engines kernels are taken from, in priority order ("cpu.dnnl,cpu.ref"): a node runs on the
  // first engine with a kernel for its op, opset and dtype. Empty: GEARBOX_ENGINES, else
  // kDefaultEngines. Every name must be an engine of this gearbox (ENGINE_UNKNOWN).
  std::string engine;
  // "NODE_OR_OPTYPE=ENGINE" choices that override the priority list (gearbox --engine;
  // runtime/partitioner.h): a node-name match beats an op-type match; the node then runs on
  // that engine only.
  std::vector<std::string> engine_overrides;
  bool check_model = true;  // run onnx's checker at import
  // Graph passes run at create (graph/optimizer.h). With optimizer.use_env,
  // GEARBOX_DISABLE_PASSES is added to optimizer.disabled_passes ("all": no pass runs).
  OptimizerOptions optimizer;
  // Shape signatures whose prepared plan (kernel choices, recycled buffers) is kept; the
  // least recently used is evicted beyond it. -1: GEARBOX_PLAN_CACHE_SIZE, else 8. 0: none.
  int plan_cache_size = -1;
  // cpu.dnnl's Winograd convolutions (docs/engines.md): -1: GEARBOX_CONV_WINOGRAD (0 or 1),
  // else on; 0 off (direct convolution everywhere); 1 on.
  int conv_winograd = -1;
  // The precision mode (runtime/precision.h, docs/precision.md): CANN's names
  // ("allow_mix_precision_bf16"), "" or "fp32" for force_fp32. Empty: GEARBOX_PRECISION_MODE,
  // else force_fp32. Resolved to the mode's name (PRECISION_MODE_UNKNOWN otherwise). A .gbm
  // keeps the mode it was compiled with.
  std::string precision;
  // --keep-dtype and --modify-mixlist files (runtime/precision.h), read when the model is
  // optimized; empty: none.
  std::string keep_dtype, modify_mixlist;
  // Node names kept in their dtype besides the --keep-dtype file's: the layers an accuracy
  // budget fell back to fp32 (runtime/accuracy_budget.h). A name matching no node is
  // PRECISION_LIST_INVALID, as in the file.
  std::vector<std::string> keep_dtype_nodes;
  // A node lowered to bf16 on a CPU without bf16 arithmetic computes in fp32 (a warning at
  // load says so); false: such a model is PRECISION_ISA_MISSING.
  bool precision_fallback = true;
  // The device memory pool the session's tensors are allocated from (runtime/buffer_pool.h).
  // nullptr: the CPU device's pool (GEARBOX_DEVICE_MEMORY). Another pool must outlive the
  // session and every tensor its runs returned.
  device::MemoryPool* device_pool = nullptr;
  // Place a plan's intermediates at the memory planner's offsets in one range of the device
  // pool when its shapes are static (runtime/arena.h); false: every tensor from the plan's
  // buffer pool (power-of-two blocks), as before the arena.
  bool arena = true;
  // Custom-op plugins (include/gearbox/plugin.h): a colon-separated list of folders (every
  // *.so in them) and library files, loaded at create before GEARBOX_OP_PATH's entries (both
  // are used). Resolved: the two lists joined, without repeats; every plugin they hold is
  // loaded and its engine ("plugin.<name>") added at the end of `engine`.
  std::string op_path;
};

// `requested` with every unset field filled from the environment (GEARBOX_ENGINES,
// GEARBOX_NUM_THREADS, GEARBOX_PLAN_CACHE_SIZE, GEARBOX_DISABLE_PASSES, GEARBOX_CONV_WINOGRAD,
// GEARBOX_OP_PATH, whose plugins it loads: runtime/plugin_loader.h) or the default, and validated: an engine name that
// is not an engine of this gearbox is ENGINE_UNKNOWN, a malformed number USAGE (naming the variable and the value), a
// pass name PASS_UNKNOWN. The result has threads > 0, plan_cache_size >= 0, conv_winograd 0 or 1 and optimizer.use_env
// false, so resolving it again changes nothing. Session::create calls it; so does gearbox compile, so both build the
// same graph.
Result<SessionOptions> resolve_session_options(SessionOptions requested);

// The priority list a session given `requested` (SessionOptions::engine) uses: it, else
// GEARBOX_ENGINES, else kDefaultEngines (not validated: resolve_session_options does that).
std::string resolve_engines(const std::string& requested);

// What Session::create does to an imported model before it builds the executor, and what
// gearbox compile does before it writes the .gbm: the optimizer's passes, then partitioning,
// with the options as resolve_session_options() returned them. `compiled`: the model comes
// from a .gbm and its nodes keep their engines where they can (runtime/partitioner.h).
struct OptimizedModel {
  OptimizerReport report;
  Partition partition;
  PrecisionReport precision;  // the precision pass's (empty for a compiled model)
};
Result<OptimizedModel> optimize_and_partition(Model& model, const SessionOptions& resolved, bool compiled = false);

// A model input or output as the model declares it.
struct IoInfo {
  std::string name;
  ValueType type;
};

class Executor;
class NodeObserver;
class PlanCache;
class Profiler;
struct PlanCacheStats;

class Session {
 public:
  ~Session();
  // Loads an .onnx model (later also .gbm).
  static Result<std::unique_ptr<Session>> load(const std::string& path, SessionOptions options = {});
  // The same from a model's bytes in memory (.gbm by its magic bytes, else .onnx): the Python
  // module's InferenceSession(bytes). An .onnx from memory cannot refer to external data.
  static Result<std::unique_ptr<Session>> load_bytes(const std::string& bytes, SessionOptions options = {});
  // Wraps an already imported model.
  static Result<std::unique_ptr<Session>> create(Model model, SessionOptions options = {});

  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  const Model& model() const { return model_; }
  // What the graph optimizer did at create (per pass: ran, matches, nodes); every pass is
  // "off" for a .gbm, whose graph was optimized when it was compiled.
  const OptimizerReport& optimizer_report() const { return optimizer_report_; }
  // The engine priority list this session uses ("cpu.dnnl,cpu.ref").
  const std::string& engines() const { return options_.engine; }
  // The OpenMP thread count its runs use (set for the run on the calling thread and restored
  // after it, so it never leaks to the next session run on that thread).
  int threads() const { return options_.threads; }
  // Where the partitioner placed the nodes (regions, nodes per engine): for reports.
  const Partition& partition() const { return partition_; }
  // Which nodes the precision pass lowered (empty for a .gbm: Node::compute_dtype has them).
  const PrecisionReport& precision_report() const { return precision_report_; }
  // The options as resolved at load (engine list filled in): what re-optimizing the same
  // model needs to reproduce this session's graph.
  const SessionOptions& options() const { return options_; }
  // The device memory pool this session's run-time tensors come from.
  device::MemoryPool* device_pool() const { return device_pool_; }

  // Runs with named inputs; returns outputs in the model's output order. Every model input
  // must be given (INPUT_MISSING), names must exist (INPUT_UNKNOWN), dtypes and fixed dims
  // must match (INPUT_DTYPE_MISMATCH, INPUT_SHAPE_MISMATCH), except that, as in ONNX Runtime,
  // a declared scalar accepts a one-element 1-D array and a declared [1] a scalar (logged at
  // debug; the value runs with the declared shape).
  // With a profiler, every node executed is recorded in it (runtime/profiler.h); with an
  // observer, it sees every node's inputs and outputs (runtime/node_observer.h: tensor dumps).
  // With run options (base/run_options.h), the run stops early with RUN_CANCELLED when their
  // terminate flag is set (from any thread) or RUN_DEADLINE_EXCEEDED once their deadline has
  // passed: it is checked before every node, in every Loop/Scan iteration and in long
  // kernels' outer loops. A stopped run returns nothing and leaves the session as it was: its
  // buffers go back to the plan, and the next run gives the same results as before.
  Result<std::vector<RuntimeValue>> run_values(const std::map<std::string, RuntimeValue>& inputs,
                                               Profiler* profiler = nullptr, NodeObserver* observer = nullptr,
                                               const RunOptions* run_options = nullptr) const;
  // Tensor-only convenience wrapper (sequence/optional outputs are an error here).
  Result<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs, Profiler* profiler = nullptr,
                                  NodeObserver* observer = nullptr, const RunOptions* run_options = nullptr) const;
  Result<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs, const RunOptions& run_options) const {
    return run(inputs, nullptr, nullptr, &run_options);
  }
  // The input checks run() makes (INPUT_UNKNOWN, INPUT_DTYPE_MISMATCH, INPUT_SHAPE_MISMATCH,
  // INPUT_MISSING), without running: the server checks a request before queuing it.
  Status validate(const std::map<std::string, RuntimeValue>& inputs) const;
  Status validate(const std::map<std::string, Tensor>& inputs) const;

  // Enqueues a run on `stream` and returns at once; the event completes when `*outputs` holds
  // the outputs, or with the run's error. Runs on one stream execute in order, runs on
  // different streams concurrently. The session and `*outputs` must outlive the event.
  // With run options, as run(): a deadline counts from when it was set, so time spent queued
  // on the stream counts against it.
  device::Event run_async(std::map<std::string, Tensor> inputs, device::Stream& stream, std::vector<Tensor>* outputs,
                          RunOptions run_options = {}) const;

  // Runs the model once on zero-filled inputs, so that what a first run pays (oneDNN
  // primitive creation, weights reordered or packed into the kernels' layouts, the run's
  // buffers) is paid now, at load, rather than by the first request (gearbox serve does this;
  // gearbox bench --prepare). Needs every input to be a tensor of static shape: true when it
  // ran, false when the model has a dynamic or non-tensor input (nothing is done). An error
  // is the run's error (a model that cannot run on zeros; its real runs may still work).
  Result<bool> prepare() const;

  // Writes `value` over the weight (initializer) `name` of the session's graph, in place, and
  // marks it modified (base/buffer_version.h), so that no kernel runs on weights it packed or
  // reordered from the old values: what an optimizer step does. INVALID_ARGUMENT naming the
  // weights for a name the optimized graph does not hold, or giving both for another dtype or
  // shape. Waits for the runs in flight; runs that start later see the new value.
  Status update_weight(const std::string& name, const Tensor& value);

  // Hits, misses and evictions of the per-shape-signature plan cache (runtime/plan_cache.h).
  PlanCacheStats plan_cache_stats() const;

 private:
  Session() = default;
  // `compiled`: the model comes from a .gbm; its nodes keep the engines they were compiled
  // for where this session can use them (runtime/partitioner.h).
  static Result<std::unique_ptr<Session>> create(Model model, SessionOptions options, bool compiled);
  // A .gbm's model: the optimizer stays off, its graph was optimized when it was compiled.
  static Result<std::unique_ptr<Session>> create_compiled(Model model, SessionOptions options);

  Model model_;
  SessionOptions options_;
  std::vector<IoInfo> inputs_, outputs_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<PlanCache> plan_cache_;
  OptimizerReport optimizer_report_;
  Partition partition_;
  PrecisionReport precision_report_;
  device::MemoryPool* device_pool_ = nullptr;
  KernelOptions kernel_options_;  // from options_, installed on the calling thread for each run
  // Runs hold it shared, update_weight exclusively: a weight never changes under a run.
  mutable std::shared_mutex weights_mu_;
};

}  // namespace gearbox
