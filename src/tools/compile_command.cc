// `gearbox compile MODEL.onnx -o OUT.gbm`: imports and optimizes a model once and writes the
// compiled model (.gbm, docs/gbm.md) that `gearbox run` and Session load without re-optimizing.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/atomic_file.h"
#include "base/strings.h"
#include "device/device.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/onnx_importer.h"
#include "graph/optimizer.h"
#include "runtime/accuracy_budget.h"
#include "runtime/partitioner.h"
#include "runtime/session.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/model_inputs.h"
#include "tools/progress_display.h"

namespace gearbox::cli {
namespace {

struct CompileOptions {
  std::string model;
  std::string output;
  std::string input_shape;                  // "name:1,3,224,224;name2:..."
  SessionFlags session;                     // --engines, --engine, --disable-pass, ... as a session takes them
  std::string target = "native";
  std::string report_path;
  bool quiet = false;                       // --quiet: no progress on stderr
  std::string accuracy_budget;              // "cosine>=0.9999,top1>=0.995" (runtime/accuracy_budget.h)
  std::string calibration;                  // a folder of .npy samples
  size_t calibration_random = 0;            // or this many deterministic random samples
  NpyReadOptions npy;
};

// --accuracy-budget: the fewest lowered nodes kept in fp32 for the budget to hold on the
// calibration set; they join so.keep_dtype_nodes, and what was found is printed.
Result<std::optional<BudgetResult>> fit_budget(const CompileOptions& o, const Model& model, SessionOptions& so,
                                               Progress* progress) {
  if (o.accuracy_budget.empty()) {
    if (!o.calibration.empty() || o.calibration_random > 0)
      return make_error(ErrorCode::USAGE, "--calibration and --calibration-random are for --accuracy-budget");
    return std::optional<BudgetResult>();
  }
  GBX_ASSIGN_OR_RETURN(AccuracyBudget budget, parse_accuracy_budget(o.accuracy_budget));
  GBX_ASSIGN_OR_RETURN(PrecisionMode mode, parse_precision_mode(so.precision));
  if (mode == PrecisionMode::ForceFp32)
    return make_error(ErrorCode::USAGE,
                      "--accuracy-budget needs a reduced --precision-mode (e.g. "
                      "allow_mix_precision_bf16): force_fp32 has nothing to fall back");
  if (o.calibration.empty() == (o.calibration_random == 0))
    return make_error(ErrorCode::USAGE,
                      "--accuracy-budget needs its calibration samples: --calibration DIR or "
                      "--calibration-random N (one of the two)");
  std::vector<IoInfo> inputs;
  for (const Value* v : model.graph->inputs) inputs.push_back({v->name, v->type});
  GBX_ASSIGN_OR_RETURN(auto samples, load_calibration(inputs, o.calibration, o.calibration_random, o.npy));
  SessionOptions tries = so;  // each try builds its own session, quietly
  tries.optimizer.progress = nullptr;
  BudgetOptions bo;
  bo.progress = progress;
  GBX_ASSIGN_OR_RETURN(BudgetResult r,
                       fit_accuracy_budget([&](const SessionOptions& opts) { return Session::load(o.model, opts); },
                                           tries, budget, samples, bo));
  for (const std::string& node : r.kept_nodes()) so.keep_dtype_nodes.push_back(node);
  return std::optional<BudgetResult>(std::move(r));
}

// The report's "partition" object: the priority list, nodes per engine, the regions.
nlohmann::json partition_json(const Partition& p) {
  nlohmann::json regions = nlohmann::json::array();
  for (const PartitionRegion& r : p.regions)
    regions.push_back({{"id", r.id},
                       {"engine", r.engine},
                       {"graph", r.graph},
                       {"nodes", r.nodes},
                       {"first_node", r.first_node},
                       {"last_node", r.last_node}});
  return {{"engines", p.engines},
          {"nodes", p.nodes},
          {"node_counts", p.node_counts},
          {"forced_nodes", p.forced.size()},
          {"regions", regions}};
}

// Fixes the declared shapes of named inputs; their symbolic dims also become values for the
// memory plan. Intermediate shapes are not re-inferred (docs/gbm.md).
Status apply_input_shapes(Model& model, const std::string& spec, OptimizerOptions& opts) {
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.empty()) continue;
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return make_error(ErrorCode::USAGE, "--input-shape entry '", item, "' is not NAME:D1,D2,...");
    std::string name = item.substr(0, colon);
    Dims dims;
    std::stringstream ds(item.substr(colon + 1));
    std::string d;
    while (std::getline(ds, d, ',')) {
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        return make_error(ErrorCode::USAGE, "--input-shape entry '", item, "': '", d, "' is not a dim >= 0");
      dims.push_back(v);
    }
    Value* in = nullptr;
    std::string names;
    for (Value* v : model.graph->inputs) {
      names += (names.empty() ? "" : ", ") + v->name;
      if (v->name == name) in = v;
    }
    if (!in) return make_error(ErrorCode::USAGE, "--input-shape: '", name, "' is not an input; the inputs are ", names);
    Shape& s = in->type.shape;
    if (s.ranked && s.rank() != dims.size())
      return make_error(ErrorCode::USAGE, "--input-shape: input '", name, "' has rank ", s.rank(), ", not ",
                        dims.size());
    if (s.ranked && !s.accepts(dims))
      return make_error(ErrorCode::USAGE, "--input-shape: input '", name, "' is ", to_string(s), "; ",
                        to_string(dims), " does not fit it");
    if (s.ranked)
      for (size_t i = 0; i < dims.size(); ++i)
        if (!s.dims[i].symbol.empty()) opts.memory.dim_values[s.dims[i].symbol] = dims[i];
    s = Shape::from_dims(dims);
  }
  return Status::OK();
}

