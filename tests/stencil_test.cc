// The stencil model: presets, canonical order, JSON, coefficient overrides.
#include "deepgrid/stencil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

namespace deepgrid {
namespace {

TEST(Presets, PointCountsRadiiAndFlops) {
  struct Want {
    const char* name;
    int points, radius, rz;
  } wants[] = {{"7pt", 7, 1, 1},   {"13pt", 13, 2, 2}, {"19pt", 19, 1, 1}, {"25pt", 25, 4, 4},
               {"27pt", 27, 1, 1}, {"5pt", 5, 1, 0},   {"9pt", 9, 1, 0}};
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    const Stencil s = Stencil::preset(w.name).value();
    EXPECT_EQ(s.size(), w.points);
    EXPECT_EQ(s.radius(), w.radius);
    EXPECT_EQ(s.radius_z(), w.rz);
    EXPECT_EQ(s.flops_per_update(), 2 * w.points - 1);
  }
  EXPECT_EQ(Stencil::preset("7pt")->flops_per_update(), 13);
  EXPECT_EQ(Stencil::preset("27pt")->flops_per_update(), 53);
}

TEST(Presets, CoefficientsArePositiveAndSumToOneExactly) {
  for (const auto& name : preset_names()) {
    SCOPED_TRACE(name);
    double sum = 0;
    const Stencil st = Stencil::preset(name).value();
    for (const auto& p : st.points()) {
      EXPECT_GT(p.c, 0);
      EXPECT_EQ(static_cast<double>(static_cast<float>(p.c)), p.c) << "exact in f32";
      sum += p.c;
    }
    EXPECT_EQ(sum, 1.0);
  }
}

TEST(Stencil, PointsAreSortedByDzDyDx) {
  const Stencil s =
      Stencil::from_json(R"({"points": [[1,0,0,1],[0,0,-1,2],[-1,0,0,3],[0,1,0,4]]})").value();
  ASSERT_EQ(s.size(), 4);
  EXPECT_EQ(s.points()[0], (StencilPoint{0, 0, -1, 2}));
  EXPECT_EQ(s.points()[1], (StencilPoint{-1, 0, 0, 3}));
  EXPECT_EQ(s.points()[2], (StencilPoint{1, 0, 0, 1}));
  EXPECT_EQ(s.points()[3], (StencilPoint{0, 1, 0, 4}));
}

TEST(Stencil, JsonErrorsAreClear) {
  struct Case {
    const char* json;
    const char* keyword;
  } cases[] = {
      {R"({"points": [[0,0,0)", "malformed"},
      {R"({"pts": []})", "points"},
      {R"({"points": []})", "no points"},
      {R"({"points": [[0,0,1]]})", "[dx, dy, dz, c]"},
      {R"({"points": [[0.5,0,0,1]]})", "integer"},
      {R"({"points": [[0,0,0,1],[0,0,0,2]]})", "twice"},
      {R"({"points": [[17,0,0,1]]})", "beyond"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    auto r = Stencil::from_json(c.json);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.keyword), std::string::npos) << r.status().message();
  }
}

TEST(Stencil, RoundTripsThroughJson) {
  const Stencil a = Stencil::preset("19pt").value();
  const Stencil b = Stencil::from_json(a.to_json()).value();
  EXPECT_EQ(a.points(), b.points());
  EXPECT_EQ(b.name(), "19pt");
}

TEST(Stencil, CoefficientsPerPointOrPerShell) {
  const Stencil s = Stencil::preset("7pt").value();
  const Stencil shells = s.with_coefficients("0.4,0.1").value();
  for (const auto& p : shells.points()) EXPECT_EQ(p.c, (p.dx || p.dy || p.dz) ? 0.1 : 0.4);
  const Stencil each = s.with_coefficients("1,2,3,4,5,6,7").value();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(each.points()[static_cast<size_t>(i)].c, i + 1);
  auto bad = s.with_coefficients("1,2,3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("7 coefficients"), std::string::npos);
  EXPECT_FALSE(s.with_coefficients("0.4,x").ok());
  EXPECT_FALSE(s.with_coefficients("").ok());
}

TEST(Stencil, UnknownPresetListsTheKnownOnes) {
  auto r = Stencil::preset("8pt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("7pt"), std::string::npos);
}

TEST(Stencil, ResolvesFiles) {
  const std::string path = ::testing::TempDir() + "/st.json";
  std::ofstream(path) << R"({"name": "mine", "points": [[0,0,0,0.5],[1,0,0,0.5]]})";
  const Stencil s = Stencil::resolve(path).value();
  EXPECT_EQ(s.name(), "mine");
  EXPECT_EQ(s.size(), 2);
  EXPECT_FALSE(Stencil::resolve(::testing::TempDir() + "/missing.json").ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace deepgrid
