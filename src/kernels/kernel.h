// The kernel interface: what a kernel receives (KernelContext) and how it registers itself
// (KernelDef + GBX_REGISTER_KERNEL).
//
// A kernel is a function `Status fn(KernelContext& ctx)` that reads its inputs and
// attributes, computes output shapes itself, and sets every output the node wants:
//
//   Status relu(KernelContext& ctx) {
//     const Tensor& x = ctx.input(0);
//     Tensor y(x.dtype(), x.dims());
//     ...
//     ctx.set_output(0, std::move(y));
//     return Status::OK();
//   }
//   GBX_REGISTER_KERNEL({"", "Relu", 6, 18, kEngineRef, {DType::F32, DType::F64}, relu});
//
// Rules: never write into an input tensor (buffers are shared); report bad input with an
// error from the catalogue (never abort); check dtypes you do not handle and return
// DTYPE_UNSUPPORTED naming the op and dtype.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "kernels/attributes.h"

namespace gearbox {

inline constexpr std::string_view kEngineRef = "cpu.ref";
// The domain of gearbox's own (fused) operators.
inline constexpr std::string_view kGearboxDomain = "com.gearbox";

// An ONNX sequence value.
struct TensorSequence {
  DType elem_dtype = DType::Undefined;
  std::vector<Tensor> tensors;
};

// What flows along an edge at run time: nothing (an empty optional), a tensor or a sequence.
class RuntimeValue {
 public:
  RuntimeValue() = default;
  RuntimeValue(Tensor t) : v_(std::move(t)) {}          // NOLINT
  RuntimeValue(TensorSequence s) : v_(std::move(s)) {}  // NOLINT
  bool is_none() const { return v_.index() == 0; }
  bool is_tensor() const { return v_.index() == 1; }
  bool is_sequence() const { return v_.index() == 2; }
  const Tensor& tensor() const { return std::get<1>(v_); }
  Tensor& tensor() { return std::get<1>(v_); }
  const TensorSequence& sequence() const { return std::get<2>(v_); }
  TensorSequence& sequence() { return std::get<2>(v_); }

 private:
  std::variant<std::monostate, Tensor, TensorSequence> v_;
};

struct KernelDef;

// Identity of the node a kernel runs for: for error messages and attribute look-ups.
struct OpInfo {
  std::string_view name;
  std::string_view op_type;
  std::string_view domain;
  int opset = 0;  // the model's opset for this node's domain
  const AttributeMap* attrs = nullptr;
  // The node's reduced compute precision (Node::compute_dtype), for a kernel that declared it
  // (KernelSupport::compute); Undefined: compute in the inputs' dtype.
  DType compute_dtype = DType::Undefined;
  // The dtype output 0 is stored in, as the graph types it (its Value's dtype; Undefined when
  // untyped): for a kernel that declared more than one dtype there (KernelSupport::outputs),
  // such as a lowered convolution whose output the precision pass stores in bf16.
  DType output_dtype = DType::Undefined;
};

// Runs a subgraph (an If branch, a Loop/Scan body) with the given inputs; provided by the
// runtime so that control-flow kernels stay in the kernel layer.
using SubgraphRunner =
    std::function<Result<std::vector<RuntimeValue>>(const Graph& body, std::vector<RuntimeValue> inputs)>;

// What a kernel keeps for one node between the runs of a prepared plan (a primitive made for
// the node's shapes, weights in its layout), so that a repeated run skips deriving it again:
// the executor gives each node of a plan one (KernelContext::node_cache), destroyed with the
// plan. A value belongs to the kernel that stored it (`owner`: any address unique to that
// kernel, such as a static's), and the kernel checks that it still fits the inputs. Thread-safe:
// concurrent runs of one plan share it.
class NodeCache {
 public:
  // What `owner` stored; null when nothing, or something of another owner, is stored.
  std::shared_ptr<void> get(const void* owner) const {
    std::lock_guard<std::mutex> lock(mu_);
    return owner_ == owner ? value_ : nullptr;
  }
  void set(const void* owner, std::shared_ptr<void> value) {
    std::lock_guard<std::mutex> lock(mu_);
    owner_ = owner;
    value_ = std::move(value);
  }

