// Coefficient files (store.h, docs/format.md): where they hold what, that grids without them
// (format version 4) still read and run the same and upgrade to them, that damage in them is
// found, that relocate moves them, and what is refused on grids that have them. Every engine's
// results on them are in stream_test (EngineGolden.SchemesWithCoefficientFiles).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/box_io.h"
#include "deepgrid/fsck.h"
#include "deepgrid/integrity.h"
#include "deepgrid/resume.h"
#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "deepgrid/stencil.h"
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

// wave8 (u, u@1, m), striped over two stores in chunks of a few planes, every component
// random, on 32x32 planes (components of 4096 bytes in f32: version 5's records, no padding)
// and on 30x21 planes (components of 2520 bytes: version 6's, the coefficients 944 bytes into
// a record of one block, where the ring's part ends in its last block).
struct Planes {
  Shape shape;
  const char* name;
};
void PrintTo(const Planes& p, std::ostream* os) { *os << p.shape.to_string(); }

class CoefFiles : public ::testing::TestWithParam<Planes> {
 protected:
  static Shape shape() { return GetParam().shape; }
  static int64_t component() { return shape().plane_points() * 4; }
  static bool whole_blocks() { return component() % 4096 == 0; }

  void SetUp() override {
    for (const char* s : {"a0", "a1", "b0", "b1"}) fs::create_directory(tmp_.path() / s);
    values_ = testing::random_values<float>({shape().nx, shape().ny * 3, shape().nz}, 11);
  }
  CreateOptions options(bool coef_files) const {
    CreateOptions opt;
    opt.shape = shape();
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
    EXPECT_TRUE(g.write_planes(0, shape().nz, values_.data()).ok());
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

  testing::TempDir tmp_;
  std::vector<float> values_;
};

TEST_P(CoefFiles, HoldEachPlanesCoefficientsWhileTheRingHoldsItsState) {
  const std::string dir = make("g", true);
  const Grid g = Grid::open(dir).value();
  const Manifest& m = g.manifest();
  EXPECT_EQ(nlohmann::json::parse(slurp(fs::path(dir) / "manifest.json"))["version"],
            whole_blocks() ? 5 : 6);
  ASSERT_TRUE(m.has_coef_files());
  EXPECT_EQ(m.coef_components(), 1);
  const int64_t lead = whole_blocks() ? 0 : 2 * component() % 4096;  // (944 bytes at 30x21)
  const int64_t record = (lead + component() + 4095) / 4096 * 4096;
  EXPECT_EQ(m.layout.plane_stride, (2 * component() + 4095) / 4096 * 4096);
  EXPECT_EQ(m.layout.coef_bytes, component());
  EXPECT_EQ(m.layout.coef_lead(), lead);
  EXPECT_EQ(m.layout.coef_stride(), record);
  ASSERT_EQ(m.layout.coef_files.size(), 2u);
  EXPECT_EQ(m.layout.coef_files[1].path, m.stores[1] + "/deepgrid-" + m.id + ".1.coef.dgd");
  const auto* v = reinterpret_cast<const char*>(values_.data());
  for (int64_t z = 0; z < shape().nz; ++z) {
    const PlaneLocation ring = m.locate(z), coef = m.locate_coef(z);
    const char* plane = v + z * 3 * component();
    EXPECT_EQ(bytes_at(g.file_path(ring.file), ring.offset, 2 * component()),
              std::string(plane, 2 * component()))
        << "plane " << z << "'s u and u@1";
    EXPECT_EQ(bytes_at(g.coef_path(coef.file), coef.offset, record),
              std::string(lead, '\0') + std::string(plane + 2 * component(), component()) +
                  std::string(record - lead - component(), '\0'))
        << "plane " << z << "'s m in its record, the padding zeros";
  }
  // Read whole through buffers aligned for direct I/O or not, planes one at a time or many.
  EXPECT_EQ(read(g), values_);
  internal::AlignedBuffer aligned(values_.size() * sizeof(float));
  ASSERT_TRUE(g.read_planes(2, 9, aligned.data()).ok());
  EXPECT_EQ(std::memcmp(aligned.data(), v + 2 * 3 * component(), 9 * 3 * component()), 0);
  std::vector<float> odd(3 * component() / 4 + 1);
  ASSERT_TRUE(g.read_planes(5, 1, odd.data() + 1).ok());
  EXPECT_EQ(std::memcmp(odd.data() + 1, v + 5 * 3 * component(), 3 * component()), 0);
}

// Boxes of any component read and write where the component is: u@1 in the ring, m in the
// coefficient files; a box written into m is what the grid then holds, checksums and all.
TEST_P(CoefFiles, BoxesOfEveryComponentReadAndWriteInPlace) {
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
                values_[static_cast<size_t>(((z * 3 + c) * shape().ny + y) * shape().nx + x)])
          << "component " << c << " value " << k;
    }
  }
  Box on_m = whole_grid_box(shape());
  on_m.component = 2;
  const std::vector<float> velocity(static_cast<size_t>(shape().points()), 0.25f);
  ASSERT_TRUE(write_box(g, on_m, velocity.data()).ok());
  ASSERT_TRUE(g.enable_verification().ok());
  const std::vector<float> now = read(g);
  for (size_t i = 0; i < now.size(); ++i) {
    const size_t field = i / static_cast<size_t>(component() / 4) % 3;
    ASSERT_EQ(now[i], field == 2 ? 0.25f : values_[i]) << i;
  }
}

