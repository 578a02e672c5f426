// What the commands of the command line share: library errors on their way out (thrown as a
// Failure, which main() turns into one line on stderr and an exit code), grids opened to read,
// comma-separated lists, --field, the blocking options of run, plan and bench, the VTKHDF
// options of export and run --snapshots, and the SEG-Y options of run and traces.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deepgrid/run_options.h"
#include "deepgrid/status.h"
#include "deepgrid/store.h"
#include "deepgrid/traces_file.h"
#include "deepgrid/vtkhdf.h"

namespace deepgrid::cli {

// A library error on its way out of the CLI.
struct Failure {
  Status status;
};

template <typename T>
T get(Result<T> r) {
  if (!r.ok()) throw Failure{r.status()};
  return std::move(r).value();
}
void check(const Status& s);

// Exit codes besides 0, 1 (a failure while working) and 2 (bad input).
inline constexpr int kExitBusy = 3;
inline constexpr int kExitDamaged = 4;

int exit_code_for(ErrorCode code);

// Opens a grid to read, checking every plane read against its checksum when asked to.
// A grid whose in-place sweep was interrupted mixes two time steps: its values mean nothing
// until the sweep is finished.
Grid open_to_read(const std::string& dir, bool verify);

std::vector<std::string> split_csv(const std::string& s);
std::string join_csv(const std::vector<std::string>& items);

int field_index(const Manifest& m, const std::string& field);

// The scheme presets, comma-separated, for the help of --scheme.
std::string schemes_help();

// --bt, --cache-bt and --tile, shared by run, plan and bench.
struct BlockingArgs {
  int bt = 0, cache_bt = 0;
  std::string tile, band_rows = "auto";

  void add_to(CLI::App* cmd);
  void apply(int* bt_out, int64_t* tile_x, int64_t* tile_y) const;
  // --band-rows: kAutoBandRows, 0 (whole planes) or the rows of a band.
  int64_t band_rows_value() const;
};

// --device and --device-mem, shared by run, plan and bench (docs/devices.md).
struct DeviceArgs {
  std::string device, device_mem, overlap = "auto";

  void add_to(CLI::App* cmd);
  void apply(std::string* device_out, uint64_t* device_mem_out,
             DeviceOverlap* overlap_out = nullptr) const;
};

// --fields, --spacing, --origin and --downsample of VTKHDF output (export, run --snapshots).
struct VtkhdfArgs {
  std::string fields, spacing, origin;
  int64_t downsample = 1;

  // `fields_option`: the option naming the fields (export: --field, run: --fields).
  // `spacing`: whether to add --spacing too (run shares SegyArgs' --spacing).
  void add_to(CLI::App* cmd, const std::string& fields_option, const std::string& what,
              bool spacing = true);
  bool given() const { return !spacing.empty() || !origin.empty() || downsample != 1; }
  // The options for a grid `m` describes, or what is wrong with them.
  Result<VtkhdfOptions> options(const Manifest& m) const;
};

// --dt and --spacing: what a SEG-Y traces file says besides the samples (run, traces).
struct SegyArgs {
  std::string dt, spacing;

  void add_to(CLI::App* cmd);
  bool given() const { return !dt.empty() || !spacing.empty(); }
  // The options as given (dt 0 when not given: check_segy asks for it).
  SegyOptions options() const;
};

}  // namespace deepgrid::cli
