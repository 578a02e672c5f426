// The machine profile: measured rates are positive, cached per machine after the first
// measurement, remeasured on request, and a damaged cache is measured over; the tiles' tuned
// working set likewise. The report's account of CPU time a hypervisor took.
#include "deepgrid/machine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/process_stats.h"
#include "deepgrid/report.h"
#include "plan/machine_cache.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

// Each test has a cache of its own. It starts with the tiles' working set already tuned (what
// tuned_cache_bytes() cached for one thread in the suite's shared cache, ctest's
// DEEPGRID_CACHE_DIR, tuned there once): that tuning took 3.5 s of each measurement's 4.3 on a
// 2-core VM, twice that beside other tests, and most tests here are about the rest of the
// profile. MachineTuningTest starts empty, for the tests of the tunings; so does a test run
// without DEEPGRID_CACHE_DIR (never tuned in the user's home).
class MachineProfileTest : public ::testing::Test {
 public:
  static constexpr int64_t kGridWidth = 64;  // the planes of the test's grid

 protected:
  void SetUp() override { start(/*tiles_tuned=*/true); }

  void start(bool tiles_tuned) {
    // (read before the first test set its own: all may run in one process)
    static const char* const env = std::getenv("DEEPGRID_CACHE_DIR");
    static const std::string shared = env != nullptr ? env : "";
    if (tiles_tuned && !shared.empty()) tiles_ = shared_tile_tuning(shared);
    ::setenv("DEEPGRID_CACHE_DIR", (tmp_.path() / "cache").c_str(), 1);
    forget_measurements();
    CreateOptions co;
    co.shape = {kGridWidth, 48, 40};
    co.init = *parse_init("random:1");
    ASSERT_TRUE(Grid::create((tmp_.path() / "g").string(), co).ok());
  }

  // The cache as the test started: the tiles' tuning only, or no file.
  void forget_measurements() {
    std::filesystem::remove(machine_cache_path());
    std::filesystem::create_directories(tmp_.path() / "cache");
    if (tiles_ > 0) write_profile({{"wavefront_cache_bytes", {{"1t", tiles_}}}});
  }

  // This machine's profile in the cache file, and writing it as the file's only one.
  static nlohmann::json cached_profile() {
    return nlohmann::json::parse(std::ifstream(machine_cache_path()))[machine_identity()];
  }
  static void write_profile(const nlohmann::json& mine) {
    std::ofstream(machine_cache_path()) << nlohmann::json{{machine_identity(), mine}}.dump();
  }

  Result<MachineProfile> profile(bool remeasure = false) {
    const Grid g = Grid::open((tmp_.path() / "g").string()).value();
    return machine_profile(g, Stencil::preset("7pt").value(), 1, remeasure);
  }

  testing::TempDir tmp_;

