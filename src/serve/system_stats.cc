// Process and machine vital signs from /proc and /sys.
#include "serve/system_stats.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gearbox::serve {
namespace {

std::optional<std::string> read_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!f || !std::getline(f, s)) return std::nullopt;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<double> read_millidegrees(const std::filesystem::path& p) {
  auto s = read_line(p);
  if (!s) return std::nullopt;
  try {
    return std::stod(*s) / 1000.0;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<uint64_t> process_resident_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return std::nullopt;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::optional<SystemMemory> system_memory() {
  std::ifstream f("/proc/meminfo");
  if (!f) return std::nullopt;
  SystemMemory m;
  bool total = false, avail = false;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string key;
    uint64_t kb = 0;
    if (!(is >> key >> kb)) continue;
    if (key == "MemTotal:") m.total_bytes = kb * 1024, total = true;
    else if (key == "MemAvailable:") m.available_bytes = kb * 1024, avail = true;
  }
  if (!total || !avail) return std::nullopt;
  return m;
}

std::vector<Temperature> cpu_temperatures() {
  namespace fs = std::filesystem;
  std::vector<Temperature> out;
  std::error_code ec;
  // hwmon: coretemp/k10temp/zenpower expose per-package and per-core inputs with labels.
  for (const auto& dir : fs::directory_iterator("/sys/class/hwmon", ec)) {
    auto name = read_line(dir.path() / "name");
    if (!name || (*name != "coretemp" && *name != "k10temp" && *name != "zenpower" && *name != "cpu_thermal")) continue;
    std::error_code ec2;
    for (const auto& f : fs::directory_iterator(dir.path(), ec2)) {
      std::string fn = f.path().filename().string();
      if (fn.rfind("temp", 0) != 0 || fn.size() < 11 || fn.substr(fn.size() - 6) != "_input") continue;
      auto c = read_millidegrees(f.path());
      if (!c) continue;
      std::string label = fn.substr(0, fn.size() - 6);
      if (auto l = read_line(dir.path() / (label + "_label"))) label = *l;
      out.push_back({*name + "/" + label, *c});
    }
  }
  if (!out.empty()) return out;
  // Thermal zones: the fallback on machines without a CPU hwmon driver (ARM boards, laptops).
  for (const auto& dir : fs::directory_iterator("/sys/class/thermal", ec)) {
    std::string zone = dir.path().filename().string();
    if (zone.rfind("thermal_zone", 0) != 0) continue;
    auto c = read_millidegrees(dir.path() / "temp");
    if (!c) continue;
    auto type = read_line(dir.path() / "type");
    out.push_back({zone + "/" + type.value_or("unknown"), *c});
  }
  return out;
}

}  // namespace gearbox::serve
