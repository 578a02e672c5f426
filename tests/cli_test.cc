// End-to-end tests of the deepgrid command line: each test spawns the real binary in a fresh
// temporary directory and checks exit codes, stdout, stderr and what ends up on disk. This file
// holds the commands doing their work; cli_bad_input_test.cc the refusals, cli_integrity_test.cc
// damage, locking and crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using namespace deepgrid::testing;  // cli_runner.h: running the CLI and checking what it did
using nlohmann::json;

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

// ---------------------------------------------------------------------------------------------
// Common CLI steps

json info_json(const std::string& dir) {
  const RunResult r = run_cli({"info", dir, "--json"});
  EXPECT_TRUE(Succeeded(r));
  return parse_one_json_object(r);
}

std::string checksum_of(const std::string& dir) {
  const RunResult r = run_cli({"checksum", dir, "--json"});
  EXPECT_TRUE(Succeeded(r));
  const json j = parse_one_json_object(r);
  const std::string sha = j.value("sha256", "");
  EXPECT_TRUE(is_sha256_hex(sha)) << "sha256 is '" << sha << "'\n" << r;
  return sha;
}

// SHA-256 (hex) of the last `bytes` bytes of `path`, by the system's sha256sum.
std::string sha256_of_tail(const std::string& path, int64_t bytes) {
  const RunResult r = run_shell("tail -c " + std::to_string(bytes) + " '" + path + "' | sha256sum");
  EXPECT_TRUE(Succeeded(r));
  return r.out.substr(0, 64);
}

// ---------------------------------------------------------------------------------------------
// Happy paths

constexpr int64_t kNx = 37, kNy = 23, kNz = 19;

TEST_F(CliTest, CreateThenInfoReportsShapeDtypeAndStep) {
  const std::string g = create("g", kShape, {"--dtype", "f64", "--init", "random:7"});
  const json info = info_json(g);
  EXPECT_EQ(info["shape"]["nx"], kNx);
  EXPECT_EQ(info["shape"]["ny"], kNy);
  EXPECT_EQ(info["shape"]["nz"], kNz);
  EXPECT_EQ(info["dtype"], "f64");
  EXPECT_EQ(info["step"], 0);
}

TEST_F(CliTest, RunPrintsOneJsonReportAndRecordsHistory) {
  const std::string g = create("g", kShape, {"--dtype", "f64", "--init", "random:7"});
  const RunResult r = run_cli({"run", g, "--stencil", "7pt", "--steps", "3", "--json"});
  ASSERT_TRUE(Succeeded(r));
  const json report = parse_one_json_object(r);
  EXPECT_EQ(report["steps"], 3);
  EXPECT_EQ(report["step_from"], 0);
  EXPECT_EQ(report["step_to"], 3);
  EXPECT_GT(report.value("mlups", 0.0), 0.0);
  EXPECT_GT(report.value("bytes_read", 0), 0);
  EXPECT_GT(report.value("bytes_written", 0), 0);
  EXPECT_GT(report.value("peak_memory_bytes", 0), 0);

  const json info = info_json(g);
  EXPECT_EQ(info["step"], 3);
  ASSERT_EQ(info["history"].size(), 2u) << info.dump(2);
  EXPECT_EQ(info["history"][0]["command"], "create");
  EXPECT_EQ(info["history"][1]["command"], "run");
}

// The stream's disk waits in the report: those for writes are a part of them (a sweep ends
// waiting for its last block's writes, so there are some), the in-core method has none.
TEST_F(CliTest, TheReportSaysWhichOfTheDiskWaitsWereForWrites) {
  const std::string g = create("g", kShape, {"--init", "random:7"});
  const RunResult streamed = run_cli({"run", g, "--stencil", "7pt", "--steps", "4", "--method",
                                      "stream", "--mem", "4MiB", "--json"});
  ASSERT_TRUE(Succeeded(streamed));
  const json s = parse_one_json_object(streamed);
  const double writes = s.value("io_wait_for_writes_seconds", -1.0);
  EXPECT_GT(writes, 0) << s.dump();
  EXPECT_LE(writes, s.value("io_wait_seconds", 0.0)) << s.dump();
  const RunResult text = run_cli(
      {"run", g, "--stencil", "7pt", "--steps", "1", "--method", "stream", "--mem", "4MiB"});
  ASSERT_TRUE(Succeeded(text));
  EXPECT_NE(text.out.find(" s of it for writes)"), std::string::npos) << text.out;

  const RunResult incore =
      run_cli({"run", g, "--stencil", "7pt", "--steps", "1", "--method", "incore", "--json"});
  ASSERT_TRUE(Succeeded(incore));
  EXPECT_EQ(parse_one_json_object(incore).value("io_wait_for_writes_seconds", -1.0), 0.0);
}

