// Distributed runs that stop, fail or are refused: stopped runs resumed bitwise, budgets and
// process grids refused before anything changes, a failure on one rank that stops every rank
// and leaves a usable grid, parts left prepared by a stopped commit, damaged parts. Part of
// mpi_test (see mpi_test.cc): every rank runs every test, in the same order.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "deepgrid/npy.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/traces_file.h"
#include "device/device.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi_test_helpers.h"

namespace deepgrid {
namespace {

using namespace mpi_testing;

// A run that one rank's callback stops part-way through a round (its part stops after
// `passes` passes of its engine; the other parts finish the round), then the rest of it: with
// --resume, or the same command again. The grid, the traces and the records end as an
// uninterrupted run leaves them, bitwise the reference's.
//
// Parts held in memory (the in-core method) or on their devices stop together at the end of the
// round instead, as do parts through their files asked to stop at a round's last pass: every
// part commits that step, and nothing has to be finished before another command.
template <typename T>
void expect_stopped_run_resumes(const Case& c, int stopping_rank, int passes, bool resume_flag) {
  const bool in_memory =
      (c.method == Method::kAuto || c.method == Method::kDevice) && c.mem.empty();
  SCOPED_TRACE(c.stencil + " " + c.boundary.to_string() + ", " + std::to_string(mpi::size()) +
               " ranks, rank " + std::to_string(stopping_rank) + " stops after " +
               std::to_string(passes) + " passes" +
               (resume_flag ? ", --resume" : ", same command"));
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Scheme scheme = testing_scheme(c.stencil);
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(c.shape, c.dtype, scheme), c.procs).ok());
  RunOptions opt = options_for(c);
  if (c.probes != nullptr) {
    opt.probes = *c.probes;
    opt.traces_path = tmp / "traces.npy";
  }
  RunOptions stopping = opt;
  int calls = 0;
  stopping.progress = [&](int64_t, int64_t) {  // (asks once: a stop not taken would show)
    return mpi::rank() != stopping_rank || ++calls != passes;
  };
  auto stopped = mpi::run_distributed(dir, stopping, c.procs);
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  ASSERT_LT(stopped->total.step_to, c.steps) << "the callback should stop the run";
  EXPECT_EQ(stopped->total.step_target, c.steps);
  bool mid_round = false;  // (a part stopped before the round's end, the others went on)
  {
    auto m = mpi::load_distributed(dir);
    ASSERT_TRUE(m.ok());
    auto part = Grid::open(m->parts[static_cast<size_t>(mpi::rank())].dir);
    ASSERT_TRUE(part.ok());
    mid_round = mpi::any_rank(part->manifest().step != stopped->total.step_to);
  }
  if (in_memory || !mid_round) {  // every part committed the round's last step
    EXPECT_FALSE(mid_round) << "parts held in memory stop together at the end of a round";
    EXPECT_EQ(stopped->total.step_to % c.bt, 0) << "the parts stop at the end of a round";
    EXPECT_GT(stopped->total.step_to, 0);
  } else if (mpi::size() > 1) {  // the other parts went on to the round's end: it must be finished
    RunOptions other = opt;
    other.steps = c.steps + 1;
    auto refused = mpi::run_distributed(dir, other, c.procs);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("--resume"), std::string::npos)
        << refused.status().message();
  }
  RunOptions again = opt;
  if (resume_flag) {
    again = options_for({"7pt", kDirichlet, c.dtype, {}, -1, c.bt, c.mem, c.method});
    again.resume = true;
    again.probes = opt.probes;
    again.traces_path = opt.traces_path;
  }
  auto finished = mpi::run_distributed(dir, again, c.procs);
  ASSERT_TRUE(finished.ok()) << finished.status().message();
  EXPECT_TRUE(finished->total.resumed);
  EXPECT_EQ(finished->total.step_to, c.steps);
  auto m = mpi::load_distributed(dir);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->step, c.steps);
  const std::vector<T> got = gather_values<T>(dir);
  if (mpi::rank() != 0) return;
  EXPECT_FALSE(fs::exists(dir + "/run.json")) << "the finished run's record stays";
  std::vector<double> want_traces;
  const std::vector<T> want =
      reference_run(random_grid_values<T>(c.shape, scheme.component_count()), c.shape, opt.scheme,
                    c.boundary, c.steps, opt.probes, 0, &want_traces);
  const int64_t diff = first_bitwise_difference(got, want);
  EXPECT_EQ(diff, -1) << "first difference at index " << diff;
  if (c.probes == nullptr) return;
  auto traces = read_traces_npy(opt.traces_path);
  ASSERT_TRUE(traces.ok()) << traces.status().message();
  const int64_t tdiff = first_bitwise_difference(traces->values, want_traces);
  EXPECT_EQ(tdiff, -1) << "traces differ first at (step, receiver) index " << tdiff;
}

