#include <omp.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "deepgrid/executor.h"

namespace deepgrid {
namespace {

// Rows per work item: enough items to balance threads, long enough to amortise the call.
int64_t rows_per_block(const Shape& s, int threads) {
  const int64_t items_wanted = int64_t{8} * threads;
  const int64_t blocks_per_plane = std::max<int64_t>(1, (items_wanted + s.nz - 1) / s.nz);
  return std::max<int64_t>(1, (s.ny + blocks_per_plane - 1) / blocks_per_plane);
}

// One step: out = stencil(in), every interior point. `in` has valid ghosts.
template <typename T>
void sweep(const PaddedGrid<T>& in, PaddedGrid<T>& out, const StencilKernel<T>& k, int threads) {
  const Shape& s = in.shape();
  const int64_t rows = rows_per_block(s, threads);
  const int64_t yblocks = (s.ny + rows - 1) / rows;
  const int rz = k.rz();
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t z = 0; z < s.nz; ++z) {
    for (int64_t b = 0; b < yblocks; ++b) {
      const T* planes[2 * kMaxStencilRadius + 1];
      for (int dz = -rz; dz <= rz; ++dz) planes[rz + dz] = in.plane(z + dz);
      const Rect rect{0, s.nx, b * rows, std::min(s.ny, (b + 1) * rows)};
      k.apply(planes, out.plane(z), in.stride(), rect);
    }
  }
}

}  // namespace

template <typename T>
int64_t advance_incore(PaddedGrid<T>& grid, PaddedGrid<T>& scratch, const StencilKernel<T>& kernel,
                       const Boundary& boundary, int64_t steps, const InCoreOptions& options) {
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  PaddedGrid<T>* cur = &grid;
  PaddedGrid<T>* next = &scratch;
  int64_t done = 0;
  while (done < steps) {
    cur->fill_ghosts(boundary);
    sweep(*cur, *next, kernel, threads);
    std::swap(cur, next);
    ++done;
    if (options.progress && !options.progress(done, steps)) break;
  }
  if (cur != &grid) std::swap(grid, scratch);
  return done;
}

template int64_t advance_incore<float>(PaddedGrid<float>&, PaddedGrid<float>&,
                                       const StencilKernel<float>&, const Boundary&, int64_t,
                                       const InCoreOptions&);
template int64_t advance_incore<double>(PaddedGrid<double>&, PaddedGrid<double>&,
                                        const StencilKernel<double>&, const Boundary&, int64_t,
                                        const InCoreOptions&);

}  // namespace deepgrid