TEST_F(CliTest, ChecksumIsStableAndChangesAfterARun) {
  const std::string g = create("g", kShape, {"--dtype", "f64", "--init", "random:7"});
  const std::string first = checksum_of(g);
  EXPECT_EQ(checksum_of(g), first);
  ASSERT_TRUE(Succeeded(run_cli({"run", g, "--stencil", "7pt", "--steps", "1"})));
  EXPECT_NE(checksum_of(g), first);
}

TEST_F(CliTest, ChecksumIsTheSha256OfTheExportedNpyPayload) {
  const std::string g = create("g", kShape, {"--dtype", "f64", "--init", "random:7"});
  ASSERT_TRUE(Succeeded(run_cli({"run", g, "--stencil", "7pt", "--steps", "2"})));
  const std::string npy = tmp_ / "out.npy";
  ASSERT_TRUE(Succeeded(run_cli({"export", g, npy})));

  const int64_t payload = kNx * kNy * kNz * 8;
  const std::string bytes = read_file(npy);
  ASSERT_GT(static_cast<int64_t>(bytes.size()), payload);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(sha256_of_tail(npy, payload), checksum_of(g));
}

// An export larger than the 8 MiB it stages in blocks (whole blocks, then a padded last one
// cut back): the file is exactly the header and the payload, the payload hashes as `checksum`
// says, and imported again it is the same grid.
TEST_F(CliTest, AnExportLargerThanItsStagingBufferKeepsEveryByte) {
  const std::string g = create("g", "131x129x65", {"--dtype", "f64", "--init", "random:3"});
  const std::string npy = tmp_ / "g.npy", back = tmp_ / "back";
  ASSERT_TRUE(Succeeded(run_cli({"export", g, npy})));
  const int64_t payload = int64_t{131} * 129 * 65 * 8;
  const std::string bytes = read_file(npy);
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const auto header = static_cast<int64_t>(10 + static_cast<unsigned char>(bytes[8]) +
                                           256 * static_cast<unsigned char>(bytes[9]));
  EXPECT_EQ(header % 64, 0);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), header + payload);
  EXPECT_NE(bytes.find("'shape': (65, 129, 131)"), std::string::npos);
  EXPECT_EQ(sha256_of_tail(npy, payload), checksum_of(g));
  ASSERT_TRUE(Succeeded(run_cli({"import", npy, back})));
  EXPECT_EQ(checksum_of(back), checksum_of(g));
}

TEST_F(CliTest, ImportExportRoundTripIsExact) {
  const std::string a = create("a", kShape, {"--dtype", "f64", "--init", "random:7"});
  const std::string a_npy = tmp_ / "a.npy", b_npy = tmp_ / "b.npy", b = tmp_ / "b";
  ASSERT_TRUE(Succeeded(run_cli({"export", a, a_npy})));
  ASSERT_TRUE(Succeeded(run_cli({"import", a_npy, b})));
  EXPECT_EQ(checksum_of(b), checksum_of(a));
  ASSERT_TRUE(Succeeded(run_cli({"export", b, b_npy})));
  EXPECT_TRUE(read_file(a_npy) == read_file(b_npy)) << "a.npy and b.npy differ";
}

TEST_F(CliTest, StripingOverStoresDoesNotChangeResults) {
  // 256 KiB planes in 8 MiB chunks: 80 planes make 3 chunks, one per store.
  const char* const shape = "256x256x80";
  std::vector<std::string> stores;
  for (const char* s : {"s1", "s2", "s3"}) {
    stores.push_back(tmp_ / s);
    fs::create_directory(stores.back());
  }
  const std::string striped =
      create("striped", shape,
             {"--init", "random:11", "--store", stores[0] + "," + stores[1] + "," + stores[2]});
  const std::string plain = create("plain", shape, {"--init", "random:11"});

  for (const auto& s : stores) {
    SCOPED_TRACE(s);
    std::vector<fs::path> files(fs::directory_iterator(s), fs::directory_iterator{});
    ASSERT_EQ(files.size(), 1u);
    EXPECT_GT(fs::file_size(files[0]), 0u);
  }
  EXPECT_EQ(info_json(striped)["layout"]["files"].size(), 3u);

  for (const auto& g : {striped, plain}) {
    ASSERT_TRUE(Succeeded(run_cli({"run", g, "--stencil", "7pt", "--steps", "2"})));
  }
  EXPECT_EQ(checksum_of(striped), checksum_of(plain));
}

