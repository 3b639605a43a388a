// Loading custom-op plugins (include/gearbox/plugin.h) from the op path: the folders and
// files of SessionOptions::op_path (--op-path, gbx_context_set_op_path) and GEARBOX_OP_PATH.
//
// A library is dlopen'ed once per process (by its canonical path) and stays loaded: its ops
// are registered (kernels/plugin_ops.h) and every later session whose op path holds it reuses
// them. resolve_session_options calls load_op_path; the errors a plugin author meets are each
// their own code (PLUGIN_* in errors.def) and name the library: a library that cannot be
// opened, without the entry point, for another ABI version, with a malformed descriptor,
// whose init fails, or with an op another library already registered. A failed library is
// not kept: a later session tries it again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"
#include "kernels/plugin_ops.h"

namespace gearbox {

// One op path entry and where it came from ("GEARBOX_OP_PATH", "--op-path"), for messages.
struct OpPathEntry {
  std::string path;
  std::string source;
};

// Loads every plugin library the entries hold (a folder: its *.so files, in name order; a
// file: itself) and returns their engines ("plugin.<name>"), in path order without repeats.
// USAGE for an entry that does not exist or cannot be read; the first library's
// error otherwise (later libraries are not tried).
Result<std::vector<std::string>> load_op_path(const std::vector<OpPathEntry>& entries);

// The op path entries load_op_path was given in this process, in order, without repeats.
std::vector<std::string> searched_op_path();

// For an OP_UNSUPPORTED message: "; op path searched: ...; plugins loaded: name 1.0 (ops), ..."
// or, when nothing was searched, how to add an op from a plugin.
std::string op_path_note();

// The plugins `g`'s nodes (subgraphs included) were partitioned onto: name -> version, for a
// .gbm to record (Model::plugin_versions).
std::map<std::string, std::string> plugin_versions_used(const Graph& g);

}  // namespace gearbox
