// A run stopped part-way, and how the next run goes on.
//
// A run records its range in DIR/run.json (rank 0; resume.h's RunRecord) before its first
// round, and each part records the round it is in (its own run.json, run.h's record_run) once
// the round's halos are in place and committed on every rank. So a run stopped at any moment
// leaves either every part at the round's first step s (some part had not recorded the round:
// then none went past s, and the exchange is done again), or, once all had, each part at s,
// part-way through the round, or at its end t, holding all it needs to reach t alone (its
// halos hold step s). The next run first takes every part to t, then goes on from there.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/parts.h"

namespace deepgrid::mpi {

using nlohmann::json;
using namespace detail;

namespace {

// Where a part stands: its committed step, the end of the round it recorded and has not
// finished (its step when none), the start of the round it is in or just finished (its
// step when none), whether an in-place sweep was cut in its middle.
struct PartProgress {
  int64_t step = 0;
  int64_t target = 0;
  int64_t round_from = 0;
  bool mid_sweep = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PartProgress, step, target, round_from, mid_sweep)

PartProgress progress_of(const Grid& part) {
  PartProgress p;
  p.step = p.target = p.round_from = part.manifest().step;
  if (const std::optional<RunRecord> r = current_run(part)) {
    p.target = r->step_to;
    p.round_from = r->step_from;
  }
  p.mid_sweep = !part.interrupted_sweep().empty();
  return p;
}

}  // namespace

Result<GridProgress> detail::grid_progress(const DistributedManifest& m) {
  if (size() != m.ranks()) return GridProgress{m.step, false, m.step, m.step};
  auto part = open_part_as_is(m, rank(), Grid::Mode::kReadOnly);
  DG_RETURN_IF_ERROR(agree(part.status()));
  std::vector<PartProgress> all;
  for (const std::string& text : all_gather(json(progress_of(*part)).dump())) {
    all.push_back(json::parse(text).get<PartProgress>());
  }
  const bool level = std::all_of(all.begin(), all.end(), [&](const PartProgress& p) {
    return p.step == all.front().step && !p.mid_sweep;
  });
  int64_t round_from = all.front().step;
  for (const PartProgress& p : all) round_from = std::min(round_from, p.round_from);
  if (level) return GridProgress{all.front().step, false, all.front().step, round_from};
  int64_t t = 0, from = all.front().step;
  for (const PartProgress& p : all) {
    t = std::max(t, p.target);
    from = std::min(from, p.step);
  }
  std::string steps;
  bool one_round = true;  // each part at t, or recorded to reach it
  for (const PartProgress& p : all) {
    steps += (steps.empty() ? "" : ", ") + std::to_string(p.step);
    one_round = one_round && p.target == t;
  }
  if (!one_round) {
    return corrupt("the parts of " + m.dir + " stand at time steps " + steps +
                   " with no recorded round that takes them all to one step; restore the grid "
                   "from a backup");
  }
  return GridProgress{t, true, from, round_from};
}

std::optional<RunRecord> recorded_run(const DistributedManifest& m) {
  std::string text;  // rank 0 reads the record; every rank gets it
  if (rank() == 0) {
    if (const std::optional<RunRecord> r = read_run_record(m.dir, m.step)) text = r->to_json();
  }
  text = broadcast(text);
  if (text.empty()) return std::nullopt;
  auto r = RunRecord::from_json(text);
  if (!r.ok()) return std::nullopt;
  return std::move(r).value();
}

RunStart detail::run_start(const DistributedManifest& m, const GridProgress& g,
                           std::optional<RunRecord> recorded) {
  RunStart at;
  at.dir = m.dir;
  at.step = g.at;
  at.recorded = std::move(recorded);
  at.stopped_part_way = g.mid_round;
  at.stopped_how = "stopped part-way";
  at.resume_command =
      "mpirun -n " + std::to_string(m.ranks()) + " deepgrid run " + m.dir + " --resume";
  return at;
}

Status detail::check_parts_stand(const DistributedManifest& m, const GridProgress& g,
                                 const RunStart& at, const RunToDo& todo) {
  if (!todo.resumed && (g.mid_round || (g.at != m.step && !at.recorded))) {
    return corrupt("the parts of " + m.dir + " stand at time step " + std::to_string(g.at) +
                   " but the grid is at step " + std::to_string(m.step) +
                   " and no run record says why; restore the grid from a backup");
  }
  return Status::Ok();
}

}  // namespace deepgrid::mpi