 private:
  // The tuning cached in `dir` (the environment's cache directory), tuned there first if
  // missing, one test at a time (the tests ctest starts together would each tune it).
  static int64_t shared_tile_tuning(const std::string& dir) {
    ::setenv("DEEPGRID_CACHE_DIR", dir.c_str(), 1);
    std::filesystem::create_directories(dir);
    const int lock =
        ::open((dir + "/machine-test.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    const Result<int64_t> tuned = tuned_cache_bytes(kGridWidth, 1);
    if (lock >= 0) ::close(lock);
    EXPECT_TRUE(tuned.ok()) << tuned.status().message();
    return tuned.ok() ? *tuned : 0;
  }

  int64_t tiles_ = 0;  // the tiles' tuning the test's cache starts with (0: none)
};

// The tests of the tunings themselves: their cache starts empty.
class MachineTuningTest : public MachineProfileTest {
 protected:
  void SetUp() override { start(/*tiles_tuned=*/false); }
};

TEST_F(MachineProfileTest, MeasuresOnceThenReadsTheCache) {
  EXPECT_EQ(machine_cache_path(), (tmp_.path() / "cache" / "machine.json").string());
  const MachineProfile first = profile().value();
  EXPECT_FALSE(first.cached);
  EXPECT_GT(first.compute_mlups, 0);
  EXPECT_GT(first.disk_read_bps, 0);

  const nlohmann::json cache = cached_profile();
  EXPECT_EQ(cache["compute_mlups"].size(), 1u);
  EXPECT_EQ(cache["disk_read_bytes_per_second"].size(), 1u);
  EXPECT_GE(first.io_cpu_seconds_per_byte, 0);
  EXPECT_EQ(cache["io_cpu_seconds_per_byte"].size(), 1u);

  const MachineProfile second = profile().value();
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.compute_mlups, first.compute_mlups);
  EXPECT_EQ(second.disk_read_bps, first.disk_read_bps);
  EXPECT_EQ(second.io_cpu_seconds_per_byte, first.io_cpu_seconds_per_byte);

  EXPECT_FALSE(profile(/*remeasure=*/true).value().cached);
}

// Where the in-core engine runs a scheme otherwise than the stream's stages do (wave8: its time
// levels turning at bt 1, or blocked as deep as tuned_bt measured), its rate is measured apart
// from the stages' (which never turn them), cached under a key of its own with that depth, and
// read back; schemes it runs as the stages do (7pt, wave2) measure one rate. (In-core wave runs
// were predicted at the stages' rate, 1.4x slower than they ran on a Xeon VM.)
TEST_F(MachineProfileTest, WavesMeasureTheInCoreRateAtTheirOwnDepth) {
  const Grid g = Grid::open((tmp_.path() / "g").string()).value();
  const Scheme wave8 = Scheme::preset("wave8").value();
  const MachineProfile measured = machine_profile(g, wave8, 1).value();
  EXPECT_GT(measured.tuned_bt, 0);
  EXPECT_GT(measured.compute_mlups, 0);
  // The depth planted in the cache: 1 turns the time levels, 3 blocks deeper than the stages'
  // rules (8 / r = 2 levels) do (and is no deeper than the sanitizer builds' 3-step samples).
  for (const int planted : {1, 3}) {
    nlohmann::json cache = cached_profile();
    ASSERT_EQ(cache["incore_bt"].size(), 1u) << cache.dump();
    for (auto& [key, value] : cache["incore_bt"].items()) value = planted;
    write_profile(cache);
    const MachineProfile p = machine_profile(g, wave8, 1).value();
    EXPECT_EQ(p.tuned_bt, planted);
    EXPECT_GT(p.incore_mlups, 0) << planted;
    EXPECT_EQ(p.incore_rate(), p.incore_mlups) << planted;
    // The keys of in-core rates end in "/incore-bt<depth>" and the build.
    int keys = 0;
    const nlohmann::json rates = cached_profile()["compute_mlups"];
    for (const auto& [key, value] : rates.items()) {
      const size_t at = key.find("/incore-bt");
      if (at == std::string::npos || std::atoi(key.c_str() + at + 10) != planted) continue;
      ++keys;
      EXPECT_EQ(key.rfind("wave8:", 0), 0u) << key;
      EXPECT_EQ(value.get<double>(), p.incore_mlups) << key;
    }
    EXPECT_EQ(keys, 1) << rates.dump();
    const MachineProfile again = machine_profile(g, wave8, 1).value();
    EXPECT_TRUE(again.cached) << planted;
    EXPECT_EQ(again.incore_mlups, p.incore_mlups) << planted;
  }

  for (const char* name : {"wave2", "7pt"}) {
    const Scheme scheme = std::string(name) == "7pt" ? Scheme(Stencil::preset(name).value())
                                                     : Scheme::preset(name).value();
    const MachineProfile p = machine_profile(g, scheme, 1).value();
    EXPECT_EQ(p.tuned_bt, 0) << name;
    EXPECT_EQ(p.incore_mlups, 0) << name;
    EXPECT_EQ(p.incore_rate(), p.compute_mlups) << name;
  }
}

// The plane width the depth tunings below are asked for: their sample is then 64x256x64, a
// quarter of 256-wide planes' (with 256, the first test below took 14-16 s on a 2-core VM; 4 s).
constexpr int64_t kWidth = 64;

// The depth of the wave equations of radius 2 and more is measured once (bt 1 turning their time
// levels, and the deeper candidates within a reach of 24 planes: up to bt 6 for radius 4) and
// cached per scheme, dtype, width, threads and working set; a budget that no candidate fits
// measures and caches nothing; other schemes are left to the engine's rules.
TEST_F(MachineTuningTest, TunesTheDepthOfWavesOnceAndCachesIt) {
  const Scheme wave8 = Scheme::preset("wave8").value();
  EXPECT_EQ(tuned_bt(wave8, DType::kF32, kWidth, 1, 0, false, 1 << 20).value(), 0)
      << "no sample fits 512 KiB";
  EXPECT_FALSE(std::ifstream(machine_cache_path())) << "nothing measured, nothing cached";

  const int bt = tuned_bt(wave8, DType::kF32, kWidth, 1, 0).value();
  EXPECT_TRUE(bt == 1 || bt == 2 || bt == 3 || bt == 4 || bt == 6) << bt;
  nlohmann::json cache = cached_profile();
  ASSERT_EQ(cache["incore_bt"].size(), 1u) << cache.dump();
  EXPECT_EQ(cache["incore_bt"].begin()->get<int>(), bt);

  for (auto& [key, value] : cache["incore_bt"].items()) value = 5;  // only the cache gives 5
  write_profile(cache);
  EXPECT_EQ(tuned_bt(wave8, DType::kF32, kWidth, 1, 0).value(), 5);
  // Other builds' depths go once the section holds more than its cap, as compute rates do.
  const std::string key = cache["incore_bt"].begin().key();
  const std::string unbuilt = key.substr(0, key.rfind('@'));
  for (int b = 0; b < 300; ++b) cache["incore_bt"][unbuilt + "@older" + std::to_string(b)] = 2;
  write_profile(cache);
  EXPECT_NE(tuned_bt(wave8, DType::kF32, kWidth, 1, 0, /*remeasure=*/true).value(), 5);
  if (!code_build_id().empty()) {
    const nlohmann::json depths = cached_profile()["incore_bt"];
    EXPECT_EQ(depths.size(), 1u) << depths.dump();
    EXPECT_TRUE(depths.contains(key));
  }

  for (const char* name : {"wave2", "heat-var"}) {
    EXPECT_EQ(tuned_bt(Scheme::preset(name).value(), DType::kF32, kWidth, 1, 0).value(), 0) << name;
  }
  EXPECT_EQ(tuned_bt(Scheme(Stencil::preset("7pt").value()), DType::kF32, kWidth, 1, 0).value(), 0);
  EXPECT_EQ(cached_profile()["incore_bt"].size(), 1u) << "nothing cached for them";
}

// A budget that fits some of the candidate depths but not all: the best of those is cached
// under a key that names them, and read there by the next run within such a budget instead of
// timed again; a tuning of every candidate, once cached, serves every budget.
TEST_F(MachineTuningTest, DepthsTunedWithinABudgetAreCachedForIt) {
  const Scheme wave8 = Scheme::preset("wave8").value();
  uint64_t budget = 0;  // the smallest (of these) that fits one depth or more
  for (uint64_t b = 1 << 20; b <= (uint64_t{1} << 32) && budget == 0; b += b / 4) {
    if (tuned_bt(wave8, DType::kF32, kWidth, 1, 0, false, b).value() > 0) budget = b;
  }
  ASSERT_NE(budget, 0u);
  nlohmann::json cache = cached_profile();
  ASSERT_EQ(cache["incore_bt"].size(), 1u) << cache.dump();
  const std::string key = cache["incore_bt"].begin().key();
  EXPECT_NE(key.find(" B/of 1"), std::string::npos) << key << ": names the depths timed";
  EXPECT_EQ(key.find(",6"), std::string::npos) << key << ": the deepest did not fit";

  cache["incore_bt"][key] = 5;  // a value only the cache can give
  write_profile(cache);
  EXPECT_EQ(tuned_bt(wave8, DType::kF32, kWidth, 1, 0, false, budget).value(), 5)
      << "the budget's tuning is read, not timed again";
  const int full = tuned_bt(wave8, DType::kF32, kWidth, 1, 0).value();
  EXPECT_EQ(cached_profile()["incore_bt"].size(), 2u);
  EXPECT_EQ(tuned_bt(wave8, DType::kF32, kWidth, 1, 0, false, budget).value(), full)
      << "a tuning of every depth serves every budget";
}

// Compute rates are measured with the kernels of one build and cached under it: another
// build's rate for the same sample (here a planted 1 MLUP/s) does not stand in for this one's,
// and once the section holds more than its cap the other builds' rates go. (A wave8 rate cached
// before the fused kernels, 323 MLUP/s, stood for 743 on a Xeon VM.)
TEST_F(MachineProfileTest, ComputeRatesAreThoseOfThisBuild) {
  if (code_build_id().empty()) GTEST_SKIP() << "this toolchain links without --build-id";
  ASSERT_TRUE(profile().ok());
  nlohmann::json mine = cached_profile();
  ASSERT_EQ(mine["compute_mlups"].size(), 1u);
  const std::string key = mine["compute_mlups"].begin().key();
  const size_t at = key.rfind('@');
  ASSERT_NE(at, std::string::npos) << key;
  EXPECT_EQ(key.substr(at + 1), code_build_id().substr(0, 16));
  const double own = mine["compute_mlups"][key].get<double>();
  nlohmann::json older = nlohmann::json::object();
  older[key.substr(0, at)] = 1.0;  // as a build before build keys cached it
  for (int b = 0; b < 300; ++b) older[key.substr(0, at) + "@older" + std::to_string(b)] = 1.0;
  mine["compute_mlups"] = older;
  write_profile(mine);
  const MachineProfile p = profile().value();
  EXPECT_GT(p.compute_mlups, 1.0) << "measured again, not another build's rate";
  EXPECT_GT(own, 1.0);
  const nlohmann::json after = cached_profile()["compute_mlups"];
  EXPECT_EQ(after.size(), 1u) << after.dump();
  EXPECT_TRUE(after.contains(key));
}

// Processes measure at the same time (tests, ranks, runs side by side) and each caches what it
// measured: none drops what another cached meanwhile. (A profile read before seconds of
// measuring and written whole after them dropped the device's rates another had cached.)
TEST_F(MachineProfileTest, NumbersCachedAtTheSameTimeAreAllKept) {
  ASSERT_TRUE(profile().ok());
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([t] {
      for (int i = 0; i < 10; ++i) {
        internal::cache_machine_number("test_section", std::to_string(t) + "/" + std::to_string(i),
                                       t * 10 + i);
      }
    });
  }
  for (std::thread& w : writers) w.join();
  for (int t = 0; t < 8; ++t) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(internal::cached_machine_number("test_section",
                                                std::to_string(t) + "/" + std::to_string(i)),
                t * 10 + i)
          << "writer " << t << ", number " << i;
    }
  }
  EXPECT_TRUE(profile().value().cached) << "the profile measured first is still there";
}

