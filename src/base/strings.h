// Small string helpers shared by the layers (environment variables, CLI values).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gearbox {

// "a, b,,c" -> {"a", "b", "c"}: items split at `sep`, spaces and tabs trimmed, empty items
// dropped. For lists such as GEARBOX_ENGINES, GEARBOX_DISABLE_PASSES or ISA flag lists.
std::vector<std::string> split_list(std::string_view s, char sep = ',');

// {"a", "b"} -> "a, b": the inverse, for messages that list names.
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");

// A Prometheus label value escaped for the text exposition format (backslash, double quote and
// newline), as `gearbox serve`'s /metrics and `gearbox smi --prometheus` write them.
std::string escape_prometheus_label(std::string_view v);

}  // namespace gearbox
