// The memory budget is a hard cap: a stream run on a grid 16x the budget inside a cgroup
// limited to budget + 64 MiB (page cache counts against it, hence direct I/O) succeeds and
// matches the in-core result bitwise.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepgrid/run.h"
#include "sanitizer_build.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCgroupRoot = "/sys/fs/cgroup/memory";  // cgroup v1 memory controller

// Under AddressSanitizer, freed blocks wait in a quarantine (up to 256 MiB) before they are
// reused: memory the checker holds, not the program. It is kept small here so that the cgroup
// measures the program.
#ifdef DEEPGRID_TEST_UNDER_ASAN
constexpr const char* kCheckerOptions = "quarantine_size_mb=1";
#else
constexpr const char* kCheckerOptions = "";  // no checker
#endif

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The peak resident memory of this build's CLI doing nothing (`deepgrid --version`). Under
// AddressSanitizer that is the checker's runtime, its shadow of the (several times larger)
// instrumented binary and the binary's own pages: some 50 MiB that belong to the checker and
// grow with the code, not with the grid or the budget. The release build's idle footprint
// (a few MiB) is part of the 64 MiB fixed overhead the cap allows, so it is only added under
// the checker.
uint64_t checker_idle_footprint_bytes() {
  if (*kCheckerOptions == '\0') return 0;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("ASAN_OPTIONS", kCheckerOptions, 1);
    ::execl(DEEPGRID_CLI, DEEPGRID_CLI, "--version", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    return 0;
  }
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // ru_maxrss is in KiB
}

std::string checker_env() {
  return *kCheckerOptions == '\0' ? "" : std::string("ASAN_OPTIONS=") + kCheckerOptions + " ";
}

