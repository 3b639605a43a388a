// KernelContext accessors and the kernel registry.
#include "kernels/kernel.h"

#include <algorithm>
#include <string>

#include "kernels/kernel_support.h"

namespace gearbox {

const RuntimeValue& KernelContext::input_value(size_t i) const {
  static const RuntimeValue none;
  return i < inputs_.size() && inputs_[i] ? *inputs_[i] : none;
}

Status KernelContext::require_tensor(size_t i) const {
  if (!has_input(i)) return error(ErrorCode::INVALID_ARGUMENT, "input ", i, " is required but missing");
  if (!inputs_[i]->is_tensor()) return error(ErrorCode::INVALID_ARGUMENT, "input ", i, " must be a tensor");
  return Status::OK();
}

const Attribute* KernelContext::attr(std::string_view name) const {
  if (!op_.attrs) return nullptr;
  auto it = op_.attrs->find(name);
  return it == op_.attrs->end() ? nullptr : &it->second;
}

int64_t KernelContext::attr_int(std::string_view name, int64_t def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Int ? a->i : def;
}

float KernelContext::attr_float(std::string_view name, float def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Float ? a->f : def;
}

std::string KernelContext::attr_string(std::string_view name, std::string def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::String ? a->s : def;
}

std::vector<int64_t> KernelContext::attr_ints(std::string_view name, std::vector<int64_t> def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Ints ? a->ints : def;
}

std::vector<float> KernelContext::attr_floats(std::string_view name, std::vector<float> def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Floats ? a->floats : def;
}

std::vector<std::string> KernelContext::attr_strings(std::string_view name) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Strings ? a->strings : std::vector<std::string>{};
}

Result<std::vector<RuntimeValue>> KernelContext::run_subgraph(const Graph& body,
                                                              std::vector<RuntimeValue> inputs) const {
  if (!runner_) return error(ErrorCode::INTERNAL, "no subgraph runner in this context");
  return runner_(body, std::move(inputs));
}

const KernelDef* KernelContext::find_kernel(std::string_view domain, std::string_view op_type, int opset,
                                            DType dtype) const {
  const auto& registry = KernelRegistry::global();
  if (!engines_) return registry.find(domain, op_type, opset, kEngineRef, dtype);
  for (const std::string& engine : *engines_)
    if (const KernelDef* def = registry.find(domain, op_type, opset, engine, dtype)) return def;
  return nullptr;
}

const KernelDef* find_kernel_for(const KernelContext& parent, const KernelContext& call) {
  const auto& registry = KernelRegistry::global();
  const OpInfo& op = call.op();
  const KernelQuery q = KernelQuery::of(call);
  static const std::vector<std::string> kRefOnly{std::string(kEngineRef)};
  for (const std::string& engine : parent.engines() ? *parent.engines() : kRefOnly)
    for (const KernelDef& def : registry.all())
      if (def.engine == engine && def.op_type == op.op_type && def.domain == op.domain && def.serves(op.opset) &&
          kernel_accepts(def, q).accepted())
        return &def;
  return nullptr;
}

std::string_view layout_name(TensorLayout l) {
  switch (l) {
    case TensorLayout::Plain:
      return "plain";
    case TensorLayout::Nhwc:
      return "nhwc";
    case TensorLayout::Nchw16c:
      return "nchw16c";
  }
  return "?";
}

KernelQuery KernelQuery::of(const KernelContext& ctx) {
  std::vector<Input> inputs(ctx.num_inputs());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Input& in = inputs[i];
    in.present = ctx.has_input(i);
    in.constant = ctx.input_is_constant(i);
    if (!in.present || !ctx.input_value(i).is_tensor()) continue;
    const Tensor& t = ctx.input(i);
    in.tensor = true;
    in.dtype = t.dtype();
    in.rank = static_cast<int64_t>(t.rank());
    in.dims = t.dims();
    in.value = &t;
  }
  std::vector<bool> wanted(ctx.num_outputs());
  for (size_t i = 0; i < wanted.size(); ++i) wanted[i] = ctx.wants_output(i);
  KernelQuery q(ctx.op(), std::move(inputs), std::move(wanted));
  q.at_run_time_ = true;
  return q;
}

const KernelQuery::Input& KernelQuery::input(size_t i) const {
  static const Input none;
  return i < inputs_.size() ? inputs_[i] : none;
}

const Attribute* KernelQuery::attr(std::string_view name) const {
  if (!op_.attrs) return nullptr;
  auto it = op_.attrs->find(name);
  return it == op_.attrs->end() ? nullptr : &it->second;
}

int64_t KernelQuery::attr_int(std::string_view name, int64_t def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Int ? a->i : def;
}

float KernelQuery::attr_float(std::string_view name, float def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Float ? a->f : def;
}

std::string KernelQuery::attr_string(std::string_view name, std::string def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::String ? a->s : def;
}

