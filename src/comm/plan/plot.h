// gearbox plan's plot: a self-contained SVG of predicted step time and memory per device for a
// row of layouts (the dp x tp x pp splits of one device count, or the chosen layout of each
// device count in a sweep), with the memory limit drawn across. Written by hand: a few dozen
// lines of SVG need no plotting library.
#pragma once

#include <string>
#include <vector>

namespace gearbox::comm::plan {

struct PlotColumn {
  std::string label;     // e.g. "8x4x2" or "1024 dev"
  std::string sublabel;  // e.g. "dp x tp x pp"
  double step_s = 0;
  double memory_bytes = 0;
  bool fits = true;
};

std::string plot_svg(const std::string& title, const std::vector<PlotColumn>& columns, double memory_limit);

}  // namespace gearbox::comm::plan
