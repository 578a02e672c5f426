// One problem through several engines (`deepgrid bench --methods`): each runs the whole run
// lifecycle (run_grid) on a fresh grid, beside the in-core engine's warm rate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/report.h"
#include "deepgrid/run_options.h"
#include "deepgrid/scheme.h"

namespace deepgrid {

// One problem through several methods, each on a fresh grid with the same initial condition.
struct MethodsBenchOptions {
  std::string dir;  // scratch directory for the grids (created, emptied after)
  Shape shape;
  DType dtype = DType::kF32;
  Scheme scheme;
  Boundary boundary;
  int64_t steps = 0;
  double mem_ratio = 16;  // out-of-core methods get --mem = grid bytes / mem_ratio
  int threads = 0;
  std::vector<std::string> methods;  // incore, stream, naive, mmap, tiled, device
  std::string device;                // the device method's device, budget and copies (RunOptions)
  uint64_t device_mem = 0;
  DeviceOverlap device_overlap = DeviceOverlap::kAuto;
  // The device method again, larger than its budget: --device-mem = grid bytes / device_ratio
  // and --mem = grid bytes / mem_ratio, so host-resident or three-tier as they fall; 0: not.
  double device_ratio = 0;
  std::vector<int> bts = {0};         // stream, tiled and device: each bt (0: automatic)
  int cache_bt = 0;                   // stream: steps per stage (0: automatic)
  int64_t band_rows = kAutoBandRows;  // stream: bands of rows (RunOptions::band_rows)
  int64_t tile_x = 0, tile_y = 0;     // every method's tiles (0: automatic)
  std::vector<double> ratios;         // out-of-core: each memory ratio (overrides mem_ratio)
  // Part of a sweep: a configuration that does not fit its budget becomes a skipped row instead
  // of an error (also where bts or ratios hold several).
  bool sweep = false;
};

struct MethodsBenchRow {
  std::string method;
  int bt = 0;
  double mem_ratio = 0;  // grid bytes / budget (0 for in-core: no budget)
  uint64_t mem_budget = 0;
  RunReport report;
  double ratio_to_incore = 0;  // whole-run MLUP/s / in-core whole-run MLUP/s
  std::string skipped;  // why this configuration did not run (e.g. over the budget), or empty
  // Whole-run MLUP/s / the in-core engine's warm in-memory MLUP/s on the same shape, measured
  // in the same benchmark run (bench_incore): the strictest yardstick.
  double ratio_to_incore_warm = 0;
  double compute_ratio_to_incore = 0;  // whole-run MLUP/s / in-core MLUP/s over its compute only
  // Share of the run's wall time the block device holding the grid was busy (io_ticks from
  // /sys/dev/block; other processes' I/O counts too); -1 where the grid is not on one.
  double disk_busy = -1;
};

struct MethodsBench {
  std::vector<MethodsBenchRow> rows;
  double incore_warm_mlups = 0;  // 0 when no in-core method was asked for
};

Result<MethodsBench> bench_methods(const MethodsBenchOptions& options);

// One plane size of a sweep: the grid P x P x nz of about the bytes of the options' shape.
struct PlaneSweepRow {
  int64_t plane = 0;  // P
  Shape shape;
  // The kernel alone on P-wide rows in cache, all threads (kernel_in_cache_mlups): what the
  // engines could reach at best on such planes.
  double kernel_mlups = 0;
  MethodsBench methods;  // the options' methods on this shape
};

// The options' methods on grids of square planes `planes` wide and the options' shape's bytes
// (nz = points / P^2, at least 1), beside the kernel's in-cache rate: how the engines hold
// their speed as planes grow.
Result<std::vector<PlaneSweepRow>> bench_plane_sweep(const MethodsBenchOptions& options,
                                                     const std::vector<int64_t>& planes);

}  // namespace deepgrid
