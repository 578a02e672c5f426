// What the programs of mpi_test share: a directory every rank sees, the runs of a case
// compared with the scalar reference (rank 0 compares; the gathering is collective), and the
// cases' grids and process grids. Every helper that calls the library is collective.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "deepgrid/traces_file.h"
#include "engines/subnormals.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "reference.h"
#include "test_schemes.h"

namespace deepgrid::mpi_testing {

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
  uint64_t device_mem = 0;                // the device method's budget; 0: the device's memory
  int64_t band_rows = kAutoBandRows;      // streamed parts: RunOptions::band_rows
};

// A stencil or scheme preset, or a scheme's or a stencil's JSON text (a user's kernel's too).
inline Scheme testing_scheme(const std::string& name) {
  if (name.rfind(R"({"points")", 0) == 0) return Stencil::from_json(name).value();
  if (name.front() == '{') return Scheme::from_json(name).value();
  return Scheme::resolve(name).value();
}

inline RunOptions options_for(const Case& c) {
  RunOptions opt;
  opt.scheme = testing_scheme(c.stencil);
  opt.boundary = c.boundary;
  opt.steps = c.steps;
  opt.bt = c.bt;
  opt.threads = 1;
  opt.method = c.method;
  opt.device_mem = c.device_mem;
  opt.flush_subnormals = c.flush_subnormals;
  opt.band_rows = c.band_rows;
  if (!c.mem.empty()) opt.mem_budget = *parse_size(c.mem);
  return opt;
}

inline CreateOptions random_grid(const Shape& shape, DType dtype) {
  CreateOptions opt;
  opt.shape = shape;
  opt.dtype = dtype;
  opt.init = {InitSpec::Kind::kRandom, 0, 11};
  return opt;
}

// The random values of component c of a new grid: seed 11 + c.
inline InitSpec random_component(int c) { return {InitSpec::Kind::kRandom, 0, 11 + uint64_t(c)}; }

// A grid of the scheme's fields (one field for a plain stencil), every component random.
inline CreateOptions random_grid(const Shape& shape, DType dtype, const Scheme& scheme) {
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
      // Bands asked for: every part swept in them, and the reports say so.
      if (c.band_rows > 0) {
        EXPECT_GT(f.band_rows, 0) << "rank " << f.rank;
        EXPECT_LE(f.band_rows, report->total.band_rows);
      }
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

inline void expect_case(const Case& c) {
  if (c.dtype == DType::kF32) {
    expect_runs_match_reference<float>({c});
  } else {
    expect_runs_match_reference<double>({c});
  }
}

inline const Boundary kDirichlet{Boundary::Kind::kDirichlet, 0.5};
inline const Boundary kNeumann{Boundary::Kind::kNeumann};
inline const Boundary kPeriodic{Boundary::Kind::kPeriodic};

// The process grids of this job's ranks that split x or y (z-slabs are the tests above) into
// at most 3 pieces: 2x1x1 and 1x2x1 (P = 2), 3x1x1 and 1x3x1 (P = 3), 2x2x1, 2x1x2 and 1x2x2
// (P = 4); 4x1x1 and 1x4x1 would only repeat the 1D splits at more cost.
inline std::vector<ProcessGrid> grids_splitting_x_or_y() {
  std::vector<ProcessGrid> out;
  const int n = mpi::size();
  for (int px = 1; px <= std::min(n, 3); ++px) {
    for (int py = 1; py <= 3 && px * py <= n; ++py) {
      if (n % (px * py) == 0 && px * py > 1) out.push_back({{px, py, n / (px * py)}});
    }
  }
  return out;
}

// A shot and receivers on a grid of 17 x 12 x 14: a source on the blocks' sides (x = 8 | 9 at
// px = 2, z = 7 | 7 at pz = 2), one in a corner (its periodic copies lie in the halos of
// parts at the far ends) and one in the opposite corner; receivers on the blocks' edges along x
// (6 | 6 at px = 3) and z (4 | 4, 5 | 5, 10 | 10, 11 | 11 at pz = 3, 4), and one of an older level.
inline Probes shot_and_receivers(bool older_level) {
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

}  // namespace deepgrid::mpi_testing
