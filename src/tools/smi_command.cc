// `gearbox smi [--json] [--watch SECONDS [--count N]] [--calibrate]`: the devices, their
// capability flags and measured peaks, this process's memory pool, system memory and
// temperatures. Peaks come from the per-machine calibration cache; --calibrate measures
// them now (about a second) and updates the cache.
#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "comm/group_stats.h"
#include "device/calibration.h"
#include "device/device.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

using nlohmann::json;
using namespace gearbox::device;

struct SmiOptions {
  bool json = false;
  double watch = 0;
  int count = 0;
  bool calibrate = false;
  int calibrate_ms = 300;
  bool prometheus = false;
};

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

json pool_json(const PoolStats& s) {
  json hist = json::object();
  for (int k = 0; k < PoolStats::kMaxOrders; ++k)
    if (s.histogram[k]) hist[std::to_string(s.min_block << k)] = s.histogram[k];
  return {{"capacity_bytes", s.capacity},
          {"used_bytes", s.used},
          {"free_bytes", s.free},
          {"largest_free_block_bytes", s.largest_free},
          {"fragmentation", s.fragmentation},
          {"peak_used_bytes", s.peak_used},
          {"live_allocations", s.live_allocations},
          {"allocations", s.alloc_count},
          {"frees", s.free_count},
          {"failed_allocations", s.failed_count},
          {"used_span_bytes", s.used_span},
          {"thread_scratch_bytes", s.thread_scratch},
          {"block_size_histogram", hist}};
}

Result<json> snapshot(const SmiOptions& o) {
  json doc;
  doc["timestamp"] = utc_now();
  doc["devices"] = json::array();
  for (Device* d : devices()) {
    const Capabilities& c = d->capabilities();
    json dev{{"name", d->name()},
             {"kind", kind_name(d->kind())},
             {"index", d->index()},
             {"vendor", c.vendor},
             {"model", c.model},
             {"logical_cores", c.logical_cores},
             {"physical_cores", c.physical_cores},
             {"memory_bytes", c.memory_bytes}};
    json caches = json::array();
    for (const auto& ch : c.caches)
      caches.push_back(
          {{"level", ch.level}, {"type", ch.type}, {"size_bytes", ch.size_bytes}, {"shared_by", ch.shared_by}});
    dev["caches"] = caches;
    json isa = json::object();
    for (const auto& f : c.isa) isa[f.name] = f.present;
    dev["isa"] = isa;
    dev["simulated_missing_isa"] = c.simulated_missing;
    std::optional<Peaks> peaks;
    if (o.calibrate) {
      GBX_ASSIGN_OR_RETURN(Peaks p, d->measure_peaks(o.calibrate_ms));
      GBX_RETURN_IF_ERROR(save_cached_peaks(c, p));
      peaks = p;
    } else {
      peaks = load_cached_peaks(c);
    }
    dev["peaks"] = peaks ? peaks_to_json(*peaks) : json(nullptr);
    dev["calibration_cache"] = calibration_cache_path();
    GBX_ASSIGN_OR_RETURN(MemoryPool * pool, d->pool());
    dev["pool"] = pool_json(pool->stats());
    doc["devices"].push_back(dev);
  }
  SystemMemory m = system_memory();
  doc["system_memory"] = {{"total_bytes", m.total}, {"available_bytes", m.available}};
  json temps = json::array();
  for (const auto& t : temperatures()) temps.push_back({{"sensor", t.sensor}, {"celsius", t.celsius}});
  doc["temperatures"] = temps;
  int stale = 0;
  doc["comm_groups"] = comm::read_group_stats(comm::stats_directory(), &stale);
  doc["comm_stats_dir"] = comm::stats_directory();
  doc["comm_stale_files"] = stale;
  return doc;
}

std::string rate(const json& v, const char* unit) {
  if (!v.is_number()) return "n/a";
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << v.get<double>() << " " << unit;
  return os.str();
}

