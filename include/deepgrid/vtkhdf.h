// Output that ParaView, VisIt and PyVista open directly: a grid as a VTKHDF ImageData file
// (VTK's HDF5 format), every field a named point array, streamed plane by plane; and a series
// of such files, one per time step, behind one index file that they open as an animation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/store.h"

namespace deepgrid {

struct VtkhdfOptions {
  std::array<double, 3> origin{0, 0, 0};   // coordinates of point (0, 0, 0), x y z
  std::array<double, 3> spacing{1, 1, 1};  // between neighbouring points of the grid, x y z
  int64_t downsample = 1;                  // keep every K-th point along each axis
  std::vector<int> components;             // the fields written, in order; empty: every one
};

// Ok, or why these options cannot write a grid that `m` describes.
Status check_vtkhdf_options(const Manifest& m, const VtkhdfOptions& options);
// The points written along each axis: every K-th of the grid's, the first included.
Shape vtkhdf_shape(const Shape& grid, int64_t downsample);
// Bytes of one file of the grid `m` describes (its arrays; the HDF5 metadata is a few KiB).
uint64_t vtkhdf_bytes(const Manifest& m, const VtkhdfOptions& options);

// Writes the grid `m` describes, whose planes (every component, as Grid::read_planes gives
// them) `planes` hands over in order, to `path`: written as path.tmp, synced and renamed, so
// a file by that name is always whole. `step` is recorded as the time of the data. Holds one
// downsampled plane of one field beside what `planes` holds.
Status write_vtkhdf(const Manifest& m, const io::PlaneSource& planes, int64_t step,
                    const std::string& path, const VtkhdfOptions& options);
// The same from a stored grid, at its step.
Status export_vtkhdf(const Grid& grid, const std::string& path, const VtkhdfOptions& options);

// A series: files DIR/step-NNNNNNNNNN.vtkhdf, each whole and readable alone, and
// DIR/series.vtkhdf, which ParaView opens as one animation over the steps of the files listed
// in it (VTKHDF 2.0 temporal ImageData whose arrays are HDF5 virtual datasets over the files).
inline constexpr const char* kSeriesIndexName = "series.vtkhdf";
std::string series_file_name(int64_t step);
// The steps whose files DIR holds, in increasing order (none when DIR does not exist).
Result<std::vector<int64_t>> series_steps(const std::string& dir);
// Ok when DIR can take a series of this grid: it does not exist, or it is a directory whose
// index (if any) describes the same points, spacing and arrays; else why not.
Status check_series_dir(const std::string& dir, const Manifest& m, const VtkhdfOptions& options);
// Writes the file of `step` into DIR (made if missing) and then the index of every step DIR
// holds, each atomically.
Status add_to_series(const std::string& dir, const Manifest& m, const io::PlaneSource& planes,
                     int64_t step, const VtkhdfOptions& options);

}  // namespace deepgrid
