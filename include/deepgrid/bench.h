// Measurements of this machine and of the in-core engine, shared by `deepgrid bench` and the
// Google Benchmark programs in bench/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/executor.h"
#include "deepgrid/geometry.h"
#include "deepgrid/report.h"
#include "deepgrid/scheme.h"

namespace deepgrid {

struct Bandwidth {
  double copy_gbs = 0;   // GB/s counting read + write bytes of a large a[i] = b[i] copy
  double triad_gbs = 0;  // a[i] = b[i] + s * c[i], counting 3 streams
};

// STREAM-style bandwidth with all OpenMP threads over arrays of `bytes` each (>> caches).
Bandwidth measure_bandwidth(int64_t bytes = int64_t{1} << 30, int repeats = 5);

struct InCoreBench {
  std::string stencil;
  std::string shape;
  std::string dtype;
  std::string boundary;  // Boundary::to_string()
  int threads = 0;
  WavefrontPlan plan;
  int64_t steps = 0;
  double seconds = 0;  // best of the repeats
  double mlups = 0;
  double gflops = 0;
  // MLUP/s that DRAM bandwidth allows with no cache reuse: read + write each component's value
  // per update.
  double bandwidth_bound_mlups = 0;
};

// Times `steps` in-core steps (random data in every component) on a grid of `shape` with
// `boundary`, best of `repeats`. `bandwidth_gbs` feeds the bound (0: leave it 0).
Result<InCoreBench> bench_incore(const Shape& shape, const Scheme& scheme, DType dtype,
                                 int64_t steps, const InCoreOptions& options, int repeats,
                                 double bandwidth_gbs, const Boundary& boundary = {});

}  // namespace deepgrid

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
  std::vector<std::string> methods;  // incore, stream, naive, mmap, tiled
  std::vector<int> bts = {0};        // stream and tiled: each bt (0: automatic)
  int cache_bt = 0;                  // stream: steps per stage (0: automatic)
  int64_t tile_x = 0, tile_y = 0;    // every method's tiles (0: automatic)
  std::vector<double> ratios;        // out-of-core: each memory ratio (overrides mem_ratio)
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

}  // namespace deepgrid
