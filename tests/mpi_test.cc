// Distributed grids under MPI against the scalar reference, bitwise: runs of every kind of
// part, process grid, scheme and probes, grids laid out again and split over other process
// grids, plans and reports. CTest runs this program (with mpi_recovery_test.cc and
// mpi_comm_test.cc) under `mpirun -n P` for P = 1, 2, 3 and 4; every rank runs every test in
// the same order (the library calls are collective), and rank 0 compares the gathered grid
// with the reference. The program's main() is here.
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "device/device.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi_test_helpers.h"

namespace deepgrid {
namespace {

using namespace mpi_testing;

// Radius 1 and 2 along z, faces only and the full box; steps that are not a multiple of the
// exchange depth; a grid of 13 planes (slabs of 3 or 4 at P = 4) and one of 5 (slabs of one
// plane, thinner than the halo: the exchange reaches ranks further away, or wraps).
TEST(Distributed, RunsMatchTheReferenceBitwise) {
  for (const Boundary& b : {kDirichlet, kNeumann, kPeriodic}) {
    for (const char* stencil : {"7pt", "13pt", "27pt"}) {
      for (const Shape shape : {Shape{11, 7, 13}, Shape{6, 5, 5}}) {
        expect_case({stencil, b, DType::kF32, shape, 7, 3, ""});
        expect_case({stencil, b, DType::kF64, shape, 5, 2, ""});
      }
    }
  }
}

// Subnormals flushed to zero, parts in memory and streamed: the bits of the serial reference in
// that mode. The stencil's weights (`w` each) take values from [0, 1) into the subnormal range
// in 3 steps; the exchange comes after 2.
TEST(Distributed, SubnormalsAreFlushedAsSerially) {
  auto shrinking_7pt = [](const char* w) {
    return std::string(R"({"points": [[0, 0, 0, )") + w + "], [1, 0, 0, " + w + "], [-1, 0, 0, " +
           w + "], [0, 1, 0, " + w + "], [0, -1, 0, " + w + "], [0, 0, 1, " + w + "], [0, 0, -1, " +
           w + "]]}";
  };
  const std::string f32 = shrinking_7pt("4e-14"), f64 = shrinking_7pt("3e-104");
  for (const Boundary& b : {Boundary{Boundary::Kind::kDirichlet, 0}, kNeumann, kPeriodic}) {
    Case in_memory{f32, b, DType::kF32, {11, 7, 13}, 3, 2, ""};
    in_memory.flush_subnormals = true;
    expect_case(in_memory);
    Case streamed{f64, b, DType::kF64, {40, 30, 17}, 3, 2, "600KiB", Method::kStream};
    streamed.flush_subnormals = true;
    expect_case(streamed);
  }
}

TEST(Distributed, StreamedPartsMatchTheReference) {
  for (const Boundary& b : {kDirichlet, kPeriodic}) {
    expect_case({"13pt", b, DType::kF64, {40, 30, 17}, 9, 4, "600KiB", Method::kStream});
    expect_case({"7pt", b, DType::kF32, {40, 30, 17}, 6, 0, "400KiB", Method::kAuto});
  }
}

// Streamed parts in bands of rows (parts of large planes): every part's block exact, the rows
// of its halos computed where the later rounds need them and zeros elsewhere; every boundary.
// z-slabs and parts split along x: periodic parts hold every row and read their bands' halos
// across the grid's ends (planes of whole blocks, and not); parts split along y: their bands
// end at the parts' halos.
TEST(Distributed, StreamedPartsInBandsMatchTheReference) {
  const int n = mpi::size();
  std::vector<ProcessGrid> grids{{{1, 1, n}}};
  if (n > 1) grids.push_back({{1, n, 1}});
  if (n > 1) grids.push_back({{n, 1, 1}});
  // Sources near both ends of y and in the middle, receivers on bands' first and last rows.
  Probes probes;
  for (auto [x, y, z] : {std::tuple{12, 1, 3}, {20, 25, 9}, {30, 46, 15}}) {
    SourceSpec s;
    s.x = x, s.y = y, s.z = z;
    s.series = {1.5, -0.75, 0.5};
    probes.sources.push_back(s);
  }
  for (int64_t y : {0, 7, 8, 23, 24, 47}) probes.receivers.push_back({"u", 9, y, 10});
  for (const ProcessGrid& g : grids) {
    for (const Boundary& b : {kDirichlet, kNeumann, kPeriodic}) {
      Case c{"7pt", b, DType::kF32, {64, 48, 20}, 7, 3, "256KiB", Method::kStream, g};
      c.band_rows = 8;
      expect_case(c);
      c.probes = &probes;
      expect_case(c);
      Case d{"13pt", b, DType::kF64, {64, 64, 16}, 6, 2, "512KiB", Method::kStream, g};
      d.band_rows = 16;
      expect_case(d);
    }
  }
}

// A budget that holds only part of the halos: the exchange runs in rounds, whose size every
// rank must agree on although end ranks have one neighbour and the others two (a mismatch
// truncated messages at P >= 3).
TEST(Distributed, HalosLargerThanTheBudgetAreExchangedInRounds) {
  expect_case({"7pt", kDirichlet, DType::kF32, {256, 64, 40}, 10, 8, "1MiB", Method::kAuto});
}

// The halos change with the boundary and the depth between runs: parts are laid out again.
TEST(Distributed, SuccessiveRunsWithOtherBoundariesAndDepths) {
  const Shape s{9, 6, 11};
  expect_runs_match_reference<float>({{"7pt", kPeriodic, DType::kF32, s, 3, 2, ""},
                                      {"13pt", kNeumann, DType::kF32, s, 4, 1, ""},
                                      {"27pt", kPeriodic, DType::kF32, s, 5, 3, ""},
                                      {"7pt", kDirichlet, DType::kF32, s, 2, 2, ""}});
}

TEST(Distributed, InitialValuesAreTheSerialGrids) {
  SharedTempDir tmp;
  const Shape s{7, 5, 9};
  for (const char* init : {"gaussian", "sine", "const:2.5"}) {
    CreateOptions opt = random_grid(s, DType::kF64);
    opt.init = *parse_init(init);
    const std::string dir = tmp / init;
    ASSERT_TRUE(mpi::create_distributed(dir, opt).ok());
    const std::vector<double> got = gather_values<double>(dir);
    if (mpi::rank() != 0) continue;
    std::vector<double> want(static_cast<size_t>(s.points()));
    for (int64_t z = 0; z < s.nz; ++z) init_plane(opt.init, s, z, want.data() + z * s.nx * s.ny);
    EXPECT_EQ(first_bitwise_difference(got, want), -1) << init;
  }
}

// A serial grid split over the ranks (deepgrid split) on every process grid the job allows,
// each rank reading its block in boxes of one plane, of a few, and of all, or whole planes
// verified: the parts hold the serial grid's values, time step, fields and history.
TEST(Distributed, SplitSerialGridsHoldTheirValues) {
  SharedTempDir tmp;
  const Shape s{11, 9, 7};
  const std::string serial = tmp / "serial";
  Status made;
  if (mpi::rank() == 0) {
    auto g = Grid::create(serial, random_grid(s, DType::kF32, testing_scheme("wave4")));
    made = g.status();
    if (made.ok()) {  // at a later step, with a history
      Manifest m = g->manifest();
      m.step = 5;
      m.history.push_back({"2026-11-26T00:00:00Z", "run", "{}"});
      made = g->commit(m);
    }
  }
  ASSERT_TRUE(mpi::agree(made).ok()) << made.message();
  const Manifest whole = Grid::open(serial)->manifest();
  const std::vector<float> want = random_grid_values<float>(s, whole.components());
  std::vector<ProcessGrid> grids = grids_splitting_x_or_y();
  grids.push_back({{1, 1, mpi::size()}});
  int made_grids = 0;
  for (const ProcessGrid& g : grids) {
    for (const int64_t read_bytes : {int64_t{1}, int64_t{1000}, mpi::kFillBatchBytes, int64_t{0}}) {
      const std::string dir = tmp / ("split" + std::to_string(made_grids++));
      const bool verify = read_bytes == 0;
      auto m = mpi::split_distributed(serial, dir, {}, g, verify, read_bytes);
      ASSERT_TRUE(m.ok()) << m.status().message();
      EXPECT_EQ(m->step, 5);
      EXPECT_EQ(m->fields, whole.fields);
      EXPECT_EQ(m->scheme, whole.scheme);
      ASSERT_EQ(m->history.size(), whole.history.size() + 1);
      EXPECT_EQ(m->history[whole.history.size() - 1].command, "run");
      EXPECT_EQ(m->history.back().command, "split");
      const std::vector<float> got = gather_values<float>(dir);
      if (mpi::rank() == 0) {
        EXPECT_EQ(first_bitwise_difference(got, want), -1) << g.to_string() << " " << read_bytes;
      }
    }
  }
}

// Blocks split along x and y (2x1x1, 1x2x1, 2x2x1, 1x2x2, 2x1x2, ... as the job's ranks allow):
// faces, edges and corners exchanged, fake edges at the blocks' inner sides under every
// boundary, radius 1 and 2, in-core and streamed parts, and halos larger than the budget.
// Each boundary and stencil once per process grid, f32 on a grid whose blocks are wider than
// the halos and f64 on one whose blocks are thinner, alternately.
TEST(Distributed, ProcessGridsSplittingXAndYMatchTheReference) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank: no process grid splits x or y";
  for (const ProcessGrid& g : grids_splitting_x_or_y()) {
    int turn = 0;
    for (const Boundary& b : {kDirichlet, kNeumann, kPeriodic}) {
      for (const char* stencil : {"7pt", "13pt", "27pt"}) {
        if (turn++ % 2 == 0) {
          expect_case({stencil, b, DType::kF32, {11, 9, 7}, 7, 3, "", Method::kAuto, g});
        } else {
          expect_case({stencil, b, DType::kF64, {6, 5, 5}, 5, 2, "", Method::kAuto, g});
        }
      }
    }
    expect_case({"13pt", kPeriodic, DType::kF64, {40, 30, 17}, 9, 4, "600KiB", Method::kStream, g});
    expect_case({"27pt", kNeumann, DType::kF32, {64, 48, 12}, 6, 3, "256KiB", Method::kStream, g});
  }
}

// Schemes of several fields (the wave presets of radius 2 and 4, a coupled scheme of terms)
// and a user's kernel whose terms depend on the global position: every component of every
// part is exchanged, and each part's kernel calls see global coordinates. z-slabs (of fewer
// planes than the halos at P >= 3), in-core and streamed parts, bt 1, 2, 3 and automatic, steps
// that are not multiples of it.
TEST(Distributed, SchemesMatchTheReferenceBitwise) {
  for (const std::string sc : {"wave8", "wave4", kCoupledScheme, kKernelScheme.c_str()}) {
    expect_case({sc, kPeriodic, DType::kF32, {13, 11, 12}, 7, 3, ""});
    expect_case({sc, kDirichlet, DType::kF64, {13, 11, 12}, 5, 2, ""});
  }
  for (const std::string sc : {kCoupledScheme, kKernelScheme.c_str()}) {
    expect_case({sc, kNeumann, DType::kF32, {9, 8, 10}, 3, 1, ""});
    expect_case({sc, kPeriodic, DType::kF64, {9, 8, 10}, 6, 0, ""});
  }
  expect_case({"wave8", kPeriodic, DType::kF64, {24, 20, 17}, 9, 4, "600KiB", Method::kStream});
  expect_case({kKernelScheme, kDirichlet, DType::kF32, {24, 20, 17}, 5, 0, "300KiB"});
}

// (The parts keep `m` in coefficient files, whose halo cells the exchange refreshes in memory
// only: each part's checksums, checked as the result is gathered, must be over what its files
// hold. 256x56 f32 split 1x2x1 gives parts of whole 4096-byte components, format version 5.)
TEST(Distributed, SchemesOnProcessGridsSplittingXAndYMatchTheReference) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank: no process grid splits x or y";
  for (const ProcessGrid& g : grids_splitting_x_or_y()) {
    expect_case({"wave4", kPeriodic, DType::kF64, {13, 11, 7}, 5, 2, "", Method::kAuto, g});
    expect_case({"wave4", kPeriodic, DType::kF32, {256, 56, 6}, 5, 2, "", Method::kAuto, g});
    expect_case({kKernelScheme, kPeriodic, DType::kF32, {13, 11, 7}, 7, 3, "", Method::kAuto, g});
    expect_case({kCoupledScheme, kDirichlet, DType::kF32, {13, 11, 7}, 4, 0, "", Method::kAuto, g});
  }
}

