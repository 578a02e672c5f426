// The stream and tiled methods' plans: the stream cost model (how deep a sweep, how deep its
// blocks and stages, against what the disks sustain and what their I/O costs the CPUs), the
// frames a plan holds, and a clear minimum when the budget is too small. Plans only: no grid
// is run (the engines against the reference are stream_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/aligned_buffer.h"
#include "deepgrid/machine.h"
#include "deepgrid/run.h"
#include "engines/stream_engine.h"
#include "engines/tiled_engine.h"
#include "engines/wavefront.h"
#include "plan/plan.h"
#include "planning_manifest.h"
#include "temp_dir.h"
#include "test_schemes.h"

namespace deepgrid {
namespace {

using testing::planning_manifest;

// A 7pt stream run of `steps` on 2 threads within `budget`.
RunOptions stream_run(int64_t steps, uint64_t budget) {
  RunOptions ro;
  ro.scheme = Stencil::preset("7pt").value();
  ro.steps = steps;
  ro.method = Method::kStream;
  ro.threads = 2;
  ro.mem_budget = budget;
  return ro;
}

// Every sweep costs the engine's own work on the bytes it moves, however fast the disks: with
// the rate sweeps sustained on the Xeon VM (2.28 GB/s), three sweeps of bt 16 looked as fast as
// one of bt 48 to a planner that did not count it, and ran at 0.77 of the warm in-core rate
// where bt 48 ran at 0.88-0.94.
TEST(StreamPlan, EverySweepCostsTheEnginesWorkOnItsBytes) {
  const Manifest m = planning_manifest({512, 512, 4096});
  RunOptions ro = stream_run(48, 256 << 20);
  MachineProfile machine;
  machine.compute_mlups = 4113;
  machine.disk_read_bps = machine.disk_write_bps = 1397e6;
  machine.disk_sweep_bps = 2.28e9;
  const RunPlan plan = plan_run(m, "", ro, machine).value();
  EXPECT_EQ(plan.stream.sweeps, 1) << "bt " << plan.stream.bt;
}

// An in-core run is predicted at the in-core engine's own rate (incore_rate(): wave8 turning
// its time levels), a stream run weighs the stages' rate (compute_mlups).
TEST(StreamPlan, InCoreRunsArePredictedAtTheInCoreEnginesOwnRate) {
  const Manifest m = planning_manifest({96, 80, 64});
  RunOptions ro = stream_run(24, 0);
  ro.scheme = Scheme::preset("wave8").value();
  ro.method = Method::kInCore;
  MachineProfile machine;
  machine.compute_mlups = 500;
  machine.incore_mlups = 800;
  machine.disk_read_bps = machine.disk_write_bps = 1e9;
  const double updates = static_cast<double>(m.shape.points()) * 24;
  EXPECT_DOUBLE_EQ(plan_run(m, "", ro, machine).value().predicted_compute_seconds, updates / 800e6);
  machine.incore_mlups = 0;  // runs as the stages do
  EXPECT_DOUBLE_EQ(plan_run(m, "", ro, machine).value().predicted_compute_seconds, updates / 500e6);
}

// What `plan` predicts is what the planner weighed: no forced depth is predicted to run
// faster than the one it chose, from disk-bound to compute-bound, with a disk rate measured
// (hedged) and one earlier sweeps sustained. (It printed a cost without the tiles' halo work
// and the hedge, and showed bt 8 faster than the bt 6 it chose.)
TEST(StreamPlan, NoForcedDepthIsPredictedFasterThanTheChosenOne) {
  const Manifest m = planning_manifest({96, 80, 64});
  RunOptions ro = stream_run(24, 3 << 20);
  MachineProfile machine;
  machine.compute_mlups = 2000;
  for (const double disk : {2e8, 5e8, 1e9, 2e9, 4e9, 8e9}) {
    for (const bool sustained : {false, true}) {
      machine.disk_read_bps = machine.disk_write_bps = disk;
      machine.disk_sweep_bps = sustained ? disk : 0;
      ro.bt = 0;
      const RunPlan chosen = plan_run(m, "", ro, machine).value();
      ASSERT_GT(chosen.predicted_seconds, 0);
      EXPECT_GE(
          chosen.predicted_seconds,
          std::max(chosen.predicted_compute_seconds, chosen.predicted_io_seconds) * (1 - 1e-9));
      for (int bt = 1; bt <= 24; ++bt) {
        ro.bt = bt;
        const Result<RunPlan> forced = plan_run(m, "", ro, machine);
        if (!forced.ok()) continue;  // beyond the budget
        EXPECT_GE(forced->predicted_seconds, chosen.predicted_seconds * (1 - 1e-9))
            << "bt " << bt << " against the chosen bt " << chosen.stream.bt << ", disks at " << disk
            << " B/s" << (sustained ? " sustained" : " measured");
      }
    }
  }
}

// Stages as deep as the in-core engine goes cut 512-wide planes into 256-wide tiles at a 768 KiB
// working set; stages shallow enough for tiles that span x recompute fewer halo rows, and the
// planner weighs both (on a Xeon VM they computed bt 16 in 4.0-4.2 s against 4.9-5.1 s).
TEST(StreamPlan, StagesGoShallowerWhereTheirTilesThenSpanThePlanes) {
  const Manifest m = planning_manifest({512, 512, 1024});
  RunOptions ro = stream_run(32, 64 << 20);
  MachineProfile machine;
  machine.compute_mlups = 3000;
  machine.disk_read_bps = machine.disk_write_bps = 4e9;
  machine.cache_bytes = 768 << 10;
  const RunPlan chosen = plan_run(m, "", ro, machine).value();
  EXPECT_EQ(chosen.stream.tile_x, 512) << "stages of " << chosen.stream.cache_bt;

  ro.cache_bt = 6;  // the in-core engine's depth for this working set
  const RunPlan deep = plan_run(m, "", ro, machine).value();
  EXPECT_LT(deep.stream.tile_x, 512);
  EXPECT_LT(chosen.stream.redundancy, deep.stream.redundancy);
  EXPECT_LE(chosen.predicted_seconds, deep.predicted_seconds);

  machine.cache_bytes = 6 << 20;  // tiles span x at the in-core depth: nothing to weigh
  ro.cache_bt = 0;
  const RunPlan large = plan_run(m, "", ro, machine).value();
  EXPECT_EQ(large.stream.tile_x, 512);
  EXPECT_GE(large.stream.cache_bt, 6);
}

// A stage's tiles of each x range run as chains that hand their edge rows on (no halo rows
// computed twice but at the chains' ends), as many chains a range as the threads need, their
// edges a block's planes of the stage's inner levels for each thread, counted in the plan's
// memory; with StreamOptions::carry_edges off, or with one tile per chain or one level per
// stage, each tile on its own.
TEST(StreamPlan, TilesRunInChains) {
  const Manifest m = planning_manifest({512, 512, 64});
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = int64_t{1} << 30;
  opt.bt = 8;
  opt.cache_bt = 4;
  opt.block = 5;
  opt.tile_x = 256;
  opt.tile_y = 32;
  opt.threads = 1;
  const StreamPlan chained = plan_stream(m, st, Boundary{}, 8, opt).value();
  EXPECT_EQ(chained.chain_tiles, 512 / 32);
  EXPECT_DOUBLE_EQ(chained.redundancy, (4 * 256 + 2 * (3 + 2 + 1)) / (4.0 * 256))
      << "the x halo of 256-wide tiles alone";
  // Levels 1-3 of a block of 5 z-steps: 5 + 2 planes each, of 2 rows of the rings' stride.
  const int64_t stride = internal::wavefront_row_stride(256 + 2 * 4, sizeof(float));
  EXPECT_EQ(chained.edges_bytes,
            static_cast<int64_t>(internal::paged_bytes(3 * 7 * 2 * stride * sizeof(float))));
  opt.carry_edges = false;
  const StreamPlan apart = plan_stream(m, st, Boundary{}, 8, opt).value();
  EXPECT_EQ(apart.chain_tiles, 0);
  EXPECT_EQ(apart.edges_bytes, 0);
  EXPECT_GT(apart.redundancy, chained.redundancy * 1.05) << "32-row tiles' y halo";
  EXPECT_EQ(chained.memory_bytes - apart.memory_bytes, chained.edges_bytes);
  opt.carry_edges = true;
  opt.threads = 2;  // a chain each of the two x ranges
  const StreamPlan two = plan_stream(m, st, Boundary{}, 8, opt).value();
  EXPECT_EQ(two.chain_tiles, 512 / 32);
  EXPECT_DOUBLE_EQ(two.redundancy, chained.redundancy);
  opt.carry_edges = false;
  EXPECT_EQ(two.memory_bytes - plan_stream(m, st, Boundary{}, 8, opt).value().memory_bytes,
            2 * chained.edges_bytes)
      << "edges for each thread";
  opt.carry_edges = true;
  opt.threads = 4;  // two chains a range
  const StreamPlan four = plan_stream(m, st, Boundary{}, 8, opt).value();
  EXPECT_EQ(four.chain_tiles, 512 / 32 / 2);
  EXPECT_GT(four.redundancy, chained.redundancy) << "the y halo at the chains' ends";
  EXPECT_LT(four.redundancy, apart.redundancy);
  opt.threads = 32;
  EXPECT_EQ(plan_stream(m, st, Boundary{}, 8, opt).value().chain_tiles, 0) << "a tile a chain";
  opt.threads = 1;
  opt.tile_y = 512;
  EXPECT_EQ(plan_stream(m, st, Boundary{}, 8, opt).value().chain_tiles, 0) << "one tile a column";
  opt.tile_y = 32;
  opt.cache_bt = 1;
  EXPECT_EQ(plan_stream(m, st, Boundary{}, 8, opt).value().chain_tiles, 0) << "one level a stage";
}

// What a plan computes beyond the in-core engine's updates: shallower blocks read their
// carried planes into the cache more often (measured 1.82x the compute with blocks of 1, 1.16x
// with blocks of 3, against blocks of 26), and one-step stages are bound by memory.
TEST(StreamPlan, ShallowBlocksAndStagesComputeMore) {
  const Manifest m = planning_manifest({256, 256, 512});
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = int64_t{1} << 30;
  opt.bt = 8;
  opt.cache_bt = 4;
  auto factor = [&](int block) {
    opt.block = block;
    return plan_stream(m, st, Boundary{}, 100, opt).value().compute_factor;
  };
  EXPECT_DOUBLE_EQ(factor(1), 2.0);
  EXPECT_GT(factor(3), factor(26));
  EXPECT_LT(factor(26), 1.05);
  opt.cache_bt = 1;
  EXPECT_GT(factor(26), 2.0) << "one step per pass over the cache";
}
TEST(TiledPlan, ForcedBlocksAndAClearMinimum) {
  const Manifest m = planning_manifest({256, 256, 512});
  const Stencil st = Stencil::preset("7pt").value();
  TiledOptions opt;
  opt.mem_budget = 16 << 20;
  const TiledPlan p = plan_tiled(m, st, Boundary{}, 100, opt).value();
  EXPECT_LE(static_cast<uint64_t>(p.memory_bytes), opt.mem_budget);
  EXPECT_GE(p.redundancy, 1.0);
  EXPECT_EQ(p.passes, (100 + p.bt - 1) / p.bt);
  EXPECT_EQ(p.disk_bytes, m.layout.files[0].bytes) << "one second copy of the grid";
  opt.bt = 4;
  opt.block_y = 32;
  opt.block_z = 16;
  const TiledPlan forced = plan_tiled(m, st, Boundary{}, 100, opt).value();
  EXPECT_EQ(forced.bt, 4);
  EXPECT_EQ(forced.block_y, 32);
  EXPECT_EQ(forced.block_z, 16);
  EXPECT_EQ(forced.blocks, (256 / 32) * (512 / 16));
  opt.block_z = 512;  // the whole grid's depth at 32 rows does not fit 16 MiB
  EXPECT_FALSE(plan_tiled(m, st, Boundary{}, 100, opt).ok());
  opt = TiledOptions{};
  opt.mem_budget = 16 << 10;  // below two buffers of 3 rows by 3 planes of 272 values
  auto tiny = plan_tiled(m, st, Boundary{}, 100, opt);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("minimum"), std::string::npos);
  opt.mem_budget = 0;
  EXPECT_FALSE(plan_tiled(m, st, Boundary{}, 100, opt).ok()) << "tiled needs a budget";
}

// wave8 at bt 8 in stages of 4 with blocks of 4, in a budget that holds them.
StreamOptions wave8_stages_of_four() {
  StreamOptions opt;
  opt.mem_budget = 512 << 20;
  opt.threads = 2;
  opt.bt = 8;
  opt.cache_bt = 4;
  opt.block = 4;
  return opt;
}

// Wave schemes' stages keep u alone in their rings and carries (lean wavefronts): u@1 is read
// from the level two below, m from one window of planes that every stage shares (from the plane
// the sweep's last level reads to the block's last read), so that the frames hold u and u@1 and
// each stage keeps 2 rz input planes, as for a stencil. The memory freed deepens the sweep. A
// source on u@1 keeps u@1 in the rings. A coefficient field that is not among the last fields
// is read from each stage's input level instead, whose planes then stay until the stage's last
// level has computed them.
TEST(StreamPlan, WaveStagesKeepUAloneInTheirRings) {
  Manifest m = planning_manifest({256, 256, 2048});
  m.layout = plan_layout(m.shape, DType::kF32, 1, 8 << 20, 64, 3).value();
  const Scheme wave8 = Scheme::preset("wave8").value();
  const int u_old = wave8.component_index("u@1"), coefficient = wave8.component_index("m");
  StreamOptions opt = wave8_stages_of_four();
  const StreamPlan lean = plan_stream(m, wave8, Boundary{}, 64, opt).value();
  EXPECT_EQ(lean.aliased, (uint64_t{1} << u_old) | (uint64_t{1} << coefficient));
  EXPECT_EQ(lean.window_components, 1);
  EXPECT_FALSE(lean.coefficients_from_input);
  EXPECT_EQ(lean.window_frames, 8 * 4 + 4) << "bt rz + block";
  EXPECT_EQ(lean.frames, 2 * 4 + 2 * 8) << "two stages' planes of a block, 2 rz kept by each";
  opt.source_components = uint64_t{1} << u_old;
  const StreamPlan sourced = plan_stream(m, wave8, Boundary{}, 64, opt).value();
  EXPECT_EQ(sourced.aliased, uint64_t{1} << coefficient);
  EXPECT_EQ(sourced.window_components, 1);
  EXPECT_EQ(sourced.frames, lean.frames);
  EXPECT_LT(lean.memory_bytes, sourced.memory_bytes) << "rings of u and u@1 cost more";
  // Every field in the rings (as sources on u@1 and m would have it): frames of all three.
  opt.source_components = (uint64_t{1} << u_old) | (uint64_t{1} << coefficient);
  const StreamPlan full = plan_stream(m, wave8, Boundary{}, 64, opt).value();
  EXPECT_EQ(full.aliased, 0u);
  EXPECT_EQ(full.window_components, 0);
  EXPECT_FALSE(full.coefficients_from_input);
  EXPECT_EQ(full.frames, lean.frames);
  EXPECT_GT(full.frame_bytes, lean.frame_bytes * 3 / 2 - 4096) << "three fields against two";
  EXPECT_LT(lean.memory_bytes, full.memory_bytes);
  // A leading coefficient field (radius 2): from each stage's input, whose stages of 4 levels
  // keep 4 rz = 8 planes, not 2 rz.
  const Scheme leading = Scheme::from_json(testing::kLeadingCoefficientScheme).value();
  opt.source_components = 0;
  const StreamPlan input = plan_stream(m, leading, Boundary{}, 64, opt).value();
  EXPECT_EQ(input.aliased, (uint64_t{1} << leading.component_index("c")) |
                               (uint64_t{1} << leading.component_index("v@1")));
  EXPECT_EQ(input.window_components, 0);
  EXPECT_TRUE(input.coefficients_from_input);
  EXPECT_EQ(input.frames, 2 * 4 + 2 * (4 * 2));
  // Chosen freely, on a slow disk, the lean plan sweeps deeper in the same budget.
  opt.bt = opt.cache_bt = opt.block = 0;
  opt.mem_budget = 64 << 20;
  opt.disk_bytes_per_update = 0.1;
  opt.source_components = (uint64_t{1} << u_old) | (uint64_t{1} << coefficient);
  const int full_bt = plan_stream(m, wave8, Boundary{}, 64, opt)->bt;
  opt.source_components = 0;
  EXPECT_GT(plan_stream(m, wave8, Boundary{}, 64, opt)->bt, full_bt);
}

// A grid that keeps wave8's m in coefficient files, which the stream never writes: the write
// buffers hold u and u@1 alone (the block's 2 block buffers a coefficient plane less each), and
// where m still lies in the ring (a grid without coefficient files) they hold all three.
TEST(StreamPlan, WriteBuffersLeaveOutTheCoefficientFilesFields) {
  Manifest ring = planning_manifest({256, 256, 2048});
  ring.fields = {"u", "u@1", "m"};
  ring.layout = plan_layout(ring.shape, DType::kF32, 1, 8 << 20, 64, 3).value();
  Manifest files = ring;
  files.layout = plan_layout(ring.shape, DType::kF32, 1, 8 << 20, 64, 3, 1).value();
  ASSERT_TRUE(files.has_coef_files());
  const Scheme wave8 = Scheme::preset("wave8").value();
  StreamOptions opt = wave8_stages_of_four();
  const StreamPlan in_ring = plan_stream(ring, wave8, Boundary{}, 64, opt).value();
  const StreamPlan apart = plan_stream(files, wave8, Boundary{}, 64, opt).value();
  EXPECT_FALSE(in_ring.writes_without_coefficients);
  EXPECT_TRUE(apart.writes_without_coefficients);
  EXPECT_EQ(apart.io_buffers, in_ring.io_buffers);
  EXPECT_EQ(in_ring.memory_bytes - apart.memory_bytes, 2 * 4 * files.layout.coef_bytes);
  // Every field in the rings (sources on u@1 and m): no window, so writes hold m again.
  opt.source_components =
      (uint64_t{1} << wave8.component_index("u@1")) | (uint64_t{1} << wave8.component_index("m"));
  EXPECT_FALSE(plan_stream(files, wave8, Boundary{}, 64, opt)->writes_without_coefficients);
}

// Where the budget binds the block and the disk has time to spare, the planner takes write
// buffers of one block, claimed before the last stage, and the memory they free deepens the
// block (wave8 at 512x512 in 192 MiB: blocks of 2 become 3); where the disk binds, two blocks,
// which leave it the whole compute of a block for its transfers; and never in a sweep of one
// stage, whose writes would have no compute to overlap.
TEST(StreamPlan, WriteBuffersOfOneBlockWhereTheDiskHasTimeToSpare) {
  Manifest m = planning_manifest({512, 512, 1024});
  m.fields = {"u", "u@1", "m"};
  m.layout = plan_layout(m.shape, DType::kF32, 1, 8 << 20, 64, 3, 1).value();
  const Scheme wave8 = Scheme::preset("wave8").value();
  StreamOptions opt;
  opt.mem_budget = 192 << 20;
  opt.threads = 2;
  opt.cache_bytes = 3 << 19;
  opt.bt = 8;
  opt.cache_bt = 2;
  opt.disk_bytes_per_update = 100;  // a disk far faster than the compute
  const StreamPlan fast = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  EXPECT_EQ(fast.write_buffers, fast.block);
  EXPECT_EQ(fast.io_buffers, 2 * int64_t{fast.block});
  EXPECT_LE(static_cast<uint64_t>(fast.memory_bytes), opt.mem_budget);
  opt.disk_bytes_per_update = 0.05;  // a disk that binds
  const StreamPlan slow = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  EXPECT_EQ(slow.write_buffers, 2 * int64_t{slow.block});
  EXPECT_LT(slow.block, fast.block) << "the memory of a block's writes deepens the block";
  opt.disk_bytes_per_update = 100;
  opt.bt = 2;  // one stage of two levels
  const StreamPlan one_stage = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  EXPECT_EQ(one_stage.stages, 1);
  EXPECT_EQ(one_stage.write_buffers, 2 * int64_t{one_stage.block});
}

// A working set tuned small (384 KiB, as a Xeon VM's tuning on 7pt chose) leaves wave8's stages
// one level each, bound by memory; the planner also weighs stages of two levels with tiles sized
// for a larger working set, and takes them (with the working set set by hand, 768 KiB-1.5 MiB
// ran 1.2-1.3x as fast as 384 KiB on EPYC and Xeon VMs; the plan chosen here computed 1.13x
// faster). A working set that already gives such stages is kept, and so are tiles given by hand.
TEST(StreamPlan, StagesOfOneLevelAlsoWeighALargerWorkingSet) {
  Manifest m = planning_manifest({512, 512, 1024});
  m.layout = plan_layout(m.shape, DType::kF32, 1, 8 << 20, 64, 3).value();
  const Scheme wave8 = Scheme::preset("wave8").value();
  StreamOptions opt;
  opt.mem_budget = 192 << 20;
  opt.threads = 2;
  opt.cache_bytes = 384 << 10;
  opt.cache_bt = 1;  // what this working set alone gives
  const StreamPlan one = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  opt.cache_bt = 0;
  const StreamPlan chosen = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  EXPECT_GE(chosen.cache_bt, 2);
  EXPECT_EQ(chosen.cache_bytes, 768 << 10) << "the first multiple whose stages run two levels";
  EXPECT_EQ(one.cache_bytes, 384 << 10);
  EXPECT_LT(chosen.cost.steps, one.cost.steps);
  EXPECT_LE(static_cast<uint64_t>(chosen.memory_bytes), opt.mem_budget);

  opt.cache_bytes = 3 << 20;  // stages of two levels already: nothing wider is needed
  const StreamPlan tuned = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  opt.cache_bt = tuned.cache_bt;
  const StreamPlan same = plan_stream(m, wave8, Boundary{}, 16, opt).value();
  EXPECT_EQ(tuned.tile_y, same.tile_y);
  EXPECT_EQ(tuned.cache_bytes, 3 << 20);

  opt.cache_bytes = 384 << 10;
  opt.cache_bt = 0;
  opt.tile_x = 512;
  opt.tile_y = 64;  // tiles given by hand keep their working set
  EXPECT_EQ(plan_stream(m, wave8, Boundary{}, 16, opt)->cache_bt, 1);
}

TEST(StreamPlan, CostModelAndAClearMinimum) {
  const Manifest m = planning_manifest({256, 256, 4096});
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = 64 << 20;
  const StreamPlan p = plan_stream(m, st, Boundary{}, 100, opt).value();
  EXPECT_LE(static_cast<uint64_t>(p.memory_bytes), opt.mem_budget);
  EXPECT_GE(p.bt, 8) << "f32 at 0.6 disk bytes per update needs deep blocking";
  EXPECT_GE(p.redundancy, 1.0);
  opt.disk_bytes_per_update = 100;  // a disk as fast as memory: no need to block deeply
  const StreamPlan fast = plan_stream(m, st, Boundary{}, 100, opt).value();
  opt.io_cpu_updates_per_byte = 1;  // but every byte moved costs the CPUs an update's time
  const StreamPlan costly_io = plan_stream(m, st, Boundary{}, 100, opt).value();
  EXPECT_GT(costly_io.bt, fast.bt) << "fewer sweeps take less from the compute";
  opt.io_cpu_updates_per_byte = 0;
  opt.disk_bytes_per_update = 0.1;  // a slow disk: block as deep as the budget allows
  const StreamPlan slow = plan_stream(m, st, Boundary{}, 100, opt).value();
  EXPECT_LT(fast.bt, p.bt);
  EXPECT_GT(slow.bt, p.bt);
  opt.disk_bytes_per_update = 0.6;
  opt.bt = 64;
  opt.mem_budget = 16 << 20;
  EXPECT_FALSE(plan_stream(m, st, Boundary{}, 100, opt).ok()) << "a forced bt over budget";
  opt.bt = 0;
  opt.mem_budget = 1 << 20;  // below 3 planes of 256 KiB plus buffers
  auto tiny = plan_stream(m, st, Boundary{}, 100, opt);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("minimum"), std::string::npos);
  opt.mem_budget = 0;
  EXPECT_FALSE(plan_stream(m, st, Boundary{}, 100, opt).ok()) << "stream needs a budget";
}

