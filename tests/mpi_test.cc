// Distributed grids under MPI against the scalar reference, bitwise. CTest runs this program
// under `mpirun -n P` for P = 1, 2, 3 and 4; every rank runs every test in the same order (the
// library calls are collective), and rank 0 compares the gathered grid with the reference.
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "deepgrid/npy.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/traces_file.h"
#include "engines/subnormals.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/halo_exchange.h"
#include "reference.h"
#include "test_schemes.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using testing::first_bitwise_difference;
using testing::kCoupledScheme;
using testing::kKernelScheme;
using testing::random_values;
using testing::reference_run;

// A temporary directory every rank sees (made by rank 0), removed when the test ends.
class SharedTempDir {
 public:
  SharedTempDir() {
    std::string path;
    if (mpi::rank() == 0) {
      std::string tmpl = (fs::temp_directory_path() / "deepgrid-mpi-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
    }
    path_ = mpi::broadcast(path);
  }
  ~SharedTempDir() {
    mpi::barrier();
    std::error_code ec;
    if (mpi::rank() == 0) fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Every value of the distributed grid (each plane's components one after another), on rank 0
// (empty elsewhere).
template <typename T>
std::vector<T> gather_values(const std::string& dir) {
  auto m = mpi::load_distributed(dir);
  EXPECT_TRUE(m.ok()) << m.status().message();
  std::vector<T> out;
  if (!m.ok()) return out;
  const int64_t plane = m->shape.plane_points() * m->components();
  const Status st = mpi::gather_planes(*m, /*verify=*/true, [&](int64_t z, const void* values) {
    const auto* v = static_cast<const T*>(values);
    EXPECT_EQ(static_cast<int64_t>(out.size()), z * plane);
    out.insert(out.end(), v, v + plane);
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

struct Case {
  std::string stencil;
  Boundary boundary;
  DType dtype;
  Shape shape;
  int64_t steps;
  int bt;           // exchange depth; 0: automatic
  std::string mem;  // empty: in-core parts
  Method method = Method::kAuto;
  std::optional<ProcessGrid> procs = {};  // for the create (first case) and the run; {}: chosen
  const Probes* probes = nullptr;         // sources and receivers; null: none
  bool flush_subnormals = false;          // RunOptions::flush_subnormals
};

// A stencil or scheme preset, or a scheme's or a stencil's JSON text (a user's kernel's too).
Scheme testing_scheme(const std::string& name) {
  if (name.rfind(R"({"points")", 0) == 0) return Stencil::from_json(name).value();
  if (name.front() == '{') return Scheme::from_json(name).value();
  return Scheme::resolve(name).value();
}

RunOptions options_for(const Case& c) {
  RunOptions opt;
  opt.scheme = testing_scheme(c.stencil);
  opt.boundary = c.boundary;
  opt.steps = c.steps;
  opt.bt = c.bt;
  opt.threads = 1;
  opt.method = c.method;
  opt.flush_subnormals = c.flush_subnormals;
  if (!c.mem.empty()) opt.mem_budget = *parse_size(c.mem);
  return opt;
}

CreateOptions random_grid(const Shape& shape, DType dtype) {
  CreateOptions opt;
  opt.shape = shape;
  opt.dtype = dtype;
  opt.init = {InitSpec::Kind::kRandom, 0, 11};
  return opt;
}

// The random values of component c of a new grid: seed 11 + c.
InitSpec random_component(int c) { return {InitSpec::Kind::kRandom, 0, 11 + uint64_t(c)}; }

// A grid of the scheme's fields (one field for a plain stencil), every component random.
CreateOptions random_grid(const Shape& shape, DType dtype, const Scheme& scheme) {
  CreateOptions opt = random_grid(shape, dtype);
  if (scheme.is_stencil()) return opt;
  opt.fields = initial_fields(scheme, opt.init);
  for (size_t c = 0; c < opt.fields.size(); ++c) {
    opt.fields[c].init = random_component(static_cast<int>(c));
  }
  opt.scheme = scheme.to_json();
  return opt;
}

// What random_grid's grid holds, plane after plane, each plane's components in order.
template <typename T>
std::vector<T> random_grid_values(const Shape& s, int components) {
  std::vector<T> u(static_cast<size_t>(s.points() * components));
  for (int64_t z = 0; z < s.nz; ++z) {
    for (int c = 0; c < components; ++c) {
      init_plane(random_component(c), s, z, u.data() + (z * components + c) * s.plane_points());
    }
  }
  return u;
}

// Checks on rank 0 that distributed grid DIR, made by random_grid(s, ...) of one field, holds
// bitwise what the reference computes from it in `steps` steps. Collective (the gathering).
template <typename T>
void expect_reference_steps(const std::string& dir, const Shape& s, const char* stencil,
                            const Boundary& b, int64_t steps) {
  const std::vector<T> got = gather_values<T>(dir);
  if (mpi::rank() != 0) return;
  const auto want = reference_run(random_values<T>(s, 11), s, *Stencil::resolve(stencil), b, steps);
  EXPECT_EQ(first_bitwise_difference(got, want), -1);
}

// Runs the runs of `cases` one after the other on one distributed grid made with the first
// case's shape, dtype and scheme (whose fields every case's scheme must have), and compares
// the grid, and the traces of cases with receivers, with the reference after each.
template <typename T>
void expect_runs_match_reference(const std::vector<Case>& cases) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Case& first = cases.front();
  const Scheme scheme = testing_scheme(first.stencil);
  auto made =
      mpi::create_distributed(dir, random_grid(first.shape, first.dtype, scheme), first.procs);
  ASSERT_TRUE(made.ok()) << made.status().message();  // agreed: every rank returns here alike
  std::vector<T> want = random_grid_values<T>(first.shape, scheme.component_count());
  int64_t step = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stencil + " " + c.boundary.to_string() + " " + c.shape.to_string() + " " +
                 std::string(dtype_name(c.dtype)) + " " + std::to_string(c.steps) + " steps, bt " +
                 std::to_string(c.bt) + ", " + std::to_string(mpi::size()) + " ranks" +
                 (c.procs ? ", process grid " + c.procs->to_string() : ""));
    RunOptions opt = options_for(c);
    if (c.probes != nullptr) {
      opt.probes = *c.probes;
      opt.traces_path = tmp / "traces.npy";
    }
    auto report = mpi::run_distributed(dir, opt, c.procs);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_EQ(report->total.steps, c.steps);
    EXPECT_EQ(static_cast<int>(report->per_rank.size()), mpi::size());
    // Every rank of these tests runs on this machine: its CPUs are counted once.
    EXPECT_GE(report->total.stolen_cpu_seconds, 0);
    EXPECT_EQ(report->total.cpus, report->per_rank.front().cpus);
    for (const mpi::RankFigures& f : report->per_rank) {
      EXPECT_EQ(f.host, report->per_rank.front().host);
      EXPECT_GE(f.cpus, 1);
      // A streamed part tells its I/O, and the total lists it.
      if (f.method == "stream" || f.method == "incore") {
        EXPECT_EQ(f.io_backend.empty(), f.method == "incore");
      }
      EXPECT_NE(report->total.io_backend.find(f.io_backend), std::string::npos);
    }
    if (c.procs) {
      EXPECT_EQ(report->process_grid, c.procs->to_string());
    }
    const std::vector<T> got = gather_values<T>(dir);
    step += c.steps;
    if (mpi::rank() != 0) continue;
    std::vector<double> want_traces;
    // Flushed, the case must make subnormals, or the mode would not show.
    const std::vector<T> ieee = c.flush_subnormals
                                    ? reference_run(want, c.shape, opt.scheme, c.boundary, c.steps)
                                    : std::vector<T>{};
    {
      const internal::SubnormalsFlushed flushed(c.flush_subnormals);
      want = reference_run(want, c.shape, opt.scheme, c.boundary, c.steps, opt.probes,
                           step - c.steps, &want_traces);
    }
    if (c.flush_subnormals) {
      EXPECT_NE(first_bitwise_difference(ieee, want), -1) << "no subnormal numbers in this case";
    }
    const int64_t diff = first_bitwise_difference(got, want);
    EXPECT_EQ(diff, -1) << "first difference at index " << diff;
    if (c.probes == nullptr || c.probes->receivers.empty()) continue;
    auto traces = read_traces_npy(opt.traces_path);
    ASSERT_TRUE(traces.ok()) << traces.status().message();
    EXPECT_EQ(traces->steps, c.steps);
    EXPECT_EQ(traces->receivers, static_cast<int64_t>(c.probes->receivers.size()));
    const int64_t tdiff = first_bitwise_difference(traces->values, want_traces);
    EXPECT_EQ(tdiff, -1) << "traces differ first at (step, receiver) index " << tdiff;
  }
}

void expect_case(const Case& c) {
  if (c.dtype == DType::kF32) {
    expect_runs_match_reference<float>({c});
  } else {
    expect_runs_match_reference<double>({c});
  }
}

const Boundary kDirichlet{Boundary::Kind::kDirichlet, 0.5};
const Boundary kNeumann{Boundary::Kind::kNeumann};
const Boundary kPeriodic{Boundary::Kind::kPeriodic};

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

// The process grids of this job's ranks that split x or y (z-slabs are the tests above) into
// at most 3 pieces: 2x1x1 and 1x2x1 (P = 2), 3x1x1 and 1x3x1 (P = 3), 2x2x1, 2x1x2 and 1x2x2
// (P = 4); 4x1x1 and 1x4x1 would only repeat the 1D splits at more cost.
std::vector<ProcessGrid> grids_splitting_x_or_y() {
  std::vector<ProcessGrid> out;
  const int n = mpi::size();
  for (int px = 1; px <= std::min(n, 3); ++px) {
    for (int py = 1; py <= 3 && px * py <= n; ++py) {
      if (n % (px * py) == 0 && px * py > 1) out.push_back({{px, py, n / (px * py)}});
    }
  }
  return out;
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

TEST(Distributed, SchemesOnProcessGridsSplittingXAndYMatchTheReference) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank: no process grid splits x or y";
  for (const ProcessGrid& g : grids_splitting_x_or_y()) {
    expect_case({"wave4", kPeriodic, DType::kF64, {13, 11, 7}, 5, 2, "", Method::kAuto, g});
    expect_case({kKernelScheme, kPeriodic, DType::kF32, {13, 11, 7}, 7, 3, "", Method::kAuto, g});
    expect_case({kCoupledScheme, kDirichlet, DType::kF32, {13, 11, 7}, 4, 0, "", Method::kAuto, g});
  }
}

// A shot and receivers on a grid of 17 x 12 x 14: a source on the blocks' sides (x = 8 | 9 at
// px = 2, z = 7 | 7 at pz = 2), one in a corner (its periodic copies lie in the halos of
// parts at the far ends) and one in the opposite corner; receivers on the blocks' edges along x
// (6 | 6 at px = 3) and z (4 | 4, 5 | 5, 10 | 10, 11 | 11 at pz = 3, 4), and one of an older level.
Probes shot_and_receivers(bool older_level) {
  Probes p = testing::shot_and_corner();
  SourceSpec far;
  far.x = 16, far.y = 0, far.z = 13;
  far.series = {1, 1, 1, 1};
  p.sources.push_back(far);
  for (int64_t x : {0, 5, 6, 8, 9, 11, 12, 16}) p.receivers.push_back({"u", x, 6, 7});
  for (int64_t z : {0, 3, 4, 5, 6, 10, 11, 13}) p.receivers.push_back({"u", 8, 5, z});
  if (older_level) p.receivers.push_back({"u@1", 3, 3, 13});
  return p;
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

// A run that one rank's callback stops part-way through a round (its part stops after
// `passes` passes of its engine; the other parts finish the round), then the rest of it: with
// --resume, or the same command again. The grid, the traces and the records end as an
// uninterrupted run leaves them, bitwise the reference's.
//
// Parts held in memory (the in-core method) stop together at the end of the round instead:
// every part commits that step, and nothing has to be finished before another command.
template <typename T>
void expect_stopped_run_resumes(const Case& c, int stopping_rank, int passes, bool resume_flag) {
  const bool in_memory = c.method == Method::kAuto && c.mem.empty();
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
  stopping.progress = [&](int64_t, int64_t) {
    return mpi::rank() != stopping_rank || ++calls < passes;
  };
  auto stopped = mpi::run_distributed(dir, stopping, c.procs);
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  ASSERT_LT(stopped->total.step_to, c.steps) << "the callback should stop the run";
  EXPECT_EQ(stopped->total.step_target, c.steps);
  if (in_memory) {
    EXPECT_EQ(stopped->total.step_to % c.bt, 0) << "the parts stop at the end of a round";
    EXPECT_GT(stopped->total.step_to, 0);
    auto m = mpi::load_distributed(dir);
    ASSERT_TRUE(m.ok());
    auto part = Grid::open(m->parts[static_cast<size_t>(mpi::rank())].dir);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(part->manifest().step, stopped->total.step_to);
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

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Whether this rank, which waited `waited` seconds for a slower one while it took `cpu` seconds
// of CPU time, left the CPU to others (spinning, it takes all of the wait).
void expect_slept(double waited, double cpu) {
  EXPECT_GT(waited, 0.3);
  EXPECT_LT(cpu, 0.25 * waited) << "rank " << mpi::rank() << " took " << cpu
                                << " s of CPU time while it waited " << waited << " s";
}

// Ranks waiting for a slower one in agree() sleep: a blocking MPI collective polls at full
// speed, and would take its node's CPUs from the rank still working (rank 0 measuring the
// machine, or a rank finishing a longer phase). Rank 0 here works 0.4 s before agreeing.
TEST(Communication, RanksWaitingInAgreeLeaveTheCpusToTheOthers) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank waits for nobody";
  mpi::barrier();
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  if (mpi::rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(mpi::agree(Status::Ok()).ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = thread_cpu_seconds() - cpu0;
  if (mpi::rank() != 0) expect_slept(waited, cpu);
}

// So do ranks waiting for their halos: here every rank receives a 4x3 plane from rank 0, which
// takes 0.4 s to take its values out of its part. The values arrive all the same.
TEST(Communication, RanksWaitingForHalosLeaveTheCpusToTheOthers) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank waits for nobody";
  const Block plane{{Span{0, 4}, Span{0, 3}, Span{0, 1}}};
  std::vector<float> values(12, 0.0F);
  if (mpi::rank() == 0) std::iota(values.begin(), values.end(), 1.0F);
  mpi::PartPlanes part;
  part.format = internal::PlaneFormat{4, 3, 1, sizeof(float)};
  part.copy = [&](const Block&, std::byte* packed, internal::RectCopy direction) {
    if (direction == internal::RectCopy::kToPacked) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      std::memcpy(packed, values.data(), sizeof(float) * values.size());
    } else {
      std::memcpy(values.data(), packed, sizeof(float) * values.size());
    }
  };
  std::vector<BoxTransfer> transfers;
  for (int r = 1; r < mpi::size(); ++r) transfers.push_back({0, plane, r, plane});
  auto exchange = mpi::HaloExchange::create(part, transfers, 1 << 20);
  ASSERT_TRUE(exchange.ok()) << exchange.status().message();
  mpi::barrier();
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(exchange->run().ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = thread_cpu_seconds() - cpu0;
  if (mpi::rank() == 0) return;
  expect_slept(waited, cpu);
  EXPECT_EQ(values[0], 1.0F);
  EXPECT_EQ(values[11], 12.0F);
}

// And ranks waiting for each other's planes (checkpoint, export and plot gather planes on rank
// 0): here first every rank sends rank 0 a 4 MiB message, too large for MPI to buffer, which
// rank 0 takes only after 0.4 s; then every rank sends another 0.4 s late, which rank 0 waits
// for. The messages arrive whole.
TEST(Communication, RanksWaitingForPlanesLeaveTheCpusToTheOthers) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank waits for nobody";
  constexpr int kTag = 11;
  std::vector<std::byte> mine(4 << 20, std::byte{static_cast<unsigned char>(mpi::rank())});
  auto timed = [](auto&& work) {
    mpi::barrier();
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    work();
    return std::pair{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                     thread_cpu_seconds() - cpu0};
  };
  auto receive_all = [&] {
    std::vector<std::byte> got;
    for (int r = 1; r < mpi::size(); ++r) {
      mpi::receive(r, kTag, &got);
      ASSERT_EQ(got.size(), mine.size());
      EXPECT_EQ(got.front(), std::byte{static_cast<unsigned char>(r)});
      EXPECT_EQ(got.back(), std::byte{static_cast<unsigned char>(r)});
    }
  };
  const auto late = std::chrono::milliseconds(400);
  const auto [sent_after, send_cpu] = timed([&] {
    if (mpi::rank() != 0) return mpi::send(mine.data(), mine.size(), 0, kTag);
    std::this_thread::sleep_for(late);
    receive_all();
  });
  if (mpi::rank() != 0) expect_slept(sent_after, send_cpu);
  const auto [received_after, receive_cpu] = timed([&] {
    if (mpi::rank() == 0) return receive_all();
    std::this_thread::sleep_for(late);
    mpi::send(mine.data(), mine.size(), 0, kTag);
  });
  if (mpi::rank() == 0) expect_slept(received_after, receive_cpu);
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
