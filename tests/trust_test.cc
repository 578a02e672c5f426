// A grid directory is data, not authority (docs/security.md), at the library's level: the
// manifest's paths are confined, deepgrid's own files are not read through links, relocate is
// the one way to move a grid's data, and kernel libraries load only as the build a grid
// pinned. The command line's refusals of crafted grids are in cli_bad_input_test (TrustCases).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/sha256.h"
#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "deepgrid/store.h"
#include "model/kernel_pin.h"
#include "reference.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string test_kernel(const std::string& variant = "") {
  return std::string(DEEPGRID_TEST_KERNEL_DIR) + "/libtest_kernel" + variant + ".so";
}

// A manifest of a real grid striped over two stores, as JSON to edit.
class ManifestPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* s : {"s0", "s1"}) fs::create_directory(tmp_.path() / s);
    CreateOptions opt;
    opt.shape = {16, 8, 6};
    opt.stores = {tmp_ / "s0", tmp_ / "s1/"};
    opt.chunk_target_bytes = 4096;
    ASSERT_TRUE(Grid::create(tmp_ / "g", opt).ok());
    manifest_ = json::parse(slurp(tmp_.path() / "g" / "manifest.json"));
  }
  Status parsed(const json& m) const { return Manifest::from_json(m.dump()).status(); }
  std::string store(int i) const { return (tmp_.path() / (i == 0 ? "s0" : "s1")).string(); }

  testing::TempDir tmp_;
  json manifest_;
};

TEST_F(ManifestPaths, CreateRecordsTheStoresAndNamesTheFilesInThem) {
  EXPECT_EQ(manifest_["stores"], json({store(0), store(1)}));  // normal: no trailing '/'
  const Manifest m = Manifest::from_json(manifest_.dump()).value();
  ASSERT_EQ(m.layout.files.size(), 2u);
  EXPECT_EQ(m.layout.files[1].path, store(1) + "/deepgrid-" + m.id + ".1.dgd");
}

TEST_F(ManifestPaths, AnythingButDeepgridsOwnNamesIsRefused) {
  const std::string id = manifest_["id"];
  const std::vector<std::string> crafted = {
      "/etc/passwd",
      "data.0.dgd",  // (a grid with stores keeps no data in its directory)
      store(0) + "/../s0/deepgrid-" + id + ".0.dgd",
      store(1) + "/deepgrid-" + id + ".0.dgd",  // file 0 belongs in store 0
      store(0) + "/deepgrid-" + id + ".0.dgd.tmp",
      store(0) + "/deepgrid-ffffffffffffffff.0.dgd",
  };
  for (const std::string& path : crafted) {
    json m = manifest_;
    m["layout"]["files"][0]["path"] = path;
    const Status st = parsed(m);
    EXPECT_EQ(st.code(), ErrorCode::kCorrupt) << path;
    EXPECT_NE(st.message().find("docs/security.md"), std::string::npos) << st.message();
  }
  json m = manifest_;
  m["layout"]["files"][0]["path"] = store(0) + "/deepgrid-" + id + ".0.b.dgd";  // replacement
  EXPECT_TRUE(parsed(m).ok()) << parsed(m).message();
  for (const json& stores : {json({"s0", store(1)}), json({store(0) + "/.", store(1)}),
                             json({store(0)}), json({"/", store(1)})}) {
    json n = manifest_;
    n["stores"] = stores;
    EXPECT_EQ(parsed(n).code(), ErrorCode::kCorrupt) << stores.dump();
  }
  for (const char* bad_id : {"../x", "a/b", "", "a b"}) {
    json n = manifest_;
    n["id"] = bad_id;
    EXPECT_EQ(parsed(n).code(), ErrorCode::kCorrupt) << bad_id;
  }
}

// A manifest written before the stores were recorded: its files' directories are its stores,
// and the names in them must still be deepgrid's.
TEST_F(ManifestPaths, OlderManifestsGetTheirStoresFromTheirFiles) {
  json m = manifest_;
  m.erase("stores");
  const Manifest old = Manifest::from_json(m.dump()).value();
  EXPECT_EQ(old.stores, (std::vector<std::string>{store(0), store(1)}));
  m["layout"]["files"][1]["path"] = "/home/someone/notes.txt";
  EXPECT_EQ(parsed(m).code(), ErrorCode::kCorrupt);
  json in_dir = json::parse(slurp(tmp_.path() / "g" / "manifest.json"));
  in_dir.erase("stores");
  in_dir["layout"]["files"] = json::array({{{"path", "../data.0.dgd"}, {"bytes", 1}}});
  EXPECT_EQ(parsed(in_dir).code(), ErrorCode::kCorrupt);
}

