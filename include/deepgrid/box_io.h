// Reading and writing a box of a stored grid: a (start, count, step) range along each axis,
// like a numpy basic slice with positive steps.
//
// Only the planes in the box are touched and, within a plane, only the 4096-byte blocks that
// hold its rows (a row g[:, y, :] reads one block run per plane, not whole planes). Planes
// that lie back to back in one data file are moved in one request. Writes read the blocks
// first where the box covers them only in part, and never change the manifest (the time step
// stays). Both are safe to call from several threads at once on one Grid (pread/pwrite only;
// the Grid's byte counters are not updated).
#pragma once

#include <cstdint>

#include "deepgrid/store.h"

namespace deepgrid {

// Indices start, start + step, ..., count of them.
struct AxisRange {
  int64_t start = 0;
  int64_t count = 0;
  int64_t step = 1;

  int64_t last() const { return start + (count - 1) * step; }
};

struct Box {
  AxisRange z, y, x;
  int component = 0;  // of a grid of several fields (Manifest::fields)

  int64_t points() const { return z.count * y.count * x.count; }
};

// The box covering the whole grid.
Box whole_grid_box(const Shape& shape);

// Checks that every step is >= 1, every index of the box lies inside the grid and its
// component exists.
Status check_box(const Shape& shape, const Box& box, int components = 1);

// Reads the box into `dst`: box.points() values of the grid's dtype, packed in (z, y, x) order
// (x fastest), i.e. a C-order array of shape (z.count, y.count, x.count).
Status read_box(const Grid& grid, const Box& box, void* dst);

// Writes the packed values in `src` (same order as read_box) to the box. The grid must have
// been opened for writing. The touched planes' checksums are recorded and committed with the
// manifest (data fsynced; the time step and history are unchanged).
Status write_box(Grid& grid, const Box& box, const void* src);

}  // namespace deepgrid
