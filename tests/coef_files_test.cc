// Coefficient files (store.h, docs/format.md): where they hold what, that grids without them
// (format version 4) still read and run the same, that damage in them is found, that relocate
// moves them, and what is refused on grids that have them. Every engine's results on them are
// in stream_test (EngineGolden.SchemesWithCoefficientFiles).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/box_io.h"
#include "deepgrid/fsck.h"
#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "deepgrid/store.h"
#include "reference.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// wave8 (u, u@1, m) on 32x32 planes (components of 4096 bytes in f32), striped over two
// stores in chunks of a few planes, every component random.
class CoefFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* s : {"a0", "a1", "b0", "b1"}) fs::create_directory(tmp_.path() / s);
    values_ = testing::random_values<float>({kShape.nx, kShape.ny * 3, kShape.nz}, 11);
  }
  CreateOptions options(bool coef_files) const {
    CreateOptions opt;
    opt.shape = kShape;
    EXPECT_TRUE(create_for_scheme(Scheme::preset("wave8").value(), opt).ok());
    if (!coef_files) opt.coefficient_components = 0;  // as grids made before version 5
    opt.stores = {tmp_ / "a0", tmp_ / "a1"};
    opt.chunk_target_bytes = 5 * 4096;
    opt.spare_planes = 1;
    return opt;
  }
  std::string make(const std::string& name, bool coef_files) {
    std::vector<std::string> stores;
    CreateOptions opt = options(coef_files);
    if (name != "g") {  // (its own stores: relocate moves g's alone)
      for (std::string& s : opt.stores) {
        s += "/" + name;
        fs::create_directory(s);
      }
    }
    Grid g = Grid::create(tmp_ / name, opt).value();
    EXPECT_TRUE(g.write_planes(0, kShape.nz, values_.data()).ok());
    EXPECT_TRUE(g.commit(g.manifest()).ok());
    return tmp_ / name;
  }
  static std::vector<float> read(const Grid& g) {
    std::vector<float> v(static_cast<size_t>(g.shape().points() * 3));
    EXPECT_TRUE(g.read_planes(0, g.shape().nz, v.data()).ok());
    return v;
  }
  // Bytes [offset, offset + n) of a file.
  static std::string bytes_at(const std::string& path, int64_t offset, int64_t n) {
    return slurp(path).substr(static_cast<size_t>(offset), static_cast<size_t>(n));
  }

  static constexpr Shape kShape{32, 32, 13};
  static constexpr int64_t kComponent = 32 * 32 * 4;
  testing::TempDir tmp_;
  std::vector<float> values_;
};

TEST_F(CoefFiles, HoldEachPlanesCoefficientsWhileTheRingHoldsItsState) {
  const std::string dir = make("g", true);
  const Grid g = Grid::open(dir).value();
  const Manifest& m = g.manifest();
  EXPECT_EQ(nlohmann::json::parse(slurp(fs::path(dir) / "manifest.json"))["version"], 5);
  ASSERT_TRUE(m.has_coef_files());
  EXPECT_EQ(m.coef_components(), 1);
  EXPECT_EQ(m.layout.plane_stride, 2 * kComponent);
  EXPECT_EQ(m.layout.coef_bytes, kComponent);
  ASSERT_EQ(m.layout.coef_files.size(), 2u);
  EXPECT_EQ(m.layout.coef_files[1].path, m.stores[1] + "/deepgrid-" + m.id + ".1.coef.dgd");
  const auto* v = reinterpret_cast<const char*>(values_.data());
  for (int64_t z = 0; z < kShape.nz; ++z) {
    const PlaneLocation ring = m.locate(z), coef = m.locate_coef(z);
    const char* plane = v + z * 3 * kComponent;
    EXPECT_EQ(bytes_at(g.file_path(ring.file), ring.offset, 2 * kComponent),
              std::string(plane, 2 * kComponent))
        << "plane " << z << "'s u and u@1";
    EXPECT_EQ(bytes_at(g.coef_path(coef.file), coef.offset, kComponent),
              std::string(plane + 2 * kComponent, kComponent))
        << "plane " << z << "'s m";
  }
  // Read whole through buffers aligned for direct I/O or not, planes one at a time or many.
  EXPECT_EQ(read(g), values_);
  internal::AlignedBuffer aligned(values_.size() * sizeof(float));
  ASSERT_TRUE(g.read_planes(2, 9, aligned.data()).ok());
  EXPECT_EQ(std::memcmp(aligned.data(), v + 2 * 3 * kComponent, 9 * 3 * kComponent), 0);
  std::vector<float> odd(3 * kComponent / 4 + 1);
  ASSERT_TRUE(g.read_planes(5, 1, odd.data() + 1).ok());
  EXPECT_EQ(std::memcmp(odd.data() + 1, v + 5 * 3 * kComponent, 3 * kComponent), 0);
}