int compile(const CompileOptions& o) {
  if (o.target != "native" && o.target != "generic")
    return report(make_error(ErrorCode::USAGE, "--target must be native or generic, not '", o.target, "'"));
  // The options a session built with the same flags and environment would have
  // (resolve_session_options), so the .gbm holds the graph that session would run.
  SessionOptions base;
  base.optimizer.plan_memory = true;  // stored in the .gbm and reported
  auto requested = o.session.to_session_options(base);
  if (!requested.ok()) return report(requested.status());
  auto resolved = resolve_session_options(*requested);
  if (!resolved.ok()) return report(resolved.status());
  SessionOptions& so = *resolved;
  // Syntax first, before paying for the import.
  if (auto overrides = parse_engine_overrides(so.engine_overrides); !overrides.ok()) return report(overrides.status());
  // Phases on stderr as they pass (a bar on a terminal): a large model takes minutes.
  std::optional<ConsoleProgress> progress;
  if (!o.quiet) progress.emplace("compile", ConsoleProgress::on_terminal());
  Progress* shown = progress ? &*progress : nullptr;
  ImportOptions io;
  io.progress = shown;
  auto model = import_onnx_file(o.model, io);
  if (!model.ok()) return report(model.status());
  if (Status s = apply_input_shapes(*model, o.input_shape, so.optimizer); !s.ok()) return report(s);
  auto budget = fit_budget(o, *model, so, shown);
  if (!budget.ok()) return report(budget.status());
  so.optimizer.progress = shown;
  // The path Session::create takes: the passes, then partitioning; each node's engine is
  // stored in the .gbm.
  auto optimized = optimize_and_partition(*model, so);
  if (!optimized.ok()) return report(optimized.status());
  const OptimizerReport* rep = &optimized->report;
  const Partition* part = &optimized->partition;

  // Weights only bf16-lowered convolutions read go into the file converted (half the bytes; the
  // same values the kernels would convert them to). Not for a CPU without bf16 arithmetic,
  // where nothing is stored in bf16 (PrecisionReport::storage_skipped).
  WeightStorageReport weights;
  if (!optimized->precision.storage_skipped) weights = store_weights_reduced(*model);

  gbm::WriteOptions wo;
  // The engines' kernels pick their code path on the running CPU (oneDNN's JIT, Highway's
  // dynamic dispatch), so the file needs nothing beyond what this binary was built for:
  // native records the build's ISA, generic records none.
  if (o.target == "native") wo.required_isa = device::build_required_isa();
  wo.optimizer_report_json = rep->to_json(/*with_timings=*/false);  // reproducible .gbm
  wo.memory = rep->memory;
  wo.progress = shown;
  if (Status s = gbm::write_file(*model, o.output, wo); !s.ok()) return report(s);
  if (progress) progress->finish();

  std::error_code ec;
  auto onnx_bytes = std::filesystem::file_size(o.model, ec);
  auto gbm_bytes = std::filesystem::file_size(o.output, ec);
  std::cout << "compiled " << o.model << " -> " << o.output << ": " << rep->nodes_before << " -> "
            << rep->nodes_after << " nodes, " << gbm_bytes << " bytes (target " << o.target << ")\n";
  std::cout << "partition: " << part->summary() << "\n";
  const PrecisionReport& prec = optimized->precision;
  std::cout << "precision: " << prec.summary() << "\n";
  for (const std::string& w : prec.warnings) std::cout << "  warning: " << w << "\n";
  if (weights.weights > 0)
    std::cout << "weights: " << weights.weights << " stored in " << dtype_name(reduced_dtype(prec.mode)) << " ("
              << weights.bytes_before << " -> " << weights.bytes_after << " bytes)\n";
  if (*budget) std::cout << (*budget)->summary();
  if (!rep->memory.made())
    std::cout << "memory plan: not made: " << rep->memory.not_made << "\n";
  else
    std::cout << "memory plan: arena " << rep->memory.planned_bytes << " bytes (naive " << rep->memory.naive_bytes
              << ", lower bound " << rep->memory.lower_bound_bytes << ")\n";
  if (!o.report_path.empty()) {
    nlohmann::json j = nlohmann::json::parse(rep->to_json());
    j["onnx_bytes"] = onnx_bytes;
    j["gbm_bytes"] = gbm_bytes;
    j["target"] = o.target;
    j["required_isa"] = wo.required_isa;
    j["partition"] = partition_json(*part);
    j["precision"] = {{"mode", precision_mode_name(prec.mode)},
                      {"float_nodes", prec.float_nodes},
                      {"lowered", prec.lowered},
                      {"kept", prec.kept},
                      {"moved_engine", prec.moved},
                      {"weights_stored_reduced", weights.weights},
                      {"weight_bytes_before", weights.bytes_before},
                      {"weight_bytes_after", weights.bytes_after},
                      {"warnings", prec.warnings}};
    if (*budget) j["accuracy_budget"] = (*budget)->to_json();
    if (Status st = write_file_atomically(o.report_path, j.dump(2) + "\n"); !st.ok()) return report(st);
  }
  return 0;
}

}  // namespace

