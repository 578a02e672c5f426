// A run's snapshots (RunOptions::snapshots): where the run stops on its way to take one, what
// they need on disk and in memory, and taking one. Engines run from one snapshot step to the
// next (never across one), so a snapshot holds exactly what a run stopped at its step would.
#pragma once

#include <cstdint>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/report.h"
#include "deepgrid/run_options.h"
#include "deepgrid/store.h"

namespace deepgrid {

// The steps of a run at `step` may take before it must stop for a snapshot, at most `left`.
int64_t steps_to_next_snapshot(const Snapshots& s, int64_t step, int64_t left);
// Whether a run that has reached `step` takes a snapshot there.
inline bool snapshot_due(const Snapshots& s, int64_t step) {
  return s.wanted() && step % s.every == 0;
}

// Whether the series holds the file of `step` already.
bool has_snapshot(const Snapshots& s, int64_t step);

// Ok, or why the snapshots of a run of grid `m` from step `from` to step `to` cannot be taken:
// the method cannot stop on its way (tiled), the options or the directory do not suit the
// grid (check_series_dir), or the disk holding the directory has no room for all of them.
Status check_snapshots(const Manifest& m, const Snapshots& s, Method method, int64_t from,
                       int64_t to);
// Bytes a snapshot holds in memory beside the engine: the planes read in flight and one
// downsampled plane.
uint64_t snapshot_memory(const Manifest& m);

// `opt` with a snapshot's buffers (snapshot_memory) taken from its --mem for the engine;
// kResource when they fill it.
Result<RunOptions> leave_room_for_snapshots(RunOptions opt, const Manifest& m);

// Writes the snapshot of `step` from `planes` (every component of each plane) into the
// series, counting it and its time in `report`.
Status take_snapshot(const Manifest& m, const Snapshots& s, const io::PlaneSource& planes,
                     int64_t step, RunReport* report);
// The same from a stored grid at its step, unless its directory holds that step's file
// already (a resumed run's start).
Status take_missing_snapshot(const Grid& grid, const Snapshots& s, RunReport* report);

}  // namespace deepgrid