TEST(Distributed, SourcesAndReceiversMatchTheReference) {
  const Probes wave = shot_and_receivers(true), heat = shot_and_receivers(false);
  const Shape s{17, 12, 14};
  std::vector<std::optional<ProcessGrid>> grids = {std::nullopt};  // z-slabs
  for (const ProcessGrid& g : grids_splitting_x_or_y()) grids.push_back(g);
  for (const auto& g : grids) {
    Case c{"wave4", kPeriodic, DType::kF64, s, 7, 3, "", Method::kAuto, g, &wave};
    expect_case(c);
    c.boundary = kDirichlet;
    c.dtype = DType::kF32;
    c.bt = 2;
    expect_case(c);
  }
  expect_case({"heat-var", kNeumann, DType::kF32, s, 9, 0, "", Method::kAuto, {}, &heat});
  expect_case({"wave8", kPeriodic, DType::kF64, s, 6, 4, "400KiB", Method::kStream, {}, &wave});
}

// The device method on every rank's part: each rank takes a device of its machine (its rank on
// the machine modulo their number: CTest gives two PoCL devices, POCL_DEVICES="pthread
// pthread"), bitwise as the serial reference, presets, a scheme with probes, and a process grid
// splitting x or y.
TEST(Distributed, PartsOnDevicesMatchTheReference) {
  const auto devices = device::list_devices();
  if (!devices.ok() || devices->empty()) {
    GTEST_SKIP() << "no OpenCL device here (scripts/setup.sh installs PoCL's CPU device)";
  }
  const Probes wave = shot_and_receivers(true);
  expect_case({"13pt", kPeriodic, DType::kF32, {11, 7, 13}, 7, 3, "", Method::kDevice});
  expect_case({"27pt", kNeumann, DType::kF64, {11, 7, 13}, 5, 2, "", Method::kDevice});
  expect_case(
      {"wave4", kDirichlet, DType::kF32, {17, 12, 14}, 7, 3, "", Method::kDevice, {}, &wave});
  // Parts deep enough along z that the first pass of a round computes several steps' planes
  // before the halos arrive, and the rest after (a scheme with a coefficient field, f64).
  expect_case({"wave4", kDirichlet, DType::kF32, {17, 12, 48}, 10, 5, "", Method::kDevice});
  expect_case({"7pt", kPeriodic, DType::kF64, {9, 8, 40}, 9, 4, "", Method::kDevice});
  // Device budgets that hold a few planes of a part: parts stream through the device in slabs
  // (host-resident).
  Case slabs{"13pt", kPeriodic, DType::kF32, {11, 7, 13}, 7, 3, "", Method::kDevice};
  slabs.device_mem = 6 << 10;
  expect_case(slabs);
  Case wave_slabs = slabs;
  wave_slabs.stencil = "wave4";
  wave_slabs.boundary = kDirichlet;
  wave_slabs.shape = {17, 12, 14};
  wave_slabs.probes = &wave;
  wave_slabs.device_mem = 40 << 10;
  expect_case(wave_slabs);
  // A --mem that holds neither copy: parts stay on disk, swept through the device (three tiers).
  Case three_tiers = slabs;
  three_tiers.mem = "20KiB";
  expect_case(three_tiers);
  if (mpi::size() == 1) return;
  for (const ProcessGrid& g : grids_splitting_x_or_y()) {
    expect_case({"7pt", kPeriodic, DType::kF32, {13, 11, 7}, 5, 2, "", Method::kDevice, g});
    // Blocks wide enough that the first pass computes several steps' points before the halos
    // arrive (a scheme with a coefficient field, f64).
    expect_case({"wave4", kNeumann, DType::kF64, {40, 36, 9}, 6, 3, "", Method::kDevice, g});
    // Host-resident, a scheme with a coefficient field: x and y halos into host memory.
    Case held{"wave4", kNeumann, DType::kF64, {17, 14, 9}, 5, 2, "", Method::kDevice, g};
    held.device_mem = 64 << 10;
    expect_case(held);
  }
}

