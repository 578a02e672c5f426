// The stream engine's sweeps in bands of rows (stream_bands.h; the fixture: stream_golden.h):
// the replaced files kept for the next advance, bands of whole blocks and sharing their edge
// blocks, periodic bands reading across the grid's ends, and the bands refused where they
// cannot run.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "planning_manifest.h"
#include "sanitizer_build.h"
#include "stream_golden.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using testing::kCoupledScheme;

// A caller that advances the grid again right after (RunOptions::advances_again: a run's
// parts between snapshots, a distributed run's rounds) has the files a sweep in bands replaced
// kept for its next call's first sweep, which writes into them; the last call frees them. The
// runs in parts between snapshots do so. Every result is exact.
TEST_F(StreamGolden, BandsKeepTheReplacedFilesForTheNextAdvance) {
  const Shape shape{64, 40, 9};
  const Stencil st = testing_stencil("7pt");
  const auto u = testing::random_values<float>(shape, 8);
  auto make = [&](const std::string& dir) {
    CreateOptions co;
    co.shape = shape;
    Grid g = Grid::create(dir, co).value();
    EXPECT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
    return g;
  };
  auto expect_steps = [&](const Grid& g, int64_t steps) {
    std::vector<float> got(u.size());
    ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
    EXPECT_EQ(testing::first_bitwise_difference(
                  testing::reference_run(u, shape, st, Boundary{}, steps), got),
              -1)
        << "after " << steps << " steps";
  };
  RunOptions opt;
  opt.scheme = st;
  opt.steps = 3;
  opt.method = Method::kStream;
  opt.mem_budget = 16 << 20;
  opt.band_rows = 16;
  Grid g = make(root_ + "/again");
  auto kept_copy = [&] { return fs::exists(g.file_path(0, FileSet::kReplacement)); };
  opt.advances_again = true;
  ASSERT_TRUE(advance_grid(g, opt).ok());
  EXPECT_TRUE(kept_copy()) << "the replaced files are kept for the next advance";
  expect_steps(g, 3);
  opt.advances_again = false;
  ASSERT_TRUE(advance_grid(g, opt).ok());
  EXPECT_FALSE(kept_copy()) << "the last advance frees them";
  expect_steps(g, 6);

  // A run in parts between snapshots: exact, and no copy left when it ends.
  const std::string dir = root_ + "/parts";
  make(dir);
  opt.steps = 6;
  opt.snapshots = {root_ + "/snaps", 2, {}};
  const auto parts = run_grid(dir, opt);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ(parts->snapshots, 4);
  const Grid ran = Grid::open(dir).value();
  EXPECT_FALSE(fs::exists(ran.file_path(0, FileSet::kReplacement)));
  expect_steps(ran, 6);
}

// Bands whose rows are whole 4096-byte blocks write through the replacement's own descriptors
// (O_DIRECT where the filesystem allows it), the last band to the end of its planes' blocks:
// rows of 256 (f32) and 512 bytes (f64), radius 1 and 2, stripes, both backends, any depth.
TEST_F(StreamGolden, BandsOfWholeBlocks) {
  for (int bt : {1, 4, 0}) {
    Case c{"7pt", {64, 40, 9}, DType::kF32, 6, bt, 1, io::Backend::kUring};
    c.band_rows = 16;
    expect_all_boundaries(c);
    c.stencil = "27pt";
    c.dtype = DType::kF64;
    c.band_rows = 8;
    expect_all_boundaries(c);
  }
  Case c{"13pt", {64, 37, 11}, DType::kF32, 5, 3, 3, io::Backend::kThreads};
  c.band_rows = 32;
  expect_all_boundaries(c);
  // A last band of less than half the others on a periodic grid whose planes are not whole
  // blocks: its buffers are aligned for the rows after the wrap, not for its own (whose writes
  // then go through the page cache).
  Case short_last{"7pt", {64, 36, 9}, DType::kF32, 6, 1, 1, io::Backend::kUring};
  short_last.band_rows = 16;
  expect_all_boundaries(short_last);
  // Grids of several fields whose components are whole blocks: every component's rows written
  // O_DIRECT.
  for (int bt : {1, 0}) {
    Case w{"wave2", {64, 48, 9}, DType::kF32, 6, bt, 2, io::Backend::kUring};
    w.band_rows = 16;
    expect_all_boundaries(w);
  }
}