// Stops in the middle of the second round (naive: one pass per step, four per round), on the
// last rank and on the first, then finishes; also with sources and receivers, whose values of
// the steps before the stop come from the parts' saved traces.
TEST(Distributed, StoppedRunsResumeBitwise) {
  const int last = mpi::size() - 1;
  const Case plain{"7pt", kPeriodic, DType::kF32, {20, 14, 23}, 11, 4, "1MiB", Method::kNaive};
  expect_stopped_run_resumes<float>(plain, last, 6, /*resume_flag=*/true);
  // Asked to stop at a round's last pass: every part stops at the round's end.
  expect_stopped_run_resumes<float>(plain, 0, 4, /*resume_flag=*/false);
  Case neumann = plain;
  neumann.boundary = kNeumann;
  neumann.stencil = "13pt";
  neumann.dtype = DType::kF64;
  expect_stopped_run_resumes<double>(neumann, 0, 7, /*resume_flag=*/false);
  const Probes wave = shot_and_receivers(true);
  const Case shot{"wave4", kDirichlet, DType::kF64,    {17, 12, 14}, 9,
                  3,       "2MiB",     Method::kNaive, {},           &wave};
  expect_stopped_run_resumes<double>(shot, last, 5, /*resume_flag=*/false);
  // In memory (the engines' passes are one or more per round): stopped after the first round.
  const Case held{"7pt", kNeumann, DType::kF32, {20, 14, 23}, 11, 4, ""};
  expect_stopped_run_resumes<float>(held, last, 2, /*resume_flag=*/true);
  Case held_shot = shot;
  held_shot.method = Method::kAuto;
  held_shot.mem = "";
  expect_stopped_run_resumes<double>(held_shot, 0, 2, /*resume_flag=*/false);
  // Held on their devices (PoCL's here), as in memory.
  if (const auto devices = device::list_devices(); devices.ok() && !devices->empty()) {
    Case held_on_devices = held;
    held_on_devices.method = Method::kDevice;
    expect_stopped_run_resumes<float>(held_on_devices, last, 2, /*resume_flag=*/true);
  }
  if (mpi::size() > 1) {  // a process grid splitting y
    Case split{"27pt",
               kPeriodic,
               DType::kF32,
               {12, 16, 9},
               7,
               2,
               "1MiB",
               Method::kNaive,
               ProcessGrid{{1, mpi::size(), 1}}};
    expect_stopped_run_resumes<float>(split, last, 2, /*resume_flag=*/true);
  }
}

// Streamed parts in bands of rows, each band sweep committed out of place: stopped after a
// sweep in the middle of a round, on the last rank and on the first, then finished. (Periodic
// on z-slabs, whose bands read across the grid's ends.)
TEST(Distributed, StoppedRunsInBandsResumeBitwise) {
  const int last = mpi::size() - 1;
  Case banded{"7pt",
              kPeriodic,
              DType::kF32,
              {64, 48, 20},
              11,
              4,
              "256KiB",
              Method::kStream,
              ProcessGrid{{1, 1, mpi::size()}}};
  banded.band_rows = 8;
  expect_stopped_run_resumes<float>(banded, last, 2, /*resume_flag=*/true);
  banded.boundary = kDirichlet;
  banded.stencil = "13pt";
  expect_stopped_run_resumes<float>(banded, 0, 3, /*resume_flag=*/false);
}

