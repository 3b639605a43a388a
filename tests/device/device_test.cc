// The CPU device: capabilities against /proc/cpuinfo (an independent source), the
// simulated-missing-feature switch, device lookup errors, and the calibration cache.
#include "device/device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "device/calibration.h"

namespace gearbox::device {
namespace {

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) {
      std::istringstream ss(line.substr(line.find(':') + 1));
      for (std::string f; ss >> f;) flags.insert(f);
      break;
    }
  return flags;
}

TEST(CpuDevice, IsaFlagsAgreeWithProcCpuinfo) {
  auto flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
  Capabilities caps = detect_cpu_capabilities();
  // The kernel reports a flag only when the OS enables it, like our XSAVE check.
  for (const char* f : {"sse2", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                        "avx512_bf16", "amx_tile", "amx_bf16"})
    EXPECT_EQ(caps.has(f), flags.count(f) > 0) << f;
  EXPECT_GT(caps.logical_cores, 0);
  EXPECT_GT(caps.memory_bytes, 0u);
  EXPECT_FALSE(caps.model.empty());
}

TEST(CpuDevice, CachesFromSysfs) {
  if (!std::filesystem::exists("/sys/devices/system/cpu/cpu0/cache/index0/size")) GTEST_SKIP() << "no sysfs caches";
  Capabilities caps = detect_cpu_capabilities();
  ASSERT_FALSE(caps.caches.empty());
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index0/size");
  std::string size;
  in >> size;  // "48K"
  EXPECT_EQ(caps.caches[0].size_bytes, std::stoull(size) * (size.back() == 'K' ? 1024 : size.back() == 'M' ? 1 << 20 : 1));
  EXPECT_EQ(caps.caches[0].level, 1);
}

TEST(CpuDevice, CacheHierarchyIsPlausible) {
  // From sysfs or, where a VM hides it, from cpuid: a level-1 data cache of at least 8 KiB
  // and caches growing (or staying) with their level.
  Capabilities caps = detect_cpu_capabilities();
  ASSERT_FALSE(caps.caches.empty());
  bool l1d = false;
  for (size_t i = 0; i < caps.caches.size(); ++i) {
    const CacheInfo& c = caps.caches[i];
    EXPECT_GE(c.level, 1);
    EXPECT_LE(c.level, 4);
    EXPECT_GT(c.size_bytes, 0u);
    if (c.level == 1 && c.type == "Data") l1d = c.size_bytes >= 8192;
    if (i > 0 && c.level > caps.caches[i - 1].level) EXPECT_GE(c.size_bytes, caps.caches[i - 1].size_bytes);
  }
  EXPECT_TRUE(l1d);
}

TEST(CpuDevice, SimulatedMissingIsa) {
  setenv("GEARBOX_SIMULATE_MISSING_ISA", "sse2,avx2", 1);
  Capabilities caps = detect_cpu_capabilities();
  unsetenv("GEARBOX_SIMULATE_MISSING_ISA");
  EXPECT_FALSE(caps.has("sse2"));
  EXPECT_FALSE(caps.has("avx2"));
  EXPECT_EQ(caps.simulated_missing, (std::vector<std::string>{"sse2", "avx2"}));
  EXPECT_TRUE(detect_cpu_capabilities().has("sse2"));  // every x86-64 CPU has it
}

TEST(Devices, EnumerationAndLookup) {
  auto all = devices();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0]->kind(), DeviceKind::CPU);
  EXPECT_EQ(all[0]->name(), "cpu:0");
  EXPECT_EQ(get_device(DeviceKind::CPU, 0).value(), all[0]);
  auto missing = get_device(DeviceKind::CPU, 3);
  EXPECT_EQ(missing.status().code(), ErrorCode::DEVICE_NOT_FOUND);
  EXPECT_NE(missing.status().message().find("1 cpu device present"), std::string::npos) << missing.status().message();
  EXPECT_EQ(get_device(DeviceKind::CUDA, 0).status().code(), ErrorCode::DEVICE_NOT_FOUND);
  auto pool = all[0]->pool();
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  EXPECT_EQ(pool.value(), default_pool().value());
}

TEST(Calibration, MeasuresAndCachesPerMachine) {
  std::string dir = std::string(GEARBOX_TEST_TMP) + "/calibration_cache";
  std::filesystem::remove_all(dir);
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  Capabilities caps = detect_cpu_capabilities();
  EXPECT_FALSE(load_cached_peaks(caps).has_value());
  auto peaks = calibrate_cpu(caps, 20);
  ASSERT_TRUE(peaks.ok()) << peaks.status().to_string();
  ASSERT_TRUE(peaks->fp32_gflops.has_value());
  EXPECT_GT(*peaks->fp32_gflops, 0);
  ASSERT_TRUE(peaks->bandwidth_gbs.has_value());
  EXPECT_GT(*peaks->bandwidth_gbs, 0);
  EXPECT_EQ(peaks->bf16_gflops.has_value(), caps.has("avx512_bf16"));
  EXPECT_EQ(peaks->fp16_gflops.has_value(), caps.has("avx512_fp16"));
  // The note says how fp16 was measured, or why it was not.
  EXPECT_FALSE(peaks->fp16_note.empty());
  EXPECT_EQ(peaks->fp16_note.rfind("no native fp16", 0) == 0, !peaks->fp16_gflops.has_value()) << peaks->fp16_note;
  ASSERT_TRUE(save_cached_peaks(caps, *peaks).ok());
  EXPECT_EQ(calibration_cache_path(), dir + "/gearbox/calibration.json");

  auto loaded = load_cached_peaks(caps);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(peaks_to_json(*loaded), peaks_to_json(*peaks));
  // Another machine's key does not see this entry; the file keeps both.
  Capabilities other = caps;
  other.model = "Some Other CPU";
  EXPECT_FALSE(load_cached_peaks(other).has_value());
  ASSERT_TRUE(save_cached_peaks(other, *peaks).ok());
  EXPECT_TRUE(load_cached_peaks(caps).has_value());
  std::ifstream in(calibration_cache_path());
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["machines"].size(), 2u);
  // A corrupt cache reads as "not calibrated", never as an error or a crash.
  std::ofstream(calibration_cache_path()) << "{not json";
  EXPECT_FALSE(load_cached_peaks(caps).has_value());
  unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace gearbox::device