// Bands whose rows are not whole blocks, on planes whose rows do not wrap, share the blocks at
// their edges (stream_bands.h): each computes the rows before its own back to the block where
// its writes start, and the last band writes the first bytes of each component after the first
// as the first band computed them. Rows of 1200 bytes (f32 and f64), one and three components
// (wave2: `m` in the ring), radius 1 and 2, bands of a few rows, a last band shorter than the
// rest, one band of the whole grid, stripes, both backends, any depth (periodic grids: the
// buffered writes).
TEST_F(StreamGolden, BandsSharingTheirEdgeBlocks) {
  for (int bt : {1, 3, 0}) {
    Case c{"7pt", {300, 37, 7}, DType::kF32, 5, bt, 1, io::Backend::kUring};
    c.band_rows = 4;
    expect_all_boundaries(c);
    Case w{"wave2", {300, 37, 7}, DType::kF32, 5, bt, 2, io::Backend::kThreads};
    w.band_rows = 5;
    expect_all_boundaries(w);
  }
  Case wide{"13pt", {150, 29, 6}, DType::kF64, 4, 2, 1, io::Backend::kUring};
  wide.band_rows = 8;
  expect_all_boundaries(wide);
  Case one{"wave2", {300, 20, 6}, DType::kF32, 4, 2, 1, io::Backend::kUring};
  one.band_rows = 20;
  expect_all_boundaries(one);
}

// The depths the periodic band tests run: under a sanitizer one (the release stage runs all).
std::vector<int> band_test_depths() {
  return testing::kUnderSanitizer ? std::vector<int>{3} : std::vector<int>{1, 3, 0};
}

// Periodic grids in bands: the bands at the grid's ends read their halo rows across it (two
// reads per plane into one buffer, both O_DIRECT on planes of whole blocks; on others one part
// through the page cache, the larger aligned), and sources near either end reach the bands at
// the other. Planes of whole blocks (f32 rows of 256 bytes, f64 of 256 and 512) and not (rows
// of 92 and 240 bytes), radius 1 and 2, a last band shorter than the rest, forced stages and
// small tiles, any depth.
TEST_F(StreamGolden, PeriodicBandsReadAcrossTheGridsEnds) {
  Probes probes = testing::shot_and_corner();  // (the corner source on row 11)
  SourceSpec top, bottom;
  top.x = 3, top.y = 0, top.z = 4;
  top.series = {1, -0.5, 0.25};
  bottom.x = 60, bottom.y = 47, bottom.z = 8;
  bottom.series = {0.75, 0.5};
  probes.sources.push_back(top);
  probes.sources.push_back(bottom);
  for (int64_t y : {0, 7, 8, 19, 20, 40, 47}) probes.receivers.push_back({"u", 9, y, 5});
  for (int bt : band_test_depths()) {
    for (const char* st : {"7pt", "13pt"}) {
      Case c{st, {64, 48, 9}, DType::kF32, 7, bt, 1, io::Backend::kUring};
      c.band_rows = st == std::string("7pt") ? 8 : 20;
      c.tile_x = 16;
      c.tile_y = 5;
      c.probes = &probes;
      expect_all_boundaries(c);
    }
  }
  Case c{"27pt", {32, 64, 7}, DType::kF64, 6, 4, 1, io::Backend::kThreads};
  c.band_rows = 16;
  c.cache_bt = 2;
  expect_all_boundaries(c);
  c.dtype = DType::kF32;
  c.shape = {64, 64, 7};
  c.bt = 0;
  expect_all_boundaries(c);
}

