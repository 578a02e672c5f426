// Every engine against the scalar reference kernel, bitwise: presets and random custom
// stencils, both dtypes, every boundary, odd shapes, several thread counts and step counts.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_caches.h"
#include "deepgrid/dtype.h"
#include "engines/incore_engine.h"
#include "engines/padded_grid.h"
#include "engines/wavefront.h"
#include "reference.h"

namespace deepgrid {
namespace {

using testing::first_bitwise_difference;
using testing::random_values;
using testing::reference_run;

const Boundary kBoundaries[] = {
    {Boundary::Kind::kDirichlet, 0},
    {Boundary::Kind::kDirichlet, 0.75},
    {Boundary::Kind::kNeumann, 0},
    {Boundary::Kind::kPeriodic, 0},
};

const Shape kShapes[] = {{37, 23, 19}, {1, 1, 1}, {64, 48, 1}, {5, 7, 3}, {17, 1, 9}, {2, 33, 4}};

bool fits(const Stencil& st, const Shape& s) {
  return st.radius_x() <= s.nx && st.radius_y() <= s.ny && st.radius_z() <= s.nz;
}

// Advances packed values with the in-core engine.
template <typename T>
std::vector<T> incore_run(const std::vector<T>& u, const Shape& s, const Stencil& st,
                          const Boundary& b, int64_t steps, const InCoreOptions& opt,
                          const GridPlacement& placement = {}) {
  auto engine = InCoreEngine<T>::create(s, st, steps, opt);
  EXPECT_TRUE(engine.ok());
  for (int64_t z = 0; z < s.nz; ++z) engine->load_plane(z, u.data() + z * s.plane_points());
  EXPECT_EQ(engine->advance(b, steps, {}, {nullptr, 0, placement}), steps);
  std::vector<T> out(u.size());
  for (int64_t z = 0; z < s.nz; ++z) engine->store_plane(z, out.data() + z * s.plane_points());
  return out;
}

std::string describe(const InCoreOptions& o) {
  return std::to_string(o.threads) + " threads, bt " + std::to_string(o.bt) + ", tiles " +
         std::to_string(o.tile_x) + "x" + std::to_string(o.tile_y);
}

// Several tiles per thread even on the small grids of these tests, whose output is stored past
// the caches as that of grids larger than them is (the engine's other tests leave it to the
// plan: through the caches on these grids).
InCoreOptions two_threads_on_small_tiles(int bt) {
  InCoreOptions opt;
  opt.threads = 2;
  opt.bt = bt;
  opt.tile_x = 8;
  opt.tile_y = 6;
  opt.output_bypass = InCoreOptions::CacheBypass::kOn;
  return opt;
}

template <typename T>
void expect_engine_matches_reference(const Stencil& st, const Shape& s, const Boundary& b,
                                     int64_t steps, const InCoreOptions& opt) {
  SCOPED_TRACE(st.describe() + " on " + s.to_string() + " " +
               std::string(dtype_name(dtype_of<T>())) + ", " + b.to_string() + ", " +
               std::to_string(steps) + " steps, " + describe(opt));
  const auto u = random_values<T>(s, 42);
  const auto want = reference_run(u, s, st, b, steps);
  const auto got = incore_run(u, s, st, b, steps, opt);
  const int64_t diff = first_bitwise_difference(want, got);
  ASSERT_EQ(diff, -1) << "first difference at index " << diff << ": reference "
                      << want[static_cast<size_t>(std::max<int64_t>(diff, 0))] << ", engine "
                      << got[static_cast<size_t>(std::max<int64_t>(diff, 0))];
}

template <typename T>
void expect_engine_matches_reference(const Stencil& st, const Shape& s, const Boundary& b,
                                     int64_t steps, int threads) {
  InCoreOptions opt;
  opt.threads = threads;
  expect_engine_matches_reference<T>(st, s, b, steps, opt);
}

class PresetGolden : public ::testing::TestWithParam<std::string> {};

// The preset's shape with coefficients that are not powers of two, so that products round
// and any change of evaluation order or fusion shows up in the bits.
Stencil with_rounding_coefficients(const Stencil& st) {
  std::string csv;
  for (int k = 0; k < st.size(); ++k) {
    if (k > 0) csv += ',';
    csv += std::to_string(0.9 / st.size() + 0.0123 * (k % 5) - 0.01);
  }
  return st.with_coefficients(csv).value();
}

TEST_P(PresetGolden, InCoreMatchesReferenceBitwise) {
  const Stencil preset = Stencil::preset(GetParam()).value();
  for (const Stencil& st : {preset, with_rounding_coefficients(preset)}) {
    EXPECT_TRUE(StencilKernel<float>(st).specialised()) << "presets use the specialised kernels";
    for (const Shape& s : kShapes) {
      if (!fits(st, s)) continue;
      for (const Boundary& b : kBoundaries) {
        expect_engine_matches_reference<float>(st, s, b, 3, 2);
        expect_engine_matches_reference<double>(st, s, b, 3, 2);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPresets, PresetGolden,
                         ::testing::Values("7pt", "13pt", "19pt", "25pt", "27pt", "5pt", "9pt"));

TEST(Golden, PresetWithCustomCoefficientsKeepsTheFastPathAndMatches) {
  const Stencil st = Stencil::preset("27pt")->with_coefficients("0.3,-0.05,0.02,0.011").value();
  EXPECT_TRUE(StencilKernel<double>(st).specialised());
  expect_engine_matches_reference<double>(st, {19, 11, 7}, kBoundaries[2], 4, 2);
  expect_engine_matches_reference<float>(st, {19, 11, 7}, kBoundaries[3], 4, 2);
}

// Random point lists exercise the generic kernel: asymmetric offsets, negative coefficients.
TEST(Golden, RandomCustomStencilsMatchReference) {
  std::mt19937 rng(123);
  for (int trial = 0; trial < 12; ++trial) {
    std::uniform_int_distribution<int> off(-2, 2), count(1, 12);
    std::uniform_real_distribution<double> coef(-0.3, 0.5);
    std::vector<StencilPoint> pts;
    const bool flat = trial % 4 == 3;
    const int n = count(rng);
    for (int i = 0; i < n; ++i) {
      StencilPoint p{off(rng), off(rng), flat ? 0 : off(rng), coef(rng)};
      bool dup = false;
      for (const auto& q : pts) dup = dup || (q.dx == p.dx && q.dy == p.dy && q.dz == p.dz);
      if (!dup) pts.push_back(p);
    }
    const Stencil st = Stencil::from_points("random" + std::to_string(trial), pts).value();
    EXPECT_FALSE(StencilKernel<float>(st).specialised() && st.size() != 7);
    for (const Boundary& b : kBoundaries) {
      expect_engine_matches_reference<float>(st, {13, 9, 6}, b, 2, 2);
      expect_engine_matches_reference<double>(st, {13, 9, 6}, b, 2, 1);
    }
  }
}

TEST(Golden, ThreadCountsDoNotChangeResults) {
  const Stencil st = Stencil::preset("7pt").value();
  for (int threads : {1, 2, 3, 4, 7}) {
    expect_engine_matches_reference<float>(st, {37, 23, 19}, kBoundaries[1], 5, threads);
  }
}

TEST(Golden, ManyStepCounts) {
  const Stencil st = Stencil::preset("13pt").value();
  for (int64_t steps : {0, 1, 2, 5, 9}) {
    expect_engine_matches_reference<double>(st, {21, 18, 11}, kBoundaries[3], steps, 2);
  }
}

// One engine advanced under several boundaries in turn (as a library user may): each leg's
// ghosts follow its rule, though a dirichlet fill is skipped where the ghosts already hold its
// value (padded_grid.h); -0 and +0 differ in their bits, so they are different values.
TEST(Golden, EachAdvanceReadsTheGhostsOfItsOwnBoundary) {
  const Stencil st = with_rounding_coefficients(Stencil::preset("13pt").value());
  const Shape s{19, 14, 11};
  const Boundary legs[] = {{Boundary::Kind::kDirichlet, 0.75}, {Boundary::Kind::kDirichlet, 0.75},
                           {Boundary::Kind::kDirichlet, -2},   {Boundary::Kind::kNeumann, 0},
                           {Boundary::Kind::kDirichlet, -2},   {Boundary::Kind::kPeriodic, 0},
                           {Boundary::Kind::kDirichlet, 0},    {Boundary::Kind::kDirichlet, -0.0}};
  for (int bt : {1, 2, 3}) {
    InCoreOptions opt = two_threads_on_small_tiles(bt);
    auto engine = InCoreEngine<float>::create(s, st, 5, opt).value();
    auto want = random_values<float>(s, 5);
    for (int64_t z = 0; z < s.nz; ++z) engine.load_plane(z, want.data() + z * s.plane_points());
    for (const Boundary& b : legs) {
      SCOPED_TRACE("bt " + std::to_string(bt) + ", then " + b.to_string());
      const int64_t steps = 1 + bt;  // a pass and a short one: both grid copies read ghosts
      want = reference_run(want, s, Scheme(st), b, steps);
      ASSERT_EQ(engine.advance(b, steps), steps);
      std::vector<float> got(want.size());
      for (int64_t z = 0; z < s.nz; ++z) engine.store_plane(z, got.data() + z * s.plane_points());
      ASSERT_EQ(first_bitwise_difference(want, got), -1);
    }
  }
}

// At bt 1 the wave's u and u@1 take turns between the passes of one advance (InCoreEngine): an
// advance that its progress stops between passes still leaves u@1 where it belongs, and the
// next ones run on from there (one step; five, stopped after three again), also when the advance
// before or after had a source on u@1, which kept its levels from turning; rows as wide as the
// grid and tiles 8 values wide.
TEST(Golden, TimeLevelsThatTakeTurnsAreInPlaceWhenAnAdvanceStops) {
  const Scheme sc = Scheme::preset("wave4").value();
  const Shape s{21, 13, 11};
  const int n = sc.component_count();
  for (const int64_t tile_x : {int64_t{0}, int64_t{8}}) {
    for (const Boundary& b : kBoundaries) {
      SCOPED_TRACE(b.to_string() + ", tiles " + std::to_string(tile_x) + " wide");
      InCoreOptions opt = two_threads_on_small_tiles(1);
      opt.tile_x = tile_x;
      auto engine = InCoreEngine<float>::create(s, sc, 9, opt).value();
      std::vector<float> want = random_values<float>({s.nx, s.ny, s.nz * n}, 7);
      for (int64_t z = 0; z < s.nz; ++z)
        engine.load_plane(z, want.data() + z * s.plane_points() * n);
      // A source on u@1 keeps the levels from turning (the rings then hold u@1): the same
      // stops with it, every other run.
      Probes shot;
      shot.sources.push_back({"u@1", 4, 5, 6, 0, 0, 1, {0.5, -1, 2, 0.25, 1, -0.5, 3, 1, 2}});
      const ResolvedProbes sources = resolve_probes(shot, s, sc.components()).value();
      int64_t step = 0;
      int run = 0;
      for (const int64_t steps : {int64_t{9}, int64_t{1}, int64_t{5}, int64_t{4}}) {
        const bool sourced = run++ % 2 == 1;
        const int64_t done = engine.advance(
            b, steps, [](int64_t d, int64_t) { return d < 3; },
            sourced ? ProbeRun{&sources, step} : ProbeRun{});
        ASSERT_EQ(done, std::min<int64_t>(3, steps));
        want = sourced ? reference_run(want, s, sc, b, done, shot, step, nullptr)
                       : reference_run(want, s, sc, b, done, step);
        step += done;
        std::vector<float> got(want.size());
        for (int64_t z = 0; z < s.nz; ++z)
          engine.store_plane(z, got.data() + z * s.plane_points() * n);
        ASSERT_EQ(first_bitwise_difference(want, got), -1) << "after step " << step;
      }
    }
  }
}

// Temporal blocking: every depth (deeper than the run, not dividing the step count), and tiles
// forced small so that interior tiles, edge tiles and tiles narrower than their halo all occur.
TEST(Golden, WavefrontDepthsAndTilesDoNotChangeResults) {
  const struct { int64_t x, y; } tiles[] = {{0, 0}, {4, 3}, {7, 5}, {1, 1}, {64, 2}};
  for (const char* name : {"7pt", "13pt", "27pt", "5pt"}) {
    const Stencil st = with_rounding_coefficients(Stencil::preset(name).value());
    for (int bt : {1, 2, 3, 5, 8}) {
      for (const auto& t : tiles) {
        InCoreOptions opt;
        opt.threads = 2;
        opt.bt = bt;
        opt.tile_x = t.x;
        opt.tile_y = t.y;
        for (const Boundary& b : kBoundaries) {
          expect_engine_matches_reference<float>(st, {11, 9, 7}, b, 7, opt);
        }
        expect_engine_matches_reference<double>(st, {13, 6, 5}, kBoundaries[3], 4, opt);
      }
    }
  }
}

TEST(WavefrontPlan, SizesTilesForTheCacheBudget) {
  InCoreOptions opt;
  const Stencil st = Stencil::preset("7pt").value();
  const WavefrontPlan p = plan_wavefront({512, 512, 512}, st, 4, 100, opt);
  EXPECT_GE(p.bt, 2);
  EXPECT_LE(p.workspace_bytes, opt.cache_bytes + (int64_t{1} << 16));
  EXPECT_GE(p.tile_y, 8);
  opt.bt = 50;
  EXPECT_EQ(plan_wavefront({8, 8, 8}, st, 4, 3, opt).bt, 3) << "never deeper than the run";
  opt.bt = 0;
  opt.tile_x = 5;
  opt.tile_y = 1000;
  const WavefrontPlan forced = plan_wavefront({8, 8, 8}, st, 8, 10, opt);
  EXPECT_EQ(forced.tile_x, 5);
  EXPECT_EQ(forced.tile_y, 8) << "clamped to the grid";
}

// Tiles of one x range run as chains along y where each thread gets two or more of them
// (WavefrontEdges), with room for each thread's edge rows counted in the engine's memory; not
// at bt 1 (no level hands anything on), nor with carry_edges off.
TEST(WavefrontPlan, ChainsTilesAlongYWhereEachThreadGetsSeveral) {
  InCoreOptions opt;
  opt.threads = 2;
  opt.bt = 4;
  opt.tile_x = 512;
  opt.tile_y = 32;
  const Stencil st = Stencil::preset("7pt").value();
  const Shape s{512, 512, 64};
  const WavefrontPlan p = plan_wavefront(s, st, 4, 100, opt);
  EXPECT_EQ(p.chain_tiles, 8) << "16 tiles of 32 rows, two chains";
  // 3 levels hand on 2 rows of every plane a level computes (64 + 2 * 4), rows of 544 values
  // (wavefront_row_stride of a 520-wide frame).
  const int64_t edges = 3 * (64 + 2 * 4) * 2 * int64_t{528 + 16} * 4;
  EXPECT_GE(p.edges_bytes, edges);
  EXPECT_LT(p.edges_bytes, edges + (int64_t{2} << 20));
  EXPECT_EQ(InCoreEngine<float>::memory_bytes(s, st, 100, opt) -
                InCoreEngine<float>::memory_bytes(s, st, 100,
                                                  [&] {
                                                    InCoreOptions off = opt;
                                                    off.carry_edges = false;
                                                    return off;
                                                  }()),
            2 * p.edges_bytes);
  opt.tile_y = 256;
  EXPECT_EQ(plan_wavefront(s, st, 4, 100, opt).chain_tiles, 0) << "one tile per thread";
  opt.tile_y = 32;
  opt.bt = 1;
  EXPECT_EQ(plan_wavefront(s, st, 4, 100, opt).edges_bytes, 0);
}

// Passes store their output past the caches where the grid's two copies outgrow the last-level
// cache; the option forces it either way; the engine's memory stays the same.
TEST(WavefrontPlan, OutputBypassesTheCachesWhereTheGridOutgrowsThem) {
  const Stencil st = Stencil::preset("7pt").value();
  InCoreOptions opt;
  opt.threads = 2;
  const Shape small{4, 4, 4};
  const int64_t cache = internal::last_level_cache_bytes();
  const Shape large{256, 256, cache / (2 * 256 * 256 * 4) + 1};
  EXPECT_TRUE(plan_wavefront(large, st, 4, 100, opt).output_bypasses_caches);
  if (cache > 0) {
    EXPECT_FALSE(plan_wavefront(small, st, 4, 100, opt).output_bypasses_caches);
  } else {
    GTEST_LOG_(INFO) << "this system does not give its last-level cache's size: output bypasses";
  }
  InCoreOptions on = opt, off = opt;
  on.output_bypass = InCoreOptions::CacheBypass::kOn;
  off.output_bypass = InCoreOptions::CacheBypass::kOff;
  EXPECT_TRUE(plan_wavefront(small, st, 4, 100, on).output_bypasses_caches);
  EXPECT_FALSE(plan_wavefront(large, st, 4, 100, off).output_bypasses_caches);
  EXPECT_EQ(InCoreEngine<float>::memory_bytes(large, st, 100, on),
            InCoreEngine<float>::memory_bytes(large, st, 100, off));
}

// Star stencils go 8 / r deep where the working set leaves tiles of 32 rows or more at that
// depth, else 6 / r; box stencils 3 / r whatever the budget.
TEST(WavefrontPlan, DeeperBlockingWhereTheWorkingSetAllowsTallTiles) {
  const Stencil star = Stencil::preset("7pt").value();
  InCoreOptions opt;  // the default, 1.5 MiB: 17 rows of 512 at depth 8
  EXPECT_EQ(plan_wavefront({512, 512, 512}, star, 4, 100, opt).bt, 6);
  EXPECT_EQ(plan_wavefront({256, 256, 256}, star, 4, 100, opt).bt, 8) << "49 rows of 256";
  opt.cache_bytes = int64_t{6} << 20;
  const WavefrontPlan deep = plan_wavefront({512, 512, 512}, star, 4, 100, opt);
  EXPECT_EQ(deep.bt, 8);
  EXPECT_EQ(deep.tile_y, 64);
  EXPECT_LE(deep.workspace_bytes, opt.cache_bytes + (int64_t{1} << 16));
  // Tiles of up to 32768 points: narrower grids get taller tiles, where the budget allows.
  const WavefrontPlan narrow = plan_wavefront({256, 256, 256}, star, 4, 100, opt);
  EXPECT_EQ(narrow.tile_x, 256);
  EXPECT_EQ(narrow.tile_y, 128);
  EXPECT_EQ(plan_wavefront({256, 256, 256}, star, 8, 100, opt).tile_y, 64) << "f64: 115 rows fit";
  EXPECT_EQ(plan_wavefront({512, 512, 512}, Stencil::preset("13pt").value(), 4, 100, opt).bt, 4);
  EXPECT_EQ(plan_wavefront({512, 512, 512}, Stencil::preset("27pt").value(), 4, 100, opt).bt, 3);
}

// Radius 4: 8 / r is 2 and 6 / r is 1, which blocks nothing; a working set whose tiles at depth 2
// span x with 16 rows or more (768 KiB: 29 rows of 512) keeps depth 2, a smaller one falls to 1.
TEST(WavefrontPlan, RadiusFourKeepsTwoLevelsWhileTheirTilesHaveSixteenRows) {
  const Stencil st = Stencil::preset("25pt").value();
  InCoreOptions opt;
  opt.cache_bytes = int64_t{3} << 18;
  const WavefrontPlan two = plan_wavefront({512, 512, 512}, st, 4, 100, opt);
  EXPECT_EQ(two.bt, 2);
  EXPECT_EQ(two.tile_x, 512);
  opt.cache_bytes = int64_t{3} << 17;
  EXPECT_EQ(plan_wavefront({512, 512, 512}, st, 4, 100, opt).bt, 1) << "256-wide tiles at depth 2";
}

// The wave equations of radius 2 and 4 take turns at bt 1 in memory, in tiles spanning x of
// 1/24 of the budget's bytes (at least 8 rows), unless a depth was tuned for them; wave2
// (radius 1) keeps its blocking, and so does the stream's tiling, whose stages do not turn.
TEST(WavefrontPlan, WavesOfRadiusTwoAndMoreTakeTurnsAtDepthOneUnlessTunedDeeper) {
  InCoreOptions opt;
  opt.cache_bytes = int64_t{3} << 18;  // 8192 f32 values per tile
  for (const char* name : {"wave4", "wave8"}) {
    const Scheme wave = Scheme::preset(name).value();
    const WavefrontPlan p = plan_wavefront({256, 256, 256}, wave, 4, 100, opt);
    EXPECT_EQ(p.bt, 1) << name;
    EXPECT_TRUE(p.turns) << name;
    EXPECT_EQ(p.tile_x, 256) << name;
    EXPECT_EQ(p.tile_y, 32) << name;
    EXPECT_EQ(plan_wavefront({256, 256, 256}, wave, 8, 100, opt).tile_y, 16) << name << " f64";
    const WavefrontPlan wide = plan_wavefront({4096, 1024, 64}, wave, 4, 100, opt);
    EXPECT_EQ(wide.tile_x, 4096) << name;
    EXPECT_EQ(wide.tile_y, 8) << name;
    InCoreOptions stages = opt;
    stages.turn_time_levels = false;
    const WavefrontPlan stage = plan_wavefront({256, 256, 256}, wave, 4, 100, stages);
    EXPECT_GT(stage.bt, 1) << name;
    EXPECT_FALSE(stage.turns) << name;

    InCoreOptions tuned = opt;
    tuned.tuned_bt = 4;
    const WavefrontPlan deep = plan_wavefront({256, 256, 256}, wave, 4, 100, tuned);
    EXPECT_EQ(deep.bt, 4) << name;
    EXPECT_FALSE(deep.turns) << name;
    tuned.tuned_bt = 1;
    EXPECT_TRUE(plan_wavefront({256, 256, 256}, wave, 4, 100, tuned).turns) << name;
    stages.tuned_bt = 4;
    EXPECT_EQ(plan_wavefront({256, 256, 256}, wave, 4, 100, stages).bt, stage.bt)
        << name << ": the stages' rules";
  }
  const Scheme wave2 = Scheme::preset("wave2").value();
  EXPECT_GT(plan_wavefront({256, 256, 256}, wave2, 4, 100, opt).bt, 1);
  InCoreOptions tuned = opt;
  tuned.tuned_bt = 3;
  EXPECT_EQ(plan_wavefront({256, 256, 256}, wave2, 4, 100, tuned).bt,
            plan_wavefront({256, 256, 256}, wave2, 4, 100, opt).bt)
      << "radius 1: the rules";
  InCoreOptions one = opt;
  one.bt = 1;
  EXPECT_TRUE(plan_wavefront({256, 256, 256}, wave2, 4, 100, one).turns) << "wave2 at --bt 1";
  EXPECT_FALSE(
      plan_wavefront({256, 256, 256}, Scheme::preset("heat-var").value(), 4, 100, one).turns);
}

// Where the depth chosen would cut tiles narrower than the grid, a shallower one whose tiles
// span x with 16 rows or more is taken (not below 3 for 7pt); the stream engine's stages keep
// the depth, and grids whose tiles span x already plan as before.
TEST(WavefrontPlan, ShallowerBlockingWhereDeepTilesWouldNotSpanX) {
  const Stencil star = Stencil::preset("7pt").value();
  InCoreOptions opt;
  opt.cache_bytes = int64_t{3} << 20;
  const WavefrontPlan wide = plan_wavefront({2048, 2048, 64}, star, 4, 100, opt);
  EXPECT_EQ(wide.bt, 4);
  EXPECT_EQ(wide.tile_x, 2048);
  EXPECT_GE(wide.tile_y, 16);
  EXPECT_LE(wide.workspace_bytes, opt.cache_bytes + (int64_t{1} << 16));
  const WavefrontPlan as_before = plan_wavefront({512, 512, 64}, star, 4, 100, opt);
  EXPECT_EQ(as_before.bt, 8);
  EXPECT_EQ(as_before.tile_x, 512);
  const WavefrontPlan too_wide = plan_wavefront({8192, 8192, 8}, star, 8, 100, opt);
  EXPECT_EQ(too_wide.bt, 6) << "only bt 1 spans 8192 f64 values";
  EXPECT_LT(too_wide.tile_x, 8192);
  opt.shallower_to_span_x = false;
  const WavefrontPlan stage = plan_wavefront({2048, 2048, 64}, star, 4, 100, opt);
  EXPECT_EQ(stage.bt, 6);
  EXPECT_EQ(stage.tile_x, 1024);
}

// Wavefronts that take turns in one workspace (the stream engine's stages, per thread) carry
// their inner levels from one run of steps to the next: running the steps in chunks, each in
// a workspace another chunk left stale, gives the bits of one uninterrupted run.
TEST(Wavefront, ChunksInSharedWorkspacesMatchOneRun) {
  for (const char* name : {"7pt", "13pt"}) {
    const Stencil st = with_rounding_coefficients(Stencil::preset(name).value());
    const SchemeKernel<float> kernel(st);
    const int L = 3, rx = st.radius_x(), ry = st.radius_y(), rz = st.radius_z();
    const Shape s{13, 9, 11};
    const auto u = random_values<float>(s, 7);
    for (const Boundary& b : kBoundaries) {
      SCOPED_TRACE(std::string(name) + ", " + b.to_string());
      auto src = PaddedGrid<float>::allocate(s, {L * rx, L * ry, L * rz}).value();
      for (int64_t z = 0; z < s.nz; ++z) src.load_plane(z, u.data() + z * s.plane_points());
      src.fill_ghosts(b, 1);
      const internal::WavefrontFrame tile{0, s.nx, 0, s.ny};
      const int64_t fw = s.nx + 2 * L * rx, fh = s.ny + 2 * L * ry;
      auto run_in_chunks = [&](int64_t chunk) {
        std::vector<float> out(static_cast<size_t>(s.points()));
        internal::WavefrontWorkspace<float> a(L, rz, ry, fw, fh, static_cast<float>(b.value));
        internal::WavefrontWorkspace<float> other(L, rz, ry, fw, fh, static_cast<float>(b.value));
        std::vector<float> kept(static_cast<size_t>(
            internal::WavefrontCarry<float>::bytes(L, rz, ry, a.stride(), fh, 1) / 4));
        internal::WavefrontCarry<float> carry(L, rz, ry, a.stride(), fh, 1, kept.data());
        auto wave = [&](internal::WavefrontWorkspace<float>& ws) {
          return internal::Wavefront<float>(
              kernel, b, s, L, tile, ws,
              [&](int64_t z) -> const float* {
                return src.plane(z) - L * ry * src.stride() - L * rx;
              },
              {src.stride(), src.field_stride()},
              [&](int64_t z) { return out.data() + z * s.plane_points(); },
              {s.nx, s.plane_points()});
        };
        const internal::Wavefront<float> waves[2] = {wave(a), wave(other)};
        int64_t i = waves[0].first_step();
        for (int n = 0; i < waves[0].end_step(); ++n) {
          const internal::Wavefront<float>& w = waves[n % 2];
          w.restore(carry, i);
          for (const int64_t end = std::min(i + chunk, w.end_step()); i < end; ++i) {
            w.step(i);
          }
          w.save(carry, i);
        }
        return out;
      };
      const std::vector<float> whole = run_in_chunks(1 << 20);
      EXPECT_EQ(first_bitwise_difference(whole, reference_run(u, s, st, b, L)), -1);
      for (int64_t chunk : {1, 2, 3, 5}) {
        EXPECT_EQ(first_bitwise_difference(run_in_chunks(chunk), whole), -1) << "chunk " << chunk;
      }
    }
  }
}

// A carried plane of several fields holds each field's rows that its level uses and no more:
// with the fields a whole frame apart, a wave8 grid (3 fields, radius 4) in 1 MiB at bt 4 no
// longer fit its budget.
TEST(Wavefront, CarriesOfSeveralFieldsHoldOnlyTheirRows) {
  for (const int fields : {2, 3}) {
    EXPECT_LE(internal::WavefrontCarry<float>::bytes(4, 4, 4, 64, 50, fields),
              fields * internal::WavefrontCarry<float>::bytes(4, 4, 4, 64, 50, 1))
        << fields << " fields";
  }
}

// A distributed part's run: only the needed box (its block) must come out exact, and points
// of the halos too far from it to reach it in time are not computed at all. A part has halos
// on one side of an axis at the grid's edge (not periodic), else on both or none.
TEST(Golden, ANeededBoxComesOutExactAndFarHalosAreNotComputed) {
  const Shape s{41, 23, 31};
  const int64_t steps = 5;
  const int64_t kNone = GridPlacement::kUnbounded;
  for (const Boundary& b : kBoundaries) {
    GridPlacement at;
    if (b.kind == Boundary::Kind::kPeriodic) {
      at.needed_lo = {12, -kNone, 11};
      at.needed_hi = {29, kNone, 20};
    } else {
      at.needed_lo = {12, -kNone, 11};
      at.needed_hi = {29, 17, kNone};
    }
    auto in_box = [&](int64_t x, int64_t y, int64_t z) {
      return x >= at.needed_lo[0] && x < at.needed_hi[0] && y >= at.needed_lo[1] &&
             y < at.needed_hi[1] && z >= at.needed_lo[2] && z < at.needed_hi[2];
    };
    for (const char* name : {"7pt", "13pt"}) {
      const Stencil st = with_rounding_coefficients(Stencil::preset(name).value());
      const int64_t reach = steps * st.radius();  // both stencils reach as far along every axis
      auto far = [&](int64_t x, int64_t y, int64_t z) {
        return !(x >= at.needed_lo[0] - reach && x < at.needed_hi[0] + reach &&
                 y >= at.needed_lo[1] - reach && y < at.needed_hi[1] + reach &&
                 z >= at.needed_lo[2] - reach && z < at.needed_hi[2] + reach);
      };
      for (int bt : {2, 0}) {
        const InCoreOptions opt = two_threads_on_small_tiles(bt);
        SCOPED_TRACE(std::string(name) + ", " + b.to_string() + ", " + describe(opt));
        const auto u = random_values<float>(s, 7);
        const auto want = reference_run(u, s, st, b, steps);
        const auto got = incore_run(u, s, st, b, steps, opt, at);
        int64_t wrong_in_box = 0, far_points = 0, far_computed = 0;
        for (int64_t z = 0; z < s.nz; ++z) {
          for (int64_t y = 0; y < s.ny; ++y) {
            for (int64_t x = 0; x < s.nx; ++x) {
              const size_t i = static_cast<size_t>((z * s.ny + y) * s.nx + x);
              const bool same = std::memcmp(&want[i], &got[i], sizeof(float)) == 0;
              if (in_box(x, y, z)) wrong_in_box += same ? 0 : 1;
              if (far(x, y, z)) {
                ++far_points;
                far_computed += same ? 1 : 0;
              }
            }
          }
        }
        EXPECT_EQ(wrong_in_box, 0);
        ASSERT_GT(far_points, 0);
        EXPECT_EQ(far_computed, 0) << "of " << far_points << " points out of the box's reach";
      }
    }
  }
}

// A distributed part whose halos arrive while its first pass runs (LateHalos), along z only
// (slabs), y only, y and z, on one side of each, and along all three axes: until they arrive
// the halo points hold NaN, so any point computed from them too early would show in the
// result. Without late x halos a receiver in the middle records its first step before they
// arrive (the work that needs no halo comes first); with them it does not (x is not cut). The
// box comes out bitwise the reference's. Each halo is at least the run's reach (4 steps of
// radius 2), as a distributed part's are.
// The points of a late halo (LateHalos) in a grid of extents n (x, y, z).
struct HaloPoints {
  const LateHalos& halos;
  std::array<int64_t, 3> n;
  bool contain(int64_t x, int64_t y, int64_t z) const {
    const std::array<int64_t, 3> at{x, y, z};
    for (size_t a = 0; a < 3; ++a) {
      if (at[a] < halos.below[a] || at[a] >= n[a] - halos.above[a]) return true;
    }
    return false;
  }
};

// Loads `u` (planes of n components) into the engine, with NaN at the halo points until they
// have arrived.
void load_with_halos(InCoreEngine<float>& engine, const std::vector<float>& u, const Shape& s,
                     int n, const HaloPoints& halo, bool arrived) {
  const int64_t points = n * s.plane_points();
  std::vector<float> plane(static_cast<size_t>(points));
  for (int64_t z = 0; z < s.nz; ++z) {
    for (int64_t i = 0; i < points; ++i) {
      const int64_t x = i % s.nx, y = i / s.nx % s.ny;
      plane[static_cast<size_t>(i)] = halo.contain(x, y, z) && !arrived
                                          ? std::nanf("")
                                          : u[static_cast<size_t>(z * points + i)];
    }
    engine.load_plane(z, plane.data());
  }
}

// Points outside the halos whose bits differ between `got` and `want`.
int64_t wrong_outside_halos(const std::vector<float>& got, const std::vector<float>& want,
                            const Shape& s, int n, const HaloPoints& halo) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const auto p = static_cast<int64_t>(i);
    const int64_t x = p % s.nx, y = p / s.nx % s.ny, z = p / (n * s.plane_points());
    if (!halo.contain(x, y, z) && std::memcmp(&got[i], &want[i], sizeof(float)) != 0) ++wrong;
  }
  return wrong;
}

TEST(Golden, LateHalosArriveDuringTheFirstPassAndTheResultIsExact) {
  const Shape s{44, 38, 60};
  const std::array<int64_t, 3> n{s.nx, s.ny, s.nz};
  const std::vector<LateHalos> lates{{{0, 0, 9}, {0, 0, 8}, {}},
                                     {{0, 8, 0}, {0, 10, 0}, {}},
                                     {{0, 8, 9}, {0, 10, 8}, {}},
                                     {{0, 0, 9}, {0, 8, 0}, {}},
                                     {{9, 8, 9}, {8, 10, 8}, {}}};
  const int64_t steps = 5;  // bt 3: a second pass of 2 steps reads halo points
  for (const LateHalos& halos : lates) {
    bool one_sided = false;  // along some axis
    for (size_t a = 0; a < 3; ++a) one_sided |= (halos.below[a] == 0) != (halos.above[a] == 0);
    const HaloPoints halo{halos, n};
    for (const Boundary& b : kBoundaries) {
      // (a periodic part has halos on both sides of every axis it shares)
      if (one_sided && b.kind == Boundary::Kind::kPeriodic) continue;
      // wave2: the coefficient field m arrives late too, and passes do not write it (the
      // engine keeps it in both copies of the grid).
      for (const char* name : {"7pt", "13pt", "wave2"}) {
        const Scheme st = Stencil::preset(name).ok()
                              ? Scheme(with_rounding_coefficients(Stencil::preset(name).value()))
                              : Scheme::preset(name).value();
        const int fields = st.component_count();
        for (int bt : {3, 0}) {
          const InCoreOptions opt = two_threads_on_small_tiles(bt);
          SCOPED_TRACE(std::string(name) + ", " + b.to_string() + ", " + describe(opt) +
                       ", late halos below " + std::to_string(halos.below[0]) + "," +
                       std::to_string(halos.below[1]) + "," + std::to_string(halos.below[2]));
          const auto u = random_values<float>({s.nx, s.ny, s.nz * fields}, 3);
          auto engine = InCoreEngine<float>::create(s, st, steps, opt).value();
          load_with_halos(engine, u, s, fields, halo, /*arrived=*/false);
          GridPlacement at;
          for (size_t a = 0; a < 3; ++a) {
            at.needed_lo[a] = halos.below[a];
            at.needed_hi[a] = n[a] - halos.above[a];
          }
          ResolvedProbes probes;
          probes.receivers.push_back({0, s.nx / 2, s.ny / 2, s.nz / 2});
          index_by_plane(&probes);
          Traces traces = run_traces(0, steps, 1);
          probes.traces = &traces;
          int arrivals = 0;
          bool first_step_recorded_before = false;
          LateHalos late = halos;
          late.arrive = [&] {
            ++arrivals;
            first_step_recorded_before = !std::isnan(*traces.at(1, 0));
            load_with_halos(engine, u, s, fields, halo, /*arrived=*/true);
          };
          EXPECT_EQ(engine.advance(b, steps, {}, {&probes, 0, at}, late), steps);
          EXPECT_EQ(arrivals, 1);
          EXPECT_EQ(first_step_recorded_before, halos.below[0] + halos.above[0] == 0);
          std::vector<float> got(u.size());
          for (int64_t z = 0; z < s.nz; ++z) {
            engine.store_plane(z, got.data() + z * fields * s.plane_points());
          }
          // (one reference per scheme and boundary for every halo layout and depth)
          const auto& want =
              testing::remembered<float>(std::string("late halos ") + name + " " + s.to_string() +
                                             " " + b.to_string() + " " + std::to_string(steps),
                                         [&] { return reference_run(u, s, st, b, steps); });
          EXPECT_EQ(wrong_outside_halos(got, want, s, fields, halo), 0);
        }
      }
    }
  }
}

TEST(Golden, ProgressCanStopARunEarly) {
  const Stencil st = with_rounding_coefficients(Stencil::preset("7pt").value());
  const Shape s{8, 8, 8};
  const auto u = random_values<float>(s, 1);
  for (int bt : {1, 0}) {
    InCoreOptions opt;
    opt.bt = bt;
    auto engine = InCoreEngine<float>::create(s, st, 10, opt).value();
    for (int64_t z = 0; z < s.nz; ++z) engine.load_plane(z, u.data() + z * s.plane_points());
    const int64_t done =
        engine.advance(Boundary{}, 10, [](int64_t steps_done, int64_t) { return steps_done < 3; });
    if (bt == 1) {
      EXPECT_EQ(done, 3);
    }
    EXPECT_GE(done, 3);
    EXPECT_LT(done, 10);
    std::vector<float> got(u.size());
    for (int64_t z = 0; z < s.nz; ++z) engine.store_plane(z, got.data() + z * s.plane_points());
    EXPECT_EQ(first_bitwise_difference(got, reference_run(u, s, st, Boundary{}, done)), -1)
        << "the grid holds exactly the steps reported";
  }
}

// This process's resident memory (VmRSS), in bytes; -1 when unknown.
int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) << 10;  // (kB)
  }
  return -1;
}

