#include "deepgrid/run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "core/process_stats.h"
#include "core/stopwatch.h"
#include "deepgrid/fsck.h"
#include "deepgrid/machine.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/traces_file.h"
#include "engines/stream_engine.h"
#include "engines/subnormals.h"
#include "engines/tiled_engine.h"
#include "plan/plan.h"
#include "plan/preflight.h"
#include "run/lifecycle.h"
#include "run/resident_grid.h"
#include "run/snapshots.h"
#include "store/grid_paths.h"

namespace deepgrid {
namespace {

using internal::seconds_since;

// A part of a run adds its figures to the run's; the first gives the plan's (method, bt...).
// (Snapshots are counted into the run's report after the parts before them.)
void add_part(RunReport* run, const RunReport& part, bool first) {
  if (first) {
    *run = part;
    return;
  }
  run->steps += part.steps;
  run->compute_seconds += part.compute_seconds;
  run->io_wait_seconds += part.io_wait_seconds;
  run->io_wait_for_writes_seconds += part.io_wait_for_writes_seconds;
  run->bytes_read += part.bytes_read;
  run->bytes_written += part.bytes_written;
  run->engine_memory = std::max(run->engine_memory, part.engine_memory);
}

// A run in parts that end on its snapshot steps (one part when it takes none): `run_part`
// advances part.steps steps from `step`, then `snapshot` takes the one due there. The parts'
// progress is reported as the whole run's; a part that stops early ends the run.
using RunPart = std::function<Result<RunReport>(const RunOptions& part, int64_t step)>;
using TakeSnapshot = std::function<Status(int64_t step, RunReport* report)>;
Result<RunReport> run_in_parts(const RunOptions& opt, int64_t step, const RunPart& run_part,
                               const TakeSnapshot& snapshot) {
  RunReport run;
  int64_t left = opt.steps;
  bool first = true;
  do {
    RunOptions part = opt;
    part.steps = steps_to_next_snapshot(opt.snapshots, step, left);
    part.advances_again = opt.advances_again || part.steps < left;
    if (opt.progress && part.steps < opt.steps) {
      part.progress = [&opt, before = opt.steps - left](int64_t done, int64_t) {
        return opt.progress(before + done, opt.steps);
      };
    }
    DG_ASSIGN_OR_RETURN(const RunReport r, run_part(part, step));
    add_part(&run, r, std::exchange(first, false));
    step += r.steps;
    left -= r.steps;
    if (r.steps < part.steps) break;
    if (snapshot_due(opt.snapshots, step)) DG_RETURN_IF_ERROR(snapshot(step, &run));
  } while (left > 0);
  return run;
}

Result<RunReport> run_incore(Grid& grid, const RunOptions& opt, const RunPlan& plan,
                             const ResolvedProbes* probes) {
  const auto t0 = std::chrono::steady_clock::now();
  DG_ASSIGN_OR_RETURN(ResidentGrid held, ResidentGrid::load(grid, opt, plan));
  const Manifest& m = grid.manifest();
  DG_ASSIGN_OR_RETURN(
      RunReport r,
      run_in_parts(
          opt, m.step,
          [&](const RunOptions& part, int64_t step) { return held.advance(part, step, probes); },
          [&](int64_t step, RunReport* report) {
            return take_snapshot(m, opt.snapshots, held.planes(m.shape), step, report);
          }));
  // The new state goes into a replacement of the data files, committed by run_grid: a crash
  // before that leaves the grid at its old step.
  DG_RETURN_IF_ERROR(held.write_replacement(grid));
  held.describe(&r);  // (the device method's copies, the store included)
  r.bytes_read = static_cast<uint64_t>(m.grid_read_bytes());
  r.bytes_written = static_cast<uint64_t>(m.grid_write_bytes());
  r.seconds = seconds_since(t0);
  // What the load and store took tells later plans what an in-core run costs besides its steps.
  if (plan.method == Method::kInCore && opt.record_disk_rate) {
    record_incore_load_store(grid, r.seconds - r.compute_seconds - r.snapshot_seconds);
  }
  return r;
}

Result<RunReport> run_stream_part(Grid& grid, const RunOptions& opt, const RunPlan& plan,
                                  const ResolvedProbes* probes) {
  StreamOptions so = plan.stream_options;
  so.probes = probes;
  so.placement = opt.placement;
  so.keep_replaced_files = opt.advances_again;
  if (plan.method == Method::kDevice) so.device = &plan.device;
  const int64_t busy0 = opt.record_disk_rate ? grid_disks_busy_ms(grid) : -1;
  DG_ASSIGN_OR_RETURN(StreamStats stats, advance_stream(grid, opt.scheme, opt.boundary, opt.steps,
                                                        plan.stream, so, opt.progress));
  // What the sweeps moved while the disks were busy tells later plans what they sustain.
  if (const int64_t busy1 = busy0 >= 0 ? grid_disks_busy_ms(grid) : -1; busy1 >= 0) {
    record_sweep_bandwidth(grid, static_cast<double>(stats.bytes_read + stats.bytes_written),
                           1e-3 * static_cast<double>(busy1 - busy0));
  }
  RunReport r;
  r.method = std::string(method_name(plan.method));
  r.threads = plan.stream.threads;
  r.bt = plan.stream.bt;
  r.tile = std::to_string(plan.stream.tile_x) + "x" + std::to_string(plan.stream.tile_y);
  r.band_rows = plan.stream.band_rows;
  r.steps = stats.steps;
  r.compute_seconds = stats.compute_seconds;
  r.io_wait_seconds = stats.io_wait_seconds;
  r.io_wait_for_writes_seconds = stats.io_wait_for_writes_seconds;
  r.io_backend = std::string(io::backend_name(stats.backend));
  r.bytes_read = stats.bytes_read;
  r.bytes_written = stats.bytes_written;
  r.engine_memory = plan.memory_bytes;
  if (so.device != nullptr) {
    r.device = plan.device.device.name;
    r.device_placement = std::string(placement_name(plan.device.placement));
    r.device_memory = static_cast<uint64_t>(plan.device.device_bytes);
    r.device_bytes_copied = static_cast<uint64_t>(stats.device_bytes_copied);
    r.device_copy_seconds = stats.device_copy_seconds;
  }
  return r;
}

// The stream methods commit every sweep's step: a snapshot reads the grid at its step.
Result<RunReport> run_stream(Grid& grid, const RunOptions& opt, const RunPlan& plan,
                             const ResolvedProbes* probes) {
  return run_in_parts(
      opt, grid.manifest().step,
      [&](const RunOptions& part, int64_t) { return run_stream_part(grid, part, plan, probes); },
      [&](int64_t step, RunReport* report) {
        return take_snapshot(grid.manifest(), opt.snapshots, io::planes_of(grid), step, report);
      });
}

// The tiled method writes blocks (parts of planes): afterwards every plane is read back and
// its checksum recorded.
Status record_checksums_from_disk(Grid& grid) {
  return io::read_plane_range(
      grid, 0, grid.shape().nz,
      [&](int64_t z, const void* values) {
        grid.record_plane(z, values);
        return Status::Ok();
      },
      io::kPlanesInFlight, /*verify=*/false);
}

Result<RunReport> run_tiled(Grid& grid, const RunOptions& opt, const RunPlan& plan) {
  DG_ASSIGN_OR_RETURN(TiledStats stats, advance_tiled(grid, opt.scheme.stencil(), opt.boundary,
                                                      opt.steps, plan.tiled, opt.progress));
  DG_RETURN_IF_ERROR(record_checksums_from_disk(grid));
  RunReport r;
  r.method = std::string(method_name(plan.method));
  r.threads = plan.tiled.threads;
  r.bt = plan.tiled.bt;
  r.tile = std::to_string(grid.shape().nx) + "x" + std::to_string(plan.tiled.block_y) + "x" +
           std::to_string(plan.tiled.block_z);
  r.steps = stats.steps;
  r.compute_seconds = stats.compute_seconds;
  r.io_wait_seconds = stats.io_seconds;
  r.bytes_read = stats.bytes_read;
  r.bytes_written = stats.bytes_written;
  r.engine_memory = plan.memory_bytes;
  return r;
}

// The plans that hold the grid (ResidentGrid) and write it back into replacement files: the
// in-core, mmap and device methods, but a three-tier device run, which sweeps the grid in place
// as the stream method does.
bool writes_replacement(const RunPlan& plan) {
  switch (plan.method) {
    case Method::kInCore:
    case Method::kMmap:
      return true;
    case Method::kDevice:
      return plan.device.placement != DevicePlacement::kThreeTiers;
    default:
      return false;
  }
}

// What the plan writes beside the grid (mmap: scratch files in the grid directory; tiled: a
// second copy beside each data file; in-core: the replacement data files) must fit before
// anything is touched.
Status check_scratch_space(const Grid& grid, const RunPlan& plan) {
  std::vector<internal::SpaceNeed> needs;
  if (plan.method == Method::kMmap) needs.push_back({grid.dir(), plan.disk_bytes});
  if (writes_replacement(plan) || (plan.method == Method::kTiled && plan.tiled.passes > 0)) {
    for (size_t f = 0; f < grid.manifest().layout.files.size(); ++f) {
      const std::string path = grid.file_path(static_cast<int>(f));
      const auto bytes = static_cast<uint64_t>(grid.manifest().layout.files[f].bytes);
      needs.push_back({internal::parent_path(path),
                       bytes - std::min(bytes, internal::replacement_bytes(path))});
    }
  }
  return internal::check_free_space(
      needs, "the " + std::string(method_name(plan.method)) + " method's scratch copy");
}

Result<RunReport> run_method(Grid& grid, const RunOptions& opt, const RunPlan& plan,
                             const ResolvedProbes* probes) {
  switch (plan.method) {
    case Method::kInCore:
    case Method::kMmap:
      return run_incore(grid, opt, plan, probes);
    case Method::kDevice:
      return writes_replacement(plan) ? run_incore(grid, opt, plan, probes)
                                      : run_stream(grid, opt, plan, probes);
    case Method::kTiled:
      return run_tiled(grid, opt, plan);
    default:
      return run_stream(grid, opt, plan, probes);
  }
}

}  // namespace

std::optional<RunRecord> current_run(const Grid& grid) {
  return read_run_record(grid.dir(), grid.manifest().step);
}

std::optional<RunRecord> unfinished_run(const Grid& grid) {
  std::optional<RunRecord> r = current_run(grid);
  if (r && grid.manifest().step == r->step_to) return std::nullopt;
  return r;
}

namespace {

// A sweep interrupted without a run record (a library caller's): finishing it is the run.
RunRecord run_of_sweep(const SweepRecord& sweep) {
  RunRecord r;
  r.step_from = sweep.step_from;
  r.step_to = sweep.step_from + sweep.levels;
  r.stencil = sweep.stencil;
  r.boundary = sweep.boundary;
  r.method = std::string(method_name(Method::kStream));
  r.started = sweep.started;
  return r;
}

// Where the grid stands for decide_run. A run killed after its last commit left its record: the
// same command again notices that it is done (0 steps) rather than starting over. A sweep
// interrupted in its middle is the run to finish, and nothing else may run before it.
Result<RunStart> where_it_stands(const Grid& grid) {
  const auto& sweep = grid.sweep_record();
  if (!grid.interrupted_sweep().empty() && !sweep) {
    return corrupt("grid " + grid.dir() + " was interrupted in an in-place " +
                   grid.interrupted_sweep() +
                   " and cannot be resumed; restore the grid from a backup");
  }
  RunStart at;
  at.dir = grid.dir();
  at.step = grid.manifest().step;
  at.recorded = current_run(grid);
  if (!at.recorded && sweep) at.recorded = run_of_sweep(*sweep);
  at.stopped_part_way = sweep.has_value();
  at.stopped_how = "interrupted in the middle of a sweep";
  at.resume_command = "deepgrid run " + grid.dir() + " --resume";
  return at;
}

// A sweep interrupted in its middle is finished first by the stream engine with its own
// depth (its stencil and boundary are the run's: advance_stream checks them again); a run left
// to choose without a budget (the stream it chose: plan_run) within auto_stream_budget().
void finish_the_sweep_first(const Grid& grid, RunOptions* opt) {
  if (const auto& sweep = grid.sweep_record()) {
    if (opt->method == Method::kAuto && opt->mem_budget == 0) {
      opt->mem_budget = auto_stream_budget(grid.manifest(), *opt);
    }
    opt->method = opt->method == Method::kNaive ? Method::kNaive : Method::kStream;
    opt->bt = sweep->levels;
    opt->band_rows = 0;  // (an in-place sweep: whole planes)
  }
}

}  // namespace

Result<RunPlan> prepare_run(Grid& grid, const RunOptions& opt) {
  DG_RETURN_IF_ERROR(check_run(grid.manifest(), opt));
  DG_ASSIGN_OR_RETURN(RunPlan plan, plan_run(grid, opt, opt.machine));
  DG_RETURN_IF_ERROR(check_scratch_space(grid, plan));
  DG_ASSIGN_OR_RETURN(const PreflightFacts facts, measure_preflight(grid));
  DG_RETURN_IF_ERROR(check_preflight(grid.manifest(), plan, facts));
  if (opt.verify) {
    DG_RETURN_IF_ERROR(grid.enable_verification());
    // In place, a sweep overwrites planes before it reads the last ones: find damage first.
    // (The in-core engines verify as they load; sweeps in bands before they commit.)
    if (!writes_replacement(plan) && plan.stream.bands == 0) {
      DG_RETURN_IF_ERROR(read_every_plane(grid));
    }
  }
  return plan;
}

namespace {

// The prepared plan run; the report counts from the manifest's step before it (the stream
// methods commit the step as they go).
Result<RunReport> run_prepared(Grid& grid, const RunOptions& opt, const RunPlan& plan,
                               const ResolvedProbes* probes = nullptr) {
  const int64_t step0 = grid.manifest().step;
  DG_ASSIGN_OR_RETURN(RunReport r, run_method(grid, opt, plan, probes));
  r.direct_io = grid.direct_io();
  describe_problem(&r, grid.shape(), grid.dtype(), opt);
  r.step_from = step0;
  r.step_to = step0 + r.steps;
  r.step_target = step0 + opt.steps;
  return r;
}

// A run's probes resolved against the grid, and the traces its receivers fill (traces_of_run),
// one pass's rows at a time from the manifest's step on.
struct ProbesOfRun {
  Traces traces;
  ResolvedProbes resolved;
};

// The rows a run holds: one pass's levels, at most --bt (automatic: at most kMaxAutoBt).
int64_t pass_window(const RunOptions& opt) { return opt.bt > 0 ? opt.bt : kMaxAutoBt; }

Result<ProbesOfRun> prepare_probes(const Grid& grid, const RunToDo& todo) {
  ProbesOfRun out;
  const RunOptions& opt = todo.options;
  if (opt.probes.empty()) return out;
  const Manifest& m = grid.manifest();
  DG_ASSIGN_OR_RETURN(out.resolved, resolve_probes(opt.probes, m.shape, m.field_names(),
                                                   opt.scheme.coefficients()));
  DG_RETURN_IF_ERROR(check_traces_destination(out.resolved, opt.traces_path));
  if (out.resolved.receivers.empty()) return out;
  out.traces = traces_of_run(todo.record, static_cast<int64_t>(out.resolved.receivers.size()),
                             pass_window(opt), m.step, todo.resumed, opt.traces_path);
  return out;  // the caller points resolved.traces at its traces (they move with it)
}

// The receivers' values held in memory, one pass's, count against --mem: the engine plans
// with what they leave of the budget; a budget they fill is refused.
Result<RunOptions> leave_room_for_traces(RunOptions opt, const Traces& t) {
  DG_ASSIGN_OR_RETURN(opt.mem_budget,
                      budget_beside_traces(opt.mem_budget, t.capacity(), t.receivers));
  return opt;
}

// What the planner plans for: a run that takes snapshots runs in parts of at most `every`
// steps, so that passes (bt) fit between them.
RunOptions planned_part(RunOptions opt) {
  if (opt.snapshots.wanted()) opt.steps = std::min(opt.steps, opt.snapshots.every);
  return opt;
}

// Commits `after` as the plan's method wrote: its replacement files, or the files in place.
Status commit_run(Grid& grid, const RunPlan& plan, const Manifest& after) {
  return writes_replacement(plan) ? grid.commit_replacement(after) : grid.commit(after);
}

}  // namespace

Result<RunOptions> options_to_finish(const Grid& grid, RunOptions base) {
  base.resume = true;
  DG_ASSIGN_OR_RETURN(const RunStart at, where_it_stands(grid));
  DG_ASSIGN_OR_RETURN(RunToDo todo, decide_run(grid.manifest(), at, std::move(base)));
  finish_the_sweep_first(grid, &todo.options);
  return std::move(todo.options);
}

Status record_run(const Grid& grid, const RunOptions& options) {
  return save_run_record(grid.dir(), record_of(options, grid.manifest().step, options.method));
}

Result<RunReport> advance_grid(Grid& grid, const RunOptions& opt, const ResolvedProbes* probes) {
  DG_ASSIGN_OR_RETURN(const RunPlan plan, prepare_run(grid, opt));
  DG_ASSIGN_OR_RETURN(RunReport r, run_prepared(grid, opt, plan, probes));
  Manifest after = grid.manifest();
  after.step = r.step_to;
  DG_RETURN_IF_ERROR(commit_run(grid, plan, after));
  return r;
}

namespace {

// The serial driver of the run lifecycle (lifecycle.h): one grid, open read-write for the run.
class GridRun final : public RunDriver {
 public:
  explicit GridRun(std::string dir) : dir_(std::move(dir)) {}