// The PNG's width and height from its header (IHDR: big-endian at bytes 16 and 20).
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes) {
  const auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = at; i < at + 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes.at(i));
    return v;
  };
  return {be32(16), be32(20)};
}

// The picture's pixels are checked in image_test.cc; here what plot says and writes.
TEST_F(CliTest, PlotWritesAPngAndSaysWhatItDrew) {
  const std::string g = create("g", kShape, {"--init", "gaussian"});
  ASSERT_TRUE(Succeeded(run_cli({"run", g, "--stencil", "7pt", "--steps", "2"})));
  const std::string png = tmp_ / "out.png";
  const RunResult r = run_cli({"plot", g, "--slice", "z=mid", "-o", png});
  ASSERT_TRUE(Succeeded(r));
  const std::string bytes = read_file(png);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const auto [w, h] = png_size(bytes);
  std::string expected = "(";
  expected += std::to_string(w);
  expected += "x";
  expected += std::to_string(h);
  expected += " pixels): g: z = 9, step 2; 37x23 cells of 13x13 pixels;";
  EXPECT_NE(r.out.find(expected), std::string::npos) << r;
  EXPECT_GT(w, 37u * 13);  // the cells, axes and colour bar
  EXPECT_GT(h, 23u * 13);
}

// plan says which fields a stream plan's carried planes hold: a wave scheme's u alone, u@1 and
// m read where they lie, m from a window that every stage reads; a plain stencil's without
// comment.
TEST_F(CliTest, PlanNamesTheFieldsTheStreamRingsHold) {
  const std::string w = create("w", "32x24x40", {"--scheme", "wave8"});
  const RunResult wave =
      run_cli({"plan", w, "--steps", "6", "--method", "stream", "--mem", "4MiB", "--bt", "3"});
  ASSERT_TRUE(Succeeded(wave));
  EXPECT_TRUE(contains(wave.out, "planes each of u (u@1, m read where they lie), a window of "))
      << wave;
  EXPECT_TRUE(contains(wave.out, " planes of m for every stage")) << wave;
  const std::string g = create("g", "32x24x40", {});
  const RunResult plain = run_cli(
      {"plan", g, "--stencil", "7pt", "--steps", "6", "--method", "stream", "--mem", "4MiB"});
  ASSERT_TRUE(Succeeded(plain));
  EXPECT_FALSE(contains(plain.out, "read where they lie")) << plain;
  EXPECT_FALSE(contains(plain.out, "a window of")) << plain;
}

// plan says when the in-core engine's tiles run in chains that carry their edges.
TEST_F(CliTest, PlanSaysWhenInCoreTilesCarryTheirEdges) {
  const std::string g = create("g", "32x24x20", {});
  const std::vector<std::string> plan = {"plan",      g,      "--stencil", "7pt",    "--steps",
                                         "8",         "--bt", "4",         "--tile", "32x4",
                                         "--threads", "2",    "--method",  "incore"};
  const RunResult text = run_cli(plan);
  ASSERT_TRUE(Succeeded(text));
  EXPECT_TRUE(contains(text.out, "tiles 32x4 in chains of up to 3 along y")) << text;
  std::vector<std::string> as_json = plan;
  as_json.push_back("--json");
  const RunResult j = run_cli(as_json);
  ASSERT_TRUE(Succeeded(j));
  EXPECT_EQ(parse_one_json_object(j)["chain_tiles"], 3) << j;
  std::vector<std::string> one_level = plan;
  one_level[7] = "1";  // --bt 1: no level hands anything on
  const RunResult flat = run_cli(one_level);
  ASSERT_TRUE(Succeeded(flat));
  EXPECT_FALSE(contains(flat.out, "chains")) << flat;
}

