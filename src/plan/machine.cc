#include "deepgrid/machine.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "core/process_stats.h"
#include "core/stopwatch.h"
#include "deepgrid/plane_transfer.h"
#include "plan/incore_bench.h"
#include "plan/machine_cache.h"

namespace deepgrid {
namespace {

using nlohmann::json;

constexpr char kCacheName[] = "machine.json";
constexpr char kIoCostSection[] = "io_cpu_seconds_per_byte";
constexpr char kSweepSection[] = "disk_sweep_bytes_per_second";
constexpr char kLoadStoreSection[] = "incore_load_store_seconds_per_byte";
constexpr char kDepthSection[] = "incore_bt";

using internal::seconds_since;

// The work of each timing. Sanitizer builds (DEEPGRID_SANITIZED) run the engines tens to
// hundreds of times slower and their rates mean nothing: they time every candidate once, over
// a quarter of the steps and of the tuning sample's rows and planes, so that a first run there
// (every test that measures a machine) takes seconds instead of a minute, along the same paths.
#ifdef DEEPGRID_SANITIZED
constexpr int64_t kStepsDivisor = 4;
constexpr int64_t kTuningRows = 64;
constexpr int64_t kTuningPlanes = 16;
constexpr int kTimingRepeats = 1;
#else
constexpr int64_t kStepsDivisor = 1;
constexpr int64_t kTuningRows = 256;
// The tuning sample's planes: a wavefront of bt 8 fills and drains over 8 of them, a quarter of
// 32 (by arithmetic), which weighed against the deeper plans of larger working sets; with 32, one
// candidate's timings ranged over 1298-1855 MLUP/s on a Xeon VM, with 64 over 1913-2321.
constexpr int64_t kTuningPlanes = 64;
// Best of three: the tiles' candidates differ by a few %, and the profile's one timing of the
// compute sample (a twentieth of a second) gave 1873 MLUP/s on a Xeon VM where bench's best of
// three on the same shape gave 2039 (not side by side).
constexpr int kTimingRepeats = 3;
#endif
constexpr int64_t kComputeSteps = 12 / kStepsDivisor;
constexpr int64_t kTuningSteps = 32 / kStepsDivisor;
// tuned_bt()'s runs: a multiple of every candidate depth.
constexpr int64_t kDepthSteps = 24 / kStepsDivisor;
constexpr int kDepthCandidates[] = {1, 2, 3, 4, 6, 8};
constexpr int kDepthReach = 24;  // the deepest halo tried, in planes (radius * bt)

// How many planes measure_read_bandwidth() keeps in flight: as many as the stream engine,
// fewer when their buffers do not fit half the budget.
int64_t read_depth(const Grid& grid, uint64_t mem_budget) {
  const int64_t stride = grid.manifest().layout.plane_buffer_bytes();
  return mem_budget == 0 ? int64_t{io::kPlanesInFlight}
                         : std::clamp<int64_t>(static_cast<int64_t>(mem_budget / 2) / stride, 1,
                                               io::kPlanesInFlight);
}

// Reads planes [0, planes) of the grid as the stream engine does (O_DIRECT, read_depth() in
// flight); returns bytes per second.
Result<double> measure_read_bandwidth(const Grid& grid, int64_t planes, uint64_t mem_budget) {
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(io::read_plane_range(
      grid, 0, planes, [](int64_t, const void*) { return Status::Ok(); },
      static_cast<unsigned>(read_depth(grid, mem_budget))));
  return static_cast<double>(planes * grid.manifest().layout.plane_buffer_bytes()) /
         std::max(seconds_since(t0), 1e-9);
}

// The options of the samples measured: the stream's stages' tiling, without the time levels
// that take turns in the in-core engine at bt 1 (the stream does not turn them; in-core wave
// runs then go faster than the plan's prediction says).
InCoreOptions compute_options(int threads, int64_t cache_bytes) {
  InCoreOptions opt;
  opt.threads = threads;
  opt.turn_time_levels = false;
  if (cache_bytes > 0) opt.cache_bytes = cache_bytes;
  return opt;
}

// Whether the in-core engine runs `sample` with `opt` within half the budget (0: no limit), so
// that a run's first measurement keeps its memory promise.
bool sample_fits(const Grid& grid, const Scheme& stencil, const InCoreOptions& opt,
                 const Shape& sample, uint64_t mem_budget) {
  return mem_budget == 0 ||
         static_cast<uint64_t>(dispatch_dtype(grid.dtype(), [&](auto tag) {
           return InCoreEngine<decltype(tag)>::memory_bytes(sample, stencil, kComputeSteps, opt);
         })) <= mem_budget / 2;
}

// The in-core engine's own options for the samples: the stages' (compute_options), but with
// the time levels taking turns where its plan turns them, and its tuned depth.
InCoreOptions incore_options(InCoreOptions stages, int tuned_bt) {
  stages.turn_time_levels = true;
  stages.tuned_bt = tuned_bt;
  return stages;
}

// The depth of the in-core engine's plan for `sample` where it runs it otherwise than the
// stream's stages do, else 0: its plan turns the time levels (the wave equations of radius 2
// and more, at bt 1), which made wave8 in memory 1.4-1.5x as fast on a Xeon VM
// (docs/performance/waves.md, "Time levels that take turns"), or blocks them to the depth
// tuned for this machine. Only where that run also fits half the budget (0: no limit), as the
// stages' sample does.
int incore_apart(const Grid& grid, const Scheme& stencil, const InCoreOptions& stages, int tuned_bt,
                 const Shape& sample, uint64_t mem_budget) {
  if (sample.points() == 0) return 0;
  const InCoreOptions opt = incore_options(stages, tuned_bt);
  const size_t value_bytes = dtype_size(grid.dtype());
  const WavefrontPlan own = plan_wavefront(sample, stencil, value_bytes, kComputeSteps, opt);
  const WavefrontPlan theirs = plan_wavefront(sample, stencil, value_bytes, kComputeSteps, stages);
  const bool apart = own.turns || own.bt != theirs.bt;
  return apart && sample_fits(grid, stencil, opt, sample, mem_budget) ? own.bt : 0;
}

// The sample measure_compute() runs: rows of the grid's own width (up to 2048), up to 256 of
// them, up to 64 planes, within half the budget (0: no limit): fewer rows first, down to 64,
// then 16 planes (a wavefront over few planes spends its time filling and draining). Empty
// when none fits: a smaller sample would measure overheads, not the rate, so the planner's
// defaults serve better. The width is the grid's because the in-core planner tiles
// wide planes differently: on a Xeon VM (2026-11-28) 256x256x64 ran at 2039 MLUP/s, 1024x256x64
// at 2411 and 1024^3 at 2546 (7pt f32).
Shape compute_sample(const Grid& grid, const Scheme& stencil, const InCoreOptions& opt,
                     uint64_t mem_budget) {
  const Shape& s = grid.shape();
  Shape sample{std::min<int64_t>(s.nx, 2048), std::min<int64_t>(s.ny, 256),
               std::min<int64_t>(s.nz, 64)};
  auto fits = [&] { return sample_fits(grid, stencil, opt, sample, mem_budget); };
  while (!fits() && sample.ny > 64) sample.ny = std::max<int64_t>(64, sample.ny / 2);
  if (!fits()) sample.nz = std::min<int64_t>(s.nz, 16);
  if (!fits()) return Shape{0, 0, 0};
  return sample;
}

// The in-core rate on `sample` (compute_sample()); 0 for an empty sample.
Result<double> measure_compute(const Grid& grid, const Scheme& stencil, const InCoreOptions& opt,
                               const Shape& sample) {
  if (sample.points() == 0) return 0.0;
  DG_ASSIGN_OR_RETURN(InCoreBench b, bench_incore(sample, stencil, grid.dtype(), kComputeSteps, opt,
                                                  kTimingRepeats, 0));
  return b.mlups;
}

// The tunings' samples: planes `width` wide (up to 2048), about 8 Mi points in 64 planes (in
// sanitizer builds 64 rows of 16 planes: a quarter of that at 512 wide).
Shape width_sample(int64_t width) {
  const int64_t nx = std::clamp<int64_t>(width, 1, 2048);
  const int64_t rows =
      std::clamp<int64_t>(kTuningRows * 512 / nx, std::min<int64_t>(64, kTuningRows), kTuningRows);
  return {nx, rows, kTuningPlanes};
}

// The width of the planes the tiles' working set is tuned on for a grid's planes `width` wide:
// 512, or 1024 or 2048 for wider ones. Where the working set tuned on 512-wide planes leaves
// tiles narrower than the grid, whether a larger one that spans x runs faster depends on the
// machine: on a Zen 1 EPYC VM (2026-12-04, 7pt f32 2048x2048x128, one thread) the 768 KiB
// tuned on 512-wide planes gave bt 6 in 256x33 tiles, 6.35-7.22 s of compute, where tiles
// spanning x ran in 5.05-5.46 s (bt 3 or 4, 2048x16 to 2048x21: 1.3 to 2 MiB).
int64_t tiling_width(int64_t width) {
  return width <= 512 ? 512 : std::min<int64_t>(2048, std::bit_ceil(static_cast<uint64_t>(width)));
}

// Candidate working sets for tuned_cache_bytes(): the engines' default (sized for a 2 MiB L2),
// larger ones for machines whose tiles do better in a large L3, and smaller ones for a 1 MiB
// L2 beside a slow L3: on a Skylake-class Xeon VM (2026-11-28, 7pt f32 512x512x256, 2 threads)
// the default's plan (bt 6, 512x32: 1.4 MiB of rings) ran at 2287-2595 MLUP/s, bt 3-4 tiles
// of 0.5-0.6 MiB at 3220-3393 (docs/performance/large-planes.md, "Tiles that fit a 1 MiB L2").
constexpr int64_t kCacheCandidates[] = {int64_t{3} << 17, int64_t{3} << 18, int64_t{3} << 19,
                                        int64_t{3} << 20, int64_t{6} << 20};

// A tuning: in-core options to time on a sample, each named by a value (a depth, or a working
// set in bytes), and the value of each candidate the options stand for.
struct Tuning {
  std::vector<InCoreOptions> candidates;
  std::vector<int64_t> values;  // each candidate's
  Shape sample;
  Scheme scheme;
  DType dtype = DType::kF32;
  int64_t steps = 0;