// Parts on devices stay there (device-resident) or in host memory beside them (host-resident)
// between rounds, as in-core parts stay in memory, and their plans say so: loaded once and
// committed once, their halos written into them every round; three tiers read and write their
// part every round.
TEST(Distributed, PartsOnDevicesStayThereBetweenRounds) {
  const auto devices = device::list_devices();
  if (!devices.ok() || devices->empty()) {
    GTEST_SKIP() << "no OpenCL device here (scripts/setup.sh installs PoCL's CPU device)";
  }
  SharedTempDir tmp;
  const Shape s{11, 7, 13};
  struct Placement {
    uint64_t device_mem;
    std::string mem;
    bool held;
    std::string name;
  };
  uint64_t part_bytes = 0;  // this rank's part, as the held runs load it
  for (const Placement& p :
       {Placement{0, "", true, "device-resident"}, Placement{6 << 10, "", true, "host-resident"},
        Placement{6 << 10, "20KiB", false, "three-tier"}}) {
    const std::string dir = tmp / ("g" + std::to_string(p.device_mem) + p.mem);
    ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
    Case c{"13pt", kPeriodic, DType::kF32, s, 7, 2, p.mem, Method::kDevice};
    c.device_mem = p.device_mem;
    auto plan = mpi::plan_distributed(dir, options_for(c), std::nullopt);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->parts_in_memory, p.held)
        << "--device-mem " << p.device_mem << ", --mem " << p.mem;
    auto report = mpi::run_distributed(dir, options_for(c));
    ASSERT_TRUE(report.ok()) << report.status().message();
    const mpi::RankFigures& f = report->per_rank[static_cast<size_t>(mpi::rank())];
    const std::string where = "--device-mem " + std::to_string(p.device_mem) + ", --mem " + p.mem;
    EXPECT_EQ(f.method, "device") << where;
    if (part_bytes == 0) part_bytes = f.bytes_read;
    if (p.held) {
      EXPECT_EQ(f.bytes_read, part_bytes) << where << ": loaded once for 4 rounds";
      EXPECT_EQ(f.bytes_written, part_bytes) << where << ": committed once, at the end";
    } else {
      EXPECT_GE(f.bytes_read, 4 * part_bytes) << where << ": read every round";
    }
    // The report names the rank's device and placement and counts its copies: a
    // device-resident z-slab part (planes of 11x7 f32) goes up once and down once.
    EXPECT_FALSE(f.device.empty()) << where;
    EXPECT_EQ(f.device_placement, p.name) << where;
    EXPECT_EQ(report->total.device_placement, p.name) << where;
    EXPECT_GT(f.device_bytes_copied, 0u) << where;
    if (p.name == "device-resident" && report->process_grid.starts_with("1x1x")) {
      EXPECT_GE(f.device_bytes_copied, 2u * static_cast<uint64_t>(f.part_planes) * 11 * 7 * 4);
    }
    uint64_t all_copies = 0;
    for (const mpi::RankFigures& r : report->per_rank) all_copies += r.device_bytes_copied;
    EXPECT_EQ(report->total.device_bytes_copied, all_copies) << where;
    expect_reference_steps<float>(dir, s, "13pt", kPeriodic, 7);
  }
}

