// Checksums by component (integrity.h, "xxh3-64-fields"): one hash of a plane however its
// pieces come; sweeps in bands of rows record and verify them on grids of several fields; grids
// of fields whose checksums hash whole planes (written before them) keep those through
// whole-plane sweeps and are upgraded, every plane checked first, before a sweep in bands.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "damage.h"
#include "deepgrid/fsck.h"
#include "deepgrid/integrity.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "reference.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

TEST(ComponentChecksums, OneHashHoweverThePiecesCome) {
  const int components = 3;
  const size_t component_bytes = 1000;  // (not a multiple of the pieces below)
  std::vector<unsigned char> plane(components * component_bytes);
  for (size_t i = 0; i < plane.size(); ++i) plane[i] = static_cast<unsigned char>(i * 7 + 3);
  const PlaneHashing by_component{true, components, component_bytes};
  const uint64_t whole = plane_hash(plane.data(), by_component);
  EXPECT_NE(whole, plane_hash(plane.data(), plane.size()));
  EXPECT_NE(whole, plane_hash(plane.data(), PlaneHashing{false, components, component_bytes}));

  PlaneHasher in_order(by_component);  // (pieces across the components' ends)
  for (size_t at = 0; at < plane.size(); at += 333) {
    in_order.update(plane.data() + at, std::min<size_t>(333, plane.size() - at));
  }
  EXPECT_EQ(in_order.digest(), whole);

  PlaneHasher interleaved(by_component);  // (as bands of rows give them)
  for (size_t row = 0; row < component_bytes; row += 250) {
    for (int c = components - 1; c >= 0; --c) {
      interleaved.update_component(c, plane.data() + c * component_bytes + row, 250);
    }
  }
  EXPECT_EQ(interleaved.digest(), whole);

  plane[2 * component_bytes + 999] ^= 1;  // the last component's last byte
  EXPECT_NE(plane_hash(plane.data(), by_component), whole);

  // One component: the value's hash, as "xxh3-64" has it.
  const PlaneHashing one{true, 1, component_bytes};
  PlaneHasher one_hasher(one);
  one_hasher.update_component(0, plane.data(), component_bytes);
  EXPECT_EQ(plane_hash(plane.data(), one), plane_hash(plane.data(), component_bytes));
  EXPECT_EQ(one_hasher.digest(), plane_hash(plane.data(), component_bytes));
}

class ComponentChecksumsOnDisk : public ::testing::Test {
 protected:
  // A wave4 grid (three components) of random values, committed; `whole_planes`: its checksums
  // made as grids of fields had them before checksums by component.
  std::vector<float> make(const std::string& dir, const Shape& s, bool whole_planes) {
    CreateOptions co;
    co.shape = s;
    co.fields = initial_fields(wave4_, {});
    Grid g = Grid::create(dir, co).value();
    auto u = testing::random_values<float>({s.nx, s.ny * 3, s.nz}, 3);
    EXPECT_TRUE(g.write_planes(0, s.nz, u.data()).ok());
    Manifest m = g.manifest();
    EXPECT_EQ(m.checksum_algorithm(), kComponentChecksumAlgorithm) << "new grids";
    if (whole_planes) {
      m.checksums_by_component = false;
      const size_t plane = u.size() / static_cast<size_t>(s.nz);
      for (int64_t z = 0; z < s.nz; ++z) {
        g.record_plane_hash(z, plane_hash(u.data() + z * plane, plane * sizeof(float)));
      }
    }
    EXPECT_TRUE(g.commit(m).ok());
    return u;
  }

  RunOptions options(const Boundary& b, int64_t band_rows, bool verify) const {
    RunOptions opt;
    opt.scheme = wave4_;
    opt.steps = 5;
    opt.boundary = b;
    opt.method = Method::kStream;
    opt.mem_budget = 64 << 20;
    opt.band_rows = band_rows;
    opt.verify = verify;
    return opt;
  }

  // The grid's checksum algorithm, after fsck found every plane sound.
  static std::string_view sound_and_hashed_by(const std::string& dir) {
    const Grid g = Grid::open(dir).value();
    const FsckReport r = fsck_grid(g).value();
    EXPECT_FALSE(r.damage_found()) << r.problem;
    EXPECT_EQ(r.planes_checked, g.shape().nz);
    return g.manifest().checksum_algorithm();
  }

  void expect_steps_of_reference(const std::string& dir, const std::vector<float>& u,
                                 const Shape& s, const Boundary& b, int64_t steps) {
    Grid g = Grid::open(dir).value();
    ASSERT_TRUE(g.enable_verification().ok());
    EXPECT_EQ(g.manifest().step, steps);
    std::vector<float> got(u.size());
    ASSERT_TRUE(g.read_planes(0, s.nz, got.data()).ok());
    EXPECT_EQ(
        testing::first_bitwise_difference(testing::reference_run(u, s, wave4_, b, steps), got), -1);
  }