void add_compile_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<CompileOptions>();
  auto* sub = app.add_subcommand("compile", "Compile an .onnx model into an optimized .gbm (docs/gbm.md)");
  sub->add_option("model", o->model, "The .onnx model")->required();
  sub->add_option("-o,--output", o->output, "The .gbm to write")->required();
  sub->add_option("--input-shape", o->input_shape, "Fix input shapes: \"name:1,3,224,224;name2:...\"");
  add_session_flags(sub, &o->session);
  sub->add_option("--target", o->target, "native: require this build's CPU features; generic: require none");
  sub->add_option("--report", o->report_path, "Write the optimizer report and file sizes as JSON");
  sub->add_option("--accuracy-budget", o->accuracy_budget,
                  "Keep the fewest lowered layers in fp32 for this accuracy against fp32 to hold on the calibration "
                  "set: \"cosine>=0.9999,top1>=0.995\" (also relative<=X)");
  sub->add_option("--calibration", o->calibration,
                  "The budget's samples: a folder of .npy files (one input), or of one folder of INPUT.npy per sample");
  sub->add_option("--calibration-random", o->calibration_random,
                  "The budget's samples: this many deterministic random inputs");
  sub->add_flag("--npy-allow-trailing-bytes", o->npy.allow_trailing_bytes,
                "Read .npy calibration files that have bytes after their data, ignoring them (as numpy does)");
  sub->add_flag("-q,--quiet", o->quiet, "Do not show the phases on stderr (a bar on a terminal, lines otherwise)");
  sub->callback([o, action] { *action = [o] { return compile(*o); }; });
}

}  // namespace gearbox::cli
