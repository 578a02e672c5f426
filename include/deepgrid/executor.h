// Engines that advance a grid in memory. (Out-of-core engines will sit beside this one.)
#pragma once

#include <cstdint>
#include <functional>

#include "deepgrid/boundary.h"
#include "deepgrid/padded_grid.h"
#include "deepgrid/stencil_kernel.h"

namespace deepgrid {

// Called after each completed step with (steps done, steps total); returns false to stop.
using ProgressFn = std::function<bool(int64_t, int64_t)>;

struct InCoreOptions {
  int threads = 0;     // 0: all OpenMP threads
  int bt = 0;          // steps per pass over memory (temporal blocking); 0: automatic
  int64_t tile_x = 0;  // x-y tile extents of the wavefront; 0: automatic
  int64_t tile_y = 0;
  int64_t cache_bytes = int64_t{1} << 20;  // per-thread working set the tiles are sized for
  ProgressFn progress;
};

// How the in-core engine splits the work: bt steps per pass; x-y tiles streamed along z.
struct WavefrontPlan {
  int bt = 1;
  int64_t tile_x = 1, tile_y = 1;
  int64_t workspace_bytes = 0;  // per thread
};

// The plan advance_incore uses for these options (pure; no allocation).
WavefrontPlan plan_wavefront(const Shape& shape, int rx, int ry, int rz, size_t value_bytes,
                             int64_t steps, const InCoreOptions& options);

// The halo a kernel needs around a grid.
template <typename T>
Halo halo_for(const StencilKernel<T>& k) {
  return {k.rx(), k.ry(), k.rz()};
}

// Advances `grid` by `steps` steps in memory, using `scratch` (same shape and halo) as the
// second copy. Temporal blocking: each pass streams x-y tiles (with halos of bt * r) along z
// through bt time levels held in small per-thread ring buffers, so memory is read and written
// once per bt steps. Ghost cells of `grid` are not used. Returns the number of steps done
// (fewer when progress asked to stop, which it is asked after each pass); the result is in
// `grid` either way.
template <typename T>
int64_t advance_incore(PaddedGrid<T>& grid, PaddedGrid<T>& scratch, const StencilKernel<T>& kernel,
                       const Boundary& boundary, int64_t steps, const InCoreOptions& options);

}  // namespace deepgrid