// Runs `command` through sh; returns (exit status, stdout).
std::pair<int, std::string> shell(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = p != nullptr ? ::pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A stream run of `steps` on a grid of `shape` (7pt, --mem 8MiB, `args` added) inside a cgroup
// of the budget + 64 MiB (+ a sanitizer's idle footprint): it keeps the budget, the cgroup's
// high-water mark stays under the limit, and the result is the in-core run's; `report` gets the
// run's report (left empty when the run failed or the test is skipped).
void expect_stream_run_within_a_cgroup(const Shape& shape, int steps, const std::string& args,
                                       nlohmann::json* report = nullptr) {
  const std::string cgroup =
      std::string(kCgroupRoot) + "/deepgrid-test-" + std::to_string(::getpid());
  if (!fs::is_directory(kCgroupRoot) || ::mkdir(cgroup.c_str(), 0755) != 0) {
    GTEST_SKIP() << "no writable cgroup v1 memory controller at " << kCgroupRoot
                 << " (needs root and a host that delegates it)";
  }
  const uint64_t budget = 8 << 20;
  const uint64_t checker = checker_idle_footprint_bytes();
  const uint64_t limit = budget + (64 << 20) + checker;
  std::ofstream(cgroup + "/memory.limit_in_bytes") << limit;
  const testing::TempDir tmp;
  const std::string root = tmp.path().string();

  CreateOptions co;
  co.shape = shape;
  co.init = *parse_init("random:5");
  EXPECT_TRUE(Grid::create(root + "/ooc", co).ok());
  EXPECT_TRUE(Grid::create(root + "/ref", co).ok());

  // An empty machine cache: the run's first measurement of this machine happens inside the
  // cgroup too, and must keep the budget as well.
  const auto [code, out] = shell(
      "sh -c 'echo $$ > " + cgroup + "/cgroup.procs && exec env " + "DEEPGRID_CACHE_DIR=" + root +
      "/cache " + checker_env() + DEEPGRID_CLI + " run " + root + "/ooc --stencil 7pt --steps " +
      std::to_string(steps) + " --method stream --mem 8MiB " + args + " --json'");
  const std::string usage = read_file(cgroup + "/memory.max_usage_in_bytes");
  const uint64_t max_usage = usage.empty() ? 0 : std::stoull(usage);
  ::rmdir(cgroup.c_str());
  EXPECT_EQ(code, 0) << "the run failed or was killed inside a " << (limit >> 20)
                     << " MiB cgroup (of which " << (checker >> 20)
                     << " MiB for the sanitizer's idle footprint): " << out;
  if (code != 0) return;
  const auto run = nlohmann::json::parse(out);
  EXPECT_LE(run["engine_memory_bytes"].get<uint64_t>(), budget);
  EXPECT_LE(run["peak_memory_bytes"].get<uint64_t>(), limit);
  EXPECT_LE(max_usage, limit);
  if (report != nullptr) *report = run;

  RunOptions opt;
  opt.scheme = Stencil::preset("7pt").value();
  opt.steps = steps;
  opt.method = Method::kInCore;
  EXPECT_TRUE(run_grid(root + "/ref", opt).ok());
  std::vector<float> a(static_cast<size_t>(co.shape.points())), b(a.size());
  EXPECT_TRUE(Grid::open(root + "/ooc")->read_planes(0, co.shape.nz, a.data()).ok());
  EXPECT_TRUE(Grid::open(root + "/ref")->read_planes(0, co.shape.nz, b.data()).ok());
  EXPECT_TRUE(a == b) << "stream and in-core results differ";
}

TEST(MemoryCap, StreamRunSixteenTimesTheBudgetInsideACgroup) {
  // 128 MiB of f32: 16x the budget. Five sweeps of bt 4; under a sanitizer two (the same
  // buffers, a third of the work).
  expect_stream_run_within_a_cgroup({256, 256, 512}, testing::kUnderSanitizer ? 8 : 20,
                                    "--band-rows 0");
}

// Planes of 2 MiB, four of which fill the budget: no whole-plane sweep fits, the planner sweeps
// in bands of rows, and their writes (whole blocks: O_DIRECT) leave no page cache behind to
// count against the cgroup.
TEST(MemoryCap, StreamRunInBandsOfRowsInsideACgroup) {
  nlohmann::json report;
  expect_stream_run_within_a_cgroup({1024, 512, 64}, testing::kUnderSanitizer ? 4 : 12, "",
                                    &report);
  if (!report.empty()) {
    EXPECT_GT(report["band_rows"].get<int64_t>(), 0);
  }
}

// The first run on a machine measures it before planning, within the budget, and then
// allocates the engine's buffers: what the measurement freed must not stay resident beside
// them. (glibc keeps freed blocks below its mmap threshold, which it raises after each large
// free: this run peaked at 255 MiB, twice its budget, when buffers came from malloc.) No cgroup
// needed: the report's peak is the process's high-water mark.
TEST(MemoryCap, FirstRunOnAMachineKeepsItsBudget) {
#ifdef DEEPGRID_TEST_UNDER_TSAN
  GTEST_SKIP() << "ThreadSanitizer shadows every page the run touches, and the peak counts the "
                  "shadow too; the release and ASan builds check this";
#endif
  const uint64_t budget = 128 << 20;
  const uint64_t limit = budget + (64 << 20) + checker_idle_footprint_bytes();
  const testing::TempDir tmp;
  const std::string root = tmp.path().string();
  CreateOptions co;
  co.shape = {512, 512, 256};  // 256 MiB of f32: twice the budget, so the run streams
  co.init = *parse_init("random:6");
  ASSERT_TRUE(Grid::create(root + "/g", co).ok());
  const auto [code, out] =
      shell("env DEEPGRID_CACHE_DIR=" + root + "/cache " + checker_env() + DEEPGRID_CLI + " run " +
            root + "/g --stencil 7pt --steps 4 --method stream --mem 128MiB --json");
  ASSERT_EQ(code, 0) << out;
  const auto report = nlohmann::json::parse(out);
  EXPECT_LE(report["engine_memory_bytes"].get<uint64_t>(), budget);
  EXPECT_LE(report["peak_memory_bytes"].get<uint64_t>(), limit)
      << "peak " << (report["peak_memory_bytes"].get<uint64_t>() >> 20) << " MiB";
}

// Receivers' values stay in memory for the whole run: the engine plans with what they leave of
// the budget.
TEST(MemoryCap, ReceiversValuesCountAgainstTheBudget) {
  const testing::TempDir tmp;
  const std::string root = tmp.path().string();
  CreateOptions co;
  co.shape = {128, 128, 256};  // 16 MiB of f32
  co.init = *parse_init("random:7");
  ASSERT_TRUE(Grid::create(root + "/g", co).ok());
  nlohmann::json at = nlohmann::json::array();
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 128; ++x) at.push_back({x, y, 100});
  }
  std::ofstream(root + "/r.json") << nlohmann::json{{"receivers", {{{"at", at}}}}}.dump();
  const uint64_t budget = 4 << 20, values = 8192 * 16 * sizeof(double);  // 1 MiB of values
  auto engine_memory = [&](const std::string& probes) {
    const auto [code, out] = shell("env DEEPGRID_CACHE_DIR=" + root + "/cache " + checker_env() +
                                   DEEPGRID_CLI + " run " + root +
                                   "/g --stencil 7pt --steps 16 --method stream --mem 4MiB "
                                   "--json " +
                                   probes);
    EXPECT_EQ(code, 0) << out;
    return code == 0 ? nlohmann::json::parse(out)["engine_memory_bytes"].get<uint64_t>() : 0;
  };
  EXPECT_GT(engine_memory(""), budget - values);  // without receivers it takes more than that
  const uint64_t with_traces =
      engine_memory("--probes " + root + "/r.json --traces " + root + "/t.npy");
  EXPECT_GT(with_traces, 0u);
  EXPECT_LE(with_traces, budget - values);
}

}  // namespace
}  // namespace deepgrid
