// The CLI's command table and the error reporting every command shares (see cli_app.h).
#include "tools/cli_app.h"

#include <iostream>
#include <mutex>
#include <sstream>

#include "device/openmp.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {
// The last error report() printed on this thread: what an in-process caller raises.
thread_local Status t_last_reported;
}  // namespace

int report(const Status& status) {
  t_last_reported = status;
  std::cerr << status.to_string_with_help() << "\n";
  return 1;
}

int run_cli(int argc, const char* const* argv) {
  gearbox::device::configure_openmp();  // before any command's first OpenMP call
  CLI::App app{"gearbox: compile, run and diagnose deep-learning models on the hardware you have"};
  app.require_subcommand(1);
  std::function<int()> action;
  add_run_command(app, &action);
  add_profile_command(app, &action);
  add_compare_command(app, &action);
  add_bench_command(app, &action);
  add_explain_command(app, &action);
  add_demo_command(app, &action);
  add_smi_command(app, &action);
  add_doctor_command(app, &action);
  add_serve_command(app, &action);
  add_compile_command(app, &action);
  add_launch_command(app, &action);
  add_plan_command(app, &action);
  add_train_command(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    Status usage = make_error(ErrorCode::USAGE, e.what());
    t_last_reported = usage;
    std::cerr << usage.to_string_with_help() << "\n";
    return 2;
  }
  return action ? action() : 2;
}

CliCapture run_cli_captured(const std::vector<std::string>& args) {
  static std::mutex streams;
  std::lock_guard<std::mutex> lock(streams);
  std::vector<const char*> argv{"gearbox"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  // Restores the streams however the command ends.
  struct Redirect {
    std::ostream& stream;
    std::streambuf* previous;
    Redirect(std::ostream& s, std::streambuf* to) : stream(s), previous(s.rdbuf(to)) {}
    ~Redirect() { stream.rdbuf(previous); }
  };
  CliCapture c;
  {
    Redirect to_out(std::cout, out.rdbuf()), to_err(std::cerr, err.rdbuf());
    t_last_reported = Status::OK();
    c.exit_code = run_cli(static_cast<int>(argv.size()), argv.data());
  }
  c.out = out.str();
  c.err = err.str();
  c.status = t_last_reported;
  return c;
}

}  // namespace gearbox::cli
