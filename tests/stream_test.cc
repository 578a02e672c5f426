// Every engine against the scalar reference, bitwise, through real files (EngineGolden, one
// suite with the method as its parameter: incore, stream, mmap, tiled): presets, both dtypes,
// every boundary, odd shapes, bt from 1 to past the step count, step counts that bt does not
// divide, forced tiles (tiled: forced blocks), one and three stripes, both I/O backends. Then
// the stream engine's own cases (stages, blocks, stopping, resuming, I/O faults); its plan and
// cost model are stream_plan_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "damage.h"
#include "deepgrid/machine.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/run.h"
#include "deepgrid/traces_file.h"
#include "device/device.h"
#include "engines/stream_engine.h"
#include "engines/subnormals.h"
#include "engines/tiled_engine.h"
#include "plan/plan.h"
#include "planning_manifest.h"
#include "reference.h"
#include "sanitizer_build.h"
#include "temp_dir.h"
#include "test_schemes.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using testing::kCoupledScheme;
using testing::kFusedFormScheme;
using testing::kKernelScheme;
using testing::kLeadingCoefficientScheme;
using testing::kThreeLevelScheme;
using testing::planning_manifest;

const Boundary kBoundaries[] = {
    {Boundary::Kind::kDirichlet, 0.5},
    {Boundary::Kind::kNeumann, 0},
    {Boundary::Kind::kPeriodic, 0},
};

struct Case {
  std::string stencil;
  Shape shape;
  DType dtype;
  int64_t steps;
  int bt;  // 0: as deep as the budget allows
  int stripes;
  io::Backend backend;
  uint64_t mem = 64 << 20;
  Method method = Method::kStream;
  int64_t tile_x = 0, tile_y = 0;
  int cache_bt = 0;  // stream: steps per stage of a sweep; 0: automatic
  const Probes* probes = nullptr;
  // Subnormals flushed to zero (RunOptions::flush_subnormals); the values then start near the
  // smallest normal number, so that the run computes subnormals.
  bool flush_subnormals = false;
  // A distributed part's needed box (geometry.h); bounded: only it must come out exact.
  GridPlacement placement = {};
  uint64_t device_mem = 0;  // the device method's budget (0: the device's memory less 1/16)
  DeviceOverlap device_overlap = DeviceOverlap::kAuto;
  int64_t band_rows = 0;    // stream: sweeps in bands of rows (stream_bands.h); 0: whole planes
  bool coef_files = false;  // the grid keeps its coefficients in coefficient files (store.h)
  int threads = 0;          // 0: all (the stream chains its tiles at one: StreamPlan::chain_tiles)
};

bool bounded(const GridPlacement& at) {
  return at.needed_lo != GridPlacement{}.needed_lo || at.needed_hi != GridPlacement{}.needed_hi;
}

std::string describe(const Case& c, const Boundary& b) {
  return std::string(method_name(c.method)) + " " + c.stencil + " " + c.shape.to_string() + " " +
         std::string(dtype_name(c.dtype)) + " " + b.to_string() + ", " + std::to_string(c.steps) +
         " steps, bt " + std::to_string(c.bt) + ", cache bt " + std::to_string(c.cache_bt) + ", " +
         std::to_string(c.stripes) + " stripes, io " + std::string(io::backend_name(c.backend)) +
         (c.flush_subnormals ? ", subnormals flushed" : "") +
         (c.band_rows > 0 ? ", bands of " + std::to_string(c.band_rows) + " rows" : "") +
         (c.threads > 0 ? ", " + std::to_string(c.threads) + " threads" : "");
}

class StreamGolden : public ::testing::Test {
 protected:
  template <typename T>
  void expect_matches_reference(const Case& c, const Boundary& b) {
    SCOPED_TRACE(describe(c, b));
    const std::string dir = root_ + "/g" + std::to_string(counter_++);
    const Scheme scheme = testing_scheme(c.stencil);
    const int n = scheme.component_count();
    CreateOptions co;
    co.shape = c.shape;
    co.dtype = c.dtype;
    co.fields = initial_fields(scheme, {});
    co.coefficient_components = coefficient_components(scheme);  // (as create_for_scheme)
    co.chunk_target_bytes = 3 * 4096;  // several chunks, so stripes alternate
    for (int s = 0; s < c.stripes && c.stripes > 1; ++s) {
      co.stores.push_back(dir + "_s" + std::to_string(s));
      fs::create_directory(co.stores.back());
    }
    // Every component random: planes of n components are (ny * n) x nx arrays.
    const auto u = initial_values<T>(c, n);
    std::vector<std::pair<std::string, fs::file_time_type>> coef_written;
    {  // released before the run opens the grid
      Grid g = Grid::create(dir, co).value();
      ASSERT_TRUE(g.write_planes(0, c.shape.nz, u.data()).ok());
      ASSERT_TRUE(!c.coef_files || g.manifest().has_coef_files());
      for (int f = 0; f < static_cast<int>(g.manifest().layout.coef_files.size()); ++f) {
        coef_written.emplace_back(g.coef_path(f), fs::last_write_time(g.coef_path(f)));
      }
    }

    RunOptions opt;
    opt.scheme = scheme;
    opt.steps = c.steps;
    opt.boundary = b;
    opt.method = c.method;
    opt.bt = c.bt;
    opt.cache_bt = c.cache_bt;
    opt.mem_budget = c.mem;
    opt.io = c.backend;
    opt.tile_x = c.tile_x;
    opt.tile_y = c.tile_y;
    opt.placement = c.placement;
    opt.flush_subnormals = c.flush_subnormals;
    opt.device_mem = c.device_mem;
    opt.device_overlap = c.device_overlap;
    opt.band_rows = c.band_rows;
    opt.threads = c.threads;
    if (c.probes != nullptr) {
      opt.probes = *c.probes;
      opt.traces_path = dir + ".traces.npy";
    }
    auto report = run_grid(dir, opt);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_EQ(report->steps, c.steps);
    EXPECT_LE(report->engine_memory, c.mem);
    EXPECT_EQ(report->band_rows, std::min(c.band_rows, c.shape.ny));
    if (c.device_mem > 0) {
      EXPECT_LE(report->device_memory, c.device_mem);
      const auto grid_bytes = u.size() * sizeof(T);
      // Host-resident, the grid in host memory: once, passed through in place, or twice with
      // periodic z. (Those copies and the plane transfers just above --mem: either.)
      const uint64_t host_copies = b.kind == Boundary::Kind::kPeriodic ? 2 : 1;
      if (c.device_mem >= 2 * grid_bytes) {
        // (A grid too thin for slabs in this budget: held on the device.)
      } else if (c.mem < host_copies * grid_bytes) {
        EXPECT_EQ(report->device_placement, "three-tier");
      } else {
        EXPECT_NE(report->device_placement, "device-resident");
      }
    }

    for (const auto& [path, written] : coef_written) {
      EXPECT_EQ(fs::last_write_time(path), written) << "the run wrote coefficient file " << path;
    }
    Grid after = Grid::open(dir).value();
    std::vector<T> got(u.size());
    ASSERT_TRUE(after.read_planes(0, c.shape.nz, got.data()).ok());
    std::vector<double> want_traces;
    const auto want = c.probes == nullptr
                          ? remembered_reference_run(u, c, opt.scheme, b)
                          : flushed_reference_run(u, c, opt.scheme, b, &want_traces);
    if (bounded(c.placement)) {
      expect_box_exact_and_far_points_not_computed(want, got, c, opt.scheme);
      return;
    }
    const int64_t diff = testing::first_bitwise_difference(want, got);
    ASSERT_EQ(diff, -1) << "first difference at index " << diff;
    if (c.probes != nullptr && !c.probes->receivers.empty()) {
      const Traces traces = read_traces_npy(opt.traces_path).value();
      EXPECT_EQ(traces.steps, c.steps);
      const int64_t tdiff = testing::first_bitwise_difference(want_traces, traces.values);
      EXPECT_EQ(tdiff, -1) << "traces differ first at (step, receiver) index " << tdiff;
    }
  }