  testing::TempDir root_;
  const Scheme wave4_ = Scheme::preset("wave4").value();
};

// Bands write each component's rows and hash them apart; the next run verifies what it reads
// against those hashes, and fsck finds every plane sound. Rows that wrap across a periodic
// grid's ends on planes of whole blocks (every component's reads and writes O_DIRECT) and not
// (rows of 92 bytes: each component's reads in parts, some through the page cache).
TEST_F(ComponentChecksumsOnDisk, BandsRecordAndVerifyEachComponentsChecksums) {
  char name = 'a';
  for (const Boundary& b : {Boundary{}, Boundary{Boundary::Kind::kPeriodic, 0}}) {
    for (auto [shape, rows] : {std::pair{Shape{64, 48, 9}, 16}, {Shape{23, 40, 9}, 6}}) {
      SCOPED_TRACE(::testing::Message() << b.to_string() << " " << shape.to_string());
      const std::string dir = root_ / std::string(1, name++);
      const std::vector<float> u = make(dir, shape, false);
      for (int run = 0; run < 2; ++run) {
        const auto r = run_grid(dir, options(b, rows, /*verify=*/true));
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_EQ(r->band_rows, rows);
      }
      EXPECT_EQ(sound_and_hashed_by(dir), kComponentChecksumAlgorithm);
      expect_steps_of_reference(dir, u, shape, b, 10);
    }
  }
}

// Whole-plane sweeps keep a grid's checksums of whole planes (and verify by them); a sweep in
// bands first checks every plane by them and then records checksums by component.
TEST_F(ComponentChecksumsOnDisk, WholePlaneChecksumsAreKeptThenUpgradedBeforeBands) {
  const Shape shape{23, 40, 9};
  const Boundary b{Boundary::Kind::kPeriodic, 0};
  const std::string dir = root_ / "old";
  const std::vector<float> u = make(dir, shape, true);
  ASSERT_TRUE(run_grid(dir, options(b, 0, /*verify=*/true)).ok());
  EXPECT_EQ(sound_and_hashed_by(dir), kChecksumAlgorithm);
  const auto banded = run_grid(dir, options(b, 8, /*verify=*/true));
  ASSERT_TRUE(banded.ok()) << banded.status().message();
  EXPECT_EQ(banded->band_rows, 8);
  EXPECT_EQ(sound_and_hashed_by(dir), kComponentChecksumAlgorithm);
  expect_steps_of_reference(dir, u, shape, b, 10);
}

// A damaged plane found while upgrading (the run does not ask to verify: the upgrade checks
// anyway) stops the run before anything changes, naming the file and the plane's offset.
TEST_F(ComponentChecksumsOnDisk, ADamagedPlaneStopsTheUpgradeAndChangesNothing) {
  const Shape shape{23, 40, 9};
  const std::string dir = root_ / "damaged";
  make(dir, shape, true);
  const Manifest before = Grid::open(dir).value().manifest();
  const PlaneLocation at = before.locate(6);
  testing::flip_byte(dir + "/" + before.layout.files[0].path, at.offset + 1000);
  const auto r = run_grid(dir, options(Boundary{}, 8, /*verify=*/false));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.status().message().find("data.0.dgd at offset " + std::to_string(at.offset)),
            std::string::npos)
      << r.status().message();
  const Manifest after = Grid::open(dir).value().manifest();
  EXPECT_EQ(after.step, 0);
  EXPECT_EQ(after.checksum_generation, before.checksum_generation);
  EXPECT_EQ(after.checksum_algorithm(), kChecksumAlgorithm);
}

// Grid::upgrade (`deepgrid upgrade`) of a grid of fields without coefficient fields: the
// checksums by component, every plane checked first, the data files as they were.
TEST_F(ComponentChecksumsOnDisk, AnUpgradeRecordsThemInPlace) {
  const Shape shape{23, 40, 9};
  const std::string dir = root_ / "old";
  make(dir, shape, true);
  const Manifest before = Grid::open(dir).value().manifest();
  {
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    const Upgrade u = g.upgrade().value();
    EXPECT_TRUE(u.checksums_by_component);
    EXPECT_TRUE(u.coefficient_files.empty());
    EXPECT_EQ(u.from_version, kFieldsManifestVersion);
    EXPECT_EQ(u.to_version, kFieldsManifestVersion);
    EXPECT_EQ(g.manifest().layout.files[0].path, before.layout.files[0].path);
    EXPECT_FALSE(g.upgrade()->checksums_by_component);  // (nothing left to do)
  }
  EXPECT_EQ(sound_and_hashed_by(dir), kComponentChecksumAlgorithm);
}

}  // namespace
}  // namespace deepgrid
