// The parsers for what users type: shapes, sizes, dtypes, boundaries, initial conditions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/init.h"

namespace deepgrid {
namespace {

TEST(ParseShape, AcceptsThreeAndTwoExtents) {
  EXPECT_EQ(parse_shape("1024x1024x512").value(), (Shape{1024, 1024, 512}));
  EXPECT_EQ(parse_shape("64x48").value(), (Shape{64, 48, 1}));
  EXPECT_EQ(parse_shape("1X2X3").value(), (Shape{1, 2, 3}));
}

TEST(ParseShape, RejectsBadExtentsWithTheFix) {
  for (const char* bad : {"0x10x10", "-5x10x10", "10x10x0", "1099511627776x1099511627776x1",
                          "99999999999999999999x1x1", "10xAx10", "10", "1x2x3x4", "", "x", "10x"}) {
    SCOPED_TRACE(bad);
    auto r = parse_shape(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("shape"), std::string::npos);
  }
}

TEST(ParseShape, LimitIsInclusiveAndOverflowSafe) {
  EXPECT_TRUE(parse_shape("1125899906842624x1x1").ok());  // exactly 2^50
  EXPECT_FALSE(parse_shape("1125899906842625x1x1").ok());
  EXPECT_FALSE(parse_shape("4294967296x4294967296x4294967296").ok());
}

TEST(ParseSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size("4096").value(), 4096u);
  EXPECT_EQ(parse_size("2GiB").value(), 2ull << 30);
  EXPECT_EQ(parse_size("512MiB").value(), 512ull << 20);
  EXPECT_EQ(parse_size("64k").value(), 64ull << 10);
  EXPECT_EQ(parse_size("1.5GB").value(), 1500000000ull);
  EXPECT_EQ(parse_size("3TB").value(), 3000000000000ull);
  EXPECT_EQ(parse_size("1g").value(), 1ull << 30);
  for (const char* bad : {"", "GiB", "-1GiB", "2 GiB", "2XB", "1e400", "abc"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_size(bad).ok());
  }
}

TEST(FormatSize, ReadsLikeAPerson) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(3ull << 29), "1.50 GiB");
}

TEST(ParseDtype, KnownNames) {
  EXPECT_EQ(parse_dtype("f32").value(), DType::kF32);
  EXPECT_EQ(parse_dtype("float64").value(), DType::kF64);
  EXPECT_FALSE(parse_dtype("f16").ok());
}

TEST(ParseBoundary, AllKindsAndValues) {
  EXPECT_EQ(parse_boundary("dirichlet").value(), (Boundary{Boundary::Kind::kDirichlet, 0}));
  EXPECT_EQ(parse_boundary("dirichlet:-2.5").value(), (Boundary{Boundary::Kind::kDirichlet, -2.5}));
  EXPECT_EQ(parse_boundary("neumann")->kind, Boundary::Kind::kNeumann);
  EXPECT_EQ(parse_boundary("periodic")->kind, Boundary::Kind::kPeriodic);
  for (const char* bad : {"reflect", "dirichlet:", "dirichlet:abc", "dirichlet:inf", "Neumann"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_boundary(bad).ok());
  }
  EXPECT_EQ(parse_boundary(parse_boundary("dirichlet:0.1")->to_string()).value().value, 0.1);
}

TEST(BoundarySourceIndex, PerKind) {
  const Boundary d{Boundary::Kind::kDirichlet, 1}, n{Boundary::Kind::kNeumann, 0},
      p{Boundary::Kind::kPeriodic, 0};
  EXPECT_EQ(boundary_source_index(d, 3, 5), 3);
  EXPECT_EQ(boundary_source_index(d, -1, 5), -1);
  EXPECT_EQ(boundary_source_index(n, -3, 5), 0);
  EXPECT_EQ(boundary_source_index(n, 7, 5), 4);
  EXPECT_EQ(boundary_source_index(p, -1, 5), 4);
  EXPECT_EQ(boundary_source_index(p, 5, 5), 0);
  EXPECT_EQ(boundary_source_index(p, -6, 5), 4);
  EXPECT_EQ(boundary_source_index(p, -1, 1), 0);
}

TEST(ParseInit, AllForms) {
  EXPECT_EQ(parse_init("zero")->kind, InitSpec::Kind::kZero);
  EXPECT_EQ(parse_init("const:2.5")->value, 2.5);
  EXPECT_EQ(parse_init("random:42")->seed, 42u);
  EXPECT_EQ(parse_init("gaussian")->kind, InitSpec::Kind::kGaussian);
  EXPECT_EQ(parse_init("sine")->kind, InitSpec::Kind::kSine);
  for (const char* bad : {"ones", "const:", "const:x", "random:-1", "random:", "foo:1"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_init(bad).ok());
  }
}

TEST(InitPlane, RandomIsAFunctionOfSeedAndIndex) {
  const Shape s{7, 5, 3};
  std::vector<double> a(35), b(35), c(35);
  init_plane(*parse_init("random:9"), s, 2, a.data());
  init_plane(*parse_init("random:9"), s, 2, b.data());
  init_plane(*parse_init("random:10"), s, 2, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (double v : a) {
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 1);
  }
}

TEST(InitPlane, SineAndGaussianPeakInTheMiddle) {
  const Shape s{9, 9, 9};
  std::vector<float> mid(81), edge(81);
  for (const char* kind : {"sine", "gaussian"}) {
    init_plane(*parse_init(kind), s, 4, mid.data());
    init_plane(*parse_init(kind), s, 0, edge.data());
    EXPECT_GT(mid[40], mid[0]);
    EXPECT_GT(mid[40], edge[40]);
  }
}

// The gaussian's values are exp's of -d^2 / (2 sigma^2) rounded to the dtype, also where
// init_plane skips exp because the value rounds to +0: compared with exp itself over a plane
// whose exponents run from 0 to below -1000 (sigma 1 on a grid 4 planes deep), through the
// range where f32 holds subnormals. Planes large enough to be filled by several threads.
template <typename T>
void expect_gaussian_as_exp() {
  const Shape s{700, 300, 4};
  std::vector<T> got(static_cast<size_t>(s.plane_points()));
  for (int64_t z : {int64_t{0}, int64_t{2}}) {
    init_plane(*parse_init("gaussian"), s, z, got.data());
    const double c[3] = {(s.nx - 1) / 2.0, (s.ny - 1) / 2.0, (s.nz - 1) / 2.0};
    int64_t zeros = 0, tiny = 0;
    for (int64_t y = 0; y < s.ny; ++y) {
      for (int64_t x = 0; x < s.nx; ++x) {
        const double d2 =
            (x - c[0]) * (x - c[0]) + (y - c[1]) * (y - c[1]) + (z - c[2]) * (z - c[2]);
        const T want = static_cast<T>(std::exp(-d2 / 2.0));
        const T v = got[static_cast<size_t>(y * s.nx + x)];
        ASSERT_EQ(std::memcmp(&v, &want, sizeof(T)), 0) << x << "," << y << "," << z;
        zeros += v == T(0);
        tiny += v > T(0) && v < std::numeric_limits<T>::min();
      }
    }
    EXPECT_GT(zeros, 0);
    EXPECT_GT(tiny, 0);  // subnormals near the cut-off, which must not be lost
  }
}

TEST(InitPlane, GaussianValuesAreExpRoundedToTheDtype) {
  expect_gaussian_as_exp<float>();
  expect_gaussian_as_exp<double>();
}

}  // namespace
}  // namespace deepgrid
