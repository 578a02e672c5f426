// The command line on damaged and busy grids, end to end: fsck naming a damaged plane, the
// lock that keeps a writer alone on a grid, and runs killed at random moments that the same
// command finishes as if they had never been interrupted.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "device/device.h"
#include "grid_holder.h"
#include "sanitizer_build.h"

namespace {

namespace fs = std::filesystem;
using namespace deepgrid::testing;  // cli_runner.h: running the CLI and checking what it did
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Integrity and exclusive access

TEST_F(CliTest, FsckPassesASoundGridAndNamesADamagedPlanesFileAndOffset) {
  const std::string g = create("g", "64x32x12", {"--init", "random:2"});
  ASSERT_TRUE(Succeeded(run_cli({"run", g, "--stencil", "7pt", "--steps", "2"})));
  const RunResult sound = run_cli({"fsck", g});
  ASSERT_TRUE(Succeeded(sound));
  EXPECT_TRUE(contains(sound.out, "12 planes checked, 0 damaged")) << sound;

  const int64_t plane_stride = 64 * 32 * 4;  // 8 KiB: a multiple of 4096, so no padding
  // The in-core run wrote a replacement data file (base 0): plane 5 is at 5 strides.
  const json manifest = json::parse(read_file(g + "/manifest.json"));
  ASSERT_EQ(manifest["base"], 0);
  const std::string data = g + "/" + manifest["layout"]["files"][0]["path"].get<std::string>();
  std::string bytes = read_file(data);
  bytes[static_cast<size_t>(5 * plane_stride + 100)] ^= 1;
  write_file(data, bytes);
  const RunResult damaged = run_cli({"fsck", g, "--json"});
  EXPECT_EQ(damaged.exit_code, 4) << damaged;
  const json j = parse_one_json_object(damaged);
  ASSERT_EQ(j["damaged"].size(), 1u) << damaged;
  EXPECT_EQ(j["damaged"][0]["plane"], 5);
  EXPECT_EQ(j["damaged"][0]["file"], data);
  EXPECT_EQ(j["damaged"][0]["offset"], 5 * plane_stride);
  const RunResult text = run_cli({"fsck", g});
  EXPECT_EQ(text.exit_code, 4) << text;
  EXPECT_TRUE(
      contains(text.out, "plane 5 in " + data + " at offset " + std::to_string(5 * plane_stride)))
      << text;
}

// Exit code 3, one line naming the holder's pid, nothing changed.
void expect_busy(const RunResult& r, pid_t holder) {
  EXPECT_EQ(r.exit_code, 3) << r;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
  EXPECT_TRUE(contains(r.err, "pid " + std::to_string(holder))) << r;
}

TEST_F(CliTest, AWriterHoldsTheGridAloneUntilItEndsEvenByKill) {
  const std::string g = create("g", kShape, {"--init", "random:2"});
  const std::string npy = tmp_ / "g.npy";
  ASSERT_TRUE(Succeeded(run_cli({"export", g, npy})));
  const Snapshot before = snapshot(tmp_.path());
  deepgrid::testing::GridHolder writer(g, deepgrid::Grid::Mode::kReadWrite);
  ASSERT_TRUE(writer.held());
  expect_busy(run_cli(run_args(g)), writer.pid());
  expect_busy(run_cli({"checksum", g}), writer.pid());
  expect_busy(run_cli({"export", g, tmp_ / "other.npy"}), writer.pid());
  expect_busy(run_cli({"import", npy, g}), writer.pid());
  expect_busy(run_cli({"create", g, "--shape", "8x8x8"}), writer.pid());
  EXPECT_TRUE(snapshot(tmp_.path()) == before);
  writer.kill();  // as a crash would end it: the kernel releases the lock
  EXPECT_TRUE(Succeeded(run_cli(run_args(g))));
}

TEST_F(CliTest, ReadersShareTheGridButKeepWritersOut) {
  const std::string g = create("g", kShape, {"--init", "random:2"});
  deepgrid::testing::GridHolder reader(g, deepgrid::Grid::Mode::kReadOnly);
  ASSERT_TRUE(reader.held());
  EXPECT_TRUE(Succeeded(run_cli({"checksum", g})));
  EXPECT_TRUE(Succeeded(run_cli({"fsck", g})));
  EXPECT_TRUE(Succeeded(run_cli({"export", g, tmp_ / "g.npy"})));
  expect_busy(run_cli(run_args(g)), reader.pid());
}

}  // namespace

