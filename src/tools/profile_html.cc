// report.html: one self-contained page (inline CSS and SVG, no scripts from the network) with
// the timeline of the last profiled run, the top ops, a roofline plot, tensor memory over
// time, the memory planner's arena and the advisor's findings.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "tools/profile_report.h"

namespace gearbox::cli {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// A stable colour per op type.
std::string colour(const std::string& op) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[std::hash<std::string>{}(op) % 10];
}

std::string timeline_svg(const ProfileData& d) {
  if (d.runs.empty()) return "<p>No runs.</p>";
  const RunRecord& last = d.runs.back();
  const double span = std::max<double>(1, static_cast<double>(last.end_ns - last.begin_ns));
  const int width = 1000, row = 18;
  std::ostringstream o;
  o << fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"timeline\">", width + 20, 4 * row + 30);
  for (const OpRecord& r : d.ops) {
    if (r.run != last.run) continue;
    double x = 10 + width * static_cast<double>(r.begin_ns - last.begin_ns) / span;
    double w = std::max(0.5, width * static_cast<double>(r.end_ns - r.begin_ns) / span);
    int y = 10 + std::min(r.depth, 3) * row;
    o << fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{} ({}) {:.3f} ms</title></rect>",
                     x, y, w, row - 2, colour(r.op_type), esc(r.node), esc(r.op_type),
                     static_cast<double>(r.end_ns - r.begin_ns) / 1e6);
  }
  o << fmt::format("<text x=\"10\" y=\"{}\" class=\"axis\">0 ms</text><text x=\"{}\" y=\"{}\" class=\"axis\" "
                   "text-anchor=\"end\">{:.3f} ms (run {})</text></svg>",
                   4 * row + 25, width + 10, 4 * row + 25, span / 1e6, last.run);
  return o.str();
}

std::string roofline_svg(const ProfileData& d, const std::vector<OpSummary>& types) {
  const Roofline& r = d.roofline;
  if (r.peak_gflops <= 0) return "<p>No peak figures: run <code>gearbox smi --calibrate</code>.</p>";
  const int w = 600, h = 360, pad = 50;
  const double xmin = 1e-2, xmax = 1e3;  // FLOP/byte
  const double ymax = r.peak_gflops * 2, ymin = ymax / 1e5;
  auto X = [&](double v) { return pad + (w - 2 * pad) * std::log10(std::clamp(v, xmin, xmax) / xmin) / std::log10(xmax / xmin); };
  auto Y = [&](double v) { return h - pad - (h - 2 * pad) * std::log10(std::clamp(v, ymin, ymax) / ymin) / std::log10(ymax / ymin); };
  std::ostringstream o;
  o << fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"roofline\">", w, h);
  o << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>", pad, pad, w - 2 * pad,
                   h - 2 * pad);
  // The roof: bandwidth slope up to the ridge, then the compute peak.
  std::string pts;
  for (int i = 0; i <= 60; ++i) {
    double x = xmin * std::pow(xmax / xmin, i / 60.0);
    pts += fmt::format("{:.1f},{:.1f} ", X(x), Y(attainable_gflops(r, x)));
  }
  o << "<polyline fill=\"none\" stroke=\"#333\" stroke-width=\"2\" points=\"" << pts << "\"/>";
  for (const OpSummary& s : types) {
    if (s.flops <= 0 || s.total_ms <= 0) continue;
    o << fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"><title>{}: {:.2f} GFLOP/s at {:.2f} FLOP/byte</title></circle>",
                     X(s.intensity()), Y(s.gflops_per_s()), colour(s.op_type), esc(s.op_type), s.gflops_per_s(), s.intensity());
    o << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\">{}</text>", X(s.intensity()) + 7, Y(s.gflops_per_s()) + 4,
                     esc(s.op_type));
  }
  o << fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\">arithmetic intensity (FLOP/byte, log)</text>", pad, h - 15);
  o << fmt::format("<text x=\"10\" y=\"{}\" class=\"axis\">GFLOP/s (log); peak {:.0f}, {:.1f} GB/s ({})</text></svg>", pad - 15,
                   r.peak_gflops, r.bandwidth_gbs, esc(r.source));
  return o.str();
}

std::string memory_svg(const ProfileData& d) {
  size_t peak = 1;
  for (const OpRecord& r : d.ops) peak = std::max(peak, r.pool_bytes_in_use);
  if (d.ops.empty()) return "<p>No ops.</p>";
  const int w = 1000, h = 160;
  const double t0 = static_cast<double>(d.ops.front().end_ns), t1 = static_cast<double>(d.ops.back().end_ns);
  const double span = std::max(1.0, t1 - t0);
  std::string pts;
  for (const OpRecord& r : d.ops)
    pts += fmt::format("{:.1f},{:.1f} ", 10 + w * (static_cast<double>(r.end_ns) - t0) / span,
                       h - 10 - (h - 20) * static_cast<double>(r.pool_bytes_in_use) / static_cast<double>(peak));
  return fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"memory\"><polyline fill=\"none\" "
                     "stroke=\"#4e79a7\" stroke-width=\"1.5\" points=\"{}\"/><text x=\"12\" y=\"14\" class=\"axis\">peak {:.2f} "
                     "MiB</text></svg>",
                     w + 20, h, pts, static_cast<double>(peak) / (1 << 20));
}