// A grid made with z-slabs runs with another process grid of the same ranks and back: its
// parts are split again by block intersection each time, and the results stay bitwise.
TEST(Distributed, RedistributionBetweenProcessGrids) {
  const int n = mpi::size();
  const ProcessGrid slabs{{1, 1, n}};
  std::vector<ProcessGrid> others = grids_splitting_x_or_y();
  if (others.empty()) GTEST_SKIP() << "one rank: no other process grid to redistribute to";
  const ProcessGrid other = others.back();  // 2x2x1 at P = 4
  const Shape s{10, 9, 8};
  expect_runs_match_reference<float>(
      {{"27pt", kPeriodic, DType::kF32, s, 3, 2, "", Method::kAuto, slabs},
       {"13pt", kNeumann, DType::kF32, s, 4, 1, "", Method::kAuto, other},
       {"7pt", kDirichlet, DType::kF32, s, 2, 2, "", Method::kAuto, slabs}});
}

// Parts of z-slabs gain their z halos in place: each stays the grid it was (a copy is a new
// grid, of another id), and the run matches the reference.
TEST(Distributed, ZSlabsGainTheirHalosInPlace) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank: its part spans the grid and needs no halos";
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{9, 6, 8 * mpi::size()};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  auto id_of_part = [&] {
    const auto m = mpi::load_distributed(dir);
    return Grid::open(m->parts[static_cast<size_t>(mpi::rank())].dir)->manifest().id;
  };
  const std::string id = id_of_part();
  auto report =
      mpi::run_distributed(dir, options_for({"7pt", kDirichlet, DType::kF32, s, 4, 2, ""}));
  ASSERT_TRUE(report.ok()) << report.status().message();
  const PartInfo part = mpi::load_distributed(dir)->parts[static_cast<size_t>(mpi::rank())];
  EXPECT_EQ(part.halo.below[kAxisZ] + part.halo.above[kAxisZ],
            mpi::rank() == 0 || mpi::rank() == mpi::size() - 1 ? 2 : 4);
  EXPECT_EQ(id_of_part(), id) << "the part was copied";
  expect_reference_steps<float>(dir, s, "7pt", kDirichlet, 4);
}

