// The stream engine's own golden cases (the fixture: stream_golden.h): stages within a sweep,
// chains of tiles, a needed box, the naive and auto methods, traces larger than the budget,
// stopping between sweeps and resuming, blocks of z-steps and their write buffers, and the
// tiled comparison method on a tight budget.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "deepgrid/machine.h"
#include "engines/tiled_engine.h"
#include "plan/plan.h"
#include "planning_manifest.h"
#include "stream_golden.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using testing::kCoupledScheme;
using testing::kKernelScheme;
using testing::planning_manifest;

// Two-level blocking: sweeps of bt levels as stages of cache_bt levels, including stages
// that do not divide bt, a last sweep shorter than one stage, and radius-2 stencils whose
// periodic stages extend past z's ends.
TEST_F(StreamGolden, StagesWithinASweep) {
  for (auto [bt, cache_bt] : {std::pair{4, 1}, {5, 2}, {9, 4}, {8, 3}}) {
    Case c{"7pt", {17, 10, 12}, DType::kF32, 11, bt, 1, io::Backend::kUring};
    c.cache_bt = cache_bt;
    expect_all_boundaries(c);
  }
  for (const std::string st : {"13pt", "27pt", "wave8", kCoupledScheme, kKernelScheme.c_str()}) {
    Case c{st, {15, 13, 9}, DType::kF64, 7, 6, 1, io::Backend::kThreads};
    c.cache_bt = 2;
    c.tile_x = 6;
    c.tile_y = 4;
    expect_all_boundaries(c);
  }
}

// Tiles in chains (StreamPlan::chain_tiles: one thread), whole planes: each x range's tiles in
// y order, their levels skewed, edge rows handed on within each block of z-steps. Tiles of one
// row and tiles shorter than their halo, stages of 2 to 4 levels and a last one shorter,
// stencils of radius 2 and schemes of several fields, and probes. (A distributed part's needed
// box, whose trim cuts the chains' levels: ANeededBoxComesOutExact…; in bands: EngineGolden's
// stream_bands_1_thread.)
TEST_F(StreamGolden, ChainsOfTilesAtOneThread) {
  for (auto [bt, cache_bt, ty] : {std::tuple{6, 3, 3}, {7, 2, 1}, {9, 4, 5}}) {
    Case c{"7pt", {23, 17, 13}, DType::kF32, 9, bt, 1, io::Backend::kUring};
    c.threads = 1;
    c.cache_bt = cache_bt;
    c.tile_x = 8;
    c.tile_y = ty;
    expect_all_boundaries(c);
  }
  for (const std::string st : {"13pt", "27pt", "wave8", kCoupledScheme}) {
    Case c{st, {15, 13, 9}, DType::kF64, 7, 6, 1, io::Backend::kThreads};
    c.threads = 1;
    c.cache_bt = 3;
    c.tile_x = 15;
    c.tile_y = 3;
    expect_all_boundaries(c);
  }
  Probes probes = testing::shot_and_corner();
  for (int64_t y : {0, 3, 4, 6, 11}) probes.receivers.push_back({"u", 5, y, 7});
  probes.receivers.push_back({"u@1", 3, 4, 13});
  Case waves{"wave4", {17, 12, 14}, DType::kF32, 7, 4, 1, io::Backend::kUring};
  waves.threads = 1;
  waves.cache_bt = 2;
  waves.tile_x = 9;
  waves.tile_y = 3;
  waves.probes = &probes;
  expect_all_boundaries(waves);
}

