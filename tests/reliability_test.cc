// Reliability of stored grids: exclusive access between processes, per-plane checksums kept by
// every writer and checked by fsck and verified reads, and the preflight checks of a run.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "damage.h"
#include "deepgrid/fsck.h"
#include "deepgrid/npy.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "engines/stream_engine.h"
#include "grid_holder.h"
#include "plan/preflight.h"
#include "reference.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Reliability : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_ / name; }

  // A random f32 grid of `shape`, released once created.
  std::string make_grid(const std::string& name, Shape shape = {24, 16, 12},
                        int64_t chunk_bytes = 4 << 12) {
    CreateOptions co;
    co.shape = shape;
    co.init = *parse_init("random:5");
    co.chunk_target_bytes = chunk_bytes;
    EXPECT_TRUE(Grid::create(path(name), co).ok());
    return path(name);
  }

  testing::TempDir tmp_;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Flips the bits of one byte of the first data file of the grid in `dir`.
void flip_byte(const std::string& dir, int64_t offset) {
  testing::flip_byte(Grid::open(dir)->file_path(0), offset);
}

RunOptions seven_point(int64_t steps, Method method = Method::kInCore) {
  RunOptions o;
  o.scheme = Stencil::preset("7pt").value();
  o.steps = steps;
  o.method = method;
  if (method != Method::kInCore) o.mem_budget = 4 << 20;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Exclusive access

TEST_F(Reliability, AWriterInAnotherProcessKeepsEveryoneElseOutNamingItsPid) {
  const std::string g = make_grid("g");
  testing::GridHolder writer(g, Grid::Mode::kReadWrite);
  ASSERT_TRUE(writer.held());
  for (Grid::Mode mode : {Grid::Mode::kReadWrite, Grid::Mode::kReadOnly}) {
    auto r = Grid::open(g, mode);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBusy);
    EXPECT_NE(r.status().message().find("pid " + std::to_string(writer.pid())), std::string::npos)
        << r.status().message();
  }
  EXPECT_EQ(run_grid(g, seven_point(1)).status().code(), ErrorCode::kBusy);
}

TEST_F(Reliability, ReadersShareButExcludeAWriter) {
  const std::string g = make_grid("g");
  testing::GridHolder reader(g, Grid::Mode::kReadOnly);
  ASSERT_TRUE(reader.held());
  EXPECT_TRUE(Grid::open(g, Grid::Mode::kReadOnly).ok());
  EXPECT_EQ(Grid::open(g, Grid::Mode::kReadWrite).status().code(), ErrorCode::kBusy);
}

TEST_F(Reliability, AKilledHolderLeavesNoLockBehind) {
  const std::string g = make_grid("g");
  testing::GridHolder writer(g, Grid::Mode::kReadWrite);
  ASSERT_TRUE(writer.held());
  ASSERT_FALSE(Grid::open(g, Grid::Mode::kReadWrite).ok());
  writer.kill();
  EXPECT_TRUE(Grid::open(g, Grid::Mode::kReadWrite).ok());
}

TEST_F(Reliability, CreateOverAHeldGridNamesTheHolder) {
  const std::string g = make_grid("g");
  testing::GridHolder writer(g, Grid::Mode::kReadWrite);
  ASSERT_TRUE(writer.held());
  CreateOptions co;
  co.shape = {8, 8, 8};
  EXPECT_EQ(Grid::create(g, co).status().code(), ErrorCode::kBusy);
}

// ---------------------------------------------------------------------------------------------
// Checksums

// fsck of a grid every plane of which must match its recorded hash.
void expect_clean(const std::string& dir) {
  const Grid g = Grid::open(dir).value();
  const FsckReport r = fsck_grid(g).value();
  EXPECT_TRUE(r.has_checksums) << dir;
  EXPECT_FALSE(r.damage_found()) << r.problem;
  EXPECT_EQ(r.planes_checked, g.shape().nz);
}

