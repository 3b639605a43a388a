// The session flags every command that builds a session offers (run, bench, profile, serve,
// compile), defined once here so their names, text and meaning cannot drift apart:
//   --threads N, --engines LIST, --engine NODE_OR_OPTYPE=ENGINE, --disable-pass NAME,
//   --fusion-switch FILE.json, --no-winograd, --op-path DIRS_OR_LIBS, --precision-mode MODE,
//   --keep-dtype FILE, --modify-mixlist FILE.json, --no-precision-fallback
// They fill a SessionOptions (runtime/session.h); what a flag leaves unset is filled from the
// environment by resolve_session_options when the session is created (or compile starts).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/session.h"

namespace gearbox::cli {

struct SessionFlags {
  int threads = 0;                            // --threads (0: GEARBOX_NUM_THREADS, else all cores)
  std::string engines;                        // --engines cpu.simd,cpu.ref (priority list)
  std::vector<std::string> engine_overrides;  // --engine NODE_OR_OPTYPE=ENGINE (repeatable)
  std::vector<std::string> disable_passes;    // --disable-pass NAME (repeatable)
  std::string fusion_switch;                  // --fusion-switch FILE.json
  bool no_winograd = false;                   // --no-winograd
  std::string op_path;                        // --op-path DIR:LIB.so (custom-op plugins)
  std::string precision_mode;                 // --precision-mode allow_mix_precision_bf16 (runtime/precision.h)
  std::string keep_dtype, modify_mixlist;     // --keep-dtype FILE, --modify-mixlist FILE.json
  bool no_precision_fallback = false;         // --no-precision-fallback

  // The options these flags ask for, on top of `base` (a command's own settings such as
  // optimizer.plan_memory). FUSION_SWITCH_INVALID / PASS_UNKNOWN for a bad --fusion-switch file.
  Result<SessionOptions> to_session_options(SessionOptions base = {}) const;
};

// Registers the flags above on `sub`, writing into `*flags`.
void add_session_flags(CLI::App* sub, SessionFlags* flags);

}  // namespace gearbox::cli
