// gearbox: the command-line front end of the stack. The command table is tools/cli_app.cc;
// subcommands live in *_command.cc.
#include "tools/cli_app.h"

int main(int argc, char** argv) { return gearbox::cli::run_cli(argc, argv); }