std::vector<int64_t> KernelQuery::attr_ints(std::string_view name, std::vector<int64_t> def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Ints ? a->ints : def;
}

std::vector<float> KernelQuery::attr_floats(std::string_view name, std::vector<float> def) const {
  const Attribute* a = attr(name);
  return a && a->type == AttrType::Floats ? a->floats : def;
}

namespace {

bool in_set(const std::vector<DType>& set, DType dt) {
  return set.empty() || dt == DType::Undefined || std::find(set.begin(), set.end(), dt) != set.end();
}

}  // namespace

KernelSupportTable& KernelSupportTable::global() {
  static KernelSupportTable t;
  return t;
}

bool KernelSupportTable::add(KernelFn fn, KernelSupport s) {
  entries_.emplace_back(fn, std::move(s));
  return true;
}

const KernelSupport* KernelSupportTable::find(KernelFn fn) const {
  for (const auto& [f, s] : entries_)
    if (f == fn) return &s;
  return nullptr;
}

Verdict kernel_accepts(const KernelDef& def, const KernelQuery& q) {
  const size_t di = static_cast<size_t>(def.dtype_input);
  if (q.is_tensor(di) && !in_set(def.dtypes, q.dtype(di)))
    return refuse("not for dtype " + std::string(dtype_name(q.dtype(di))) + " (input " + std::to_string(di) + ")");
  const KernelSupport* s = KernelSupportTable::global().find(def.fn);
  if (!s) return accept();
  for (size_t i = 0; i < s->inputs.size() && i < q.num_inputs(); ++i)
    if (q.is_tensor(i) && !in_set(s->inputs[i], q.dtype(i)))
      return refuse("not for dtype " + std::string(dtype_name(q.dtype(i))) + " (input " + std::to_string(i) + ")");
  return s->supports ? s->supports(q) : accept();
}

bool kernel_computes_in(const KernelDef& def, DType dtype) {
  const KernelSupport* s = KernelSupportTable::global().find(def.fn);
  return s && std::find(s->compute.begin(), s->compute.end(), dtype) != s->compute.end();
}

std::string KernelContext::node_prefix() const {
  std::string domain = op_.domain.empty() ? "" : std::string(op_.domain) + ".";
  return "node '" + std::string(op_.name) + "' (" + domain + std::string(op_.op_type) + ", opset " +
         std::to_string(op_.opset) + "): ";
}

Status KernelContext::unsupported_dtype(DType t) const {
  return error(ErrorCode::DTYPE_UNSUPPORTED, "dtype ", dtype_name(t), " is not supported by this kernel");
}

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry r;
  return r;
}

bool KernelRegistry::add(KernelDef def) {
  // Reserved once, with room to spare: plugins (kernels/plugin_ops.h) add entries after
  // sessions took KernelDef pointers, which a reallocation would leave dangling; they check
  // the room left first (register_plugin_ops).
  if (defs_.capacity() == 0) defs_.reserve(8192);
  defs_.push_back(std::move(def));
  return true;
}

namespace {
// ai.onnx ops whose meaning, for the types gearbox has kernels for, changed after opset 18 and
// whose kernels are not registered past it: GridSample-20's mode names and N-D grids. (Pad,
// Resize, AveragePool, DFT, GroupNormalization and Quantize/DequantizeLinear are registered to 21
// and read their new inputs and attributes themselves.) New ops (Gelu-20, AffineGrid-20, ...)
// have no earlier registration to extend.
bool changed_after_last_kernel_opset(std::string_view op, int opset) {
  static const std::pair<std::string_view, int> kChanged[] = {{"GridSample", 20}};
  for (const auto& [name, since] : kChanged)
    if (name == op && opset >= since) return true;
  return false;
}
}  // namespace

bool KernelDef::serves(int opset) const {
  if (opset < since_version) return false;
  if (opset <= end_version) return true;
  return domain.empty() && end_version == kLastKernelOpset && opset <= kNewestOnnxOpset &&
         !changed_after_last_kernel_opset(op_type, opset);
}

const KernelDef* KernelRegistry::find(std::string_view domain, std::string_view op_type, int opset,
                                      std::string_view engine, DType dtype) const {
  for (const auto& d : defs_) {
    if (d.op_type != op_type || d.domain != domain || d.engine != engine) continue;
    if (!d.serves(opset)) continue;
    if (dtype != DType::Undefined && !d.dtypes.empty() &&
        std::find(d.dtypes.begin(), d.dtypes.end(), dtype) == d.dtypes.end())
      continue;
    return &d;
  }
  return nullptr;
}

bool KernelRegistry::supports(std::string_view domain, std::string_view op_type, int opset) const {
  for (const auto& d : defs_)
    if (d.op_type == op_type && d.domain == domain && d.serves(opset)) return true;
  return false;
}

}  // namespace gearbox
