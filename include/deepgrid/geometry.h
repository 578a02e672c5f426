// Grid extents and the parsers for the sizes users type ("1024x1024x512", "2GiB").
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "deepgrid/status.h"

namespace deepgrid {

// Extents of a grid. x is the fastest axis, z the slowest (numpy shape (nz, ny, nx)).
struct Shape {
  int64_t nx = 0, ny = 0, nz = 0;

  int64_t points() const { return nx * ny * nz; }
  int64_t plane_points() const { return nx * ny; }
  bool operator==(const Shape&) const = default;
  std::string to_string() const;  // "NXxNYxNZ"
};

// Where a grid lies in a larger one, the grid whose coordinates users' kernels see (a
// distributed run's part: its first point is (x, y, z) of the whole grid, of extents `whole`;
// below 0 or past the ends in a periodic halo). Empty `whole`: the grid is the whole grid.
struct GridPlacement {
  int64_t x = 0, y = 0, z = 0;
  Shape whole;
  // The points whose values a run must deliver, [needed_lo, needed_hi) along x, y, z in this
  // grid's coordinates: a distributed part's block, bounded on the sides where it has halos
  // (which serve only the block and are exchanged again before the next run). The in-core and
  // stream engines then compute a point k steps before the run's end only when it lies within
  // k * r of this box (r the stencil's reach along that axis); the other points hold stale
  // values (in-core) or zeros (stream). Default: every point.
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;
  std::array<int64_t, 3> needed_lo{-kUnbounded, -kUnbounded, -kUnbounded};
  std::array<int64_t, 3> needed_hi{kUnbounded, kUnbounded, kUnbounded};

  bool is_whole() const { return whole.points() == 0; }
};

// Largest number of grid points deepgrid accepts (2^50): keeps every byte offset of every
// supported dtype, plus padding, inside int64.
inline constexpr int64_t kMaxGridPoints = int64_t{1} << 50;

// Checks every extent is >= 1 and the product stays within kMaxGridPoints.
Status validate_shape(const Shape& shape);

// Parses "NXxNYxNZ" or "NXxNY" (nz = 1); rejects zero, negative and overflowing extents.
Result<Shape> parse_shape(std::string_view text);

// Parses a byte size: "4096", "512MiB", "2GiB", "1.5GB", "64k". Binary (KiB, MiB, GiB, TiB)
// and decimal (KB, MB, GB, TB) suffixes; a bare K/M/G/T is binary.
Result<uint64_t> parse_size(std::string_view text);

// "1.50 GiB": a byte count for people.
std::string format_size(uint64_t bytes);

// Multiplies two non-negative int64 values; false on overflow.
bool checked_mul(int64_t a, int64_t b, int64_t* out);

// Rounds `value` up to a multiple of `align` (align > 0).
constexpr int64_t round_up(int64_t value, int64_t align) {
  return (value + align - 1) / align * align;
}

}  // namespace deepgrid