TEST_F(MachineProfileTest, TheCpuCostOfIoIsCachedPerDiskAndMeasuredWhereMissing) {
  ASSERT_TRUE(profile().ok());
  nlohmann::json cache = cached_profile();
  ASSERT_EQ(cache["io_cpu_seconds_per_byte"].size(), 1u);
  const std::string disk = cache["io_cpu_seconds_per_byte"].begin().key();
  cache["io_cpu_seconds_per_byte"][disk] = 1.5e-9;  // a value only the cache can give
  write_profile(cache);
  MachineProfile p = profile().value();
  EXPECT_TRUE(p.cached);
  EXPECT_EQ(p.io_cpu_seconds_per_byte, 1.5e-9);

  cache.erase("io_cpu_seconds_per_byte");  // a cache written before the cost was measured
  write_profile(cache);
  p = profile().value();
  EXPECT_FALSE(p.cached);
  EXPECT_NE(p.io_cpu_seconds_per_byte, 1.5e-9);
  cache = cached_profile();
  EXPECT_EQ(cache["io_cpu_seconds_per_byte"][disk].get<double>(), p.io_cpu_seconds_per_byte);
}

TEST_F(MachineProfileTest, TheCpuCostOfIoIsLeftUnknownWhereTheLoadDoesNotFitTheBudget) {
  const Grid g = Grid::open((tmp_.path() / "g").string()).value();
  const MachineProfile p =
      machine_profile(g, Stencil::preset("7pt").value(), 1, false, 32 << 20).value();
  EXPECT_EQ(p.io_cpu_seconds_per_byte, 0);
  const nlohmann::json cache = cached_profile();
  EXPECT_FALSE(cache.contains("io_cpu_seconds_per_byte")) << cache.dump();
  EXPECT_FALSE(profile().value().cached) << "measured once the budget allows";
  EXPECT_TRUE(profile().value().cached);
}

