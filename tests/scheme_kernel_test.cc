// The scheme kernels row by row: the fused one-pass form (wave2/4/8, heat-var and JSON schemes
// of the same form) and the term-by-term path (the coupled scheme), at every row width and
// output alignment, against scheme.h's definition (tests/reference.h), bitwise; nothing
// written outside the rectangle, and carried components copied.
#include "kernels/scheme_kernel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "deepgrid/scheme.h"
#include "reference.h"
#include "test_schemes.h"

namespace deepgrid {
namespace {

Scheme scheme_named(const std::string& name) {
  return name.front() == '{' ? Scheme::from_json(name).value() : Scheme::preset(name).value();
}

template <typename T>
void check_every_width(const Scheme& sc, int64_t max_width) {
  const SchemeKernel<T> kernel(sc);
  const int rx = sc.radius_x(), ry = sc.radius_y(), rz = sc.radius_z();
  const int n = sc.component_count();
  const int64_t rows = 2, stride = max_width + 2 * rx + 5;  // odd: rows at every alignment
  const int64_t field = stride * (rows + 2 * ry);           // one component's plane
  const Shape planes{stride, (rows + 2 * ry) * n, 2 * int64_t{rz} + 1};
  const std::vector<T> u = testing::random_values<T>(planes, 11);
  std::vector<const T*> in;
  for (int64_t z = 0; z < planes.nz; ++z) in.push_back(u.data() + z * planes.plane_points());
  const T guard = static_cast<T>(-1234.5);
  for (int64_t width = 1; width <= max_width; ++width) {
    for (int64_t shift = 0; shift < 3; ++shift) {  // the output's first point, in values
      const ptrdiff_t out_stride = width + 3, out_field = rows * out_stride + 5;
      std::vector<T> out(static_cast<size_t>(shift + n * out_field), guard);
      kernel.apply(in.data(), stride, field, out.data() + shift, out_stride, out_field,
                   Rect{rx, rx + width, ry, ry + rows}, {});
      std::vector<T> want(out.size(), guard);
      for (int64_t y = 0; y < rows; ++y) {
        for (int64_t x = 0; x < width; ++x) {
          auto read = [&](int c, int dx, int dy, int dz) {
            return u[static_cast<size_t>((dz + rz) * planes.plane_points() + c * field +
                                         (ry + y + dy) * stride + rx + x + dx)];
          };
          auto at = [&](int c) -> T& {
            return want[static_cast<size_t>(shift + c * out_field + y * out_stride + x)];
          };
          for (const SchemeUpdate& up : sc.updates())
            at(up.component) = testing::reference_update<T>(up, read);
          for (const auto& [to, from] : sc.carried()) at(to) = read(from, 0, 0, 0);
        }
      }
      ASSERT_EQ(std::memcmp(out.data(), want.data(), sizeof(T) * out.size()), 0)
          << sc.name() << " width " << width << " shift " << shift;
    }
  }
}

TEST(SchemeKernel, TheFusedFormMatchesTheDefinitionAtEveryWidth) {
  for (const char* name : {"wave2", "wave4", "wave8", "heat-var", testing::kFusedFormScheme}) {
    const Scheme sc = scheme_named(name);
    ASSERT_TRUE(SchemeKernel<float>(sc).fused()) << sc.name();
    ASSERT_TRUE(SchemeKernel<double>(sc).fused()) << sc.name();
    check_every_width<float>(sc, 150);
    check_every_width<double>(sc, 80);
  }
}

TEST(SchemeKernel, OtherSchemesMatchTheDefinitionTermByTerm) {
  const Scheme coupled = scheme_named(testing::kCoupledScheme);
  ASSERT_FALSE(SchemeKernel<float>(coupled).fused());
  check_every_width<float>(coupled, 150);
  check_every_width<double>(coupled, 80);
}

}  // namespace
}  // namespace deepgrid