  // Every component random (planes of n components are (ny * n) x nx arrays); with subnormals
  // flushed, in [0, 8) times the smallest normal number.
  template <typename T>
  static std::vector<T> initial_values(const Case& c, int n) {
    auto u = testing::random_values<T>({c.shape.nx, c.shape.ny * n, c.shape.nz}, 9);
    if (c.flush_subnormals) {
      for (T& v : u) v *= 8 * std::numeric_limits<T>::min();
    }
    return u;
  }

  // The scalar reference under the case's subnormal mode. Flushed, the IEEE result must
  // differ from it: the case computes subnormals, so a run that ignored the mode would show.
  template <typename T>
  static std::vector<T> flushed_reference_run(const std::vector<T>& u, const Case& c,
                                              const Scheme& scheme, const Boundary& b,
                                              std::vector<double>* traces) {
    const Probes none;
    const Probes& probes = c.probes != nullptr ? *c.probes : none;
    std::vector<T> want;
    {
      const internal::SubnormalsFlushed flushed(c.flush_subnormals);
      want = testing::reference_run(u, c.shape, scheme, b, c.steps, probes, 0, traces);
    }
    if (c.flush_subnormals) {
      const auto ieee = testing::reference_run(u, c.shape, scheme, b, c.steps);
      EXPECT_NE(testing::first_bitwise_difference(ieee, want), -1)
          << "no subnormal numbers in this case";
    }
    return want;
  }

  // flushed_reference_run() of a case without probes, computed once per process (the values
  // follow from the case's stencil, shape, dtype, boundary, steps and subnormal mode).
  template <typename T>
  static const std::vector<T>& remembered_reference_run(const std::vector<T>& u, const Case& c,
                                                        const Scheme& scheme, const Boundary& b) {
    return testing::remembered<T>(c.stencil + " " + c.shape.to_string() + " " + b.to_string() +
                                      " " + std::to_string(c.steps) +
                                      (c.flush_subnormals ? " flushed" : ""),
                                  [&] { return flushed_reference_run(u, c, scheme, b, nullptr); });
  }

  // The needed box bitwise the reference's; points too far from it to reach it by the run's
  // end (steps * r along each axis) differ from the reference's: they were not computed (and
  // streamed, hold zeros).
  template <typename T>
  static void expect_box_exact_and_far_points_not_computed(const std::vector<T>& want,
                                                           const std::vector<T>& got, const Case& c,
                                                           const Scheme& scheme) {
    const GridPlacement& at = c.placement;
    const int64_t reach[3] = {c.steps * scheme.radius_x(), c.steps * scheme.radius_y(),
                              c.steps * scheme.radius_z()};
    int64_t wrong_in_box = 0, far_points = 0, far_computed = 0, far_not_zero = 0;
    for (int64_t z = 0; z < c.shape.nz; ++z) {
      for (int64_t y = 0; y < c.shape.ny; ++y) {
        for (int64_t x = 0; x < c.shape.nx; ++x) {
          const int64_t p[3] = {x, y, z};
          bool in_box = true, far = false;
          for (size_t a = 0; a < 3; ++a) {
            in_box = in_box && p[a] >= at.needed_lo[a] && p[a] < at.needed_hi[a];
            far = far || p[a] < at.needed_lo[a] - reach[a] || p[a] >= at.needed_hi[a] + reach[a];
          }
          const size_t i = static_cast<size_t>((z * c.shape.ny + y) * c.shape.nx + x);
          const bool same = std::memcmp(&want[i], &got[i], sizeof(T)) == 0;
          wrong_in_box += in_box && !same ? 1 : 0;
          far_points += far ? 1 : 0;
          far_computed += far && same ? 1 : 0;
          far_not_zero += far && got[i] != T{0} ? 1 : 0;
        }
      }
    }
    EXPECT_EQ(wrong_in_box, 0);
    ASSERT_GT(far_points, 0);
    EXPECT_EQ(far_computed, 0) << "of " << far_points << " points out of the box's reach";
    if (c.method == Method::kStream) {
      EXPECT_EQ(far_not_zero, 0) << "the stream engine writes zeros where it computes nothing";
    }
  }

  // (With subnormals flushed, dirichlet holds 0: 0.5 would fill these small grids with normal
  // numbers within a few steps.)
  // (Periodic bands of rows whose halos would meet across the grid's ends are refused:
  // BandsAreRefusedWhereTheyCannotRun.)
  void expect_all_boundaries(const Case& c) {
    for (Boundary b : kBoundaries) {
      if (c.band_rows > 0 && b.kind == Boundary::Kind::kPeriodic &&
          c.band_rows + 2 * std::max(c.bt, 1) * testing_scheme(c.stencil).radius_y() > c.shape.ny)
        continue;
      if (c.flush_subnormals && b.kind == Boundary::Kind::kDirichlet) b.value = 0;
      if (c.dtype == DType::kF32)
        expect_matches_reference<float>(c, b);
      else
        expect_matches_reference<double>(c, b);
    }
  }

  // A stencil preset with rounding coefficients (testing_stencil), a scheme preset, or a
  // scheme's JSON text.
  static Scheme testing_scheme(const std::string& name) {
    if (name.front() == '{') return Scheme::from_json(name).value();
    if (Stencil::preset(name).ok()) return testing_stencil(name);
    return Scheme::preset(name).value();
  }

  // Presets with coefficients that round, so any change of order shows in the bits.
  static Stencil testing_stencil(const std::string& name) {
    const Stencil st = Stencil::preset(name).value();
    std::string csv;
    for (int k = 0; k < st.size(); ++k) {
      if (k > 0) csv += ',';
      csv += std::to_string(0.9 / st.size() + 0.0123 * (k % 5) - 0.01);
    }
    return st.with_coefficients(csv).value();
  }

  testing::TempDir tmp_;
  const std::string root_ = tmp_.path().string();
  int counter_ = 0;
};

// Whether the device method has a device to run on here (PoCL's CPU device in CI).
bool device_available() {
  const auto all = device::list_devices();
  return all.ok() && !all->empty();
}

// The device method with a budget just short of the grid's two copies, so that it streams the
// grid through the device as a wavefront (host-resident); grids too thin for the rings of one
// step and one-plane chunks still fit and stay device-resident.
uint64_t host_resident_budget(const Case& c, const Scheme& scheme) {
  const uint64_t rings = (c.device_overlap == DeviceOverlap::kOn ? 4 : 2) +
                         2 * static_cast<uint64_t>(scheme.radius_z());
  const auto plane = static_cast<uint64_t>(c.shape.nx * c.shape.ny * scheme.component_count()) *
                     dtype_size(c.dtype);
  const uint64_t probes =
      c.probes == nullptr ? 0 : 3 * (c.probes->sources.size() + c.probes->receivers.size());
  const uint64_t wavefront = rings * plane + probes * kMaxAutoBt * 16;  // (probe_buffer_bytes)
  return std::max(2 * plane * static_cast<uint64_t>(c.shape.nz) - 1, wavefront);
}

// The device method with --mem just short of the grid's copy in host memory, so that it streams
// the grid from disk through the device (three tiers), or what one plane deep sweeps need
// where that is more (host-resident then, when the grid's copies fit that too).
uint64_t three_tier_host_budget(const Case& c, const Scheme& scheme) {
  const auto plane = static_cast<uint64_t>(c.shape.nx * c.shape.ny * scheme.component_count()) *
                     dtype_size(c.dtype);
  const uint64_t stride = (plane + 4095) / 4096 * 4096;  // (an O_DIRECT plane)
  const uint64_t sweep =
      4 * static_cast<uint64_t>(scheme.radius_z()) * plane + kMinThreeTierIoBuffers * stride;
  const uint64_t transfers = (io::kPlanesInFlight + 1) * stride;  // (device-resident's)
  return std::max({plane * static_cast<uint64_t>(c.shape.nz) - 1, sweep, transfers});
}

