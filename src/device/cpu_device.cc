// The CPU device: capabilities from cpuid (checked against the OS's XSAVE state, so a flag
// means "usable"), cache sizes from /sys/devices/system/cpu/cpu0/cache, the brand and
// core counts from /proc/cpuinfo.
#include <cpuid.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "base/logging.h"
#include "base/strings.h"
#include "device/calibration.h"
#include "device/device.h"

namespace gearbox::device {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}
bool bit(unsigned v, int b) { return (v >> b) & 1u; }

uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

std::vector<IsaFlag> detect_isa() {
  Regs l0 = cpuid(0), l1 = cpuid(1);
  Regs l7 = l0.a >= 7 ? cpuid(7, 0) : Regs{};
  Regs l71 = l0.a >= 7 && l7.a >= 1 ? cpuid(7, 1) : Regs{};
  uint64_t xcr0 = bit(l1.c, 27) ? xgetbv0() : 0;  // OSXSAVE
  bool os_avx = (xcr0 & 0x6) == 0x6;               // XMM and YMM state
  bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  bool os_amx = (xcr0 & 0x60000) == 0x60000;        // XTILECFG, XTILEDATA
  return {
      {"sse2", bit(l1.d, 26)},
      {"sse4_1", bit(l1.c, 19)},
      {"sse4_2", bit(l1.c, 20)},
      {"popcnt", bit(l1.c, 23)},
      {"avx", os_avx && bit(l1.c, 28)},
      {"f16c", os_avx && bit(l1.c, 29)},
      {"fma", os_avx && bit(l1.c, 12)},
      {"avx2", os_avx && bit(l7.b, 5)},
      {"bmi2", bit(l7.b, 8)},
      {"avx_vnni", os_avx && bit(l71.a, 4)},
      {"avx512f", os_avx512 && bit(l7.b, 16)},
      {"avx512dq", os_avx512 && bit(l7.b, 17)},
      {"avx512cd", os_avx512 && bit(l7.b, 28)},
      {"avx512bw", os_avx512 && bit(l7.b, 30)},
      {"avx512vl", os_avx512 && bit(l7.b, 31)},
      {"avx512_vnni", os_avx512 && bit(l7.c, 11)},
      {"avx512_bf16", os_avx512 && bit(l71.a, 5)},
      {"avx512_fp16", os_avx512 && bit(l7.d, 23)},
      {"amx_tile", os_amx && bit(l7.d, 24)},
      {"amx_bf16", os_amx && bit(l7.d, 22)},
      {"amx_int8", os_amx && bit(l7.d, 25)},
  };
}

std::string cpu_vendor() {
  Regs r = cpuid(0);
  char v[13] = {};
  std::memcpy(v, &r.b, 4);
  std::memcpy(v + 4, &r.d, 4);
  std::memcpy(v + 8, &r.c, 4);
  return v;
}

std::string cpu_brand() {
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    std::string s(brand);
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    if (!s.empty()) return s;
  }
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

int count_physical_cores() {
  // Distinct (package, core) pairs over the online CPUs.
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0;; ++cpu) {
    std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::string core = read_line(dir + "core_id");
    if (core.empty()) break;
    cores.insert({read_line(dir + "physical_package_id"), core});
  }
  return static_cast<int>(cores.size());
}

size_t parse_cache_size(const std::string& s) {  // "32K", "1024K", "32768K"
  if (s.empty()) return 0;
  size_t v = std::strtoull(s.c_str(), nullptr, 10);
  char u = s.back();
  if (u == 'K') v <<= 10;
  if (u == 'M') v <<= 20;
  return v;
}

int count_cpu_list(const std::string& list) {  // "0-3,8" -> 5
  int n = 0;
  std::stringstream ss(list);
  for (std::string part; std::getline(ss, part, ',');) {
    auto dash = part.find('-');
    if (dash == std::string::npos) ++n;
    else n += std::atoi(part.c_str() + dash + 1) - std::atoi(part.c_str()) + 1;
  }
  return n;
}

// AMD's older cache leaves (0x80000005: L1, 0x80000006: L2/L3), which some VMs keep when
// they zero the newer one. Sharing is not reported there (shared_by 0).
std::vector<CacheInfo> amd_legacy_caches() {
  std::vector<CacheInfo> out;
  unsigned max_ext = cpuid(0x80000000).a;
  if (max_ext >= 0x80000005) {
    Regs r = cpuid(0x80000005);
    if (r.c >> 24) out.push_back({1, "Data", size_t{r.c >> 24} << 10, 0});
    if (r.d >> 24) out.push_back({1, "Instruction", size_t{r.d >> 24} << 10, 0});
  }
  if (max_ext >= 0x80000006) {
    Regs r = cpuid(0x80000006);
    if (r.c >> 16) out.push_back({2, "Unified", size_t{r.c >> 16} << 10, 0});
    if (r.d >> 18) out.push_back({3, "Unified", size_t{r.d >> 18} << 19, 0});
  }
  return out;
}

// The deterministic cache parameters leaf (4 on Intel, 0x8000001D on AMD): for machines
// (VMs) whose sysfs has no cache folders.
std::vector<CacheInfo> caches_from_cpuid() {
  std::vector<CacheInfo> out;
  unsigned leaf = 4;
  if (cpu_vendor() == "AuthenticAMD") {
    leaf = 0x8000001D;
    if (!bit(cpuid(0x80000001).c, 22) || (cpuid(leaf, 0).a & 0x1f) == 0) return amd_legacy_caches();
  } else if (cpuid(0).a < 4) {
    return out;
  }
  for (unsigned i = 0; i < 16; ++i) {
    Regs r = cpuid(leaf, i);
    unsigned type = r.a & 0x1f;
    if (type == 0) break;
    CacheInfo c;
    c.level = static_cast<int>((r.a >> 5) & 0x7);
    c.type = type == 1 ? "Data" : type == 2 ? "Instruction" : "Unified";
    size_t ways = ((r.b >> 22) & 0x3ff) + 1, parts = ((r.b >> 12) & 0x3ff) + 1, line = (r.b & 0xfff) + 1;
    c.size_bytes = ways * parts * line * (size_t{r.c} + 1);
    c.shared_by = static_cast<int>(((r.a >> 14) & 0xfff) + 1);
    out.push_back(c);
  }
  return out;
}

