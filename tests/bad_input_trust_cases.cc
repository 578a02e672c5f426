// The tables of bad input of crafted grid directories (docs/security.md) and of split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bad_input_cases.h"
#include "cli_runner.h"
#include "damage.h"
#include "deepgrid/npy.h"

namespace deepgrid::testing::bad_input {

using nlohmann::json;

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
  return then(grid16(), [path_for](const fs::path& tmp) {
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
       then(grid16(), data_path([](const fs::path&) { return "values.bin"; })),
       {"info", kGrid},
       {"as deepgrid names it"}},
      {"RunDataFileLinkedOutside",
       then(grid16(), [](const fs::path& tmp) { link_outside(tmp, "data.0.dgd"); }),
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
       then(grid16(), checksum_table_outside),
       {"checksum", kGrid, "--verify"},
       {"symbolic link"}},
      {"RunSweepRecordNamingAFileOutside",
       then(grid16(), sweep_record_with_side_file_outside),
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
       {"striped over 2 stores"}},
      {"RelocateIntoAMissingStore",
       striped_grid(1),
       {"relocate", kGrid, "--store", "{tmp}/none"},
       {"does not exist"}},
      {"RelocateAGridWithoutStores",
       then(grid16(), directory("new")),
       {"relocate", kGrid, "--store", "{tmp}/new"},
       {"own directory"}},
  };
}

// deepgrid split (without mpirun, a job of one rank): a serial grid into a new directory.
std::vector<BadInputCase> split_cases() {
  const std::vector<std::string> split = {"split", kGrid, "{tmp}/new"};
  return {
      {"SplitIntoADirectoryThatIsNotNew",
       then(grid16(), directory("new", true)),
       split,
       {"not empty"}},
      {"SplitIntoTheGridItself", grid16(), {"split", kGrid, kGrid}, {"the grid to split"}},
      {"SplitADistributedGrid",
       [](const fs::path& tmp) { write_one_part_grid(tmp, "deepgrid-0123456789abcdef.part.0"); },
       split,
       {"distributed grid already"}},
      {"SplitAGridWithAnUnfinishedRun",
       then(grid16(), file_with("grid/run.json",
                                R"({"format": "deepgrid-run", "step_from": 0, "step_to": 10,
                                   "stencil": {"name": "7pt"}, "boundary": "periodic",
                                   "method": "stream", "flush_subnormals": false,
                                   "started": "2026-11-26T00:00:00Z"})")),
       split,
       {"--resume"}},
  };
}

}  // namespace deepgrid::testing::bad_input
