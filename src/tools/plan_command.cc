// `gearbox plan NETWORK|MODEL.onnx --devices N [--memory-per-device SIZE] [--links FILE] [--top K]
//  [--json] [--sweep N1,N2,...] [--svg FILE]`: the parallel layout of a transformer over N devices that
// the cost model predicts fastest within the memory limit, with the runners-up, the plain
// data-parallel layout for comparison, and a plot (comm/plan, docs/parallel.md).
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/atomic_file.h"
#include "comm/plan/plot.h"
#include "comm/plan/search.h"
#include "device/calibration.h"
#include "device/device.h"
#include "device/memory_pool.h"
#include "tools/commands.h"
#include "tools/plan_model.h"

namespace gearbox::cli {
namespace {

using nlohmann::json;
using namespace gearbox::comm::plan;

struct PlanOptions {
  std::string network;
  int devices = 0;
  std::string memory;
  std::string links;
  int top = 5;
  bool json = false;
  std::vector<int> sweep;
  std::string svg;
  bool no_zero = false, no_recompute = false, no_replicate = false;
  int64_t global_batch = 0;  // 0: the network's own (a model's input batch)
};

// This machine's figures where the links file gives none: the calibrated peaks (cached by
// gearbox smi --calibrate, else measured now for a moment) and the example links.
Result<Hardware> hardware(const PlanOptions& o) {
  Hardware hw;
  hw.intra_node = {25e9, 5e-6};
  hw.inter_node = {12.5e9, 20e-6};
  hw.source = "built-in links (25 GB/s, 5 us in a node; 12.5 GB/s, 20 us between nodes)";
  if (!o.links.empty()) {
    GBX_ASSIGN_OR_RETURN(hw, load_hardware(o.links, hw));
  }
  if (hw.peak_flops > 0 && hw.memory_bandwidth > 0) return hw;
  GBX_ASSIGN_OR_RETURN(device::Device * cpu, device::get_device(device::DeviceKind::CPU, 0));
  std::optional<device::Peaks> peaks = device::load_cached_peaks(cpu->capabilities());
  if (!peaks) {
    std::cerr << "gearbox plan: measuring this machine's peaks (gearbox smi --calibrate caches them)\n";
    GBX_ASSIGN_OR_RETURN(device::Peaks p, cpu->measure_peaks(200));
    peaks = p;
  }
  if (hw.peak_flops <= 0) {
    std::optional<double> g = peaks->bf16_gflops ? peaks->bf16_gflops : peaks->fp32_gflops;
    hw.peak_flops = g.value_or(100) * 1e9;
  }
  if (hw.memory_bandwidth <= 0) hw.memory_bandwidth = peaks->bandwidth_gbs.value_or(20) * 1e9;
  hw.source += "; device: this machine's calibrated peaks";
  return hw;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string gib(double bytes) { return fixed(bytes / double(1 << 30), 1) + " GiB"; }

std::string degrees(const Layout& l) {
  return std::to_string(l.dp) + "x" + std::to_string(l.tp) + "x" + std::to_string(l.pp);
}

json candidate_json(const Candidate& c) {
  return {{"layout", layout_to_json(c.layout)}, {"estimate", estimate_to_json(c.estimate)}};
}

void print_header(const TransformerSpec& spec, int devices, double limit, const Hardware& hw) {
  std::cout << "network   " << spec.name << ": " << fixed(double(spec.total_params()) / 1e9, 2) << "B parameters, "
            << spec.layers << " layers, hidden " << spec.hidden << ", " << spec.heads << " heads, seq " << spec.seq
            << ", global batch " << spec.global_batch << ", " << (spec.dtype_bytes == 2 ? "bf16" : "fp32") << "\n";
  std::cout << "devices   " << devices << " (" << hw.devices_per_node << " per node), " << gib(limit) << " each; "
            << fixed(hw.peak_flops / 1e12, 2) << " TFLOP/s peak x " << fixed(hw.matmul_efficiency, 2) << ", "
            << fixed(hw.memory_bandwidth / 1e9, 0) << " GB/s\n";
  std::cout << "links     in a node " << fixed(hw.intra_node.bandwidth / 1e9, 1) << " GB/s, "
            << fixed(hw.intra_node.latency * 1e6, 1) << " us; between nodes " << fixed(hw.inter_node.bandwidth / 1e9, 1)
            << " GB/s, " << fixed(hw.inter_node.latency * 1e6, 1) << " us (" << hw.source << ")\n";
}

void print_table(const std::vector<Candidate>& rows) {
  std::cout << "\n #  dp x tp x pp  micro-batches  size  schedule  zero  recompute  whole    step s  bubble  tp comm s"
               "  dp comm s  memory/device\n";
  int i = 0;
  for (const Candidate& c : rows) {
    const Layout& l = c.layout;
    const Estimate& e = c.estimate;
    std::cout << std::setw(2) << ++i << "  " << std::setw(12) << degrees(l) << "  " << std::setw(13) << l.micro_batches
              << "  " << std::setw(4) << e.micro_batch << "  " << std::setw(8) << schedule_name(l.schedule) << "  "
              << std::setw(4) << l.zero << "  " << std::setw(9) << (l.recompute ? "yes" : "no") << "  " << std::setw(5)
              << l.replicated_units.size() << "  " << std::setw(8) << fixed(e.step_s, 3) << "  " << std::setw(6)
              << fixed(e.bubble, 3) << "  " << std::setw(9) << fixed(e.tp_comm_s, 3) << "  " << std::setw(9)
              << fixed(e.dp_comm_s, 3) << "  " << std::setw(13) << gib(e.memory.total()) << "\n";
  }
}

Status write_svg(const std::string& path, const std::string& svg) { return write_file_atomically(path, svg); }

int run_one(const PlanOptions& o, const TransformerSpec& spec, const Hardware& hw, double limit) {
  SearchOptions so;
  so.memory_limit = limit;
  so.keep = o.top;
  so.allow_zero = !o.no_zero;
  so.allow_recompute = !o.no_recompute;
  so.allow_replication = !o.no_replicate;
  auto t0 = std::chrono::steady_clock::now();
  auto r = search(spec, o.devices, hw, so);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) return report(r.status());
  if (!o.svg.empty()) {
    std::vector<PlotColumn> cols;
    for (const auto& d : r->per_degrees)
      cols.push_back({degrees(d.best.layout),
                      "m" + std::to_string(d.best.layout.micro_batches) + " z" + std::to_string(d.best.layout.zero),
                      d.best.estimate.step_s, d.best.estimate.memory.total(), d.fits});
    Status s = write_svg(
        o.svg, plot_svg(spec.name + " on " + std::to_string(o.devices) + " devices: the best layout of each split",
                        cols, limit));
    if (!s.ok()) return report(s);
  }
  const bool dp_fits = r->has_data_parallel && r->data_parallel.estimate.memory.total() <= limit;
  if (o.json) {
    json runners = json::array();
    for (size_t i = 1; i < r->best.size(); ++i) runners.push_back(candidate_json(r->best[i]));
    json doc{{"network", network_to_json(spec)},
             {"devices", o.devices},
             {"memory_limit_bytes", limit},
             {"hardware", hardware_to_json(hw)},
             {"evaluated", r->evaluated},
             {"fitting", r->fitting},
             {"search_seconds", secs},
             {"chosen", candidate_json(r->best.front())},
             {"runners_up", runners}};
    if (r->has_data_parallel) {
      doc["data_parallel"] = candidate_json(r->data_parallel);
      doc["data_parallel"]["fits"] = dp_fits;
    }
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  print_header(spec, o.devices, limit, hw);
  std::cout << "searched  " << r->evaluated << " layouts in " << fixed(secs, 2) << " s; " << r->fitting
            << " fit in memory\n";
  print_table(r->best);
  const Candidate& best = r->best.front();
  std::cout << "\nchosen    " << degrees(best.layout) << " (dp x tp x pp); stages hold";
  for (int u : best.layout.stage_units) std::cout << " " << u;
  std::cout << " of the " << spec.layers + 2 << " units (embedding, " << spec.layers << " blocks, head)\n";
  if (!best.layout.replicated_units.empty()) {
    std::cout << "whole     units";
    for (int u : best.layout.replicated_units) std::cout << " " << u;
    std::cout << " run unsplit on every tensor-parallel rank (no allreduce; numbered from 0, the embedding)\n";
  }
  if (r->has_data_parallel)
    std::cout << "plain DP  " << degrees(r->data_parallel.layout) << ": " << fixed(r->data_parallel.estimate.step_s, 3)
              << " s per step, " << gib(r->data_parallel.estimate.memory.total()) << " per device"
              << (dp_fits ? "" : ": does not fit") << "\n";
  if (!o.svg.empty()) std::cout << "plot      " << o.svg << "\n";
  return 0;
}

int run_sweep(const PlanOptions& o, const TransformerSpec& spec, const Hardware& hw, double limit) {
  SearchOptions so;
  so.memory_limit = limit;
  so.keep = 1;
  so.allow_zero = !o.no_zero;
  so.allow_recompute = !o.no_recompute;
  so.allow_replication = !o.no_replicate;
  json rows = json::array();
  std::vector<PlotColumn> cols;
  if (!o.json) {
    print_header(spec, o.sweep.front(), limit, hw);
    std::cout
        << "\ndevices  dp x tp x pp  micro-batches  schedule  zero  recompute    step s  memory/device  search s\n";
  }
  for (int n : o.sweep) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = search(spec, n, hw, so);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) {
      rows.push_back({{"devices", n}, {"error", r.status().to_string()}});
      cols.push_back({std::to_string(n), "no fit", 0, 0, false});
      if (!o.json) std::cout << std::setw(7) << n << "  " << r.status().message() << "\n";
      continue;
    }
    const Candidate& c = r->best.front();
    rows.push_back({{"devices", n}, {"search_seconds", secs}, {"chosen", candidate_json(c)}});
    cols.push_back({std::to_string(n), degrees(c.layout), c.estimate.step_s, c.estimate.memory.total(), true});
    if (!o.json)
      std::cout << std::setw(7) << n << "  " << std::setw(12) << degrees(c.layout) << "  " << std::setw(13)
                << c.layout.micro_batches << "  " << std::setw(8) << schedule_name(c.layout.schedule) << "  "
                << std::setw(4) << c.layout.zero << "  " << std::setw(9) << (c.layout.recompute ? "yes" : "no") << "  "
                << std::setw(8) << fixed(c.estimate.step_s, 3) << "  " << std::setw(13)
                << gib(c.estimate.memory.total()) << "  " << std::setw(8) << fixed(secs, 2) << "\n";
  }
  if (!o.svg.empty()) {
    Status s = write_svg(o.svg, plot_svg(spec.name + ": the chosen layout per device count", cols, limit));
    if (!s.ok()) return report(s);
    if (!o.json) std::cout << "plot     " << o.svg << "\n";
  }
  if (o.json)
    std::cout << json{{"network", network_to_json(spec)}, {"memory_limit_bytes", limit}, {"sweep", rows}}.dump(2)
              << "\n";
  return 0;
}

int run_plan(const PlanOptions& o) {
  if (o.devices < 1 && o.sweep.empty())
    return report(make_error(ErrorCode::USAGE, "give --devices N (>= 1) or --sweep"));
  for (int n : o.sweep)
    if (n < 1) return report(make_error(ErrorCode::USAGE, "--sweep device counts must be >= 1, not ", n));
  auto spec = load_plan_network(o.network, o.global_batch);
  if (!spec.ok()) return report(spec.status());
  auto hw = hardware(o);
  if (!hw.ok()) return report(hw.status());
  double limit = hw->memory_bytes;
  if (!o.memory.empty()) {
    auto m = device::parse_memory_size(o.memory);
    if (!m.ok()) return report(m.status().with_context("--memory-per-device: "));
    limit = double(*m);
  }
  if (limit <= 0) limit = double(device::system_memory().total);
  return o.sweep.empty() ? run_one(o, *spec, *hw, limit) : run_sweep(o, *spec, *hw, limit);
}

}  // namespace

