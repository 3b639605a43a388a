// Autocast: the levels, the per-op dtype policy and the thread's active level (see
// gearbox/nn_amp.hpp and amp/autocast.h).
#include "frontend/amp/autocast.h"

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "base/logging.h"
#include "frontend/tensor_impl.h"
#include "kernels/op_descriptor.h"

namespace gbx::nn {

namespace {
thread_local AmpLevel t_level = AmpLevel::O0;
thread_local DType t_dtype = DType::BFloat16;

bool autocast_eligible(const Tensor& t) {
  if (!t.defined()) return false;
  const gearbox::DType d = t.impl()->value.dtype();
  return d == gearbox::DType::F32 || d == gearbox::DType::BF16 || d == gearbox::DType::F16;
}
}  // namespace

const char* amp_level_name(AmpLevel level) {
  switch (level) {
    case AmpLevel::O0:
      return "O0";
    case AmpLevel::O1:
      return "O1";
    case AmpLevel::O2:
      return "O2";
    case AmpLevel::O3:
      return "O3";
  }
  return "?";
}

AmpLevel parse_amp_level(std::string_view name) {
  // The enumerators are O0..O3 in order.
  if (name.size() == 2 && (name[0] == 'O' || name[0] == 'o') && name[1] >= '0' && name[1] <= '3')
    return static_cast<AmpLevel>(name[1] - '0');
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "amp level '", name.substr(0, 32),
                                   "': expected O0 (float32), O1 (contractions reduced), O2 (all but the "
                                   "normalizations, softmax, reductions and losses) or O3 (all)"));
}

Autocast::Autocast(AmpLevel level, DType dtype) : previous_level_(t_level), previous_dtype_(t_dtype) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Autocast(", amp_level_name(level), ", ",
                                     dtype_name(dtype), "): the reduced dtype is bfloat16 or float16"));
  t_level = level;
  t_dtype = dtype;
}

Autocast::~Autocast() {
  t_level = previous_level_;
  t_dtype = previous_dtype_;
}

AmpLevel autocast_level() { return t_level; }
DType autocast_dtype() { return t_dtype; }

namespace amp {

namespace {
// (op, reduced dtype) pairs that had no kernel: they run in float32 from then on.
std::mutex g_no_kernel_mutex;
std::set<std::pair<std::string, DType>> g_no_kernel;

std::string op_key(const OpSpec& op) { return op.domain.empty() ? op.op_type : op.domain + "." + op.op_type; }

bool has_no_reduced_kernel(const OpSpec& op, DType dtype) {
  std::lock_guard lock(g_no_kernel_mutex);
  return g_no_kernel.count({op_key(op), dtype}) > 0;
}
}  // namespace

void note_no_reduced_kernel(const OpSpec& op, DType dtype) {
  std::lock_guard lock(g_no_kernel_mutex);
  if (g_no_kernel.insert({op_key(op), dtype}).second)
    GBX_LOG_WARN("AMP", "{} has no {} kernel here: autocast runs it in float32", op_key(op), dtype_name(dtype));
}

std::optional<DType> autocast_target(const OpSpec& op, const std::vector<Tensor>& inputs) {
  if (t_level == AmpLevel::O0) return std::nullopt;
  // Cast is how autocast converts; a recorded function (a collective) is not an op.
  if (op.op_type == "Cast" || op.domain == "gearbox.function") return std::nullopt;
  bool any = false, mixed = false;
  DType first = DType::Float32;
  for (const Tensor& t : inputs) {
    if (!autocast_eligible(t)) continue;
    const DType d = t.dtype();
    if (!any) first = d;
    mixed = mixed || d != first;
    any = true;
  }
  if (!any) return std::nullopt;
  const gearbox::PrecisionClass cls = gearbox::op_descriptor(op.domain, op.op_type).precision;
  DType target;
  switch (t_level) {
    case AmpLevel::O3:
      target = t_dtype;
      break;
    case AmpLevel::O2:
      target = cls == gearbox::PrecisionClass::Black ? DType::Float32 : t_dtype;
      break;
    default:  // O1
      if (cls == gearbox::PrecisionClass::White) {
        target = t_dtype;
      } else if (cls == gearbox::PrecisionClass::Black || mixed) {
        target = DType::Float32;
      } else {
        return std::nullopt;  // gray: the dtype its inputs came in
      }
  }
  if (target != DType::Float32 && has_no_reduced_kernel(op, target)) target = DType::Float32;
  if (!mixed && first == target) return std::nullopt;
  return target;
}

std::vector<Tensor> cast_float_inputs(const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(autocast_eligible(t) ? t.to(dtype) : t);
  return out;
}

AutocastSuspended::AutocastSuspended() : previous_(t_level) { t_level = AmpLevel::O0; }
AutocastSuspended::~AutocastSuspended() { t_level = previous_; }

Float32Region::Float32Region() : previous_(t_level), active_(t_level == AmpLevel::O1 || t_level == AmpLevel::O2) {
  if (active_) t_level = AmpLevel::O0;
}
Float32Region::~Float32Region() { t_level = previous_; }
Tensor Float32Region::input(const Tensor& t) const {
  return active_ && autocast_eligible(t) ? t.to(DType::Float32) : t;
}

}  // namespace amp

}  // namespace gbx::nn
