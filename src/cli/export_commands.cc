// deepgrid export and plot: a grid's values out, as a .npy array, a VTKHDF file (ParaView) or
// a PNG of one slice.
// A distributed grid, or one under mpirun, goes to distributed_commands.h.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"
#include "cli/grid_fields.h"
#include "deepgrid/image.h"
#include "deepgrid/npy.h"
#include "deepgrid/store.h"
#include "deepgrid/vtkhdf.h"
#include "store/distributed_manifest.h"

namespace deepgrid::cli {
namespace {

struct ExportArgs {
  std::string dir, out;
  VtkhdfArgs vtkhdf;  // (its fields: --field)
  bool verify = false;
};

enum class ExportFormat { kNpy, kVtkhdf };

// The format OUT's name asks for. HDF5 names (.h5, .hdf5) get the VTKHDF layout: h5py and
// other HDF5 tools read it as they read any HDF5 file, and ParaView opens it as VTKHDF.
Result<ExportFormat> export_format(const std::string& out) {
  if (out.ends_with(".npy")) return ExportFormat::kNpy;
  for (const char* ext : {".vtkhdf", ".hdf", ".h5", ".hdf5"}) {
    if (out.ends_with(ext)) return ExportFormat::kVtkhdf;
  }
  const size_t dot = out.find_last_of("./");
  const std::string ext = dot != std::string::npos && out[dot] == '.' ? out.substr(dot) : "";
  return invalid_argument(
      "deepgrid export writes .npy, .vtkhdf (ParaView, VisIt, PyVista) and .h5/.hdf5 files, "
      "and " +
      out + " is " + (ext.empty() ? std::string("not named so") : "named " + ext) +
      "; name it so, or write zarr, dask or xarray with the Python package: "
      "deepgrid.open(DIR).to_zarr(...) (docs/python.md)");
}

// The writer of OUT for a grid whose planes come whole (every component). It returns what is
// wrong rather than throwing: under mpirun the other ranks wait on its outcome.
GridWriter writer_of(const ExportArgs& a, ExportFormat format) {
  if (format == ExportFormat::kNpy) {
    return [&a](const Manifest& m, const io::PlaneSource& planes) -> Status {
      DG_ASSIGN_OR_RETURN(const int c, field_component(m, a.vtkhdf.fields));
      return export_npy_planes(m.shape, m.dtype, io::component_of(planes, m, c), a.out);
    };
  }
  return [&a](const Manifest& m, const io::PlaneSource& planes) -> Status {
    DG_ASSIGN_OR_RETURN(const VtkhdfOptions o, a.vtkhdf.options(m));
    return write_vtkhdf(m, planes, m.step, a.out, o);
  };
}

int cmd_export(const ExportArgs& a) {
  const ExportFormat format = get(export_format(a.out));
  if (format == ExportFormat::kNpy && a.vtkhdf.given()) {
    check(
        invalid_argument("--spacing, --origin and --downsample are for .vtkhdf and .h5 "
                         "output; a .npy holds the grid's values only"));
  }
  const GridWriter write = writer_of(a, format);
  if (in_mpi_job() || is_distributed_grid(a.dir)) {
    check(distributed_export(a.dir, a.verify, write));
    if (!prints()) return 0;
  } else {
    const Grid g = open_to_read(a.dir, a.verify);
    check(write(g.manifest(), io::planes_of(g)));
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
  // How the cells were drawn: "37x23 cells of 13x13 pixels", "2100x1200 cells, 3x3 to a pixel".
  std::string cells = std::to_string(info.cells_x) + "x" + std::to_string(info.cells_y) + " cells";
  const int64_t k = std::max(info.scale, info.block);
  if (k > 1) {
    cells += (info.block > 1 ? ", " : " of ") + std::to_string(k) + "x" + std::to_string(k);
    cells += info.block > 1 ? " to a pixel (averaged)" : " pixels";
  }
  std::printf("wrote %s (%lldx%lld pixels): %s; %s; colours from %.6g (dark) to %.6g (bright)\n",
              out.c_str(), static_cast<long long>(info.width), static_cast<long long>(info.height),
              info.title.c_str(), cells.c_str(), info.min, info.max);
  return 0;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* exp = app.add_subcommand(
      "export",
      "Write a grid to .npy, or to .vtkhdf/.h5 for ParaView, VisIt and PyVista (streamed)");
  exp->add_option("DIR", a->dir, "Grid directory")->required();
  exp->add_option("OUT", a->out,
                  "Output file; its extension picks the format: .npy (one field, shape (nz, ny, "
                  "nx)), .vtkhdf or .h5/.hdf5 (VTKHDF ImageData, every field a named array)")
      ->required();
  exp->add_flag("--verify", a->verify, "Check every plane against its recorded checksum");
  a->vtkhdf.add_to(exp, "--field",
                   "The field to write (.npy: one, default the first; .vtkhdf: a "
                   "comma-separated list, default every field)");
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
