// VTKHDF output: files read back through libhdf5 hold the grid's values, and a run's snapshots
// hold bitwise what a run stopped at each snapshot step holds, whatever the method, with a
// stopped and resumed run too. (tests/python/test_paraview.py reads them with VTK's reader.)
#include "deepgrid/vtkhdf.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <string>
#include <vector>

#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "reference.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;

// A dataset's values as doubles (HDF5 converts), with its dimensions.
std::vector<double> read_dataset(const std::string& file, const std::string& name,
                                 std::vector<hsize_t>* dims) {
  std::vector<double> v;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return v;
  const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  if (d >= 0) {
    const hid_t space = H5Dget_space(d);
    dims->assign(static_cast<size_t>(H5Sget_simple_extent_ndims(space)), 0);
    H5Sget_simple_extent_dims(space, dims->data(), nullptr);
    hsize_t n = 1;
    for (hsize_t k : *dims) n *= k;
    v.resize(n);
    H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Sclose(space);
    H5Dclose(d);
  }
  H5Fclose(f);
  return v;
}

// Every value of component `c` of a grid, in (z, y, x) order, as doubles.
template <typename T>
std::vector<double> values_as(const Grid& g, int c) {
  const Shape s = g.shape();
  const size_t plane = static_cast<size_t>(s.plane_points());
  const int comps = g.manifest().components();
  std::vector<T> all(static_cast<size_t>(s.nz) * plane * static_cast<size_t>(comps));
  EXPECT_TRUE(g.read_planes(0, s.nz, all.data()).ok());
  std::vector<double> out;
  for (int64_t z = 0; z < s.nz; ++z) {
    const T* p = all.data() + static_cast<size_t>(z * comps + c) * plane;
    out.insert(out.end(), p, p + plane);
  }
  return out;
}

std::vector<double> values_of(const std::string& dir, int c) {
  const Grid g = Grid::open(dir).value();
  return g.dtype() == DType::kF32 ? values_as<float>(g, c) : values_as<double>(g, c);
}

std::string make_wave_grid(const std::string& dir, DType dtype) {
  CreateOptions co;
  co.shape = {13, 11, 9};  // odd extents: padded planes
  co.dtype = dtype;
  const Scheme s = Scheme::preset("wave2").value();
  co.fields = initial_fields(s, {});
  co.fields.front().init = InitSpec{InitSpec::Kind::kRandom, 0, 7};
  co.fields.back().init = InitSpec{InitSpec::Kind::kConst, 0.1, 0};
  co.scheme = s.to_json();
  EXPECT_TRUE(Grid::create(dir, co).ok());
  return dir;
}

TEST(Vtkhdf, EveryFieldDownsampledWithItsSpacing) {
  testing::TempDir tmp;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const std::string dir = make_wave_grid(tmp / "w", dtype);
    VtkhdfOptions o;
    o.spacing = {2, 3, 4};
    o.downsample = 3;
    const std::string file = tmp / "w.vtkhdf";
    ASSERT_TRUE(export_vtkhdf(Grid::open(dir).value(), file, o).ok());
    const Grid g = Grid::open(dir).value();
    for (int c = 0; c < g.manifest().components(); ++c) {
      std::vector<hsize_t> dims;
      const std::vector<double> got =
          read_dataset(file, "/VTKHDF/PointData/" + g.manifest().fields[c], &dims);
      ASSERT_EQ(dims, (std::vector<hsize_t>{3, 4, 5}));  // 9/3, 11 -> 0,3,6,9, 13 -> 0..12
      const std::vector<double> all = values_of(dir, c);
      size_t i = 0;
      for (int64_t z = 0; z < 9; z += 3) {
        for (int64_t y = 0; y < 11; y += 3) {
          for (int64_t x = 0; x < 13; x += 3, ++i) {
            ASSERT_EQ(got[i], all[static_cast<size_t>((z * 11 + y) * 13 + x)]) << c;
          }
        }
      }
    }
    fs::remove_all(dir);
  }
}

TEST(Vtkhdf, BadOptionsAreRefusedAndWriteNothing) {
  testing::TempDir tmp;
  const std::string dir = make_wave_grid(tmp / "w", DType::kF32);
  const Grid g = Grid::open(dir).value();
  VtkhdfOptions o;
  o.downsample = 0;
  EXPECT_EQ(export_vtkhdf(g, tmp / "a.vtkhdf", o).code(), ErrorCode::kInvalidArgument);
  o = {};
  o.spacing[1] = -1;
  EXPECT_EQ(export_vtkhdf(g, tmp / "a.vtkhdf", o).code(), ErrorCode::kInvalidArgument);
  o = {};
  o.components = {5};
  EXPECT_EQ(export_vtkhdf(g, tmp / "a.vtkhdf", o).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp / "a.vtkhdf"));
  // A directory that cannot be written: an I/O error, and no file left behind.
  EXPECT_FALSE(export_vtkhdf(g, tmp / "missing/a.vtkhdf", {}).ok());
}