// Under a small budget the compute sample is cut short (16 planes, a lower rate) and the disk
// is read with fewer planes in flight: neither figure may be cached as the full one, which any
// later run, whatever its budget, would read.
TEST_F(MachineProfileTest, RatesABudgetCutShortDoNotStandInForFullOnes) {
  const Grid g = Grid::open((tmp_.path() / "g").string()).value();  // 64x48x40
  const Scheme s7(Stencil::preset("7pt").value());
  auto cached_keys = [] {
    std::vector<std::string> keys;
    const nlohmann::json cache = cached_profile();
    for (const auto& [key, value] : cache["compute_mlups"].items()) keys.push_back(key);
    return keys;
  };
  uint64_t cut_short = 0;  // the smallest budget that fits the 16-plane sample
  for (uint64_t budget = 256 << 10; budget <= (64u << 20) && cut_short == 0; budget += budget / 8) {
    forget_measurements();
    const MachineProfile p = machine_profile(g, s7, 1, false, budget).value();
    if (p.compute_mlups > 0) cut_short = budget;
  }
  ASSERT_NE(cut_short, 0u);
  std::string build = code_build_id().substr(0, 16);  // keys end with the build's
  if (!build.empty()) build.insert(build.begin(), '@');
  ASSERT_EQ(cached_keys(), std::vector<std::string>{"7pt:7/f32/1t/64x48x16" + build})
      << "the smallest budget with a compute rate measures the 16-plane sample";

  const MachineProfile full = profile().value();
  EXPECT_FALSE(full.cached) << "the cut-short rate did not stand in for the full one";
  EXPECT_EQ(cached_keys(), (std::vector<std::string>{"7pt:7/f32/1t/64x48x16" + build,
                                                     "7pt:7/f32/1t/64x48x40" + build}));
  const MachineProfile again = machine_profile(g, s7, 1, false, cut_short).value();
  EXPECT_EQ(again.compute_mlups, full.compute_mlups) << "the full rate serves every budget";

  // Fewer reads in flight: cached under a key of their own, which serves the next run within
  // such a budget, but not a full measurement.
  forget_measurements();
  const MachineProfile shallow = machine_profile(g, s7, 1, false, 128 << 10).value();
  EXPECT_GT(shallow.disk_read_bps, 0) << "measured with 5 of 8 reads in flight, for this run";
  EXPECT_EQ(shallow.disk_reads_in_flight, 5);
  nlohmann::json cache = cached_profile();
  ASSERT_EQ(cache["disk_read_bytes_per_second"].size(), 1u) << cache.dump();
  const std::string shallow_key = cache["disk_read_bytes_per_second"].begin().key();
  EXPECT_TRUE(shallow_key.ends_with("/5 in flight")) << shallow_key;
  cache["disk_read_bytes_per_second"][shallow_key] = 123.0;  // a value only the cache gives
  write_profile(cache);
  EXPECT_EQ(machine_profile(g, s7, 1, false, 128 << 10).value().disk_read_bps, 123.0);
  EXPECT_FALSE(profile().value().cached);
  EXPECT_TRUE(profile().value().cached);
  const MachineProfile served = machine_profile(g, s7, 1, false, 128 << 10).value();
  EXPECT_NE(served.disk_read_bps, 123.0) << "a full measurement serves every budget";
  EXPECT_EQ(served.disk_reads_in_flight, 8);
}