TEST_F(Reliability, EveryWriterRecordsTheChecksumsOfWhatItWrote) {
  CreateOptions zero;
  zero.shape = {20, 9, 7};
  ASSERT_TRUE(Grid::create(path("zero"), zero).ok());
  expect_clean(path("zero"));
  const std::string g = make_grid("g");
  expect_clean(g);
  ASSERT_TRUE(run_grid(g, seven_point(3)).ok());
  expect_clean(g);
  ASSERT_TRUE(run_grid(g, seven_point(5, Method::kStream)).ok());
  expect_clean(g);
  ASSERT_TRUE(run_grid(g, seven_point(2, Method::kMmap)).ok());
  expect_clean(g);
  for (int64_t passes : {1, 2}) {  // the result in the second copy (renamed over) or in place
    RunOptions tiled = seven_point(passes, Method::kTiled);
    tiled.bt = 1;
    ASSERT_TRUE(run_grid(g, tiled).ok());
    expect_clean(g);
  }
  ASSERT_TRUE(export_npy(Grid::open(g).value(), path("g.npy")).ok());
  ASSERT_TRUE(import_npy(path("g.npy"), path("imported"), {}).ok());
  expect_clean(path("imported"));
  // Only the table the manifest names is left.
  int tables = 0;
  for (const auto& e : fs::directory_iterator(g)) {
    tables += e.path().filename().string().rfind("checksums.", 0) == 0;
  }
  EXPECT_EQ(tables, 1);
}

TEST_F(Reliability, FsckNamesEveryDamagedPlaneWithFileAndOffset) {
  const std::string g = make_grid("g");
  const Manifest m = Grid::open(g)->manifest();
  for (int64_t z : {3, 7}) flip_byte(g, m.locate(z).offset + 17);
  const Grid grid = Grid::open(g).value();
  const FsckReport r = fsck_grid(grid).value();
  ASSERT_EQ(r.damaged.size(), 2u);
  EXPECT_EQ(r.damaged[0].z, 3);
  EXPECT_EQ(r.damaged[0].offset, m.locate(3).offset);
  EXPECT_EQ(r.damaged[0].file, grid.file_path(0));
  EXPECT_EQ(r.damaged[1].z, 7);
  EXPECT_EQ(r.planes_checked, m.shape.nz);
}