  // The candidates whose engine on the sample fits half the budget (0: no limit), by index.
  std::vector<size_t> fitting(uint64_t mem_budget) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const int64_t memory = dispatch_dtype(dtype, [&](auto tag) {
        return InCoreEngine<decltype(tag)>::memory_bytes(sample, scheme, steps, candidates[i]);
      });
      if (mem_budget == 0 || static_cast<uint64_t>(memory) <= mem_budget / 2) out.push_back(i);
    }
    return out;
  }

  // The value of the fastest of candidates `timed` (by its best round of kTimingRepeats,
  // taking turns within each round so that a slow spell of a virtual machine does not fall on
  // one candidate's timings only); 0 when there are none.
  Result<int64_t> fastest(const std::vector<size_t>& timed) const {
    std::vector<double> mlups(timed.size(), 0.0);
    for (int round = 0; round < kTimingRepeats; ++round) {
      for (size_t t = 0; t < timed.size(); ++t) {
        DG_ASSIGN_OR_RETURN(InCoreBench b,
                            bench_incore(sample, scheme, dtype, steps, candidates[timed[t]], 1, 0));
        mlups[t] = std::max(mlups[t], b.mlups);
      }
    }
    if (timed.empty()) return int64_t{0};
    return values[timed[static_cast<size_t>(std::max_element(mlups.begin(), mlups.end()) -
                                            mlups.begin())]];
  }