void print_text(const json& doc) {
  std::cout << "gearbox smi  " << doc["timestamp"].get<std::string>() << "\n";
  for (const auto& d : doc["devices"]) {
    std::cout << "\n"
              << d["name"].get<std::string>() << "  " << d["model"].get<std::string>() << " ("
              << d["vendor"].get<std::string>() << ")\n";
    std::cout << "  cores         " << d["logical_cores"] << " logical, " << d["physical_cores"] << " physical\n";
    std::cout << "  caches        ";
    for (const auto& c : d["caches"])
      std::cout << "L" << c["level"]
                << (c["type"] == "Data"          ? "d"
                    : c["type"] == "Instruction" ? "i"
                                                 : "")
                << " " << format_bytes(c["size_bytes"].get<size_t>()) << "  ";
    std::cout << "\n  isa           ";
    std::string absent;
    for (const auto& [name, present] : d["isa"].items()) {
      if (present.get<bool>()) std::cout << name << " ";
      else absent += name + " ";
    }
    std::cout << "\n  isa absent    " << (absent.empty() ? "-" : absent) << "\n";
    if (!d["simulated_missing_isa"].empty())
      std::cout << "  simulated     GEARBOX_SIMULATE_MISSING_ISA hides " << d["simulated_missing_isa"].dump() << "\n";
    const json& p = d["peaks"];
    if (p.is_null()) {
      std::cout << "  peaks         not calibrated (run gearbox smi --calibrate)\n";
    } else {
      std::cout << "  peaks         fp32 " << rate(p["fp32_gflops"], "GFLOP/s") << ", bf16 "
                << rate(p["bf16_gflops"], "GFLOP/s") << ", fp16 " << rate(p["fp16_gflops"], "GFLOP/s")
                << ", read bandwidth " << rate(p["bandwidth_gbs"], "GB/s") << "  (" << p["threads"]
                << " threads, measured " << p["measured_at"].get<std::string>() << ")\n";
      if (p["bf16_gflops"].is_null())
        std::cout << "                bf16: " << p["bf16_note"].get<std::string>() << "\n";
      if (p["fp16_gflops"].is_null())
        std::cout << "                fp16: " << p["fp16_note"].get<std::string>() << "\n";
    }
    const json& pl = d["pool"];
    std::ostringstream frag;
    frag << std::fixed << std::setprecision(1) << pl["fragmentation"].get<double>() * 100 << "%";
    std::cout << "  memory pool   capacity " << format_bytes(pl["capacity_bytes"]) << ", used "
              << format_bytes(pl["used_bytes"]) << ", free " << format_bytes(pl["free_bytes"])
              << ", largest free block " << format_bytes(pl["largest_free_block_bytes"]) << ", fragmentation "
              << frag.str() << ", peak " << format_bytes(pl["peak_used_bytes"]) << ", " << pl["live_allocations"]
              << " live allocations; kernels' "
              << "thread scratch " << format_bytes(pl["thread_scratch_bytes"]) << " outside the pool\n";
  }
  const json& m = doc["system_memory"];
  std::cout << "\nsystem memory   total " << format_bytes(m["total_bytes"]) << ", available "
            << format_bytes(m["available_bytes"]) << "\n";
  std::cout << "temperatures    ";
  if (doc["temperatures"].empty()) std::cout << "n/a (no hwmon or thermal-zone sensors)";
  for (const auto& t : doc["temperatures"])
    std::cout << t["sensor"].get<std::string>() << " " << std::fixed << std::setprecision(1)
              << t["celsius"].get<double>() << " C  ";
  std::cout << "\n";
  std::cout << "\ncollective groups (" << doc["comm_stats_dir"].get<std::string>() << ")";
  if (doc["comm_groups"].empty()) std::cout << "  none running";
  std::cout << "\n";
  for (const auto& g : doc["comm_groups"]) {
    std::cout << "  group '" << g["group"].get<std::string>() << "' rank " << g["rank"] << "/" << g["size"] << " "
              << g["backend"].get<std::string>() << " pid " << g["pid"] << ": timeouts " << g["timeouts"]
              << ", lost peers " << g["rank_failures"] << "\n";
    for (const auto& [op, c] : g["ops"].items())
      std::cout << "    " << std::left << std::setw(15) << op << std::right << c["calls"] << " calls, "
                << format_bytes(c["bytes"].get<size_t>()) << ", " << std::fixed << std::setprecision(3)
                << c["seconds"].get<double>() << " s\n";
  }
}

int smi(const SmiOptions& o) {
  if (o.watch < 0) return report(make_error(ErrorCode::USAGE, "--watch takes a positive number of seconds"));
  for (int i = 0;; ++i) {
    SmiOptions again = o;
    again.calibrate = i == 0 && o.calibrate;
    auto doc = snapshot(again);
    if (!doc.ok()) return report(doc.status());
    if (o.prometheus)
      std::cout << comm::group_stats_prometheus((*doc)["comm_groups"].get<std::vector<json>>()) << std::flush;
    else if (o.json) std::cout << (o.watch > 0 ? doc->dump() : doc->dump(2)) << std::endl;  // JSON Lines when watching
    else print_text(*doc);
    if (o.watch <= 0 || (o.count > 0 && i + 1 >= o.count)) return 0;
    if (!o.json) std::cout << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(o.watch));
  }
}

}  // namespace

void add_smi_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<SmiOptions>();
  CLI::App* sub = app.add_subcommand("smi", "Show devices, capabilities, measured peaks, memory pool and temperatures");
  sub->add_flag("--json", o->json, "Print JSON (one compact document per line with --watch)");
  sub->add_option("--watch", o->watch, "Refresh every SECONDS until interrupted");
  sub->add_option("--count", o->count, "With --watch: stop after N refreshes");
  sub->add_flag("--calibrate", o->calibrate, "Measure the peaks now and update the calibration cache");
  sub->add_option("--calibrate-ms", o->calibrate_ms, "Milliseconds per measured rate (default 300)");
  sub->add_flag("--prometheus", o->prometheus,
                "Print the collective groups' counters in Prometheus' text format (for node_exporter's textfile "
                "collector)");
  sub->callback([o, action] { *action = [o] { return smi(*o); }; });
}

}  // namespace gearbox::cli