  Result<RunStart> open(RunOptions&) override {
    DG_ASSIGN_OR_RETURN(grid_, Grid::open(dir_, Grid::Mode::kReadWrite));
    step0_ = grid_->manifest().step;
    return where_it_stands(*grid_);
  }
  const Manifest& whole() const override { return grid_->manifest(); }
  Status check(RunToDo& todo) override {
    finish_the_sweep_first(*grid_, &todo.options);
    return Status::Ok();
  }
  Status prepare(RunToDo& todo) override {
    DG_ASSIGN_OR_RETURN(probes_, prepare_probes(*grid_, todo));
    if (probes_.traces.receivers > 0) probes_.resolved.traces = &probes_.traces;
    DG_ASSIGN_OR_RETURN(engine_options_, leave_room_for_traces(todo.options, probes_.traces));
    DG_ASSIGN_OR_RETURN(engine_options_, leave_room_for_snapshots(engine_options_, whole()));
    DG_ASSIGN_OR_RETURN(plan_, prepare_run(*grid_, planned_part(engine_options_)));
    return check_snapshots(whole(), todo.options.snapshots, plan_.method, whole().step,
                           todo.record.step_to);
  }
  // An interrupted sweep is finished by the stream engine, as the first of the run's.
  Result<bool> resume(const RunToDo&) override { return true; }
  // (The stream a run left to choose took over the in-core method is recorded as auto: resumed,
  // it chooses again, and finishes an interrupted sweep within auto_stream_budget().)
  Status record(RunToDo& todo) override {
    const bool chose = plan_.incore_predicted_seconds > 0;
    todo.record.method = std::string(method_name(chose ? Method::kAuto : plan_.method));
    return save_run_record(dir_, todo.record);
  }
  Result<Advanced> advance(const RunToDo& todo) override;
  Status commit(int64_t step, const std::string& scheme, HistoryEntry entry) override {
    Manifest after = grid_->manifest();
    after.step = step;
    after.scheme = scheme;
    after.history.push_back(std::move(entry));
    return commit_run(*grid_, plan_, after);
  }
  nlohmann::json history_details() const override { return {{"method", report_.method}}; }
  void drop_record() override { drop_run_record(dir_); }