// A streamed part's sweeps move its planes around its ring of slots: once they wrap around the
// ring's end, wider z halos cannot be added in place and the part is copied instead. Parts of
// 70 planes and 64 spare slots wrap after a sweep; each rank's path is checked against its
// ring, and the result against the reference.
TEST(Distributed, StreamedPartsWhosePlanesWrapAreCopiedForWiderHalos) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank: its part spans the grid and needs no halos";
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{8, 6, 70 * mpi::size()};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  auto first = mpi::run_distributed(
      dir, options_for({"7pt", kNeumann, DType::kF32, s, 2, 1, "1MiB", Method::kStream}));
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string part_dir =
      mpi::load_distributed(dir)->parts[static_cast<size_t>(mpi::rank())].dir;
  bool wrapped = false;
  std::string id;
  {
    const Grid part = Grid::open(part_dir).value();
    wrapped = !part.can_grow_spare();
    id = part.manifest().id;
  }
  EXPECT_TRUE(mpi::any_rank(wrapped)) << "no part's planes wrap: the case tests nothing";
  auto second = mpi::run_distributed(
      dir, options_for({"7pt", kNeumann, DType::kF32, s, 4, 3, "1MiB", Method::kStream}));
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(Grid::open(part_dir)->manifest().id != id, wrapped)
      << (wrapped ? "a part whose planes wrap was not copied" : "a part was copied");
  expect_reference_steps<float>(dir, s, "7pt", kNeumann, 6);
}

