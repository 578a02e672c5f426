// The tables of bad input of every command but the trust cases and split
// (bad_input_trust_cases.cc), and the setups they share (bad_input_cases.h).
#include "bad_input_cases.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"
#include "damage.h"
#include "deepgrid/npy.h"

namespace deepgrid::testing::bad_input {

using nlohmann::json;

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

Setup directory(std::string name, bool with_a_file) {
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

Setup grid16() { return grid_of("16x16x4"); }

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
      {"RunUnknownStencil", grid16(), run_with_stencil("8pt"), {"stencil"}},
      {"RunCoefficientCountMismatch",
       grid16(),
       run_with_stencil("7pt", {"--coeffs", "1,2,3"}),
       {"coefficients"}},
      {"RunCoeffsWithoutStencil",
       grid16(),
       {"run", kGrid, "--steps", "1", "--coeffs", "0.4,0.1"},
       {"--stencil"}},
      {"RunMalformedStencilJson",
       then(grid16(), file_with("bad.json", R"({"points": [[0,0,0)")),
       run_with_stencil("{tmp}/bad.json"),
       {"json"}},
      {"RunStencilPointNotFourElements",
       then(grid16(), file_with("three.json", R"({"points": [[0,0,0], [1,0,0]]})")),
       run_with_stencil("{tmp}/three.json"),
       {"point"}},
      {"RunStencilLargerThanGrid", grid_of("4x4x2"), run_with_stencil("25pt"), {"grid"}},
      {"RunNegativeSteps",
       grid16(),
       {"run", kGrid, "--stencil", "7pt", "--steps", "-3"},
       {"steps"}},
      {"RunWithoutSteps", grid16(), {"run", kGrid, "--stencil", "7pt"}, {"--steps", "--resume"}},
      {"RunNegativeCheckpoint",
       grid16(),
       {"run", kGrid, "--stencil", "7pt", "--steps", "1", "--checkpoint", "-1"},
       {"--checkpoint", ">= 0"}},
      {"RunResumeWithNothingToResume",
       grid16(),
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
       grid16(),
       run_with_stencil("7pt", {"--boundary", "reflect"}),
       {"boundary"}},
      {"RunDirichletWithoutNumber",
       grid16(),
       run_with_stencil("7pt", {"--boundary", "dirichlet:abc"}),
       {"boundary"}},
      {"RunUnknownMethod", grid16(), run_with_stencil("7pt", {"--method", "magic"}), {"method"}},
      {"BenchUnknownBoundary",
       {},
       {"bench", "--shape", "16x16x16", "--steps", "1", "--no-bandwidth", "--boundary", "reflect"},
       {"boundary"}},
      {"BenchSweepPlaneNotAWidth",
       {},
       {"bench", "--sweep-plane", "256,0.5", "--shape", "16x16x16", "--steps", "1"},
       {"--sweep-plane", "256,512"}},
      {"BenchSweepPlaneWithAnotherSweep",
       {},
       {"bench", "--sweep-plane", "16,32", "--sweep-bt", "1,2", "--shape", "16x16x16"},
       {"--sweep-plane", "drop"}},
      {"RunTiledWithoutBudget",
       grid16(),
       run_with_stencil("7pt", {"--method", "tiled"}),
       {"budget"}},
      {"RunTiledBudgetBelowMinimum",
       grid16(),
       run_with_stencil("7pt", {"--method", "tiled", "--mem", "4KiB"}),
       {"minimum"}},
      {"RunTiledBlocksOverBudget",
       grid16(),
       run_with_stencil("7pt", {"--method", "tiled", "--mem", "24KiB", "--tile", "16x16"}),
       {"minimum"}},
      {"PlanTiledBudgetBelowMinimum",
       grid16(),
       {"plan", kGrid, "--stencil", "7pt", "--steps", "1", "--method", "tiled", "--mem", "4KiB"},
       {"minimum"}},
      {"RunMmapOverBudget",
       grid16(),
       run_with_stencil("7pt", {"--method", "mmap", "--mem", "1KiB"}),
       {"--mem"}},
      {"RunWithoutStencil", grid16(), {"run", kGrid, "--steps", "1"}, {"stencil"}},
  };
}

