// deepgrid traces: a receivers' traces file (.npy, as run --traces writes it) converted to
// SEG-Y for seismic tools, with the probes file that placed the receivers.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "deepgrid/probes.h"
#include "deepgrid/traces_file.h"

namespace deepgrid::cli {
namespace {

struct TracesArgs {
  std::string in, out, probes;
  SegyArgs segy;
};

int cmd_traces(const TracesArgs& a) {
  if (get(traces_format(a.in)) != TracesFormat::kNpy) {
    check(
        invalid_argument("traces reads a .npy traces file (what run --traces OUT.npy "
                         "writes); " +
                         a.in + " is not one"));
  }
  const Probes probes = get(read_probes(a.probes));
  const SegyOptions options = a.segy.options();
  // Everything that can be checked before reading the values, so that bad input changes nothing.
  const NpyHeader h = get(read_traces_header(a.in));
  check(check_segy(options, h.shape.ny, probes, "--dt"));
  check(check_output_file(a.out, a.out));
  check(write_traces_segy(a.in, probes, a.out, options));
  std::printf("wrote %s: %lld traces of %lld samples, %s s apart\n", a.out.c_str(),
              static_cast<long long>(probes.receivers.size()), static_cast<long long>(h.shape.ny),
              a.segy.dt.c_str());
  return 0;
}

}  // namespace

Command add_traces_command(CLI::App& app) {
  auto a = std::make_shared<TracesArgs>();
  auto* cmd = app.add_subcommand(
      "traces",
      "Convert receivers' traces (IN.npy, as 'run --traces' writes them) to SEG-Y rev 1 for "
      "seismic tools: one trace per receiver, coordinates from the probes file");
  cmd->add_option("IN", a->in,
                  "Traces file: .npy of float64, one row per step, one column per "
                  "receiver")
      ->required();
  cmd->add_option("OUT", a->out, "SEG-Y file to write: OUT.sgy or OUT.segy")->required();
  cmd->add_option("--probes", a->probes,
                  "The probes file of the run that recorded IN: its receivers, in IN's column "
                  "order, and sources give the trace headers' coordinates")
      ->required();
  a->segy.add_to(cmd);
  return {cmd, [a] { return cmd_traces(*a); }};
}

}  // namespace deepgrid::cli