// The hypervisor's share of a run on several machines: each machine counted once, with the
// largest figure of its ranks (machine-wide counts over overlapping runs), and the machines
// summed; the text names the machines.
TEST(DistributedReport, StealIsSummedOverMachinesNotRanks) {
  auto figures = [](int rank, const std::string& host, double stolen, int cpus) {
    mpi::RankFigures f;
    f.rank = rank;
    f.method = "incore";
    f.host = host;
    f.stolen_cpu_seconds = stolen;
    f.cpus = cpus;
    return f;
  };
  mpi::DistributedRunReport r;
  r.per_rank = {figures(0, "node-a", 1.5, 8), figures(1, "node-a", 2.0, 8),
                figures(2, "node-b", 0.5, 16), figures(3, "node-b", 0.25, 16)};
  r.total.seconds = 10;
  mpi::record_machines_steal(r.per_rank, &r.total);
  EXPECT_DOUBLE_EQ(r.total.stolen_cpu_seconds, 2.5);
  EXPECT_EQ(r.total.cpus, 24);
  EXPECT_NE(r.to_text().find("2.000  node-a"), std::string::npos) << r.to_text();
  EXPECT_NE(r.to_text().find("0.250  node-b"), std::string::npos) << r.to_text();
  const mpi::RankFigures back = mpi::RankFigures::from_json(r.per_rank[2].to_json());
  EXPECT_EQ(back.host, "node-b");
  EXPECT_EQ(back.cpus, 16);
  EXPECT_DOUBLE_EQ(back.stolen_cpu_seconds, 0.5);

  r.per_rank = {figures(0, "node-a", 1.5, 8), figures(1, "node-a", 2.0, 8)};
  mpi::record_machines_steal(r.per_rank, &r.total);
  EXPECT_DOUBLE_EQ(r.total.stolen_cpu_seconds, 2.0);
  EXPECT_EQ(r.total.cpus, 8);
  EXPECT_EQ(r.to_text().find("node-a"), std::string::npos) << "one machine: no host column";
}

