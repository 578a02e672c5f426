// The stencil kernels row by row: every width a row can have (below one vector, between
// vectors, beyond the unrolled block), at every alignment of the input and output, against the
// scalar
// definition (c_0 u_0, then fma term by term in canonical order), bitwise, and nothing
// written outside the rectangle.
#include "kernels/stencil_kernel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "deepgrid/geometry.h"
#include "deepgrid/stencil.h"
#include "reference.h"

namespace deepgrid {
namespace {

// bypass: through apply_bypassing_caches (non-temporal stores from each row's first 32-byte
// unit on, which the widths, shifts and strides put at every offset into the row).
template <typename T>
void check_every_width(const Stencil& st, int64_t max_width, bool bypass = false) {
  const StencilKernel<T> kernel(st);
  const int rx = st.radius_x(), ry = st.radius_y(), rz = st.radius_z();
  const int64_t rows = 3, stride = max_width + 2 * rx + 5;  // odd: rows at every alignment
  const Shape planes{stride, rows + 2 * ry, 2 * int64_t{rz} + 1};
  // One plane more than the stencil reads: room for the input's origin to move by up to 16
  // values, so that rows start at every alignment of a 64-byte line as the widths go.
  const std::vector<T> u = testing::random_values<T>({stride, rows + 2 * ry, planes.nz + 1}, 7);
  const T guard = static_cast<T>(-1234.5);
  for (int64_t width = 1; width <= max_width; ++width) {
    const int64_t origin = width * 5 % 17;
    std::vector<const T*> in;
    for (int64_t z = 0; z < planes.nz; ++z)
      in.push_back(u.data() + origin + z * planes.plane_points());
    for (int64_t shift = 0; shift < 4; ++shift) {  // the output's first point, in values
      const ptrdiff_t out_stride = width + 3;
      std::vector<T> out(static_cast<size_t>(shift + rows * out_stride + 8), guard);
      const Rect rect{rx, rx + width, ry, ry + rows};
      if (bypass) {
        kernel.apply_bypassing_caches(in.data(), stride, out.data() + shift, out_stride, rect);
      } else {
        kernel.apply(in.data(), stride, out.data() + shift, out_stride, rect);
      }
      for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
        const int64_t j = i - shift, y = j / out_stride, x = j % out_stride;
        const bool inside = j >= 0 && y < rows && x < width;
        const T want =
            !inside ? guard : testing::reference_stencil_sum<T>(st, [&](int dx, int dy, int dz) {
              return u[static_cast<size_t>(origin + (dz + rz) * planes.plane_points() +
                                           (ry + y + dy) * stride + rx + x + dx)];
            });
        const T got = out[static_cast<size_t>(i)];
        ASSERT_EQ(std::memcmp(&got, &want, sizeof(T)), 0)
            << st.name() << " width " << width << " shift " << shift << " at " << i
            << (inside ? " (inside)" : " (outside the rectangle)") << ": " << got << " vs " << want;
      }
    }
  }
}

TEST(StencilKernel, EveryRowWidthAndAlignmentMatchesTheScalarDefinition) {
  for (const char* name : {"7pt", "13pt", "19pt", "25pt", "27pt", "5pt", "9pt"}) {
    const Stencil st = Stencil::preset(name).value();
    ASSERT_TRUE(StencilKernel<float>(st).specialised()) << name;
    check_every_width<float>(st, 150);
    check_every_width<double>(st, 80);
  }
}

TEST(StencilKernel, StoresPastTheCachesMatchTheScalarDefinition) {
  for (const char* name : {"7pt", "13pt", "19pt", "25pt", "27pt", "5pt", "9pt"}) {
    const Stencil st = Stencil::preset(name).value();
    check_every_width<float>(st, 150, true);
    check_every_width<double>(st, 80, true);
  }
  const Stencil custom =
      Stencil::from_points("custom", {{0, 0, 0, 0.5}, {2, -1, 0, 0.25}, {-1, 0, 1, 0.125}}).value();
  check_every_width<float>(custom, 100, true);  // the generic kernel: ordinary stores
}

TEST(StencilKernel, CustomStencilsMatchTheScalarDefinition) {
  // Not a preset's shape: the generic kernel, in blocks of 1024 points.
  const Stencil st =
      Stencil::from_points("custom",
                           {{0, 0, 0, 0.5}, {2, -1, 0, 0.25}, {-1, 0, 1, 0.125}, {0, 1, -1, 0.125}})
          .value();
  ASSERT_FALSE(StencilKernel<float>(st).specialised());
  check_every_width<float>(st, 1100);
}

}  // namespace
}  // namespace deepgrid
