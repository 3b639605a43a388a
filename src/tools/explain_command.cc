// `gearbox explain CODE`: prints a catalogue entry. `--list` prints every code and
// `--markdown` prints docs/errors.md (the build generates that file with it).
#include <iostream>

#include "tools/commands.h"

namespace gearbox::cli {

const ErrorInfo* find_error_spec(std::string_view spec) {
  // A name first: stripping the "E" prefix from ENGINE_UNKNOWN would leave no name.
  if (const ErrorInfo* e = find_error(spec)) return e;
  for (std::string_view prefix : {"GBX-E", "GBX-", "E"})
    if (spec.substr(0, prefix.size()) == prefix) spec.remove_prefix(prefix.size());
  if (spec.empty() || spec.size() >= 9 || spec.find_first_not_of("0123456789") != std::string_view::npos) return nullptr;
  return find_error(std::stoi(std::string(spec)));
}

namespace {

struct ExplainOptions {
  std::string code;
  bool list = false;
  bool markdown = false;
};

void print_markdown() {
  size_t n = 0;
  const ErrorInfo* all = all_errors(&n);
  std::cout << "# gearbox error codes\n\n"
               "Generated from `src/base/errors.def` by the build (`gearbox explain --markdown`); do not edit.\n"
               "Every error gearbox reports reads `GBX-E<code> <NAME>: <message>`; "
               "`gearbox explain <code>` prints the entry.\n\n"
               "| code | name | meaning | likely cause | fix |\n|---|---|---|---|---|\n";
  for (size_t i = 0; i < n; ++i)
    std::cout << "| " << all[i].code << " | `" << all[i].name << "` | " << all[i].summary << " | " << all[i].cause
              << " | " << all[i].fix << " |\n";
}

int explain(const ExplainOptions& o) {
  if (o.markdown) {
    print_markdown();
    return 0;
  }
  if (o.list || o.code.empty()) {
    size_t n = 0;
    const ErrorInfo* all = all_errors(&n);
    for (size_t i = 0; i < n; ++i) std::cout << "GBX-E" << all[i].code << "  " << all[i].name << "  " << all[i].summary << "\n";
    return 0;
  }
  const ErrorInfo* e = find_error_spec(o.code);
  if (!e)
    return report(make_error(ErrorCode::UNKNOWN_ERROR_CODE, "'", o.code, "' is not a gearbox error code or name"));
  std::cout << "GBX-E" << e->code << " " << e->name << "\n  " << e->summary << "\n  likely cause: " << e->cause
            << "\n  fix: " << e->fix << "\n";
  return 0;
}

}  // namespace

void add_explain_command(CLI::App& app, std::function<int()>* action) {
  auto opts = std::make_shared<ExplainOptions>();
  CLI::App* sub = app.add_subcommand("explain", "Explain an error code: what it means, its likely cause and the fix");
  sub->add_option("code", opts->code, "An error code (3001, E3001, GBX-E3001) or name (OP_UNSUPPORTED)");
  sub->add_flag("--list", opts->list, "List every error code");
  sub->add_flag("--markdown", opts->markdown, "Print the catalogue as Markdown (docs/errors.md)");
  sub->callback([opts, action] { *action = [opts] { return explain(*opts); }; });
}

}  // namespace gearbox::cli