// The engine under test: a method, and for the device the placement the budgets force and
// whether slabs' copies overlap their steps (three slab buffers).
// The stream method in bands of a few rows: several bands on every grid of the suite, whose
// rows are under a block (the buffered writes; whole blocks: BandsOfWholeBlocks; a block or
// more: BandsSharingTheirEdgeBlocks), at one thread, where the stages run their tiles of each x
// range as a chain (StreamPlan::chain_tiles; whole planes in chains: ChainsOfTilesAtOneThread).
struct EngineUnderTest {
  Method method;
  DevicePlacement placement = DevicePlacement::kDeviceResident;
  bool overlapped = false;
  int64_t band_rows = 0;
  int threads = 0;  // 0: all
};
void PrintTo(const EngineUnderTest& e, std::ostream* os) {
  *os << method_name(e.method);
  if (e.method == Method::kDevice) *os << " " << placement_name(e.placement);
  if (e.overlapped) *os << " overlapped";
  if (e.band_rows > 0) *os << " in bands of " << e.band_rows << " rows";
  if (e.threads > 0) *os << " at " << e.threads << " thread" << (e.threads > 1 ? "s" : "");
}

// The shared suite: each case through the method under test.
class EngineGolden : public StreamGolden, public ::testing::WithParamInterface<EngineUnderTest> {
 protected:
  void SetUp() override {
    if (method() == Method::kDevice && !device_available()) {
      GTEST_SKIP() << "no OpenCL device here (a build without OpenCL, or no driver: "
                      "scripts/setup.sh installs PoCL's CPU device)";
    }
  }
  Method method() const { return GetParam().method; }
  bool in_bands() const { return GetParam().band_rows > 0; }
  void expect_all_boundaries(Case c) {
    c.method = method();
    c.band_rows = GetParam().band_rows;
    c.threads = GetParam().threads;
    if (GetParam().overlapped) c.device_overlap = DeviceOverlap::kOn;
    if (GetParam().placement != DevicePlacement::kDeviceResident) {
      c.device_mem = host_resident_budget(c, testing_scheme(c.stencil));
    }
    if (GetParam().placement == DevicePlacement::kThreeTiers) {
      c.mem = three_tier_host_budget(c, testing_scheme(c.stencil));
    }
    StreamGolden::expect_all_boundaries(c);
  }
};

TEST_P(EngineGolden, PresetsDtypesAndBoundaries) {
  for (const char* st : {"7pt", "13pt", "19pt", "27pt", "5pt", "9pt"}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      expect_all_boundaries({st, {23, 17, 13}, dt, 5, 0, 1, io::Backend::kUring});
    }
  }
  expect_all_boundaries({"25pt", {19, 11, 12}, DType::kF32, 3, 0, 1, io::Backend::kUring});
}

// Subnormals flushed to zero: every engine gives the bits of the reference computed in that
// mode (which differ from IEEE's here), at every depth and boundary.
TEST_P(EngineGolden, SubnormalsFlushedWhenAsked) {
  for (const char* st : {"7pt", "27pt"}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      Case c{st, {23, 17, 13}, dt, 5, 0, 1, io::Backend::kUring};
      c.flush_subnormals = true;
      expect_all_boundaries(c);
    }
  }
  for (int bt : {1, 3, 9}) {
    Case c{"7pt", {21, 9, 11}, DType::kF32, 7, bt, 1, io::Backend::kUring};
    c.flush_subnormals = true;
    expect_all_boundaries(c);
  }
}

TEST_P(EngineGolden, EveryDepthIncludingDeeperThanTheRun) {
  for (int bt : {1, 2, 3, 4, 7, 9}) {
    expect_all_boundaries({"7pt", {21, 9, 11}, DType::kF32, 7, bt, 1, io::Backend::kUring});
  }
  expect_all_boundaries({"13pt", {9, 8, 5}, DType::kF64, 5, 2, 1, io::Backend::kUring});
}

// Small forced tiles: interior tiles, edge tiles and tiles narrower than their halo (stream:
// each carrying its rings across blocks of z-steps; tiled: blocks of NYxNZ, so blocks split
// along y and z with interior faces, single rows and planes, and halos wider than blocks).
TEST_P(EngineGolden, ForcedTiles) {
  for (int bt : {1, 3, 5}) {
    for (auto [tx, ty] : {std::pair{4, 3}, {7, 5}, {1, 1}, {23, 2}}) {
      Case c{"7pt", {23, 17, 13}, DType::kF32, 6, bt, 1, io::Backend::kUring};
      c.tile_x = tx;
      c.tile_y = ty;
      expect_all_boundaries(c);
    }
  }
  Case c{"27pt", {19, 14, 9}, DType::kF64, 5, 2, 1, io::Backend::kThreads};
  c.tile_x = 5;
  c.tile_y = 6;
  expect_all_boundaries(c);
}

TEST_P(EngineGolden, OddShapes) {
  for (Shape s : {Shape{1, 1, 1}, Shape{64, 48, 1}, Shape{2, 3, 40}, Shape{1, 7, 3}}) {
    expect_all_boundaries({"7pt", s, DType::kF32, 4, 3, 1, io::Backend::kUring});
  }
}

TEST_P(EngineGolden, StripesAndBothBackends) {
  for (io::Backend be : {io::Backend::kUring, io::Backend::kThreads}) {
    for (int stripes : {1, 3}) {
      expect_all_boundaries({"27pt", {40, 24, 30}, DType::kF32, 6, 4, stripes, be});
    }
  }
}

TEST_P(EngineGolden, SchemesOfSeveralFields) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only (refusal tested in "
                    "SchemeTest.TheTiledMethodRefusesSchemes)";
  }
  for (const char* sc : {"wave2", "wave4", "wave8", "heat-var", kCoupledScheme, kFusedFormScheme,
                         kThreeLevelScheme, kLeadingCoefficientScheme}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      expect_all_boundaries({sc, {21, 13, 11}, dt, 5, 0, 1, io::Backend::kUring});
    }
  }
  for (int bt : {1, 2, 3, 7}) {
    Case c{"wave4", {17, 12, 14}, DType::kF32, 7, bt, 1, io::Backend::kThreads};
    c.tile_x = 5;
    c.tile_y = 4;
    expect_all_boundaries(c);
    c.stencil = kCoupledScheme;
    c.stripes = 3;
    expect_all_boundaries(c);
    c.stencil = kThreeLevelScheme;
    expect_all_boundaries(c);
    c.stencil = kLeadingCoefficientScheme;
    expect_all_boundaries(c);
  }
}

// Grids of schemes with coefficient fields keep them in coefficient files (store.h): every
// engine reads them from there, computes the same bits, and never writes them. Components of
// whole 4096-byte blocks (version 5's records) and not (version 6's: padded records, the
// coefficients moved after the ring's part as they are read).
TEST_P(EngineGolden, SchemesWithCoefficientFiles) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only";
  }
  for (const char* sc : {"wave4", "heat-var", kCoupledScheme, kFusedFormScheme}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      for (const Shape& s : {Shape{32, dt == DType::kF32 ? 32 : 16, 12}, Shape{21, 13, 9}}) {
        Case c{sc, s, dt, 5, 0, 1, io::Backend::kUring};
        c.coef_files = true;
        expect_all_boundaries(c);
      }
    }
  }
  for (int bt : {1, 3}) {
    Case c{"wave8", {32, 64, 14}, DType::kF32, 7, bt, 3, io::Backend::kThreads};
    c.tile_x = 5;
    c.tile_y = 4;
    c.coef_files = true;
    expect_all_boundaries(c);
  }
}

// A user's kernel (test_schemes.h) against the same C function called point by point: any
// bt, forced tiles, both dtypes, and grids that periodic frames wrap around several times.