  // The cache's key for the result of timing `timed`: `key` where that is every candidate,
  // else `key` naming them, so that later runs within a budget that leaves the same ones out
  // find it instead of timing them again (wave8's depth on 2048-wide planes took 3.4 s at
  // every run at --mem 768MiB until session 69).
  std::string cache_key(const std::string& key, const std::vector<size_t>& timed) const {
    if (timed.size() == candidates.size()) return key;
    std::string out = key + "/of ";
    for (size_t i = 0; i < timed.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(values[timed[i]]);
    }
    return out;
  }
};

// The candidate working sets, timed with 7pt f32 on planes of tiling_width(width).
Tuning cache_bytes_tuning(int threads, int64_t width) {
  Tuning t{{},
           {},
           width_sample(tiling_width(width)),
           Scheme(Stencil::preset("7pt").value()),
           DType::kF32,
           kTuningSteps};
  for (const int64_t bytes : kCacheCandidates) {
    t.candidates.push_back(compute_options(threads, bytes));
    t.values.push_back(bytes);
  }
  return t;
}

// Whether tuned_bt() measures the scheme's depth: its time levels turn at bt 1 and its radius is
// 2 or more (plan_wavefront turns them there unless told the depth).
bool measures_bt(const Scheme& scheme) { return time_levels_turn(scheme) && scheme.radius() >= 2; }

// The candidate depths: kDepthCandidates within kDepthReach, time levels turning.
Tuning depth_tuning(const Scheme& scheme, DType dtype, int64_t width, int threads,
                    int64_t cache_bytes) {
  Tuning t{{}, {}, width_sample(width), scheme, dtype, kDepthSteps};
  for (const int bt : kDepthCandidates) {
    if (bt > 1 && bt * std::max(1, scheme.radius()) > kDepthReach) continue;
    InCoreOptions& opt = t.candidates.emplace_back(compute_options(threads, cache_bytes));
    opt.turn_time_levels = true;
    opt.bt = bt;
    t.values.push_back(bt);
  }
  return t;
}

int64_t sample_planes(const Grid& grid) {
  return std::min(grid.shape().nz,
                  std::max<int64_t>(1, (256 << 20) / grid.manifest().layout.plane_buffer_bytes()));
}

