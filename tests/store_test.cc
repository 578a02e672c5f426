// The on-disk grid: layout, striping, round trips, atomic manifests, damage detection, and a
// stored run against the reference.
#include "deepgrid/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/checksum.h"
#include "deepgrid/npy.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/run.h"
#include "reference.h"
#include "store/grid_files.h"
#include "store/grid_paths.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_ / name; }

  testing::TempDir tmp_;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <typename T>
std::vector<T> read_all(const Grid& g) {
  std::vector<T> v(static_cast<size_t>(g.shape().points()));
  EXPECT_TRUE(g.read_planes(0, g.shape().nz, v.data()).ok());
  return v;
}

TEST(Layout, PlanesArePaddedForDirectIoAndChunksStriped) {
  const Layout l = plan_layout({100, 30, 50}, DType::kF32, 3, 64 << 10, 0).value();
  EXPECT_EQ(l.plane_bytes, 12000);
  EXPECT_EQ(l.plane_stride, 12288);
  EXPECT_EQ(l.planes_per_chunk, 5);
  ASSERT_EQ(l.files.size(), 3u);
  Manifest m;
  m.shape = {100, 30, 50};
  m.layout = l;
  // 10 chunks over 3 files: file 0 holds chunks 0, 3, 6, 9.
  EXPECT_EQ(m.locate(0).file, 0);
  EXPECT_EQ(m.locate(5).file, 1);
  EXPECT_EQ(m.locate(15).file, 0);
  EXPECT_EQ(m.locate(15).offset, l.chunk_bytes());
  EXPECT_EQ(m.locate(47).offset, 3 * l.chunk_bytes() + 2 * l.plane_stride);
  EXPECT_EQ(l.files[0].bytes, 4 * l.chunk_bytes());
  EXPECT_EQ(l.files[1].bytes, 3 * l.chunk_bytes());
}

TEST_F(StoreTest, CreateWritesTheInitialConditionAndOpensAgain) {
  CreateOptions opt;
  opt.shape = {37, 23, 19};
  opt.dtype = DType::kF64;
  opt.init = *parse_init("random:5");
  opt.chunk_target_bytes = 16384;  // several chunks
  ASSERT_TRUE(Grid::create(path("g"), opt).ok());
  Grid g = Grid::open(path("g")).value();
  EXPECT_EQ(g.shape(), opt.shape);
  EXPECT_EQ(g.dtype(), DType::kF64);
  EXPECT_EQ(g.manifest().step, 0);
  ASSERT_EQ(g.manifest().history.size(), 1u);
  EXPECT_EQ(read_all<double>(g), testing::random_values<double>(opt.shape, 5));
  EXPECT_FALSE(fs::exists(path("g/manifest.json.tmp")));
}

TEST_F(StoreTest, StripesOverThreeDirectoriesRoundTrip) {
  for (const char* d : {"s0", "s1", "s2"}) fs::create_directory(path(d));
  CreateOptions opt;
  opt.shape = {33, 17, 41};
  opt.stores = {path("s0"), path("s1"), path("s2")};
  opt.chunk_target_bytes = 4096 * 3;
  const auto values = testing::random_values<float>(opt.shape, 77);
  {
    Grid g = Grid::create(path("g"), opt).value();
    ASSERT_EQ(g.manifest().layout.files.size(), 3u);
    for (const char* d : {"s0", "s1", "s2"}) {
      EXPECT_EQ(std::distance(fs::directory_iterator(path(d)), fs::directory_iterator{}), 1) << d;
    }
    ASSERT_TRUE(g.write_planes(0, opt.shape.nz, values.data()).ok());
  }
  Grid again = Grid::open(path("g")).value();
  EXPECT_EQ(read_all<float>(again), values);
  // Partial reads that straddle chunks and files.
  std::vector<float> part(static_cast<size_t>(7 * opt.shape.plane_points()));
  ASSERT_TRUE(again.read_planes(2, 7, part.data()).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), values.begin() + 2 * opt.shape.plane_points()));
  EXPECT_FALSE(again.read_planes(40, 2, part.data()).ok());
}

