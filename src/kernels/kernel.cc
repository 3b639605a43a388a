// KernelContext accessors and the kernel registry.
#include "kernels/kernel.h"

#include <algorithm>

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
  defs_.push_back(std::move(def));
  return true;
}

const KernelDef* KernelRegistry::find(std::string_view domain, std::string_view op_type, int opset,
                                      std::string_view engine, DType dtype) const {
  for (const auto& d : defs_) {
    if (d.op_type != op_type || d.domain != domain || d.engine != engine) continue;
    if (opset < d.since_version || opset > d.end_version) continue;
    if (dtype != DType::Undefined && !d.dtypes.empty() &&
        std::find(d.dtypes.begin(), d.dtypes.end(), dtype) == d.dtypes.end())
      continue;
    return &d;
  }
  return nullptr;
}

bool KernelRegistry::supports(std::string_view domain, std::string_view op_type, int opset) const {
  for (const auto& d : defs_)
    if (d.op_type == op_type && d.domain == domain && opset >= d.since_version && opset <= d.end_version)
      return true;
  return false;
}

}  // namespace gearbox
