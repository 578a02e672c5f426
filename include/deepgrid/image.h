// Pictures of a grid: a slice rendered to PNG with a colour map and a colour bar.
#pragma once

#include <string>
#include <string_view>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/store.h"

namespace deepgrid {

struct SliceSpec {
  char axis = 'z';     // the axis held fixed: 'x', 'y' or 'z'
  int64_t index = -1;  // -1: the middle
  int component = 0;   // of a grid of several fields (Manifest::fields)
};

// Parses "z=mid", "z=10", "y=0", "x=mid".
Result<SliceSpec> parse_slice(std::string_view text);

struct SliceImageInfo {
  int64_t width = 0, height = 0;
  double min = 0, max = 0;  // the values mapped to the ends of the colour map
};

// Resolves "mid" to the middle index and checks that the slice lies inside a grid of this
// shape and names one of its `components`.
Status check_slice(const Shape& shape, int components, SliceSpec* slice);

// Reads the slice (streaming the grid when the slice is not a z-plane), maps min..max to the
// viridis colour map with a colour bar at the right, and writes an 8-bit RGB PNG.
Result<SliceImageInfo> write_slice_png(const Grid& grid, SliceSpec slice, const std::string& path);
// The same from any source of the planes of a grid that `m` describes (a distributed grid's
// as_grid()): every plane is read, the slice's values kept.
Result<SliceImageInfo> write_slice_png(const Manifest& m, const io::PlaneSource& planes,
                                       SliceSpec slice, const std::string& path);

}  // namespace deepgrid