// A distributed part's run (the engines a part can run with): only the needed box (its block)
// must come out exact, and halo points too far from it to reach it in time are not computed.
// A part has halos on one side of an axis at the grid's edge (not periodic), else on both or
// none. Streamed: several sweeps, stages and tiles, in which the reach shrinks.
TEST_F(StreamGolden, ANeededBoxComesOutExactAndFarHalosAreNotComputed) {
  const int64_t kNone = GridPlacement::kUnbounded;
  for (const Boundary& b : kBoundaries) {
    // Taller than the engine's write buffers (two blocks of at most 64 planes), so that a
    // buffer holding a computed plane later takes one that is not.
    Case c{"7pt", {23, 17, 150}, DType::kF32, 7, 3, 1, io::Backend::kUring};
    c.cache_bt = 2;
    c.tile_x = 10;
    c.tile_y = 8;
    const bool periodic = b.kind == Boundary::Kind::kPeriodic;
    c.placement.needed_lo = {8, -kNone, 60};
    c.placement.needed_hi = {16, periodic ? kNone : 10, periodic ? 90 : kNone};
    for (EngineUnderTest e :
         {EngineUnderTest{Method::kStream},
          EngineUnderTest{Method::kStream, DevicePlacement::kDeviceResident, false, 0, 1},
          EngineUnderTest{Method::kInCore}, EngineUnderTest{Method::kDevice},
          EngineUnderTest{Method::kDevice, DevicePlacement::kHostResident},
          EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers},
          EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers, true}}) {
      if (e.method == Method::kDevice && !device_available()) continue;
      c.method = e.method;
      c.threads = e.threads;  // (the stream at one thread: its tiles in chains)
      c.device_overlap = e.overlapped ? DeviceOverlap::kOn : DeviceOverlap::kAuto;
      for (auto [stencil, steps] : {std::pair{"7pt", 7}, {"13pt", 5}}) {
        c.stencil = stencil;
        c.steps = steps;
        if (e.placement != DevicePlacement::kDeviceResident) {
          c.device_mem = host_resident_budget(c, testing_scheme(stencil)) / 4;
        }
        if (e.placement == DevicePlacement::kThreeTiers) {
          c.mem = three_tier_host_budget(c, testing_scheme(stencil)) / 4;
        }
        expect_matches_reference<float>(c, b);
      }
      c.stencil = "7pt";
      c.steps = 7;
    }
  }
}

// The same in bands of rows (a distributed part of large planes): bands wholly in the part's
// halo rows compute nothing and write zeros, the others deliver their rows of the box; rows
// wrap across the grid's ends where a periodic part holds all of them. Planes of whole blocks
// (periodic bands need them), and not: rows of 1200 bytes, bands that share their edge blocks.
//
// Sources in the box's reach and far from it, the far ones where another band's planes would
// take them at their own height if a band's wavefront wrapped them (periodic, y bounded: a
// part split along y, whose bands do not wrap).
TEST_F(StreamGolden, APartsNeededBoxComesOutExactInBands) {
  const int64_t kNone = GridPlacement::kUnbounded;
  Probes probes;
  for (auto [x, y, z] : {std::tuple{12, 2, 70}, {20, 25, 75}, {30, 44, 80}, {35, 17, 65}}) {
    SourceSpec s;
    s.x = x, s.y = y, s.z = z;
    s.series = {1.5, -0.75, 0.5};
    probes.sources.push_back(s);
  }
  for (const Boundary& b : kBoundaries) {
    const bool periodic = b.kind == Boundary::Kind::kPeriodic;
    for (const bool split_y : {false, true}) {
      if (split_y && !periodic) continue;  // (the others bound y either way)
      for (auto [stencil, steps, bt, nx] :
           {std::tuple{"7pt", 7, 3, 64}, {"13pt", 5, 0, 64}, {"7pt", 7, 3, 300}}) {
        Case c{stencil, {nx, 48, 130}, DType::kF32, steps, bt, 1, io::Backend::kUring};
        c.method = Method::kStream;
        c.band_rows = 8;
        c.cache_bt = 2;
        c.tile_x = 24;
        c.tile_y = 5;
        c.probes = &probes;
        const bool y_bounded = !periodic || split_y;
        if (split_y) c.placement.whole = {nx, 96, 130};
        c.placement.needed_lo = {8, y_bounded ? 20 : -kNone, 60};
        c.placement.needed_hi = {40, y_bounded ? 34 : kNone, periodic ? 90 : kNone};
        expect_matches_reference<float>(c, b);
      }
    }
  }
}

