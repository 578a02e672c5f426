// Measurements of this machine's memory and of the in-core engine: the machine profile's rates
// (plan/machine.h), `deepgrid bench`, and the Google Benchmark programs in bench/.
#pragma once

#include <cstdint>
#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/scheme.h"
#include "engines/incore_engine.h"

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

// The scheme's kernel alone on rows `width` points wide whose planes stay in cache (a few rows
// each: the in-core engine's planes at most, without its memory traffic, tile halos or
// bookkeeping), every thread on planes of its own: MLUP/s, best of `repeats` timings of about
// 0.2 s. What a wavefront's levels could reach at best on planes that wide.
Result<double> kernel_in_cache_mlups(const Scheme& scheme, DType dtype, int64_t width, int threads,
                                     int repeats = 3);

}  // namespace deepgrid