 private:
  mutable std::mutex mu_;
  const void* owner_ = nullptr;
  std::shared_ptr<void> value_;
};

class KernelContext {
 public:
  KernelContext(OpInfo op, std::vector<const RuntimeValue*> inputs, std::vector<RuntimeValue>* outputs,
                std::vector<bool> output_wanted, SubgraphRunner runner = {})
      : op_(op),
        inputs_(std::move(inputs)),
        outputs_(outputs),
        wanted_(std::move(output_wanted)),
        runner_(std::move(runner)) {}

  const OpInfo& op() const { return op_; }
  int opset() const { return op_.opset; }
  DType compute_dtype() const { return op_.compute_dtype; }

  // Inputs: the node's input list, with omitted optional inputs as nullptr / none.
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] && !inputs_[i]->is_none(); }
  // The tensor at input i. Precondition: has_input(i) and it is a tensor; use
  // require_tensor() where the model may not satisfy that.
  const Tensor& input(size_t i) const { return inputs_[i]->tensor(); }
  const RuntimeValue& input_value(size_t i) const;
  // INVALID_ARGUMENT when input i is missing or not a tensor.
  Status require_tensor(size_t i) const;
  // True when input i is a constant of the model (an initializer): the same tensor every run,
  // so a kernel may keep what it derives from it (e.g. weights packed for a primitive).
  bool input_is_constant(size_t i) const { return i < constant_.size() && constant_[i]; }
  void set_constant_inputs(std::vector<bool> constant) { constant_ = std::move(constant); }
  // True when the kernel may write its output into input i's buffer (e.g. a residual the
  // output replaces): the executor found this node the value's last reader, reading it
  // through this input only, and no other tensor shares the buffer.
  bool may_overwrite_input(size_t i) const {
    return last_reader_ && i < last_reader_->size() && (*last_reader_)[i] && has_input(i) && inputs_[i]->is_tensor() &&
           input(i).owns_buffer_alone();
  }
  // The executor's plan (outlives the context; not copied per run).
  void set_last_reader_of(const std::vector<bool>* last_reader) { last_reader_ = last_reader; }
  // This node's NodeCache in the plan being run; null outside a prepared plan (a kernel called
  // directly, a fused kernel's inner call), where a kernel derives everything per call.
  NodeCache* node_cache() const { return node_cache_; }
  void set_node_cache(NodeCache* cache) { node_cache_ = cache; }

  // Outputs: the node's output list; an output the model omits is not wanted.
  size_t num_outputs() const { return wanted_.size(); }
  bool wants_output(size_t i) const { return i < wanted_.size() && wanted_[i]; }
  void set_output(size_t i, Tensor t) { set_output_value(i, RuntimeValue(std::move(t))); }
  void set_output_value(size_t i, RuntimeValue v) {
    if (i < outputs_->size()) (*outputs_)[i] = std::move(v);
  }

  // Attributes.
  const Attribute* attr(std::string_view name) const;
  bool has_attr(std::string_view name) const { return attr(name) != nullptr; }
  int64_t attr_int(std::string_view name, int64_t def) const;
  float attr_float(std::string_view name, float def) const;
  std::string attr_string(std::string_view name, std::string def) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(std::string_view name, std::vector<float> def = {}) const;
  std::vector<std::string> attr_strings(std::string_view name) const;

  // The engine priority list of the session running this kernel ("cpu.dnnl", "cpu.ref"), for
  // kernels that run other ops (the fused reference kernels): find_kernel() picks the op's
  // kernel the way the executor would for an unfused node. Without a list: cpu.ref.
  void set_engines(const std::vector<std::string>* engines) { engines_ = engines; }
  const std::vector<std::string>* engines() const { return engines_; }
  const KernelDef* find_kernel(std::string_view domain, std::string_view op_type, int opset, DType dtype) const;
  // The engines whose kernels a composite kernel (the fused reference kernels) ran for its
  // inner ops, other than its own: the executor reports them with the node's engine
  // ("cpu.ref+cpu.dnnl"), so a profile names every engine whose code ran for a node.
  void note_inner_engine(std::string_view engine) const {
    if (std::find(inner_engines_.begin(), inner_engines_.end(), engine) == inner_engines_.end())
      inner_engines_.push_back(engine);
  }
  const std::vector<std::string_view>& inner_engines() const { return inner_engines_; }

  // Control flow.
  bool can_run_subgraphs() const { return static_cast<bool>(runner_); }
  Result<std::vector<RuntimeValue>> run_subgraph(const Graph& body, std::vector<RuntimeValue> inputs) const;

  // An error whose message starts with the node ("node 'conv1' (Conv): ...").
  template <typename... Args>
  Status error(ErrorCode code, const Args&... args) const {
    return make_error(code, node_prefix(), args...);
  }
  // The standard DTYPE_UNSUPPORTED error for input i.
  Status unsupported_dtype(DType t) const;
  std::string node_prefix() const;

 private:
  OpInfo op_;
  std::vector<const RuntimeValue*> inputs_;
  std::vector<RuntimeValue>* outputs_;
  std::vector<bool> wanted_;
  SubgraphRunner runner_;
  std::vector<bool> constant_;
  const std::vector<bool>* last_reader_ = nullptr;
  const std::vector<std::string>* engines_ = nullptr;
  NodeCache* node_cache_ = nullptr;
  mutable std::vector<std::string_view> inner_engines_;  // engine names live in the registry
};

