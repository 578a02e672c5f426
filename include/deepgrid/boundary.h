// What a stencil point outside the grid reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "deepgrid/status.h"

namespace deepgrid {

struct Boundary {
  enum class Kind { kDirichlet, kNeumann, kPeriodic };
  Kind kind = Kind::kDirichlet;
  double value = 0;  // the constant read outside the grid, for kDirichlet

  std::string to_string() const;  // "dirichlet:0", "neumann", "periodic"
  bool operator==(const Boundary&) const = default;
};

// Parses "dirichlet", "dirichlet:V", "neumann", "periodic".
Result<Boundary> parse_boundary(std::string_view text);

// Where index i (possibly outside [0, n)) reads from along one axis: the index in [0, n) for
// neumann (nearest edge) and periodic (wrap), or -1 for dirichlet (read the constant).
// A point outside the grid along several axes applies this per axis; dirichlet wins.
inline int64_t boundary_source_index(const Boundary& b, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  switch (b.kind) {
    case Boundary::Kind::kDirichlet:
      return -1;
    case Boundary::Kind::kNeumann:
      return i < 0 ? 0 : n - 1;
    case Boundary::Kind::kPeriodic:
      return ((i % n) + n) % n;
  }
  return -1;
}

}  // namespace deepgrid