TEST_P(EngineGolden, UsersKernels) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only";
  }
  if (method() == Method::kDevice) {
    GTEST_SKIP() << "users' kernels run on the CPU only (refusal tested in "
                    "DeviceTest.AUsersKernelIsRefusedWithTheFix)";
  }
  for (DType dt : {DType::kF32, DType::kF64}) {
    expect_all_boundaries({kKernelScheme, {21, 13, 11}, dt, 5, 0, 1, io::Backend::kUring});
  }
  for (int bt : {1, 2, 3, 7}) {
    Case c{kKernelScheme,        {17, 12, 14}, bt % 2 ? DType::kF64 : DType::kF32, 7, bt, 1,
           io::Backend::kThreads};
    c.tile_x = 5;
    c.tile_y = 4;
    expect_all_boundaries(c);
  }
  for (Shape s : {Shape{2, 1, 5}, Shape{3, 2, 2}}) {
    expect_all_boundaries({kKernelScheme, s, DType::kF32, 4, 3, 1, io::Backend::kUring});
  }
}

// A shot and receivers inside temporal blocking: sources in planes of every level (one in a
// corner, so periodic copies and halos of several tiles hold it), receivers on tile edges.
TEST_P(EngineGolden, SourcesAndReceivers) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only";
  }
  if (in_bands()) {
    // Sources in the halo rows of the bands beside theirs, receivers on the bands' first and
    // last rows (bands of 4 rows: rows 3-4, 7-8 meet), at every depth; a grid of several
    // fields with a receiver on another component.
    Probes probes = testing::shot_and_corner();
    for (int64_t y : {3, 4, 6, 7, 8, 11}) probes.receivers.push_back({"u", 5, y, 7});
    probes.sources.back().y = 4;
    Probes wave_probes = probes;
    wave_probes.receivers.push_back({"u@1", 3, 4, 13});
    for (int bt : {1, 3, 0}) {
      for (const char* st : {"7pt", "13pt", "wave4"}) {
        Case c{st, {17, 12, 14},       bt == 3 ? DType::kF32 : DType::kF64, 7, bt,
               1,  io::Backend::kUring};
        c.tile_x = 5;
        c.tile_y = 3;
        c.probes = st == std::string("wave4") ? &wave_probes : &probes;
        expect_all_boundaries(c);
      }
    }
    return;
  }
  Probes probes = testing::shot_and_corner();
  for (int64_t x : {0, 4, 5, 16}) probes.receivers.push_back({"u", x, 6, 7});
  probes.receivers.push_back({"u@1", 3, 3, 13});
  for (int bt : {1, 3, 0}) {
    Case c{"wave4", {17, 12, 14}, DType::kF64, 7, bt, 1, io::Backend::kUring};
    c.tile_x = 5;
    c.tile_y = 4;
    c.probes = &probes;
    expect_all_boundaries(c);
  }
  // Lean wavefronts (wavefront.h) read u@1 and m where their values already lie: a receiver
  // on m reads it there, and a source on u@1 (a ring level must then hold u@1) keeps the rings
  // whole, and at bt 1 keeps u@1 from taking turns with u (the in-core engine).
  Probes older = testing::shot_and_corner();
  older.receivers = {{"m", 9, 6, 7}, {"u@1", 8, 6, 7}};
  Probes on_u1 = probes;
  on_u1.sources.back().field = "u@1";
  for (const Probes* p : {&older, &on_u1}) {
    for (int bt : {4, 1}) {
      Case c{"wave2", {17, 12, 14}, DType::kF32, 8, bt, 1, io::Backend::kUring};
      c.tile_x = 6;
      c.tile_y = 5;
      c.probes = p;
      expect_all_boundaries(c);
    }
  }
  Case c{"heat-var", {17, 12, 14}, DType::kF32, 9, 4, 1, io::Backend::kThreads};
  SourceSpec heat;
  heat.x = 2, heat.y = 2, heat.z = 2;
  heat.series = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  Probes heater;
  heater.sources.push_back(heat);
  heater.receivers.push_back({"u", 2, 3, 2});
  c.probes = &heater;
  c.cache_bt = 2;
  expect_all_boundaries(c);
}

INSTANTIATE_TEST_SUITE_P(
    Methods, EngineGolden,
    ::testing::Values(EngineUnderTest{Method::kInCore}, EngineUnderTest{Method::kStream},
                      EngineUnderTest{Method::kStream, DevicePlacement::kDeviceResident, false, 4,
                                      1},
                      EngineUnderTest{Method::kMmap}, EngineUnderTest{Method::kTiled},
                      EngineUnderTest{Method::kDevice},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kHostResident},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kHostResident, true},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers, true}),
    [](const auto& param_info) {
      std::string name(method_name(param_info.param.method));
      if (param_info.param.placement != DevicePlacement::kDeviceResident) {
        name += "_" + std::string(placement_name(param_info.param.placement));
      }
      if (param_info.param.overlapped) name += "_overlapped";
      if (param_info.param.band_rows > 0) name += "_bands";
      if (param_info.param.threads > 0)
        name += "_" + std::to_string(param_info.param.threads) + "_thread";
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

// Two-level blocking: sweeps of bt levels as stages of cache_bt levels, including stages
// that do not divide bt, a last sweep shorter than one stage, and radius-2 stencils whose
// periodic stages extend past z's ends.
TEST_F(StreamGolden, StagesWithinASweep) {
  for (auto [bt, cache_bt] : {std::pair{4, 1}, {5, 2}, {9, 4}, {8, 3}}) {
    Case c{"7pt", {17, 10, 12}, DType::kF32, 11, bt, 1, io::Backend::kUring};
    c.cache_bt = cache_bt;
    expect_all_boundaries(c);
  }
  for (const std::string st : {"13pt", "27pt", "wave8", kCoupledScheme, kKernelScheme.c_str()}) {
    Case c{st, {15, 13, 9}, DType::kF64, 7, 6, 1, io::Backend::kThreads};
    c.cache_bt = 2;
    c.tile_x = 6;
    c.tile_y = 4;
    expect_all_boundaries(c);
  }
}

// Tiles in chains (StreamPlan::chain_tiles: one thread), whole planes: each x range's tiles in
// y order, their levels skewed, edge rows handed on within each block of z-steps. Tiles of one
// row and tiles shorter than their halo, stages of 2 to 4 levels and a last one shorter,
// stencils of radius 2 and schemes of several fields, and probes. (A distributed part's needed
// box, whose trim cuts the chains' levels: ANeededBoxComesOutExact…; in bands: EngineGolden's
// stream_bands_1_thread.)
TEST_F(StreamGolden, ChainsOfTilesAtOneThread) {
  for (auto [bt, cache_bt, ty] : {std::tuple{6, 3, 3}, {7, 2, 1}, {9, 4, 5}}) {
    Case c{"7pt", {23, 17, 13}, DType::kF32, 9, bt, 1, io::Backend::kUring};
    c.threads = 1;
    c.cache_bt = cache_bt;
    c.tile_x = 8;
    c.tile_y = ty;
    expect_all_boundaries(c);
  }
  for (const std::string st : {"13pt", "27pt", "wave8", kCoupledScheme}) {
    Case c{st, {15, 13, 9}, DType::kF64, 7, 6, 1, io::Backend::kThreads};
    c.threads = 1;
    c.cache_bt = 3;
    c.tile_x = 15;
    c.tile_y = 3;
    expect_all_boundaries(c);
  }
  Probes probes = testing::shot_and_corner();
  for (int64_t y : {0, 3, 4, 6, 11}) probes.receivers.push_back({"u", 5, y, 7});
  probes.receivers.push_back({"u@1", 3, 4, 13});
  Case waves{"wave4", {17, 12, 14}, DType::kF32, 7, 4, 1, io::Backend::kUring};
  waves.threads = 1;
  waves.cache_bt = 2;
  waves.tile_x = 9;
  waves.tile_y = 3;
  waves.probes = &probes;
  expect_all_boundaries(waves);
}

// A distributed part's run (the engines a part can run with): only the needed box (its block)
// must come out exact, and halo points too far from it to reach it in time are not computed.
// A part has halos on one side of an axis at the grid's edge (not periodic), else on both or
// none. Streamed: several sweeps, stages and tiles, in which the reach shrinks.
TEST_F(StreamGolden, ANeededBoxComesOutExactAndFarHalosAreNotComputed) {
  const int64_t kNone = GridPlacement::kUnbounded;
  for (const Boundary& b : kBoundaries) {
    // Taller than the engine's write buffers (two blocks of at most 64 planes), so that a
    // buffer holding a computed plane later takes one that is not.
    Case c{"7pt", {23, 17, 150}, DType::kF32, 7, 3, 1, io::Backend::kUring};
    c.cache_bt = 2;
    c.tile_x = 10;
    c.tile_y = 8;
    const bool periodic = b.kind == Boundary::Kind::kPeriodic;
    c.placement.needed_lo = {8, -kNone, 60};
    c.placement.needed_hi = {16, periodic ? kNone : 10, periodic ? 90 : kNone};
    for (EngineUnderTest e :
         {EngineUnderTest{Method::kStream},
          EngineUnderTest{Method::kStream, DevicePlacement::kDeviceResident, false, 0, 1},
          EngineUnderTest{Method::kInCore}, EngineUnderTest{Method::kDevice},
          EngineUnderTest{Method::kDevice, DevicePlacement::kHostResident},
          EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers},
          EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers, true}}) {
      if (e.method == Method::kDevice && !device_available()) continue;
      c.method = e.method;
      c.threads = e.threads;  // (the stream at one thread: its tiles in chains)
      c.device_overlap = e.overlapped ? DeviceOverlap::kOn : DeviceOverlap::kAuto;
      for (auto [stencil, steps] : {std::pair{"7pt", 7}, {"13pt", 5}}) {
        c.stencil = stencil;
        c.steps = steps;
        if (e.placement != DevicePlacement::kDeviceResident) {
          c.device_mem = host_resident_budget(c, testing_scheme(stencil)) / 4;
        }
        if (e.placement == DevicePlacement::kThreeTiers) {
          c.mem = three_tier_host_budget(c, testing_scheme(stencil)) / 4;
        }
        expect_matches_reference<float>(c, b);
      }
      c.stencil = "7pt";
      c.steps = 7;
    }
  }
}

