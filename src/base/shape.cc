// Shape helpers.
#include "base/shape.h"

#include <limits>

namespace gearbox {

Shape Shape::from_dims(const Dims& d) {
  Shape s;
  s.ranked = true;
  for (int64_t v : d) s.dims.emplace_back(v);
  return s;
}

bool Shape::fully_known() const {
  if (!ranked) return false;
  for (const auto& d : dims)
    if (!d.known()) return false;
  return true;
}

std::optional<Dims> Shape::concrete() const {
  if (!fully_known()) return std::nullopt;
  Dims out;
  for (const auto& d : dims) out.push_back(d.value);
  return out;
}

bool Shape::accepts(const Dims& d) const {
  if (!ranked) return true;
  if (d.size() != dims.size()) return false;
  for (size_t i = 0; i < d.size(); ++i)
    if (dims[i].known() && dims[i].value != d[i]) return false;
  return true;
}

std::string to_string(const Shape& s) {
  if (!s.ranked) return "unranked";
  std::string out = "[";
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (i) out += ",";
    const Dim& d = s.dims[i];
    out += d.known() ? std::to_string(d.value) : (d.symbol.empty() ? "?" : d.symbol);
  }
  return out + "]";
}

std::string to_string(const Dims& d) {
  std::string out = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(d[i]);
  }
  return out + "]";
}

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) {
    if (v < 0) return -1;
    if (v != 0 && n > std::numeric_limits<int64_t>::max() / v) return -1;
    n *= v;
  }
  return n;
}

}  // namespace gearbox