void add_plan_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Choose the data x tensor x pipeline layout of a transformer over N devices (docs/parallel.md)");
  sub->add_option("network", o->network,
                  "A built-in network (gpt-tiny, gpt-1.3b, gpt-13b, gpt-175b), a JSON file describing one, or a "
                  "GPT-style ONNX model (MODEL.onnx, read for its dimensions)")
      ->required();
  sub->add_option("--global-batch", o->global_batch,
                  "Sequences per optimizer step over all devices (default: the network's; a model's input batch)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sub->add_option("--devices", o->devices, "Number of devices to split over");
  sub->add_option(
      "--memory-per-device", o->memory,
      "Memory limit per device, e.g. 80G (default: the links file's device memory_gb, else this machine's RAM)");
  sub->add_option("--links", o->links, "JSON file with the links' bandwidth and latency and the device's peaks");
  sub->add_option("--top", o->top, "How many layouts to list (default 5)")->check(CLI::Range(1, 1000));
  sub->add_flag("--json", o->json, "Print one JSON document instead of the table");
  sub->add_option("--sweep", o->sweep, "Plan for each of these device counts (comma-separated) instead of --devices")
      ->delimiter(',');
  sub->add_option("--svg", o->svg, "Write a plot of predicted step time and memory per device to FILE");
  sub->add_flag("--no-zero", o->no_zero, "Do not consider sharding optimizer state or gradients (ZeRO-1/2)");
  sub->add_flag("--no-recompute", o->no_recompute, "Do not consider recomputing activations in the backward pass");
  sub->add_flag("--no-replicate", o->no_replicate,
                "Split every unit over the tensor-parallel group (no per-layer choice of running a unit whole)");
  sub->callback([o, action] { *action = [o] { return run_plan(*o); }; });
}

}  // namespace gearbox::cli