TEST_F(StreamGolden, NaiveAndAuto) {
  Case c{"7pt", {30, 20, 16}, DType::kF64, 5, 0, 1, io::Backend::kThreads};
  c.method = Method::kNaive;
  expect_all_boundaries(c);
  c.method = Method::kAuto;
  c.mem = 200 << 10;  // the grid (75 KiB) times two plus buffers does not fit: auto streams
  expect_all_boundaries(c);
}

// Receivers' values are held one pass at a time: a run whose traces are larger than --mem
// (1200 steps x 60 receivers x 8 bytes: 562 KiB of a 512 KiB budget) runs within it, saving a
// pass's rows at a time, and its traces are the reference's.
TEST_F(StreamGolden, TracesLargerThanTheBudgetAreHeldAPassAtATime) {
  Probes probes;
  for (int64_t i = 0; i < 60; ++i) probes.receivers.push_back({"u", i % 12, (i * 7) % 10, i % 9});
  for (const Method method : {Method::kStream, Method::kInCore}) {
    Case c{"7pt", {12, 10, 9}, DType::kF32, 1200, 0, 1, io::Backend::kUring};
    c.method = method;
    c.mem = 512 << 10;
    c.probes = &probes;
    expect_all_boundaries(c);
  }
}

// What Ctrl-C relies on: asked to stop, the engine finishes the current sweep, and the grid
// holds exactly the steps it reports.
TEST_F(StreamGolden, ProgressStopsBetweenSweeps) {
  const Shape shape{16, 12, 20};
  const Stencil st = testing_stencil("7pt");
  CreateOptions co;
  co.shape = shape;
  Grid g = Grid::create(root_ + "/stop", co).value();
  const auto u = testing::random_values<float>(shape, 8);
  ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
  StreamOptions opt;
  opt.mem_budget = 16 << 20;
  opt.bt = 3;
  const StreamPlan plan = plan_stream(g.manifest(), st, Boundary{}, 12, opt).value();
  int calls = 0;
  const auto stats = advance_stream(g, st, Boundary{}, 12, plan, opt, [&](int64_t, int64_t) {
                       return ++calls < 2;
                     }).value();
  EXPECT_EQ(stats.steps, 6) << "two sweeps of bt 3, then stop";
  std::vector<float> got(u.size());
  ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
  EXPECT_EQ(
      testing::first_bitwise_difference(testing::reference_run(u, shape, st, Boundary{}, 6), got),
      -1);
}

