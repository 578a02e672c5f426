// What a distributed run would do, planned without changing anything: every rank lays out its
// part as the run would (split over the run's process grid, with the halos of its exchange
// depth) and plans its engine for a round.
#include <algorithm>
#include <cstdio>
#include <string>

#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/parts.h"
#include "run/resident_grid.h"

namespace deepgrid::mpi {

using nlohmann::json;
using namespace detail;

Result<RunPlan> detail::plan_part(const DistributedManifest& next, const RunOptions& opt, int k,
                                  int64_t steps, PartInfo* laid_out) {
  PartInfo mine = next.parts[static_cast<size_t>(rank())];
  mine.halo = fitted_halo(mine, next.shape, halo_of_depth(opt.scheme, k),
                          opt.boundary.kind == Boundary::Kind::kPeriodic);
  if (laid_out != nullptr) *laid_out = mine;
  RunOptions part_opt = engine_options(opt, mine, next);
  part_opt.steps = steps;
  DG_ASSIGN_OR_RETURN(const Manifest part,
                      manifest_for(part_options(grid_options(next.as_grid()), mine)));
  return plan_run(part, next.dir, part_opt, part_opt.machine);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DistributedPlan::Part, rank, shape, plan, predicted_seconds)

std::string DistributedPlan::to_json() const {
  json j = {{"grid", grid},
            {"stencil", stencil},
            {"ranks", ranks},
            {"process_grid", process_grid},
            {"exchange_bt", exchange_bt},
            {"halo", halo},
            {"steps", steps},
            {"rounds", rounds},
            {"parts_in_memory", parts_in_memory},
            {"per_rank", json::array()}};
  double slowest = 0;
  for (const Part& p : per_rank) {
    json part = p;
    part["plan"] = json::parse(p.plan);
    j["per_rank"].push_back(part);
    slowest = std::max(slowest, p.predicted_seconds);
  }
  j["predicted_seconds"] = slowest;
  return j.dump();
}

std::string DistributedPlan::to_text() const {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line,
                "grid        %s, distributed over %d rank%s (process grid %s)\n"
                "stencil     %s, %lld steps in %lld rounds of up to %d\n",
                grid.c_str(), ranks, ranks == 1 ? "" : "s", process_grid.c_str(), stencil.c_str(),
                static_cast<long long>(steps), static_cast<long long>(rounds), exchange_bt);
  out += line;
  if (ranks > 1) {
    std::snprintf(line, sizeof line,
                  "exchange    halos before every round: %lld, %lld, %lld points along x, y, z\n",
                  static_cast<long long>(halo[0]), static_cast<long long>(halo[1]),
                  static_cast<long long>(halo[2]));
    out += line;
  }
  out += parts_in_memory
             ? "parts       held for the whole run (in memory, or on their devices): loaded "
               "once, written at the end (and at checkpoints); halos exchanged from memory to "
               "memory\n"
             : "parts       streamed: every round goes through the parts' files (a part that does "
               "not fit --mem streams, and then every part's round does)\n";
  out += "rank  part              method  bt  bands  memory      predicted\n";
  double slowest = 0;
  for (const Part& p : per_rank) {
    const json plan = json::parse(p.plan);
    // (bands: rows of the part's bands, stream_bands.h; -: whole planes)
    const int64_t band_rows = plan.value("band_rows", int64_t{0});
    const std::string bands = band_rows > 0 ? std::to_string(band_rows) : "-";
    std::snprintf(
        line, sizeof line, "%4d  %-16s  %-6s  %2d  %-5s  %-10s  %8.2f s", p.rank, p.shape.c_str(),
        plan.at("method").get<std::string>().c_str(), plan.at("bt").get<int>(), bands.c_str(),
        format_size(plan.at("memory_bytes").get<uint64_t>()).c_str(), p.predicted_seconds);
    out += line;
    if (plan.contains("placement")) {  // the device method: where the part goes, on which device
      out += "  " + plan.at("placement").get<std::string>() + " on device " +
             std::to_string(plan.at("device").at("index").get<int>()) + " (" +
             format_size(plan.at("device_bytes").get<uint64_t>()) + " of its memory)";
    }
    out += "\n";
    slowest = std::max(slowest, p.predicted_seconds);
  }
  std::snprintf(line, sizeof line,
                "predicted   %.2f s for the slowest part's engine (halo exchanges and waits are "
                "not predicted)\n",
                slowest);
  return out + line;
}

Result<DistributedPlan> plan_distributed(const std::string& dir, const RunOptions& given,
                                         const std::optional<ProcessGrid>& procs) {
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, load_distributed(dir));
  RunOptions opt = given;
  share_machine(&opt);
  const Manifest whole = m.as_grid();
  auto scheme = scheme_for(whole, given.scheme);
  DG_RETURN_IF_ERROR(agree(scheme.status()));
  opt.scheme = std::move(scheme).value();
  DG_RETURN_IF_ERROR(check_run(whole, opt));
  DG_ASSIGN_OR_RETURN(const ProcessGrid grid, run_process_grid(m, procs));
  const DistributedManifest next = split_as(m, grid);
  DistributedPlan plan;
  plan.grid = m.shape.to_string() + " " + std::string(dtype_name(m.dtype));
  plan.stencil = opt.scheme.describe();
  plan.ranks = size();
  plan.process_grid = grid.to_string();
  plan.exchange_bt = exchange_depth(next, opt);
  plan.halo = exchanged_halo(opt.scheme, plan.exchange_bt, grid);
  plan.steps = opt.steps;
  const int64_t k = plan.exchange_bt, full = opt.steps / k, rest = opt.steps % k;
  plan.rounds = full + (rest > 0 ? 1 : 0);
  PartInfo laid_out;
  Result<RunPlan> round = plan_part(next, opt, plan.exchange_bt, full > 0 ? k : rest, &laid_out);
  DG_RETURN_IF_ERROR(agree(round.status()));
  Result<RunPlan> last = *round;
  if (full > 0 && rest > 0) last = plan_part(next, opt, plan.exchange_bt, rest, nullptr);
  DG_RETURN_IF_ERROR(agree(last.status()));
  plan.parts_in_memory = !any_rank(!held_between_rounds(*round));
  // Held parts load and write once, streamed parts go through their files every round. What a
  // held part pays once: the disk, and a device-resident part's copies to and from its device
  // (a host-resident part's copies are its passes', every round).
  auto once = [&](const RunPlan& p) {
    if (!plan.parts_in_memory) return 0.0;
    const bool resident =
        p.method == Method::kDevice && p.device.placement == DevicePlacement::kDeviceResident;
    return p.predicted_io_seconds + (resident ? p.predicted_copy_seconds : 0);
  };
  auto per_round = [&](const RunPlan& p) { return p.predicted_seconds - once(p); };
  double seconds = static_cast<double>(full) * per_round(*round) +
                   (rest > 0 ? per_round(*last) : 0) + once(*round);
  const DistributedPlan::Part mine{rank(), laid_out.shape().to_string(), round->to_json(), seconds};
  for (const std::string& text : all_gather(json(mine).dump())) {
    plan.per_rank.push_back(json::parse(text).get<DistributedPlan::Part>());
  }
  return plan;
}

}  // namespace deepgrid::mpi
