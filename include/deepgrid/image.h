// Pictures of a grid: a slice rendered to PNG in the manner of matplotlib's imshow: viridis,
// axes with grid-index ticks and labels, a title, and a colour bar with values.
#pragma once

#include <cstdint>
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
  int64_t width = 0, height = 0;  // the PNG's size in pixels
  // The slice's cells, along the picture's horizontal axis and its vertical one (upwards).
  int64_t cells_x = 0, cells_y = 0;
  // Where the cells are drawn: the data area's top-left pixel and its size, inside a one-pixel
  // frame. Each cell is a block of scale x scale pixels (small slices are scaled up), or each
  // pixel the mean of a block of block x block cells (large ones are scaled down); one of the
  // two is 1. Cell (i, j), j counting upwards, is drawn from column data_x + i * scale / block
  // and up from row data_y + data_height - 1 - j * scale / block (integer division).
  int64_t data_x = 0, data_y = 0, data_width = 0, data_height = 0;
  int64_t scale = 1, block = 1;
  double min = 0, max = 0;  // the values mapped to the ends of the colour map
  std::string title;        // drawn above: "NAME: [field F, ]z = 128, step 100"
};

// Resolves "mid" to the middle index and checks that the slice lies inside a grid of this
// shape and names one of its `components`.
Status check_slice(const Shape& shape, int components, SliceSpec* slice);

// Reads the slice (streaming the grid when the slice is not a z-plane), maps its finite
// values' min..max to the viridis colour map (cells that are not finite are white), and writes
// an 8-bit RGB PNG: the cells in a frame with grid-index ticks along both free axes and their
// names, a title naming the grid (the directory's base name), the field of a grid of several,
// the slice and the time step, and a colour bar with values at its ticks. The longer side of
// the cells is scaled up to at least 512 pixels by an integer factor, or down to at most 1000
// by averaging blocks. A missing font (fonts-dejavu-core) is kUnsupported.
Result<SliceImageInfo> write_slice_png(const Grid& grid, SliceSpec slice, const std::string& path);
// The same from any source of the planes of a grid that `m` describes (a distributed grid's
// as_grid()), `name` titling it: every plane is read, the slice's values kept.
Result<SliceImageInfo> write_slice_png(const Manifest& m, const io::PlaneSource& planes,
                                       SliceSpec slice, const std::string& path,
                                       const std::string& name);

// The name a picture of the grid in `dir` has in its title: the directory's base name.
std::string grid_display_name(const std::string& dir);

}  // namespace deepgrid
