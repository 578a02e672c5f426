// Initial conditions of a new grid, computed plane by plane.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "deepgrid/geometry.h"
#include "deepgrid/status.h"

namespace deepgrid {

struct InitSpec {
  enum class Kind { kZero, kConst, kRandom, kGaussian, kSine };
  Kind kind = Kind::kZero;
  double value = 0;   // kConst
  uint64_t seed = 0;  // kRandom

  std::string to_string() const;  // the form parse_init accepts
};

// A component of a new grid of several fields (scheme.h) and its initial values.
struct FieldInit {
  std::string name;
  InitSpec init;
};

// zero | const:V | random:SEED | gaussian | sine
//   random:SEED  uniform in [0, 1), a hash of (SEED, point index): the same on any machine
//   gaussian     exp(-|p - centre|^2 / (2 s^2)), s = min extent / 8 (over extents > 1)
//   sine         prod over axes of sin(pi (i + 1) / (n + 1)): the slowest dirichlet:0 mode
Result<InitSpec> parse_init(std::string_view text);

// Writes the values of plane z (nx * ny values, x fastest) into `out`.
template <typename T>
void init_plane(const InitSpec& spec, const Shape& shape, int64_t z, T* out);

}  // namespace deepgrid
