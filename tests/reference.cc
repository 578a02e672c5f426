// The golden model's step (reference.h), compiled once for float and double without the
// sanitizers' checks: it is the tests' own single-threaded loop over every point, and under
// ThreadSanitizer it took most of the stream suites' longest tests (of the samples of
// StreamGolden.APartsNeededBoxComesOutExactInBands, 84 CPU-s under TSan and 8 in the release
// build: TSan's checks of reads 74%, the reference's own code 9%). The engines keep every check.
#include "reference.h"

#include <type_traits>

#include "model/kernel_library.h"

namespace deepgrid::testing {
namespace {

// Component c of point (x, y, z), the boundary rule applied outside the grid. `u` holds nz
// planes of `components` components each, one component after another (the grid's layout).
template <typename T>
T reference_read(const std::vector<T>& u, const Shape& s, int components, int c, const Boundary& b,
                 int64_t x, int64_t y, int64_t z) {
  const int64_t sx = boundary_source_index(b, x, s.nx);
  const int64_t sy = boundary_source_index(b, y, s.ny);
  const int64_t sz = boundary_source_index(b, z, s.nz);
  if (sx < 0 || sy < 0 || sz < 0) return static_cast<T>(b.value);
  return u[static_cast<size_t>(((sz * components + c) * s.ny + sy) * s.nx + sx)];
}

// Step `step` of a scheme with a user's kernel: the kernel called point by point (1 x 1
// rectangles) on a copy of the grid padded by its radius through the boundary rule; the older
// levels shift and the coefficients stay.
template <typename T>
std::vector<T> reference_kernel_step(const std::vector<T>& u, const Shape& s, const Scheme& sc,
                                     const Boundary& b, int64_t step) {
  const int n = sc.component_count();
  const int rx = sc.radius_x(), ry = sc.radius_y(), rz = sc.radius_z();
  const Shape p{s.nx + 2 * rx, s.ny + 2 * ry, s.nz + 2 * rz};
  auto index = [&](const Shape& sh, int c, int64_t x, int64_t y, int64_t z) {
    return static_cast<size_t>(((z * n + c) * sh.ny + y) * sh.nx + x);
  };
  std::vector<T> padded(static_cast<size_t>(p.points() * n));
  for (int64_t z = 0; z < p.nz; ++z) {
    for (int c = 0; c < n; ++c) {
      for (int64_t y = 0; y < p.ny; ++y) {
        for (int64_t x = 0; x < p.nx; ++x) {
          padded[index(p, c, x, y, z)] = reference_read(u, s, n, c, b, x - rx, y - ry, z - rz);
        }
      }
    }
  }
  std::vector<int> state;  // the current level of each state field
  for (int c = 0, f = 0; f < static_cast<int>(sc.fields().size()); c += sc.fields()[f++].levels) {
    if (!sc.fields()[static_cast<size_t>(f)].coefficient) state.push_back(c);
  }
  std::vector<T> out(u.size());
  for (int64_t z = 0; z < s.nz; ++z) {
    for (int64_t y = 0; y < s.ny; ++y) {
      for (int64_t x = 0; x < s.nx; ++x) {
        std::vector<const T*> in;
        for (int dz = -rz; dz <= rz; ++dz) {
          for (int c = 0; c < n; ++c)
            in.push_back(&padded[index(p, c, x + rx, y + ry, z + rz + dz)]);
        }
        std::vector<T*> o;
        for (int c : state) o.push_back(&out[index(s, c, x, y, z)]);
        const std::conditional_t<sizeof(T) == 4, dg_kernel_args_f32, dg_kernel_args_f64> args{
            in.data(), p.nx, o.data(), 1, 1, 1, x, y, z, s.nx, s.ny, s.nz, step, n};
        if constexpr (sizeof(T) == 4) {
          sc.kernel()->apply_f32()(&args);
        } else {
          sc.kernel()->apply_f64()(&args);
        }
        for (const auto& [to, from] : sc.carried()) {
          out[index(s, to, x, y, z)] = u[index(s, from, x, y, z)];
        }
      }
    }
  }
  return out;
}

}  // namespace

template <typename T>
std::vector<T> reference_step(const std::vector<T>& u, const Shape& s, const Scheme& sc,
                              const Boundary& b, int64_t step) {
  if (sc.kernel()) return reference_kernel_step(u, s, sc, b, step);
  const int n = sc.component_count();
  std::vector<T> out(u.size());
  auto at = [&](int c, int64_t x, int64_t y, int64_t z) -> T& {
    return out[static_cast<size_t>(((z * n + c) * s.ny + y) * s.nx + x)];
  };
  for (int64_t z = 0; z < s.nz; ++z) {
    for (int64_t y = 0; y < s.ny; ++y) {
      for (int64_t x = 0; x < s.nx; ++x) {
        auto read = [&](int c, int64_t dx, int64_t dy, int64_t dz) {
          return reference_read(u, s, n, c, b, x + dx, y + dy, z + dz);
        };
        for (const SchemeUpdate& up : sc.updates()) {
          at(up.component, x, y, z) = reference_update<T>(up, read);
        }
        for (const auto& [to, from] : sc.carried()) at(to, x, y, z) = read(from, 0, 0, 0);
      }
    }
  }
  return out;
}

template std::vector<float> reference_step<float>(const std::vector<float>&, const Shape&,
                                                  const Scheme&, const Boundary&, int64_t);
template std::vector<double> reference_step<double>(const std::vector<double>&, const Shape&,
                                                    const Scheme&, const Boundary&, int64_t);

}  // namespace deepgrid::testing