// Keeps an in-core engine advancing, again and again, from construction until stop(): the
// load under which I/O costs are measured.
class ComputeLoad {
 public:
  explicit ComputeLoad(InCoreEngine<float>& engine)
      : thread_([this, &engine] {
          while (!stop_) engine.advance(Boundary{}, kSteps);
        }) {}
  ~ComputeLoad() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  static constexpr int64_t kSteps = 8 / kStepsDivisor;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// CPU seconds lost per byte read while every thread computes: the hypervisor's steal during
// reads of the grid beside a compute load on every thread, less what it takes under the load
// alone for as long; 0 on bare metal (no steal). -1 (unknown) when the load does not fit
// half the budget.
Result<double> measure_io_cpu_cost(const Grid& grid, int threads, int64_t cache_bytes,
                                   uint64_t mem_budget) {
  const Shape sample{512, 256, 32};
  const Scheme stencil(Stencil::preset("7pt").value());
  const InCoreOptions opt = compute_options(threads, cache_bytes);
  const int64_t steps = ComputeLoad::kSteps;
  if (mem_budget != 0 && static_cast<uint64_t>(InCoreEngine<float>::memory_bytes(
                             sample, stencil, steps, opt)) > mem_budget / 2) {
    return -1.0;
  }
  DG_ASSIGN_OR_RETURN(InCoreEngine<float> engine,
                      InCoreEngine<float>::create(sample, stencil, steps, opt));
  engine.advance(Boundary{}, 1);  // pages in both grids
  ComputeLoad load(engine);
  const double stolen0 = stolen_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  // Passes over the sample for at least half a second: steal is counted in clock ticks
  // (10 ms), and tens of ticks keep the count's rounding small.
  const int64_t planes = sample_planes(grid);
  int64_t passes = 0;
  Status read;
  while (read.ok() && (passes == 0 || seconds_since(t0) < 0.5)) {
    read = measure_read_bandwidth(grid, planes, mem_budget).status();
    ++passes;
  }
  const double reading = seconds_since(t0), stolen1 = stolen_cpu_seconds();
  const auto t1 = std::chrono::steady_clock::now();
  while (read.ok() && seconds_since(t1) < std::min(reading, 0.25)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double alone = stolen_cpu_seconds() - stolen1, alone_seconds = seconds_since(t1);
  load.stop();
  DG_RETURN_IF_ERROR(read);
  const double bytes =
      static_cast<double>(passes * planes * grid.manifest().layout.plane_buffer_bytes());
  return std::max(0.0, (stolen1 - stolen0) - alone * reading / alone_seconds) / bytes;
}

// "dev:MAJ:MIN[,dev:MAJ:MIN...]": the devices of the grid's data files, in file order.
std::string disk_key(const Grid& grid) {
  std::string key;
  for (size_t f = 0; f < grid.manifest().layout.files.size(); ++f) {
    struct stat st {};
    if (::fstat(grid.fd(static_cast<int>(f)), &st) != 0) return {};
    const std::string dev =
        "dev:" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    if (key.find(dev) == std::string::npos) key += (key.empty() ? "" : ",") + dev;
  }
  return key;
}

std::string threads_key(int threads) {
  return std::to_string(threads > 0 ? threads : omp_get_max_threads()) + "t";
}

// What keys a scheme's measurements: "wave8:27/f32/2t" (name, points, dtype, threads).
std::string scheme_key(const Scheme& scheme, DType dtype, int threads) {
  return scheme.name() + ":" + std::to_string(scheme.points()) + "/" +
         std::string(dtype_name(dtype)) + "/" + threads_key(threads);
}

// "@" and the build of the code that measures (code_build_id(), 16 hex digits), or empty.
std::string build_suffix() {
  std::string suffix = code_build_id().substr(0, 16);
  if (!suffix.empty()) suffix.insert(suffix.begin(), '@');
  return suffix;
}

// The sample is part of the key: a rate measured on a smaller one (a smaller grid's, or one cut
// short by a budget) is lower, and must not stand in for the full sample's. So is the build:
// a rate measured with older kernels misled the planner after them (wave8's 323 MLUP/s on the
// 256x256x64 sample, cached before its fused kernels, stood for 743 on a Xeon VM, against
// which the disk looked 2.3x as fast as it was). The in-core engine's rate where its plan
// differs from the stages' (`incore_bt`: its depth, turning the time levels at 1) has a key of
// its own.
std::string compute_key(const Grid& grid, const Scheme& stencil, int threads, const Shape& sample,
                        int incore_bt = 0) {
  return scheme_key(stencil, grid.dtype(), threads) + "/" + sample.to_string() +
         (incore_bt > 0 ? "/incore-bt" + std::to_string(incore_bt) : "") + build_suffix();
}

// Entries cached at most in a section keyed by build (compute rates, tuned depths): every
// build's; then those of other builds are dropped.
constexpr size_t kMaxBuildEntries = 256;

// Drops the other builds' entries of `section` once it holds more than kMaxBuildEntries.
void drop_other_builds(json& mine, const char* section) {
  if (!mine.contains(section) || !mine[section].is_object()) return;
  json& entries = mine[section];
  if (entries.size() <= kMaxBuildEntries) return;
  const std::string suffix = build_suffix();
  json kept = json::object();
  for (const auto& [key, value] : entries.items()) {
    if (!suffix.empty() && key.ends_with(suffix)) kept[key] = value;
  }
  entries = std::move(kept);
}

// The cache file: one object per machine_identity().
json read_cache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json::object();
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return json::object();
  return j;
}

// This machine's profile in the cache file (an empty one where there is none, or a damaged one).
// A file of the format before profiles per machine held one profile's sections at its top
// level; they are dropped.
json& this_machine(json& file) {
  for (const char* section :
       {"compute_mlups", "disk_read_bytes_per_second", kIoCostSection, "wavefront_cache_bytes"}) {
    file.erase(section);
  }
  json& mine = file[machine_identity()];
  if (!mine.is_object()) mine = json::object();
  return mine;
}

// One change to this machine's profile in the cache file: a number set, or (no value) erased.
// The number cached under section/key, if there is one.
std::optional<double> cached_value(const json& j, const char* section, const std::string& key) {
  if (!j.contains(section) || !j[section].is_object()) return std::nullopt;
  const json& s = j[section];
  if (!s.contains(key) || !s[key].is_number()) return std::nullopt;
  return s[key].get<double>();
}

struct CacheEdit {
  std::string section, key;
  std::optional<double> value;
  // A run's figure: cached as the mean of it and the figure cached before, so that one run on a
  // noisy machine moves later plans half way (a VM's in-core runs of one grid spent 12.7-27.6 s
  // outside the same steps).
  bool averaged = false;
};

// Applies `edits` to this machine's profile in the cache file as it is now: processes measure
// at the same time (tests, MPI ranks, runs side by side), and a file read before a measurement
// of seconds and written whole after it would drop what others cached meanwhile. An flock(2)
// on a lock file beside it makes each read and write one step; the write is atomic (a crash
// leaves the old file).
void update_cache(const std::string& path, const std::vector<CacheEdit>& edits) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) return;
  const int lock = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock >= 0) {
    while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  json file = read_cache(path);
  json& mine = this_machine(file);
  for (const CacheEdit& e : edits) {
    if (e.value) {
      const std::optional<double> before =
          e.averaged ? cached_value(mine, e.section.c_str(), e.key) : std::nullopt;
      mine[e.section][e.key] = before && *before > 0 ? (*before + *e.value) / 2 : *e.value;
    } else if (mine.contains(e.section) && mine[e.section].is_object()) {
      mine[e.section].erase(e.key);
    }
  }
  drop_other_builds(mine, "compute_mlups");
  drop_other_builds(mine, kDepthSection);
  (void)internal::write_file_atomic(p.parent_path().string(), p.filename().string(),
                                    file.dump(2) + "\n");
  if (lock >= 0) ::close(lock);  // releases the lock
}

