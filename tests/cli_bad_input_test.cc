// The command line's refusals of bad input, as a catalogue of cases (docs/bad_input.md): each
// spawns the real binary in a fresh temporary directory and checks that it exits 2 with one
// line on stderr naming the problem, prints nothing on stdout and changes nothing on disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"
#include "damage.h"
#include "deepgrid/npy.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace deepgrid::testing;  // cli_runner.h: running the CLI and checking what it did
using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit code 2, one line on stderr naming the problem, nothing on stdout, nothing
// changed on disk.

// Prepares the temporary directory of a case (passed as its path).
using Setup = std::function<void(const fs::path&)>;

struct BadInputCase {
  std::string name;
  Setup setup;                        // may be empty
  std::vector<std::string> args;      // "{tmp}" stands for the temporary directory
  std::vector<std::string> keywords;  // the error line must contain one (case-insensitive)
  bool needs_permissions = false;     // meaningless as root
  std::string must_not_exist;         // a path outside {tmp} the command must not create

  BadInputCase(std::string name_, Setup setup_, std::vector<std::string> args_,
               std::vector<std::string> keywords_)
      : name(std::move(name_)),
        setup(std::move(setup_)),
        args(std::move(args_)),
        keywords(std::move(keywords_)) {}
  BadInputCase&& needing_permissions() && {
    needs_permissions = true;
    return std::move(*this);
  }
  BadInputCase&& not_creating(std::string path) && {
    must_not_exist = std::move(path);
    return std::move(*this);
  }
};

void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.name; }

const char* const kGrid = "{tmp}/grid";

std::string expand(std::string arg, const fs::path& tmp) {
  const std::string key = "{tmp}";
  for (size_t pos; (pos = arg.find(key)) != std::string::npos;) arg.replace(pos, key.size(), tmp);
  return arg;
}

// Setups.
Setup grid_of(std::string shape) {
  return [shape](const fs::path& tmp) {
    ASSERT_TRUE(Succeeded(
        run_cli({"create", (tmp / "grid").string(), "--shape", shape, "--init", "random:1"})));
  };
}

Setup then(Setup first, Setup second) {
  return [first, second](const fs::path& tmp) {
    first(tmp);
    if (!::testing::Test::HasFatalFailure()) second(tmp);
  };
}

Setup file_with(std::string name, std::string text) {
  return [name, text](const fs::path& tmp) { write_file(tmp / name, text); };
}

// A probes file of `count` receivers, at the points of a 16x16x4 grid in turn.
std::string receivers_json(int count) {
  std::string at;
  for (int i = 0; i < count; ++i) {
    at += (i == 0 ? "[" : ", [") + std::to_string(i % 16) + ", " + std::to_string(i / 16 % 16) +
          ", " + std::to_string(i / 256 % 4) + "]";
  }
  return R"({"receivers": [{"at": [)" + at + "]}]}";
}

Setup directory(std::string name, bool with_a_file = false) {
  return [name, with_a_file](const fs::path& tmp) {
    fs::create_directory(tmp / name);
    if (with_a_file) write_file(tmp / name / "keep.txt", "keep\n");
  };
}

fs::path manifest_of(const fs::path& tmp) { return tmp / "grid" / "manifest.json"; }

fs::path data_file_of(const fs::path& tmp) {
  const json m = json::parse(read_file(manifest_of(tmp)));
  return tmp / "grid" / m["layout"]["files"][0]["path"].get<std::string>();
}

void truncate_manifest(const fs::path& tmp) {
  const std::string text = read_file(manifest_of(tmp));
  write_file(manifest_of(tmp), text.substr(0, text.size() / 2));
}

void set_manifest_version_99(const fs::path& tmp) {
  json m = json::parse(read_file(manifest_of(tmp)));
  m["version"] = 99;
  write_file(manifest_of(tmp), m.dump(2) + "\n");
}

void truncate_data_by_4096(const fs::path& tmp) {
  const fs::path data = data_file_of(tmp);
  fs::resize_file(data, fs::file_size(data) - 4096);
}

void make_read_only(const fs::path& tmp) {
  const fs::path grid = tmp / "grid";
  for (const auto& e : fs::directory_iterator(grid)) {
    fs::permissions(e.path(), fs::perms(0444));
  }
  fs::permissions(grid, fs::perms(0555));
}

// Flips one byte inside plane 2 of the grid's first data file.
void damage_plane_2(const fs::path& tmp) {
  const json m = json::parse(read_file(manifest_of(tmp)));
  deepgrid::testing::flip_byte(data_file_of(tmp),
                               2 * m["layout"]["plane_stride"].get<int64_t>() + 5);
}

// Makes the grid look like one from format version 1, which had no checksum table.
void drop_checksums(const fs::path& tmp) {
  json m = json::parse(read_file(manifest_of(tmp)));
  fs::remove(tmp / "grid" / m["checksums"]["file"].get<std::string>());
  m.erase("checksums");  // as a grid whose table was never complete
  write_file(manifest_of(tmp), m.dump(2) + "\n");
}