// A budget too small for any compute sample takes the rate this build cached for the largest
// sample of the grid's plane width (which a run with more memory measured), not one of another
// width or the in-core engine's own, instead of leaving the rate unknown.
TEST_F(MachineProfileTest, BudgetsTooSmallForASampleTakeTheLargestCachedOne) {
  const Grid g = Grid::open((tmp_.path() / "g").string()).value();  // 64x48x40
  const Scheme s7(Stencil::preset("7pt").value());
  constexpr uint64_t kTiny = 128 << 10;
  EXPECT_EQ(machine_profile(g, s7, 1, false, kTiny).value().compute_mlups, 0)
      << "nothing cached: no rate";
  std::string build = code_build_id().substr(0, 16);
  if (!build.empty()) build.insert(build.begin(), '@');
  nlohmann::json cache = cached_profile();
  cache["compute_mlups"] = {{"7pt:7/f32/1t/64x48x16" + build, 7.0},
                            {"7pt:7/f32/1t/64x24x16" + build, 5.0},
                            {"7pt:7/f32/1t/128x48x40" + build, 3.0},
                            {"7pt:7/f32/1t/64x48x40/incore-bt1" + build, 9.0},
                            {"7pt:7/f32/1t/64x48x40@another-build", 11.0}};
  write_profile(cache);
  EXPECT_EQ(machine_profile(g, s7, 1, false, kTiny).value().compute_mlups, 7.0);
}

