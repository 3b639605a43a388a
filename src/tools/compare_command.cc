// `gearbox compare MODEL --precision-mode MODE`: the precision debugger. Runs the model in
// force_fp32 and in MODE side by side on the same inputs and prints, per node in execution
// order, the error of its outputs against the fp32 twin, marking the first node where the
// error jumps (runtime/precision_compare.h); `--json` prints the same as one JSON object.
#include <cstdlib>
#include <iostream>

#include "graph/gbm/gbm_reader.h"
#include "runtime/precision.h"
#include "runtime/precision_compare.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/model_inputs.h"

namespace gearbox::cli {
namespace {

struct CompareOptions {
  std::string model;
  InputFlags input;  // --input, --random-inputs, --npy-allow-trailing-bytes, --strict-input-dtype
  size_t top = 40;
  bool json = false;
  SessionFlags session;  // --precision-mode, --keep-dtype, --modify-mixlist, --threads, ...
};

int compare(const CompareOptions& o) {
  if (gbm::is_gbm_file(o.model))
    return report(make_error(ErrorCode::USAGE, o.model,
                             " is a compiled .gbm, which holds only the precision it was compiled with: compare the "
                             ".onnx it was compiled from (gearbox compare MODEL.onnx --precision-mode MODE)"));
  auto reduced_options = o.session.to_session_options();
  if (!reduced_options.ok()) return report(reduced_options.status());
  // The flag, else GEARBOX_PRECISION_MODE (as every session reads it).
  const char* env = std::getenv("GEARBOX_PRECISION_MODE");
  auto mode = parse_precision_mode(!o.session.precision_mode.empty() ? o.session.precision_mode : env ? env : "");
  if (!mode.ok()) return report(mode.status());
  if (*mode == PrecisionMode::ForceFp32)
    return report(make_error(ErrorCode::USAGE,
                             "gearbox compare needs a reduced --precision-mode to compare with force_fp32 (e.g. "
                             "--precision-mode allow_mix_precision_bf16)"));
  SessionOptions fp32_options = *reduced_options;
  fp32_options.precision = "force_fp32";
  fp32_options.keep_dtype.clear();
  fp32_options.modify_mixlist.clear();
  auto reduced = Session::load(o.model, *reduced_options);
  if (!reduced.ok()) return report(reduced.status());
  auto fp32 = Session::load(o.model, fp32_options);
  if (!fp32.ok()) return report(fp32.status());
  auto feeds = load_inputs(**reduced, o.input);
  if (!feeds.ok()) return report(feeds.status());
  auto c = compare_precision(**fp32, **reduced, *feeds);
  if (!c.ok()) return report(c.status());
  if (o.json) {
    nlohmann::json j = c->to_json();
    j["model"] = o.model;
    j["precision"] = (*reduced)->precision_report().summary();
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << "model: " << o.model << "\n" << (*reduced)->precision_report().summary() << "\n" << c->table(o.top);
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Run a model in fp32 and in a reduced --precision-mode side by side: each node's error, the first jump");
  sub->add_option("model", o->model, "The model (.onnx)")->required();
  add_input_flags(sub, &o->input);
  sub->add_option("--top", o->top, "Table rows besides the jumps (default 40; the jumps are always shown)");
  sub->add_flag("--json", o->json, "Print one JSON object on stdout (logs stay on stderr)");
  add_session_flags(sub, &o->session);
  sub->callback([o, action] { *action = [o] { return compare(*o); }; });
}

}  // namespace gearbox::cli