// When the disk binds every plan, plans of as many sweeps move as many bytes: the deeper ones
// only fit shallower blocks and compute more. The planner takes the deepest block among the
// plans of its number of sweeps (on a 25 GiB grid in 1 GiB it took bt 14 with blocks of 3
// z-steps, where bt 12 had blocks of 6 and ran 1.3 times as fast). Here, 36 steps in 2
// sweeps: bt 18 fits blocks of 3, bt 19-24 blocks of 1.
TEST(StreamPlan, PlansOfAsManySweepsWinByTheirCompute) {
  const Manifest m = planning_manifest({2048, 2048, 1600});
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = uint64_t{1} << 30;
  // The disk of that run's plan: 1.15 x 395 MB/s over 2893 MLUP/s (machine.h), slow enough that
  // every plan waits for it.
  opt.disk_bytes_per_update = 1.15 * 395e6 / 2893e6;
  const int64_t steps = 36;
  const StreamPlan chosen = plan_stream(m, st, Boundary{}, steps, opt).value();
  ASSERT_EQ(chosen.sweeps, 2) << "bt " << chosen.bt << ", blocks of " << chosen.block;
  int compared = 0;
  for (int bt = 1; bt <= steps; ++bt) {
    if ((steps + bt - 1) / bt != chosen.sweeps || bt == chosen.bt) continue;
    opt.bt = bt;
    const Result<StreamPlan> other = plan_stream(m, st, Boundary{}, steps, opt);
    if (!other.ok()) continue;  // deeper than fits
    EXPECT_LE(other->block, chosen.block) << "bt " << bt << " against the chosen " << chosen.bt;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// A rate that sweeps sustained is taken as it is; a short measurement gets a wide margin. The
// 25 GiB grid in 1 GiB, 24 steps, on a Xeon VM: reads measured 1397 MB/s, and with that margin
// one sweep of bt 24 (blocks of 1 z-step) took 83.5 s, while bt 12 in two sweeps (blocks of 6)
// took 51.4 s, its disks sustaining 2.1 GB/s of reads and writes: taken as it is, that rate
// makes two sweeps the faster plan. (At 1.6 GB/s one sweep of blocks of 2, its write buffers
// of one block, would compute 39 steps' worth against two sweeps' 41 of disk time.)
TEST(StreamPlan, AnObservedDiskRateIsTakenAsItIs) {
  const Manifest m = planning_manifest({2048, 2048, 1600});
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = uint64_t{1} << 30;
  opt.disk_bytes_per_update = 1.15 * 1397e6 / 4113e6;
  EXPECT_EQ(plan_stream(m, st, Boundary{}, 24, opt).value().sweeps, 1) << "as measured";
  opt.disk_bytes_per_update = 2.1e9 / 4113e6;
  opt.disk_rate_observed = true;
  const StreamPlan observed = plan_stream(m, st, Boundary{}, 24, opt).value();
  EXPECT_EQ(observed.sweeps, 2) << "as sustained";
  EXPECT_GE(observed.block, 6);
}

// Stages take turns in one frame store: a deeper sweep adds only the planes each stage carries
// into the next block (2 rz), not a block of planes per stage.
TEST(StreamPlan, StagesShareTheirPlanes) {
  const Manifest m = planning_manifest({256, 256, 4096});
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = int64_t{1} << 30;
  opt.block = 20;
  opt.cache_bt = 4;
  auto frames = [&](int bt) {
    opt.bt = bt;
    const StreamPlan p = plan_stream(m, st, Boundary{}, 100, opt).value();
    EXPECT_EQ(p.block, 20);
    return p.frames;
  };
  EXPECT_EQ(frames(32) - frames(8), 6 * 2) << "8 stages against 2";
  EXPECT_LT(frames(4), frames(8)) << "one stage needs no output frames";
}

}  // namespace
}  // namespace deepgrid