  const RunReport& report() const { return report_; }

 private:
  const std::string dir_;
  std::optional<Grid> grid_;
  int64_t step0_ = 0;
  ProbesOfRun probes_;
  RunOptions engine_options_;  // the run's, with what the receivers' values leave of --mem
  RunPlan plan_;
  RunReport report_;
};

// The planned engine's advance; the steps it did are committed, a stopped run's too (its
// record stays, and the same command finishes it).
Result<Advanced> GridRun::advance(const RunToDo& todo) {
  const RunOptions& opt = todo.options;
  const bool keeps_traces = probes_.resolved.traces != nullptr && !opt.traces_path.empty();
  // Every pass ends by saving what the receivers recorded, and the next pass's are held. The
  // rows are synced before the grid commits the steps: after every sweep of the methods that
  // commit each one, else at the end or a stop (a sync per pass made a 4000-step in-core run
  // with 2048 receivers take 1.2 s instead of 0.9 s, and 0.56 s without receivers).
  if (keeps_traces) {
    engine_options_.progress = [&](int64_t done, int64_t total) {
      const bool go_on = !opt.progress || opt.progress(done, total);
      const bool commits = !writes_replacement(plan_) || !go_on || done == total;
      const Status saved = write_traces_npy(probes_.traces, opt.traces_path, commits);
      if (saved.ok()) hold_from(&probes_.traces, step0_ + done + 1);  // (else: saved at the end)
      return saved.ok() && go_on;
    };
  }
  RunReport start;  // a resumed run's first snapshot, when its step's file is missing
  if (const Status st = take_missing_snapshot(*grid_, opt.snapshots, &start); !st.ok()) {
    return st;
  }
  auto result = run_prepared(*grid_, engine_options_, plan_,
                             probes_.resolved.empty() ? nullptr : &probes_.resolved);
  if (result.ok()) {
    result->snapshots += start.snapshots;
    result->snapshot_seconds += start.snapshot_seconds;
  }
  if (keeps_traces) DG_RETURN_IF_ERROR(write_traces_npy(probes_.traces, opt.traces_path));
  if (!result.ok()) {
    // A run that failed before changing anything leaves nothing behind either.
    const bool changed = grid_->manifest().step != step0_ ||
                         ::access(internal::join_path(dir_, kSweepRecordName).c_str(), F_OK) == 0;
    if (!changed && !todo.resumed) drop_run_record(dir_);
    return result.status();
  }
  report_ = std::move(result).value();
  report_.resumed = todo.resumed;
  return Advanced{true, report_.step_from, report_.step_to};
}

}  // namespace

Result<RunReport> run_grid(const std::string& dir, const RunOptions& given) {
  const auto t0 = std::chrono::steady_clock::now();
  const double stolen0 = stolen_cpu_seconds();
  GridRun run(dir);
  DG_RETURN_IF_ERROR(run_lifecycle(run, given).status());
  RunReport r = run.report();
  r.seconds = seconds_since(t0);
  r.peak_memory = peak_resident_bytes();
  r.record_steal_since(stolen0);
  return r;
}

}  // namespace deepgrid
