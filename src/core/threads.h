// internal: the threads a run computes on.
#pragma once

#include <omp.h>

#include <algorithm>

namespace deepgrid::internal {

// `requested` threads, or where it is 0 (or less) OpenMP's default (OMP_NUM_THREADS, else the
// CPUs this process may use); at least one.
inline int resolved_threads(int requested) {
  return std::max(1, requested > 0 ? requested : omp_get_max_threads());
}

}  // namespace deepgrid::internal