// plan shows what the comparison methods would do, with the disk space they need.
TEST_F(CliTest, PlanShowsTheMmapAndTiledMethods) {
  const std::string g = create("g", "32x24x20", {"--init", "random:2"});
  const RunResult mm =
      run_cli({"plan", g, "--stencil", "7pt", "--steps", "4", "--method", "mmap", "--json"});
  ASSERT_TRUE(Succeeded(mm));
  const json m = parse_one_json_object(mm);
  EXPECT_EQ(m["method"], "mmap");
  EXPECT_GE(m["disk_bytes"].get<uint64_t>(), 2u * 32 * 24 * 20 * 4) << "two padded copies";
  EXPECT_GE(m["machine"]["io_cpu_seconds_per_byte"].get<double>(), 0.0) << m.dump();
  const RunResult td = run_cli(
      {"plan", g, "--stencil", "7pt", "--steps", "4", "--method", "tiled", "--mem", "256KiB"});
  ASSERT_TRUE(Succeeded(td));
  EXPECT_TRUE(contains(td.out, "blocks 32x")) << td;
  EXPECT_TRUE(contains(td.out, "second copy")) << td;
  const RunResult run = run_cli(
      {"run", g, "--stencil", "7pt", "--steps", "4", "--method", "tiled", "--mem", "256KiB"});
  ASSERT_TRUE(Succeeded(run));
  for (const auto& entry : fs::directory_iterator(g)) {  // the grid's own files, no scratch
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "manifest.json" || name == "deepgrid.lock" ||
                name.rfind("checksums.", 0) == 0 || entry.path().extension() == ".dgd")
        << "left behind: " << entry.path();
  }
}

// bench takes --boundary: the in-core report names the rule it timed, and through --methods
// every run's own report (run_grid's) names the rule it ran.
TEST_F(CliTest, BenchRunsTheBoundaryAskedFor) {
  const RunResult in_memory = run_cli({"bench", "--shape", "24x20x16", "--steps", "2", "--repeats",
                                       "1", "--no-bandwidth", "--json", "--boundary", "periodic"});
  ASSERT_TRUE(Succeeded(in_memory));
  const json j = json::parse(in_memory.out);
  EXPECT_EQ(j.at("boundary"), "periodic");
  EXPECT_GT(j.at("mlups").get<double>(), 0);
  const RunResult methods =
      run_cli({"bench", "--methods", "incore,stream", "--shape", "64x48x32", "--steps", "2",
               "--mem-ratio", "2", "--dir", tmp_ / "bench", "--json", "--boundary", "neumann"});
  ASSERT_TRUE(Succeeded(methods));
  const json rows = json::parse(methods.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const json& row : rows) EXPECT_EQ(row.at("boundary"), "neumann") << row.dump();
}

