// Distributed grids under MPI against the scalar reference, bitwise. CTest runs this program
// under `mpirun -n P` for P = 1, 2, 3 and 4; every rank runs every test in the same order (the
// library calls are collective), and rank 0 compares the gathered grid with the reference.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "reference.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using testing::first_bitwise_difference;
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

// Every value of the distributed grid, on rank 0 (empty elsewhere).
template <typename T>
std::vector<T> gather_values(const std::string& dir) {
  auto m = mpi::load_distributed(dir);
  EXPECT_TRUE(m.ok()) << m.status().message();
  std::vector<T> out;
  if (!m.ok()) return out;
  const Status st = mpi::gather_planes(*m, /*verify=*/true, [&](int64_t z, const void* values) {
    const auto* v = static_cast<const T*>(values);
    EXPECT_EQ(static_cast<int64_t>(out.size()), z * m->shape.plane_points());
    out.insert(out.end(), v, v + m->shape.plane_points());
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
};

RunOptions options_for(const Case& c) {
  RunOptions opt;
  opt.scheme = *Stencil::resolve(c.stencil);
  opt.boundary = c.boundary;
  opt.steps = c.steps;
  opt.bt = c.bt;
  opt.threads = 1;
  opt.method = c.method;
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

// Runs the runs of `cases` one after the other on one distributed grid made with the first
// case's shape and dtype, and compares with the reference after each.
template <typename T>
void expect_runs_match_reference(const std::vector<Case>& cases) {
  SharedTempDir tmp;
  const std::string dir = tmp / "g";
  const Case& first = cases.front();
  auto made = mpi::create_distributed(dir, random_grid(first.shape, first.dtype));
  ASSERT_TRUE(made.ok()) << made.status().message();  // agreed: every rank returns here alike
  std::vector<T> want = random_values<T>(first.shape, 11);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stencil + " " + c.boundary.to_string() + " " + c.shape.to_string() + " " +
                 std::to_string(c.steps) + " steps, bt " + std::to_string(c.bt) + ", " +
                 std::to_string(mpi::size()) + " ranks");
    auto report = mpi::run_distributed(dir, options_for(c));
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_EQ(report->total.steps, c.steps);
    EXPECT_EQ(static_cast<int>(report->per_rank.size()), mpi::size());
    const std::vector<T> got = gather_values<T>(dir);
    if (mpi::rank() != 0) continue;
    want = reference_run(want, c.shape, *Stencil::resolve(c.stencil), c.boundary, c.steps);
    const int64_t diff = first_bitwise_difference(got, want);
    EXPECT_EQ(diff, -1) << "first difference at index " << diff;
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

TEST(Distributed, TooManyRanksAreRefused) {
  SharedTempDir tmp;
  auto made = mpi::create_distributed(tmp / "g", random_grid({4, 4, mpi::size() - 1}, DType::kF32));
  if (mpi::size() == 1) return;  // a grid needs a plane: nz = 0 is refused as a shape
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("at most " + std::to_string(mpi::size() - 1)),
            std::string::npos)
      << made.status().message();
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
  const std::vector<float> got = gather_values<float>(dir);
  if (mpi::rank() != 0) return;
  const auto want =
      reference_run(random_values<float>(s, 11), s, *Stencil::resolve("7pt"), kPeriodic, 3);
  EXPECT_EQ(first_bitwise_difference(got, want), -1);
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

}  // namespace
}  // namespace deepgrid

int main(int argc, char** argv) {
  deepgrid::mpi::Session session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (deepgrid::mpi::rank() != 0) {  // one report: rank 0's (every rank's exit code counts)
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
