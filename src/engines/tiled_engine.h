// The published out-of-core method (seed paper 001): 3D blocks with halos, two copies of the
// grid on disk. A comparison method for the stream engine, selectable with --method tiled.
//
// A pass advances L <= bt steps. For each block (whole rows along x, split along y and z) it
// reads the block widened by L * r (wrapped where periodic) from the source copy, advances it
// L steps in memory between two block buffers (level k valid on the block widened by
// (L - k) r: redundant halo work; at grid faces the boundary rule is re-imposed on the ghost
// cells every level), and writes the block's interior to the destination copy: the grid's
// replacement files (Grid::create_replacement), which each pass commits as the grid's files at
// its new step, so the copies swap roles every pass and a crash leaves the last pass's state.
//
// Disk access: each plane's rows of a block are one aligned byte range (O_DIRECT where the
// filesystem allows it): reads take the 4 KiB pages around the rows, writes read-modify-write
// the first and last page when a block's rows do not start or end on a page boundary.
#pragma once

#include <cstdint>

#include "deepgrid/boundary.h"
#include "deepgrid/stencil.h"
#include "deepgrid/store.h"
#include "engines/incore_engine.h"

namespace deepgrid {

struct TiledOptions {
  int threads = 0;          // 0: all
  int bt = 0;               // steps per pass; 0: chosen by the cost model (<= 64)
  uint64_t mem_budget = 0;  // bytes; must be > 0
  // Disk bandwidth / compute rate (bytes per lattice update), weighing the disk traffic of a
  // pass against the blocks' redundant halo work when choosing bt and the block shape.
  double disk_bytes_per_update = 0.6;
  int64_t block_y = 0, block_z = 0;  // forced block extents (experiments, tests); 0: chosen
  bool flush_subnormals = false;     // RunOptions::flush_subnormals
};

struct TiledPlan {
  int bt = 1;
  int threads = 1;
  int64_t block_y = 1, block_z = 1;  // block extents (x: whole rows)
  int64_t blocks = 0;                // per pass
  int64_t passes = 0;
  int64_t block_buffer_bytes = 0;  // each of the two
  int64_t io_buffer_bytes = 0;
  int64_t memory_bytes = 0;       // what the method allocates
  int64_t minimum_bytes = 0;      // the smallest working set (bt 1, blocks of one row and plane)
  int64_t disk_bytes = 0;         // the second copy of the grid
  double redundancy = 1;          // computed updates / useful updates
  double read_amplification = 1;  // bytes read per pass / the grid's bytes
  bool flush_subnormals = false;
};

// The plan for `steps` steps within the budget; kInvalidArgument naming the minimum budget
// when nothing fits.
Result<TiledPlan> plan_tiled(const Manifest& m, const Stencil& stencil, const Boundary& boundary,
                             int64_t steps, const TiledOptions& options);

struct TiledStats {
  int64_t steps = 0;  // steps done (fewer when progress asked to stop)
  double compute_seconds = 0;
  double io_seconds = 0;  // blocked in reads and writes
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};

// Advances the grid (opened read-write) by `steps` steps, committing the manifest's step after
// each pass; asks `progress` after each pass. Free space for the second copy must have been
// checked. The planes' checksums are unknown afterwards (Grid::forget_checksums): the caller
// records them.
Result<TiledStats> advance_tiled(Grid& grid, const Stencil& stencil, const Boundary& boundary,
                                 int64_t steps, const TiledPlan& plan,
                                 const ProgressFn& progress = {});

}  // namespace deepgrid
