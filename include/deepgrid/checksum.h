// Checksums and summary statistics of a stored grid, streamed plane by plane.
#pragma once

#include <cstdint>
#include <string>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/store.h"

namespace deepgrid {

struct GridSummary {
  std::string sha256;  // of the values as little-endian bytes in (z, y, x) order, no padding
  double min = 0, max = 0, mean = 0;
  double l2 = 0;  // sqrt(sum of squares)
  int64_t nan_count = 0;
};

// Over every component of a grid of several fields (each plane's components in order), or
// over one (`component` >= 0).
Result<GridSummary> summarize(const Grid& grid, int component = -1);
// The same over the planes of a grid that `m` describes (a stored grid's manifest, or a
// distributed grid's as_grid()), read from any source.
Result<GridSummary> summarize_grid_planes(const Manifest& m, const io::PlaneSource& planes,
                                          int component = -1);
// The same over the planes of a grid of this shape and dtype, from any source.
Result<GridSummary> summarize_planes(const Shape& shape, DType dtype,
                                     const io::PlaneSource& planes);

}  // namespace deepgrid