// One cache file serves machines that share a home directory: each measures its own profile,
// and none overwrites another's; a virtual machine moved to other CPUs under its old host name
// has another identity too.
TEST_F(MachineProfileTest, EachMachineHasItsOwnProfile) {
  const std::string me = machine_identity();
  EXPECT_NE(me.find(", "), std::string::npos) << me;
  ASSERT_TRUE(profile().ok());
  nlohmann::json file = nlohmann::json::parse(std::ifstream(machine_cache_path()));
  ASSERT_EQ(file.size(), 1u);
  ASSERT_TRUE(file.contains(me));
  nlohmann::json other = file[me];
  other["compute_mlups"].begin().value() = 1.0;  // values only that machine's profile holds
  other["wavefront_cache_bytes"]["1t"] = 12345;
  const nlohmann::json elsewhere = {{"node7, Other CPU, 64 CPUs", other}};
  std::ofstream(machine_cache_path()) << elsewhere.dump();

  const MachineProfile p = profile().value();
  EXPECT_FALSE(p.cached) << "another machine's profile does not serve this one";
  EXPECT_NE(p.compute_mlups, 1.0);
  EXPECT_NE(p.cache_bytes, 12345);
  file = nlohmann::json::parse(std::ifstream(machine_cache_path()));
  EXPECT_EQ(file.size(), 2u);
  EXPECT_EQ(file["node7, Other CPU, 64 CPUs"], other) << "the other machine's profile is kept";
  EXPECT_TRUE(profile().value().cached);

  std::ofstream(machine_cache_path()) << other.dump();  // the format before, one profile
  EXPECT_FALSE(profile().value().cached);
  file = nlohmann::json::parse(std::ifstream(machine_cache_path()));
  EXPECT_EQ(file.size(), 1u) << "the old format's sections are dropped: " << file.dump();
  EXPECT_TRUE(file.contains(me));
}

