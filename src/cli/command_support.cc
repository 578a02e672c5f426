#include "cli/command_support.h"

#include <array>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "cli/grid_fields.h"
#include "deepgrid/geometry.h"
#include "deepgrid/scheme.h"

namespace deepgrid::cli {

void check(const Status& s) {
  if (!s.ok()) throw Failure{s};
}

int exit_code_for(ErrorCode code) {
  if (code == ErrorCode::kBusy) return kExitBusy;
  return code == ErrorCode::kIo || code == ErrorCode::kResource ? 1 : 2;
}

Grid open_to_read(const std::string& dir, bool verify) {
  Grid g = get(Grid::open(dir));
  if (!g.interrupted_sweep().empty()) {
    check(invalid_argument("grid " + dir + " was interrupted in an in-place " +
                           g.interrupted_sweep() +
                           " and its planes mix two time steps; finish it with 'deepgrid run " +
                           dir + " --resume --mem SIZE'"));
  }
  if (verify) check(g.enable_verification());
  return g;
}

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string join_csv(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

int field_index(const Manifest& m, const std::string& field) {
  return get(field_component(m, field));
}

std::string schemes_help() {
  std::string s;
  for (const auto& n : scheme_preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void BlockingArgs::add_to(CLI::App* cmd) {
  cmd->add_option("--bt", bt,
                  "Time steps per pass over memory (temporal blocking depth); 0: automatic")
      ->capture_default_str();
  cmd->add_option("--cache-bt", cache_bt,
                  "Stream methods: steps per pass over the cache within one pass over the disk "
                  "(two-level blocking); 0: automatic")
      ->capture_default_str();
  cmd->add_option("--band-rows", band_rows,
                  "Stream method: sweep in bands of N rows of every plane instead of whole "
                  "planes, so that a budget holding few large planes still blocks deeply; written "
                  "out of place (room for a second copy of the data files). "
                  "auto: the planner's choice; 0: whole planes; see docs/cli.md")
      ->capture_default_str();
  cmd->add_option("--tile", tile,
                  "x-y tile of the wavefront, NXxNY; for --method tiled the blocks' extents "
                  "along y and z, NYxNZ (default: automatic)");
}

void BlockingArgs::apply(int* bt_out, int64_t* tile_x, int64_t* tile_y) const {
  if (bt < 0) check(invalid_argument("--bt must be >= 1 (or 0 for automatic)"));
  if (cache_bt < 0) check(invalid_argument("--cache-bt must be >= 1 (or 0 for automatic)"));

  *bt_out = bt;
  if (tile.empty()) return;
  const Result<Shape> t = parse_shape(tile);
  if (!t.ok() || t->nz != 1) {
    check(invalid_argument("--tile '" + tile +
                           "' is not two positive extents NXxNY; write it as e.g. 256x32"));
  }
  *tile_x = t->nx;
  *tile_y = t->ny;
}

int64_t BlockingArgs::band_rows_value() const {
  if (band_rows == "auto") return kAutoBandRows;
  int64_t n = -1;
  const char* end = band_rows.data() + band_rows.size();
  const auto [last, err] = std::from_chars(band_rows.data(), end, n);
  if (err != std::errc() || last != end || n < 0) {
    check(invalid_argument("--band-rows '" + band_rows +
                           "' is not auto or a number of rows; write e.g. --band-rows 256 (0: "
                           "whole planes)"));
  }
  return n;
}

void DeviceArgs::add_to(CLI::App* cmd) {
  cmd->add_option("--device", device,
                  "Run on an accelerator through OpenCL: a number from 'deepgrid devices', gpu or "
                  "cpu (implies --method device); see docs/devices.md");
  cmd->add_option("--device-mem", device_mem,
                  "Device memory budget, e.g. 30GiB: a hard cap on what the run allocates on the "
                  "device (default: its memory less 1/16). A grid larger than it goes through "
                  "the device as a wavefront, from host memory or, when --mem holds less than two "
                  "copies, from disk (three tiers)");
  cmd->add_option("--device-overlap", overlap,
                  "auto | on | off: the wavefront's copies beside its steps (on: room for a "
                  "chunk more at each end, so thinner chunks; auto: the cost model's choice, "
                  "off on CPU devices); see docs/devices.md");
}

void DeviceArgs::apply(std::string* device_out, uint64_t* device_mem_out,
                       DeviceOverlap* overlap_out) const {
  *device_out = device;
  if (!device_mem.empty()) *device_mem_out = get(parse_size(device_mem));
  if (overlap_out != nullptr) *overlap_out = get(parse_device_overlap(overlap));
}

void SegyArgs::add_to(CLI::App* cmd) {  // (run's --spacing serves --snapshots too)
  cmd->add_option("--dt", dt,
                  "SEG-Y traces: seconds per step, the sample interval (required for SEG-Y; "
                  "written in whole microseconds, 1 to 32767)");
  cmd->add_option("--spacing", spacing,
                  "Metres per grid cell, DX or DX,DY,DZ (default 1): the coordinates in SEG-Y "
                  "trace headers are cells x spacing, and snapshots' points lie this far apart");
}

namespace {

// A number written whole as `text`, or nothing.
std::optional<double> parse_number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

// "10" (every axis) or "10,10,5" (x, y, z), as --spacing and --origin take them.
Result<std::array<double, 3>> parse_xyz(const std::string& option, const std::string& text,
                                        double fill) {
  std::array<double, 3> v{fill, fill, fill};
  if (text.empty()) return v;
  const std::vector<std::string> items = split_csv(text);
  if (items.size() != 1 && items.size() != 3) {
    return invalid_argument(option + " is '" + text + "'; give one number for every axis or " +
                            "three, x,y,z (e.g. " + option + " 10,10,5)");
  }
  for (size_t i = 0; i < 3; ++i) {
    const std::optional<double> x = parse_number(items[items.size() == 1 ? 0 : i]);
    if (!x) {
      return invalid_argument(option + " is '" + text + "'; give numbers, e.g. " + option +
                              " 10,10,5");
    }
    v[i] = *x;
  }
  return v;
}

}  // namespace

SegyOptions SegyArgs::options() const {
  SegyOptions o;
  if (!dt.empty()) {
    const auto v = parse_number(dt);
    if (!v) check(invalid_argument("--dt " + dt + " is not a number of seconds; e.g. --dt 0.001"));
    o.dt = *v;
  }
  o.spacing = get(parse_xyz("--spacing", spacing, 1));
  return o;
}

void VtkhdfArgs::add_to(CLI::App* cmd, const std::string& fields_option, const std::string& what,
                        bool with_spacing) {
  cmd->add_option(fields_option, fields, what);
  if (with_spacing) {
    cmd->add_option("--spacing", spacing,
                    "VTKHDF: distance between grid points, one number or x,y,z (default 1)");
  }
  cmd->add_option("--origin", origin,
                  "VTKHDF: coordinates of point (0,0,0), one number or x,y,z (default 0)");
  cmd->add_option("--downsample", downsample,
                  "VTKHDF: keep every K-th point along each axis, for a quick look at a huge grid");
}

Result<VtkhdfOptions> VtkhdfArgs::options(const Manifest& m) const {
  VtkhdfOptions o;
  DG_ASSIGN_OR_RETURN(o.spacing, parse_xyz("--spacing", spacing, 1));
  DG_ASSIGN_OR_RETURN(o.origin, parse_xyz("--origin", origin, 0));
  o.downsample = downsample;
  for (const std::string& f : split_csv(fields)) {
    DG_ASSIGN_OR_RETURN(const int c, field_component(m, f));
    o.components.push_back(c);
  }
  DG_RETURN_IF_ERROR(check_vtkhdf_options(m, o));
  return o;
}

}  // namespace deepgrid::cli
