// An in-memory grid with ghost cells around it, the form every engine computes on.
//
// Plane z (z in [-hz, nz + hz)) starts at plane(z); element (x, y) of it is at
// plane(z)[y * stride() + x] for x in [-hx, nx + hx), y in [-hy, ny + hy). x = 0 of every row
// is 64-byte aligned. A grid of several components (a scheme's fields, scheme.h) holds each
// plane's components one after another: component c of plane z at plane(z) + c * field_stride().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/geometry.h"
#include "deepgrid/integrity.h"
#include "deepgrid/status.h"

namespace deepgrid {

struct Halo {
  int x = 0, y = 0, z = 0;
};

template <typename T>
class PaddedGrid {
 public:
  PaddedGrid() = default;  // empty; assign an allocated grid
  // Allocates (zeros), its pages faulted in by all threads (touch_pages) unless `touched` is
  // false; fails (kResource) when memory is short.
  static Result<PaddedGrid> allocate(const Shape& shape, Halo halo, int components = 1,
                                     bool touched = true);
  // Storage in a MAP_SHARED mapping of a scratch file created in `dir` (space reserved with
  // posix_fallocate, so paging it out never meets a full disk) and unlinked at once: the OS
  // pages it between memory and the file, and the file is gone when the grid is.
  // kNoSpace when the disk is short.
  static Result<PaddedGrid> map_scratch_file(const Shape& shape, Halo halo, const std::string& dir,
                                             int components = 1);
  // Faults in every page of allocate()'s memory by writing zeros over it with `threads`
  // threads, so that the first pass does not take the page faults; only before anything else
  // is written to the grid (its values are zeros until then).
  void touch_pages(int threads);
  // The same for the z ghost planes only (before plane 0 and after the last), which loading
  // the planes does not write; may run beside load_plane().
  void touch_ghost_planes();
  // Bytes allocate() would take.
  static int64_t bytes_needed(const Shape& shape, Halo halo, int components = 1);

  const Shape& shape() const { return shape_; }
  Halo halo() const { return halo_; }
  ptrdiff_t stride() const { return stride_; }
  ptrdiff_t plane_stride() const { return plane_stride_; }
  ptrdiff_t field_stride() const { return field_stride_; }
  int components() const { return components_; }
  T* plane(int64_t z) { return base_ + (z + halo_.z) * plane_stride_ + origin_; }
  const T* plane(int64_t z) const { return base_ + (z + halo_.z) * plane_stride_ + origin_; }

  // Copies packed plane z (nx * ny values per component, components one after another) in or
  // out of the interior. `hash`, if given, is updated with the packed values as they are copied
  // (one pass over memory for both), as the plane's components `first_component` on (a plane
  // whose components lie in two grids). Loading: the components `component_stride` values
  // apart (0: nx * ny).
  void load_plane(int64_t z, const T* packed, PlaneHasher* hash = nullptr,
                  int64_t component_stride = 0, int first_component = 0);
  // load_plane of rows [y0, y1) alone (`packed` still the whole plane's values): threads may
  // load different rows of one plane at once where none hashes.
  void load_rows(int64_t z, const T* packed, int64_t y0, int64_t y1, PlaneHasher* hash = nullptr,
                 int64_t component_stride = 0, int first_component = 0);
  void store_plane(int64_t z, T* packed) const;

  // Fills every ghost cell from the interior by the boundary rule, with `threads` threads.
  // Ghost cells are written by these two calls only (the engines write interiors), so a
  // dirichlet fill whose value (bitwise) the ghosts already hold from the last whole fill is
  // skipped: in-core passes of a dirichlet run fill each copy once instead of every pass
  // (this alone, side by side at 256^3, 2 threads, medians of three: wave8 +15%, wave2 +10%,
  // 7pt +8%).
  void fill_ghosts(const Boundary& b, int threads);
  // Fills the x and y ghost cells of plane z (every component) from its interior, not the
  // z ghost planes: for grids whose planes are independent frames. Threads may fill different
  // planes at once unless the grid's last whole fill was dirichlet (whose memory of the value
  // the first plane of another rule clears).
  void fill_plane_ghosts(int64_t z, const Boundary& b);

 private:
  // Fills the x and y ghost cells of plane z's components (fill_component_ghosts).
  void fill_xy_ghosts(int64_t z, const Boundary& b);
  // Fills the x and y ghost cells of component plane p (whose interior is valid).
  void fill_component_ghosts(T* p, const Boundary& b);

  // Whether every ghost cell holds the dirichlet value `dirichlet_bits_` (as a double's bits).
  bool holds_dirichlet(const Boundary& b) const;

  Shape shape_;
  Halo halo_;
  bool dirichlet_ghosts_ = false;
  uint64_t dirichlet_bits_ = 0;
  ptrdiff_t stride_ = 0, plane_stride_ = 0, field_stride_ = 0, origin_ = 0;
  int components_ = 1;
  // Gives back `bytes` of allocate_pages() memory, or unmaps `bytes` of a file mapping.
  struct Release {
    size_t bytes = 0;
    bool file = false;
    void operator()(T* p) const;
  };
  // Sets the strides for `shape`, `halo` and `components` and takes `storage` (bytes_needed()
  // of it).
  PaddedGrid(const Shape& shape, Halo halo, int components, T* storage, Release release);

  std::unique_ptr<T[], Release> storage_;
  T* base_ = nullptr;
};

extern template class PaddedGrid<float>;
extern template class PaddedGrid<double>;

}  // namespace deepgrid