TEST(OwnFiles, AreReadOnlyAsRegularFilesAndNeverThroughLinks) {
  testing::TempDir tmp;
  write_file(tmp.path() / "real", "text");
  fs::create_symlink(tmp.path() / "real", tmp.path() / "link");
  ASSERT_EQ(::mkfifo((tmp / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(internal::read_own_file(tmp / "real").value(), "text");
  const auto linked = internal::read_own_file(tmp / "link");
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos);
  EXPECT_FALSE(internal::read_own_file(tmp / "fifo").ok());  // (would block, or never end)
  bool direct = false;
  EXPECT_FALSE(internal::open_data_file(tmp / "link", O_RDWR, &direct).ok());
  // A link left where an atomic write puts its temporary file is replaced, not written through.
  fs::create_symlink(tmp.path() / "real", tmp.path() / "out.tmp");
  ASSERT_TRUE(internal::write_file_atomic(tmp.path(), "out", "new").ok());
  EXPECT_EQ(slurp(tmp.path() / "real"), "text");
  EXPECT_EQ(slurp(tmp.path() / "out"), "new");
}

class Relocate : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* s : {"a0", "a1", "b0", "b1"}) fs::create_directory(tmp_.path() / s);
    CreateOptions opt;
    opt.shape = {19, 7, 11};
    opt.init = InitSpec{InitSpec::Kind::kRandom, 0, 4};
    opt.stores = {tmp_ / "a0", tmp_ / "a1"};
    opt.chunk_target_bytes = 4096 * 2;
    Grid g = Grid::create(tmp_ / "g", opt).value();
    values_ = read(g);
  }
  static std::vector<float> read(const Grid& g) {
    std::vector<float> v(static_cast<size_t>(g.shape().points()));
    EXPECT_TRUE(g.read_planes(0, g.shape().nz, v.data()).ok());
    return v;
  }
  std::vector<std::string> files_in(const std::string& dir) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(tmp_.path() / dir)) {
      names.push_back(e.path().filename());
    }
    return names;
  }

  testing::TempDir tmp_;
  std::vector<float> values_;
};

TEST_F(Relocate, CopiesOrTakesTheFilesChecksThemAndRecordsTheNewStores) {
  // Store 1's file is copied by hand first (as disks moved by the user): taken as it is.
  const std::string name1 = files_in("a1").at(0);
  fs::copy_file(tmp_.path() / "a1" / name1, tmp_.path() / "b1" / name1);
  const Relocation r = relocate_grid(tmp_ / "g", {tmp_ / "b0", tmp_ / "b1"}).value();
  EXPECT_EQ(r.copied, 1);
  EXPECT_EQ(r.found, 1);
  EXPECT_TRUE(r.checked);
  EXPECT_TRUE(files_in("a0").empty());
  EXPECT_TRUE(files_in("a1").empty());
  const Grid g = Grid::open(tmp_ / "g").value();
  EXPECT_EQ(g.manifest().stores, (std::vector<std::string>{tmp_ / "b0", tmp_ / "b1"}));
  EXPECT_EQ(read(g), values_);
  EXPECT_EQ(g.manifest().history.back().command, "relocate");
}

