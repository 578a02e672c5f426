// The deepgrid command line: a thin front end over the library. Errors become one line on
// stderr and exit code 2 (bad input), 1 (a failure while working) or 3 (the grid is in use by
// another process); fsck exits 4 when it finds damage. The commands live in *_commands.cc
// (commands.h); this file parses the arguments and runs the one given.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"

namespace deepgrid::cli {
namespace {

int run_cli(int argc, char** argv) {
  CLI::App app{
      "deepgrid: advance stencil computations (heat diffusion, waves, ...) on 3D grids stored on "
      "SSDs.\nExample:\n  deepgrid create g --shape 256x256x256 --init gaussian\n"
      "  deepgrid run g --stencil 7pt --steps 100\n  deepgrid plot g --slice z=mid -o g.png"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepgrid 0.1.0");

  const std::vector<Command> commands = {
      add_create_command(app),  add_info_command(app),     add_run_command(app),
      add_plan_command(app),    add_checksum_command(app), add_fsck_command(app),
      add_import_command(app),  add_split_command(app),    add_relocate_command(app),
      add_upgrade_command(app), add_export_command(app),   add_plot_command(app),
      add_traces_command(app),  add_bench_command(app),    add_devices_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return prints() ? app.exit(e) : 0;
  } catch (const CLI::CallForAllHelp& e) {
    return prints() ? app.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return prints() ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    if (!prints()) return 2;  // every rank parses the same arguments; rank 0 says it
    std::fprintf(stderr, "deepgrid: error: %s; see 'deepgrid %s--help'\n", e.what(),
                 app.get_subcommands().empty()
                     ? ""
                     : (app.get_subcommands().front()->get_name() + " ").c_str());
    return 2;
  }
  for (const Command& command : commands) {
    if (*command.app) return command.run();
  }
  return 2;
}

}  // namespace
}  // namespace deepgrid::cli

int main(int argc, char** argv) {
  try {
    // Under mpirun every rank runs the same command; errors are agreed between the ranks
    // (src/mpi/comm.h), so rank 0 alone prints them and every rank exits with the same code.
    deepgrid::cli::check(deepgrid::cli::start_mpi_if_launched(&argc, &argv));
    return deepgrid::cli::run_cli(argc, argv);
  } catch (const deepgrid::cli::Failure& f) {
    if (deepgrid::cli::prints()) {
      std::fprintf(stderr, "deepgrid: error: %s\n", f.status.message().c_str());
    }
    return deepgrid::cli::exit_code_for(f.status.code());
  }
}