// What sweeps sustained on the grid's disks serves later plans, each sweep's averaged with the
// figure before, until a --remeasure; a sweep that kept the disks busy under a second says too
// little to record.
TEST_F(MachineProfileTest, SweepsTellTheirDiskBandwidthUntilARemeasure) {
  const Grid g = Grid::open((tmp_.path() / "g").string()).value();
  EXPECT_EQ(profile().value().disk_sweep_bps, 0) << "no sweep has run";
  record_sweep_bandwidth(g, 3e9, 1.5);
  EXPECT_DOUBLE_EQ(profile().value().disk_sweep_bps, 2e9);
  record_sweep_bandwidth(g, 1e9, 0.5);
  EXPECT_DOUBLE_EQ(profile().value().disk_sweep_bps, 2e9) << "half a second of disk time";
  record_sweep_bandwidth(g, 4e9, 1);
  EXPECT_DOUBLE_EQ(profile().value().disk_sweep_bps, 3e9) << "the mean of the two sweeps'";
  EXPECT_EQ(profile(/*remeasure=*/true).value().disk_sweep_bps, 0);
  EXPECT_EQ(profile().value().disk_sweep_bps, 0) << "the remeasure dropped it from the cache";
  const int64_t busy = grid_disks_busy_ms(g);
  if (busy < 0) GTEST_SKIP() << "the test directory is not on a block device (tmpfs, overlay)";
  EXPECT_EQ(busy, device_busy_ms(g.file_path(0)));
}

// What an in-core run took besides its steps serves later plans per byte of the grid, averaged
// with the figure before, until a --remeasure; a grid under 256 MiB is not recorded (its memory
// comes faster than a large one's).
TEST_F(MachineProfileTest, InCoreRunsTellTheirLoadAndStoreUntilARemeasure) {
  const Grid g = Grid::open((tmp_.path() / "g").string()).value();
  const double bytes = static_cast<double>(g.shape().nz * g.manifest().layout.plane_stride);
  ASSERT_LT(bytes, 256 << 20);
  record_incore_load_store(g, 2.0);
  EXPECT_EQ(profile().value().incore_load_store_seconds_per_byte, 0) << "a small grid";
  CreateOptions co;  // 1 GiB of zeros on the same disk (allocated, not written)
  co.shape = {1024, 1024, 256};
  const Grid large = Grid::create((tmp_.path() / "large").string(), co).value();
  record_incore_load_store(large, 6.0);
  EXPECT_DOUBLE_EQ(profile().value().incore_load_store_seconds_per_byte, 6.0 / (1 << 30));
  record_incore_load_store(large, 2.0);
  EXPECT_DOUBLE_EQ(profile().value().incore_load_store_seconds_per_byte, 4.0 / (1 << 30))
      << "the mean of the two runs'";
  EXPECT_EQ(profile(/*remeasure=*/true).value().incore_load_store_seconds_per_byte, 0);
  EXPECT_EQ(profile().value().incore_load_store_seconds_per_byte, 0) << "dropped by the remeasure";
}

TEST_F(MachineProfileTest, ADamagedCacheIsMeasuredOver) {
  ASSERT_TRUE(profile().ok());
  std::ofstream(machine_cache_path()) << "{ not json";
  const MachineProfile p = profile().value();
  EXPECT_FALSE(p.cached);
  EXPECT_GT(p.compute_mlups, 0);
  EXPECT_TRUE(profile().value().cached) << "the cache was rewritten";
}

