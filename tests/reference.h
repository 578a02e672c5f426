// The golden model: a plain scalar stencil step on a packed (z, y, x) array, written straight
// from the definitions in stencil.h and boundary.h. Every engine must match it bitwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "deepgrid/boundary.h"
#include "deepgrid/geometry.h"
#include "deepgrid/init.h"
#include "deepgrid/stencil.h"

namespace deepgrid::testing {

template <typename T>
T reference_read(const std::vector<T>& u, const Shape& s, const Boundary& b, int64_t x, int64_t y,
                 int64_t z) {
  const int64_t sx = boundary_source_index(b, x, s.nx);
  const int64_t sy = boundary_source_index(b, y, s.ny);
  const int64_t sz = boundary_source_index(b, z, s.nz);
  if (sx < 0 || sy < 0 || sz < 0) return static_cast<T>(b.value);
  return u[static_cast<size_t>((sz * s.ny + sy) * s.nx + sx)];
}

template <typename T>
std::vector<T> reference_step(const std::vector<T>& u, const Shape& s, const Stencil& st,
                              const Boundary& b) {
  std::vector<T> out(u.size());
  const auto& pts = st.points();
  for (int64_t z = 0; z < s.nz; ++z) {
    for (int64_t y = 0; y < s.ny; ++y) {
      for (int64_t x = 0; x < s.nx; ++x) {
        T acc = static_cast<T>(pts[0].c) *
                reference_read(u, s, b, x + pts[0].dx, y + pts[0].dy, z + pts[0].dz);
        for (size_t k = 1; k < pts.size(); ++k) {
          acc = std::fma(static_cast<T>(pts[k].c),
                         reference_read(u, s, b, x + pts[k].dx, y + pts[k].dy, z + pts[k].dz), acc);
        }
        out[static_cast<size_t>((z * s.ny + y) * s.nx + x)] = acc;
      }
    }
  }
  return out;
}

template <typename T>
std::vector<T> reference_run(std::vector<T> u, const Shape& s, const Stencil& st, const Boundary& b,
                             int64_t steps) {
  for (int64_t i = 0; i < steps; ++i) u = reference_step(u, s, st, b);
  return u;
}

template <typename T>
std::vector<T> random_values(const Shape& s, uint64_t seed) {
  std::vector<T> u(static_cast<size_t>(s.points()));
  const InitSpec init{InitSpec::Kind::kRandom, 0, seed};
  for (int64_t z = 0; z < s.nz; ++z) init_plane(init, s, z, u.data() + z * s.plane_points());
  return u;
}

// Index of the first element whose bits differ, or -1.
template <typename T>
int64_t first_bitwise_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace deepgrid::testing
