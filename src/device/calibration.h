// Calibration: a short benchmark that measures a device's peak rates (fp32, bf16 and fp16
// FMA throughput, memory read bandwidth), and its per-machine cache.
//
// The cache is $XDG_CACHE_HOME/gearbox/calibration.json (else ~/.cache/gearbox/...), one
// entry per machine keyed by "<cpu model>|<logical cores>", so a home directory shared by
// different machines keeps each one's figures.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "device/device.h"

namespace gearbox::device {

// Measures on all logical cores; each rate runs for about budget_ms.
Result<Peaks> calibrate_cpu(const Capabilities& caps, int budget_ms);

std::string calibration_cache_path();
std::string calibration_key(const Capabilities& caps);
// The cached peaks for this machine, if any (a missing or unreadable cache is "none").
std::optional<Peaks> load_cached_peaks(const Capabilities& caps);
// Writes (merges) this machine's entry; FILE_WRITE_FAILED when the folder is not writable.
Status save_cached_peaks(const Capabilities& caps, const Peaks& peaks);

nlohmann::json peaks_to_json(const Peaks& p);
Peaks peaks_from_json(const nlohmann::json& j);

}  // namespace gearbox::device