// The receivers' values of one round (k = 4 steps of a run of 8) count against --mem on every
// rank: each rank's part's, and on rank 0 every receiver's too. The parts' engines plan with
// what those leave; a budget they fill on rank 0 is refused before the grid is laid out again
// (here: for another process grid), and changes nothing.
TEST(Distributed, ReceiversValuesCountAgainstEachRanksBudget) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const int n = mpi::size();
  const Shape s{64, 64, 16 * n};  // 256 KiB of f32 per rank
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());  // z-slabs
  Probes probes;  // 4096 receivers, all in rank 0's part (y < 16 on every process grid)
  for (int64_t z = 2; z < 6; ++z) {
    for (int64_t y = 0; y < 16; ++y) {
      for (int64_t x = 0; x < 64; ++x) probes.receivers.push_back({"u", x, y, z});
    }
  }
  const int64_t steps = 8, k = 4;
  const uint64_t copy = 4096 * k * sizeof(double);  // 128 KiB: one copy of a round's values
  const uint64_t held = mpi::rank() == 0 ? 2 * copy : 0;
  const Case c{"7pt", kDirichlet, DType::kF32, s, steps, k, "1MiB", Method::kStream};
  auto engine_memory = [&](const Probes* p) -> uint64_t {
    RunOptions opt = options_for(c);
    if (p != nullptr) {
      opt.probes = *p;
      opt.traces_path = tmp / "traces.npy";
    }
    auto report = mpi::run_distributed(dir, opt, std::nullopt);
    EXPECT_TRUE(report.ok()) << report.status().message();
    return report.ok() ? report->per_rank[static_cast<size_t>(mpi::rank())].engine_memory : 0;
  };
  const uint64_t budget = *parse_size(c.mem);
  EXPECT_GT(engine_memory(nullptr), budget - 2 * copy);  // without receivers it takes more
  const uint64_t with_traces = engine_memory(&probes);
  EXPECT_GT(with_traces, 0u);
  EXPECT_LE(with_traces, budget - held);

  RunOptions tight = options_for(c);  // one copy of the values fits; rank 0 holds two
  tight.mem_budget = copy * 3 / 2;
  tight.probes = probes;
  tight.traces_path = tmp / "traces.npy";
  const auto before = mpi::load_distributed(dir);
  ASSERT_TRUE(before.ok());
  const std::vector<ProcessGrid> others = grids_splitting_x_or_y();
  auto refused =
      mpi::run_distributed(dir, tight, others.empty() ? std::nullopt : std::optional(others[0]));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("the receivers' values take 256.00 KiB"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(n > 1 ? "rank 0: " : "raise --mem"), std::string::npos)
      << refused.status().message();
  const auto after = mpi::load_distributed(dir);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->id, before->id) << "the grid was laid out again";
  EXPECT_EQ(after->procs, before->procs);
  EXPECT_EQ(after->step, 2 * steps);
  EXPECT_FALSE(fs::exists(dir + "/run.json"));
}

TEST(Distributed, TooManyRanksAreRefused) {
  SharedTempDir tmp;
  auto made = mpi::create_distributed(tmp / "g", random_grid({1, 1, mpi::size() - 1}, DType::kF32));
  if (mpi::size() == 1) return;  // a grid needs a plane: nz = 0 is refused as a shape
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("use fewer ranks"), std::string::npos)
      << made.status().message();
}

// A process grid given that does not fit the job or the grid is refused on every rank alike.
TEST(Distributed, ProcessGridsThatDoNotFitAreRefused) {
  SharedTempDir tmp;
  const int n = mpi::size();
  auto wrong_product = mpi::create_distributed(tmp / "g", random_grid({8, 8, 8}, DType::kF32),
                                               ProcessGrid{{1, 1, n + 1}});
  ASSERT_FALSE(wrong_product.ok());
  EXPECT_NE(wrong_product.status().message().find("but the job has " + std::to_string(n)),
            std::string::npos)
      << wrong_product.status().message();
  auto too_wide = mpi::create_distributed(
      tmp / "h", random_grid({n - 1 + (n == 1), 8, 8}, DType::kF32), ProcessGrid{{n, 1, 1}});
  if (n > 1) {
    ASSERT_FALSE(too_wide.ok());
    EXPECT_EQ(too_wide.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(too_wide.status().message().find("ranks along x"), std::string::npos)
        << too_wide.status().message();
  }
  EXPECT_FALSE(fs::exists(tmp / "g"));
}

// A store directory missing on the last rank: every rank gets that rank's message, and nothing
// is left on disk.
TEST(Distributed, BadStoreOnOneRankStopsEveryRankAndLeavesNothing) {
  SharedTempDir tmp;
  const int last = mpi::size() - 1;
  const auto store_of = [&](int r) { return tmp / std::to_string(r); };
  if (mpi::rank() != last) fs::create_directories(store_of(mpi::rank()));
  mpi::barrier();
  CreateOptions opt = random_grid({8, 8, 8}, DType::kF32);
  opt.stores = {tmp / "%r"};
  auto made = mpi::create_distributed(tmp / "g", opt);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), ErrorCode::kInvalidArgument);
  const std::string msg = made.status().message();
  EXPECT_NE(msg.find("store directory " + store_of(last) + " does not exist"), std::string::npos)
      << msg;
  if (mpi::size() > 1) {
    EXPECT_EQ(msg.rfind("rank " + std::to_string(last) + ": ", 0), 0u) << msg;
  }
  EXPECT_FALSE(fs::exists(tmp / "g"));
  if (mpi::rank() != last) {
    EXPECT_TRUE(fs::is_empty(store_of(mpi::rank())));
  }
}