Setup set_manifest_field(std::string section, std::string key, json value) {
  return [=](const fs::path& tmp) {
    json m = json::parse(read_file(manifest_of(tmp)));
    (section.empty() ? m : m[section])[key] = value;
    write_file(manifest_of(tmp), m.dump(2) + "\n");
  };
}

void remove_data_file(const fs::path& tmp) { fs::remove(data_file_of(tmp)); }

const Setup kGrid16 = grid_of("16x16x4");

// A copy of a test kernel library (tests/kernels/test_kernel.c; variant "" or e.g. "_abi2")
// as {tmp}/libk.so.
Setup kernel_copy(std::string variant) {
  return [variant](const fs::path& tmp) {
    fs::copy_file(std::string(DEEPGRID_TEST_KERNEL_DIR) + "/libtest_kernel" + variant + ".so",
                  tmp / "libk.so");
  };
}

// A grid of the test kernel whose library then went away.
void grid_of_a_moved_kernel(const fs::path& tmp) {
  kernel_copy("")(tmp);
  ASSERT_TRUE(Succeeded(run_cli({"create", (tmp / "grid").string(), "--shape", "8x8x8", "--scheme",
                                 (tmp / "libk.so").string()})));
  fs::remove(tmp / "libk.so");
}

std::vector<std::string> run_with_stencil(std::string stencil,
                                          std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run", kGrid, "--stencil", std::move(stencil), "--steps", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// create's arguments: into a new directory {tmp}/new, or `dir` when given.
std::vector<std::string> create_args(std::vector<std::string> extra, std::string dir = "") {
  const std::string fresh = "{tmp}/new";
  std::vector<std::string> args = {"create", dir.empty() ? fresh : dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// create: shapes, dtypes, initial conditions and where the grid goes.
std::vector<BadInputCase> create_cases() {
  return {
      {"CreateZeroExtent", {}, create_args({"--shape", "0x10x10"}), {"shape"}},
      {"CreateNegativeExtent", {}, create_args({"--shape", "-5x10x10"}), {"shape"}},
      {"CreateOverflowingShape",
       {},
       create_args({"--shape", "1099511627776x1099511627776x1"}),
       {"shape"}},
      {"CreateNonNumericExtent", {}, create_args({"--shape", "10xAx10"}), {"shape"}},
      {"CreateUnknownDtype", {}, create_args({"--shape", "8x8x8", "--dtype", "f16"}), {"dtype"}},
      {"CreateUnknownInit", {}, create_args({"--shape", "8x8x8", "--init", "foo:1"}), {"init"}},
      BadInputCase("CreateMissingParent", {}, create_args({"--shape", "8x8x8"}, "/nonexistent/x/y"),
                   {"exist"})
          .not_creating("/nonexistent/x/y"),
      {"CreateIntoNonEmptyDirectory",
       directory("new", /*with_a_file=*/true),
       create_args({"--shape", "8x8x8"}),
       {"empty"}},
      {"CreateMissingStore",
       {},
       create_args({"--shape", "8x8x8", "--store", "{tmp}/no-such-store"}),
       {"store"}},
      {"CreateLargerThanFreeSpace", {}, create_args({"--shape", "1048576x1048576x64"}), {"space"}},
  };
}

// Users' kernel libraries that cannot serve (docs/kernels.md).
std::vector<BadInputCase> kernel_cases() {
  return {
      {"CreateKernelMissing",
       {},
       create_args({"--shape", "8x8x8", "--scheme", "{tmp}/libmissing.so"}),
       {"exist"}},
      {"CreateNotAKernel",
       kernel_copy("_none"),
       create_args({"--shape", "8x8x8", "--scheme", "{tmp}/libk.so"}),
       {"not a deepgrid kernel"}},
      {"CreateKernelOfAnotherAbi",
       kernel_copy("_abi2"),
       create_args({"--shape", "8x8x8", "--scheme", "{tmp}/libk.so"}),
       {"ABI version"}},
      {"CreateKernelWithoutTheDtype",
       kernel_copy("_f32"),
       create_args({"--shape", "8x8x8", "--dtype", "f64", "--scheme", "{tmp}/libk.so"}),
       {"no f64 version"}},
      {"RunKernelMoved", grid_of_a_moved_kernel, {"run", kGrid, "--steps", "1"}, {"exist"}},
  };
}

// run: its stencil and options (and the like options of create, plan and bench).
std::vector<BadInputCase> run_option_cases() {
  return {
      {"RunUnknownStencil", kGrid16, run_with_stencil("8pt"), {"stencil"}},
      {"RunCoefficientCountMismatch",
       kGrid16,
       run_with_stencil("7pt", {"--coeffs", "1,2,3"}),
       {"coefficients"}},
      {"RunMalformedStencilJson",
       then(kGrid16, file_with("bad.json", R"({"points": [[0,0,0)")),
       run_with_stencil("{tmp}/bad.json"),
       {"json"}},
      {"RunStencilPointNotFourElements",
       then(kGrid16, file_with("three.json", R"({"points": [[0,0,0], [1,0,0]]})")),
       run_with_stencil("{tmp}/three.json"),
       {"point"}},
      {"RunStencilLargerThanGrid", grid_of("4x4x2"), run_with_stencil("25pt"), {"grid"}},
      {"RunNegativeSteps", kGrid16, {"run", kGrid, "--stencil", "7pt", "--steps", "-3"}, {"steps"}},
      {"RunWithoutSteps", kGrid16, {"run", kGrid, "--stencil", "7pt"}, {"--steps", "--resume"}},
      {"RunNegativeCheckpoint",
       kGrid16,
       {"run", kGrid, "--stencil", "7pt", "--steps", "1", "--checkpoint", "-1"},
       {"--checkpoint", ">= 0"}},
      {"RunResumeWithNothingToResume",
       kGrid16,
       {"run", kGrid, "--resume"},
       {"no unfinished run", "--steps"}},
      {"CreateNegativeSparePlanes",
       {},
       create_args({"--shape", "8x8x8", "--spare-planes", "-5"}),
       {"--spare-planes"}},
      {"CreateProcessGridWithoutMpirun",
       {},
       create_args({"--shape", "8x8x8", "--procs", "2x1x1"}),
       {"--procs 2x1x1", "mpirun"}},
      {"RunUnknownBoundary",
       kGrid16,
       run_with_stencil("7pt", {"--boundary", "reflect"}),
       {"boundary"}},
      {"RunDirichletWithoutNumber",
       kGrid16,
       run_with_stencil("7pt", {"--boundary", "dirichlet:abc"}),
       {"boundary"}},
      {"RunUnknownMethod", kGrid16, run_with_stencil("7pt", {"--method", "magic"}), {"method"}},
      {"BenchUnknownBoundary",
       {},
       {"bench", "--shape", "16x16x16", "--steps", "1", "--no-bandwidth", "--boundary", "reflect"},
       {"boundary"}},
      {"RunTiledWithoutBudget",
       kGrid16,
       run_with_stencil("7pt", {"--method", "tiled"}),
       {"budget"}},
      {"RunTiledBudgetBelowMinimum",
       kGrid16,
       run_with_stencil("7pt", {"--method", "tiled", "--mem", "4KiB"}),
       {"minimum"}},
      {"RunTiledBlocksOverBudget",
       kGrid16,
       run_with_stencil("7pt", {"--method", "tiled", "--mem", "24KiB", "--tile", "16x16"}),
       {"minimum"}},
      {"PlanTiledBudgetBelowMinimum",
       kGrid16,
       {"plan", kGrid, "--stencil", "7pt", "--steps", "1", "--method", "tiled", "--mem", "4KiB"},
       {"minimum"}},
      {"RunMmapOverBudget",
       kGrid16,
       run_with_stencil("7pt", {"--method", "mmap", "--mem", "1KiB"}),
       {"--mem"}},
      {"RunWithoutStencil", kGrid16, {"run", kGrid, "--steps", "1"}, {"stencil"}},
  };
}

// Schemes, fields and probes (docs/schemes.md).
std::vector<BadInputCase> scheme_and_probe_cases() {
  return {
      {"CreateUnknownScheme",
       {},
       create_args({"--shape", "8x8x8", "--scheme", "wave5"}),
       {"wave8"}},
      {"RunSchemeTheGridLacksFieldsFor", kGrid16, run_with_stencil("wave8"), {"u, u@1, m"}},
      {"RunSchemeWithUnknownField",
       then(kGrid16, file_with("s.json", R"({"fields": [{"name": "u"}],
                                              "update": {"u": [{"field": "w"}]}})")),
       run_with_stencil("{tmp}/s.json"),
       {"'w'", "not a field"}},
      {"ImportIntoUnknownField",
       kGrid16,
       {"import", "{tmp}/none.npy", kGrid, "--field", "v"},
       {"no field 'v'"}},
      {"RunSourceOutsideTheGrid",
       then(kGrid16, file_with("p.json", R"({"sources": [{"at": [99, 0, 0], "series": [1]}]})")),
       run_with_stencil("7pt", {"--probes", "{tmp}/p.json"}),
       {"outside the grid"}},
      {"RunReceiversWithoutTraces",
       then(kGrid16, file_with("r.json", R"({"receivers": [{"at": [1, 1, 1]}]})")),
       run_with_stencil("7pt", {"--probes", "{tmp}/r.json"}),
       {"--traces"}},
      {"RunTracesWithoutProbes",
       kGrid16,
       run_with_stencil("7pt", {"--traces", "{tmp}/t.npy"}),
       {"--traces", "--probes"}},
      {"RunTracesIntoAMissingDirectory",
       then(kGrid16, file_with("r.json", R"({"receivers": [{"at": [1, 1, 1]}]})")),
       run_with_stencil("7pt", {"--probes", "{tmp}/r.json", "--traces", "{tmp}/none/t.npy"}),
       {"--traces", "does not exist"}},
      // A pass's values (up to 64 steps) x 3000 receivers x 8 bytes: 1.5 MiB, more than --mem.
      {"RunTracesLargerThanMem",
       then(kGrid16, file_with("r.json", receivers_json(3000))),
       {"run", kGrid, "--stencil", "7pt", "--steps", "100", "--mem", "1MiB", "--probes",
        "{tmp}/r.json", "--traces", "{tmp}/t.npy"},
       {"--mem", "receivers"}},
  };
}

// Traces as SEG-Y (run --traces OUT.sgy, deepgrid traces): formats, --dt, --spacing.
std::vector<BadInputCase> segy_cases() {
  const Setup probes = then(kGrid16, file_with("r.json", receivers_json(2)));
  auto run_traces = [](std::vector<std::string> more) {
    more.insert(more.begin(), {"--probes", "{tmp}/r.json", "--traces", "{tmp}/t.sgy"});
    return run_with_stencil("7pt", more);
  };
  // A traces file of 5 steps and 2 receivers, as run --traces t.npy writes it.
  const Setup npy = then(probes, [](const fs::path& tmp) {
    const std::string header = deepgrid::npy_header(deepgrid::DType::kF64, {5, 2});
    write_file(tmp / "t.npy", header + std::string(5 * 2 * sizeof(double), '\0'));
  });
  auto convert = [](std::vector<std::string> more, std::string out = "{tmp}/t.sgy") {
    std::vector<std::string> args = {"traces", "{tmp}/t.npy", out, "--probes", "{tmp}/r.json"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  return {
      {"RunTracesUnknownFormat",
       probes,
       run_with_stencil("7pt", {"--probes", "{tmp}/r.json", "--traces", "{tmp}/t.csv"}),
       {".sgy", ".npy"}},
      {"RunSegyTracesWithoutDt", probes, run_traces({}), {"--dt"}},
      {"RunSegyTracesZeroDt", probes, run_traces({"--dt", "0"}), {"--dt"}},
      {"RunSegyTracesDtTooLong", probes, run_traces({"--dt", "0.05"}), {"32767 microseconds"}},
      {"RunDtWithNpyTraces",
       probes,
       run_with_stencil("7pt",
                        {"--probes", "{tmp}/r.json", "--traces", "{tmp}/t.npy", "--dt", "1"}),
       {"SEG-Y"}},
      {"RunSegyTracesWithoutReceivers",
       then(kGrid16, file_with("r.json", R"({"sources": [{"at": [1, 1, 1], "series": [1]}]})")),
       run_traces({"--dt", "0.001"}),
       {"no receivers"}},
      {"TracesWithoutDt", npy, convert({}), {"--dt"}},
      {"TracesBadSpacing", npy, convert({"--dt", "0.001", "--spacing", "1,2"}), {"--spacing"}},
      {"TracesToNpy", npy, convert({"--dt", "0.001"}, "{tmp}/u.npy"), {".sgy"}},
      {"TracesOfOtherReceivers",
       then(npy, file_with("r.json", receivers_json(3))),
       convert({"--dt", "0.001"}),
       {"2 columns", "3 receivers"}},
  };
}

// The grid itself: a broken manifest or data file, refused by run, info and checksum.
std::vector<BadInputCase> broken_grid_cases() {
  return {
      BadInputCase("RunUnwritableGrid", then(kGrid16, make_read_only), run_args(kGrid),
                   {"writable", "permission"})
          .needing_permissions(),
      {"InfoTruncatedManifest", then(kGrid16, truncate_manifest), {"info", kGrid}, {"manifest"}},
      {"RunTruncatedManifest", then(kGrid16, truncate_manifest), run_args(kGrid), {"manifest"}},
      {"InfoNewerManifestVersion",
       then(kGrid16, set_manifest_version_99),
       {"info", kGrid},
       {"newer"}},
      {"InfoTruncatedDataFile",
       then(kGrid16, truncate_data_by_4096),
       {"info", kGrid},
       {"bytes", "damaged"}},
      {"RunTruncatedDataFile",
       then(kGrid16, truncate_data_by_4096),
       run_args(kGrid),
       {"bytes", "damaged"}},
      {"ChecksumTruncatedDataFile",
       then(kGrid16, truncate_data_by_4096),
       {"checksum", kGrid},
       {"bytes", "damaged"}},
      {"InfoMissingDataFile", then(kGrid16, remove_data_file), {"info", kGrid}, {"missing"}},
      {"InfoManifestExtentNotAnInteger",
       then(kGrid16, set_manifest_field("shape", "nx", 1e300)),
       {"info", kGrid},
       {"integer"}},
      {"InfoManifestLayoutInconsistent",
       then(kGrid16, set_manifest_field("layout", "plane_stride", 12345)),
       {"info", kGrid},
       {"layout"}},
      {"InfoManifestNotAGridManifest",
       then(kGrid16, set_manifest_field("", "format", "something-else")),
       {"info", kGrid},
       {"manifest"}},
  };
}

// Damaged values, found through the per-plane checksums.
std::vector<BadInputCase> damaged_value_cases() {
  return {
      {"RunVerifyDamagedPlane",
       then(kGrid16, damage_plane_2),
       run_args(kGrid, {"--verify"}),
       {"checksum"}},
      {"RunStreamVerifyDamagedPlane",
       then(kGrid16, damage_plane_2),
       run_args(kGrid, {"--verify", "--method", "stream", "--mem", "8MiB"}),
       {"checksum"}},
      {"ChecksumVerifyDamagedPlane",
       then(kGrid16, damage_plane_2),
       {"checksum", kGrid, "--verify"},
       {"checksum"}},
      {"ExportVerifyDamagedPlane",
       then(kGrid16, damage_plane_2),
       {"export", kGrid, "{tmp}/out.npy", "--verify"},
       {"checksum"}},
      {"RunVerifyWithoutChecksums",
       then(kGrid16, drop_checksums),
       run_args(kGrid, {"--verify"}),
       {"checksums"}},
      {"ChecksumVerifyMissingChecksumTable",
       then(kGrid16, then(drop_checksums,
                          set_manifest_field("", "checksums",
                                             {{"algorithm", "xxh3-64"}, {"generation", 7}}))),
       {"checksum", kGrid, "--verify"},
       {"checksums.7.json"}},
  };
}

// More options of run, import and plot.
std::vector<BadInputCase> more_option_cases() {
  return {
      {"RunStencilOffsetBeyondRadius",
       then(kGrid16, file_with("far.json", R"({"points": [[0,0,0,1], [4294967297,0,0,0]]})")),
       run_with_stencil("{tmp}/far.json"),
       {"offset"}},
      {"RunMemBelowTheMinimum",
       kGrid16,
       run_with_stencil("7pt", {"--method", "stream", "--mem", "1KiB"}),
       {"--mem"}},
      {"RunMalformedMemSize", kGrid16, run_with_stencil("7pt", {"--mem", "12XB"}), {"size"}},
      {"RunStreamWithoutMem", kGrid16, run_with_stencil("7pt", {"--method", "stream"}), {"--mem"}},
      {"RunMalformedTile",
       kGrid16,
       run_with_stencil("7pt", {"--tile", "8x"}),
       {"--tile", "256x32"}},
      {"RunZeroTile", kGrid16, run_with_stencil("7pt", {"--tile", "0x8"}), {"--tile", "positive"}},
      {"RunUnknownIoBackend", kGrid16, run_with_stencil("7pt", {"--io", "aio"}), {"uring"}},
      {"ExportToAFormatItDoesNotWrite",
       kGrid16,
       {"export", kGrid, "{tmp}/out.zarr"},
       {".vtkhdf", "to_zarr"}},
      {"ExportNpyWithSpacing",
       kGrid16,
       {"export", kGrid, "{tmp}/out.npy", "--spacing", "2"},
       {"--spacing", ".vtkhdf"}},
      {"ExportTwoSpacings",
       kGrid16,
       {"export", kGrid, "{tmp}/out.vtkhdf", "--spacing", "1,2"},
       {"--spacing", "x,y,z"}},
      {"ExportZeroDownsample",
       kGrid16,
       {"export", kGrid, "{tmp}/out.vtkhdf", "--downsample", "0"},
       {"--downsample", ">= 1"}},
      {"ExportUnknownField",
       kGrid16,
       {"export", kGrid, "{tmp}/out.vtkhdf", "--field", "v"},
       {"field", "v"}},
      {"RunEveryWithoutSnapshots",
       kGrid16,
       run_with_stencil("7pt", {"--every", "3"}),
       {"--snapshots"}},
      {"RunSnapshotOptionsWithoutSnapshots",
       kGrid16,
       run_with_stencil("7pt", {"--downsample", "2"}),
       {"--snapshots DIR"}},
      {"RunSnapshotsEveryZero",
       kGrid16,
       run_with_stencil("7pt", {"--snapshots", "{tmp}/snaps", "--every", "0"}),
       {"--every", ">= 1"}},
      {"RunSnapshotsWithTiled",
       kGrid16,
       run_with_stencil("7pt", {"--snapshots", "{tmp}/snaps", "--every", "1", "--method", "tiled",
                                "--mem", "1MiB"}),
       {"tiled", "snapshots"}},
      {"RunSnapshotsIntoAFile",
       then(kGrid16, file_with("notadir", "x")),
       run_with_stencil("7pt", {"--snapshots", "{tmp}/notadir", "--every", "2"}),
       {"directory"}},
      {"ImportNotANpyFile",
       file_with("bad.npy", "not numpy"),
       {"import", "{tmp}/bad.npy", "{tmp}/new"},
       {"npy"}},
      {"PlotBadSlice", kGrid16, {"plot", kGrid, "--slice", "w=3", "-o", "{tmp}/x.png"}, {"slice"}},
  };
}

// Commands on a directory that does not exist, or is not a grid.
std::vector<BadInputCase> missing_directory_cases() {
  std::vector<BadInputCase> cases;
  const std::vector<std::pair<std::string, std::function<std::vector<std::string>(std::string)>>>
      commands = {
          {"Info",
           [](std::string d) {
             return std::vector<std::string>{"info", std::move(d)};
           }},
          {"Checksum",
           [](std::string d) {
             return std::vector<std::string>{"checksum", std::move(d)};
           }},
          {"Run", [](std::string d) { return run_args(std::move(d)); }},
          {"Split",
           [](std::string d) {
             return std::vector<std::string>{"split", std::move(d), "{tmp}/new"};
           }},
      };
  for (const auto& [name, args] : commands) {
    cases.emplace_back(name + "MissingDirectory", Setup{}, args("{tmp}/missing"),
                       std::vector<std::string>{"exist"});
    cases.emplace_back(name + "NotAGrid", directory("empty"), args("{tmp}/empty"),
                       std::vector<std::string>{"grid"});
  }
  return cases;
}

// A crafted grid directory (docs/security.md): each points outside the grid at a bait file in
// {tmp}/outside, which the snapshot of {tmp} shows unchanged after the refusal.
fs::path outside(const fs::path& tmp) {
  fs::create_directories(tmp / "outside");
  return tmp / "outside";
}

Setup data_path(std::function<std::string(const fs::path&)> path_for) {
  return [path_for](const fs::path& tmp) {
    json m = json::parse(read_file(manifest_of(tmp)));
    m["layout"]["files"][0]["path"] = path_for(tmp);
    write_file(manifest_of(tmp), m.dump(2) + "\n");
  };
}

// A copy of the data file outside the grid, and the manifest naming it there by `path_for`.
Setup data_file_outside(std::function<std::string(const fs::path&)> path_for) {
  return then(kGrid16, [path_for](const fs::path& tmp) {
    fs::copy_file(data_file_of(tmp), outside(tmp) / "data.0.dgd");
    data_path(path_for)(tmp);
  });
}

// `name` in the grid moved to {tmp}/outside and a symbolic link to it left in its place.
void link_outside(const fs::path& tmp, const std::string& name) {
  const fs::path in_grid = tmp / "grid" / name, bait = outside(tmp) / name;
  fs::rename(in_grid, bait);
  fs::create_symlink(bait, in_grid);
}

void checksum_table_outside(const fs::path& tmp) {
  const json m = json::parse(read_file(manifest_of(tmp)));
  link_outside(tmp, m["checksums"]["file"].get<std::string>());
}

void sweep_record_with_side_file_outside(const fs::path& tmp) {
  write_file(outside(tmp) / "bait", "bait\n");
  write_file(tmp / "grid" / "sweep.json",
             R"({"format": "deepgrid-sweep", "step_from": 0, "levels": 2, "base_from": 0,
                 "spare": 64, "done": 0, "hashes": [], "stencil": {"name": "7pt"},
                 "boundary": "periodic", "side_file": "../outside/bait",
                 "started": "2026-11-26T00:00:00Z"})");
}

// A distributed grid of one part in {tmp}/grid, its manifest naming `part_dir` as the part
// (which is not made).
void write_one_part_grid(const fs::path& tmp, const std::string& part_dir) {
  fs::create_directory(tmp / "grid");
  const json part = {{"rank", 0},
                     {"box", {{"x", {0, 16}}, {"y", {0, 16}}, {"z", {0, 4}}}},
                     {"halo", {{"x", {0, 0}}, {"y", {0, 0}}, {"z", {0, 0}}}},
                     {"dir", part_dir},
                     {"stores", json::array()}};
  const json m = {{"format", "deepgrid-distributed"},
                  {"version", 5},
                  {"id", "0123456789abcdef"},
                  {"shape", {{"nx", 16}, {"ny", 16}, {"nz", 4}}},
                  {"dtype", "f32"},
                  {"byte_order", "little"},
                  {"step", 0},
                  {"decomposition", {{"process_grid", {1, 1, 1}}, {"ranks", 1}, {"parts", {part}}}},
                  {"history", json::array()}};
  write_file(manifest_of(tmp), m.dump(2) + "\n");
}

// A distributed grid of one part whose manifest names a grid outside it as that part.
void distributed_part_outside(const fs::path& tmp) {
  const fs::path victim = outside(tmp) / "victim";
  ASSERT_TRUE(Succeeded(run_cli({"create", victim.string(), "--shape", "16x16x4"})));
  write_one_part_grid(tmp, victim.string());
}

// A grid of the test kernel made through {tmp}/libk.so, a symbolic link to a copy of it.
void grid_of_a_linked_kernel(const fs::path& tmp) {
  fs::copy_file(std::string(DEEPGRID_TEST_KERNEL_DIR) + "/libtest_kernel.so", tmp / "liba.so");
  fs::copy_file(std::string(DEEPGRID_TEST_KERNEL_DIR) + "/libtest_kernel_f32.so", tmp / "libb.so");
  fs::create_symlink(tmp / "liba.so", tmp / "libk.so");
  ASSERT_TRUE(Succeeded(run_cli({"create", (tmp / "grid").string(), "--shape", "8x8x8", "--scheme",
                                 (tmp / "libk.so").string()})));
}

void swap_kernel_link(const fs::path& tmp) {
  fs::remove(tmp / "libk.so");
  fs::create_symlink(tmp / "libb.so", tmp / "libk.so");
}

void rebuild_kernel(const fs::path& tmp) {  // another build in the same place
  fs::remove(tmp / "liba.so");
  fs::copy_file(tmp / "libb.so", tmp / "liba.so");
}

void unpin_kernel(const fs::path& tmp) {
  json m = json::parse(read_file(manifest_of(tmp)));
  m["scheme"].erase("sha256");
  write_file(manifest_of(tmp), m.dump(2) + "\n");
}

Setup striped_grid(int stores) {
  return [stores](const fs::path& tmp) {
    std::string list;  // "{tmp}/s0,{tmp}/s1"
    for (const char* name : {"s0", "s1"}) {
      if (name[1] - '0' == stores) break;
      fs::create_directory(tmp / name);
      if (!list.empty()) list += ',';
      list += (tmp / name).string();
    }
    ASSERT_TRUE(Succeeded(
        run_cli({"create", (tmp / "grid").string(), "--shape", "16x16x4", "--store", list})));
  };
}

std::string bait_path(const fs::path& tmp) { return (tmp / "outside" / "data.0.dgd").string(); }

// Grids that point outside themselves, and kernels that are not the build a grid recorded.
std::vector<BadInputCase> trust_cases() {
  return {
      {"RunDataFileOutsideTheGrid", data_file_outside(bait_path), run_args(kGrid), {"outside"}},
      {"RunDataFileNameWithDotDot",
       data_file_outside([](const fs::path&) { return "../outside/data.0.dgd"; }),
       run_args(kGrid),
       {"outside"}},
      {"InfoDataFileOfAnUnknownName",
       then(kGrid16, data_path([](const fs::path&) { return "values.bin"; })),
       {"info", kGrid},
       {"as deepgrid names it"}},
      {"RunDataFileLinkedOutside",
       then(kGrid16, [](const fs::path& tmp) { link_outside(tmp, "data.0.dgd"); }),
       run_args(kGrid),
       {"symbolic link"}},
      {"ExportDataFileOutsideTheGrid",
       data_file_outside(bait_path),
       {"export", kGrid, "{tmp}/out.npy"},
       {"outside"}},
      {"FsckDataFileOutsideTheGrid", data_file_outside(bait_path), {"fsck", kGrid}, {"outside"}},
      {"ImportIntoAGridOutsideItself",
       data_file_outside(bait_path),
       {"import", "{tmp}/none.npy", kGrid, "--field", "u"},
       {"outside"}},
      {"ChecksumTableLinkedOutside",
       then(kGrid16, checksum_table_outside),
       {"checksum", kGrid, "--verify"},
       {"symbolic link"}},
      {"RunSweepRecordNamingAFileOutside",
       then(kGrid16, sweep_record_with_side_file_outside),
       {"run", kGrid, "--resume", "--mem", "8MiB"},
       {"side file"}},
      {"InfoDistributedPartOutsideItsRoot",
       distributed_part_outside,
       {"info", kGrid},
       {"where deepgrid puts it"}},
      {"RunKernelRebuilt",
       then(grid_of_a_linked_kernel, rebuild_kernel),
       {"run", kGrid, "--steps", "1"},
       {"SHA-256"}},
      {"RunKernelLinkSwapped",
       then(grid_of_a_linked_kernel, swap_kernel_link),
       {"run", kGrid, "--steps", "1"},
       {"SHA-256"}},
      {"RunKernelNotPinned",
       then(grid_of_a_linked_kernel, unpin_kernel),
       {"run", kGrid, "--steps", "1"},
       {"SHA-256"}},
      {"RelocateWrongNumberOfStores",
       then(striped_grid(2), directory("new")),
       {"relocate", kGrid, "--store", "{tmp}/new"},
       {"2 data files"}},
      {"RelocateIntoAMissingStore",
       striped_grid(1),
       {"relocate", kGrid, "--store", "{tmp}/none"},
       {"does not exist"}},
      {"RelocateAGridWithoutStores",
       then(kGrid16, directory("new")),
       {"relocate", kGrid, "--store", "{tmp}/new"},
       {"own directory"}},
  };
}

// deepgrid split (without mpirun, a job of one rank): a serial grid into a new directory.
std::vector<BadInputCase> split_cases() {
  const std::vector<std::string> split = {"split", kGrid, "{tmp}/new"};
  return {
      {"SplitIntoADirectoryThatIsNotNew",
       then(kGrid16, directory("new", true)),
       split,
       {"not empty"}},
      {"SplitIntoTheGridItself", kGrid16, {"split", kGrid, kGrid}, {"the grid to split"}},
      {"SplitADistributedGrid",
       [](const fs::path& tmp) { write_one_part_grid(tmp, "deepgrid-0123456789abcdef.part.0"); },
       split,
       {"distributed grid already"}},
      {"SplitAGridWithAnUnfinishedRun",
       then(kGrid16, file_with("grid/run.json",
                               R"({"format": "deepgrid-run", "step_from": 0, "step_to": 10,
                                   "stencil": {"name": "7pt"}, "boundary": "periodic",
                                   "method": "stream", "flush_subnormals": false,
                                   "started": "2026-11-26T00:00:00Z"})")),
       split,
       {"--resume"}},
  };
}

// The catalogue: every case, in the order of docs/bad_input.md.
std::vector<BadInputCase> bad_input_cases() {
  std::vector<BadInputCase> cases;
  for (const auto& table : {create_cases, kernel_cases, run_option_cases, scheme_and_probe_cases,
                            segy_cases, broken_grid_cases, damaged_value_cases, more_option_cases,
                            split_cases,
                            missing_directory_cases, trust_cases}) {
    for (BadInputCase& c : table()) cases.push_back(std::move(c));
  }
  return cases;
}

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {};

// `text` with the temporary directory written as {tmp}, as the catalogue shows it.
std::string with_tmp_placeholder(std::string text, const fs::path& tmp) {
  const std::string t = tmp.string();
  for (size_t pos; (pos = text.find(t)) != std::string::npos;) text.replace(pos, t.size(), "{tmp}");
  return text;
}

// With DEEPGRID_BAD_INPUT_TABLE=FILE, each case appends its row of docs/bad_input.md there:
// how the table's messages are regenerated.
void append_catalogue_row(const char* table, const BadInputCase& c, const RunResult& r,
                          const fs::path& tmp) {
  std::string command = "deepgrid";
  for (const auto& a : c.args) command += " " + a;
  std::string message = with_tmp_placeholder(r.err, tmp);
  if (!message.empty() && message.back() == '\n') message.pop_back();
  std::ofstream(table, std::ios::app)
      << "| " << c.name << " | `" << command << "` | `" << message << "` |\n";
}

TEST_P(BadInputTest, ExitsTwoWithOneLineAndChangesNothing) {
  const BadInputCase& c = GetParam();
  SCOPED_TRACE(c.name);
  if (c.needs_permissions && ::geteuid() == 0) {
    GTEST_SKIP() << "running as root: permissions are not enforced";
  }
  TempDir tmp;
  if (c.setup) {
    ASSERT_NO_FATAL_FAILURE(c.setup(tmp.path()));
  }
  const Snapshot before = snapshot(tmp.path());
  std::vector<std::string> args;
  for (const auto& a : c.args) args.push_back(expand(a, tmp.path()));

  const RunResult r = run_cli(args);

  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(r.out, "") << r;
  const bool one_line =
      r.err.size() > 1 && r.err.back() == '\n' && std::count(r.err.begin(), r.err.end(), '\n') == 1;
  EXPECT_TRUE(one_line) << "stderr is not exactly one non-empty line\n" << r;
  const std::string err = lower(r.err);
  EXPECT_TRUE(std::any_of(c.keywords.begin(), c.keywords.end(),
                          [&](const std::string& k) { return contains(err, lower(k)); }))
      << "stderr mentions none of: " << join_args(c.keywords) << "\n"
      << r;
  EXPECT_TRUE(snapshot(tmp.path()) == before) << "files under " << tmp.path() << " changed\n" << r;
  if (!c.must_not_exist.empty()) {
    EXPECT_FALSE(fs::exists(c.must_not_exist)) << c.must_not_exist << " was created";
  }
  if (const char* table = std::getenv("DEEPGRID_BAD_INPUT_TABLE")) {
    append_catalogue_row(table, c, r, tmp.path());
  }
}

TEST(BadInputCatalogue, DocsListEveryCase) {
  const std::string doc = read_file(fs::path(DEEPGRID_SOURCE_DIR) / "docs" / "bad_input.md");
  ASSERT_FALSE(doc.empty()) << "docs/bad_input.md is missing";
  for (const BadInputCase& c : bad_input_cases()) {
    EXPECT_TRUE(contains(doc, "| " + c.name + " |"))
        << c.name << " has no row in docs/bad_input.md";
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, BadInputTest, ::testing::ValuesIn(bad_input_cases()),
                         [](const ::testing::TestParamInfo<BadInputCase>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