// The memory planner's arena: one box per value, its lifetime (node indices) across, its
// offset and size in the arena down.
std::string arena_svg(const ProfileData& d) {
  if (d.arena && d.arena->rows.empty() && !d.arena->not_made.empty())
    return "<p>No arena plan: " + esc(d.arena->not_made) + ".</p>";
  if (!d.arena || d.arena->rows.empty())
    return "<p>No arena plan (a .gbm, or no intermediate with a static shape).</p>";
  const ArenaPlan& a = *d.arena;
  int end = 1;
  for (const ArenaRow& r : a.rows) end = std::max(end, r.last + 1);
  const double top = static_cast<double>(std::max<size_t>(a.planned_bytes, 1));
  const int w = 1000, h = 240;
  std::ostringstream o;
  o << fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"arena\">", w + 20, h + 30);
  for (const ArenaRow& r : a.rows) {
    const double x = 10 + w * static_cast<double>(r.first) / end;
    const double bw = std::max(1.0, w * static_cast<double>(r.last + 1 - r.first) / end);
    const double y = 10 + h * static_cast<double>(r.offset) / top;
    const double bh = std::max(1.0, h * static_cast<double>(r.bytes) / top);
    o << fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"#fff\">"
                     "<title>{}: {} bytes at offset {}, {} .. {}</title></rect>",
                     x, y, bw, bh, colour(r.value), esc(r.value), r.bytes, r.offset, esc(r.first_node), esc(r.last_node));
  }
  o << fmt::format("<text x=\"10\" y=\"{}\" class=\"axis\">nodes in execution order across, arena offset down; planned "
                   "{:.2f} MiB, naive {:.2f} MiB, lower bound {:.2f} MiB{}</text></svg>",
                   h + 25, static_cast<double>(a.planned_bytes) / (1 << 20), static_cast<double>(a.naive_bytes) / (1 << 20),
                   static_cast<double>(a.lower_bound_bytes) / (1 << 20),
                   a.unsized_values ? fmt::format(", {} values without a static shape left out", a.unsized_values) : "");
  return o.str();
}

}  // namespace

std::string report_html(const ProfileData& d) {
  const std::vector<OpSummary> rows = summarize(d);
  std::vector<OpSummary> types;
  for (const OpSummary& s : rows)
    if (s.kind == "op_type") types.push_back(s);
  const double run_ms = total_run_ms(d);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gearbox profile: " << esc(d.model)
    << "</title>\n<style>body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
       ".axis,.label{font-size:11px;fill:#555}.finding{margin:.6em 0;padding:.5em;border-left:4px solid #e15759;"
       "background:#fdf3f3}</style></head><body>\n";
  o << "<h1>gearbox profile</h1><p>Model <code>" << esc(d.model) << "</code>: " << d.runs.size()
    << fmt::format(" profiled runs, {:.3f} ms in all, {:.3f} ms per run.</p>\n", run_ms,
                   d.runs.empty() ? 0.0 : run_ms / static_cast<double>(d.runs.size()));
  o << "<h2>Advisor</h2>\n";
  auto findings = advise(d);
  if (findings.empty()) o << "<p>No findings.</p>\n";
  for (const Finding& f : findings)
    o << "<div class=\"finding\"><b>" << esc(f.rule) << "</b>: " << esc(f.evidence) << "<br>Fix: " << esc(f.fix)
      << "</div>\n";
  o << "<h2>Timeline (last run)</h2>\n" << timeline_svg(d) << "\n";
  o << "<h2>Top ops</h2>\n<table><tr><th>op type</th><th>calls</th><th>total ms</th><th>% of run</th><th>GFLOP/s</th>"
       "<th>GB/s</th><th>FLOP/byte</th></tr>\n";
  for (size_t i = 0; i < types.size() && i < 15; ++i) {
    const OpSummary& s = types[i];
    o << fmt::format("<tr><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.1f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td></tr>\n",
                     esc(s.op_type), s.calls, s.total_ms, run_ms > 0 ? 100 * s.total_ms / run_ms : 0, s.gflops_per_s(),
                     s.gb_per_s(), s.intensity());
  }
  o << "</table>\n<h2>Roofline</h2>\n" << roofline_svg(d, types) << "\n";
  o << "<h2>Tensor memory over time</h2>\n" << memory_svg(d) << "\n";
  o << "<h2>Arena plan</h2>\n" << arena_svg(d) << "\n</body></html>\n";
  return o.str();
}

}  // namespace gearbox::cli