namespace deepgrid {
namespace {

// Where a budget holds few whole planes (16 of 2048x2048x256 in 256 MiB: bt 4 in 8 sweeps on
// the EPYC VM of docs/performance/large-planes.md), bands of rows hold as many of their own
// planes as the depth wants: the plan of bands goes deeper, costs less, keeps within the
// budget, and its planes hold each band with bt rows of halo at either side.
// The EPYC VM of docs/performance/large-planes.md, "Bands of rows, built", as a profile.
MachineProfile epyc_with_bands() { return testing::measured_machine(4500, 900e6, 2.0e9); }

TEST(StreamPlan, BandsOfRowsBlockDeeperWhereTheBudgetHoldsFewPlanes) {
  const Manifest m = testing::planning_manifest({2048, 2048, 256});
  const MachineProfile machine = epyc_with_bands();
  RunOptions ro = stream_run(32, 256 << 20);
  const RunPlan whole = plan_run(m, "", ro, machine).value();
  ro.band_rows = 256;
  const RunPlan bands = plan_run(m, "", ro, machine).value();
  EXPECT_EQ(whole.stream.bands, 0);
  ASSERT_EQ(bands.stream.bands, 8);
  EXPECT_EQ(bands.stream.band_rows, 256);
  EXPECT_EQ(bands.stream.band_height, 256 + 2 * bands.stream.bt);
  EXPECT_DOUBLE_EQ(bands.stream.band_redundancy, 1 + bands.stream.bt / 256.0)
      << "each level computes the rows that reach its band's own: on average its 256 and bt more";
  EXPECT_EQ(whole.stream.band_redundancy, 1);
  EXPECT_GE(bands.stream.bt, 2 * whole.stream.bt) << "whole planes: bt " << whole.stream.bt;
  EXPECT_LT(bands.stream.sweeps, whole.stream.sweeps);
  EXPECT_LT(bands.predicted_seconds, whole.predicted_seconds);
  EXPECT_LE(bands.memory_bytes, ro.mem_budget);
  EXPECT_EQ(bands.disk_bytes, static_cast<uint64_t>(256 * m.layout.plane_stride))
      << "room for a second copy of the data files";
  // A band taller than the grid is one band of the grid's rows; a forced depth is kept.
  ro.band_rows = 5000;
  ro.bt = 3;
  const RunPlan one = plan_run(m, "", ro, machine).value();
  EXPECT_EQ(one.stream.bands, 1);
  EXPECT_EQ(one.stream.band_height, 2048);
  EXPECT_EQ(one.stream.band_redundancy, 1) << "no halo rows within the grid";
  EXPECT_EQ(one.stream.bt, 3);
}

}  // namespace
}  // namespace deepgrid