// The same on budgets of blocks of one z-step: every read buffer's two reads and every write in
// flight at once (the I/O queue holds them all); rows that are not whole blocks, components read
// through stencils, sources and receivers near the grid's ends.
TEST_F(StreamGolden, PeriodicBandsOnBudgetsOfOneZStep) {
  Case tight{"7pt", {1024, 64, 12}, DType::kF32, 4, 1, 1, io::Backend::kUring};
  tight.band_rows = 16;
  tight.mem = 1 << 20;
  expect_all_boundaries(tight);
  tight.shape = {1000, 61, 12};  // (rows of 4000 bytes: the end bands' reads in three parts)
  expect_all_boundaries(tight);
  // Components read through stencils: each component's reads in parts, the wrapped rows of
  // those after the first split where the files' blocks start (the rows before them in the
  // file are the component before's, which must not land over the band's).
  tight.stencil = kCoupledScheme;
  tight.mem = 8 << 20;
  expect_all_boundaries(tight);
  tight.shape = {64, 40, 9};
  tight.band_rows = 8;
  expect_all_boundaries(tight);
  Probes near_the_ends = testing::shot_and_corner();
  for (auto [x, y, z] : {std::tuple{3, 0, 4}, {20, 39, 6}, {11, 1, 2}}) {
    SourceSpec s;
    s.x = x, s.y = y, s.z = z;
    s.series = {1, -0.5, 0.25};
    near_the_ends.sources.push_back(s);
  }
  for (int64_t y : {0, 5, 6, 34, 39}) near_the_ends.receivers.push_back({"u", 9, y, 5});
  for (int bt : band_test_depths()) {
    Case odd{"13pt", {23, 40, 9}, DType::kF32, 6, bt, 1, io::Backend::kThreads};
    odd.band_rows = 6;  // (the first band's halo the smaller part, the last band's the larger)
    odd.probes = &near_the_ends;
    expect_all_boundaries(odd);
    odd.stencil = "7pt";
    odd.dtype = DType::kF64;
    odd.shape = {30, 48, 9};
    odd.band_rows = 20;
    odd.probes = nullptr;
    expect_all_boundaries(odd);
  }
}

// Bands run on the CPU (periodic grids where the halos do not meet);
// the rest is refused with the fix (leave out --band-rows) before anything changes, as is a
// budget that cannot hold one band's planes, and a grid whose in-place sweep was interrupted.
TEST_F(StreamGolden, BandsAreRefusedWhereTheyCannotRun) {
  const Stencil st = testing_stencil("7pt");
  const Manifest m = testing::planning_manifest({64, 48, 20});
  StreamOptions opt;
  opt.mem_budget = 64 << 20;
  opt.band_rows = 8;
  ASSERT_TRUE(plan_stream(m, st, Boundary{}, 6, opt).ok());
  auto expect_refused = [](const Result<StreamPlan>& r, const std::string& why) {
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--band-rows"), std::string::npos);
  };
  const Boundary periodic{Boundary::Kind::kPeriodic, 0};
  ASSERT_TRUE(plan_stream(m, st, periodic, 6, opt).ok());
  StreamOptions tall = opt;
  tall.band_rows = 47;  // (47 rows and one of halo at either end: 49 > 48)
  expect_refused(plan_stream(m, st, periodic, 6, tall), "taller than this periodic grid's 48");
  StreamOptions part = opt;
  part.placement.whole = {64, 96, 20};
  EXPECT_EQ(plan_stream(m, st, Boundary{}, 6, part).value().bands, 6) << "a distributed part's";
  StreamOptions tight = opt;
  tight.mem_budget = 64 << 10;
  expect_refused(plan_stream(m, st, Boundary{}, 6, tight), "in bands of 8 rows");

  // A grid left inside an in-place sweep (an I/O error at its tenth write) finishes that sweep
  // first, in place.
  CreateOptions co;
  co.shape = {64, 48, 20};
  co.init = *parse_init("random:6");
  const std::string dir = root_ + "/interrupted";
  {
    Grid g = Grid::create(dir, co).value();
    StreamOptions in_place;
    in_place.mem_budget = 64 << 20;
    in_place.bt = 3;
    int writes = 0;
    in_place.fault_hook = [&writes](const io::Request& r, int64_t, size_t) -> int64_t {
      return r.op == io::Op::kWrite && ++writes == 10 ? -EIO : 0;
    };
    const StreamPlan whole = plan_stream(g.manifest(), st, Boundary{}, 6, in_place).value();
    ASSERT_FALSE(advance_stream(g, st, Boundary{}, 6, whole, in_place).ok());
  }
  Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
  ASSERT_TRUE(g.sweep_record().has_value());
  const StreamPlan bands = plan_stream(g.manifest(), st, Boundary{}, 6, opt).value();
  const auto r = advance_stream(g, st, Boundary{}, 6, bands, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--resume"), std::string::npos) << r.status().message();
  EXPECT_EQ(g.manifest().step, 0);
}

}  // namespace
}  // namespace deepgrid
