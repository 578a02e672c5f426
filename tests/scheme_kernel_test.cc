// The scheme kernels row by row: the fused one-pass form (wave2/4/8, heat-var and JSON schemes
// of the same form) and the term-by-term path (the coupled scheme), at every row width and
// output alignment, against scheme.h's definition (tests/reference.h), bitwise; nothing
// written outside the rectangle, and carried components copied.
#include "kernels/scheme_kernel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "deepgrid/scheme.h"
#include "reference.h"
#include "test_schemes.h"

namespace deepgrid {
namespace {

Scheme scheme_named(const std::string& name) {
  return name.front() == '{' ? Scheme::from_json(name).value() : Scheme::preset(name).value();
}

// Aliased components (SchemeKernel::aliasable(), lean wavefronts): `aliased` says which are
// read from planes of their own; their rows in the input planes are then overwritten, so that
// reading them there shows. Those in `unwritten` are not written. `rotated`: u@1's plane is the
// output's u (SchemeKernel::rotation()), which the kernel writes over it point by point.
template <typename T>
void check_every_width(const Scheme& sc, int64_t max_width, uint64_t aliased = 0,
                       uint64_t unwritten = 0, bool rotated = false) {
  const SchemeKernel<T> kernel(sc);
  const auto [u1, u0] = kernel.rotation();  // u@1, u
  const int rx = sc.radius_x(), ry = sc.radius_y(), rz = sc.radius_z();
  const int n = sc.component_count();
  const int64_t rows = 2, stride = max_width + 2 * rx + 5;  // odd: rows at every alignment
  const int64_t field = stride * (rows + 2 * ry);           // one component's plane
  const Shape planes{stride, (rows + 2 * ry) * n, 2 * int64_t{rz} + 1};
  // One plane more than the stencil reads: room for the input's origin to move by up to 16
  // values, so that rows start at every alignment of a 64-byte line as the widths go.
  const std::vector<T> u =
      testing::random_values<T>({stride, (rows + 2 * ry) * n, planes.nz + 1}, 11);
  const ptrdiff_t own_stride = stride + 7;
  std::vector<std::vector<T>> own(static_cast<size_t>(n));
  std::vector<const T*> own_planes(static_cast<size_t>(n));
  std::vector<ptrdiff_t> own_strides(static_cast<size_t>(n), own_stride);
  const internal::AliasedPlanes<T> aliases{aliased, own_planes.data(), own_strides.data(),
                                           unwritten, rotated};
  const T guard = static_cast<T>(-1234.5);
  for (int64_t width = 1; width <= max_width; ++width) {
    const int64_t origin = width * 5 % 17;
    // The aliased components' centre planes, rows stride + 7 apart, and the input without
    // them.
    std::vector<T> input = u;
    for (int c = 0; c < n; ++c) {
      if (!aliases.has(c)) continue;
      std::vector<T>& p = own[static_cast<size_t>(c)];
      p.assign(static_cast<size_t>(own_stride * (rows + 2 * ry)), T{0});
      for (int64_t y = 0; y < rows + 2 * ry; ++y) {
        for (int64_t x = 0; x < stride; ++x) {
          const size_t from =
              static_cast<size_t>(origin + rz * planes.plane_points() + c * field + y * stride + x);
          p[static_cast<size_t>(y * own_stride + x)] = u[from];
          input[from] = static_cast<T>(7.25);
        }
      }
      own_planes[static_cast<size_t>(c)] = p.data();
    }
    std::vector<const T*> in;
    for (int64_t z = 0; z < planes.nz; ++z)
      in.push_back(input.data() + origin + z * planes.plane_points());
    for (int64_t shift = 0; shift < 3; ++shift) {  // the output's first point, in values
      const ptrdiff_t out_stride = width + 3, out_field = rows * out_stride + 5;
      const ptrdiff_t pad = ry * out_stride + rx;  // room for a rotated plane's (0, 0)
      std::vector<T> out(static_cast<size_t>(pad + shift + n * out_field), guard);
      T* const o = out.data() + pad + shift;
      if (rotated) {
        for (int64_t y = 0; y < rows; ++y) {
          for (int64_t x = 0; x < width; ++x) {
            o[u0 * out_field + y * out_stride + x] =
                own[static_cast<size_t>(u1)][static_cast<size_t>((ry + y) * own_stride + rx + x)];
          }
        }
        own_planes[static_cast<size_t>(u1)] = o + u0 * out_field - pad;
        own_strides[static_cast<size_t>(u1)] = out_stride;
      }
      kernel.apply(in.data(), stride, field, o, out_stride, out_field,
                   Rect{rx, rx + width, ry, ry + rows}, {}, aliases);
      std::vector<T> want(out.size(), guard);
      for (int64_t y = 0; y < rows; ++y) {
        for (int64_t x = 0; x < width; ++x) {
          auto read = [&](int c, int dx, int dy, int dz) {
            return u[static_cast<size_t>(origin + (dz + rz) * planes.plane_points() + c * field +
                                         (ry + y + dy) * stride + rx + x + dx)];
          };
          auto at = [&](int c) -> T& {
            return want[static_cast<size_t>(pad + shift + c * out_field + y * out_stride + x)];
          };
          for (const SchemeUpdate& up : sc.updates())
            at(up.component) = testing::reference_update<T>(up, read);
          for (const auto& [to, from] : sc.carried()) {
            if (aliases.writes(to)) at(to) = read(from, 0, 0, 0);
          }
        }
      }
      ASSERT_EQ(std::memcmp(out.data(), want.data(), sizeof(T) * out.size()), 0)
          << sc.name() << " width " << width << " shift " << shift << " aliased " << aliased
          << " unwritten " << unwritten << " rotated " << rotated;
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

// Lean wavefronts leave out of their rings the carried components read at the point only, if
// what they are carried from is kept: the wave's u@1 (from u) and m, heat-var's kappa; never
// a plain stencil's u.
TEST(SchemeKernel, AliasableComponentsAreThoseCarriedAndReadAtThePoint) {
  EXPECT_EQ(SchemeKernel<float>(scheme_named("wave2")).aliasable(), 0b110u);  // u, u@1, m
  EXPECT_EQ(SchemeKernel<float>(scheme_named("wave8")).aliasable(), 0b110u);
  EXPECT_EQ(SchemeKernel<float>(scheme_named("heat-var")).aliasable(), 0b10u);  // u, kappa
  EXPECT_EQ(SchemeKernel<float>(Scheme::resolve("7pt").value()).aliasable(), 0u);
  // u@2 <- u@1 <- u: u@1 is aliased, so u@2 (two levels down) is kept.
  const Scheme three = scheme_named(testing::kThreeLevelScheme);
  EXPECT_EQ(SchemeKernel<float>(three).aliasable(), 0b010u);
}

// Every path (fused or term by term) reads aliased components from their own planes, and
// writes them only when asked.
TEST(SchemeKernel, AliasedComponentsAreReadFromTheirOwnPlanes) {
  for (const char* name : {"wave2", "wave8", "heat-var", testing::kFusedFormScheme,
                           testing::kCoupledScheme, testing::kThreeLevelScheme}) {
    const Scheme sc = scheme_named(name);
    const uint64_t aliased = SchemeKernel<float>(sc).aliasable();
    ASSERT_NE(aliased, 0u) << sc.name();
    for (uint64_t unwritten : {aliased, uint64_t{0}}) {
      check_every_width<float>(sc, 70, aliased, unwritten);
      check_every_width<double>(sc, 40, aliased, unwritten);
    }
  }
}

// Time levels that take turns (the in-core engine at bt 1): the wave's new u goes over u@1's
// plane, which the kernel reads at the point, so each point must be computed once, at every
// width and alignment (the vectors that round a row off elsewhere compute points twice). u@1
// left unwritten (the passes of a run), or written with m or without it (its last pass).
TEST(SchemeKernel, RotatedTimeLevelsWriteTheNewUOverTheOldOne) {
  // (The fused-form scheme reads v@1 as its first point term, v as its second.)
  for (const char* name : {"wave2", "wave4", "wave8", testing::kFusedFormScheme}) {
    const Scheme sc = scheme_named(name);
    ASSERT_EQ(SchemeKernel<float>(sc).rotation(), std::make_pair(1, 0)) << sc.name();  // u@1, u
    const uint64_t aliased = SchemeKernel<float>(sc).aliasable();
    for (uint64_t unwritten : {aliased, aliased & ~uint64_t{2}, uint64_t{0}}) {
      check_every_width<float>(sc, 150, aliased, unwritten, true);
      check_every_width<double>(sc, 80, aliased, unwritten, true);
    }
  }
  // Nothing to turn: no u@1, a term-by-term update, or u@1 carried further (u@2 <- u@1).
  for (const char* name : {"heat-var", testing::kCoupledScheme, testing::kThreeLevelScheme}) {
    EXPECT_EQ(SchemeKernel<float>(scheme_named(name)).rotation(), std::make_pair(-1, -1)) << name;
  }
}

}  // namespace
}  // namespace deepgrid