// The first value of a /proc/cpuinfo field, or empty.
std::string cpuinfo_field(const std::string& name) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.rfind(name, 0) != 0) continue;
    const size_t value = line.find_first_not_of(" \t", colon + 1);
    return value == std::string::npos ? std::string() : line.substr(value);
  }
  return {};
}

double cached_number(const json& j, const char* section, const std::string& key) {
  return cached_value(j, section, key).value_or(0);
}

// A measurement's cached value: the one taken in full (key `full`), which serves every budget,
// else the one a budget like this one cut short (key `own`: its sample, the candidates it
// timed, its reads in flight).
std::optional<double> cached_full_or_own(const json& j, const char* section,
                                         const std::string& full, const std::string& own) {
  const std::optional<double> v = cached_value(j, section, full);
  return v ? v : cached_value(j, section, own);
}

// The compute rate (the stages') this build cached for the largest sample of the grid's plane
// width, or 0: what serves a budget too small for a sample of its own, which an earlier run with
// more memory measured, instead of no rate (the planner's default balance then chose bt 8 in
// bands of 64 rows for wave8 2048x2048x64 at --mem 192MiB, 37-40 s, where bt 4 in bands of
// 128 took 28).
double largest_sample_rate(const json& cache, const Grid& grid, const Scheme& stencil,
                           int threads) {
  const auto section = cache.find("compute_mlups");
  if (section == cache.end() || !section->is_object()) return 0;
  const std::string prefix = scheme_key(stencil, grid.dtype(), threads) + "/";
  const std::string build = build_suffix();
  const int64_t width = std::min<int64_t>(grid.shape().nx, 2048);  // (compute_sample's)
  double rate = 0;
  int64_t most = 0;
  for (const auto& [key, value] : section->items()) {
    if (!key.starts_with(prefix) || !key.ends_with(build) || !value.is_number()) continue;
    const Result<Shape> sample =  // (an in-core rate's key does not parse: ".../incore-bt1")
        parse_shape(key.substr(prefix.size(), key.size() - prefix.size() - build.size()));
    if (sample.ok() && sample->nx == width && sample->points() > most) {
      most = sample->points();
      rate = value.get<double>();
    }
  }
  return rate;
}

}  // namespace

