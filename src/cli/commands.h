// The subcommands of the command line. Each add_*_command declares its subcommand, options and
// help on the app and returns how to run it once the arguments are parsed; run_cli (main.cc)
// adds them in the order 'deepgrid --help' lists them. Errors leave a command as a Failure
// (command_support.h).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace deepgrid::cli {

struct Command {
  CLI::App* app;             // the subcommand: true after parsing when it was given
  std::function<int()> run;  // runs it with the options parsed; returns the exit code
};

// grid_commands.cc: making a grid and describing one.
Command add_create_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_import_command(CLI::App& app);
Command add_split_command(CLI::App& app);
Command add_relocate_command(CLI::App& app);
Command add_upgrade_command(CLI::App& app);
// run_commands.cc: advancing a grid, and the plan of it.
Command add_run_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
// integrity_commands.cc: what the values are, and whether they are intact.
Command add_checksum_command(CLI::App& app);
Command add_fsck_command(CLI::App& app);
// export_commands.cc: the values out of a grid, as an array or a picture.
Command add_export_command(CLI::App& app);
Command add_plot_command(CLI::App& app);
// traces_command.cc: receivers' traces converted to SEG-Y.
Command add_traces_command(CLI::App& app);
// bench_command.cc: measuring the engines and this machine.
Command add_bench_command(CLI::App& app);
// devices_command.cc: the accelerators deepgrid can run on.
Command add_devices_command(CLI::App& app);

}  // namespace deepgrid::cli