// Schemes, fields and probes (docs/schemes.md).
std::vector<BadInputCase> scheme_and_probe_cases() {
  return {
      {"CreateUnknownScheme",
       {},
       create_args({"--shape", "8x8x8", "--scheme", "wave5"}),
       {"wave8"}},
      {"RunSchemeTheGridLacksFieldsFor", grid16(), run_with_stencil("wave8"), {"u, u@1, m"}},
      {"RunSchemeWithUnknownField",
       then(grid16(), file_with("s.json", R"({"fields": [{"name": "u"}],
                                              "update": {"u": [{"field": "w"}]}})")),
       run_with_stencil("{tmp}/s.json"),
       {"'w'", "not a field"}},
      {"ImportIntoUnknownField",
       grid16(),
       {"import", "{tmp}/none.npy", kGrid, "--field", "v"},
       {"no field 'v'"}},
      {"RunSourceOutsideTheGrid",
       then(grid16(), file_with("p.json", R"({"sources": [{"at": [99, 0, 0], "series": [1]}]})")),
       run_with_stencil("7pt", {"--probes", "{tmp}/p.json"}),
       {"outside the grid"}},
      {"RunReceiversWithoutTraces",
       then(grid16(), file_with("r.json", R"({"receivers": [{"at": [1, 1, 1]}]})")),
       run_with_stencil("7pt", {"--probes", "{tmp}/r.json"}),
       {"--traces"}},
      {"RunTracesWithoutProbes",
       grid16(),
       run_with_stencil("7pt", {"--traces", "{tmp}/t.npy"}),
       {"--traces", "--probes"}},
      {"RunTracesIntoAMissingDirectory",
       then(grid16(), file_with("r.json", R"({"receivers": [{"at": [1, 1, 1]}]})")),
       run_with_stencil("7pt", {"--probes", "{tmp}/r.json", "--traces", "{tmp}/none/t.npy"}),
       {"--traces", "does not exist"}},
      // A pass's values (up to 64 steps) x 3000 receivers x 8 bytes: 1.5 MiB, more than --mem.
      {"RunTracesLargerThanMem",
       then(grid16(), file_with("r.json", receivers_json(3000))),
       {"run", kGrid, "--stencil", "7pt", "--steps", "100", "--mem", "1MiB", "--probes",
        "{tmp}/r.json", "--traces", "{tmp}/t.npy"},
       {"--mem", "receivers"}},
  };
}

// Traces as SEG-Y (run --traces OUT.sgy, deepgrid traces): formats, --dt, --spacing.
std::vector<BadInputCase> segy_cases() {
  const Setup probes = then(grid16(), file_with("r.json", receivers_json(2)));
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
       then(grid16(), file_with("r.json", R"({"sources": [{"at": [1, 1, 1], "series": [1]}]})")),
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
      BadInputCase("RunUnwritableGrid", then(grid16(), make_read_only), run_args(kGrid),
                   {"writable", "permission"})
          .needing_permissions(),
      {"InfoTruncatedManifest", then(grid16(), truncate_manifest), {"info", kGrid}, {"manifest"}},
      {"RunTruncatedManifest", then(grid16(), truncate_manifest), run_args(kGrid), {"manifest"}},
      {"InfoNewerManifestVersion",
       then(grid16(), set_manifest_version_99),
       {"info", kGrid},
       {"newer"}},
      {"InfoTruncatedDataFile",
       then(grid16(), truncate_data_by_4096),
       {"info", kGrid},
       {"bytes", "damaged"}},
      {"RunTruncatedDataFile",
       then(grid16(), truncate_data_by_4096),
       run_args(kGrid),
       {"bytes", "damaged"}},
      {"ChecksumTruncatedDataFile",
       then(grid16(), truncate_data_by_4096),
       {"checksum", kGrid},
       {"bytes", "damaged"}},
      {"InfoMissingDataFile", then(grid16(), remove_data_file), {"info", kGrid}, {"missing"}},
      {"InfoManifestExtentNotAnInteger",
       then(grid16(), set_manifest_field("shape", "nx", 1e300)),
       {"info", kGrid},
       {"integer"}},
      {"InfoManifestLayoutInconsistent",
       then(grid16(), set_manifest_field("layout", "plane_stride", 12345)),
       {"info", kGrid},
       {"layout"}},
      {"InfoManifestNotAGridManifest",
       then(grid16(), set_manifest_field("", "format", "something-else")),
       {"info", kGrid},
       {"manifest"}},
  };
}

