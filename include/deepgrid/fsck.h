// Checking a stored grid's integrity: every plane's values against the hash recorded when it
// was written (`deepgrid fsck`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/status.h"
#include "deepgrid/store.h"

namespace deepgrid {

struct DamagedPlane {
  int64_t z = 0;
  std::string file;  // path of the data file holding it
  int64_t offset = 0;
  // Grids with coefficient files: where its coefficients are (the damage is in one of the two:
  // the checksum covers both); else empty.
  std::string coef_file;
  int64_t coef_offset = 0;
};

struct FsckReport {
  bool has_checksums = false;     // false: nothing to compare planes with
  std::string problem;            // the checksum table is missing or damaged (empty: a version-1
                                  // grid, which has none)
  std::string interrupted_sweep;  // an in-place rewrite a crash cut short (Grid::interrupted_sweep)
  bool resumable = false;         // ... whose record lets `deepgrid run --resume` finish it
  int64_t planes_checked = 0;     // (of an interrupted sweep: the old planes it still needs)
  std::vector<DamagedPlane> damaged;

  bool damage_found() const {
    return !problem.empty() || (!interrupted_sweep.empty() && !resumable) || !damaged.empty();
  }
};

// Reads every plane of `grid` (already checked for structure by Grid::open) and lists those
// whose values do not match their recorded hash. I/O errors end the check with their status.
Result<FsckReport> fsck_grid(const Grid& grid);

// Gives a grid of several fields whose checksums hash each plane as one run of bytes (written
// before 2026-11-30) checksums by component (integrity.h), which sweeps in bands of rows need:
// reads every plane, compares it with its recorded hash (a mismatch fails with kCorrupt, naming
// the file and offset, and changes nothing) and commits the new table. Any other grid is left
// as it is. Needs the grid opened read-write and no interrupted sweep.
Status upgrade_checksums(Grid& grid);

// Reads every plane once (plane transfers, several in flight): with verification enabled, the first
// damaged plane fails it (naming its file and offset).
Status read_every_plane(const Grid& grid);

}  // namespace deepgrid