// bench --sweep-plane: each plane width P gets a P x P x nz grid of --shape's points, run
// through the methods beside the kernel's in-cache rate; a width whose budget is too small for
// the stream method is reported as skipped, not an error.
TEST_F(CliTest, BenchSweepsPlaneSizesAtTheSameBytes) {
  const RunResult sweep =
      run_cli({"bench", "--sweep-plane", "16,32,128", "--shape", "32x32x64", "--steps", "2",
               "--mem-ratio", "2", "--dir", tmp_ / "bench", "--json"});
  ASSERT_TRUE(Succeeded(sweep)) << sweep;
  const json rows = json::parse(sweep.out);
  ASSERT_EQ(rows.size(), 6u) << sweep;
  const std::vector<std::pair<int, std::string>> expected = {
      {16, "16x16x256"}, {16, "16x16x256"},  {32, "32x32x64"},
      {32, "32x32x64"},  {128, "128x128x4"}, {128, "128x128x4"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    EXPECT_EQ(row.at("plane"), expected[i].first) << sweep;
    EXPECT_EQ(row.at("method"), i % 2 == 0 ? "incore" : "stream") << row.dump();
    EXPECT_GT(row.at("kernel_in_cache_mlups").get<double>(), 0) << row.dump();
    if (row.contains("skipped")) continue;
    EXPECT_EQ(row.at("shape"), expected[i].second) << row.dump();
    EXPECT_GT(row.at("incore_warm_mlups").get<double>(), 0) << row.dump();
  }
  // 128x128x4 at a 2x ratio leaves the stream method too little memory for a plane.
  EXPECT_TRUE(rows[5].contains("skipped")) << sweep;
  EXPECT_FALSE(rows[3].contains("skipped")) << sweep;
}

TEST(CliHelpTest, HelpMentionsStencilPresetsAndBoundary) {
  const RunResult top = run_cli({"--help"});
  ASSERT_TRUE(Succeeded(top));
  EXPECT_TRUE(contains(top.out, "7pt")) << top;

  const RunResult run = run_cli({"run", "--help"});
  ASSERT_TRUE(Succeeded(run));
  for (const char* preset : {"7pt", "13pt", "19pt", "25pt", "27pt", "5pt", "9pt", "--boundary"}) {
    EXPECT_TRUE(contains(run.out, preset)) << "'" << preset << "' missing\n" << run;
  }
}

TEST_F(CliTest, TwoDimensionalGrid) {
  const std::string g = create("g", "64x48", {"--init", "random:3"});
  ASSERT_TRUE(Succeeded(run_cli({"run", g, "--stencil", "5pt", "--steps", "2"})));
  const json info = info_json(g);
  EXPECT_EQ(info["shape"]["nz"], 1);
  EXPECT_EQ(info["step"], 2);
}

// `--kernel LIB.so` names a user's kernel library on create, run and plan (an alias of
// --scheme): a grid made and run that way equals one made with --scheme and run with its own.
TEST_F(CliTest, KernelOptionNamesAUsersLibrary) {
  const std::string lib = std::string(DEEPGRID_TEST_KERNEL_DIR) + "/libtest_kernel.so";
  const std::string a = create("a", "24x20x12", {"--kernel", lib, "--init", "random:4"});
  const std::string b = create("b", "24x20x12", {"--scheme", lib, "--init", "random:4"});
  const std::string before = checksum_of(a);
  ASSERT_EQ(before, checksum_of(b));
  ASSERT_TRUE(Succeeded(run_cli({"plan", a, "--kernel", lib, "--steps", "3"})));
  ASSERT_TRUE(Succeeded(run_cli({"run", a, "--kernel", lib, "--steps", "3"})));
  ASSERT_TRUE(Succeeded(run_cli({"run", b, "--steps", "3"})));
  EXPECT_NE(checksum_of(a), before);
  EXPECT_EQ(checksum_of(a), checksum_of(b));
}

// `create --scheme 27pt` records the stencil: the grid runs it without --stencil (as a grid of
// a scheme's fields runs its scheme), to the bits of a plain grid run with --stencil 27pt, and
// info names it; --stencil still overrides it.
TEST_F(CliTest, AGridCreatedForAStencilRunsItWithoutStencil) {
  const std::string own = create("own", "24x20x12", {"--scheme", "27pt", "--init", "random:4"});
  const std::string plain = create("plain", "24x20x12", {"--init", "random:4"});
  const std::string other = create("other", "24x20x12", {"--scheme", "27pt", "--init", "random:4"});
  ASSERT_EQ(checksum_of(own), checksum_of(plain));
  const RunResult info = run_cli({"info", own});
  ASSERT_TRUE(Succeeded(info));
  EXPECT_NE(info.out.find("stencil     27pt"), std::string::npos) << info;
  ASSERT_TRUE(Succeeded(run_cli({"run", own, "--steps", "3"})));
  ASSERT_TRUE(Succeeded(run_cli({"run", plain, "--stencil", "27pt", "--steps", "3"})));
  ASSERT_TRUE(Succeeded(run_cli({"run", other, "--stencil", "7pt", "--steps", "3"})));
  EXPECT_EQ(checksum_of(own), checksum_of(plain));
  EXPECT_NE(checksum_of(other), checksum_of(own));
  const RunResult unnamed = run_cli({"run", plain, "--steps", "1"});
  EXPECT_EQ(unnamed.exit_code, 2) << unnamed;
}

TEST_F(CliTest, RunShowsNoProgressWhenStderrIsNotATerminal) {
  const std::string g = create("g", kShape, {"--init", "random:5"});
  const RunResult r = run_cli({"run", g, "--stencil", "7pt", "--steps", "20"});
  ASSERT_TRUE(Succeeded(r));
  EXPECT_EQ(r.err, "") << r;
  EXPECT_FALSE(r.out.empty()) << r;
}

}  // namespace