TEST_F(MachineTuningTest, TunesTheTilesWorkingSetOnceAndCachesIt) {
  const int64_t candidates[] = {int64_t{3} << 17, int64_t{3} << 18, int64_t{3} << 19,
                                int64_t{3} << 20, int64_t{6} << 20};
  EXPECT_EQ(tuned_cache_bytes(kGridWidth, 1, false, 1 << 20).value(), 0)
      << "no sample fits 512 KiB";
  EXPECT_FALSE(std::ifstream(machine_cache_path())) << "nothing measured, nothing cached";

  const int64_t tuned = tuned_cache_bytes(kGridWidth, 1).value();
  EXPECT_NE(std::find(std::begin(candidates), std::end(candidates), tuned), std::end(candidates))
      << tuned;
  nlohmann::json cache = cached_profile();
  EXPECT_EQ(cache["wavefront_cache_bytes"]["1t"].get<int64_t>(), tuned);

  cache["wavefront_cache_bytes"]["1t"] = 12345;  // values only the cache can give
  cache["wavefront_cache_bytes"]["1t/1024 wide"] = 23456;
  write_profile(cache);
  EXPECT_EQ(tuned_cache_bytes(kGridWidth, 1).value(), 12345);
  EXPECT_EQ(tuned_cache_bytes(512, 1).value(), 12345) << "up to 512 wide: one tuning";
  EXPECT_EQ(tuned_cache_bytes(0, 1).value(), 12345) << "a width not known";
  EXPECT_EQ(tuned_cache_bytes(513, 1).value(), 23456) << "wider planes: a tuning of their own";
  EXPECT_EQ(tuned_cache_bytes(1024, 1).value(), 23456);
  EXPECT_EQ(tuned_cache_bytes(2048, 1, false, 1 << 20).value(), 0)
      << "no wide sample fits 512 KiB: the engines' default, not the 512-wide planes' tuning";
  EXPECT_EQ(profile().value().cache_bytes, 12345) << "the profile carries the tuning";
  EXPECT_NE(tuned_cache_bytes(kGridWidth, 1, /*remeasure=*/true).value(), 12345);
  EXPECT_EQ(cached_profile()["wavefront_cache_bytes"]["1t/1024 wide"].get<int64_t>(), 23456)
      << "a remeasure of one width leaves the others' tunings";
}

TEST(StolenCpu, ReadsTheStealFieldOfTheCpuLine) {
  const char* stat =
      "cpu  2435794 0 514279 1138834 115521 0 13616 53156 0 0\n"
      "cpu0 1217897 0 257139 569417 57760 0 6808 26578 0 0\n"
      "intr 1 2 3\n";
  EXPECT_DOUBLE_EQ(stolen_cpu_seconds(stat, 100), 531.56);
  EXPECT_DOUBLE_EQ(stolen_cpu_seconds(stat, 1000), 53.156);
  EXPECT_EQ(stolen_cpu_seconds("cpu  1 2 3 4 5 6 7\n", 100), 0);  // a kernel without steal
  EXPECT_EQ(stolen_cpu_seconds("cpu0 1 2 3 4 5 6 7 8\n", 100), 0);
  EXPECT_EQ(stolen_cpu_seconds("", 100), 0);
  const double now = stolen_cpu_seconds();
  EXPECT_GE(now, 0);
  EXPECT_GE(stolen_cpu_seconds(), now);  // a counter since boot
}

TEST(StolenCpu, TheReportNamesTheHypervisorOnlyWhenItTookAShare) {
  RunReport r;
  r.seconds = 10;
  r.cpus = 2;
  r.stolen_cpu_seconds = 4;
  EXPECT_DOUBLE_EQ(r.stolen_share(), 0.2);
  EXPECT_NE(r.to_text().find("hypervisor  took 4.000 s of CPU time (20% of 2 CPUs"),
            std::string::npos)
      << r.to_text();
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.to_json())["stolen_cpu_seconds"].get<double>(), 4);
  r.stolen_cpu_seconds = 0.1;  // 0.5%
  EXPECT_EQ(r.to_text().find("hypervisor"), std::string::npos) << r.to_text();
}

}  // namespace
}  // namespace deepgrid