TEST_F(Reliability, VerifiedRunsRefuseDamagedDataAndChangeNothing) {
  for (Method method : {Method::kInCore, Method::kStream}) {
    SCOPED_TRACE(std::string(method_name(method)));
    const std::string g = make_grid(std::string(method_name(method)));
    const int64_t offset = Grid::open(g)->manifest().locate(9).offset + 4;
    flip_byte(g, offset);
    const std::string data = slurp(g + "/data.0.dgd"), manifest = slurp(g + "/manifest.json");
    RunOptions o = seven_point(2, method);
    o.verify = true;
    auto r = run_grid(g, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(r.status().message().find("offset " + std::to_string(offset - 4)), std::string::npos)
        << r.status().message();
    EXPECT_EQ(slurp(g + "/data.0.dgd"), data);
    EXPECT_EQ(slurp(g + "/manifest.json"), manifest);
  }
}

TEST_F(Reliability, VerifiedReadsOfSoundGridsSucceed) {
  const std::string g = make_grid("g");
  RunOptions o = seven_point(4, Method::kStream);
  o.verify = true;
  ASSERT_TRUE(run_grid(g, o).ok());
  o.method = Method::kInCore;
  ASSERT_TRUE(run_grid(g, o).ok());  // reads what the stream engine wrote and recorded
  Grid grid = Grid::open(g).value();
  ASSERT_TRUE(grid.enable_verification().ok());
  EXPECT_TRUE(read_every_plane(grid).ok());
}

// A grid as deepgrid wrote it before checksums: format version 1, no table.
// Rewrites a freshly created one-file grid as an older deepgrid wrote it: version 2 has no
// spare slots and no base; version 1 not even a checksum table.
void make_version(const std::string& dir, int version) {
  json m = json::parse(slurp(dir + "/manifest.json"));
  ASSERT_EQ(m["base"], 0);
  ASSERT_EQ(m["layout"]["files"].size(), 1u);
  m.erase("base");
  m["layout"].erase("spare_planes");
  const int64_t bytes =
      m["shape"]["nz"].get<int64_t>() * m["layout"]["plane_stride"].get<int64_t>();
  m["layout"]["files"][0]["bytes"] = bytes;
  fs::resize_file(dir + "/" + m["layout"]["files"][0]["path"].get<std::string>(),
                  static_cast<uintmax_t>(bytes));
  if (version == 1) {
    fs::remove(dir + "/" + m["checksums"]["file"].get<std::string>());
    m.erase("checksums");
  }
  m["version"] = version;
  std::ofstream(dir + "/manifest.json") << m.dump(2);
}

void make_version_1(const std::string& dir) { make_version(dir, 1); }

TEST_F(Reliability, VersionOneGridsAreReadAndGetChecksumsWhenNextWritten) {
  const std::string g = make_grid("g");
  make_version_1(g);
  {
    Grid grid = Grid::open(g).value();
    const FsckReport r = fsck_grid(grid).value();
    EXPECT_FALSE(r.has_checksums);
    EXPECT_FALSE(r.damage_found());
    EXPECT_EQ(grid.enable_verification().code(), ErrorCode::kInvalidArgument);
  }
  ASSERT_TRUE(run_grid(g, seven_point(1)).ok());
  EXPECT_EQ(json::parse(slurp(g + "/manifest.json"))["version"], kOneFieldManifestVersion);
  expect_clean(g);
}

// A version-2 grid has no spare slots: its first stream run lengthens the files to make them,
// and gives the same values as a stream run on a version-3 grid.
TEST_F(Reliability, VersionTwoGridsGetSpareSlotsFromTheirFirstStreamRun) {
  const std::string old = make_grid("old"), fresh = make_grid("fresh");
  make_version(old, 2);
  EXPECT_EQ(Grid::open(old)->manifest().layout.spare_planes, 0);
  for (const std::string& g : {old, fresh}) {
    RunOptions o = seven_point(7, Method::kStream);
    o.bt = 3;
    ASSERT_TRUE(run_grid(g, o).ok()) << g;
    expect_clean(g);
  }
  const Grid a = Grid::open(old).value(), b = Grid::open(fresh).value();
  EXPECT_EQ(a.manifest().version, kOneFieldManifestVersion);
  EXPECT_GT(a.manifest().layout.spare_planes, 3);
  EXPECT_NE(a.manifest().base, 0) << "the sweeps moved the planes through the ring";
  std::vector<float> va(static_cast<size_t>(a.shape().points())), vb(va.size());
  ASSERT_TRUE(a.read_planes(0, a.shape().nz, va.data()).ok());
  ASSERT_TRUE(b.read_planes(0, b.shape().nz, vb.data()).ok());
  EXPECT_EQ(testing::first_bitwise_difference(va, vb), -1);
}

// A crash while the first stream run lengthened the files for spare slots, before it committed
// the manifest, leaves them longer than the manifest says: that grid opens and runs.
TEST_F(Reliability, ACrashWhileTheSpareSlotsGrowLeavesAGridThatRuns) {
  const std::string g = make_grid("g");
  make_version(g, 2);
  const std::string data = Grid::open(g)->file_path(0);
  fs::resize_file(data, fs::file_size(data) + 5 * 4096);
  ASSERT_TRUE(Grid::open(g).ok());
  ASSERT_TRUE(run_grid(g, seven_point(2, Method::kStream)).ok());
  expect_clean(g);
  EXPECT_GT(Grid::open(g)->manifest().layout.spare_planes, 0);
}

// Once the planes wrap around the ring, the spare slots cannot grow: the planner keeps each
// sweep's reach (bt * rz) below them.
TEST_F(Reliability, AWrappedRingLimitsTheSweepDepthToItsSpareSlots) {
  CreateOptions co;
  co.shape = {16, 8, 40};
  co.spare_planes = 6;
  Grid g = Grid::create(path("g"), co).value();
  Manifest m = g.manifest();
  m.base = 30;                    // planes 10.. wrap to the start of the ring
  ASSERT_TRUE(g.commit(m).ok());  // zeros everywhere: any base holds the same grid
  ASSERT_FALSE(g.can_grow_spare());
  StreamOptions opt;
  opt.mem_budget = 8 << 20;
  opt.bt = 20;
  const Stencil st = Stencil::preset("7pt").value();
  EXPECT_EQ(plan_stream(g.manifest(), st, Boundary{}, 20, opt)->bt, 5);
  opt.bt = 0;
  EXPECT_LE(plan_stream(g.manifest(), st, Boundary{}, 20, opt)->bt, 5);
}

TEST_F(Reliability, ADamagedChecksumTableIsReportedNotTrusted) {
  const std::string g = make_grid("g");
  const std::string table = json::parse(slurp(g + "/manifest.json"))["checksums"]["file"];
  std::ofstream(g + "/" + table) << "{\"format\": \"deepgrid-checksums\", \"planes\": [";
  Grid grid = Grid::open(g).value();
  const FsckReport r = fsck_grid(grid).value();
  EXPECT_TRUE(r.damage_found());
  EXPECT_NE(r.problem.find(table), std::string::npos) << r.problem;
  EXPECT_EQ(grid.enable_verification().code(), ErrorCode::kCorrupt);
}

TEST(PlaneChecksums, RoundTripAndRejectDamage) {
  PlaneChecksums t(3);
  EXPECT_FALSE(t.complete());
  for (int64_t z = 0; z < 3; ++z) t.set(z, plane_hash(&z, sizeof z));
  ASSERT_TRUE(t.complete());
  const std::string text = t.to_json(kComponentChecksumAlgorithm);
  const PlaneChecksums back =
      PlaneChecksums::from_json(text, 3, kComponentChecksumAlgorithm).value();
  for (int64_t z = 0; z < 3; ++z) EXPECT_EQ(back.hash(z), t.hash(z));
  EXPECT_FALSE(PlaneChecksums::from_json(text, 4, kComponentChecksumAlgorithm).ok());
  // A table of another algorithm than the manifest names is not taken for the grid's.
  EXPECT_EQ(PlaneChecksums::from_json(text, 3, kChecksumAlgorithm).status().code(),
            ErrorCode::kCorrupt);
  std::string bad = text;
  bad[bad.find('"', bad.find('[')) + 1] = 'g';
  EXPECT_FALSE(PlaneChecksums::from_json(bad, 3, kComponentChecksumAlgorithm).ok());
}

// ---------------------------------------------------------------------------------------------
// Preflight

class Preflight : public Reliability {
 protected:
  void SetUp() override {
    grid_ = make_grid("g");
    m_ = Grid::open(grid_)->manifest();
    facts_.grid_dir_free_bytes = uint64_t{1} << 40;
    facts_.physical_memory = uint64_t{1} << 36;
    plan_.method = Method::kStream;
    plan_.memory_bytes = 4 << 20;
  }
  std::string grid_;
  Manifest m_;
  PreflightFacts facts_;
  RunPlan plan_;
};

TEST_F(Preflight, ASoundMachinePasses) { EXPECT_TRUE(check_preflight(m_, plan_, facts_).ok()); }

TEST_F(Preflight, TooLittleSpaceToCommit) {
  facts_.grid_dir_free_bytes = commit_space_needed(m_) - 1;
  const Status st = check_preflight(m_, plan_, facts_);
  EXPECT_EQ(st.code(), ErrorCode::kNoSpace);
  EXPECT_NE(st.message().find("free"), std::string::npos) << st.message();
}

// Sweeps in bands write a second copy of the data files: a directory without room for it is
// refused with the fix; whole-plane sweeps, which write in place, are not.
TEST_F(Preflight, BandsNeedRoomForASecondCopyOfTheDataFiles) {
  const uint64_t files = static_cast<uint64_t>(m_.layout.files[0].bytes);
  facts_.data_dir_free = {{grid_, files - 1}};
  EXPECT_TRUE(check_preflight(m_, plan_, facts_).ok());
  plan_.stream.bands = 2;
  const Status st = check_preflight(m_, plan_, facts_);
  EXPECT_EQ(st.code(), ErrorCode::kNoSpace);
  EXPECT_NE(st.message().find("--band-rows"), std::string::npos) << st.message();
  facts_.data_dir_free = {{grid_, files}};
  EXPECT_TRUE(check_preflight(m_, plan_, facts_).ok());
}

TEST_F(Preflight, MoreMemoryThanTheMachineHas) {
  plan_.method = Method::kInCore;
  facts_.physical_memory = plan_.memory_bytes - 1;
  const Status st = check_preflight(m_, plan_, facts_);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--method stream"), std::string::npos) << st.message();
}

TEST_F(Preflight, StreamingNeedsDirectIoButInCoreDoesNot) {
  facts_.without_direct_io = {"/dev/shm"};
  const Status st = check_preflight(m_, plan_, facts_);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("O_DIRECT"), std::string::npos) << st.message();
  plan_.method = Method::kInCore;
  EXPECT_TRUE(check_preflight(m_, plan_, facts_).ok());
}