// The same in bands of rows (a distributed part of large planes): bands wholly in the part's
// halo rows compute nothing and write zeros, the others deliver their rows of the box; rows
// wrap across the grid's ends where a periodic part holds all of them. Planes of whole blocks
// (periodic bands need them), and not: rows of 1200 bytes, bands that share their edge blocks.
//
// Sources in the box's reach and far from it, the far ones where another band's planes would
// take them at their own height if a band's wavefront wrapped them (periodic, y bounded: a
// part split along y, whose bands do not wrap).
TEST_F(StreamGolden, APartsNeededBoxComesOutExactInBands) {
  const int64_t kNone = GridPlacement::kUnbounded;
  Probes probes;
  for (auto [x, y, z] : {std::tuple{12, 2, 70}, {20, 25, 75}, {30, 44, 80}, {35, 17, 65}}) {
    SourceSpec s;
    s.x = x, s.y = y, s.z = z;
    s.series = {1.5, -0.75, 0.5};
    probes.sources.push_back(s);
  }
  for (const Boundary& b : kBoundaries) {
    const bool periodic = b.kind == Boundary::Kind::kPeriodic;
    for (const bool split_y : {false, true}) {
      if (split_y && !periodic) continue;  // (the others bound y either way)
      for (auto [stencil, steps, bt, nx] :
           {std::tuple{"7pt", 7, 3, 64}, {"13pt", 5, 0, 64}, {"7pt", 7, 3, 300}}) {
        Case c{stencil, {nx, 48, 130}, DType::kF32, steps, bt, 1, io::Backend::kUring};
        c.method = Method::kStream;
        c.band_rows = 8;
        c.cache_bt = 2;
        c.tile_x = 24;
        c.tile_y = 5;
        c.probes = &probes;
        const bool y_bounded = !periodic || split_y;
        if (split_y) c.placement.whole = {nx, 96, 130};
        c.placement.needed_lo = {8, y_bounded ? 20 : -kNone, 60};
        c.placement.needed_hi = {40, y_bounded ? 34 : kNone, periodic ? 90 : kNone};
        expect_matches_reference<float>(c, b);
      }
    }
  }
}

TEST_F(StreamGolden, NaiveAndAuto) {
  Case c{"7pt", {30, 20, 16}, DType::kF64, 5, 0, 1, io::Backend::kThreads};
  c.method = Method::kNaive;
  expect_all_boundaries(c);
  c.method = Method::kAuto;
  c.mem = 200 << 10;  // the grid (75 KiB) times two plus buffers does not fit: auto streams
  expect_all_boundaries(c);
}

// Receivers' values are held one pass at a time: a run whose traces are larger than --mem
// (1200 steps x 60 receivers x 8 bytes: 562 KiB of a 512 KiB budget) runs within it, saving a
// pass's rows at a time, and its traces are the reference's.
TEST_F(StreamGolden, TracesLargerThanTheBudgetAreHeldAPassAtATime) {
  Probes probes;
  for (int64_t i = 0; i < 60; ++i) probes.receivers.push_back({"u", i % 12, (i * 7) % 10, i % 9});
  for (const Method method : {Method::kStream, Method::kInCore}) {
    Case c{"7pt", {12, 10, 9}, DType::kF32, 1200, 0, 1, io::Backend::kUring};
    c.method = method;
    c.mem = 512 << 10;
    c.probes = &probes;
    expect_all_boundaries(c);
  }
}

// What Ctrl-C relies on: asked to stop, the engine finishes the current sweep, and the grid
// holds exactly the steps it reports.
TEST_F(StreamGolden, ProgressStopsBetweenSweeps) {
  const Shape shape{16, 12, 20};
  const Stencil st = testing_stencil("7pt");
  CreateOptions co;
  co.shape = shape;
  Grid g = Grid::create(root_ + "/stop", co).value();
  const auto u = testing::random_values<float>(shape, 8);
  ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
  StreamOptions opt;
  opt.mem_budget = 16 << 20;
  opt.bt = 3;
  const StreamPlan plan = plan_stream(g.manifest(), st, Boundary{}, 12, opt).value();
  int calls = 0;
  const auto stats = advance_stream(g, st, Boundary{}, 12, plan, opt, [&](int64_t, int64_t) {
                       return ++calls < 2;
                     }).value();
  EXPECT_EQ(stats.steps, 6) << "two sweeps of bt 3, then stop";
  std::vector<float> got(u.size());
  ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
  EXPECT_EQ(
      testing::first_bitwise_difference(testing::reference_run(u, shape, st, Boundary{}, 6), got),
      -1);
}

// A caller that advances the grid again right after (RunOptions::advances_again: a run's
// parts between snapshots, a distributed run's rounds) has the files a sweep in bands replaced
// kept for its next call's first sweep, which writes into them; the last call frees them. The
// runs in parts between snapshots do so. Every result is exact.
TEST_F(StreamGolden, BandsKeepTheReplacedFilesForTheNextAdvance) {
  const Shape shape{64, 40, 9};
  const Stencil st = testing_stencil("7pt");
  const auto u = testing::random_values<float>(shape, 8);
  auto make = [&](const std::string& dir) {
    CreateOptions co;
    co.shape = shape;
    Grid g = Grid::create(dir, co).value();
    EXPECT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
    return g;
  };
  auto expect_steps = [&](const Grid& g, int64_t steps) {
    std::vector<float> got(u.size());
    ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
    EXPECT_EQ(testing::first_bitwise_difference(
                  testing::reference_run(u, shape, st, Boundary{}, steps), got),
              -1)
        << "after " << steps << " steps";
  };
  RunOptions opt;
  opt.scheme = st;
  opt.steps = 3;
  opt.method = Method::kStream;
  opt.mem_budget = 16 << 20;
  opt.band_rows = 16;
  Grid g = make(root_ + "/again");
  auto kept_copy = [&] { return fs::exists(g.file_path(0, FileSet::kReplacement)); };
  opt.advances_again = true;
  ASSERT_TRUE(advance_grid(g, opt).ok());
  EXPECT_TRUE(kept_copy()) << "the replaced files are kept for the next advance";
  expect_steps(g, 3);
  opt.advances_again = false;
  ASSERT_TRUE(advance_grid(g, opt).ok());
  EXPECT_FALSE(kept_copy()) << "the last advance frees them";
  expect_steps(g, 6);

  // A run in parts between snapshots: exact, and no copy left when it ends.
  const std::string dir = root_ + "/parts";
  make(dir);
  opt.steps = 6;
  opt.snapshots = {root_ + "/snaps", 2, {}};
  const auto parts = run_grid(dir, opt);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ(parts->snapshots, 4);
  const Grid ran = Grid::open(dir).value();
  EXPECT_FALSE(fs::exists(ran.file_path(0, FileSet::kReplacement)));
  expect_steps(ran, 6);
}

