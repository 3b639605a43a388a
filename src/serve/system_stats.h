// Vital signs of the process and the machine, read from /proc and /sys on each call: resident
// memory, system memory, and CPU temperatures where the machine exposes sensors (hwmon or
// thermal zones; containers and many VMs expose none).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gearbox::serve {

std::optional<uint64_t> process_resident_bytes();

struct SystemMemory {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};
std::optional<SystemMemory> system_memory();

struct Temperature {
  std::string sensor;  // "coretemp/Package id 0", "thermal_zone0/x86_pkg_temp"
  double celsius = 0;
};
std::vector<Temperature> cpu_temperatures();

}  // namespace gearbox::serve