namespace deepgrid {
namespace {

// Left to choose (kAutoBandRows), the planner takes bands where they cost less than whole
// planes (by a margin) and the data files' directory has room for their copy; whole planes
// where it cannot check that room, for the 512x512x4096 grid of the 16x benchmark (bt 32 in
// one sweep already), and for a periodic grid whose rows make no band height of whole blocks
// (2047 f32 values: whole blocks only every 1024 rows, beyond half of its 1024; where rows do
// not wrap, its bands share their edge blocks); periodic grids take bands alike.
TEST(StreamPlan, ThePlannerChoosesBandsWhereTheyPay) {
  testing::TempDir tmp;
  const std::string dir = tmp.path().string();
  if (std::filesystem::space(dir).available < (uint64_t{3} << 30)) {
    GTEST_SKIP() << dir << " has under 3 GiB free: no room for the 1 GiB copy bands need";
  }
  const MachineProfile machine = epyc_with_bands();
  RunOptions ro = stream_run(32, 96 << 20);
  const Manifest m = testing::planning_manifest({2048, 1024, 128});
  ASSERT_EQ(ro.band_rows, kAutoBandRows) << "the default";
  const RunPlan chosen = plan_run(m, dir, ro, machine).value();
  EXPECT_GT(chosen.stream.bands, 1);
  const int64_t rows = chosen.stream.band_rows;
  const int64_t bands = (1024 + rows - 1) / rows;
  EXPECT_TRUE(rows >= 16 && rows <= 512 && rows == (1024 + bands - 1) / bands)
      << rows << " rows: the heights weighed split the 1024 rows evenly into bands of 16 or more";
  EXPECT_LE(chosen.memory_bytes, ro.mem_budget);
  RunOptions whole_planes = ro;
  whole_planes.band_rows = 0;
  const RunPlan whole = plan_run(m, dir, whole_planes, machine).value();
  EXPECT_EQ(whole.stream.bands, 0);
  EXPECT_LT(chosen.predicted_seconds, 0.9 * whole.predicted_seconds);
  EXPECT_EQ(plan_run(m, "", ro, machine).value().stream.bands, 0);
  ro.boundary = {Boundary::Kind::kPeriodic, 0};
  EXPECT_GT(plan_run(m, dir, ro, machine).value().stream.bands, 1);
  const Manifest odd_planes = testing::planning_manifest({2047, 1024, 128});
  EXPECT_EQ(plan_run(odd_planes, dir, ro, machine).value().stream.bands, 0);
  ro.boundary = {};
  // Rows that do not wrap: bands that share their edge blocks write whole blocks at any height,
  // and the rows are split evenly (the last band no shorter than the others by more than a row
  // per band: a band costs its planes' height, however few of its rows are its own).
  EXPECT_GT(plan_run(odd_planes, dir, ro, machine).value().stream.bands, 1);
  const RunPlan odd_rows =
      plan_run(testing::planning_manifest({2047, 1040, 128}), dir, ro, machine).value();
  ASSERT_GT(odd_rows.stream.bands, 1);
  const int64_t last_band = 1040 - (odd_rows.stream.bands - 1) * odd_rows.stream.band_rows;
  EXPECT_GE(last_band, odd_rows.stream.band_rows - odd_rows.stream.bands)
      << odd_rows.stream.bands << " bands of " << odd_rows.stream.band_rows << " rows";
  ro.mem_budget = 256 << 20;
  EXPECT_EQ(
      plan_run(testing::planning_manifest({512, 512, 4096}), dir, ro, machine).value().stream.bands,
      0);
  // Planes of 64 MiB: the budget holds no whole-plane sweep, bands it does.
  const Manifest wide = testing::planning_manifest({4096, 4096, 16});
  whole_planes.mem_budget = ro.mem_budget;
  const auto refused = plan_run(wide, dir, whole_planes, machine);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("raise --mem"), std::string::npos);
  const RunPlan only_bands = plan_run(wide, dir, ro, machine).value();
  EXPECT_GT(only_bands.stream.bands, 1);
  EXPECT_LE(only_bands.memory_bytes, ro.mem_budget);
}

}  // namespace
}  // namespace deepgrid