// Damaged values, found through the per-plane checksums.
std::vector<BadInputCase> damaged_value_cases() {
  return {
      {"RunVerifyDamagedPlane",
       then(grid16(), damage_plane_2),
       run_args(kGrid, {"--verify"}),
       {"checksum"}},
      {"RunStreamVerifyDamagedPlane",
       then(grid16(), damage_plane_2),
       run_args(kGrid, {"--verify", "--method", "stream", "--mem", "8MiB"}),
       {"checksum"}},
      {"ChecksumVerifyDamagedPlane",
       then(grid16(), damage_plane_2),
       {"checksum", kGrid, "--verify"},
       {"checksum"}},
      {"ExportVerifyDamagedPlane",
       then(grid16(), damage_plane_2),
       {"export", kGrid, "{tmp}/out.npy", "--verify"},
       {"checksum"}},
      {"RunVerifyWithoutChecksums",
       then(grid16(), drop_checksums),
       run_args(kGrid, {"--verify"}),
       {"checksums"}},
      {"ChecksumVerifyMissingChecksumTable",
       then(grid16(), then(drop_checksums,
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
       then(grid16(), file_with("far.json", R"({"points": [[0,0,0,1], [4294967297,0,0,0]]})")),
       run_with_stencil("{tmp}/far.json"),
       {"offset"}},
      {"RunMemBelowTheMinimum",
       grid16(),
       run_with_stencil("7pt", {"--method", "stream", "--mem", "1KiB"}),
       {"--mem"}},
      {"RunMalformedMemSize", grid16(), run_with_stencil("7pt", {"--mem", "12XB"}), {"size"}},
      {"RunStreamWithoutMem", grid16(), run_with_stencil("7pt", {"--method", "stream"}), {"--mem"}},
      {"RunMalformedTile",
       grid16(),
       run_with_stencil("7pt", {"--tile", "8x"}),
       {"--tile", "256x32"}},
      {"RunZeroTile", grid16(), run_with_stencil("7pt", {"--tile", "0x8"}), {"--tile", "positive"}},
      {"RunMalformedBandRows",
       grid16(),
       run_with_stencil("7pt", {"--method", "stream", "--mem", "1MiB", "--band-rows", "-3"}),
       {"--band-rows", "256"}},
      {"RunBandsTallerThanAPeriodicGrid",
       grid16(),
       run_with_stencil("7pt", {"--method", "stream", "--mem", "1MiB", "--band-rows", "15",
                                "--boundary", "periodic"}),
       {"--band-rows", "periodic", "16 rows"}},
      {"RunUnknownIoBackend", grid16(), run_with_stencil("7pt", {"--io", "aio"}), {"uring"}},
      {"ExportToAFormatItDoesNotWrite",
       grid16(),
       {"export", kGrid, "{tmp}/out.zarr"},
       {".vtkhdf", "to_zarr"}},
      {"ExportNpyWithSpacing",
       grid16(),
       {"export", kGrid, "{tmp}/out.npy", "--spacing", "2"},
       {"--spacing", ".vtkhdf"}},
      {"ExportTwoSpacings",
       grid16(),
       {"export", kGrid, "{tmp}/out.vtkhdf", "--spacing", "1,2"},
       {"--spacing", "x,y,z"}},
      {"ExportZeroDownsample",
       grid16(),
       {"export", kGrid, "{tmp}/out.vtkhdf", "--downsample", "0"},
       {"--downsample", ">= 1"}},
      {"ExportUnknownField",
       grid16(),
       {"export", kGrid, "{tmp}/out.vtkhdf", "--field", "v"},
       {"field", "v"}},
      {"RunEveryWithoutSnapshots",
       grid16(),
       run_with_stencil("7pt", {"--every", "3"}),
       {"--snapshots"}},
      {"RunSnapshotOptionsWithoutSnapshots",
       grid16(),
       run_with_stencil("7pt", {"--downsample", "2"}),
       {"--snapshots DIR"}},
      {"RunSnapshotsEveryZero",
       grid16(),
       run_with_stencil("7pt", {"--snapshots", "{tmp}/snaps", "--every", "0"}),
       {"--every", ">= 1"}},
      {"RunSnapshotsWithTiled",
       grid16(),
       run_with_stencil("7pt", {"--snapshots", "{tmp}/snaps", "--every", "1", "--method", "tiled",
                                "--mem", "1MiB"}),
       {"tiled", "snapshots"}},
      {"RunSnapshotsIntoAFile",
       then(grid16(), file_with("notadir", "x")),
       run_with_stencil("7pt", {"--snapshots", "{tmp}/notadir", "--every", "2"}),
       {"directory"}},
      {"ImportNotANpyFile",
       file_with("bad.npy", "not numpy"),
       {"import", "{tmp}/bad.npy", "{tmp}/new"},
       {"npy"}},
      {"PlotBadSlice", grid16(), {"plot", kGrid, "--slice", "w=3", "-o", "{tmp}/x.png"}, {"slice"}},
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
          {"Upgrade",
           [](std::string d) {
             return std::vector<std::string>{"upgrade", std::move(d)};
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

}  // namespace deepgrid::testing::bad_input
