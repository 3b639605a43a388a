// The shared session flags (tools/engine_option.h).
#include "tools/engine_option.h"

namespace gearbox::cli {

Result<SessionOptions> SessionFlags::to_session_options(SessionOptions o) const {
  if (threads < 0) return make_error(ErrorCode::USAGE, "--threads must be >= 1 (or 0 for the default), not ", threads);
  o.threads = threads;
  if (!engines.empty()) o.engine = engines;
  o.engine_overrides = engine_overrides;
  o.optimizer.disabled_passes.insert(o.optimizer.disabled_passes.end(), disable_passes.begin(), disable_passes.end());
  if (!fusion_switch.empty()) {
    GBX_ASSIGN_OR_RETURN(o.optimizer.switches, read_fusion_switch_file(fusion_switch));
  }
  if (no_winograd) o.conv_winograd = 0;
  if (!op_path.empty()) o.op_path = op_path;
  return o;
}

void add_session_flags(CLI::App* sub, SessionFlags* f) {
  sub->add_option("--threads", f->threads, "Threads per run (default: GEARBOX_NUM_THREADS, else all cores)");
  sub->add_option("--engines", f->engines,
                  "Engine priority list, e.g. cpu.simd,cpu.dnnl,cpu.ref (default: GEARBOX_ENGINES, else that list); "
                  "an unknown name is an error");
  sub->add_option("--engine", f->engine_overrides,
                  "NODE_OR_OPTYPE=ENGINE: run that node, or every node of that op type, on ENGINE "
                  "(cpu.dnnl, cpu.simd, cpu.ref; repeatable; a node name beats an op type)");
  sub->add_option("--disable-pass", f->disable_passes, "Turn a graph pass off (repeatable; see docs/graph_engine.md)");
  sub->add_option("--fusion-switch", f->fusion_switch, "JSON file of graph pass name -> \"on\" | \"off\"");
  sub->add_flag("--no-winograd", f->no_winograd,
                "Run every oneDNN convolution with the direct algorithm (default: GEARBOX_CONV_WINOGRAD, else Winograd "
                "where it pays)");
  sub->add_option("--op-path", f->op_path,
                  "Custom-op plugins to load: a colon-separated list of folders (every .so in them) and plugin "
                  "libraries, searched before GEARBOX_OP_PATH (docs/custom_ops.md)");
}

}  // namespace gearbox::cli