namespace deepgrid {
namespace {

// Starts the CLI with `args` (output discarded); -1 if it could not.
pid_t spawn_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {DEEPGRID_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// How a child ended (`status` from waitpid): its exit code, or 128 + the signal.
int ending(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return ending(status);
}

// Waits until the run in `dir` has recorded itself (DIR/run.json: it has planned and is about
// to advance); how the child ended if it ended first. Start-up (the process, the machine
// profile, the plan) can take any time on a loaded machine; from the record on, the run works.
std::optional<int> wait_for_run_record(pid_t pid, const std::string& dir) {
  const std::string record = dir + "/run.json";
  while (::access(record.c_str(), F_OK) != 0) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return ending(status);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return std::nullopt;
}

// Runs the CLI's `run` of `dir` with `args` and kills it with SIGKILL `delay` after the run
// recorded itself; returns how it ended: its exit code, or 128 + the signal.
int run_cli_killed_after(const std::vector<std::string>& args, const std::string& dir,
                         std::chrono::microseconds delay) {
  const pid_t pid = spawn_cli(args);
  if (pid < 0) return -1;
  if (const std::optional<int> ended = wait_for_run_record(pid, dir)) return *ended;
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  return wait_for(pid);
}

// How long the run of `dir` works once it has recorded itself, in microseconds (-1: it failed).
int64_t working_time(const std::vector<std::string>& args, const std::string& dir) {
  const pid_t pid = spawn_cli(args);
  if (pid < 0 || wait_for_run_record(pid, dir)) return -1;
  const auto t0 = std::chrono::steady_clock::now();
  if (wait_for(pid) != 0) return -1;
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

std::string sha256_of(const std::string& dir) {
  const RunResult r = run_cli({"checksum", dir, "--json"});
  EXPECT_TRUE(Succeeded(r));
  return json::parse(r.out).value("sha256", "");
}

// Whether the grid holds `step` with no run or sweep left unfinished.
bool finished_at(const std::string& dir, int64_t step) {
  const RunResult r = run_cli({"info", dir, "--json"});
  if (!Succeeded(r)) return false;
  const json info = json::parse(r.out);
  return info.value("step", int64_t{-1}) == step &&
         info.value("state", std::string()) == "consistent (the data hold this time step)";
}

// kill -9 at random moments of stream runs (periodic and neumann z, several sweeps), in-core
// runs, tiled runs and device runs, device-resident and three-tier (where there is an OpenCL
// device): `info` says what state the grid is in, and the same command again finishes the run
// bitwise as if it had never been interrupted.
TEST_F(CliTest, RunsKilledAtRandomMomentsFinishWithTheSameCommand) {
  struct Case {
    const char* name;
    std::vector<std::string> options;
    int trials;
  };
  std::vector<Case> cases = {
      {"periodic",
       {"--method", "stream", "--mem", "3MiB", "--bt", "4", "--boundary", "periodic"},
       9},
      {"neumann", {"--method", "stream", "--mem", "3MiB", "--bt", "5", "--boundary", "neumann"}, 9},
      {"incore", {"--method", "incore", "--boundary", "dirichlet:1"}, 6},
      {"tiled", {"--method", "tiled", "--mem", "2MiB", "--bt", "3"}, 4},
  };
  if (const auto devices = deepgrid::device::list_devices(); devices.ok() && !devices->empty()) {
    cases.push_back({"device", {"--device", "0", "--bt", "4", "--boundary", "neumann"}, 4});
    // Three tiers: the grid (9 MiB) fits neither budget and is swept in place from disk.
    cases.push_back({"three-tier",
                     {"--device", "0", "--mem", "3MiB", "--device-mem", "4MiB", "--bt", "4",
                      "--boundary", "periodic"},
                     4});
  }
  // Under a sanitizer every run starts and computes tens of times slower: the same cases with
  // a third of the kills check the same paths; the release stage gathers the statistics.
  const int divisor = testing::kUnderSanitizer ? 3 : 1;
  std::mt19937 rng(20261123);
  int killed = 0;
  for (Case& c : cases) c.trials = (c.trials + divisor - 1) / divisor;
  for (const Case& c : cases) {
    auto command = [&](const std::string& dir) {
      std::vector<std::string> args = {"run", dir, "--stencil", "7pt", "--steps", "22"};
      args.insert(args.end(), c.options.begin(), c.options.end());
      return args;
    };
    const std::string ref =
        create(std::string(c.name) + "-ref", "96x80x300", {"--init", "random:7"});
    // Kills land at random moments of the work, after start-up. A run that ends before its
    // kill (the machine ran faster than during the reference) narrows the window, and another
    // trial takes its place, so that how busy the machine is does not decide how many land.
    const int64_t work_us = working_time(command(ref), ref);
    ASSERT_GT(work_us, 0) << "the uninterrupted " << c.name << " run failed";
    const std::string expected = sha256_of(ref);
    int64_t window_us = work_us * 4 / 5;
    int missed = 0;
    for (int trial = 0; trial < c.trials + missed; ++trial) {
      std::string name = c.name;
      name += std::to_string(trial);
      const std::string dir = create(name, "96x80x300", {"--init", "random:7"});
      const std::chrono::microseconds delay(
          std::uniform_int_distribution<int64_t>(0, window_us)(rng));
      SCOPED_TRACE(std::string(c.name) + " killed " + std::to_string(delay.count()) +
                   " us into its work");
      const int how = run_cli_killed_after(command(dir), dir, delay);
      ASSERT_TRUE(how == 0 || how == 128 + SIGKILL) << how;
      const RunResult info = run_cli({"info", dir});
      ASSERT_TRUE(Succeeded(info));
      // A kill can also land after the run has committed its last step, while the process
      // exits (under AddressSanitizer its leak check makes that moment long): the grid then
      // holds step 22 and nothing is unfinished, and the same command again would be a new run.
      const bool ended = how == 0 || finished_at(dir, 22);
      if (ended) {
        EXPECT_TRUE(contains(info.out, "consistent (the data hold")) << info;
        window_us /= 2;
        missed += missed < c.trials ? 1 : 0;
      } else {
        ++killed;
        if (contains(info.out, "INTERRUPTED")) {  // mid-sweep: readers refuse the mixed planes
          const RunResult read = run_cli({"checksum", dir});
          EXPECT_EQ(read.exit_code, 2) << read;
          EXPECT_TRUE(contains(read.err, "--resume")) << read;
        }
        const RunResult again = run_cli(command(dir));
        ASSERT_TRUE(Succeeded(again)) << info << again;
      }
      EXPECT_EQ(sha256_of(dir), expected) << info;
    }
  }
  EXPECT_GE(killed, 20 / divisor) << "most kills should land while the runs are under way";
}

}  // namespace
}  // namespace deepgrid
