// Users' kernels (deepgrid/kernel.h) as the library loads them: the loader's refusals, each one
// line; the scheme JSON's "kernel" (relative paths, declared fields); records that find the
// library again; a grid that keeps its kernel across runs. Results against the reference are
// in stream_test (EngineGolden.UsersKernels).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "engines/incore_engine.h"
#include "model/kernel_library.h"
#include "reference.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

namespace fs = std::filesystem;

std::string test_kernel(const std::string& variant = "") {
  return (fs::path(DEEPGRID_TEST_KERNEL_DIR) / ("libtest_kernel" + variant + ".so")).string();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// The error of a load that must fail: one line naming `words`.
void expect_refused(const Result<Scheme>& r, const std::vector<std::string>& words) {
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  for (const std::string& w : words) EXPECT_NE(m.find(w), std::string::npos) << m;
}

TEST(KernelLibraryTest, DescribesTheKernelAsAScheme) {
  const Scheme s = Scheme::from_kernel(test_kernel()).value();
  EXPECT_EQ(s.name(), "testkernel");
  EXPECT_FALSE(s.is_stencil());
  EXPECT_EQ(s.components(), (std::vector<std::string>{"a", "a@1", "b", "k"}));
  EXPECT_TRUE(s.is_coefficient(3));
  EXPECT_EQ(s.fields()[2].value, 0.05);
  EXPECT_EQ(s.radius_x(), 2);
  EXPECT_EQ(s.radius_y(), 1);
  EXPECT_EQ(s.radius_z(), 2);
  EXPECT_EQ(s.flops_per_update(), 24);
  EXPECT_EQ(s.carried(), (std::vector<std::pair<int, int>>{{1, 0}, {3, 3}}));
  ASSERT_TRUE(s.kernel());
  EXPECT_EQ(s.kernel()->path(), fs::path(test_kernel()).lexically_normal().string());
  EXPECT_TRUE(s.check_dtype(DType::kF32).ok());
  EXPECT_TRUE(s.check_dtype(DType::kF64).ok());
}

TEST(KernelLibraryTest, RefusesWhatItCannotRun) {
  expect_refused(Scheme::from_kernel("/nonexistent/libk.so"), {"/nonexistent/libk.so", "exist"});
  expect_refused(Scheme::from_kernel(test_kernel("_none")), {"not a deepgrid kernel"});
  expect_refused(Scheme::from_kernel(test_kernel("_abi2")),
                 {"ABI version 2", "version " + std::to_string(DG_KERNEL_ABI_VERSION)});
  testing::TempDir tmp;
  write_file(tmp / "libjunk.so", "not an ELF file\n");
  expect_refused(Scheme::from_kernel(tmp / "libjunk.so"), {"cannot load", "libjunk.so"});
}

TEST(KernelLibraryTest, AKernelWithoutADtypeRefusesGridsOfIt) {
  const Scheme s = Scheme::from_kernel(test_kernel("_f32")).value();
  EXPECT_TRUE(s.check_dtype(DType::kF32).ok());
  const Status f64 = s.check_dtype(DType::kF64);
  EXPECT_EQ(f64.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(f64.message().find("no f64 version"), std::string::npos) << f64.message();
  const auto engine = InCoreEngine<double>::create({8, 8, 8}, s, 1, {});
  EXPECT_EQ(engine.status().code(), ErrorCode::kInvalidArgument);
}

TEST(KernelLibraryTest, SchemeJsonNamesTheLibraryRelativeToItsFile) {
  testing::TempDir tmp;
  fs::create_directory(tmp / "k");
  fs::copy_file(test_kernel(), tmp / "k/libmine.so");
  write_file(tmp / "k/scheme.json",
             R"({"name": "mine", "kernel": "./libmine.so",
                 "fields": [{"name": "a", "levels": 2}, {"name": "b"},
                            {"name": "k", "coefficient": true, "value": 0.25}]})");
  const auto resolved = Scheme::resolve(tmp / "k/scheme.json");
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  const Scheme& s = *resolved;
  EXPECT_EQ(s.name(), "mine");
  EXPECT_EQ(s.kernel()->path(), tmp / "k/libmine.so");
  EXPECT_EQ(s.fields()[2].value, 0.25);  // the JSON's value for new grids

  // The record names the library by its absolute path and gives the same scheme back.
  const Scheme back = Scheme::from_record(s.to_json()).value();
  EXPECT_EQ(back.to_json(), s.to_json());
  EXPECT_EQ(back.kernel()->path(), s.kernel()->path());

  // A library named directly, as --scheme accepts it.
  EXPECT_EQ(Scheme::resolve(tmp / "k/libmine.so").value().components(), s.components());
}

TEST(KernelLibraryTest, SchemeJsonMistakesAreOneLine) {
  const std::string lib = test_kernel();
  auto parse = [](const std::string& text) { return Scheme::from_json(text); };
  expect_refused(parse(R"({"kernel": ")" + lib + R"(", "fields": [{"name": "a"}]})"),
                 {"differ from kernel testkernel"});
  expect_refused(parse(R"({"kernel": ")" + lib + R"(", "update": {"a": []}})"),
                 {"instead of \"update\""});
  expect_refused(parse(R"({"kernel": 3})"), {"path of a kernel library"});
  expect_refused(parse(R"({"kernel": "/nonexistent/libk.so"})"), {"exist"});
}

// A grid made for the kernel runs without naming it again, in one go or as two runs.
TEST(KernelLibraryTest, TheGridRecordsItsKernel) {
  testing::TempDir tmp;
  const Scheme s = Scheme::from_kernel(test_kernel()).value();
  const Shape shape{12, 9, 7};
  const int n = s.component_count();
  const auto u = testing::random_values<float>({shape.nx, shape.ny * n, shape.nz}, 3);
  for (const std::string& dir : {tmp / "once", tmp / "twice"}) {
    CreateOptions co;
    co.shape = shape;
    co.fields = initial_fields(s, {});
    co.scheme = s.to_json();
    Grid g = Grid::create(dir, co).value();
    ASSERT_TRUE(g.write_planes(0, shape.nz, u.data()).ok());
  }
  RunOptions opt;  // no scheme: the grid's own
  opt.boundary = {Boundary::Kind::kPeriodic, 0};
  opt.method = Method::kStream;
  opt.mem_budget = 64 << 20;
  opt.bt = 2;
  opt.steps = 5;
  auto expect_runs = [&](const std::string& dir) {
    const auto report = run_grid(dir, opt);
    ASSERT_TRUE(report.ok()) << report.status().message();
  };
  expect_runs(tmp / "once");
  for (int64_t steps : {2, 3}) {
    opt.steps = steps;
    expect_runs(tmp / "twice");
  }
  const auto want = testing::reference_run(u, shape, s, opt.boundary, 5);
  for (const std::string& dir : {tmp / "once", tmp / "twice"}) {
    std::vector<float> got(u.size());
    ASSERT_TRUE(Grid::open(dir).value().read_planes(0, shape.nz, got.data()).ok());
    EXPECT_EQ(testing::first_bitwise_difference(want, got), -1) << dir;
  }
}

}  // namespace
}  // namespace deepgrid
