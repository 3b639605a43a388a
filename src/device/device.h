// Device: what a compute device is and what it can do. The CPU implements it now; a CUDA
// device implements the same interface later (kind CUDA, its own pool and calibration).
//
//   for (Device* d : devices()) std::cout << d->name() << "\n";
//   GBX_ASSIGN_OR_RETURN(Device* cpu, get_device(DeviceKind::CPU, 0));
//   GBX_ASSIGN_OR_RETURN(MemoryPool* pool, cpu->pool());
//
// Capabilities are read once (cpuid + /sys + /proc on the CPU). Measured peaks come from a
// short calibration benchmark (device/calibration.h) cached per machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "device/memory_pool.h"

namespace gearbox::device {

enum class DeviceKind { CPU = 0, CUDA = 1 };
const char* kind_name(DeviceKind kind);  // "cpu", "cuda"

struct CacheInfo {
  int level = 0;
  std::string type;        // "Data", "Instruction", "Unified"
  size_t size_bytes = 0;
  int shared_by = 0;       // logical CPUs sharing one instance
};

struct IsaFlag {
  std::string name;  // "avx2", "avx512f", "amx_bf16", ...
  bool present = false;
};

struct Capabilities {
  std::string vendor;      // "GenuineIntel", "AuthenticAMD"
  std::string model;       // the brand string
  int logical_cores = 0;
  int physical_cores = 0;  // 0 when unknown
  std::vector<CacheInfo> caches;
  // Features the hardware has AND the OS enabled (XSAVE state), in a fixed order. A flag
  // named in GEARBOX_SIMULATE_MISSING_ISA (comma-separated) is reported absent, so the
  // diagnostics for a machine without it can be exercised anywhere.
  std::vector<IsaFlag> isa;
  std::vector<std::string> simulated_missing;
  size_t memory_bytes = 0;  // RAM for the CPU, device memory for an accelerator

  bool has(const std::string& flag) const;
  // Computes bf16 products: AVX512_BF16's VDPBF16PS or AMX-BF16 (what a kernel lowered to bf16
  // needs; without it bf16 is a storage format converted to fp32).
  bool bf16_arithmetic() const { return has("avx512_bf16") || has("amx_bf16"); }
};

// Measured peak rates; a rate the device cannot measure (no such instructions) is empty.
struct Peaks {
  std::optional<double> fp32_gflops, bf16_gflops, fp16_gflops, bandwidth_gbs;
  std::string fp16_note, bf16_note;  // why a rate is empty, or how it was measured
  int threads = 0;
  double seconds = 0;                // time the calibration took
  std::string measured_at;           // ISO-8601 UTC
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual int index() const = 0;
  virtual std::string name() const = 0;  // "cpu:0"
  virtual const Capabilities& capabilities() const = 0;
  // The device's memory pool (created on first use).
  virtual Result<MemoryPool*> pool() = 0;
  // Runs the calibration benchmark for about `budget_ms` per rate.
  virtual Result<Peaks> measure_peaks(int budget_ms) = 0;
};

// Reads the CPU's capabilities now (devices() caches the result of the first call), honouring
// GEARBOX_SIMULATE_MISSING_ISA as it is set at the time of the call.
Capabilities detect_cpu_capabilities();

// Every device on this machine, CPU first. Pointers live for the whole process.
std::vector<Device*> devices();
// DEVICE_NOT_FOUND when there is no such device.
Result<Device*> get_device(DeviceKind kind, int index);

// CPU temperatures: the sensors of CPU hwmon drivers (coretemp, k10temp, zenpower,
// cpu_thermal) under /sys/class/hwmon, else the thermal zones under /sys/class/thermal (boards
// without such a driver); empty when there are none. Other hwmon chips (NVMe drives, GPUs,
// NICs) are left out: smi and the server's gearbox_cpu_temperature_celsius report these.
struct Temperature {
  std::string sensor;  // "k10temp/Tctl", "thermal_zone0/x86_pkg_temp"
  double celsius = 0;
};
std::vector<Temperature> temperatures();

// The ISA features this build's compiler targeted (from predefined macros such as __AVX2__):
// the binary faults on a CPU without them.
std::vector<std::string> build_required_isa();

}  // namespace gearbox::device