// Parts in memory that commit after every round (checkpoints): each commit writes the part
// once, and the result stays the reference's.
TEST(Distributed, CheckpointsOfPartsInMemoryKeepTheRunExact) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{12, 10, 15};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  RunOptions opt = options_for({"27pt", kPeriodic, DType::kF32, s, 11, 3, ""});
  opt.checkpoint_seconds = 0;
  auto report = mpi::run_distributed(dir, opt);
  ASSERT_TRUE(report.ok()) << report.status().message();
  for (const mpi::RankFigures& f : report->per_rank) {
    EXPECT_EQ(f.method, "incore");
    EXPECT_EQ(f.bytes_written, 4 * f.bytes_read) << "rank " << f.rank << ": 4 rounds, 1 load";
    EXPECT_GT(f.io_wait_seconds, 0) << "rank " << f.rank << ": the load and commits take time";
  }
  expect_reference_steps<float>(dir, s, "27pt", kPeriodic, 11);
}

// Streamed parts say which of their disk waits were for writes, as a serial stream run does:
// some (each sweep waits for its last writes), at most the whole wait; the total is the ranks'
// sum, and each rank's figure survives the gather.
TEST(Distributed, StreamedPartsSayWhichDiskWaitsWereForWrites) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{40, 30, 17};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF64)).ok());
  auto report = mpi::run_distributed(
      dir, options_for({"13pt", kDirichlet, DType::kF64, s, 9, 4, "600KiB", Method::kStream}));
  ASSERT_TRUE(report.ok()) << report.status().message();
  double sum = 0;
  for (const mpi::RankFigures& f : report->per_rank) {
    EXPECT_EQ(f.method, "stream") << "rank " << f.rank;
    EXPECT_GT(f.io_wait_for_writes_seconds, 0) << "rank " << f.rank;
    EXPECT_LE(f.io_wait_for_writes_seconds, f.io_wait_seconds) << "rank " << f.rank;
    sum += f.io_wait_for_writes_seconds;
  }
  EXPECT_DOUBLE_EQ(report->total.io_wait_for_writes_seconds, sum);
  const auto json = nlohmann::json::parse(report->to_json());
  EXPECT_DOUBLE_EQ(json["per_rank"][0].value("io_wait_for_writes_seconds", -1.0),
                   report->per_rank[0].io_wait_for_writes_seconds);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A plan tells what the run then does, and changes nothing: the process grid, the exchange
// depth and halos, each part's planes and engine, and whether the parts stay in memory; parts
// in memory and streamed, on the grid's own process grid and on another, which the run splits
// the grid into first (the plan plans the parts as split, without splitting).
TEST(Distributed, PlansTellWhatTheRunDoes) {
  std::vector<std::optional<ProcessGrid>> grids = {std::nullopt};
  if (!grids_splitting_x_or_y().empty()) grids.push_back(grids_splitting_x_or_y().front());
  for (const char* mem : {"", "400KiB"}) {
    for (const auto& procs : grids) {
      SCOPED_TRACE(std::string(mem) + (procs ? " over " + procs->to_string() : ""));
      SharedTempDir tmp;
      const std::string dir = tmp / "g";
      const Shape s{40, 30, 12 * mpi::size()};
      ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF64)).ok());
      const std::string before = read_text(dir + "/manifest.json");
      const RunOptions opt = options_for({"13pt", kPeriodic, DType::kF64, s, 9, 0, mem});
      auto plan = mpi::plan_distributed(dir, opt, procs);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_EQ(read_text(dir + "/manifest.json"), before) << "the plan changed the grid";
      auto report = mpi::run_distributed(dir, opt, procs);
      ASSERT_TRUE(report.ok()) << report.status().message();
      EXPECT_EQ(plan->process_grid, report->process_grid);
      EXPECT_EQ(plan->exchange_bt, report->exchange_bt);
      EXPECT_EQ(plan->halo, report->halo);
      EXPECT_EQ(plan->steps, 9);
      EXPECT_EQ(plan->rounds, (9 + plan->exchange_bt - 1) / plan->exchange_bt);
      ASSERT_EQ(plan->per_rank.size(), report->per_rank.size());
      bool all_in_core = true;
      for (size_t r = 0; r < plan->per_rank.size(); ++r) {
        const auto planned = nlohmann::json::parse(plan->per_rank[r].plan);
        const mpi::RankFigures& ran = report->per_rank[r];
        EXPECT_EQ(planned.at("method").get<std::string>(), ran.method) << "rank " << r;
        EXPECT_EQ(parse_shape(plan->per_rank[r].shape)->nz, ran.part_planes) << "rank " << r;
        all_in_core = all_in_core && ran.method == "incore";
      }
      EXPECT_EQ(plan->parts_in_memory, all_in_core);
      EXPECT_EQ(all_in_core, std::string(mem).empty()) << "the case tests neither kind of part";
    }
  }
}

