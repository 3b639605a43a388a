// StringNormalizer (opset 10), reference: drops stopwords (case-sensitively or not), then
// lower- or upper-cases the rest. Input [C] or [1, C]; when every string is dropped the
// output holds one empty string ([1] or [1, 1]). Case mapping is ASCII-only: the locale
// attribute is accepted but not applied to non-ASCII characters.
#include <set>

#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

Status string_normalizer(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::String) return ctx.unsupported_dtype(x.dtype());
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [C] or [1, C], got ", describe(x));
  const std::string action = ctx.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "case_change_action '", action, "' is not NONE, LOWER or UPPER");
  const bool sensitive = ctx.attr_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stop;
  for (const auto& w : ctx.attr_strings("stopwords")) stop.insert(sensitive ? w : ascii_lower(w));
  std::vector<std::string> kept;
  for (const auto& s : x.strings()) {
    if (stop.count(sensitive ? s : ascii_lower(s))) continue;
    kept.push_back(action == "LOWER" ? ascii_lower(s) : action == "UPPER" ? ascii_upper(s) : s);
  }
  if (kept.empty()) kept.push_back("");
  const int64_t n = static_cast<int64_t>(kept.size());
  Tensor y = Tensor::from_vector<std::string>(kept, x.rank() == 2 ? Dims{1, n} : Dims{n});
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "StringNormalizer", 10, 18, kEngineRef, {DType::String}, string_normalizer});

}  // namespace
}  // namespace gearbox::ref