std::vector<CacheInfo> detect_caches() {
  std::vector<CacheInfo> out;
  for (int i = 0;; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string level = read_line(dir + "level");
    if (level.empty()) break;
    CacheInfo c;
    c.level = std::atoi(level.c_str());
    c.type = read_line(dir + "type");
    c.size_bytes = parse_cache_size(read_line(dir + "size"));
    c.shared_by = count_cpu_list(read_line(dir + "shared_cpu_list"));
    out.push_back(c);
  }
  if (out.empty()) out = caches_from_cpuid();
  return out;
}

class CpuDevice final : public Device {
 public:
  CpuDevice() : caps_(detect_cpu_capabilities()) {}
  DeviceKind kind() const override { return DeviceKind::CPU; }
  int index() const override { return 0; }
  std::string name() const override { return "cpu:0"; }
  const Capabilities& capabilities() const override { return caps_; }
  Result<MemoryPool*> pool() override { return default_pool(); }
  Result<Peaks> measure_peaks(int budget_ms) override { return calibrate_cpu(caps_, budget_ms); }

 private:
  Capabilities caps_;
};

}  // namespace

Capabilities detect_cpu_capabilities() {
  Capabilities caps;
  caps.vendor = cpu_vendor();
  caps.model = cpu_brand();
  caps.logical_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  caps.physical_cores = count_physical_cores();
  caps.caches = detect_caches();
  caps.isa = detect_isa();
  caps.memory_bytes = system_memory().total;
  if (const char* sim = std::getenv("GEARBOX_SIMULATE_MISSING_ISA"); sim && *sim) {
    for (const std::string& f : split_list(sim)) {
      caps.simulated_missing.push_back(f);
      for (auto& flag : caps.isa)
        if (flag.name == f) flag.present = false;
    }
    GBX_LOG_WARN("DEVICE", "GEARBOX_SIMULATE_MISSING_ISA={}: reporting these features as absent", sim);
  }
  return caps;
}

bool Capabilities::has(const std::string& flag) const {
  for (const auto& f : isa)
    if (f.name == flag) return f.present;
  return false;
}

const char* kind_name(DeviceKind kind) { return kind == DeviceKind::CPU ? "cpu" : "cuda"; }

std::vector<Device*> devices() {
  static CpuDevice* cpu = new CpuDevice();  // never destroyed: handed out for the process
  return {cpu};
}

Result<Device*> get_device(DeviceKind kind, int index) {
  int n = 0;
  for (Device* d : devices()) {
    if (d->kind() != kind) continue;
    if (d->index() == index) return d;
    ++n;
  }
  return make_error(ErrorCode::DEVICE_NOT_FOUND, "no ", kind_name(kind), " device with index ", index, " (", n,
                    " ", kind_name(kind), " device", n == 1 ? "" : "s", " present)");
}

std::vector<Temperature> temperatures() {
  std::vector<Temperature> out;
  auto list = [](const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') names.push_back(e->d_name);
      closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  for (const auto& hw : list("/sys/class/hwmon")) {
    std::string dir = "/sys/class/hwmon/" + hw + "/";
    std::string chip = read_line(dir + "name");
    if (chip != "coretemp" && chip != "k10temp" && chip != "zenpower" && chip != "cpu_thermal") continue;
    for (const auto& f : list(dir)) {
      if (f.rfind("temp", 0) != 0 || f.find("_input") == std::string::npos) continue;
      std::string v = read_line(dir + f);
      if (v.empty()) continue;
      std::string label = read_line(dir + f.substr(0, f.find('_')) + "_label");
      out.push_back({chip + "/" + (label.empty() ? f.substr(0, f.find('_')) : label),
                     std::atof(v.c_str()) / 1000.0});
    }
  }
  if (!out.empty()) return out;
  for (const auto& z : list("/sys/class/thermal")) {
    if (z.rfind("thermal_zone", 0) != 0) continue;
    std::string v = read_line("/sys/class/thermal/" + z + "/temp");
    if (v.empty()) continue;
    out.push_back({z + "/" + read_line("/sys/class/thermal/" + z + "/type"), std::atof(v.c_str()) / 1000.0});
  }
  return out;
}

std::vector<std::string> build_required_isa() {
  std::vector<std::string> r;
#ifdef __SSE2__
  r.push_back("sse2");
#endif
#ifdef __SSE4_1__
  r.push_back("sse4_1");
#endif
#ifdef __SSE4_2__
  r.push_back("sse4_2");
#endif
#ifdef __AVX__
  r.push_back("avx");
#endif
#ifdef __F16C__
  r.push_back("f16c");
#endif
#ifdef __FMA__
  r.push_back("fma");
#endif
#ifdef __AVX2__
  r.push_back("avx2");
#endif
#ifdef __AVX512F__
  r.push_back("avx512f");
#endif
#ifdef __AVX512BW__
  r.push_back("avx512bw");
#endif
#ifdef __AVX512VL__
  r.push_back("avx512vl");
#endif
  return r;
}

}  // namespace gearbox::device