TEST_F(Relocate, AFileThatDiffersFromTheChecksumsLeavesTheGridAsItWas) {
  const std::string name1 = files_in("a1").at(0);
  fs::copy_file(tmp_.path() / "a1" / name1, tmp_.path() / "b1" / name1);
  {
    std::fstream f(tmp_.path() / "b1" / name1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  const std::string manifest = slurp(tmp_.path() / "g" / "manifest.json");
  const Status st = relocate_grid(tmp_ / "g", {tmp_ / "b0", tmp_ / "b1"}).status();
  EXPECT_EQ(st.code(), ErrorCode::kCorrupt) << st.message();
  EXPECT_EQ(slurp(tmp_.path() / "g" / "manifest.json"), manifest);
  EXPECT_TRUE(files_in("b0").empty());  // (its copy was removed again)
  EXPECT_EQ(read(Grid::open(tmp_ / "g").value()), values_);
}

TEST_F(Relocate, RefusesWhatItCannotDo) {
  EXPECT_EQ(relocate_grid(tmp_ / "g", {tmp_ / "b0"}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(relocate_grid(tmp_ / "g", {tmp_ / "b0", tmp_ / "none"}).status().code(),
            ErrorCode::kInvalidArgument);
  for (const std::string& name : files_in("a0")) fs::remove(tmp_.path() / "a0" / name);
  const Status lost = relocate_grid(tmp_ / "g", {tmp_ / "b0", tmp_ / "b1"}).status();
  EXPECT_NE(lost.message().find("neither at"), std::string::npos) << lost.message();
  EXPECT_TRUE(files_in("b1").empty());
}

// A kernel library loads only as the build a grid recorded.
class KernelPins : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy_file(test_kernel(), tmp_.path() / "liba.so");
    fs::copy_file(test_kernel("_f32"), tmp_.path() / "libb.so");
    fs::create_symlink(tmp_.path() / "liba.so", tmp_.path() / "libk.so");
  }
  testing::TempDir tmp_;
};

TEST_F(KernelPins, TheRecordCarriesTheHashAndALoadChecksIt) {
  const Scheme s = Scheme::from_kernel(tmp_ / "libk.so").value();
  const json record = json::parse(s.to_json());
  const std::string pinned = record["sha256"];
  EXPECT_EQ(pinned, internal::sha256_of_path(tmp_ / "liba.so").value());
  EXPECT_EQ(kernel_pin_of(s.to_json())->sha256, pinned);
  EXPECT_FALSE(kernel_pin_of(Scheme::preset("wave2").value().to_json()));
  EXPECT_TRUE(Scheme::from_grid_record(s.to_json()).ok());
  // The link now leads to another build: the grid's record refuses it, naming both hashes.
  fs::remove(tmp_.path() / "libk.so");
  fs::create_symlink(tmp_.path() / "libb.so", tmp_.path() / "libk.so");
  const Status swapped = Scheme::from_grid_record(s.to_json()).status();
  EXPECT_EQ(swapped.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(swapped.message().find(pinned), std::string::npos) << swapped.message();
  EXPECT_NE(swapped.message().find(internal::sha256_of_path(tmp_ / "libb.so").value()),
            std::string::npos);
  EXPECT_NE(swapped.message().find("--kernel"), std::string::npos);
  // This process holds the first build, loaded through the link: loading the link again while
  // it leads to another file is refused too (glibc would hand back the first).
  const Status stale = Scheme::from_kernel(tmp_ / "libk.so").status();
  EXPECT_NE(stale.message().find("older build"), std::string::npos) << stale.message();
  fs::remove(tmp_.path() / "libk.so");
  fs::create_symlink(tmp_.path() / "liba.so", tmp_.path() / "libk.so");
  // A record without its hash, or naming the library by a relative path, is not a pin.
  json unpinned = record;
  unpinned.erase("sha256");
  EXPECT_FALSE(Scheme::from_grid_record(unpinned.dump()).ok());
  EXPECT_TRUE(Scheme::from_record(unpinned.dump()).ok());  // (a user's own file may leave it out)
  json relative = record;
  relative["kernel"] = "libk.so";
  EXPECT_FALSE(Scheme::from_grid_record(relative.dump()).ok());
}

TEST_F(KernelPins, ARunWithKernelGivenRecordsTheNewBuild) {
  const Scheme a = Scheme::from_kernel(tmp_ / "liba.so").value();
  const Scheme b = Scheme::from_kernel(tmp_ / "libb.so").value();
  EXPECT_EQ(scheme_to_record(a.to_json(), b), b.to_json());
  const std::string wave = Scheme::preset("wave2").value().to_json();
  EXPECT_EQ(scheme_to_record(wave, b), wave);  // (only a grid of a kernel takes one)
  EXPECT_EQ(scheme_to_record(a.to_json(), Scheme::preset("wave2").value()), a.to_json());
}

TEST_F(KernelPins, ASiteCanAllowKernelsOnlyFromItsDirectories) {
  fs::create_directory(tmp_.path() / "allowed");
  fs::copy_file(test_kernel(), tmp_.path() / "allowed" / "libk.so");
  ::setenv(internal::kKernelDirsVariable, (tmp_ / "allowed").c_str(), 1);
  const Status outside = Scheme::from_kernel(tmp_ / "liba.so").status();
  const bool inside = Scheme::from_kernel(tmp_ / "allowed/libk.so").ok();
  // A link inside an allowed directory to a library outside it is judged by its target.
  fs::create_symlink(tmp_.path() / "liba.so", tmp_.path() / "allowed" / "liblink.so");
  const bool linked = Scheme::from_kernel(tmp_ / "allowed/liblink.so").ok();
  ::unsetenv(internal::kKernelDirsVariable);
  EXPECT_EQ(outside.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(outside.message().find(internal::kKernelDirsVariable), std::string::npos);
  EXPECT_TRUE(inside);
  EXPECT_FALSE(linked);
}

}  // namespace
}  // namespace deepgrid