// A plan decides which components its stages' rings leave out (wave schemes: all but u) and
// sizes its memory by it; a source must add to a component a ring holds. Run with a source that
// its plan did not know of, the engine refuses before changing anything, rather than take more
// memory than planned or leave the source out.
TEST_F(StreamGolden, APlanMadeWithoutTheSourcesIsRefused) {
  const Shape shape{16, 12, 20};
  const Scheme wave2 = testing_scheme("wave2");
  CreateOptions co;
  co.shape = shape;
  co.fields = initial_fields(wave2, {});
  Grid g = Grid::create(root_ + "/unplanned", co).value();
  const auto u = testing::random_values<float>({shape.nx, shape.ny * 3, shape.nz}, 4);
  ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
  StreamOptions opt;
  opt.mem_budget = 16 << 20;
  opt.bt = 3;
  const StreamPlan plan = plan_stream(g.manifest(), wave2, Boundary{}, 6, opt).value();
  Probes given;
  given.sources.push_back({"u@1", 3, 3, 3, 0, 0, 1, {1, 1, 1}});
  const ResolvedProbes sources = resolve_probes(given, shape, wave2.components()).value();
  opt.probes = &sources;
  const auto refused = advance_stream(g, wave2, Boundary{}, 6, plan, opt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(g.manifest().step, 0);
  std::vector<float> got(u.size());
  ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
  EXPECT_EQ(got, u);
  // Planned with them, the source's component stays in the rings and the run goes through.
  const StreamPlan sourced = plan_stream(g.manifest(), wave2, Boundary{}, 6, opt).value();
  EXPECT_EQ(sourced.aliased >> wave2.component_index("u@1") & 1, 0u);
  EXPECT_TRUE(advance_stream(g, wave2, Boundary{}, 6, sourced, opt).ok());
}

// Write buffers of one block (StreamPlan::write_buffers), claimed before the last stage while
// the previous block's writes may still be in flight, give the reference's bits: 7pt and wave8
// (its m in coefficient files, which the write buffers then leave out), both dtypes, every
// boundary (planes of whole 4096-byte blocks, as coefficient files need), blocks of 1 and 2
// z-steps in sweeps of several stages and of one.
TEST_F(StreamGolden, WriteBuffersOfOneBlockGiveTheSameBits) {
  struct Depths {
    int bt, cache_bt, block;  // (not a structured binding: the lambda below reads them)
  };
  for (const std::string name : {"7pt", "wave8"}) {
    for (const DType dtype : {DType::kF32, DType::kF64}) {
      for (const Boundary& b : kBoundaries) {
        for (const Depths d : {Depths{5, 2, 1}, Depths{4, 4, 2}}) {
          Case c{name, {64, 48, 44}, dtype, 9, d.bt, 1, io::Backend::kUring};
          SCOPED_TRACE(describe(c, b) + ", stages of " + std::to_string(d.cache_bt) +
                       ", blocks of " + std::to_string(d.block));
          dispatch_dtype(dtype, [&](auto tag) {
            using T = decltype(tag);
            const Scheme scheme = testing_scheme(name);
            const auto u = initial_values<T>(c, scheme.component_count());
            CreateOptions co;
            co.shape = c.shape;
            co.dtype = dtype;
            co.fields = initial_fields(scheme, {});
            co.coefficient_components = coefficient_components(scheme);
            Grid g = Grid::create(root_ + "/g" + std::to_string(counter_++), co).value();
            ASSERT_TRUE(g.write_planes(0, c.shape.nz, u.data()).ok());
            StreamOptions opt;
            opt.mem_budget = 64 << 20;
            opt.bt = d.bt;
            opt.cache_bt = d.cache_bt;
            opt.block = d.block;
            StreamPlan plan = plan_stream(g.manifest(), scheme, b, c.steps, opt).value();
            plan.write_buffers = d.block;
            plan.io_buffers = 2 * int64_t{d.block};
            EXPECT_EQ(plan.writes_without_coefficients, name == "wave8");
            ASSERT_TRUE(advance_stream(g, scheme, b, c.steps, plan, opt).ok());
            std::vector<T> got(u.size());
            ASSERT_TRUE(g.read_planes(0, c.shape.nz, got.data()).ok());
            const int64_t diff =
                testing::first_bitwise_difference(remembered_reference_run(u, c, scheme, b), got);
            EXPECT_EQ(diff, -1) << "first difference at index " << diff;
            const PlaneHashing hashing = g.manifest().plane_hashing();  // (m's from the window)
            const size_t plane = u.size() / static_cast<size_t>(c.shape.nz);
            for (int64_t z = 0; z < c.shape.nz; ++z) {
              const Status st = g.check_plane_hash(z, plane_hash(got.data() + z * plane, hashing));
              EXPECT_TRUE(st.ok()) << st.message();
            }
          });
        }
      }
    }
  }
}

// A run with subnormals flushed, stopped after two sweeps, is finished in that mode by a bare
// --resume (the run record keeps it), bitwise.
TEST_F(StreamGolden, AStoppedRunResumesWithItsSubnormalMode) {
  Case c{"7pt", {16, 12, 20}, DType::kF32, 12, 3, 1, io::Backend::kUring};
  c.flush_subnormals = true;
  const std::string dir = root_ + "/flushed";
  const auto u = initial_values<float>(c, 1);
  {
    CreateOptions co;
    co.shape = c.shape;
    Grid g = Grid::create(dir, co).value();
    ASSERT_TRUE(g.write_planes(0, c.shape.nz, u.data()).ok());
  }
  RunOptions opt;
  opt.scheme = testing_stencil(c.stencil);
  opt.steps = c.steps;
  opt.method = Method::kStream;
  opt.bt = c.bt;
  opt.mem_budget = c.mem;
  opt.flush_subnormals = true;
  int calls = 0;
  opt.progress = [&](int64_t, int64_t) { return ++calls < 2; };
  const auto stopped = run_grid(dir, opt);
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  ASSERT_EQ(stopped->steps, 6) << "two sweeps of bt 3, then stop";
  RunOptions again;
  again.resume = true;
  again.mem_budget = c.mem;
  const auto resumed = run_grid(dir, again);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_TRUE(resumed->resumed);
  EXPECT_TRUE(resumed->flush_subnormals);
  std::vector<float> got(u.size());
  ASSERT_TRUE(Grid::open(dir).value().read_planes(0, c.shape.nz, got.data()).ok());
  const auto want = flushed_reference_run(u, c, opt.scheme, Boundary{}, nullptr);
  EXPECT_EQ(testing::first_bitwise_difference(want, got), -1);
}

// On a virtual machine every byte a sweep moves also costs the CPUs time (the host's disk
// emulation): the run's plan counts it as compute.
TEST_F(StreamGolden, PlansChargeTheCpuCostOfIoToCompute) {
  const Shape shape{64, 48, 40};
  CreateOptions co;
  co.shape = shape;
  const Grid g = Grid::create(root_ + "/plan", co).value();
  RunOptions ro;
  ro.scheme = testing_stencil("7pt");
  ro.steps = 12;
  ro.method = Method::kStream;
  ro.bt = 4;
  ro.threads = 2;
  ro.mem_budget = 16 << 20;
  MachineProfile machine;
  machine.compute_mlups = 100;
  machine.disk_read_bps = machine.disk_write_bps = 1e9;
  const RunPlan bare = plan_run(g, ro, machine).value();
  machine.io_cpu_seconds_per_byte = 1e-9;
  const RunPlan vm = plan_run(g, ro, machine).value();
  ASSERT_EQ(vm.stream.sweeps, 3);
  const double grid_bytes = static_cast<double>(shape.nz * g.manifest().layout.plane_stride);
  // Per sweep: a read and a write of the grid, the CPU time shared by the 2 threads.
  EXPECT_NEAR(vm.predicted_compute_seconds - bare.predicted_compute_seconds,
              3 * 1e-9 * 2 * grid_bytes / 2, 1e-12);
  EXPECT_EQ(vm.stream.bt, bare.stream.bt) << "a forced bt stays";
  // The updates themselves at the in-core rate, times the tiles' halo work and what blocks
  // and stages cost beyond it, and the engine's own work on every byte a sweep moves (0.3
  // CPU-s per GiB, plan.cc).
  ASSERT_GT(bare.stream.compute_factor, 1);
  ASSERT_GT(bare.stream.redundancy, 1);
  EXPECT_NEAR(bare.predicted_compute_seconds - static_cast<double>(shape.points()) * 12 / 100e6 *
                                                   bare.stream.compute_factor *
                                                   bare.stream.redundancy,
              3 * 0.3 / (1 << 30) * 2 * grid_bytes / 2, 1e-12);
}

// Blocks of every depth: between blocks each (stage, tile) trades its carried planes with the
// threads' rings, so planes pass between tiles, stages and threads; a scheme of several
// fields carries planes of several components.
TEST_F(StreamGolden, BlockSizes) {
  const Shape shape{21, 13, 17};
  for (const char* name : {"13pt", "wave2"}) {
    const Scheme scheme = testing_scheme(name);
    const int n = scheme.component_count();
    for (auto [block, cache_bt] : {std::pair{1, 3}, {2, 1}, {3, 2}, {7, 3}, {40, 2}}) {
      for (const Boundary& b : kBoundaries) {
        SCOPED_TRACE(std::string(name) + ", block " + std::to_string(block) + ", cache bt " +
                     std::to_string(cache_bt) + ", " + b.to_string());
        const std::string dir = root_ + "/b" + std::to_string(counter_++);
        CreateOptions co;
        co.shape = shape;
        co.fields = initial_fields(scheme, {});
        Grid g = Grid::create(dir, co).value();
        const auto u = testing::random_values<float>({shape.nx, shape.ny * n, shape.nz}, 3);
        ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
        StreamOptions opt;
        opt.mem_budget = 64 << 20;
        opt.block = block;
        opt.bt = 3;
        opt.cache_bt = cache_bt;
        opt.tile_x = 8;
        opt.tile_y = 5;
        const StreamPlan plan = plan_stream(g.manifest(), scheme, b, 7, opt).value();
        EXPECT_EQ(plan.block, block);
        ASSERT_TRUE(advance_stream(g, scheme, b, 7, plan, opt).ok());
        std::vector<float> got(u.size());
        ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
        EXPECT_EQ(
            testing::first_bitwise_difference(testing::reference_run(u, shape, scheme, b, 7), got),
            -1);
      }
    }
  }
}

TEST_F(StreamGolden, TiledOnATightBudget) {
  Case c{"13pt", {40, 36, 30}, DType::kF32, 7, 0, 3, io::Backend::kUring};
  c.method = Method::kTiled;
  c.mem = 160 << 10;
  const Manifest m = planning_manifest(c.shape);
  TiledOptions opt;
  opt.mem_budget = c.mem;
  const TiledPlan p = plan_tiled(m, testing_stencil(c.stencil), Boundary{}, c.steps, opt).value();
  EXPECT_GT(p.blocks, 1);
  EXPECT_LE(static_cast<uint64_t>(p.memory_bytes), c.mem);
  expect_all_boundaries(c);
}

// Asked to stop, the tiled method finishes the pass; the grid holds the steps it reports and
// the second copy is gone, whichever copy the pass wrote.
TEST_F(StreamGolden, TiledStopsBetweenPassesAndLeavesNoCopy) {
  const Shape shape{16, 12, 20};
  const Stencil st = testing_stencil("7pt");
  for (int passes : {1, 2}) {
    const std::string dir = root_ + "/stop" + std::to_string(passes);
    CreateOptions co;
    co.shape = shape;
    Grid g = Grid::create(dir, co).value();
    const auto u = testing::random_values<float>(shape, 8);
    ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
    TiledOptions opt;
    opt.mem_budget = 1 << 20;
    opt.bt = 3;
    opt.block_y = 5;
    opt.block_z = 4;
    const TiledPlan plan = plan_tiled(g.manifest(), st, Boundary{}, 12, opt).value();
    int calls = 0;
    const auto stats = advance_tiled(g, st, Boundary{}, 12, plan, [&](int64_t, int64_t) {
                         return ++calls < passes;
                       }).value();
    EXPECT_EQ(stats.steps, 3 * passes);
    EXPECT_EQ(g.manifest().step, stats.steps) << "every pass commits";
    EXPECT_FALSE(fs::exists(g.file_path(0, FileSet::kReplacement))) << "the old copy is gone";
    std::vector<float> got(u.size());
    ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
    EXPECT_EQ(testing::first_bitwise_difference(
                  testing::reference_run(u, shape, st, Boundary{}, stats.steps), got),
              -1);
  }
}

}  // namespace
}  // namespace deepgrid
