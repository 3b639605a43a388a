// gearbox: the command-line front end of the stack. Subcommands live in *_command.cc.
#include <iostream>

#include "device/openmp.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  gearbox::device::configure_openmp();  // before any command's first OpenMP call
  CLI::App app{"gearbox: compile, run and diagnose deep-learning models on the hardware you have"};
  app.require_subcommand(1);
  std::function<int()> action;
  gearbox::cli::add_run_command(app, &action);
  gearbox::cli::add_profile_command(app, &action);
  gearbox::cli::add_bench_command(app, &action);
  gearbox::cli::add_explain_command(app, &action);
  gearbox::cli::add_demo_command(app, &action);
  gearbox::cli::add_smi_command(app, &action);
  gearbox::cli::add_doctor_command(app, &action);
  gearbox::cli::add_serve_command(app, &action);
  gearbox::cli::add_compile_command(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << gearbox::make_error(gearbox::ErrorCode::USAGE, e.what()).to_string_with_help() << "\n";
    return 2;
  }
  return action ? action() : 2;
}

namespace gearbox::cli {
int report(const Status& status) {
  std::cerr << status.to_string_with_help() << "\n";
  return 1;
}
}  // namespace gearbox::cli