int64_t device_busy_ms(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  std::ifstream in("/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                   std::to_string(minor(st.st_dev)) + "/stat");
  int64_t fields[10];
  for (int64_t& f : fields) {
    if (!(in >> f)) return -1;
  }
  return fields[9];
}

int64_t grid_disks_busy_ms(const Grid& grid) {
  int64_t most = 0;
  for (size_t f = 0; f < grid.manifest().layout.files.size(); ++f) {
    const int64_t busy = device_busy_ms(grid.file_path(static_cast<int>(f)));
    if (busy < 0) return -1;
    most = std::max(most, busy);
  }
  return most;
}

void record_sweep_bandwidth(const Grid& grid, double bytes, double busy_seconds) {
  const std::string path = machine_cache_path(), dk = disk_key(grid);
  if (busy_seconds < 1 || bytes <= 0 || path.empty() || dk.empty()) return;
  update_cache(path, {{kSweepSection, dk, bytes / busy_seconds, /*averaged=*/true}});
}

void record_incore_load_store(const Grid& grid, double seconds) {
  constexpr double kRecordedFrom = 256.0 * (1 << 20);
  const double bytes =
      static_cast<double>(grid.shape().nz * grid.manifest().layout.plane_buffer_bytes());
  const std::string path = machine_cache_path(), dk = disk_key(grid);
  if (bytes < kRecordedFrom || seconds <= 0 || path.empty() || dk.empty()) return;
  update_cache(path, {{kLoadStoreSection, dk, seconds / bytes, /*averaged=*/true}});
}

std::string machine_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string cpu = cpuinfo_field("model name");               // x86
  if (cpu.empty()) cpu = "part " + cpuinfo_field("CPU part");  // Arm
  return std::string(host) + ", " + cpu + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " CPUs";
}

std::string machine_cache_path() {
  if (const char* d = std::getenv("DEEPGRID_CACHE_DIR"); d != nullptr && *d != '\0') {
    return std::string(d) + "/" + kCacheName;
  }
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d != nullptr && *d != '\0') {
    return std::string(d) + "/deepgrid/" + kCacheName;
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::string(h) + "/.cache/deepgrid/" + kCacheName;
  }
  return {};
}

namespace {

// The tuning's fastest candidate that fits half the budget, from the cache (`section`, under
// `key` and `build`, the kernels' build: a tuning of every candidate, which serves any budget,
// else one of those this budget lets it time) unless `remeasure`, else timed and cached; 0
// when none fits.
Result<int64_t> tuned_value(const Tuning& t, const char* section, const std::string& key,
                            const std::string& build, bool remeasure, uint64_t mem_budget) {
  const std::string path = machine_cache_path();
  const std::vector<size_t> timed = t.fitting(mem_budget);
  const std::string own = t.cache_key(key, timed) + build;
  if (!remeasure) {
    json file = path.empty() ? json::object() : read_cache(path);
    const json& cache = this_machine(file);
    const double cached = cached_full_or_own(cache, section, key + build, own).value_or(0);
    if (cached > 0) return static_cast<int64_t>(cached);
  }
  DG_ASSIGN_OR_RETURN(const int64_t best, t.fastest(timed));
  if (best > 0) update_cache(path, {{section, own, static_cast<double>(best)}});
  return best;
}

}  // namespace

Result<int64_t> tuned_cache_bytes(int64_t width, int threads, bool remeasure, uint64_t mem_budget) {
  const Tuning t = cache_bytes_tuning(threads, width);
  const int64_t tiled = t.sample.nx;
  const std::string key =
      threads_key(threads) + (tiled > 512 ? "/" + std::to_string(tiled) + " wide" : "");
  // Wide planes whose own tuning fits no candidate in the budget take the engines' default, not
  // the 512-wide planes' tuning: on a Zen 1 EPYC VM (2026-12-04, 7pt f32 2048x2048x128, one
  // thread, --mem 128MiB) a cached 768 KiB from 512-wide planes gave the stream 256x30 tiles and
  // 9.54-10.54 s of compute where the default's 2048x19 took 7.84-8.11 s (three rounds).
  return tuned_value(t, "wavefront_cache_bytes", key, "", remeasure, mem_budget);
}

