// What `gearbox profile` and `gearbox demo` gather around a Profiler's records before the
// advisor and the report read them (tools/profile_report.h): the roofline, the passes left off
// that would have matched, the memory planner's arena plan and the device pool's capacity.
#pragma once

#include <string>

#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/profile_report.h"

namespace gearbox::cli {

// The roofline: cached calibration when there is one, else a quick measurement (~0.1 s a rate).
Roofline measure_roofline();

// A ProfileData for `profiler`'s runs of `session`, loaded from `model_path`.
ProfileData collect_profile(const Session& session, const Profiler& profiler, const std::string& model_path);

}  // namespace gearbox::cli
