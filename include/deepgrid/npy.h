// Streaming import and export of NumPy .npy files (format 1.0, 2.0, 3.0; C order).
#pragma once

#include <string>
#include <vector>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/store.h"

namespace deepgrid {

struct NpyHeader {
  DType dtype = DType::kF32;
  Shape shape;              // from (nz, ny, nx), or (ny, nx) with nz = 1
  int64_t data_offset = 0;  // where the values start
};

// Reads and checks the header of IN.npy: little-endian f4/f8, C order, 2 or 3 dimensions.
Result<NpyHeader> read_npy_header(const std::string& path);
// Ok, or why the array `header` describes (read from `path`) cannot fill a field of a grid of
// this shape and dtype.
Status check_npy_fits(const NpyHeader& header, const std::string& path, const Shape& shape,
                      DType dtype);

// Creates grid DIR from IN.npy, one chunk of planes at a time.
Result<Grid> import_npy(const std::string& npy_path, const std::string& dir,
                        const std::vector<std::string>& stores);

// The header of a .npy file (format 1.0, little-endian, C order) of this dtype and shape,
// padded so that the values start 64-byte aligned.
std::string npy_header(DType dtype, const std::vector<int64_t>& dims);

// Writes component `component` of the grid (the only one of a grid of one field) to OUT.npy
// with shape (nz, ny, nx), one chunk of planes at a time.
Status export_npy(const Grid& grid, const std::string& npy_path, int component = 0);

// Replaces component `component` of an existing grid (a coefficient field, an initial state)
// with IN.npy's values, which must have the grid's shape and dtype. The touched planes'
// checksums are committed; the time step stays.
Status import_npy_field(const std::string& npy_path, Grid& grid, int component);
// The same for the planes of a grid of this shape and dtype, from any source.
Status export_npy_planes(const Shape& shape, DType dtype, const io::PlaneSource& planes,
                         const std::string& npy_path);

}  // namespace deepgrid