TEST_F(Preflight, UnwritableFiles) {
  facts_.unwritable = {grid_ + "/data.0.dgd"};
  const Status st = check_preflight(m_, plan_, facts_);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("data.0.dgd"), std::string::npos) << st.message();
}

TEST_F(Preflight, MeasuresThisMachineAndTheGridsFilesystems) {
  const Grid g = Grid::open(grid_).value();
  const PreflightFacts f = measure_preflight(g).value();
  EXPECT_GT(f.grid_dir_free_bytes, 0u);
  EXPECT_GT(f.physical_memory, uint64_t{1} << 20);
  if (::geteuid() != 0) {
    fs::permissions(g.file_path(0), fs::perms(0444));
    EXPECT_EQ(measure_preflight(g)->unwritable.size(), 1u);
  }
}

// A real filesystem without O_DIRECT: tmpfs before Linux 6.6.
TEST_F(Preflight, AStreamRunOnTmpfsFailsFastWithTheFix) {
  struct statfs sf {};
  constexpr long kTmpfsMagic = 0x01021994;
  if (::statfs("/dev/shm", &sf) != 0 || sf.f_type != kTmpfsMagic || ::access("/dev/shm", W_OK)) {
    GTEST_SKIP() << "no writable tmpfs at /dev/shm to test a filesystem without O_DIRECT";
  }
  const std::string dir = "/dev/shm/deepgrid-preflight-" + std::to_string(::getpid());
  fs::remove_all(dir);
  CreateOptions co;
  co.shape = {16, 16, 8};
  ASSERT_TRUE(Grid::create(dir, co).ok());
  if (Grid::open(dir)->direct_io()) {
    fs::remove_all(dir);
    GTEST_SKIP() << "tmpfs supports O_DIRECT on this kernel (Linux >= 6.6)";
  }
  const auto r = run_grid(dir, seven_point(1, Method::kStream));
  const auto incore = run_grid(dir, seven_point(1));
  fs::remove_all(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("O_DIRECT"), std::string::npos) << r.status().message();
  EXPECT_TRUE(incore.ok()) << incore.status().message();
}

}  // namespace
}  // namespace deepgrid

