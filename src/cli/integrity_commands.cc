// deepgrid checksum and fsck: what a grid's values are (their SHA-256 and statistics), and
// whether every plane still matches the checksum recorded when it was written.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"
#include "deepgrid/checksum.h"
#include "deepgrid/fsck.h"
#include "deepgrid/store.h"
#include "store/distributed_manifest.h"

namespace deepgrid::cli {
namespace {

using nlohmann::json;

struct ChecksumArgs {
  std::string dir, field;
  bool json = false, verify = false;
};

int cmd_checksum(const std::string& dir, bool as_json, bool verify, const std::string& field) {
  GridSummary s;
  int64_t step = 0;
  if (in_mpi_job() || is_distributed_grid(dir)) {
    s = get(distributed_summary(dir, verify, field, &step));
    if (!prints()) return 0;
  } else {
    Grid g = open_to_read(dir, verify);
    s = get(summarize(g, field.empty() ? -1 : field_index(g.manifest(), field)));
    step = g.manifest().step;
  }
  if (as_json) {
    json j = {{"sha256", s.sha256}, {"min", s.min}, {"max", s.max},
              {"mean", s.mean},     {"l2", s.l2},   {"nan_count", s.nan_count},
              {"step", step}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("sha256  %s\nmin     %.17g\nmax     %.17g\nmean    %.17g\nl2      %.17g\n",
                s.sha256.c_str(), s.min, s.max, s.mean, s.l2);
    if (s.nan_count > 0) std::printf("nan     %lld\n", static_cast<long long>(s.nan_count));
  }
  return 0;
}

struct FsckArgs {
  std::string dir;
  bool json = false;
};

int cmd_fsck(const std::string& dir, bool as_json) {
  check(refuse_under_mpi("fsck"));
  check(refuse_distributed(dir, "fsck"));
  const Grid g = get(Grid::open(dir));
  const FsckReport r = get(fsck_grid(g));
  if (as_json) {
    json damaged = json::array();
    for (const DamagedPlane& d : r.damaged) {
      json entry = {{"plane", d.z}, {"file", d.file}, {"offset", d.offset}};
      if (!d.coef_file.empty()) {
        entry["coef_file"] = d.coef_file;
        entry["coef_offset"] = d.coef_offset;
      }
      damaged.push_back(entry);
    }
    std::printf("%s\n", json{{"damage_found", r.damage_found()},
                             {"has_checksums", r.has_checksums},
                             {"problem", r.problem},
                             {"interrupted_sweep", r.interrupted_sweep},
                             {"resumable", r.resumable},
                             {"planes_checked", r.planes_checked},
                             {"damaged", damaged}}
                            .dump()
                            .c_str());
  } else {
    if (!r.interrupted_sweep.empty() && r.resumable) {
      std::printf(
          "interrupted: a crash cut short an in-place %s; the old planes it needs were checked "
          "below; finish it with 'deepgrid run %s --resume --mem SIZE'\n",
          r.interrupted_sweep.c_str(), dir.c_str());
    } else if (!r.interrupted_sweep.empty()) {
      std::printf("damaged: a crash interrupted an in-place %s; its planes mix two time steps\n",
                  r.interrupted_sweep.c_str());
    }
    for (const DamagedPlane& d : r.damaged) {
      const std::string coefficients =
          d.coef_file.empty() ? ""
                              : " (its coefficients in " + d.coef_file + " at offset " +
                                    std::to_string(d.coef_offset) + ")";
      std::printf("damaged: plane %lld in %s at offset %lld%s does not match its checksum\n",
                  static_cast<long long>(d.z), d.file.c_str(), static_cast<long long>(d.offset),
                  coefficients.c_str());
    }
    if (!r.problem.empty()) {
      std::printf("damaged: %s; planes not checked\n", r.problem.c_str());
    } else if (!r.has_checksums) {
      std::printf(
          "%s: structure ok; planes not checked: no checksums (written before format "
          "version 2), the next run records them\n",
          dir.c_str());
    } else {
      std::printf("%s: %lld planes checked, %zu damaged%s\n", dir.c_str(),
                  static_cast<long long>(r.planes_checked), r.damaged.size(),
                  r.damaged.empty() ? "" : "; restore the grid from a backup");
    }
  }
  return r.damage_found() ? kExitDamaged : 0;
}

}  // namespace

Command add_checksum_command(CLI::App& app) {
  auto a = std::make_shared<ChecksumArgs>();
  auto* checksum = app.add_subcommand(
      "checksum", "SHA-256 of the values (little-endian, (z, y, x) order) and min/max/mean/L2");
  checksum->add_option("DIR", a->dir, "Grid directory")->required();
  checksum->add_flag("--json", a->json, "Print as one JSON object");
  checksum->add_flag("--verify", a->verify, "Check every plane against its recorded checksum");
  checksum->add_option("--field", a->field,
                       "Only this field of a grid of several (default: all of them, each "
                       "plane's fields in order)");
  return {checksum, [a] { return cmd_checksum(a->dir, a->json, a->verify, a->field); }};
}

Command add_fsck_command(CLI::App& app) {
  auto a = std::make_shared<FsckArgs>();
  auto* fsck = app.add_subcommand(
      "fsck", "Check every plane against its recorded checksum; list damaged planes (exit 4)");
  fsck->add_option("DIR", a->dir, "Grid directory")->required();
  fsck->add_flag("--json", a->json, "Print as one JSON object");
  return {fsck, [a] { return cmd_fsck(a->dir, a->json); }};
}

}  // namespace deepgrid::cli
