// The gearbox CLI's subcommands. Each registers its options on a CLI11 app and returns
// the process exit code: 0 on success, 1 on a gearbox error (printed as
// "GBX-E<code> <NAME>: <message>" on stderr, with the catalogue's cause and fix), 2 on a
// usage error.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string_view>

#include "base/status.h"

namespace gearbox::cli {

// Registers a subcommand; `*action` is set to the function to run when it is chosen.
void add_run_command(CLI::App& app, std::function<int()>* action);
void add_explain_command(CLI::App& app, std::function<int()>* action);
void add_demo_command(CLI::App& app, std::function<int()>* action);
void add_smi_command(CLI::App& app, std::function<int()>* action);
void add_doctor_command(CLI::App& app, std::function<int()>* action);
void add_serve_command(CLI::App& app, std::function<int()>* action);
void add_compile_command(CLI::App& app, std::function<int()>* action);
void add_profile_command(CLI::App& app, std::function<int()>* action);
void add_bench_command(CLI::App& app, std::function<int()>* action);
void add_compare_command(CLI::App& app, std::function<int()>* action);
void add_launch_command(CLI::App& app, std::function<int()>* action);
void add_plan_command(CLI::App& app, std::function<int()>* action);
void add_train_command(CLI::App& app, std::function<int()>* action);

// `gearbox doctor --ops`: the operators the kernel registry runs, as Markdown (docs/ops.md).
int print_ops_markdown();

// Prints the error (one-line form, then cause and fix) to stderr and returns 1.
int report(const Status& status);

// A catalogue entry as a user writes it: a number (3001), a printed code (E3001, GBX-E3001) or
// a name (OP_UNSUPPORTED); nullptr when there is none. `gearbox explain` and gearbox.explain.
const ErrorInfo* find_error_spec(std::string_view spec);

}  // namespace gearbox::cli