// ---------------------------------------------------------------------------------------------
// Crashes: a process killed at any moment of a stream run leaves a grid that the next run
// finishes bitwise as if nothing had happened (resume.h); one killed between sweeps leaves a
// consistent grid at the last committed step.

namespace deepgrid {
namespace {

constexpr int kCrashExit = 77;
constexpr int64_t kCrashSteps = 9;

Boundary boundary_named(const char* text) { return parse_boundary(text).value(); }

// A stream run towards step kCrashSteps (bt 3, blocks of 1 z-step, so that reads, compute and
// writes interleave finely) with the given fault hook and progress callback.
Status stream_to_the_end(Grid& g, const Boundary& b, const io::FaultHook& hook = {},
                         const ProgressFn& progress = {}, int64_t band_rows = 0) {
  const Stencil st = Stencil::preset("7pt").value();
  StreamOptions opt;
  opt.mem_budget = 8 << 20;
  opt.bt = 3;
  opt.block = 1;
  opt.band_rows = band_rows;
  opt.fault_hook = hook;
  const int64_t steps = kCrashSteps - g.manifest().step;
  DG_ASSIGN_OR_RETURN(const StreamPlan plan, plan_stream(g.manifest(), st, b, steps, opt));
  return advance_stream(g, st, b, steps, plan, opt, progress).status();
}

// The body of the crashing child: the run above on DEEPGRID_CRASH_DIR with the boundary
// DEEPGRID_CRASH_BOUNDARY (in bands of DEEPGRID_CRASH_BANDS rows where that is set), which
// _exit()s at the moment DEEPGRID_CRASH_AT says:
// "after-sweep:K" in the progress callback of the K-th sweep, or "write:N" as the N-th plane write
// reaches the I/O layer (writes before it may or may not have completed). Runs only as a child of
// the tests below: a separate process, so that the kill is real and nothing is flushed afterwards.
TEST(CrashChild, RunsAStreamAndDies) {
  const char* dir = std::getenv("DEEPGRID_CRASH_DIR");
  const char* at = std::getenv("DEEPGRID_CRASH_AT");
  const char* boundary = std::getenv("DEEPGRID_CRASH_BOUNDARY");
  if (dir == nullptr || at == nullptr || boundary == nullptr) {
    GTEST_SKIP() << "runs only as a crash test's child";
  }
  const std::string when = at;
  Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
  std::atomic<int> writes{0};
  io::FaultHook hook;
  if (when.rfind("write:", 0) == 0) {
    const int n = std::stoi(when.substr(6));
    hook = [&writes, n](const io::Request& r, int64_t, size_t) -> int64_t {
      if (r.op == io::Op::kWrite && ++writes == n) ::_exit(kCrashExit);
      return 0;
    };
  }
  const int sweeps = when.rfind("after-sweep:", 0) == 0 ? std::stoi(when.substr(12)) : 0;
  const char* bands = std::getenv("DEEPGRID_CRASH_BANDS");
  const Status st = stream_to_the_end(
      g, boundary_named(boundary), hook,
      [sweeps](int64_t done, int64_t) {
        if (sweeps > 0 && done == 3 * sweeps) ::_exit(kCrashExit);
        return true;
      },
      bands != nullptr ? std::stoll(bands) : 0);
  ::_exit(st.ok() ? 0 : 1);  // 0: the crash point was never reached
}

// Runs CrashChild in a fresh process (fork + exec of this test program) and waits for it.
int run_crash_child(const std::string& dir, const std::string& at, const std::string& boundary,
                    const std::string& band_rows = "") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!band_rows.empty()) ::setenv("DEEPGRID_CRASH_BANDS", band_rows.c_str(), 1);
    ::setenv("DEEPGRID_CRASH_DIR", dir.c_str(), 1);
    ::setenv("DEEPGRID_CRASH_AT", at.c_str(), 1);
    ::setenv("DEEPGRID_CRASH_BOUNDARY", boundary.c_str(), 1);
    ::execl("/proc/self/exe", "reliability_test", "--gtest_filter=CrashChild.*", nullptr);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class Crash : public ::testing::Test {
 protected:
  // Few spare slots (the run grows them to what blocks of 1 need: 3 levels + 4), so that the
  // sweep overwrites old planes it has passed and waits for checkpoints.
  std::string make(const std::string& name) {
    CreateOptions co;
    co.shape = shape_;
    co.chunk_target_bytes = 3 * 4096;
    co.spare_planes = 2;
    Grid g = Grid::create(tmp_ / name, co).value();
    EXPECT_TRUE(g.write_planes(0, shape_.nz, u_.data()).ok());
    EXPECT_TRUE(g.commit(g.manifest()).ok());
    return tmp_ / name;
  }

  void expect_reference(const std::string& dir, const char* boundary, int64_t steps) {
    const Grid g = Grid::open(dir).value();
    ASSERT_EQ(g.manifest().step, steps);
    EXPECT_TRUE(g.interrupted_sweep().empty()) << g.interrupted_sweep();
    const FsckReport fsck = fsck_grid(g).value();
    EXPECT_FALSE(fsck.damage_found()) << fsck.damaged.size() << " planes differ";
    std::vector<float> got(u_.size());
    ASSERT_TRUE(g.read_planes(0, shape_.nz, got.data()).ok());
    const Stencil st = Stencil::preset("7pt").value();
    EXPECT_EQ(testing::first_bitwise_difference(
                  testing::reference_run(u_, shape_, st, boundary_named(boundary), steps), got),
              -1);
  }

  const Shape shape_{20, 14, 17};
  const std::vector<float> u_ = testing::random_values<float>(shape_, 3);
  testing::TempDir tmp_;
};

// The progress callback runs after a sweep has written every plane and before its commit (so
// that what a caller saves there is on disk once the grid holds the sweep): a crash in it
// leaves the last committed step and the sweep, complete, which the next run commits.
TEST_F(Crash, InTheProgressCallbackTheGridHoldsTheLastCommittedStep) {
  for (int sweeps : {1, 2}) {
    std::string name = "g", at = "after-sweep:";  // (appends: GCC 12 -Wrestrict misfires on +)
    name += std::to_string(sweeps);
    at += std::to_string(sweeps);
    const std::string dir = make(name);
    ASSERT_EQ(run_crash_child(dir, at, "dirichlet:0"), kCrashExit);
    {
      Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
      EXPECT_EQ(g.manifest().step, 3 * (sweeps - 1));
      ASSERT_TRUE(g.sweep_record().has_value());
      EXPECT_EQ(g.sweep_record()->done, shape_.nz) << "every plane of the sweep is written";
      ASSERT_TRUE(stream_to_the_end(g, boundary_named("dirichlet:0")).ok());
    }
    expect_reference(dir, "dirichlet:0", kCrashSteps);
  }
}

// 3 boundaries x 8 random moments: the killed run's grid reports the interrupted sweep, and
// the next run finishes it and the rest, bitwise equal to the reference.
TEST_F(Crash, AtRandomWritesTheNextRunFinishesBitwise) {
  std::mt19937 rng(20261123);
  const int64_t writes = kCrashSteps / 3 * shape_.nz;  // every sweep writes every plane once
  std::uniform_int_distribution<int> moment(1, static_cast<int>(writes));
  int interrupted = 0;
  for (const char* boundary : {"dirichlet:0.5", "neumann", "periodic"}) {
    for (int trial = 0; trial < 8; ++trial) {
      const int n = moment(rng);
      std::string name = "g", at = "write:";
      name += std::to_string(interrupted);
      at += std::to_string(n);
      SCOPED_TRACE(std::string(boundary) + " " + at);
      const std::string dir = make(name);
      ASSERT_EQ(run_crash_child(dir, at, boundary), kCrashExit);
      {
        Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
        EXPECT_EQ(g.manifest().step, (n - 1) / shape_.nz * 3);
        ASSERT_TRUE(g.sweep_record().has_value()) << "the kill came inside a sweep";
        EXPECT_NE(g.interrupted_sweep().find("over 3 steps"), std::string::npos);
        const FsckReport fsck = fsck_grid(g).value();  // the old planes the sweep needs
        EXPECT_TRUE(fsck.resumable);
        EXPECT_FALSE(fsck.damage_found()) << fsck.damaged.size() << " needed planes damaged";
        ASSERT_TRUE(stream_to_the_end(g, boundary_named(boundary)).ok());
      }
      expect_reference(dir, boundary, kCrashSteps);
      ++interrupted;
    }
  }
}

// In bands of rows (written out of place, stream_bands.h) a kill at any moment leaves the grid at
// its last committed step, sound, with no sweep to finish; the next run removes what the killed
// sweep wrote and finishes the run, bitwise. 2 boundaries x 6 random moments; bands of 4 rows.
TEST_F(Crash, InBandsAKillLeavesTheLastCommittedStepAndTheNextRunFinishesBitwise) {
  std::mt19937 rng(20261129);
  const int64_t bands = (shape_.ny + 3) / 4;
  const int64_t writes = kCrashSteps / 3 * bands * shape_.nz;  // each band writes every plane
  std::uniform_int_distribution<int> moment(1, static_cast<int>(writes));
  int killed = 0;
  for (const char* boundary : {"dirichlet:0.5", "neumann"}) {
    for (int trial = 0; trial < 6; ++trial) {
      const int n = moment(rng);
      std::string name = "b", at = "write:";
      name += std::to_string(killed);
      at += std::to_string(n);
      SCOPED_TRACE(std::string(boundary) + " " + at);
      const std::string dir = make(name);
      ASSERT_EQ(run_crash_child(dir, at, boundary, "4"), kCrashExit);
      const int64_t committed = (n - 1) / (bands * shape_.nz) * 3;
      expect_reference(dir, boundary, committed);
      {
        Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
        EXPECT_FALSE(fs::exists(g.file_path(0, FileSet::kReplacement)))
            << "opened to write, the grid removes the killed sweep's replacement";
        ASSERT_TRUE(stream_to_the_end(g, boundary_named(boundary), {}, {}, 4).ok());
      }
      expect_reference(dir, boundary, kCrashSteps);
      ++killed;
    }
  }
}

// An I/O error or a full disk at a random write ends the run with that error; once the
// problem is gone the next run finishes it, bitwise.
TEST_F(Crash, AfterAnIoErrorTheNextRunFinishesBitwise) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> moment(1, static_cast<int>(kCrashSteps / 3 * shape_.nz));
  int trial = 0;
  for (const int error : {EIO, ENOSPC, EIO, ENOSPC, EIO, ENOSPC}) {
    const char* boundary = trial % 2 == 0 ? "periodic" : "dirichlet:0";
    const int n = moment(rng);
    std::string name = "g";
    name += std::to_string(trial++);
    SCOPED_TRACE(std::string(boundary) + " " + std::strerror(error) + " at write " +
                 std::to_string(n));
    const std::string dir = make(name);
    {
      Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
      std::atomic<int> writes{0};
      const Status st = stream_to_the_end(
          g, boundary_named(boundary), [&writes, n, error](const io::Request& r, int64_t, size_t) {
            return r.op == io::Op::kWrite && ++writes == n ? -int64_t{error} : int64_t{0};
          });
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.message().find(std::strerror(error)), std::string::npos) << st.message();
    }
    {
      Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
      ASSERT_TRUE(stream_to_the_end(g, boundary_named(boundary)).ok());
    }
    expect_reference(dir, boundary, kCrashSteps);
  }
}