#include "engines/stream_bands.h"

namespace deepgrid {
namespace {

// Bands whose rows are not whole blocks share their edge blocks: over a sweep's bands every
// byte of every component of a new plane's slot, to the end of its last block, is written once,
// in whole blocks, by a band that computed it (its rows from c0, no more than edge_block_rows
// before its own), but the first bytes of a component after the first, which the last band
// writes as the first band computed them. Planes of one to three components, f32 and f64, bands
// of a block to the whole grid, a last band shorter than the others.
TEST(StreamPlan, BandsSharingTheirEdgeBlocksWriteEachByteOnceInWholeBlocks) {
  constexpr int64_t kBlock = kDirectIoAlignment;
  struct Grid {
    Shape shape;
    DType dtype;
    int components;
  };
  for (const Grid g : {Grid{{511, 513, 3}, DType::kF32, 1}, Grid{{511, 513, 3}, DType::kF32, 3},
                       Grid{{300, 37, 3}, DType::kF32, 3}, Grid{{150, 29, 3}, DType::kF64, 2},
                       Grid{{1024, 40, 3}, DType::kF32, 2}}) {
    Manifest m;
    m.shape = g.shape;
    m.dtype = g.dtype;
    m.fields.assign({"u", "v", "w"});
    m.fields.resize(static_cast<size_t>(g.components));
    m.layout = plan_layout(g.shape, g.dtype, 1, 8 << 20, 4, g.components, 0).value();
    const int64_t row = g.shape.nx * static_cast<int64_t>(dtype_size(g.dtype));
    const int64_t component = g.shape.ny * row;
    for (const int64_t rows :
         {(kBlock + row - 1) / row, int64_t{5}, int64_t{16}, int64_t{128}, g.shape.ny}) {
      SCOPED_TRACE(::testing::Message() << g.shape.to_string() << ", " << g.components
                                        << " components, bands of " << rows << " rows");
      if (!internal::stream::bands_share_edge_blocks(m, rows, false)) {
        EXPECT_TRUE(rows * row < kBlock ||
                    (rows * row % kBlock == 0 && (g.components == 1 || component % kBlock == 0)));
        continue;
      }
      StreamPlan plan;
      plan.bt = 2;
      plan.band_rows = std::min(rows, g.shape.ny);
      plan.bands = (g.shape.ny + plan.band_rows - 1) / plan.band_rows;
      plan.band_height =
          std::min(g.shape.ny, plan.band_rows + internal::stream::edge_block_rows(m) + 2 * plan.bt);
      std::vector<int> writes(static_cast<size_t>(m.layout.plane_stride / kBlock), 0);
      for (int64_t b = 0; b < plan.bands; ++b) {
        const internal::stream::BandRows r = internal::stream::band_rows(plan, m, 1, b, false);
        EXPECT_LE(r.c0, r.y0);
        EXPECT_GE(r.c0, r.y0 - internal::stream::edge_block_rows(m));
        EXPECT_TRUE(r.r0 == 0 || r.r0 + plan.bt <= r.c0) << "band " << b;
        EXPECT_LE(std::min(g.shape.ny, r.y1 + plan.bt), r.r0 + plan.band_height);
        for (int64_t c = 0; c < g.components; ++c) {
          const auto w =
              internal::stream::edge_block_write(m, r.y0, r.y1, c, b == 0, b + 1 == plan.bands);
          EXPECT_EQ(w.begin % kBlock, 0);
          EXPECT_EQ(w.end % kBlock, 0);
          EXPECT_LE(w.begin, w.end);  // (empty: a first band's of a later component)
          EXPECT_TRUE(w.begin < w.end || (b == 0 && c > 0));
          // Computed by this band, or the next component's first bytes (or padding).
          EXPECT_GE(w.begin, c * component + (b == 0 ? 0 : r.c0 * row));
          EXPECT_LE(w.end, b + 1 == plan.bands ? c * component + component + kBlock - 1
                                               : c * component + r.y1 * row);
          for (int64_t k = w.begin / kBlock; k < w.end / kBlock; ++k)
            ++writes[static_cast<size_t>(k)];
        }
      }
      const int64_t blocks = (g.components * component + kBlock - 1) / kBlock;
      for (int64_t k = 0; k < blocks; ++k)
        EXPECT_EQ(writes[static_cast<size_t>(k)], 1) << "block " << k;
    }
  }
}

}  // namespace
}  // namespace deepgrid