Result<int> tuned_bt(const Scheme& scheme, DType dtype, int64_t width, int threads,
                     int64_t cache_bytes, bool remeasure, uint64_t mem_budget) {
  if (!measures_bt(scheme)) return 0;
  const std::string key = scheme_key(scheme, dtype, threads) + "/" +
                          std::to_string(width_sample(width).nx) + " wide/" +
                          std::to_string(cache_bytes) + " B";
  DG_ASSIGN_OR_RETURN(const int64_t bt,
                      tuned_value(depth_tuning(scheme, dtype, width, threads, cache_bytes),
                                  kDepthSection, key, build_suffix(), remeasure, mem_budget));
  return static_cast<int>(bt);
}

Result<MachineProfile> machine_tuning(const Scheme& scheme, DType dtype, int64_t width, int threads,
                                      bool remeasure, uint64_t mem_budget) {
  MachineProfile p;
  DG_ASSIGN_OR_RETURN(p.cache_bytes, tuned_cache_bytes(width, threads, remeasure, mem_budget));
  DG_ASSIGN_OR_RETURN(
      p.tuned_bt, tuned_bt(scheme, dtype, width, threads, p.cache_bytes, remeasure, mem_budget));
  return p;
}

Result<MachineProfile> measure_machine(const Grid& grid, const Scheme& stencil, int threads,
                                       uint64_t mem_budget) {
  MachineProfile p;
  const Tuning caches = cache_bytes_tuning(threads, grid.shape().nx);
  DG_ASSIGN_OR_RETURN(p.cache_bytes, caches.fastest(caches.fitting(mem_budget)));
  if (measures_bt(stencil)) {
    const Tuning depths =
        depth_tuning(stencil, grid.dtype(), grid.shape().nx, threads, p.cache_bytes);
    DG_ASSIGN_OR_RETURN(const int64_t bt, depths.fastest(depths.fitting(mem_budget)));
    p.tuned_bt = static_cast<int>(bt);
  }
  const InCoreOptions opt = compute_options(threads, p.cache_bytes);
  const Shape sample = compute_sample(grid, stencil, opt, mem_budget);
  DG_ASSIGN_OR_RETURN(p.compute_mlups, measure_compute(grid, stencil, opt, sample));
  if (incore_apart(grid, stencil, opt, p.tuned_bt, sample, mem_budget) > 0) {
    DG_ASSIGN_OR_RETURN(p.incore_mlups,
                        measure_compute(grid, stencil, incore_options(opt, p.tuned_bt), sample));
  }
  DG_ASSIGN_OR_RETURN(p.disk_read_bps,
                      measure_read_bandwidth(grid, sample_planes(grid), mem_budget));
  p.disk_reads_in_flight = static_cast<int>(read_depth(grid, mem_budget));
  p.disk_write_bps = p.disk_read_bps;
  DG_ASSIGN_OR_RETURN(const double io_cost,
                      measure_io_cpu_cost(grid, threads, p.cache_bytes, mem_budget));
  p.io_cpu_seconds_per_byte = std::max(0.0, io_cost);
  return p;
}

