// Receivers' traces (probes.h) on disk: a .npy file of float64, one row per step, one column per
// receiver, saved by a run as it goes so that a stopped run keeps what it recorded; and SEG-Y
// (rev 1) files written from such values for seismic tools.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "deepgrid/npy.h"
#include "deepgrid/probes.h"
#include "deepgrid/status.h"

namespace deepgrid {

// Saves traces as a .npy file of float64, shape (steps, receivers). The first time to a path
// it writes the whole file atomically (rows outside the window NaN); after that only the held
// rows that changed, in place, and syncs the file unless `sync` is false (a run saves after
// every pass: rewriting every step's row each time made a 4000-step run with 2048 receivers
// take 2 minutes instead of 1 second). A row cut short by a crash holds old and new values,
// never torn ones: each value is 8-byte aligned.
Status write_traces_npy(Traces& traces, const std::string& path, bool sync = true);
// The header of a traces file, checked: float64 of 2 dimensions (steps: shape.ny,
// receivers: shape.nx).
Result<NpyHeader> read_traces_header(const std::string& path);
// Reads such a file back whole (every row held).
Result<Traces> read_traces_npy(const std::string& path);

// Fills the held rows with the values a stopped run saved in `saved_path`, which later saves
// then update in place; a missing file, or one of another shape, is ignored (the rows stay as
// they are, and the next save writes the file whole).
void load_held_rows(Traces* traces, const std::string& saved_path);

// The formats of a traces file, chosen by its name's extension (case aside): .npy, or SEG-Y
// (.sgy, .segy). kInvalidArgument for any other name, listing the formats.
enum class TracesFormat { kNpy, kSegy };
Result<TracesFormat> traces_format(std::string_view path);
// The .npy file a run records into for traces going to `path`: `path` itself for .npy; for a
// SEG-Y file `path` + ".npy", kept beside it (a resumed run goes on filling it; the SEG-Y file
// is written from it when the run finishes).
std::string traces_npy_path(const std::string& path);

// What a SEG-Y file of traces says besides the samples.
struct SegyOptions {
  // Seconds per step: the sample interval, written in whole microseconds (rounded; the
  // textual header gives it exactly). Required (> 0): SEG-Y tools read times from it.
  double dt = 0;
  // Metres per grid cell along x, y, z: coordinates are cells x spacing from the grid's origin.
  std::array<double, 3> spacing = {1, 1, 1};
  // For the textual header: the grid (empty: not known), and the grid step of the first
  // sample (0: not known).
  std::string grid;
  int64_t first_step = 0;
};

// The most samples per trace SEG-Y rev 1 holds (a signed 16-bit count).
inline constexpr int64_t kSegyMaxSamples = 32767;

// Ok, or why traces of `steps` steps and the receivers of `probes` cannot be written as SEG-Y
// with `options` (dt, spacing, too many steps, no receivers); `dt_option` names dt in the
// message (e.g. "--dt"). Nothing is read or written.
Status check_segy(const SegyOptions& options, int64_t steps, const Probes& probes,
                  std::string_view dt_option);

// Writes `out` as a SEG-Y rev 1 file (big-endian IEEE float32 samples, format code 5): a
// textual header (EBCDIC) saying what made it, a binary header, and one trace per receiver of
// `probes`, in their order, with its coordinates and the first source's (docs/schemes.md), its
// samples the rows of a (steps, receivers) float64 array rounded to float32 (its receivers
// must be those of `probes`). Written whole to
// a temporary file renamed over `out`, so that a failure leaves `out` as it was. `out` must be
// named .sgy or .segy.
Status write_traces_segy(std::span<const double> values, int64_t steps, int64_t receivers,
                         const Probes& probes, const std::string& out, const SegyOptions& options);
// The same from a traces file (.npy of float64, shape (steps, receivers)), read a bounded
// chunk at a time: never the whole file in memory.
Status write_traces_segy(const std::string& npy_path, const Probes& probes, const std::string& out,
                         const SegyOptions& options);

}  // namespace deepgrid
