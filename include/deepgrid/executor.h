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
  int threads = 0;  // 0: all OpenMP threads
  ProgressFn progress;
};

// The halo a kernel needs around a grid.
template <typename T>
Halo halo_for(const StencilKernel<T>& k) {
  return {k.rx(), k.ry(), k.rz()};
}

// Advances `grid` by `steps` steps in memory, using `scratch` (same shape and halo) as the
// second time level. Returns the number of steps done (fewer when progress asked to stop);
// the result is in `grid` either way.
template <typename T>
int64_t advance_incore(PaddedGrid<T>& grid, PaddedGrid<T>& scratch, const StencilKernel<T>& kernel,
                       const Boundary& boundary, int64_t steps, const InCoreOptions& options);

}  // namespace deepgrid
