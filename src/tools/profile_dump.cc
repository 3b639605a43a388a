// --dump-tensors for run and profile. See profile_dump.h.
#include "tools/profile_dump.h"

#include "base/logging.h"
#include "runtime/tensor_dump.h"

namespace gearbox::cli {
namespace {

Result<std::vector<DumpPattern>> parse_all(const DumpOptions& o) {
  std::vector<DumpPattern> out;
  for (const std::string& spec : o.patterns) {
    GBX_ASSIGN_OR_RETURN(DumpPattern p, parse_dump_pattern(spec));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

void add_dump_options(CLI::App* sub, DumpOptions* o) {
  sub->add_option("--dump-tensors", o->patterns,
                  "OPTYPE_OR_NODE:post (outputs) or :pre (inputs): write the matching nodes' tensors as .npy "
                  "(repeatable; op type plain or domain-qualified, node name, or *)");
  sub->add_option("--dump-dir", o->dir, "Folder for --dump-tensors files and index.json (default ./gearbox_dump)");
  sub->add_flag("--dump-raw-layout", o->raw_layout,
                "Write --dump-tensors values in the engine's internal layout (e.g. NCHW16c [1,4,56,56,16]) "
                "instead of the model's layout and value names");
}

Status check_dump(const DumpOptions& o, const Session& session, const std::string& model_path) {
  if (!o.enabled()) return Status::OK();
  GBX_ASSIGN_OR_RETURN(std::vector<DumpPattern> patterns, parse_all(o));
  GBX_ASSIGN_OR_RETURN(std::vector<std::string> warnings, check_dump_patterns(session, model_path, patterns));
  for (const std::string& w : warnings) GBX_LOG_WARN("EXEC", "{}", w);
  return Status::OK();
}

Result<size_t> run_dump(const DumpOptions& o, const Session& session, const std::map<std::string, Tensor>& feeds) {
  GBX_ASSIGN_OR_RETURN(std::vector<DumpPattern> patterns, parse_all(o));
  GBX_ASSIGN_OR_RETURN(auto dumper, TensorDumper::create(std::move(patterns), o.dir, &session.optimizer_report(), o.raw_layout));
  GBX_RETURN_IF_ERROR(session.run(feeds, nullptr, dumper.get()).status());
  GBX_RETURN_IF_ERROR(dumper->write_index());
  return dumper->files_written();
}

}  // namespace gearbox::cli