// Without --threads (nor OMP_NUM_THREADS), the ranks on one machine share its CPUs: together
// they run no more threads than the CPUs they may use (one each at least), and a rank alone
// uses them all. (OpenMP would give every rank all the CPUs of its affinity: the test sets that
// default, which ctest's OMP_NUM_THREADS=1 replaced; with more ranks than CPUs, Open MPI binds
// none of them, and each would run a thread per CPU.)
TEST(Distributed, RanksOnOneMachineShareItsCpus) {
  cpu_set_t mask;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  const char* given = std::getenv("OMP_NUM_THREADS");
  const std::string omp_num_threads = given ? given : "";
  ::unsetenv("OMP_NUM_THREADS");
  const int omp_threads = omp_get_max_threads();
  omp_set_num_threads(cpus);
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{16, 12, 8 * mpi::size()};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  RunOptions opt = options_for({"7pt", kDirichlet, DType::kF32, s, 4, 2, ""});
  opt.threads = 0;
  auto report = mpi::run_distributed(dir, opt);
  omp_set_num_threads(omp_threads);
  if (given != nullptr) ::setenv("OMP_NUM_THREADS", omp_num_threads.c_str(), 1);
  ASSERT_TRUE(report.ok()) << report.status().message();
  int threads = 0, most = 0;
  for (const mpi::RankFigures& f : report->per_rank) {
    EXPECT_GE(f.threads, 1) << "rank " << f.rank;
    threads += f.threads;
    most = std::max(most, f.threads);
  }
  EXPECT_LE(threads, std::max(cpus, mpi::size())) << cpus << " CPUs";
  if (mpi::size() == 1) {
    EXPECT_EQ(threads, cpus);
  }
  EXPECT_EQ(report->total.threads, most);
}

// By default parts in memory are not committed before a minute has passed (a commit writes and
// syncs every part), however quick the load was: a run of many short rounds writes each part
// once, at its end.
TEST(Distributed, AutomaticCheckpointsWaitAtLeastAMinute) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{48, 40, 64};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  auto report =
      mpi::run_distributed(dir, options_for({"7pt", kDirichlet, DType::kF32, s, 400, 1, ""}));
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_LT(report->total.seconds, 60) << "the run outlasted the minute: no test of the rule";
  for (const mpi::RankFigures& f : report->per_rank) {
    EXPECT_EQ(f.method, "incore");
    EXPECT_EQ(f.bytes_written, f.bytes_read) << "rank " << f.rank << ": 400 rounds, 1 commit";
  }
}

}  // namespace
}  // namespace deepgrid

namespace {

// What the other ranks print instead of Google Test's report: only their failures, each named
// with the rank and the test (rank 0 prints the one report; every rank's exit code counts).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // (The name is kept here: UnitTest::current_test_info() would deadlock inside
  // OnTestPartResult, which Google Test calls holding the lock it takes.)
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "rank %d, %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

int main(int argc, char** argv) {
  deepgrid::mpi::Session session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (const int rank = deepgrid::mpi::rank(); rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