// Snapshots every 4 steps of a 10-step run from step 0 (steps 0, 4, 8) equal the grid of a
// plain run stopped at those steps, for every method that can stop on its way.
class Snapshots : public ::testing::TestWithParam<Method> {};

TEST_P(Snapshots, HoldWhatARunStoppedThereHolds) {
  testing::TempDir tmp;
  const std::string dir = make_wave_grid(tmp / "w", DType::kF64);
  const std::string ref = make_wave_grid(tmp / "ref", DType::kF64);
  RunOptions opt;
  opt.steps = 10;
  opt.method = GetParam();
  if (opt.method == Method::kStream || opt.method == Method::kNaive) opt.mem_budget = 1 << 20;
  opt.snapshots = {tmp / "snaps", 4, {}};
  const RunReport r = run_grid(dir, opt).value();
  EXPECT_EQ(r.snapshots, 3);
  EXPECT_EQ(series_steps(tmp / "snaps").value(), (std::vector<int64_t>{0, 4, 8}));
  int64_t at = 0;
  for (int64_t step : {0, 4, 8}) {
    RunOptions plain;
    plain.steps = step - at;
    at = step;
    ASSERT_TRUE(run_grid(ref, plain).ok());
    for (int c = 0; c < 3; ++c) {
      std::vector<hsize_t> dims;
      const std::string name = Grid::open(ref).value().manifest().fields[c];
      EXPECT_EQ(read_dataset(tmp / ("snaps/" + series_file_name(step)), "/VTKHDF/PointData/" + name,
                             &dims),
                values_of(ref, c))
          << "step " << step << " field " << name;
    }
  }
  // The index lists every file, a time slice per step.
  std::vector<hsize_t> dims;
  const auto u =
      read_dataset(tmp / (std::string("snaps/") + kSeriesIndexName), "/VTKHDF/PointData/u", &dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{3, 9, 11, 13}));
  EXPECT_EQ(std::vector<double>(u.begin() + 2 * 9 * 11 * 13, u.end()), values_of(ref, 0));
}

INSTANTIATE_TEST_SUITE_P(Methods, Snapshots,
                         ::testing::Values(Method::kInCore, Method::kStream, Method::kNaive,
                                           Method::kMmap),
                         [](const auto& param) { return std::string(method_name(param.param)); });

TEST(SnapshotsOfAStoppedRun, AreCompletedByItsResume) {
  testing::TempDir tmp;
  const std::string dir = make_wave_grid(tmp / "w", DType::kF32);
  RunOptions opt;
  opt.steps = 12;
  opt.method = Method::kStream;
  opt.mem_budget = 1 << 20;
  opt.bt = 2;
  opt.snapshots = {tmp / "snaps", 3, {}};
  opt.progress = [](int64_t done, int64_t) { return done < 5; };  // stops after a pass past 5
  const RunReport stopped = run_grid(dir, opt).value();
  ASSERT_LT(stopped.step_to, 12);
  opt.progress = {};
  opt.resume = true;
  ASSERT_TRUE(run_grid(dir, opt).ok());
  EXPECT_EQ(series_steps(tmp / "snaps").value(), (std::vector<int64_t>{0, 3, 6, 9, 12}));
  std::vector<hsize_t> dims;
  EXPECT_EQ(read_dataset(tmp / ("snaps/" + series_file_name(12)), "/VTKHDF/PointData/u", &dims),
            values_of(dir, 0));
}

TEST(SnapshotsRefused, BeforeAnythingChanges) {
  testing::TempDir tmp;
  const std::string dir = make_wave_grid(tmp / "w", DType::kF32);
  RunOptions opt;
  opt.steps = 4;
  opt.snapshots = {tmp / "snaps", 2, {}};
  opt.method = Method::kTiled;
  opt.mem_budget = 1 << 20;
  EXPECT_EQ(run_grid(dir, opt).status().code(), ErrorCode::kInvalidArgument);
  opt.method = Method::kAuto;
  opt.snapshots.every = -2;
  EXPECT_EQ(run_grid(dir, opt).status().code(), ErrorCode::kInvalidArgument);
  opt.snapshots.every = 2;
  ASSERT_TRUE(run_grid(dir, opt).ok());
  // The same directory with other points: refused, the grid stays at its step.
  opt.snapshots.format.downsample = 2;
  EXPECT_EQ(run_grid(dir, opt).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Grid::open(dir).value().manifest().step, 4);
  EXPECT_FALSE(fs::exists(tmp / "w/run.json"));
}

}  // namespace
}  // namespace deepgrid
