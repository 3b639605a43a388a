// What a kernel declares it handles, beyond the (domain, op, opset, engine, dtype) key of its
// KernelDef (kernels/kernel.h): the dtypes of each input and output, the layouts it reads and
// writes, and a supports() predicate over the node's attributes and shapes. This is what
// capability-based partitioning decides on (runtime/partitioner.h): a node goes to the first
// engine of the priority list whose kernel accepts it, and when the answer needs shapes only
// known at run time the executor makes the same choice per shape. A kernel is never called on
// a case its declarations refuse, and never hands a case to another engine itself.
//
// Declared next to the registration, keyed by the kernel function:
//
//   GBX_REGISTER_KERNEL({"", "Add", 7, 18, kEngineSimd, {DType::F32}, binary<BinaryOp::Add>});
//   GBX_KERNEL_SUPPORT(binary<BinaryOp::Add>, {.inputs = {{DType::F32}, {DType::F32}},
//                                              .supports = binary_supports});
//
// A kernel without a declaration handles every case its KernelDef's dtypes admit (every
// cpu.ref kernel: the reference reports bad input itself).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.h"

namespace gearbox {

// How a tensor a kernel reads or writes is stored. Plain is the model's own layout; the
// others are written by the layout passes (graph/passes/layout_nhwc.cc, layout_blocked.cc),
// whose com.gearbox.Nhwc*/Nchw16c* ops carry them.
enum class TensorLayout { Plain, Nhwc, Nchw16c };
std::string_view layout_name(TensorLayout l);

// What a supports() predicate sees of a node: its op and attributes, and per input whether it
// is present, a tensor, its dtype and its dims -- static (from shape inference, where dims may
// be unknown) at partitioning, concrete at run time.
class KernelQuery {
 public:
  struct Input {
    bool present = false;     // not an omitted optional input
    bool tensor = false;      // a tensor (statically: a tensor-typed value)
    bool maybe_none = false;  // statically an Optional: may be none at run time
    DType dtype = DType::Undefined;
    int64_t rank = -1;         // -1: unknown
    std::optional<Dims> dims;  // set when every dim is known
    bool constant = false;     // an initializer
    // The tensor itself: at run time, or an initializer's statically (e.g. a shape input a
    // predicate must read); null otherwise.
    const Tensor* value = nullptr;
  };

  KernelQuery(OpInfo op, std::vector<Input> inputs, std::vector<bool> outputs_wanted)
      : op_(op), inputs_(std::move(inputs)), wanted_(std::move(outputs_wanted)) {}
  // The run-time view of a kernel call: concrete dims for every tensor input.
  static KernelQuery of(const KernelContext& ctx);
  // True for the run-time view (every tensor input's dims are known).
  bool at_run_time() const { return at_run_time_; }

  const OpInfo& op() const { return op_; }
  int opset() const { return op_.opset; }
  size_t num_inputs() const { return inputs_.size(); }
  const Input& input(size_t i) const;
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].present; }
  bool is_tensor(size_t i) const { return has_input(i) && inputs_[i].tensor; }
  DType dtype(size_t i) const { return has_input(i) ? inputs_[i].dtype : DType::Undefined; }
  int64_t rank(size_t i) const { return has_input(i) ? inputs_[i].rank : -1; }
  // Input i's dims; null when not all known (the predicate then returns later()).
  const Dims* dims(size_t i) const { return has_input(i) && inputs_[i].dims ? &*inputs_[i].dims : nullptr; }
  // Input i's tensor when its value is known (run time, or an initializer); else null.
  const Tensor* value(size_t i) const { return has_input(i) ? inputs_[i].value : nullptr; }
  size_t num_outputs() const { return wanted_.size(); }
  bool wants_output(size_t i) const { return i < wanted_.size() && wanted_[i]; }

  const Attribute* attr(std::string_view name) const;
  bool has_attr(std::string_view name) const { return attr(name) != nullptr; }
  int64_t attr_int(std::string_view name, int64_t def) const;
  float attr_float(std::string_view name, float def) const;
  std::string attr_string(std::string_view name, std::string def) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(std::string_view name, std::vector<float> def = {}) const;

 private:
  OpInfo op_;
  std::vector<Input> inputs_;
  std::vector<bool> wanted_;
  bool at_run_time_ = false;
};

// A supports() predicate's answer: the kernel handles the node, does not (and why, for the
// partition report), or cannot tell before the run-time shapes are known.
struct Verdict {
  enum class Kind { Accept, Refuse, Later } kind = Kind::Accept;
  std::string reason;  // for Refuse
  bool accepted() const { return kind == Kind::Accept; }
  bool refused() const { return kind == Kind::Refuse; }
  bool later() const { return kind == Kind::Later; }
};
inline Verdict accept() { return {}; }
inline Verdict refuse(std::string why) { return {Verdict::Kind::Refuse, std::move(why)}; }
inline Verdict later() { return {Verdict::Kind::Later, {}}; }

using SupportsFn = Verdict (*)(const KernelQuery&);

// A kernel's declarations (empty / null = no restriction).
struct KernelSupport {
  std::vector<std::vector<DType>> inputs = {};   // dtypes accepted at input i (empty set: any)
  std::vector<std::vector<DType>> outputs = {};  // dtypes written at output i (checked statically)
  std::vector<TensorLayout> layouts = {};        // how its tensors are stored (empty: Plain)
  SupportsFn supports = nullptr;                 // the cases of its op it handles
  // Reduced precisions the kernel computes a float32 node in (fp32 accumulation, I/O dtypes
  // unchanged) when the precision pass lowers the node (runtime/precision.h) and the session's
  // CPU has the arithmetic (KernelOptions::bf16_arithmetic): KernelContext::compute_dtype.
  std::vector<DType> compute = {};
};

// The declarations, keyed by kernel function.
class KernelSupportTable {
 public:
  static KernelSupportTable& global();
  bool add(KernelFn fn, KernelSupport s);  // true, to initialize a static
  // Null when `fn` declared nothing.
  const KernelSupport* find(KernelFn fn) const;

 private:
  std::vector<std::pair<KernelFn, KernelSupport>> entries_;
};

// Whether `def` takes the node `q` describes: its KernelDef dtypes, its declared input dtypes,
// then its predicate. Static dims that are unknown make a shape-reading predicate answer Later.
Verdict kernel_accepts(const KernelDef& def, const KernelQuery& q);

// Whether `def` declared that it computes float32 nodes in `dtype` (KernelSupport::compute).
bool kernel_computes_in(const KernelDef& def, DType dtype);

// The kernel for `call` (a context made for an inner op, with its inputs) on the engines of
// `parent` (KernelContext::engines; none: cpu.ref): the first whose kernel accepts it, the way
// the executor picks for an unfused node. Used by the fused reference kernels.
const KernelDef* find_kernel_for(const KernelContext& parent, const KernelContext& call);

}  // namespace gearbox

// Declares what kernel function FN handles (a KernelSupport initializer).
#define GBX_KERNEL_SUPPORT(FN, ...)                                              \
  [[maybe_unused]] static const bool GBX_CONCAT(gbx_kernel_support_, __LINE__) = \
      ::gearbox::KernelSupportTable::global().add(FN, ::gearbox::KernelSupport __VA_ARGS__)