// A grid made before version 5 (every component in the ring) reads and runs as it did, to the
// same bits as one with coefficient files; a run writes only the state of the latter. (One
// spare slot: the stream's first sweep grows the ring, which leaves the coefficients alone.)
TEST_P(CoefFiles, GridsWithoutThemRunToTheSameBits) {
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
    // Written: u and u@1 of every plane once per sweep, against all three fields (each a
    // ring's slot, whole blocks: 2 against 3 components at 32x32, one block each at 30x21).
    const int64_t slot = Grid::open(dir)->manifest().layout.plane_stride;
    const int64_t old_slot = Grid::open(old_dir)->manifest().layout.plane_stride;
    EXPECT_EQ(slot, (2 * component() + 4095) / 4096 * 4096);
    EXPECT_EQ(old_slot, (3 * component() + 4095) / 4096 * 4096);
    EXPECT_EQ(run->bytes_written * static_cast<uint64_t>(old_slot),
              old_run->bytes_written * static_cast<uint64_t>(slot))
        << method_name(method);
  }
}

TEST_P(CoefFiles, DamageInThemIsFoundAndNamed) {
  const std::string dir = make("g", true);
  const Manifest m = Grid::open(dir)->manifest();
  const PlaneLocation coef = m.locate_coef(7);
  {
    std::fstream f(m.layout.coef_files[static_cast<size_t>(coef.file)].path,
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(coef.offset + m.layout.coef_lead() + 100);  // (a value of m)
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

TEST_P(CoefFiles, RelocateMovesThemWithTheDataFiles) {
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
TEST_P(CoefFiles, AManifestNamingOneElsewhereIsRefused) {
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
  m["layout"]["coef_bytes"] = 2 * component();  // (the layout would no longer add up)
  EXPECT_EQ(Manifest::from_json(m.dump()).status().code(), ErrorCode::kCorrupt);
}

// Coefficients are constant in time: no source adds to them, and a grid keeping them in place
// cannot gain planes in place (its parts are rewritten instead).
TEST_P(CoefFiles, WhatIsRefusedOnThem) {
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

// The names of the files in the stores and the grid's directory, sorted.
std::vector<std::string> files_in(const std::vector<fs::path>& dirs) {
  std::vector<std::string> names;
  for (const fs::path& d : dirs) {
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.is_regular_file()) names.push_back(e.path().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A grid made before version 5 upgrades to coefficient files: the same values, a checksum
// table that holds, its old data files gone, and from then on the same bits and bytes written
// as a grid made with them. Both have run a sweep first, so the old one's planes have moved
// round its ring (base), which the copy undoes.
TEST_P(CoefFiles, OldGridsUpgradeToThemAndRunToTheSameBits) {
  const std::string old_dir = make("old", false), dir = make("g", true);
  RunOptions opt;
  opt.scheme = Scheme::preset("wave8").value();
  opt.steps = 3;
  opt.method = Method::kStream;
  opt.mem_budget = 1 << 20;
  ASSERT_TRUE(run_grid(old_dir, opt).ok());
  ASSERT_TRUE(run_grid(dir, opt).ok());
  const int64_t old_base = Grid::open(old_dir)->manifest().base;
  {
    Grid g = Grid::open(old_dir, Grid::Mode::kReadWrite).value();
    const Upgrade u = g.upgrade().value();
    EXPECT_EQ(u.from_version, 4);
    EXPECT_EQ(u.to_version, whole_blocks() ? 5 : 6);
    EXPECT_EQ(u.coefficient_files, std::vector<std::string>{"m"});
    EXPECT_FALSE(u.checksums_by_component);      // (new grids of fields hash by component already)
    EXPECT_TRUE(g.manifest().has_coef_files());  // (the Grid goes on with its new files)
    EXPECT_EQ(read(g), read(Grid::open(dir).value()));
  }
  EXPECT_NE(old_base, 0) << "the sweep left the planes where they were: the test lost its point";
  EXPECT_EQ(nlohmann::json::parse(slurp(fs::path(old_dir) / "manifest.json"))["version"],
            whole_blocks() ? 5 : 6);
  {  // (a reader: it holds the grid's lock)
    const Grid g = Grid::open(old_dir).value();
    EXPECT_EQ(g.manifest().base, 0);
    EXPECT_EQ(g.manifest().layout.plane_stride, Grid::open(dir)->manifest().layout.plane_stride);
    const FsckReport report = fsck_grid(g).value();
    EXPECT_EQ(report.planes_checked, shape().nz);
    EXPECT_TRUE(report.damaged.empty());
    // Each store holds the new data file and the coefficients' file, nothing else.
    const std::vector<std::string> files =
        files_in({tmp_.path() / "a0" / "old", tmp_.path() / "a1" / "old", tmp_.path() / "old"});
    std::vector<std::string> expected;
    for (size_t f = 0; f < 2; ++f) {
      expected.push_back(g.file_path(static_cast<int>(f)));
      expected.push_back(g.coef_path(static_cast<int>(f)));
    }
    for (const std::string& own : {checksum_file_name(g.manifest().checksum_generation),
                                   std::string("deepgrid.lock"), std::string("manifest.json")}) {
      expected.push_back((tmp_.path() / "old" / own).string());
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(files, expected);
  }
  // Nothing more to do, and runs from here give what the grid made with them gives.
  EXPECT_TRUE(Grid::open(old_dir, Grid::Mode::kReadWrite)->upgrade()->coefficient_files.empty());
  opt.steps = 5;
  const auto old_run = run_grid(old_dir, opt);
  ASSERT_TRUE(old_run.ok()) << old_run.status().message();
  const auto run = run_grid(dir, opt);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(read(Grid::open(old_dir).value()), read(Grid::open(dir).value()));
  EXPECT_EQ(old_run->bytes_written, run->bytes_written);
}

// A damaged plane stops the upgrade before anything is replaced, naming the file and offset;
// an unfinished sweep and a damaged checksum table are refused; the files of an upgrade that
// never committed go when the grid is next opened to write.
TEST_P(CoefFiles, AnUpgradeThatCannotFinishChangesNothing) {
  const std::string dir = make("old", false);
  const std::vector<fs::path> dirs{tmp_.path() / "a0" / "old", tmp_.path() / "a1" / "old",
                                   tmp_.path() / "old"};
  const Manifest m = Grid::open(dir)->manifest();
  const PlaneLocation at = m.locate(7);
  const std::string damaged = Grid::open(dir)->file_path(at.file);
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at.offset + 2 * component() + 100);  // (a value of m, in the ring)
    f.put('\x7f');
  }
  const std::vector<std::string> before = files_in(dirs);
  const std::string manifest = slurp(fs::path(dir) / "manifest.json");
  {
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    const auto u = g.upgrade();
    ASSERT_FALSE(u.ok());
    EXPECT_EQ(u.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(u.status().message().find(damaged + " at offset " + std::to_string(at.offset)),
              std::string::npos)
        << u.status().message();
  }
  EXPECT_EQ(files_in(dirs), before);
  EXPECT_EQ(slurp(fs::path(dir) / "manifest.json"), manifest);

  SweepRecord sweep;
  sweep.step_from = m.step;
  sweep.levels = 1;
  sweep.spare = m.layout.spare_planes;
  sweep.stencil = Stencil::preset("7pt")->to_json();
  sweep.boundary = "dirichlet:0";
  ASSERT_TRUE(Grid::open(dir, Grid::Mode::kReadWrite)->save_sweep(sweep).ok());
  const auto refused = Grid::open(dir, Grid::Mode::kReadWrite)->upgrade();
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--resume"), std::string::npos)
      << refused.status().message();
  fs::remove(fs::path(dir) / kSweepRecordName);

  // A checksum table that does not read: nothing to check the copy by, so no copy.
  const fs::path table = fs::path(dir) / checksum_file_name(m.checksum_generation);
  const std::string sums = slurp(table);
  std::ofstream(table) << "{";
  const auto unchecked = Grid::open(dir, Grid::Mode::kReadWrite)->upgrade();
  EXPECT_EQ(unchecked.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(unchecked.status().message().find("deepgrid fsck"), std::string::npos)
      << unchecked.status().message();
  std::ofstream(table) << sums;
  EXPECT_EQ(files_in(dirs), before);

  // (what a crash between the copy and the commit leaves: the new data files, the coefficients')
  const std::string coef =
      (tmp_.path() / "a1" / "old" / ("deepgrid-" + m.id + ".1.coef.dgd")).string();
  const std::string data = Grid::open(dir)->file_path(1, FileSet::kReplacement);
  std::ofstream(coef) << "left";
  std::ofstream(data) << "left";
  Grid::open(dir, Grid::Mode::kReadWrite).value();
  EXPECT_EQ(files_in(dirs), before);
}

// An old grid whose checksums hash whole planes (grids of fields before 2026-11-30) gets both
// in one copy: its coefficient files and checksums by component.
TEST_P(CoefFiles, AnUpgradeRecordsChecksumsByComponentToo) {
  const std::string dir = make("old", false);
  {
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    Manifest m = g.manifest();
    m.checksums_by_component = false;
    const auto plane = static_cast<size_t>(3 * component());
    const auto* v = reinterpret_cast<const std::byte*>(values_.data());
    for (int64_t z = 0; z < shape().nz; ++z)
      g.record_plane_hash(z, plane_hash(v + z * plane, plane));
    ASSERT_TRUE(g.commit(m).ok());
  }
  EXPECT_EQ(Grid::open(dir)->manifest().checksum_algorithm(), kChecksumAlgorithm);
  {
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    const Upgrade u = g.upgrade().value();
    EXPECT_EQ(u.coefficient_files, std::vector<std::string>{"m"});
    EXPECT_TRUE(u.checksums_by_component);
  }
  const Grid g = Grid::open(dir).value();
  EXPECT_EQ(g.manifest().checksum_algorithm(), kComponentChecksumAlgorithm);
  const FsckReport report = fsck_grid(g).value();
  EXPECT_EQ(report.planes_checked, shape().nz);
  EXPECT_TRUE(report.damaged.empty());
  EXPECT_EQ(read(g), values_);
}

// `deepgrid info` says where an old grid's coefficients are and how to move them; `deepgrid
// upgrade` moves them and says so, in words and as JSON, and after that has nothing to do.
TEST_P(CoefFiles, TheCommandLineUpgradesAndSaysWhatItDid) {
  const std::string dir = make("old", false);
  testing::RunResult r = testing::run_cli({"info", dir});
  ASSERT_TRUE(testing::Succeeded(r));
  EXPECT_TRUE(testing::contains(r.out,
                                "m in the data files, rewritten by every sweep: 'deepgrid "
                                "upgrade " +
                                    dir + "' moves it to coefficient files"))
      << r;
  r = testing::run_cli({"upgrade", dir});
  ASSERT_TRUE(testing::Succeeded(r));
  EXPECT_EQ(r.out, "upgraded " + dir + " from format version 4 to " + (whole_blocks() ? "5" : "6") +
                       ": m moved to coefficient files (sweeps read them and no longer write "
                       "them)\n");
  EXPECT_FALSE(testing::contains(testing::run_cli({"info", dir}).out, "deepgrid upgrade"));
  r = testing::run_cli({"upgrade", dir, "--json"});
  ASSERT_TRUE(testing::Succeeded(r));
  const nlohmann::json j = testing::parse_one_json_object(r);
  EXPECT_EQ(j["from_version"], j["to_version"]);
  EXPECT_TRUE(j["coefficient_files"].empty());
  EXPECT_EQ(read(Grid::open(dir).value()), values_);
  r = testing::run_cli({"upgrade", (tmp_.path() / "none").string()});
  EXPECT_EQ(r.exit_code, 2) << r;
}

INSTANTIATE_TEST_SUITE_P(Planes, CoefFiles,
                         ::testing::Values(Planes{{32, 32, 13}, "WholeBlocks"},
                                           Planes{{30, 21, 13}, "NotWholeBlocks"}),
                         [](const ::testing::TestParamInfo<Planes>& p) { return p.param.name; });

}  // namespace
}  // namespace deepgrid