// Measurements a budget cut short (a smaller compute sample, fewer reads in flight) serve the
// run that measured them, but never stand in for full ones in the cache: a full measurement is
// preferred when cached, and a cut-short compute rate is cached under its own sample's key.
Result<MachineProfile> machine_profile(const Grid& grid, const Scheme& stencil, int threads,
                                       bool remeasure, uint64_t mem_budget) {
  DG_ASSIGN_OR_RETURN(MachineProfile p, machine_tuning(stencil, grid.dtype(), grid.shape().nx,
                                                       threads, remeasure, mem_budget));
  const std::string path = machine_cache_path();
  json file = path.empty() ? json::object() : read_cache(path);  // with the tuning in it
  json& cache = this_machine(file);
  const InCoreOptions opt = compute_options(threads, p.cache_bytes);
  const Shape sample = compute_sample(grid, stencil, opt, mem_budget);
  const int incore_bt = incore_apart(grid, stencil, opt, p.tuned_bt, sample, mem_budget);
  const std::string dk = disk_key(grid);
  // Disk figures measured with fewer reads in flight than the engine keeps (a budget that holds
  // fewer planes) go under a key of their own, for the runs within such budgets (until session
  // 69 they were measured again at every run: 1.4-2 s a run for 2048x2048 wave8 planes at
  // --mem 192MiB); one measured in full, when cached, serves every budget.
  const int64_t depth = read_depth(grid, mem_budget);
  const std::string own_dk = dk.empty() || depth == int64_t{io::kPlanesInFlight}
                                 ? dk
                                 : dk + "/" + std::to_string(depth) + " in flight";
  auto cached_disk = [&](const char* section) -> std::optional<double> {
    return dk.empty() ? std::nullopt : cached_full_or_own(cache, section, dk, own_dk);
  };
  // The rate cached for the full sample, else for this budget's.
  const Shape full_sample = compute_sample(grid, stencil, opt, 0);
  auto cached_rate = [&](int bt) {
    return cached_full_or_own(cache, "compute_mlups",
                              compute_key(grid, stencil, threads, full_sample, bt),
                              compute_key(grid, stencil, threads, sample, bt))
        .value_or(0);
  };
  p.disk_reads_in_flight = static_cast<int>(depth);  // (what a measurement now reads with)
  if (!remeasure) {
    p.compute_mlups = cached_rate(0);
    if (p.compute_mlups <= 0 && sample.points() == 0) {
      p.compute_mlups = largest_sample_rate(cache, grid, stencil, threads);
    }
    if (incore_bt > 0) p.incore_mlups = cached_rate(incore_bt);
    p.disk_read_bps = cached_disk("disk_read_bytes_per_second").value_or(0);
    if (cached_value(cache, "disk_read_bytes_per_second", dk)) {  // (a full measurement)
      p.disk_reads_in_flight = io::kPlanesInFlight;
    }
  }
  std::vector<CacheEdit> edits;    // what this call measured, for the cache
  if (remeasure && !dk.empty()) {  // what runs recorded is forgotten
    edits.push_back({kSweepSection, dk, std::nullopt});
    edits.push_back({kLoadStoreSection, dk, std::nullopt});
  }
  p.disk_sweep_bps = remeasure || dk.empty() ? 0 : cached_number(cache, kSweepSection, dk);
  p.incore_load_store_seconds_per_byte =
      remeasure || dk.empty() ? 0 : cached_number(cache, kLoadStoreSection, dk);
  const std::optional<double> io_cost_cached =
      remeasure ? std::nullopt : cached_disk(kIoCostSection);
  p.io_cpu_seconds_per_byte = io_cost_cached.value_or(0);
  p.cached = p.known() && io_cost_cached && (incore_bt == 0 || p.incore_mlups > 0);
  if (p.compute_mlups <= 0) {
    DG_ASSIGN_OR_RETURN(p.compute_mlups, measure_compute(grid, stencil, opt, sample));
    if (p.compute_mlups > 0) {
      edits.push_back(
          {"compute_mlups", compute_key(grid, stencil, threads, sample), p.compute_mlups});
    }
  }
  if (incore_bt > 0 && p.incore_mlups <= 0) {
    DG_ASSIGN_OR_RETURN(p.incore_mlups,
                        measure_compute(grid, stencil, incore_options(opt, p.tuned_bt), sample));
    if (p.incore_mlups > 0) {
      edits.push_back({"compute_mlups", compute_key(grid, stencil, threads, sample, incore_bt),
                       p.incore_mlups});
    }
  }
  if (p.disk_read_bps <= 0) {
    DG_ASSIGN_OR_RETURN(p.disk_read_bps,
                        measure_read_bandwidth(grid, sample_planes(grid), mem_budget));
    if (!dk.empty()) edits.push_back({"disk_read_bytes_per_second", own_dk, p.disk_read_bps});
  }
  p.disk_write_bps = p.disk_read_bps;
  if (!io_cost_cached) {
    DG_ASSIGN_OR_RETURN(const double io_cost,
                        measure_io_cpu_cost(grid, threads, p.cache_bytes, mem_budget));
    p.io_cpu_seconds_per_byte = std::max(0.0, io_cost);
    if (!dk.empty() && io_cost >= 0) edits.push_back({kIoCostSection, own_dk, io_cost});
  }
  if (!p.cached) update_cache(path, edits);
  return p;
}

namespace internal {

std::optional<double> cached_machine_number(const std::string& section, const std::string& key) {
  const std::string path = machine_cache_path();
  if (path.empty()) return std::nullopt;
  json file = read_cache(path);
  return cached_value(this_machine(file), section.c_str(), key);
}

void cache_machine_number(const std::string& section, const std::string& key, double value) {
  const std::string path = machine_cache_path();
  if (path.empty()) return;
  update_cache(path, {{section, key, value}});
}

}  // namespace internal
}  // namespace deepgrid
