// `--engine NODE_OR_OPTYPE=ENGINE`, the partitioner's override (runtime/partitioner.h), shared
// by the commands that load a model (compile, run, bench, profile) so its text is one.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace gearbox::cli {

// Registers the repeatable option; the specs are checked when the model is partitioned
// (USAGE for a malformed one, an unknown engine, or a target that matches no node).
void add_engine_option(CLI::App* sub, std::vector<std::string>* overrides);

}  // namespace gearbox::cli
