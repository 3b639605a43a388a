// `gearbox explain CODE`: prints a catalogue entry. `--list` prints every code and
// `--markdown` prints docs/errors.md (the build generates that file with it).
#include <iostream>

#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct ExplainOptions {
  std::string code;
  bool list = false;
  bool markdown = false;
};

const ErrorInfo* lookup(std::string code) {
  for (const char* prefix : {"GBX-E", "GBX-", "E"})
    if (code.rfind(prefix, 0) == 0) code = code.substr(std::string(prefix).size());
  if (!code.empty() && code.find_first_not_of("0123456789") == std::string::npos && code.size() < 9)
    return find_error(std::stoi(code));
  return find_error(code);
}

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
  const ErrorInfo* e = lookup(o.code);
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