// Planes of whole 4096-byte blocks go straight between the files and an aligned buffer, and
// through a bounce buffer from any other address: both ways give the same planes, and the
// hashes recorded by either kind of write verify on reading (chunks of 3 planes over two
// directories, so that runs straddle chunks and files).
TEST_F(StoreTest, AlignedBuffersReadAndWriteLikeAnyOther) {
  for (const char* d : {"s0", "s1"}) fs::create_directory(path(d));
  CreateOptions opt;
  opt.shape = {32, 32, 20};  // f32 planes of 4096 bytes
  opt.stores = {path("s0"), path("s1")};
  opt.chunk_target_bytes = 4096 * 3;
  const auto values = testing::random_values<float>(opt.shape, 5);
  const int64_t plane = opt.shape.plane_points();
  const size_t bytes = values.size() * sizeof(float);
  internal::AlignedBuffer aligned(bytes), shifted(bytes + 64);
  ASSERT_TRUE(aligned.ok() && shifted.ok());
  auto* at_page = aligned.data<float>();
  auto* off_page = reinterpret_cast<float*>(shifted.data() + 64);
  {
    Grid g = Grid::create(path("g"), opt).value();
    ASSERT_EQ(g.manifest().layout.plane_stride, g.manifest().layout.plane_bytes);
    std::memcpy(at_page, values.data(), bytes);
    std::memcpy(off_page, values.data(), bytes);
    ASSERT_TRUE(g.write_planes(0, 11, at_page).ok());
    ASSERT_TRUE(g.write_planes(11, 9, off_page + 11 * plane).ok());
    ASSERT_TRUE(g.commit(g.manifest()).ok());
  }
  Grid again = Grid::open(path("g")).value();
  ASSERT_TRUE(again.enable_verification().ok());
  std::memset(aligned.data(), 0, bytes);
  std::memset(shifted.data(), 0, bytes + 64);
  ASSERT_TRUE(again.read_planes(1, 19, at_page + plane).ok());
  ASSERT_TRUE(again.read_planes(0, 20, off_page).ok());
  ASSERT_TRUE(again.read_planes(0, 1, at_page).ok());
  EXPECT_EQ(std::memcmp(at_page, values.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(off_page, values.data(), bytes), 0);
}

// A summary's figures against the plain formulas, over planes of 7x5 (not a multiple of the
// summary's 8 lanes) holding NaNs, negative values and a plane of NaNs only; and a summary of
// no finite value has NaN for min, max and mean.
TEST(Summary, FiguresLeaveOutNaNsAndMatchThePlainFormulas) {
  const Shape s{7, 5, 4};
  auto values = testing::random_values<double>(s, 3);
  for (size_t i = 0; i < values.size(); ++i) values[i] -= 0.25;
  for (size_t i = 0; i < 35; i += 3) values[i] = std::nan("");
  for (size_t i = 70; i < 105; ++i) values[i] = std::nan("");
  const auto planes = [&](const std::function<Status(int64_t, const void*)>& use) {
    for (int64_t z = 0; z < s.nz; ++z) {
      DG_RETURN_IF_ERROR(use(z, values.data() + z * s.plane_points()));
    }
    return Status::Ok();
  };
  const GridSummary got = summarize_planes(s, DType::kF64, planes).value();
  int64_t nans = 0, finite = 0;
  double lo = 1e300, hi = -1e300, sum = 0, sum_sq = 0;
  for (double x : values) {
    if (std::isnan(x)) {
      ++nans;
      continue;
    }
    ++finite;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_EQ(got.nan_count, nans);
  EXPECT_EQ(got.min, lo);
  EXPECT_EQ(got.max, hi);
  EXPECT_NEAR(got.mean, sum / static_cast<double>(finite), 1e-15);
  EXPECT_NEAR(got.l2, std::sqrt(sum_sq), 1e-14);
  std::fill(values.begin(), values.end(), std::nan(""));
  const GridSummary none = summarize_planes(s, DType::kF64, planes).value();
  EXPECT_EQ(none.nan_count, s.points());
  EXPECT_TRUE(std::isnan(none.min) && std::isnan(none.max) && std::isnan(none.mean));
}

// Planes added at both ends leave every old plane in its slot, with its checksum, and hold
// zeros; the ring then keeps as many spare slots. Bases 0, 3 and 9 put the new low planes at
// the ring's end, and just before the old ones; a ring whose planes wrap is refused.
TEST_F(StoreTest, PlanesAddedAtTheEndsLeaveTheOthersWhereTheyAre) {
  for (const char* d : {"s0", "s1"}) fs::create_directory(path(d));
  for (const int64_t base : {0, 3, 9}) {
    SCOPED_TRACE("base " + std::to_string(base));
    CreateOptions opt;
    opt.shape = {33, 17, 21};
    opt.stores = {path("s0"), path("s1")};
    opt.chunk_target_bytes = 4096 * 3;  // chunks of 1 plane: the slots alternate between files
    opt.spare_planes = 9;
    opt.init = *parse_init("random:5");
    const std::string dir = path("g") + std::to_string(base);
    {
      auto made = Grid::create(dir, opt);
      ASSERT_TRUE(made.ok()) << made.status().message();
      Grid g = std::move(made).value();
      Manifest m = g.manifest();
      m.base = base;  // the planes are then others, whose checksums the rewrite records
      ASSERT_TRUE(g.commit(m).ok());
      const std::vector<float> shifted = read_all<float>(g);
      ASSERT_TRUE(g.write_planes(0, opt.shape.nz, shifted.data()).ok());
      ASSERT_TRUE(g.commit(g.manifest()).ok());
    }
    std::vector<float> before;
    std::vector<PlaneLocation> slots;
    {
      Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
      before = read_all<float>(g);
      for (int64_t z = 0; z < opt.shape.nz; ++z) slots.push_back(g.manifest().locate(z));
      ASSERT_TRUE(g.add_planes(4, 2).ok());
    }
    Grid again = Grid::open(dir).value();
    ASSERT_EQ(again.shape().nz, 27);
    EXPECT_EQ(again.manifest().layout.spare_planes, 9);
    for (int64_t z = 0; z < opt.shape.nz; ++z) {
      EXPECT_EQ(again.manifest().locate(z + 4).file, slots[static_cast<size_t>(z)].file);
      EXPECT_EQ(again.manifest().locate(z + 4).offset, slots[static_cast<size_t>(z)].offset);
    }
    ASSERT_TRUE(again.enable_verification().ok());
    const std::vector<float> after = read_all<float>(again);
    const size_t plane = static_cast<size_t>(opt.shape.plane_points());
    std::vector<float> want(plane * 4, 0.0f);
    want.insert(want.end(), before.begin(), before.end());
    want.resize(want.size() + plane * 2, 0.0f);
    EXPECT_EQ(after, want);
  }
  {
    Grid wrapped = Grid::open(path("g9"), Grid::Mode::kReadWrite).value();
    Manifest m = wrapped.manifest();
    m.base = m.slots() - 1;  // plane 0 in the last slot, plane 1 in the first
    ASSERT_TRUE(wrapped.commit(m).ok());
    EXPECT_FALSE(wrapped.add_planes(1, 1).ok());
  }
  EXPECT_EQ(Grid::open(path("g9"))->shape().nz, 27);
}

TEST_F(StoreTest, CommitReplacesTheManifestAtomically) {
  CreateOptions opt;
  opt.shape = {8, 8, 8};
  {
    Grid g = Grid::create(path("g"), opt).value();
    Manifest m = g.manifest();
    m.step = 12;
    m.history.push_back({utc_now(), "run", R"({"steps": 12})"});
    ASSERT_TRUE(g.commit(m).ok());
  }
  EXPECT_FALSE(fs::exists(path("g/manifest.json.tmp")));
  Grid again = Grid::open(path("g")).value();
  EXPECT_EQ(again.manifest().step, 12);
  EXPECT_EQ(again.manifest().history.size(), 2u);
  // A leftover temporary file from a crash mid-commit does not matter.
  std::ofstream(path("g/manifest.json.tmp")) << "{garbage";
  EXPECT_EQ(Grid::open(path("g"))->manifest().step, 12);
}

// What a writer undoing its new files asks after a commit failed (relocate, upgrade): whether
// the manifest on disk names them already. Unreadable counts as named (the files then stay).
TEST_F(StoreTest, WhetherTheManifestNamesAFile) {
  CreateOptions opt;
  opt.shape = {8, 8, 8};
  const std::string first = Grid::create(path("g"), opt)->manifest().layout.files[0].path;
  EXPECT_TRUE(internal::manifest_names_data_file(path("g"), first));
  EXPECT_FALSE(internal::manifest_names_data_file(path("g"), internal::replacement_name(first)));
  std::ofstream(path("g/manifest.json")) << "{garbage";
  EXPECT_TRUE(internal::manifest_names_data_file(path("g"), internal::replacement_name(first)));
}

// A prepared replacement outlives the Grid that prepared it: the next open finds it and keeps
// its files; committing it gives its values and step (with their checksums), discarding it
// leaves the grid as it was, and so does a new replacement made over it.
TEST_F(StoreTest, APreparedReplacementWaitsForCommitOrDiscard) {
  CreateOptions opt;
  opt.shape = {9, 7, 6};
  opt.init = *parse_init("random:3");
  const auto before = testing::random_values<float>(opt.shape, 3);
  auto after = before;
  for (float& v : after) v = -v;
  auto prepare = [&](const std::string& dir) {
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    ASSERT_TRUE(g.create_replacement().ok());
    ASSERT_TRUE(io::write_plane_range(
                    g, 0, opt.shape.nz,
                    [&](int64_t z, void* out) {
                      std::memcpy(out, after.data() + z * opt.shape.plane_points(),
                                  static_cast<size_t>(opt.shape.plane_points()) * sizeof(float));
                      return Status::Ok();
                    },
                    io::kPlanesInFlight, FileSet::kReplacement)
                    .ok());
    Manifest m = g.manifest();
    m.step = 7;
    ASSERT_TRUE(g.prepare_replacement(m).ok());
    ASSERT_TRUE(g.prepared().has_value());
  };
  for (const char* name : {"commit", "discard", "overwrite"}) {
    SCOPED_TRACE(name);
    const std::string dir = path(name);
    ASSERT_TRUE(Grid::create(dir, opt).ok());
    prepare(dir);
    const std::string name_s = name;
    {
      Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();  // leaves it to the caller
      ASSERT_TRUE(g.prepared().has_value());
      EXPECT_EQ(g.prepared()->step, 7);
      EXPECT_EQ(g.manifest().step, 0);
      EXPECT_EQ(read_all<float>(g), before);
      if (name_s == "commit") {
        ASSERT_TRUE(g.commit_prepared().ok());
        EXPECT_EQ(g.manifest().step, 7);
        EXPECT_EQ(read_all<float>(g), after);  // through the files it switched to
      } else if (name_s == "discard") {
        ASSERT_TRUE(g.discard_prepared().ok());
      } else {
        ASSERT_TRUE(g.create_replacement().ok());
      }
      EXPECT_FALSE(g.prepared().has_value());
      EXPECT_FALSE(fs::exists(dir + "/prepared.json"));
    }
    Grid again = Grid::open(dir).value();
    EXPECT_FALSE(again.prepared().has_value());
    EXPECT_EQ(again.manifest().step, name_s == "commit" ? 7 : 0);
    EXPECT_EQ(read_all<float>(again), name_s == "commit" ? after : before);
    ASSERT_TRUE(again.enable_verification().ok()) << "the checksum table matches the files";
    EXPECT_TRUE(again.read_planes(0, opt.shape.nz, std::vector<float>(before.size()).data()).ok());
    int data_files = 0;
    for (const auto& e : fs::directory_iterator(dir)) data_files += e.path().extension() == ".dgd";
    if (name_s != "overwrite") {
      EXPECT_EQ(data_files, 1) << "the other set of files is removed";
    }
  }
}

// A commit that keeps the files it replaces hands them to the next replacement (the same
// files, not truncated and allocated anew), and the states committed through them read back
// whole; kept files
// that no replacement takes are removed with the Grid, or by a replacement of another layout.
TEST_F(StoreTest, KeptFilesTakeTheNextReplacementsWrites) {
  CreateOptions opt;
  opt.shape = {9, 7, 6};
  opt.init = *parse_init("random:3");
  const std::string dir = path("g");
  ASSERT_TRUE(Grid::create(dir, opt).ok());
  const auto initial = testing::random_values<float>(opt.shape, 3);
  auto state = [&](int step) {
    auto v = initial;
    for (float& x : v) x += static_cast<float>(step);
    return v;
  };
  const auto plane_bytes = static_cast<size_t>(opt.shape.plane_points()) * sizeof(float);
  // `reuse`: the replacement is the files kept two commits ago.
  auto commit_state = [&](Grid& g, int step, Grid::OldFiles old, bool reuse = false) {
    ASSERT_TRUE(g.create_replacement().ok());
    if (reuse) {
      // Not truncated and allocated again: plane 0's slot still holds the state two back.
      std::vector<float> stale(static_cast<size_t>(opt.shape.plane_points()));
      const PlaneLocation at = g.locate(0, FileSet::kReplacement);
      std::ifstream in(g.file_path(at.file, FileSet::kReplacement), std::ios::binary);
      in.seekg(at.offset);
      in.read(reinterpret_cast<char*>(stale.data()), static_cast<std::streamsize>(plane_bytes));
      EXPECT_EQ(std::memcmp(stale.data(), state(step - 2).data(), plane_bytes), 0);
    }
    const auto values = state(step);
    ASSERT_TRUE(io::write_plane_range(
                    g, 0, opt.shape.nz,
                    [&](int64_t z, void* out) {
                      std::memcpy(out, values.data() + z * opt.shape.plane_points(), plane_bytes);
                      return Status::Ok();
                    },
                    io::kPlanesInFlight, FileSet::kReplacement)
                    .ok());
    Manifest m = g.manifest();
    m.step = step;
    ASSERT_TRUE(g.commit_replacement(m, old).ok());
  };
  {
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    const std::string first = g.file_path(0);
    for (int step = 1; step <= 4; ++step) {
      commit_state(g, step, Grid::OldFiles::kKeep, step >= 3);
      EXPECT_EQ(step % 2 == 1 ? g.file_path(0, FileSet::kReplacement) : g.file_path(0), first);
      EXPECT_TRUE(fs::exists(g.file_path(0, FileSet::kReplacement))) << "the replaced file is kept";
      EXPECT_EQ(read_all<float>(g), state(step));
    }
    ASSERT_TRUE(g.enable_verification().ok());
    EXPECT_EQ(read_all<float>(g), state(4));
  }
  {
    Grid again = Grid::open(dir).value();
    EXPECT_EQ(again.manifest().step, 4);
    EXPECT_EQ(read_all<float>(again), state(4));
    EXPECT_FALSE(fs::exists(again.file_path(0, FileSet::kReplacement))) << "removed with the Grid";
  }
  {
    // A grown grid's files are longer than the kept ones: the replacement is made anew.
    Grid g = Grid::open(dir, Grid::Mode::kReadWrite).value();
    commit_state(g, 5, Grid::OldFiles::kKeep);
    ASSERT_TRUE(g.grow_spare(g.manifest().layout.spare_planes + 8).ok());
    commit_state(g, 6, Grid::OldFiles::kRemove);
    EXPECT_EQ(read_all<float>(g), state(6));
    EXPECT_FALSE(fs::exists(g.file_path(0, FileSet::kReplacement))) << "a removing commit";
  }
  EXPECT_EQ(read_all<float>(Grid::open(dir).value()), state(6));
}

// A copy of the data files kept for the next replacement counts as room for it (planning and
// preflight add it to the free space): its allocated bytes, and nothing for what is not a
// regular file under the replacement's name.
TEST_F(StoreTest, AKeptCopyCountsAsRoomForTheNextReplacement) {
  CreateOptions opt;
  opt.shape = {64, 32, 8};
  const std::string dir = path("g");
  Grid g = Grid::create(dir, opt).value();
  const std::string data = g.file_path(0);
  EXPECT_EQ(internal::replacement_bytes(data), 0u) << "no copy";
  ASSERT_TRUE(g.create_replacement().ok());
  ASSERT_TRUE(g.commit_replacement(g.manifest(), Grid::OldFiles::kKeep).ok());
  const std::string now = g.file_path(0);
  EXPECT_GE(internal::replacement_bytes(now),
            static_cast<uint64_t>(g.manifest().layout.files[0].bytes))
      << "the kept copy's blocks";
  ASSERT_TRUE(g.create_replacement().ok());
  ASSERT_TRUE(g.commit_replacement(g.manifest(), Grid::OldFiles::kRemove).ok());
  EXPECT_EQ(internal::replacement_bytes(g.file_path(0)), 0u) << "removed";
  // Something else under the name: a link to a large file elsewhere counts for nothing.
  const std::string elsewhere = path("large");
  std::ofstream(elsewhere) << std::string(1 << 16, 'x');
  ASSERT_EQ(::symlink(elsewhere.c_str(), g.file_path(0, FileSet::kReplacement).c_str()), 0);
  EXPECT_EQ(internal::replacement_bytes(g.file_path(0)), 0u);
}

TEST_F(StoreTest, DamageIsDetected) {
  CreateOptions opt;
  opt.shape = {16, 16, 16};
  ASSERT_TRUE(Grid::create(path("g"), opt).ok());
  const std::string manifest = slurp(path("g/manifest.json"));
  auto write_manifest = [&](const std::string& text) {
    std::ofstream(path("g/manifest.json"), std::ios::trunc) << text;
  };

  write_manifest(manifest.substr(0, manifest.size() / 2));
  auto r = Grid::open(path("g"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCorrupt);

  auto j = nlohmann::json::parse(manifest);
  j["version"] = 99;
  write_manifest(j.dump());
  r = Grid::open(path("g"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("newer"), std::string::npos);

  write_manifest(manifest);
  ASSERT_EQ(::truncate(path("g/data.0.dgd").c_str(), 4096), 0);
  r = Grid::open(path("g"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.status().message().find("data.0.dgd"), std::string::npos);
}

TEST_F(StoreTest, CreateRefusesBadTargetsWithoutTouchingTheDisk) {
  CreateOptions opt;
  opt.shape = {8, 8, 8};
  fs::create_directory(path("full"));
  std::ofstream(path("full/x")) << "x";
  EXPECT_FALSE(Grid::create(path("full"), opt).ok());
  EXPECT_FALSE(Grid::create(path("no/such/parent"), opt).ok());
  opt.stores = {path("missing_store")};
  EXPECT_FALSE(Grid::create(path("g"), opt).ok());
  EXPECT_FALSE(fs::exists(path("g")));
  opt.stores = {};
  opt.shape = {1 << 20, 1 << 20, 64};  // 256 TiB
  auto r = Grid::create(path("huge"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNoSpace);
  EXPECT_FALSE(fs::exists(path("huge")));
}

// The mmap and tiled methods' up-front check: needs of directories on one filesystem add up,
// and a shortfall names the directory and what is free.
TEST_F(StoreTest, FreeSpaceCheckAddsUpNeedsPerFilesystem) {
  const std::string dir = tmp_.path().string();
  const uint64_t avail = internal::free_bytes(dir).value();
  EXPECT_TRUE(internal::check_free_space({{dir, avail / 4}}, "a copy").ok());
  const auto st = internal::check_free_space({{dir, avail / 2 + (1 << 21)}, {dir, avail / 2}},
                                             "the tiled method's scratch copy");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kNoSpace);
  EXPECT_NE(st.message().find(dir), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("is free"), std::string::npos) << st.message();
}

TEST_F(StoreTest, NpyRoundTrip) {
  CreateOptions opt;
  opt.shape = {13, 7, 5};
  opt.init = *parse_init("random:3");
  Grid a = Grid::create(path("a"), opt).value();
  ASSERT_TRUE(export_npy(a, path("a.npy")).ok());
  const NpyHeader h = read_npy_header(path("a.npy")).value();
  EXPECT_EQ(h.shape, opt.shape);
  EXPECT_EQ(h.data_offset % 64, 0);
  Grid b = import_npy(path("a.npy"), path("b"), {}).value();
  EXPECT_EQ(read_all<float>(b), read_all<float>(a));
  ASSERT_TRUE(export_npy(b, path("b.npy")).ok());
  EXPECT_EQ(slurp(path("a.npy")), slurp(path("b.npy")));
  std::ofstream(path("bad.npy")) << "not numpy";
  EXPECT_FALSE(read_npy_header(path("bad.npy")).ok());
}

TEST_F(StoreTest, RunAdvancesTheStoredGridLikeTheReference) {
  CreateOptions opt;
  opt.shape = {21, 19, 17};
  opt.dtype = DType::kF64;
  opt.init = *parse_init("random:11");
  ASSERT_TRUE(Grid::create(path("g"), opt).ok());
  RunOptions run;
  run.scheme = Stencil::preset("27pt").value();
  run.steps = 4;
  run.boundary = *parse_boundary("neumann");
  RunReport r = run_grid(path("g"), run).value();
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.step_to, 4);
  EXPECT_GT(r.bytes_read, 0u);
  Grid g = Grid::open(path("g")).value();
  EXPECT_EQ(g.manifest().step, 4);
  const auto want = testing::reference_run(testing::random_values<double>(opt.shape, 11), opt.shape,
                                           run.scheme, run.boundary, 4);
  EXPECT_EQ(testing::first_bitwise_difference(read_all<double>(g), want), -1);
}

TEST_F(StoreTest, RejectedRunsChangeNothing) {
  CreateOptions opt;
  opt.shape = {4, 4, 2};
  opt.init = *parse_init("random:1");
  ASSERT_TRUE(Grid::create(path("g"), opt).ok());
  const std::string manifest = slurp(path("g/manifest.json"));
  const std::string data = slurp(path("g/data.0.dgd"));
  RunOptions run;
  run.scheme = Stencil::preset("25pt").value();  // radius 4 > nz = 2
  run.steps = 1;
  EXPECT_EQ(run_grid(path("g"), run).status().code(), ErrorCode::kInvalidArgument);
  run.scheme = Stencil::preset("7pt").value();
  run.steps = -1;
  EXPECT_EQ(run_grid(path("g"), run).status().code(), ErrorCode::kInvalidArgument);
  run.steps = 1;
  run.mem_budget = 1024;
  EXPECT_EQ(run_grid(path("g"), run).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(slurp(path("g/manifest.json")), manifest);
  EXPECT_EQ(slurp(path("g/data.0.dgd")), data);
}

// Plane transfers: every plane in order through several requests in flight, over stripes,
// and a consumer's or producer's error stops the transfer and comes back.
TEST_F(StoreTest, PlaneTransfersKeepOrderAndReportErrors) {
  CreateOptions co;
  co.shape = {37, 11, 29};
  co.chunk_target_bytes = 2 * 4096;  // chunks of 2 planes, alternating over 3 stripes
  for (int s = 0; s < 3; ++s) {
    co.stores.push_back(path("s") + std::to_string(s));
    fs::create_directory(co.stores.back());
  }
  Grid g = Grid::create(path("g"), co).value();
  const size_t n = static_cast<size_t>(co.shape.plane_points());
  ASSERT_TRUE(io::write_plane_range(g, 3, 29, [&](int64_t z, void* values) {
                auto* v = static_cast<float*>(values);
                for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(z * 1000 + i);
                return Status::Ok();
              }).ok());
  const std::vector<float> all = read_all<float>(g);
  for (int64_t z = 0; z < co.shape.nz; ++z) {
    const float want = z >= 3 ? static_cast<float>(z * 1000 + 5) : 0.0f;
    EXPECT_EQ(all[static_cast<size_t>(z) * n + 5], want) << "plane " << z;
  }
  std::vector<int64_t> seen;
  ASSERT_TRUE(io::read_plane_range(
                  g, 2, 27,
                  [&](int64_t z, const void* values) {
                    seen.push_back(z);
                    EXPECT_EQ(static_cast<const float*>(values)[7], z >= 3 ? z * 1000 + 7 : 0);
                    return Status::Ok();
                  },
                  /*depth=*/3)
                  .ok());
  ASSERT_EQ(seen.size(), 25u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int64_t>(i) + 2);

  const Status stop = io::read_plane_range(g, 0, 29, [](int64_t z, const void*) {
    return z == 4 ? invalid_argument("stop at 4") : Status::Ok();
  });
  EXPECT_EQ(stop.message(), "stop at 4");
  const Status fail = io::write_plane_range(g, 0, 29, [](int64_t z, void*) {
    return z == 6 ? Status(ErrorCode::kIo, "no plane 6") : Status::Ok();
  });
  EXPECT_EQ(fail.message(), "no plane 6");
}

}  // namespace
}  // namespace deepgrid