// An engine made to be touched while it loads (InCoreOptions::touch_while_loading) holds no
// memory until its planes come in and touch_beside_load() faults in the rest (the copy the
// first pass writes), here on another thread beside the load as ResidentGrid::load runs it:
// then both copies are resident before the first pass, and its results are exact.
TEST(Golden, CopiesTouchedBesideTheLoad) {
  const Stencil st = with_rounding_coefficients(Stencil::preset("7pt").value());
  const Shape s{512, 256, 64};
  const int64_t copy = s.points() * static_cast<int64_t>(sizeof(float));  // 32 MiB
  const auto u = random_values<float>(s, 2);
  InCoreOptions opt;
  opt.threads = 2;
  opt.touch_while_loading = true;
  const int64_t before = resident_bytes();
  ASSERT_GT(before, 0);
  auto engine = InCoreEngine<float>::create(s, st, 6, opt).value();
  EXPECT_LT(resident_bytes() - before, copy / 2) << "created, neither copy touched";
  std::thread touching([&engine] { engine.touch_beside_load(); });
  for (int64_t z = 0; z < s.nz; ++z) engine.load_plane(z, u.data() + z * s.plane_points());
  touching.join();
  EXPECT_GE(resident_bytes() - before, 2 * copy) << "both copies resident before the first pass";
  EXPECT_EQ(engine.advance(Boundary{}, 6), 6);
  std::vector<float> got(u.size());
  for (int64_t z = 0; z < s.nz; ++z) engine.store_plane(z, got.data() + z * s.plane_points());
  EXPECT_EQ(first_bitwise_difference(got, reference_run(u, s, st, Boundary{}, 6)), -1);
}

}  // namespace
}  // namespace deepgrid
