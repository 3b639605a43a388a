// `gearbox compile MODEL.onnx -o OUT.gbm`: imports and optimizes a model once and writes the
// compiled model (.gbm, docs/gbm.md) that `gearbox run` and Session load without re-optimizing.
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "device/device.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/onnx_importer.h"
#include "graph/optimizer.h"
#include "runtime/partitioner.h"
#include "runtime/session.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/progress_display.h"

namespace gearbox::cli {
namespace {

struct CompileOptions {
  std::string model;
  std::string output;
  std::string input_shape;                  // "name:1,3,224,224;name2:..."
  std::vector<std::string> disable_passes;  // --disable-pass NAME (repeatable)
  std::string fusion_switch;                // --fusion-switch FILE.json
  std::string target = "native";
  std::string report_path;
  std::vector<std::string> engines;         // --engine NODE_OR_OPTYPE=ENGINE (repeatable)
  bool quiet = false;                       // --quiet: no progress on stderr
};

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
  OptimizerOptions opts;
  opts.plan_memory = true;  // stored in the .gbm and reported
  opts.disabled_passes = o.disable_passes;
  if (!o.fusion_switch.empty()) {
    auto sw = read_fusion_switch_file(o.fusion_switch);
    if (!sw.ok()) return report(sw.status());
    opts.switches = std::move(sw).value();
  }
  // Syntax first, before paying for the import.
  auto overrides = parse_engine_overrides(o.engines);
  if (!overrides.ok()) return report(overrides.status());
  // Phases on stderr as they pass (a bar on a terminal): a large model takes minutes.
  std::optional<ConsoleProgress> progress;
  if (!o.quiet) progress.emplace("compile", ConsoleProgress::on_terminal());
  Progress* shown = progress ? &*progress : nullptr;
  ImportOptions io;
  io.progress = shown;
  auto model = import_onnx_file(o.model, io);
  if (!model.ok()) return report(model.status());
  if (Status s = apply_input_shapes(*model, o.input_shape, opts); !s.ok()) return report(s);
  opts.progress = shown;
  auto rep = optimize(*model, opts);
  if (!rep.ok()) return report(rep.status());
  // Engines are chosen as a session would (SessionOptions::engine, else GEARBOX_ENGINES, else
  // the default list) and stored per node in the .gbm.
  progress_begin(shown, "partition");
  auto part = partition(*model, split_list(resolve_engines("")), *overrides);
  if (!part.ok()) return report(part.status());

  gbm::WriteOptions wo;
  // The engines' kernels pick their code path on the running CPU (oneDNN's JIT, Highway's
  // dynamic dispatch), so the file needs nothing beyond what this binary was built for:
  // native records the build's ISA, generic records none.
  if (o.target == "native") wo.required_isa = device::build_required_isa();
  wo.optimizer_report_json = rep->to_json();
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
    std::ofstream f(o.report_path);
    f << j.dump(2) << "\n";
    if (!f) return report(make_error(ErrorCode::FILE_WRITE_FAILED, "cannot write the report '", o.report_path, "'"));
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
  sub->add_option("--disable-pass", o->disable_passes, "Turn a graph pass off (repeatable; see docs/graph_engine.md)");
  sub->add_option("--fusion-switch", o->fusion_switch, "JSON file of graph pass name -> \"on\" | \"off\"");
  add_engine_option(sub, &o->engines);
  sub->add_option("--target", o->target, "native: require this build's CPU features; generic: require none");
  sub->add_option("--report", o->report_path, "Write the optimizer report and file sizes as JSON");
  sub->add_flag("-q,--quiet", o->quiet, "Do not show the phases on stderr (a bar on a terminal, lines otherwise)");
  sub->callback([o, action] { *action = [o] { return compile(*o); }; });
}

}  // namespace gearbox::cli
