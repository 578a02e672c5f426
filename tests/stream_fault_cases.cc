// The stream engine under I/O faults, with both backends: an error names the file and offset,
// a full disk is reported as such, short transfers still give exact results, and in bands an
// error or a damaged plane leaves the grid as it was.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>

#include "damage.h"
#include "stream_golden.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;

class StreamFaults : public ::testing::TestWithParam<io::Backend> {
 protected:
  void SetUp() override {
    dir_ = tmp_ / "g";
    CreateOptions co;
    co.shape = {64, 32, 40};
    co.init = *parse_init("random:4");
    co.chunk_target_bytes = 4 * 8192;
    ASSERT_TRUE(Grid::create(dir_, co).ok());
  }

  // Runs 6 steps with the hook (in bands of `band_rows` rows; verifying its reads); returns the
  // status and leaves the grid as the run left it.
  Result<StreamStats> run_with(io::FaultHook hook, int64_t band_rows = 0, bool verify = false) {
    Grid g = Grid::open(dir_, Grid::Mode::kReadWrite).value();
    if (verify) {
      EXPECT_TRUE(g.enable_verification().ok());
    }
    StreamOptions opt;
    opt.mem_budget = 4 << 20;
    opt.io = GetParam();
    opt.band_rows = band_rows;
    opt.fault_hook = std::move(hook);
    const Stencil st = Stencil::preset("7pt").value();
    const StreamPlan plan = plan_stream(g.manifest(), st, Boundary{}, 6, opt).value();
    return advance_stream(g, st, Boundary{}, 6, plan, opt);
  }

  testing::TempDir tmp_;
  std::string dir_;
};

TEST_P(StreamFaults, AnIoErrorStopsTheRunNamingFileAndOffset) {
  std::atomic<int> writes{0};
  auto r = run_with([&](const io::Request& req, int64_t, size_t) -> int64_t {
    return req.op == io::Op::kWrite && ++writes == 10 ? -EIO : 0;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIo);
  EXPECT_NE(r.status().message().find("data.0.dgd"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("offset"), std::string::npos) << r.status().message();
}

TEST_P(StreamFaults, AFullDiskIsReportedAsSuch) {
  auto r = run_with([](const io::Request& req, int64_t offset, size_t) -> int64_t {
    return req.op == io::Op::kWrite && offset >= 20 * 8192 ? -ENOSPC : 0;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNoSpace);
}

TEST_P(StreamFaults, ShortTransfersStillGiveExactResults) {
  const Shape s{64, 32, 40};
  const auto u = testing::random_values<float>(s, 4);
  auto r = run_with([](const io::Request&, int64_t, size_t length) -> int64_t {
    return length > 4096 ? 4096 : 0;  // every transfer moves one block at a time
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  Grid g = Grid::open(dir_).value();
  std::vector<float> got(u.size());
  ASSERT_TRUE(g.read_planes(0, s.nz, got.data()).ok());
  const auto want = testing::reference_run(u, s, Stencil::preset("7pt").value(), Boundary{}, 6);
  EXPECT_EQ(testing::first_bitwise_difference(want, got), -1);
}

// In bands every write goes to the replacement of the data files: an I/O error or a full disk
// ends the run naming the replacement's file and offset, and leaves the grid as it was (its
// step, its values, no replacement left).
TEST_P(StreamFaults, InBandsAnErrorLeavesTheGridAsItWas) {
  const Shape s{64, 32, 40};
  const auto u = testing::random_values<float>(s, 4);
  for (const int err : {EIO, ENOSPC}) {
    for (const int64_t rows : {int64_t{16}, int64_t{5}}) {  // (whole blocks, and not)
      std::atomic<int> writes{0};
      auto r = run_with(
          [&](const io::Request& req, int64_t, size_t) -> int64_t {
            return req.op == io::Op::kWrite && ++writes == 50 ? -err : 0;
          },
          rows);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), err == EIO ? ErrorCode::kIo : ErrorCode::kNoSpace);
      EXPECT_NE(r.status().message().find("data.0.b.dgd"), std::string::npos)
          << r.status().message();
      EXPECT_NE(r.status().message().find("offset"), std::string::npos);
      Grid g = Grid::open(dir_).value();
      EXPECT_EQ(g.manifest().step, 0);
      EXPECT_FALSE(fs::exists(g.file_path(0, FileSet::kReplacement)));
      std::vector<float> got(u.size());
      ASSERT_TRUE(g.read_planes(0, s.nz, got.data()).ok());
      EXPECT_EQ(testing::first_bitwise_difference(u, got), -1);
    }
  }
}

// A damaged plane is found before anything is replaced: the bands hash the rows they read, and
// the sweep compares every plane's checksum before it commits.
TEST_P(StreamFaults, InBandsADamagedPlaneIsFoundAndNothingIsReplaced) {
  const Shape s{64, 32, 40};
  std::vector<float> before(static_cast<size_t>(s.points()));
  {
    Grid g = Grid::open(dir_).value();
    // One value in plane 23, row 30: the last band's.
    const PlaneLocation at = g.locate(23);
    testing::flip_byte(g.file_path(at.file), at.offset + (30 * 64 + 7) * 4);
    ASSERT_TRUE(g.read_planes(0, s.nz, before.data()).ok());
  }
  auto r = run_with({}, 8, /*verify=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.status().message().find("plane 23"), std::string::npos) << r.status().message();
  Grid g = Grid::open(dir_).value();
  EXPECT_EQ(g.manifest().step, 0);
  EXPECT_FALSE(fs::exists(g.file_path(0, FileSet::kReplacement)));
  std::vector<float> got(before.size());
  ASSERT_TRUE(g.read_planes(0, s.nz, got.data()).ok());
  EXPECT_EQ(std::memcmp(before.data(), got.data(), before.size() * sizeof(float)), 0)
      << "the grid's files are as they were, damage included";
}

INSTANTIATE_TEST_SUITE_P(BothBackends, StreamFaults,
                         ::testing::Values(io::Backend::kUring, io::Backend::kThreads),
                         [](const auto& param_info) {
                           return std::string(io::backend_name(param_info.param));
                         });

}  // namespace
}  // namespace deepgrid