// Bands whose rows are whole 4096-byte blocks write through the replacement's own descriptors
// (O_DIRECT where the filesystem allows it), the last band to the end of its planes' blocks:
// rows of 256 (f32) and 512 bytes (f64), radius 1 and 2, stripes, both backends, any depth.
TEST_F(StreamGolden, BandsOfWholeBlocks) {
  for (int bt : {1, 4, 0}) {
    Case c{"7pt", {64, 40, 9}, DType::kF32, 6, bt, 1, io::Backend::kUring};
    c.band_rows = 16;
    expect_all_boundaries(c);
    c.stencil = "27pt";
    c.dtype = DType::kF64;
    c.band_rows = 8;
    expect_all_boundaries(c);
  }
  Case c{"13pt", {64, 37, 11}, DType::kF32, 5, 3, 3, io::Backend::kThreads};
  c.band_rows = 32;
  expect_all_boundaries(c);
  // A last band of less than half the others on a periodic grid whose planes are not whole
  // blocks: its buffers are aligned for the rows after the wrap, not for its own (whose writes
  // then go through the page cache).
  Case short_last{"7pt", {64, 36, 9}, DType::kF32, 6, 1, 1, io::Backend::kUring};
  short_last.band_rows = 16;
  expect_all_boundaries(short_last);
  // Grids of several fields whose components are whole blocks: every component's rows written
  // O_DIRECT.
  for (int bt : {1, 0}) {
    Case w{"wave2", {64, 48, 9}, DType::kF32, 6, bt, 2, io::Backend::kUring};
    w.band_rows = 16;
    expect_all_boundaries(w);
  }
}

// Bands whose rows are not whole blocks, on planes whose rows do not wrap, share the blocks at
// their edges (stream_bands.h): each computes the rows before its own back to the block where
// its writes start, and the last band writes the first bytes of each component after the first
// as the first band computed them. Rows of 1200 bytes (f32 and f64), one and three components
// (wave2: `m` in the ring), radius 1 and 2, bands of a few rows, a last band shorter than the
// rest, one band of the whole grid, stripes, both backends, any depth (periodic grids: the
// buffered writes).
TEST_F(StreamGolden, BandsSharingTheirEdgeBlocks) {
  for (int bt : {1, 3, 0}) {
    Case c{"7pt", {300, 37, 7}, DType::kF32, 5, bt, 1, io::Backend::kUring};
    c.band_rows = 4;
    expect_all_boundaries(c);
    Case w{"wave2", {300, 37, 7}, DType::kF32, 5, bt, 2, io::Backend::kThreads};
    w.band_rows = 5;
    expect_all_boundaries(w);
  }
  Case wide{"13pt", {150, 29, 6}, DType::kF64, 4, 2, 1, io::Backend::kUring};
  wide.band_rows = 8;
  expect_all_boundaries(wide);
  Case one{"wave2", {300, 20, 6}, DType::kF32, 4, 2, 1, io::Backend::kUring};
  one.band_rows = 20;
  expect_all_boundaries(one);
}

// The depths the periodic band tests run: under a sanitizer one (the release stage runs all).
std::vector<int> band_test_depths() {
  return testing::kUnderSanitizer ? std::vector<int>{3} : std::vector<int>{1, 3, 0};
}

// Periodic grids in bands: the bands at the grid's ends read their halo rows across it (two
// reads per plane into one buffer, both O_DIRECT on planes of whole blocks; on others one part
// through the page cache, the larger aligned), and sources near either end reach the bands at
// the other. Planes of whole blocks (f32 rows of 256 bytes, f64 of 256 and 512) and not (rows
// of 92 and 240 bytes), radius 1 and 2, a last band shorter than the rest, forced stages and
// small tiles, any depth.
TEST_F(StreamGolden, PeriodicBandsReadAcrossTheGridsEnds) {
  Probes probes = testing::shot_and_corner();  // (the corner source on row 11)
  SourceSpec top, bottom;
  top.x = 3, top.y = 0, top.z = 4;
  top.series = {1, -0.5, 0.25};
  bottom.x = 60, bottom.y = 47, bottom.z = 8;
  bottom.series = {0.75, 0.5};
  probes.sources.push_back(top);
  probes.sources.push_back(bottom);
  for (int64_t y : {0, 7, 8, 19, 20, 40, 47}) probes.receivers.push_back({"u", 9, y, 5});
  for (int bt : band_test_depths()) {
    for (const char* st : {"7pt", "13pt"}) {
      Case c{st, {64, 48, 9}, DType::kF32, 7, bt, 1, io::Backend::kUring};
      c.band_rows = st == std::string("7pt") ? 8 : 20;
      c.tile_x = 16;
      c.tile_y = 5;
      c.probes = &probes;
      expect_all_boundaries(c);
    }
  }
  Case c{"27pt", {32, 64, 7}, DType::kF64, 6, 4, 1, io::Backend::kThreads};
  c.band_rows = 16;
  c.cache_bt = 2;
  expect_all_boundaries(c);
  c.dtype = DType::kF32;
  c.shape = {64, 64, 7};
  c.bt = 0;
  expect_all_boundaries(c);
}

// The same on budgets of blocks of one z-step: every read buffer's two reads and every write in
// flight at once (the I/O queue holds them all); rows that are not whole blocks, components read
// through stencils, sources and receivers near the grid's ends.
TEST_F(StreamGolden, PeriodicBandsOnBudgetsOfOneZStep) {
  Case tight{"7pt", {1024, 64, 12}, DType::kF32, 4, 1, 1, io::Backend::kUring};
  tight.band_rows = 16;
  tight.mem = 1 << 20;
  expect_all_boundaries(tight);
  tight.shape = {1000, 61, 12};  // (rows of 4000 bytes: the end bands' reads in three parts)
  expect_all_boundaries(tight);
  // Components read through stencils: each component's reads in parts, the wrapped rows of
  // those after the first split where the files' blocks start (the rows before them in the
  // file are the component before's, which must not land over the band's).
  tight.stencil = kCoupledScheme;
  tight.mem = 8 << 20;
  expect_all_boundaries(tight);
  tight.shape = {64, 40, 9};
  tight.band_rows = 8;
  expect_all_boundaries(tight);
  Probes near_the_ends = testing::shot_and_corner();
  for (auto [x, y, z] : {std::tuple{3, 0, 4}, {20, 39, 6}, {11, 1, 2}}) {
    SourceSpec s;
    s.x = x, s.y = y, s.z = z;
    s.series = {1, -0.5, 0.25};
    near_the_ends.sources.push_back(s);
  }
  for (int64_t y : {0, 5, 6, 34, 39}) near_the_ends.receivers.push_back({"u", 9, y, 5});
  for (int bt : band_test_depths()) {
    Case odd{"13pt", {23, 40, 9}, DType::kF32, 6, bt, 1, io::Backend::kThreads};
    odd.band_rows = 6;  // (the first band's halo the smaller part, the last band's the larger)
    odd.probes = &near_the_ends;
    expect_all_boundaries(odd);
    odd.stencil = "7pt";
    odd.dtype = DType::kF64;
    odd.shape = {30, 48, 9};
    odd.band_rows = 20;
    odd.probes = nullptr;
    expect_all_boundaries(odd);
  }
}

