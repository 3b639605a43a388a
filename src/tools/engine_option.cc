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
  if (!precision_mode.empty()) o.precision = precision_mode;
  if (!keep_dtype.empty()) o.keep_dtype = keep_dtype;
  if (!modify_mixlist.empty()) o.modify_mixlist = modify_mixlist;
  if (no_precision_fallback) o.precision_fallback = false;
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
  sub->add_option("--precision-mode", f->precision_mode,
                  "force_fp32 (default: GEARBOX_PRECISION_MODE, else this), allow_fp32_to_bf16, allow_fp32_to_fp16, "
                  "allow_mix_precision_bf16, allow_mix_precision_fp16, force_bf16, force_fp16: which nodes compute in "
                  "a reduced precision with fp32 accumulation (docs/precision.md; a .gbm keeps its compiled mode)");
  sub->add_option("--keep-dtype", f->keep_dtype,
                  "File of node names and OpType::X lines that keep their dtype under any precision mode");
  sub->add_option("--modify-mixlist", f->modify_mixlist,
                  "JSON moving op types between the mixed-precision lists: {\"black-list\": {\"to-add\": [...], "
                  "\"to-remove\": [...]}, \"white-list\": ..., \"gray-list\": ...}");
  sub->add_flag("--no-precision-fallback", f->no_precision_fallback,
                "Fail (PRECISION_ISA_MISSING) instead of computing bf16-compiled nodes in fp32 on a CPU without bf16 "
                "arithmetic");
}

}  // namespace gearbox::cli
