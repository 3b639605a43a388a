// String helpers. See strings.h.
#include "base/strings.h"

namespace gearbox {

std::vector<std::string> split_list(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(start, end - start);
    const size_t b = item.find_first_not_of(" \t");
    if (b != std::string_view::npos) {
      const size_t e = item.find_last_not_of(" \t");
      out.emplace_back(item.substr(b, e - b + 1));
    }
    start = end + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string escape_prometheus_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace gearbox
