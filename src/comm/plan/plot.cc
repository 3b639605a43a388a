#include "comm/plan/plot.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace gearbox::comm::plan {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string plot_svg(const std::string& title, const std::vector<PlotColumn>& cols, double memory_limit) {
  const double col_w = 56, left = 70, right = 70, top = 50, plot_h = 260, bottom = 70;
  const double width = left + right + col_w * double(std::max<size_t>(cols.size(), 1));
  const double height = top + plot_h + bottom;
  double max_t = 0, max_m = memory_limit;
  for (const auto& c : cols) max_t = std::max(max_t, c.step_s), max_m = std::max(max_m, c.memory_bytes);
  if (max_t <= 0) max_t = 1;
  if (max_m <= 0) max_m = 1;
  auto y_of = [&](double v, double max) { return top + plot_h * (1 - v / max); };
  std::ostringstream o;
  o.precision(3);
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << escape(title) << "</text>\n";
  o << "<text x=\"" << left << "\" y=\"36\" fill=\"#1f77b4\">predicted step time (s, left)</text>";
  o << "<text x=\"" << left + 200 << "\" y=\"36\" fill=\"#ff7f0e\">memory per device (GiB, right)</text>\n";
  o << "<line x1=\"" << left << "\" y1=\"" << top + plot_h << "\" x2=\"" << width - right << "\" y2=\"" << top + plot_h
    << "\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    double y = top + plot_h * (1 - k / 4.0);
    o << "<text x=\"" << left - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\" fill=\"#1f77b4\">" << max_t * k / 4
      << "</text>";
    o << "<text x=\"" << width - right + 6 << "\" y=\"" << y + 4 << "\" fill=\"#ff7f0e\">"
      << max_m * k / 4 / double(1 << 30) << "</text>\n";
  }
  if (memory_limit > 0) {
    double y = y_of(memory_limit, max_m);
    o << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << width - right << "\" y2=\"" << y
      << "\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>";
    o << "<text x=\"" << width - right - 4 << "\" y=\"" << y - 4
      << "\" text-anchor=\"end\" fill=\"#d62728\">memory limit</text>\n";
  }
  for (size_t i = 0; i < cols.size(); ++i) {
    const PlotColumn& c = cols[i];
    double x = left + col_w * double(i) + 8;
    double yt = y_of(c.step_s, max_t), ym = y_of(c.memory_bytes, max_m);
    o << "<rect x=\"" << x << "\" y=\"" << yt << "\" width=\"18\" height=\"" << top + plot_h - yt
      << "\" fill=\"#1f77b4\"" << (c.fits ? "" : " fill-opacity=\"0.3\"") << "><title>" << escape(c.label) << ": "
      << c.step_s << " s</title></rect>";
    o << "<rect x=\"" << x + 20 << "\" y=\"" << ym << "\" width=\"18\" height=\"" << top + plot_h - ym
      << "\" fill=\"#ff7f0e\"" << (c.fits ? "" : " fill-opacity=\"0.3\"") << "><title>" << escape(c.label) << ": "
      << c.memory_bytes / double(1 << 30) << " GiB</title></rect>\n";
    double xl = x + 19, yl = top + plot_h + 14;
    o << "<text x=\"" << xl << "\" y=\"" << yl << "\" text-anchor=\"middle\">" << escape(c.label) << "</text>";
    o << "<text x=\"" << xl << "\" y=\"" << yl + 13 << "\" text-anchor=\"middle\" fill=\"#555\">" << escape(c.sublabel)
      << "</text>";
    if (!c.fits)
      o << "<text x=\"" << xl << "\" y=\"" << yl + 26 << "\" text-anchor=\"middle\" fill=\"#d62728\">no fit</text>";
    o << "\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace gearbox::comm::plan
