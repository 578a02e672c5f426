// Preflight: what a run needs from the machine, checked before anything is read or written,
// so that a run that cannot finish fails at once with the fix instead of hours later.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deepgrid/run_options.h"
#include "deepgrid/store.h"
#include "plan/plan.h"

namespace deepgrid {

// What the checks look at, measured by measure_preflight.
struct PreflightFacts {
  uint64_t grid_dir_free_bytes = 0;  // where the manifest and checksum table are committed
  uint64_t physical_memory = 0;
  std::vector<std::string> without_direct_io;  // data files' directories refusing O_DIRECT
  std::vector<std::string> unwritable;         // the grid directory or data files
  // Each data file's directory and the bytes free there for a second copy (sweeps in bands of
  // rows): free, and held by copies a replacement takes over (internal::room_for_copies).
  std::vector<std::pair<std::string, uint64_t>> data_dir_free;
};

Result<PreflightFacts> measure_preflight(const Grid& grid);

// Bytes the grid directory needs free for a run to commit: a new manifest and checksum table
// are written before the old ones go.
uint64_t commit_space_needed(const Manifest& m);

// Fails with the fix when `facts` cannot carry the planned run: kNoSpace for disk space,
// kInvalidArgument otherwise (memory, O_DIRECT for the stream methods, permissions).
Status check_preflight(const Manifest& m, const RunPlan& plan, const PreflightFacts& facts);

}  // namespace deepgrid