// A re-layout that fails on one rank (a leftover of an interrupted one is in its way): the
// other ranks' new parts are recorded, and once the leftover is gone the grid runs on exactly.
TEST(Distributed, FailedRelayoutOnOneRankLeavesAUsableGrid) {
  if (mpi::size() == 1) {
    GTEST_SKIP() << "one rank: its part spans the grid and needs no halos, so nothing is laid out";
  }
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{9, 6, 11};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  const int last = mpi::size() - 1;
  auto m = mpi::load_distributed(dir);
  ASSERT_TRUE(m.ok());
  const std::string leftover = m->parts[static_cast<size_t>(last)].dir + ".new";
  if (mpi::rank() == last) fs::create_directory(leftover);
  mpi::barrier();
  const Case periodic{"7pt", kPeriodic, DType::kF32, s, 3, 2, ""};
  auto failed = mpi::run_distributed(dir, options_for(periodic));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("interrupted re-layout"), std::string::npos)
      << failed.status().message();
  if (mpi::rank() == last) fs::remove(leftover);
  mpi::barrier();
  auto report = mpi::run_distributed(dir, options_for(periodic));
  ASSERT_TRUE(report.ok()) << report.status().message();
  expect_reference_steps<float>(dir, s, "7pt", kPeriodic, 3);
}

// Each value of every plane of this rank's part negated, as a prepared replacement of step
// `step`; on `commit_too`, committed as well (a run killed while the parts committed).
template <typename T>
void prepare_negated_part(const DistributedManifest& m, int64_t step, bool commit_too) {
  auto part = Grid::open(m.parts[static_cast<size_t>(mpi::rank())].dir, Grid::Mode::kReadWrite);
  ASSERT_TRUE(part.ok()) << part.status().message();
  const int64_t n = part->manifest().layout.plane_bytes / static_cast<int64_t>(sizeof(T));
  std::vector<T> values(static_cast<size_t>(n * part->shape().nz));
  ASSERT_TRUE(part->read_planes(0, part->shape().nz, values.data()).ok());
  for (T& v : values) v = -v;
  ASSERT_TRUE(part->create_replacement().ok());
  ASSERT_TRUE(io::write_plane_range(
                  *part, 0, part->shape().nz,
                  [&](int64_t z, void* out) {
                    std::memcpy(out, values.data() + z * n, static_cast<size_t>(n) * sizeof(T));
                    return Status::Ok();
                  },
                  io::kPlanesInFlight, FileSet::kReplacement)
                  .ok());
  Manifest after = part->manifest();
  after.step = step;
  ASSERT_TRUE(part->prepare_replacement(after).ok());
  if (commit_too) {
    ASSERT_TRUE(part->commit_prepared().ok());
  }
}

