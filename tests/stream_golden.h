// The fixture of the stream test program's golden cases (stream_test.cc, stream_*_cases.cc):
// a Case run through a method on real files and compared bitwise with the scalar reference
// (tests/reference.h) under every boundary, and the device budgets that force each placement.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/run.h"
#include "deepgrid/traces_file.h"
#include "device/device.h"
#include "engines/device_engine.h"
#include "engines/stream_engine.h"
#include "engines/subnormals.h"
#include "reference.h"
#include "temp_dir.h"
#include "test_schemes.h"

namespace deepgrid {

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

inline bool bounded(const GridPlacement& at) {
  return at.needed_lo != GridPlacement{}.needed_lo || at.needed_hi != GridPlacement{}.needed_hi;
}

inline std::string describe(const Case& c, const Boundary& b) {
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
      std::filesystem::create_directory(co.stores.back());
    }
    // Every component random: planes of n components are (ny * n) x nx arrays.
    const auto u = initial_values<T>(c, n);
    std::vector<std::pair<std::string, std::filesystem::file_time_type>> coef_written;
    {  // released before the run opens the grid
      Grid g = Grid::create(dir, co).value();
      ASSERT_TRUE(g.write_planes(0, c.shape.nz, u.data()).ok());
      ASSERT_TRUE(!c.coef_files || g.manifest().has_coef_files());
      for (int f = 0; f < static_cast<int>(g.manifest().layout.coef_files.size()); ++f) {
        coef_written.emplace_back(g.coef_path(f), std::filesystem::last_write_time(g.coef_path(f)));
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
      EXPECT_EQ(std::filesystem::last_write_time(path), written)
          << "the run wrote coefficient file " << path;
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
inline bool device_available() {
  const auto all = device::list_devices();
  return all.ok() && !all->empty();
}

// The device method with a budget just short of the grid's two copies, so that it streams the
// grid through the device as a wavefront (host-resident); grids too thin for the rings of one
// step and one-plane chunks still fit and stay device-resident.
inline uint64_t host_resident_budget(const Case& c, const Scheme& scheme) {
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
inline uint64_t three_tier_host_budget(const Case& c, const Scheme& scheme) {
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
inline void PrintTo(const EngineUnderTest& e, std::ostream* os) {
  *os << method_name(e.method);
  if (e.method == Method::kDevice) *os << " " << placement_name(e.placement);
  if (e.overlapped) *os << " overlapped";
  if (e.band_rows > 0) *os << " in bands of " << e.band_rows << " rows";
  if (e.threads > 0) *os << " at " << e.threads << " thread" << (e.threads > 1 ? "s" : "");
}

}  // namespace deepgrid
