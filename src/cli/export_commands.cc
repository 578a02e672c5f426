// deepgrid export and plot: a grid's values out, as a .npy array or as a PNG of one slice.
// A distributed grid, or one under mpirun, goes to distributed_commands.h.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"
#include "deepgrid/image.h"
#include "deepgrid/npy.h"
#include "deepgrid/store.h"
#include "store/distributed_manifest.h"

namespace deepgrid::cli {
namespace {

struct ExportArgs {
  std::string dir, out, field;
  bool verify = false;
};

// The format OUT names, which export writes: .npy. The others a user may expect come from the
// Python package, which the refusal names.
Status check_export_format(const std::string& out) {
  if (out.ends_with(".npy")) return Status::Ok();
  const size_t dot = out.find_last_of("./");
  const std::string ext = dot != std::string::npos && out[dot] == '.' ? out.substr(dot) : "";
  return invalid_argument(
      "deepgrid export writes .npy files, and " + out + " is " +
      (ext.empty() ? std::string("not named so") : "named " + ext) +
      "; name it OUT.npy, or write HDF5 (.h5), zarr, dask or xarray with the Python package: "
      "deepgrid.open(DIR).to_hdf5(...), .to_zarr(...) (docs/python.md)");
}

int cmd_export(const ExportArgs& a) {
  check(check_export_format(a.out));
  if (in_mpi_job() || is_distributed_grid(a.dir)) {
    check(distributed_export(a.dir, a.out, a.verify, a.field));
    if (!prints()) return 0;
  } else {
    const Grid g = open_to_read(a.dir, a.verify);
    check(export_npy(g, a.out, field_index(g.manifest(), a.field)));
  }
  std::printf("exported %s to %s\n", a.dir.c_str(), a.out.c_str());
  return 0;
}

struct PlotArgs {
  std::string dir, slice = "z=mid", out, field;
};

int cmd_plot(const std::string& dir, const std::string& slice, const std::string& out,
             const std::string& field) {
  SliceSpec spec = get(parse_slice(slice));
  SliceImageInfo info;
  if (in_mpi_job() || is_distributed_grid(dir)) {
    info = get(distributed_plot(dir, spec, out, field));
    if (!prints()) return 0;
  } else {
    Grid g = get(Grid::open(dir));
    spec.component = field_index(g.manifest(), field);
    info = get(write_slice_png(g, spec, out));
  }
  std::printf("wrote %s: slice %s, %lldx%lld pixels, colours from %.6g (dark) to %.6g (bright)\n",
              out.c_str(), slice.c_str(), static_cast<long long>(info.width),
              static_cast<long long>(info.height), info.min, info.max);
  return 0;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* exp = app.add_subcommand("export", "Write a grid to a .npy file (streamed)");
  exp->add_option("DIR", a->dir, "Grid directory")->required();
  exp->add_option("OUT", a->out, "Output .npy, shape (nz, ny, nx)")->required();
  exp->add_flag("--verify", a->verify, "Check every plane against its recorded checksum");
  exp->add_option("--field", a->field,
                  "The field to write, of a grid of several (default: the first, the state)");
  return {exp, [a] { return cmd_export(*a); }};
}

Command add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* plot = app.add_subcommand("plot", "Draw a slice of a grid as a PNG with a colour bar");
  plot->add_option("DIR", a->dir, "Grid directory")->required();
  plot->add_option("--slice", a->slice, "AXIS=INDEX held fixed: z=mid, z=10, y=0, x=mid")
      ->capture_default_str();
  plot->add_option("-o,--output", a->out, "Output PNG file")->required();
  plot->add_option("--field", a->field, "The field to draw (default: the first, the state)");
  return {plot, [a] { return cmd_plot(a->dir, a->slice, a->out, a->field); }};
}

}  // namespace deepgrid::cli