// Boxes of any component read and write where the component is: u@1 in the ring, m in the
// coefficient files; a box written into m is what the grid then holds, checksums and all.
TEST_F(CoefFiles, BoxesOfEveryComponentReadAndWriteInPlace) {
  const std::string dir = make("g", true);
  Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
  const Box box{{2, 5, 2}, {3, 7, 1}, {1, 9, 3}};
  for (int c : {1, 2}) {
    Box b = box;
    b.component = c;
    std::vector<float> got(static_cast<size_t>(b.points()));
    ASSERT_TRUE(read_box(g, b, got.data()).ok());
    for (int64_t k = 0; k < b.points(); ++k) {
      const int64_t z = b.z.start + k / (b.y.count * b.x.count) * b.z.step;
      const int64_t y = b.y.start + k / b.x.count % b.y.count;
      const int64_t x = b.x.start + k % b.x.count * b.x.step;
      ASSERT_EQ(got[static_cast<size_t>(k)],
                values_[static_cast<size_t>(((z * 3 + c) * kShape.ny + y) * kShape.nx + x)])
          << "component " << c << " value " << k;
    }
  }
  Box on_m = whole_grid_box(kShape);
  on_m.component = 2;
  const std::vector<float> velocity(static_cast<size_t>(kShape.points()), 0.25f);
  ASSERT_TRUE(write_box(g, on_m, velocity.data()).ok());
  ASSERT_TRUE(g.enable_verification().ok());
  const std::vector<float> now = read(g);
  for (size_t i = 0; i < now.size(); ++i) {
    const size_t component = i / static_cast<size_t>(kComponent / 4) % 3;
    ASSERT_EQ(now[i], component == 2 ? 0.25f : values_[i]) << i;
  }
}

// A grid made before version 5 (every component in the ring) reads and runs as it did, to the
// same bits as one with coefficient files; a run writes only the state of the latter. (One
// spare slot: the stream's first sweep grows the ring, which leaves the coefficients alone.)
TEST_F(CoefFiles, GridsWithoutThemRunToTheSameBits) {
  const std::string old_dir = make("old", false), dir = make("g", true);
  EXPECT_EQ(nlohmann::json::parse(slurp(fs::path(old_dir) / "manifest.json"))["version"], 4);
  EXPECT_FALSE(Grid::open(old_dir)->manifest().has_coef_files());
  for (Method method : {Method::kStream, Method::kInCore}) {
    RunOptions opt;
    opt.scheme = Scheme::preset("wave8").value();
    opt.steps = 6;
    opt.method = method;
    opt.mem_budget = method == Method::kStream ? 1 << 20 : 0;  // (the stream: a few planes)
    const auto old_run = run_grid(old_dir, opt);
    ASSERT_TRUE(old_run.ok()) << old_run.status().message();
    const auto run = run_grid(dir, opt);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(read(Grid::open(dir).value()), read(Grid::open(old_dir).value()));
    // Written: u and u@1 of every plane once per sweep, against all three fields.
    EXPECT_EQ(run->bytes_written * 3, old_run->bytes_written * 2) << method_name(method);
  }
}