// A run whose parts stayed in memory, killed while they prepared or committed their new state
// (made here by hand: the new state is the old one negated, step 3 -> 5, with the run record
// such a run leaves). When every part had prepared it (some had committed it too), the next
// run commits the rest; when one had not, the others discard theirs and the run is done again.
TEST(Distributed, PartsPreparedInMemoryRunsCommitTogetherOrNotAtAll) {
  const Shape s{10, 9, 14};
  const Case c{"7pt", kPeriodic, DType::kF32, s, 3, 3, ""};
  for (const bool every_part : {true, false}) {
    if (!every_part && mpi::size() == 1) continue;  // one part: prepared or not, nothing between
    SCOPED_TRACE(every_part ? "every part prepared, the first committed" : "the last not prepared");
    SharedTempDir tmp;
    const std::string dir = tmp / "g";
    ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
    ASSERT_TRUE(mpi::run_distributed(dir, options_for(c)).ok());  // step 3, halos laid out
    const std::vector<float> at3 = gather_values<float>(dir);
    auto m = mpi::load_distributed(dir);
    ASSERT_TRUE(m.ok());
    RunOptions two = options_for(c);
    two.steps = 2;
    if (mpi::rank() == 0) {
      ASSERT_TRUE(internal::write_file_atomic(dir, kRunRecordName,
                                              record_of(two, 3, Method::kInCore).to_json())
                      .ok());
    }
    if (every_part || mpi::rank() != mpi::size() - 1) {
      prepare_negated_part<float>(*m, 5, every_part && mpi::rank() == 0);
    }
    mpi::barrier();
    RunOptions resume = options_for({"7pt", kDirichlet, DType::kF32, {}, -1, 3, ""});
    resume.resume = true;
    auto finished = mpi::run_distributed(dir, resume);
    ASSERT_TRUE(finished.ok()) << finished.status().message();
    EXPECT_EQ(finished->total.step_to, 5);
    EXPECT_EQ(finished->total.steps, every_part ? 0 : 2);
    const std::vector<float> got = gather_values<float>(dir);
    auto part = Grid::open(m->parts[static_cast<size_t>(mpi::rank())].dir);
    ASSERT_TRUE(part.ok());
    EXPECT_FALSE(part->prepared().has_value());
    EXPECT_EQ(part->manifest().step, 5);
    if (mpi::rank() != 0) continue;
    std::vector<float> want = at3;
    if (every_part) {
      for (float& v : want) v = -v;
    } else {
      want = reference_run(at3, s, *Stencil::resolve("7pt"), kPeriodic, 2);
    }
    EXPECT_EQ(first_bitwise_difference(got, want), -1);
  }
}

// An import of a field into a grid whose commit was stopped settles it first: with every part
// prepared it commits them, so the parts are ahead of the grid and the import is refused with
// the hint to finish the run; after that, it goes into the step the parts hold.
TEST(Distributed, AnImportAfterAStoppedCommitSettlesItFirst) {
  const Shape s{10, 9, 14};
  const Case c{"7pt", kNeumann, DType::kF32, s, 3, 3, ""};
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF32)).ok());
  ASSERT_TRUE(mpi::run_distributed(dir, options_for(c)).ok());
  auto m = mpi::load_distributed(dir);
  ASSERT_TRUE(m.ok());
  RunOptions two = options_for(c);
  two.steps = 2;
  const std::string npy = tmp / "u.npy";
  const std::vector<float> imported = random_values<float>(s, 99);
  if (mpi::rank() == 0) {
    ASSERT_TRUE(internal::write_file_atomic(dir, kRunRecordName,
                                            record_of(two, 3, Method::kInCore).to_json())
                    .ok());
    std::ofstream out(npy, std::ios::binary);
    out << npy_header(DType::kF32, {s.nz, s.ny, s.nx});
    out.write(reinterpret_cast<const char*>(imported.data()),
              static_cast<std::streamsize>(imported.size() * sizeof(float)));
  }
  prepare_negated_part<float>(*m, 5, /*commit_too=*/false);
  mpi::barrier();
  const Status refused = mpi::import_field_distributed(npy, dir, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("--resume"), std::string::npos) << refused.message();
  {
    auto part = Grid::open(m->parts[static_cast<size_t>(mpi::rank())].dir);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(part->manifest().step, 5) << "every part was prepared: they commit";
    EXPECT_FALSE(part->prepared().has_value());
  }
  mpi::barrier();
  RunOptions resume = options_for({"7pt", kDirichlet, DType::kF32, {}, -1, 3, ""});
  resume.resume = true;
  ASSERT_TRUE(mpi::run_distributed(dir, resume).ok());
  const Status st = mpi::import_field_distributed(npy, dir, 0);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> got = gather_values<float>(dir);
  if (mpi::rank() == 0) {
    EXPECT_EQ(got, imported);
  }
}