// Bands run on the CPU (periodic grids where the halos do not meet);
// the rest is refused with the fix (leave out --band-rows) before anything changes, as is a
// budget that cannot hold one band's planes, and a grid whose in-place sweep was interrupted.
TEST_F(StreamGolden, BandsAreRefusedWhereTheyCannotRun) {
  const Stencil st = testing_stencil("7pt");
  const Manifest m = testing::planning_manifest({64, 48, 20});
  StreamOptions opt;
  opt.mem_budget = 64 << 20;
  opt.band_rows = 8;
  ASSERT_TRUE(plan_stream(m, st, Boundary{}, 6, opt).ok());
  auto expect_refused = [](const Result<StreamPlan>& r, const std::string& why) {
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--band-rows"), std::string::npos);
  };
  const Boundary periodic{Boundary::Kind::kPeriodic, 0};
  ASSERT_TRUE(plan_stream(m, st, periodic, 6, opt).ok());
  StreamOptions tall = opt;
  tall.band_rows = 47;  // (47 rows and one of halo at either end: 49 > 48)
  expect_refused(plan_stream(m, st, periodic, 6, tall), "taller than this periodic grid's 48");
  StreamOptions part = opt;
  part.placement.whole = {64, 96, 20};
  EXPECT_EQ(plan_stream(m, st, Boundary{}, 6, part).value().bands, 6) << "a distributed part's";
  StreamOptions tight = opt;
  tight.mem_budget = 64 << 10;
  expect_refused(plan_stream(m, st, Boundary{}, 6, tight), "in bands of 8 rows");

  // A grid left inside an in-place sweep (an I/O error at its tenth write) finishes that sweep
  // first, in place.
  CreateOptions co;
  co.shape = {64, 48, 20};
  co.init = *parse_init("random:6");
  const std::string dir = root_ + "/interrupted";
  {
    Grid g = Grid::create(dir, co).value();
    StreamOptions in_place;
    in_place.mem_budget = 64 << 20;
    in_place.bt = 3;
    int writes = 0;
    in_place.fault_hook = [&writes](const io::Request& r, int64_t, size_t) -> int64_t {
      return r.op == io::Op::kWrite && ++writes == 10 ? -EIO : 0;
    };
    const StreamPlan whole = plan_stream(g.manifest(), st, Boundary{}, 6, in_place).value();
    ASSERT_FALSE(advance_stream(g, st, Boundary{}, 6, whole, in_place).ok());
  }
  Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
  ASSERT_TRUE(g.sweep_record().has_value());
  const StreamPlan bands = plan_stream(g.manifest(), st, Boundary{}, 6, opt).value();
  const auto r = advance_stream(g, st, Boundary{}, 6, bands, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--resume"), std::string::npos) << r.status().message();
  EXPECT_EQ(g.manifest().step, 0);
}

// A plan decides which components its stages' rings leave out (wave schemes: all but u) and
// sizes its memory by it; a source must add to a component a ring holds. Run with a source that
// its plan did not know of, the engine refuses before changing anything, rather than take more
// memory than planned or leave the source out.
TEST_F(StreamGolden, APlanMadeWithoutTheSourcesIsRefused) {
  const Shape shape{16, 12, 20};
  const Scheme wave2 = testing_scheme("wave2");
  CreateOptions co;
  co.shape = shape;
  co.fields = initial_fields(wave2, {});
  Grid g = Grid::create(root_ + "/unplanned", co).value();
  const auto u = testing::random_values<float>({shape.nx, shape.ny * 3, shape.nz}, 4);
  ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
  StreamOptions opt;
  opt.mem_budget = 16 << 20;
  opt.bt = 3;
  const StreamPlan plan = plan_stream(g.manifest(), wave2, Boundary{}, 6, opt).value();
  Probes given;
  given.sources.push_back({"u@1", 3, 3, 3, 0, 0, 1, {1, 1, 1}});
  const ResolvedProbes sources = resolve_probes(given, shape, wave2.components()).value();
  opt.probes = &sources;
  const auto refused = advance_stream(g, wave2, Boundary{}, 6, plan, opt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(g.manifest().step, 0);
  std::vector<float> got(u.size());
  ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
  EXPECT_EQ(got, u);
  // Planned with them, the source's component stays in the rings and the run goes through.
  const StreamPlan sourced = plan_stream(g.manifest(), wave2, Boundary{}, 6, opt).value();
  EXPECT_EQ(sourced.aliased >> wave2.component_index("u@1") & 1, 0u);
  EXPECT_TRUE(advance_stream(g, wave2, Boundary{}, 6, sourced, opt).ok());
}

// Write buffers of one block (StreamPlan::write_buffers), claimed before the last stage while
// the previous block's writes may still be in flight, give the reference's bits: 7pt and wave8
// (its m in coefficient files, which the write buffers then leave out), both dtypes, every
// boundary (planes of whole 4096-byte blocks, as coefficient files need), blocks of 1 and 2
// z-steps in sweeps of several stages and of one.
TEST_F(StreamGolden, WriteBuffersOfOneBlockGiveTheSameBits) {
  struct Depths {
    int bt, cache_bt, block;  // (not a structured binding: the lambda below reads them)
  };
  for (const std::string name : {"7pt", "wave8"}) {
    for (const DType dtype : {DType::kF32, DType::kF64}) {
      for (const Boundary& b : kBoundaries) {
        for (const Depths d : {Depths{5, 2, 1}, Depths{4, 4, 2}}) {
          Case c{name, {64, 48, 44}, dtype, 9, d.bt, 1, io::Backend::kUring};
          SCOPED_TRACE(describe(c, b) + ", stages of " + std::to_string(d.cache_bt) +
                       ", blocks of " + std::to_string(d.block));
          dispatch_dtype(dtype, [&](auto tag) {
            using T = decltype(tag);
            const Scheme scheme = testing_scheme(name);
            const auto u = initial_values<T>(c, scheme.component_count());
            CreateOptions co;
            co.shape = c.shape;
            co.dtype = dtype;
            co.fields = initial_fields(scheme, {});
            co.coefficient_components = coefficient_components(scheme);
            Grid g = Grid::create(root_ + "/g" + std::to_string(counter_++), co).value();
            ASSERT_TRUE(g.write_planes(0, c.shape.nz, u.data()).ok());
            StreamOptions opt;
            opt.mem_budget = 64 << 20;
            opt.bt = d.bt;
            opt.cache_bt = d.cache_bt;
            opt.block = d.block;
            StreamPlan plan = plan_stream(g.manifest(), scheme, b, c.steps, opt).value();
            plan.write_buffers = d.block;
            plan.io_buffers = 2 * int64_t{d.block};
            EXPECT_EQ(plan.writes_without_coefficients, name == "wave8");
            ASSERT_TRUE(advance_stream(g, scheme, b, c.steps, plan, opt).ok());
            std::vector<T> got(u.size());
            ASSERT_TRUE(g.read_planes(0, c.shape.nz, got.data()).ok());
            const int64_t diff =
                testing::first_bitwise_difference(remembered_reference_run(u, c, scheme, b), got);
            EXPECT_EQ(diff, -1) << "first difference at index " << diff;
            const PlaneHashing hashing = g.manifest().plane_hashing();  // (m's from the window)
            const size_t plane = u.size() / static_cast<size_t>(c.shape.nz);
            for (int64_t z = 0; z < c.shape.nz; ++z) {
              const Status st = g.check_plane_hash(z, plane_hash(got.data() + z * plane, hashing));
              EXPECT_TRUE(st.ok()) << st.message();
            }
          });
        }
      }
    }
  }
}

// A run with subnormals flushed, stopped after two sweeps, is finished in that mode by a bare
// --resume (the run record keeps it), bitwise.
TEST_F(StreamGolden, AStoppedRunResumesWithItsSubnormalMode) {
  Case c{"7pt", {16, 12, 20}, DType::kF32, 12, 3, 1, io::Backend::kUring};
  c.flush_subnormals = true;
  const std::string dir = root_ + "/flushed";
  const auto u = initial_values<float>(c, 1);
  {
    CreateOptions co;
    co.shape = c.shape;
    Grid g = Grid::create(dir, co).value();
    ASSERT_TRUE(g.write_planes(0, c.shape.nz, u.data()).ok());
  }
  RunOptions opt;
  opt.scheme = testing_stencil(c.stencil);
  opt.steps = c.steps;
  opt.method = Method::kStream;
  opt.bt = c.bt;
  opt.mem_budget = c.mem;
  opt.flush_subnormals = true;
  int calls = 0;
  opt.progress = [&](int64_t, int64_t) { return ++calls < 2; };
  const auto stopped = run_grid(dir, opt);
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  ASSERT_EQ(stopped->steps, 6) << "two sweeps of bt 3, then stop";
  RunOptions again;
  again.resume = true;
  again.mem_budget = c.mem;
  const auto resumed = run_grid(dir, again);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_TRUE(resumed->resumed);
  EXPECT_TRUE(resumed->flush_subnormals);
  std::vector<float> got(u.size());
  ASSERT_TRUE(Grid::open(dir).value().read_planes(0, c.shape.nz, got.data()).ok());
  const auto want = flushed_reference_run(u, c, opt.scheme, Boundary{}, nullptr);
  EXPECT_EQ(testing::first_bitwise_difference(want, got), -1);
}

// On a virtual machine every byte a sweep moves also costs the CPUs time (the host's disk
// emulation): the run's plan counts it as compute.
TEST_F(StreamGolden, PlansChargeTheCpuCostOfIoToCompute) {
  const Shape shape{64, 48, 40};
  CreateOptions co;
  co.shape = shape;
  const Grid g = Grid::create(root_ + "/plan", co).value();
  RunOptions ro;
  ro.scheme = testing_stencil("7pt");
  ro.steps = 12;
  ro.method = Method::kStream;
  ro.bt = 4;
  ro.threads = 2;
  ro.mem_budget = 16 << 20;
  MachineProfile machine;
  machine.compute_mlups = 100;
  machine.disk_read_bps = machine.disk_write_bps = 1e9;
  const RunPlan bare = plan_run(g, ro, machine).value();
  machine.io_cpu_seconds_per_byte = 1e-9;
  const RunPlan vm = plan_run(g, ro, machine).value();
  ASSERT_EQ(vm.stream.sweeps, 3);
  const double grid_bytes = static_cast<double>(shape.nz * g.manifest().layout.plane_stride);
  // Per sweep: a read and a write of the grid, the CPU time shared by the 2 threads.
  EXPECT_NEAR(vm.predicted_compute_seconds - bare.predicted_compute_seconds,
              3 * 1e-9 * 2 * grid_bytes / 2, 1e-12);
  EXPECT_EQ(vm.stream.bt, bare.stream.bt) << "a forced bt stays";
  // The updates themselves at the in-core rate, times the tiles' halo work and what blocks
  // and stages cost beyond it, and the engine's own work on every byte a sweep moves (0.3
  // CPU-s per GiB, plan.cc).
  ASSERT_GT(bare.stream.compute_factor, 1);
  ASSERT_GT(bare.stream.redundancy, 1);
  EXPECT_NEAR(bare.predicted_compute_seconds - static_cast<double>(shape.points()) * 12 / 100e6 *
                                                   bare.stream.compute_factor *
                                                   bare.stream.redundancy,
              3 * 0.3 / (1 << 30) * 2 * grid_bytes / 2, 1e-12);
}

// Blocks of every depth: between blocks each (stage, tile) trades its carried planes with the
// threads' rings, so planes pass between tiles, stages and threads; a scheme of several
// fields carries planes of several components.
TEST_F(StreamGolden, BlockSizes) {
  const Shape shape{21, 13, 17};
  for (const char* name : {"13pt", "wave2"}) {
    const Scheme scheme = testing_scheme(name);
    const int n = scheme.component_count();
    for (auto [block, cache_bt] : {std::pair{1, 3}, {2, 1}, {3, 2}, {7, 3}, {40, 2}}) {
      for (const Boundary& b : kBoundaries) {
        SCOPED_TRACE(std::string(name) + ", block " + std::to_string(block) + ", cache bt " +
                     std::to_string(cache_bt) + ", " + b.to_string());
        const std::string dir = root_ + "/b" + std::to_string(counter_++);
        CreateOptions co;
        co.shape = shape;
        co.fields = initial_fields(scheme, {});
        Grid g = Grid::create(dir, co).value();
        const auto u = testing::random_values<float>({shape.nx, shape.ny * n, shape.nz}, 3);
        ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
        StreamOptions opt;
        opt.mem_budget = 64 << 20;
        opt.block = block;
        opt.bt = 3;
        opt.cache_bt = cache_bt;
        opt.tile_x = 8;
        opt.tile_y = 5;
        const StreamPlan plan = plan_stream(g.manifest(), scheme, b, 7, opt).value();
        EXPECT_EQ(plan.block, block);
        ASSERT_TRUE(advance_stream(g, scheme, b, 7, plan, opt).ok());
        std::vector<float> got(u.size());
        ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
        EXPECT_EQ(
            testing::first_bitwise_difference(testing::reference_run(u, shape, scheme, b, 7), got),
            -1);
      }
    }
  }
}

TEST_F(StreamGolden, TiledOnATightBudget) {
  Case c{"13pt", {40, 36, 30}, DType::kF32, 7, 0, 3, io::Backend::kUring};
  c.method = Method::kTiled;
  c.mem = 160 << 10;
  const Manifest m = planning_manifest(c.shape);
  TiledOptions opt;
  opt.mem_budget = c.mem;
  const TiledPlan p = plan_tiled(m, testing_stencil(c.stencil), Boundary{}, c.steps, opt).value();
  EXPECT_GT(p.blocks, 1);
  EXPECT_LE(static_cast<uint64_t>(p.memory_bytes), c.mem);
  expect_all_boundaries(c);
}

// Asked to stop, the tiled method finishes the pass; the grid holds the steps it reports and
// the second copy is gone, whichever copy the pass wrote.
TEST_F(StreamGolden, TiledStopsBetweenPassesAndLeavesNoCopy) {
  const Shape shape{16, 12, 20};
  const Stencil st = testing_stencil("7pt");
  for (int passes : {1, 2}) {
    const std::string dir = root_ + "/stop" + std::to_string(passes);
    CreateOptions co;
    co.shape = shape;
    Grid g = Grid::create(dir, co).value();
    const auto u = testing::random_values<float>(shape, 8);
    ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
    TiledOptions opt;
    opt.mem_budget = 1 << 20;
    opt.bt = 3;
    opt.block_y = 5;
    opt.block_z = 4;
    const TiledPlan plan = plan_tiled(g.manifest(), st, Boundary{}, 12, opt).value();
    int calls = 0;
    const auto stats = advance_tiled(g, st, Boundary{}, 12, plan, [&](int64_t, int64_t) {
                         return ++calls < passes;
                       }).value();
    EXPECT_EQ(stats.steps, 3 * passes);
    EXPECT_EQ(g.manifest().step, stats.steps) << "every pass commits";
    EXPECT_FALSE(fs::exists(g.file_path(0, FileSet::kReplacement))) << "the old copy is gone";
    std::vector<float> got(u.size());
    ASSERT_TRUE(g.read_planes(0, shape.nz, got.data()).ok());
    EXPECT_EQ(testing::first_bitwise_difference(
                  testing::reference_run(u, shape, st, Boundary{}, stats.steps), got),
              -1);
  }
}

}  // namespace
}  // namespace deepgrid

namespace deepgrid {
namespace {

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
