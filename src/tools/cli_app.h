// The gearbox CLI as a function: the executable's main() and the Python module's in-process
// calls (gearbox.compile, smi, doctor: src/python/) run the same commands with the same flags,
// so a flag added to a command reaches both.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gearbox::cli {

// Parses argv (argv[0] is the program name) and runs the chosen command; returns its exit code
// (0 success, 1 a gearbox error, 2 a usage error).
int run_cli(int argc, const char* const* argv);

// What an in-process run printed and returned.
struct CliCapture {
  int exit_code = 0;
  std::string out;  // what the command wrote to std::cout
  std::string err;  // what it wrote to std::cerr (its error report), not logs or progress
  Status status;    // the last error the command reported (OK when none)
};

// run_cli({"gearbox", args...}) with std::cout and std::cerr captured. The streams are
// process-wide, so captured calls are serialized by a lock; what other threads write to
// std::cout meanwhile is captured too. Logs (spdlog) and progress lines go to stderr as usual.
CliCapture run_cli_captured(const std::vector<std::string>& args);

}  // namespace gearbox::cli
