// How a grid is split over ranks: a process grid px x py x pz, each rank owning a block of the
// grid, and the halos each rank's part holds around its block so that it can advance k steps
// on its own between two halo exchanges. Axes are indexed x = 0, y = 1, z = 2.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/geometry.h"
#include "deepgrid/status.h"

namespace deepgrid {

inline constexpr int kAxisX = 0, kAxisY = 1, kAxisZ = 2;

// Indices [lo, hi) along one axis.
struct Span {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
  bool operator==(const Span&) const = default;
};

// A box of grid points: one span per axis (x, y, z).
struct Block {
  std::array<Span, 3> axis;
  int64_t size(int a) const { return axis[static_cast<size_t>(a)].size(); }
  const Span& operator[](int a) const { return axis[static_cast<size_t>(a)]; }
  Span& operator[](int a) { return axis[static_cast<size_t>(a)]; }
  int64_t points() const { return size(kAxisX) * size(kAxisY) * size(kAxisZ); }
  bool empty() const { return points() == 0; }
  bool contains(int64_t x, int64_t y, int64_t z) const {
    return x >= axis[0].lo && x < axis[0].hi && y >= axis[1].lo && y < axis[1].hi &&
           z >= axis[2].lo && z < axis[2].hi;
  }
  std::string to_string() const;  // "[0,8)x[0,6)x[4,9)"
  bool operator==(const Block&) const = default;
};

// The ranks of a job arranged as px x py x pz; rank r sits at (r % px, r / px % py, r / (px*py)):
// x fastest, so px = py = 1 is the z-slab decomposition with rank r owning the r-th slab.
struct ProcessGrid {
  std::array<int, 3> p{1, 1, 1};
  int ranks() const { return p[0] * p[1] * p[2]; }
  std::array<int, 3> coords_of(int rank) const;
  std::string to_string() const;  // "2x2x1"
  bool operator==(const ProcessGrid&) const = default;
};

// Parses "PXxPYxPZ" (each at least 1), as --procs gives it.
Result<ProcessGrid> parse_process_grid(const std::string& text);

// Checks that `grid` splits `shape` over `ranks` ranks: its product is `ranks` and no axis is
// split into more pieces than it has points.
Status check_process_grid(const ProcessGrid& grid, const Shape& shape, int ranks);

// Blocks thinner than this many points along a split axis make halos costly: the default
// exchange depth (an eighth of the thinnest block, see run) falls below 4 steps.
inline constexpr int64_t kThinBlock = 32;

// The process grid chosen when none is given: z-slabs when they are at least kThinBlock planes
// thick, else as few thin pieces as possible, splitting z first, then y, then x (see
// docs/mpi.md). kInvalidArgument when no process grid of `ranks` fits the grid's extents.
Result<ProcessGrid> choose_process_grid(const Shape& shape, int ranks);

// The blocks of every rank, in rank order: balanced per axis (sizes differ by at most one, the
// larger ones first). The process grid must have been checked.
std::vector<Block> decompose(const Shape& shape, const ProcessGrid& grid);

// Points a part holds beyond its block on each side of each axis.
struct HaloExtent {
  std::array<int64_t, 3> below{}, above{};
  bool operator==(const HaloExtent&) const = default;
};

// The halo a rank needs to advance k steps alone when k * r_axis = `halo`[axis] points: that
// many on each side, clipped at the grid's ends unless the grid is periodic (there the boundary
// rule applies at the part's end, as in the global grid). None along an axis the block spans
// whole: the part's engine applies the grid's own boundary rule there (periodic wrap included),
// which is exact.
HaloExtent needed_halo(const Block& block, const Shape& shape, const std::array<int64_t, 3>& halo,
                       bool periodic);

// Whether a part holding `held` can run with `needed`: a wider halo is as good (the values
// its outer points get wrong never reach the block), but it must not reach past a grid end
// that is not periodic, where the part's end must be the grid's.
bool halo_suffices(const HaloExtent& held, const HaloExtent& needed, const Block& block,
                   const Shape& shape, bool periodic);

// Index v along an axis of n points (any integer for a periodic grid) taken modulo n.
int64_t wrap_index(int64_t v, int64_t n, bool periodic);

// The intersection of two blocks (empty spans when they do not meet).
Block intersect(const Block& a, const Block& b);

}  // namespace deepgrid