using KernelFn = Status (*)(KernelContext&);

// Registry key and entry. A kernel serves opsets [since_version, end_version] of
// (domain, op_type) on one engine, for the listed dtypes of its dtype-deciding input
// (`dtype_input`, usually 0; empty `dtypes` = any dtype: the kernel checks itself).
struct KernelDef {
  std::string_view domain;  // "" is ai.onnx
  std::string_view op_type;
  int since_version = 1;
  int end_version = 1 << 30;
  std::string_view engine = kEngineRef;
  std::vector<DType> dtypes;
  KernelFn fn = nullptr;
  int dtype_input = 0;

  // Whether this kernel serves `opset` of its op: since_version <= opset <= end_version, where
  // an ai.onnx kernel registered up to kLastKernelOpset also serves the later opsets gearbox
  // accepts unless its op's meaning changed there (kernel.cc lists those ops; the other changes
  // of opsets 19-21 add types gearbox has no kernels for, float8 and int4).
  bool serves(int opset) const;
};

// The newest ai.onnx opset the kernels were registered against, and the newest gearbox accepts.
inline constexpr int kLastKernelOpset = 18;
inline constexpr int kNewestOnnxOpset = 21;

class KernelRegistry {
 public:
  static KernelRegistry& global();
  // Returns true so it can initialize a static (see GBX_REGISTER_KERNEL).
  bool add(KernelDef def);
  // The kernel for this op at this opset on this engine accepting dtype; nullptr if none.
  // dtype Undefined matches any entry.
  const KernelDef* find(std::string_view domain, std::string_view op_type, int opset, std::string_view engine,
                        DType dtype) const;
  // Any kernel at all for (domain, op_type, opset) on any engine.
  bool supports(std::string_view domain, std::string_view op_type, int opset) const;
  const std::vector<KernelDef>& all() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

}  // namespace gearbox

// Registers a kernel at static-initialization time. The kernel library is linked as an
// object library, so registrations are never dropped by the linker.
#define GBX_REGISTER_KERNEL(...)                                             \
  [[maybe_unused]] static const bool GBX_CONCAT(gbx_kernel_reg_, __LINE__) = \
      ::gearbox::KernelRegistry::global().add(::gearbox::KernelDef __VA_ARGS__)