// A part that cannot write its new state (something in the way of its replacement files): the
// run fails on every rank, the others discard what they prepared, and the grid keeps its step;
// once the obstacle is gone the same run goes through exactly.
TEST(Distributed, AFailedCommitOnOneRankLeavesTheGridAtItsStep) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Shape s{8, 11, 12};
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid(s, DType::kF64)).ok());
  const Case c{"13pt", kDirichlet, DType::kF64, s, 4, 2, ""};
  ASSERT_TRUE(mpi::run_distributed(dir, options_for(c)).ok());
  const int last = mpi::size() - 1;
  auto m = mpi::load_distributed(dir);
  ASSERT_TRUE(m.ok());
  std::string obstacle;
  if (mpi::rank() == last) {
    auto part = Grid::open(m->parts[static_cast<size_t>(last)].dir);
    ASSERT_TRUE(part.ok());
    obstacle = part->file_path(0, FileSet::kReplacement);
    fs::create_directory(obstacle);
  }
  mpi::barrier();
  auto failed = mpi::run_distributed(dir, options_for(c));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find(mpi::broadcast(obstacle, last)), std::string::npos)
      << failed.status().message();
  auto part = Grid::open(m->parts[static_cast<size_t>(mpi::rank())].dir);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->manifest().step, 4);
  EXPECT_FALSE(part->prepared().has_value());
  part = Result<Grid>(unsupported("closed"));
  if (mpi::rank() == last) fs::remove(obstacle);
  mpi::barrier();
  auto again = mpi::run_distributed(dir, options_for(c));
  ASSERT_TRUE(again.ok()) << again.status().message();
  expect_reference_steps<double>(dir, s, "13pt", kDirichlet, 8);
}

// A part damaged on one rank: the run stops on every rank with its message, before anything
// is computed.
TEST(Distributed, DamagedPartOnOneRankStopsTheRun) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  ASSERT_TRUE(mpi::create_distributed(dir, random_grid({8, 8, 12}, DType::kF32)).ok());
  const int last = mpi::size() - 1;
  auto m = mpi::load_distributed(dir);
  ASSERT_TRUE(m.ok());
  if (mpi::rank() == last) {
    fs::resize_file(m->parts[static_cast<size_t>(last)].dir + "/data.0.dgd", 4096);
  }
  mpi::barrier();
  auto report =
      mpi::run_distributed(dir, options_for({"7pt", kNeumann, DType::kF32, {}, 4, 2, ""}));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(report.status().message().find("part " + std::to_string(last)), std::string::npos)
      << report.status().message();
  auto after = mpi::load_distributed(dir);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->step, 0);
}

// A damaged plane is found when the run copies the part, with --verify or without: laying it
// out again with x or y halos, or splitting the grid over another process grid (the copies would
// otherwise get fresh checksums, and the damage would pass every later check). A failed split
// leaves none of its new parts behind. Parts that only gain z halos get them in place and copy
// nothing (the block keeps its checksums): with --verify their engines find the damage (one
// rank: its part needs no halos, and its load into memory finds it).
TEST(Distributed, RunsFindDamageInThePartsTheyCopy) {
  const int last = mpi::size() - 1;
  struct DamageCase {
    bool verify;
    std::optional<ProcessGrid> made_on, run_on;
    std::string what;
  };
  std::vector<DamageCase> cases = {{true, std::nullopt, std::nullopt, "z halos added, --verify"}};
  for (const ProcessGrid& g : grids_splitting_x_or_y()) {
    for (const bool verify : {true, false}) {
      const std::string flag = verify ? ", --verify" : "";
      cases.push_back({verify, std::nullopt, g, "split over " + g.to_string() + flag});
      cases.push_back({verify, g, g, "laid out again on " + g.to_string() + flag});
    }
  }
  for (const auto& [verify, made_on, procs, what] : cases) {
    SCOPED_TRACE(what);
    SharedTempDir tmp;
    const std::string dir = tmp / "g";
    ASSERT_TRUE(
        mpi::create_distributed(dir, random_grid({16, 16, 6 * mpi::size()}, DType::kF32), made_on)
            .ok());
    auto m = mpi::load_distributed(dir);
    ASSERT_TRUE(m.ok());
    if (mpi::rank() == last) {  // one value of plane 1 (slot 1: each slot is 4 KiB)
      std::fstream f(m->parts[static_cast<size_t>(last)].dir + "/data.0.dgd",
                     std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(4096 + 100);
      f.write("\xff\xff\xff\xff", 4);
    }
    mpi::barrier();
    RunOptions opt = options_for({"7pt", kNeumann, DType::kF32, {}, 4, 2, ""});
    opt.verify = verify;
    auto report = mpi::run_distributed(dir, opt, procs);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(report.status().message().find("does not match its checksum"), std::string::npos)
        << report.status().message();
    auto after = mpi::load_distributed(dir);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->step, 0);
    EXPECT_EQ(after->id, m->id);
    int parts = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      parts += entry.path().filename().string().find(".part.") != std::string::npos;
    }
    EXPECT_EQ(parts, mpi::size()) << "parts left behind in " << dir;
  }
}

}  // namespace
}  // namespace deepgrid