TEST_F(CoefFiles, DamageInThemIsFoundAndNamed) {
  const std::string dir = make("g", true);
  const Manifest m = Grid::open(dir)->manifest();
  const PlaneLocation coef = m.locate_coef(7);
  {
    std::fstream f(m.layout.coef_files[static_cast<size_t>(coef.file)].path,
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(coef.offset + 100);
    f.put('\x7f');
  }
  Grid g = Grid::open(dir).value();
  const FsckReport report = fsck_grid(g).value();
  ASSERT_EQ(report.damaged.size(), 1u);
  EXPECT_EQ(report.damaged[0].z, 7);
  EXPECT_EQ(report.damaged[0].coef_file, g.coef_path(coef.file));
  EXPECT_EQ(report.damaged[0].coef_offset, coef.offset);
  ASSERT_TRUE(g.enable_verification().ok());
  const Status st = read_every_plane(g);
  EXPECT_EQ(st.code(), ErrorCode::kCorrupt);
  EXPECT_NE(st.message().find(".coef.dgd at offset " + std::to_string(coef.offset)),
            std::string::npos)
      << st.message();
  // A coefficient file shorter than the manifest says: the grid does not open.
  fs::resize_file(m.layout.coef_files[0].path, 4096);
  EXPECT_EQ(Grid::open(dir).status().code(), ErrorCode::kCorrupt);
}

TEST_F(CoefFiles, RelocateMovesThemWithTheDataFiles) {
  const std::string dir = make("g", true);
  const Relocation r = relocate_grid(dir, {tmp_ / "b0", tmp_ / "b1"}).value();
  EXPECT_EQ(r.copied, 4);  // two data files, two coefficient files
  EXPECT_TRUE(r.checked);
  EXPECT_TRUE(fs::is_empty(tmp_.path() / "a0"));
  const Grid g = Grid::open(dir).value();
  EXPECT_EQ(g.manifest().layout.coef_files[0].path,
            (tmp_.path() / "b0" / ("deepgrid-" + g.manifest().id + ".0.coef.dgd")).string());
  EXPECT_EQ(read(g), values_);
}

// A manifest naming a coefficient file anywhere but where deepgrid puts it is refused
// (docs/security.md).
TEST_F(CoefFiles, AManifestNamingOneElsewhereIsRefused) {
  const std::string dir = make("g", true);
  const auto manifest = nlohmann::json::parse(slurp(fs::path(dir) / "manifest.json"));
  const std::string id = manifest["id"];
  for (const std::string& crafted :
       {std::string("/etc/passwd"), std::string("coef.0.dgd"),
        (tmp_.path() / "a0" / ("deepgrid-" + id + ".0.dgd")).string(),
        (tmp_.path() / "a1" / ("deepgrid-" + id + ".0.coef.dgd")).string()}) {
    auto m = manifest;
    m["layout"]["coef_files"][0]["path"] = crafted;
    const Status st = Manifest::from_json(m.dump()).status();
    EXPECT_EQ(st.code(), ErrorCode::kCorrupt) << crafted;
    EXPECT_NE(st.message().find("docs/security.md"), std::string::npos) << st.message();
  }
  auto m = manifest;
  m["layout"]["coef_bytes"] = 2 * kComponent;  // (the layout would no longer add up)
  EXPECT_EQ(Manifest::from_json(m.dump()).status().code(), ErrorCode::kCorrupt);
}

// Coefficients are constant in time: no source adds to them, and a grid keeping them in place
// cannot gain planes in place (its parts are rewritten instead).
TEST_F(CoefFiles, WhatIsRefusedOnThem) {
  const std::string dir = make("g", true);
  RunOptions opt;
  opt.scheme = Scheme::preset("wave8").value();
  opt.steps = 2;
  SourceSpec on_m;
  on_m.field = "m";
  on_m.x = on_m.y = on_m.z = 3;
  opt.probes.sources.push_back(on_m);
  const auto refused = run_grid(dir, opt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("coefficient field"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(read(Grid::open(dir).value()), values_);
  Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
  EXPECT_FALSE(g.can_add_planes());
  EXPECT_EQ(g.add_planes(1, 0).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepgrid
