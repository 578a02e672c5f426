// Receivers' traces (probes.h) on disk: a .npy file of float64, one row per step, one column per
// receiver, saved by a run as it goes so that a stopped run keeps what it recorded.
#pragma once

#include <string>

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
// Reads such a file back whole (every row held).
Result<Traces> read_traces_npy(const std::string& path);

// Fills the held rows with the values a stopped run saved in `saved_path`, which later saves
// then update in place; a missing file, or one of another shape, is ignored (the rows stay as
// they are, and the next save writes the file whole).
void load_held_rows(Traces* traces, const std::string& saved_path);

}  // namespace deepgrid