// A real full filesystem (a size-limited tmpfs; root only): the disk fills between two
// sweeps, the run stops with ENOSPC naming the file, and once space is freed the same call
// finishes the run bitwise.
TEST_F(Crash, AFullFilesystemStopsTheRunAndItResumesOnceSpaceIsFreed) {
  const std::string mnt = tmp_ / "small";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs (" << std::strerror(errno)
                 << "): needs root and mount permission";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  CreateOptions co;
  co.shape = shape_;
  co.spare_planes = 8;
  const std::string dir = mnt + "/g";
  {
    Grid g = Grid::create(dir, co).value();
    ASSERT_TRUE(g.write_planes(0, shape_.nz, u_.data()).ok());
    ASSERT_TRUE(g.commit(g.manifest()).ok());
  }
  RunOptions opt;
  opt.scheme = Stencil::preset("7pt").value();
  opt.boundary = boundary_named("neumann");
  opt.steps = kCrashSteps;
  opt.method = Method::kStream;
  opt.bt = 3;
  opt.mem_budget = 8 << 20;
  const std::string filler = mnt + "/filler";
  opt.progress = [&](int64_t done, int64_t) {
    if (done == 3) {  // fill the disk to the last byte
      std::ofstream out(filler, std::ios::binary);
      const std::string block(4096, 'x');
      while (out.write(block.data(), block.size())) {
      }
    }
    return true;
  };
  const auto full = run_grid(dir, opt);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), ErrorCode::kNoSpace) << full.status().message();
  EXPECT_NE(full.status().message().find(dir), std::string::npos) << full.status().message();
  fs::remove(filler);
  opt.progress = {};
  const auto resumed = run_grid(dir, opt);  // the same call again
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_TRUE(resumed->resumed);
  expect_reference(dir, "neumann", kCrashSteps);
}

TEST_F(Crash, AnInterruptedSweepIsFinishedOnlyWithItsOwnStencil) {
  const std::string dir = make("g");
  ASSERT_EQ(run_crash_child(dir, "write:25", "dirichlet:0"), kCrashExit);
  RunOptions opt;
  opt.scheme = Stencil::preset("27pt").value();
  opt.steps = 1;
  const auto r = run_grid(dir, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--resume"), std::string::npos) << r.status().message();
  opt.scheme = Stencil::preset("7pt").value();
  opt.resume = true;  // no run record (a library caller's sweep): finishes that sweep only
  opt.mem_budget = 8 << 20;
  const auto resumed = run_grid(dir, opt);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_TRUE(resumed->resumed);
  expect_reference(dir, "dirichlet:0", 6);
}

}  // namespace
}  // namespace deepgrid
