// The distributed run: every k steps the ranks exchange their parts' halos and advance their
// parts k steps with the ordinary engines, the parts held in memory for the whole run when
// they all fit (committed at checkpoints and at the end), else going through their files every
// round. run_distributed reads as the run's lifecycle; each of its steps is collective, and
// every rank takes them in the same order.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/process_stats.h"
#include "core/stopwatch.h"
#include "deepgrid/traces_file.h"
#include "device/device.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/halo_exchange.h"
#include "mpi/parts.h"
#include "run/lifecycle.h"
#include "run/resident_grid.h"
#include "run/snapshots.h"

namespace deepgrid::mpi {

using nlohmann::json;
using namespace detail;

RunOptions detail::engine_options(const RunOptions& opt, const PartInfo& info,
                                  const DistributedManifest& m) {
  RunOptions part_opt = opt;
  part_opt.bt = 0;  // --bt is the exchange depth; the part's engine plans its own
  part_opt.progress = {};
  GridPlacement& at = part_opt.placement;
  at = {info.origin(kAxisX), info.origin(kAxisY), info.origin(kAxisZ), m.shape};
  // The block, bounded where halos lie: only it must be exact at the end of a round.
  const Block block = info.to_local(info.block);
  for (int a = 0; a < 3; ++a) {
    const size_t i = static_cast<size_t>(a);
    if (info.halo.below[i] > 0) at.needed_lo[i] = block[a].lo;
    if (info.halo.above[i] > 0) at.needed_hi[i] = block[a].hi;
  }
  return part_opt;
}

namespace {

using internal::seconds_since;

// Commits the state of every part held in memory at `step` at once (settle_prepared): each
// writes and prepares its new state, and once all have, commits it. (Rank 0 saved the
// receivers' values of every round before.) Collective.
Status commit_held(Grid& part, const ResidentGrid& held, int64_t step, RankFigures* figures) {
  const auto t0 = std::chrono::steady_clock::now();
  Manifest after = part.manifest();
  after.step = step;
  Status st = held.write_replacement(part);
  if (st.ok()) st = part.prepare_replacement(after);
  figures->bytes_written += static_cast<uint64_t>(part.manifest().grid_write_bytes());
  figures->io_wait_seconds += seconds_since(t0);
  if (const Status all = agree(st); !all.ok()) {
    if (part.prepared()) (void)part.discard_prepared();
    return all;
  }
  const auto t1 = std::chrono::steady_clock::now();
  st = part.commit_prepared();
  figures->io_wait_seconds += seconds_since(t1);
  return agree(st);
}

// Whether a run whose parts stay in memory commits them now (RunOptions::checkpoint_seconds),
// `since` seconds after the last commit, which took `last` seconds (at first, the load). The
// automatic rule waits at least a minute: the load only reads, while a commit writes and
// syncs every part (about 5 times the load on the development VM), so that the first
// checkpoint of a short run would otherwise cost more than the tenth it aims at.
bool checkpoint_due(double every, double since, double last) {
  constexpr double kWorkPerCheckpoint = 10, kLeastSeconds = 60;
  return since >= (every >= 0 ? every : std::max(kLeastSeconds, kWorkPerCheckpoint * last));
}

// The part of this rank held for the rounds of `run` from `step`, each round taking at most
// opt.steps steps, when every rank's part is held between rounds; else none, and every round
// goes through the parts' files. Collective. The load counts in `figures` as disk traffic and
// time.
Result<std::optional<ResidentGrid>> hold_in_memory(Grid& part, const RunOptions& opt,
                                                   const RunRecord& run, int64_t step,
                                                   RankFigures* figures) {
  if (step >= run.step_to) return std::optional<ResidentGrid>();
  auto plan = plan_run(part, opt, opt.machine);
  DG_RETURN_IF_ERROR(agree(plan.status()));
  if (any_rank(!held_between_rounds(*plan))) return std::optional<ResidentGrid>();
  auto checked = prepare_run(part, opt);
  DG_RETURN_IF_ERROR(agree(checked.status()));
  const auto t0 = std::chrono::steady_clock::now();
  auto held = ResidentGrid::load(part, opt, std::move(checked).value());
  figures->io_wait_seconds += seconds_since(t0);
  DG_RETURN_IF_ERROR(agree(held.status()));
  figures->bytes_read += static_cast<uint64_t>(part.manifest().grid_read_bytes());
  return std::optional<ResidentGrid>(std::move(held).value());
}

// Whether this rank's part, as the run lays it out (split as `next`, with the halos of its
// exchange depth), leaves its engine enough of --mem for a round of the `steps` left: checked
// before anything is laid out again, so that a budget too small changes nothing (the engine
// checks again on the part as laid out). Collective.
Status check_part_budget(const DistributedManifest& next, const RunOptions& opt, int64_t steps) {
  if (steps <= 0) return Status::Ok();
  const int k = exchange_depth(next, opt);
  return agree(plan_part(next, opt, k, std::min<int64_t>(k, steps), nullptr).status());
}

// A pass of a part's engine in a round that began at step *round_from: saves its receivers'
// values, and asks the caller's callback whether to go on (with the steps of the run done).
ProgressFn after_each_pass(const Grid& part, PartProbes& probes, const RunOptions& opt,
                           const RunRecord& run, const int64_t* round_from) {
  return [&part, &probes, &opt, &run, round_from](int64_t done, int64_t) {
    const bool saved = probes.traces.receivers == 0 ||
                       write_traces_npy(probes.traces, part_traces_path(part)).ok();
    return saved && (!opt.progress ||
                     opt.progress(*round_from + done - run.step_from, run.step_to - run.step_from));
  };
}

// Resuming a stopped run: when a round was cut short first takes every part to its end, each
// finishing its own recorded round (the parts already there do nothing); then gathers what
// the receivers recorded in the parts since `from` (the last round's start) into `whole`,
// which holds those steps. Returns whether every part got there (false: the progress callback
// stopped one). Collective.
Result<bool> finish_round(const DistributedManifest& m, const GridProgress& progress, int64_t from,
                          const RunOptions& opt, const ResolvedProbes& all_probes,
                          const RunRecord& run, Traces* whole, RankFigures* figures) {
  auto opened = open_part_as_is(m, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(opened.status()));
  Grid part = std::move(opened).value();
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  PartProbes probes = part_share(all_probes, info, m, opt, run, from, whole->capacity(), &part);
  probes.resolved.traces = probes.traces.receivers > 0 ? &probes.traces : nullptr;
  Status st;
  bool stopped = false;
  if (progress.mid_round && (unfinished_run(part) || !part.interrupted_sweep().empty())) {
    RunOptions base = engine_options(opt, info, m);
    const int64_t round_from = part.manifest().step;
    base.progress = after_each_pass(part, probes, opt, run, &round_from);
    auto finishing = options_to_finish(part, base);
    st = finishing.status();
    if (st.ok()) {
      const int64_t to = part.manifest().step + finishing->steps;
      auto advanced =
          advance_grid(part, *finishing, probes.resolved.empty() ? nullptr : &probes.resolved);
      st = advanced.status();
      if (st.ok()) add_advance(figures, *advanced);
      stopped = st.ok() && part.manifest().step != to;
    }
  }
  DG_RETURN_IF_ERROR(agree(st));
  stopped = any_rank(stopped);
  if (!all_probes.receivers.empty()) {
    DG_RETURN_IF_ERROR(write_traces_on_root(&probes, whole, opt.traces_path, from, progress.at));
  }
  return !stopped;
}

// One rank's driver of the run lifecycle (run/lifecycle.h): the grid split into parts over the
// ranks, every step collective. Not to be moved: the part's engine options hold pointers into
// it (after_each_pass).
class DistributedRun final : public RunDriver {
 public:
  DistributedRun(const std::string& dir, const std::optional<ProcessGrid>& procs)
      : dir_(dir),
        procs_(procs),
        t0_(std::chrono::steady_clock::now()),
        wait0_(agree_wait_seconds()),
        stolen0_(stolen_cpu_seconds()) {
    mine_.rank = rank();
  }
  DistributedRun(const DistributedRun&) = delete;
  DistributedRun& operator=(const DistributedRun&) = delete;

  Result<RunStart> open(RunOptions& options) override;
  const Manifest& whole() const override { return whole_; }
  Status agree(Status status) override { return mpi::agree(std::move(status)); }
  Status check(RunToDo& todo) override;
  Status prepare(RunToDo&) override { return leave_room(); }
  Result<bool> resume(const RunToDo&) override { return finish_stopped_round(); }
  Status record(RunToDo&) override;
  Result<Advanced> advance(const RunToDo& todo) override;
  Status commit(int64_t step, const std::string& scheme, HistoryEntry entry) override;
  nlohmann::json history_details() const override {
    return {{"ranks", size()}, {"process_grid", m_.procs.to_string()}, {"exchange_bt", k_}};
  }
  void drop_record() override;
  bool writes_traces() const override { return rank() == 0; }

  // The report of the run that ended as `end` says.
  DistributedRunReport report(const RunEnd& end);

 private:
  const PartInfo& info() const { return m_.parts[static_cast<size_t>(rank())]; }
  Status leave_room();
  Result<bool> finish_stopped_round();
  Status lay_out();
  Result<bool> rounds_in_memory();
  Result<bool> rounds_through_files();
  Result<bool> round_in_memory(HaloExchange& exchange);
  int64_t round_steps() const;
  Status take_snapshot_of_parts(int64_t step);
  DistributedRunReport report_so_far();
  DistributedRunReport report(int k, int64_t to, bool direct_io);

  const std::string dir_;
  const std::optional<ProcessGrid> procs_;
  const std::chrono::steady_clock::time_point t0_;
  const double wait0_;
  const double stolen0_;
  DistributedManifest m_;
  Manifest whole_;  // m_ as one grid
  // Rank 0 holds DIR's lock for the run: a second run of the grid is refused before it lays
  // out or redistributes anything.
  std::optional<internal::GridLock> lock_;
  RunOptions opt_;  // with the grid's own scheme when none is given (each rank loads a user's
                    // kernel library itself)
  GridProgress progress_;
  RunStart start_;
  bool resumed_ = false;
  RunRecord run_;
  ResolvedProbes all_probes_;
  ProcessGrid grid_;
  int64_t held_from_ = 0;  // the first step, less one, of the receivers' values held
  int64_t held_steps_ = 1;
  Traces traces_;  // the run's, on rank 0
  RankFigures mine_;
  int k_ = 0;  // steps between halo exchanges, once laid out
  std::optional<Grid> part_;
  std::vector<BoxTransfer> transfers_;
  PartProbes probes_;
  RunOptions part_opt_;
  int64_t step_ = 0;  // the first of the round under way
  uint64_t exchange_buffers_ = 0;
  std::optional<ResidentGrid> held_;
  RunReport snapshots_;  // the snapshots this run took and their time (rank 0 writes them)
};

// The grid, loaded and locked, with its parts settled: where every part stands. The scheme is
// checked before anything is settled (decide_run then keeps it; resuming, the stopped run's
// replaces it).
Result<RunStart> DistributedRun::open(RunOptions& options) {
  DG_ASSIGN_OR_RETURN(m_, load_distributed(dir_));
  DG_ASSIGN_OR_RETURN(lock_, lock_on_root(dir_));
  share_machine(&options);
  whole_ = m_.as_grid();
  auto scheme =
      options.resume ? Result<Scheme>(options.scheme) : scheme_for(whole_, options.scheme);
  DG_RETURN_IF_ERROR(agree(scheme.status()));
  options.scheme = std::move(scheme).value();
  DG_RETURN_IF_ERROR(settle_prepared(m_));
  DG_ASSIGN_OR_RETURN(progress_, grid_progress(m_));
  start_ = run_start(m_, progress_, recorded_run(m_));
  return start_;
}

// What decide_run chose, checked against the parts, the grid and the probes.
Status DistributedRun::check(RunToDo& todo) {
  DG_RETURN_IF_ERROR(agree(check_parts_stand(m_, progress_, start_, todo)));
  opt_ = todo.options;
  run_ = todo.record;
  resumed_ = todo.resumed;
  DG_RETURN_IF_ERROR(check_run(whole_, opt_));
  // (rank 0 alone writes the snapshots, as it writes the traces)
  DG_RETURN_IF_ERROR(agree(
      rank() == 0 ? check_snapshots(whole_, opt_.snapshots, opt_.method, progress_.at, run_.step_to)
                  : Status::Ok()));
  DG_ASSIGN_OR_RETURN(all_probes_, resolve_probes(opt_.probes, m_.shape, whole_.field_names(),
                                                  opt_.scheme.coefficients()));
  // (rank 0 alone writes the traces file: its directory need not exist on other machines)
  DG_RETURN_IF_ERROR(
      agree(rank() == 0 ? check_traces_destination(all_probes_, opt_.traces_path) : Status::Ok()));
  DG_ASSIGN_OR_RETURN(grid_, run_process_grid(m_, procs_));
  return Status::Ok();
}

// The receivers' values of a round and each part's engine within --mem, checked before
// anything is laid out again; the run's traces made.
Status DistributedRun::leave_room() {
  DG_ASSIGN_OR_RETURN(opt_, leave_room_for_snapshots(std::move(opt_), whole_));
  // The receivers' values are held one round at a time: resuming, first the steps since the
  // last round's start, which may be in the streamed parts' files only.
  held_from_ = std::max(run_.step_from, progress_.round_from);
  {
    const DistributedManifest laid_out = split_as(m_, grid_);  // as the run will split it
    held_steps_ = std::max<int64_t>(exchange_depth(laid_out, opt_), progress_.at - held_from_);
    DG_RETURN_IF_ERROR(
        leave_room_for_traces(m_, laid_out, all_probes_, held_steps_, resumed_, &opt_));
    DG_RETURN_IF_ERROR(check_part_budget(laid_out, opt_, run_.step_to - progress_.at));
  }
  // The run's traces, on rank 0 (resumed: with what the stopped run saved).
  traces_ =
      traces_of_run(run_, rank() == 0 ? static_cast<int64_t>(all_probes_.receivers.size()) : 0,
                    held_steps_, held_from_, resumed_, opt_.traces_path);
  return Status::Ok();
}

// Resuming a run stopped in the middle of a round, on the parts it stopped on: that round
// finished first (finish_round). False when the progress callback stopped it again.
Result<bool> DistributedRun::finish_stopped_round() {
  if (!resumed_ || size() != m_.ranks()) return true;
  return finish_round(m_, progress_, held_from_, opt_, all_probes_, run_, &traces_, &mine_);
}

// A new run's range recorded before its first round, the grid's step first moved to where
// every part stands (the record's range must hold it).
Status DistributedRun::record(RunToDo&) {
  const int64_t recorded_step = m_.step;
  m_.step = progress_.at;
  if (m_.step != recorded_step) DG_RETURN_IF_ERROR(write_on_root(dir_, m_));
  return agree(rank() == 0 ? save_run_record(dir_, run_) : Status::Ok());
}

// The grid split over the run's process grid and its parts given the halos of the exchange
// depth; this rank's part opened, with its probes and its engine's options.
Status DistributedRun::lay_out() {
  DG_RETURN_IF_ERROR(redistribute(dir_, &m_, grid_, opt_.verify));
  const bool periodic = opt_.boundary.kind == Boundary::Kind::kPeriodic;
  k_ = exchange_depth(m_, opt_);
  const std::array<int64_t, 3> halo = halo_of_depth(opt_.scheme, k_);
  DG_RETURN_IF_ERROR(fit_halos(dir_, &m_, halo, periodic, opt_.verify));
  auto opened = open_part(m_, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(opened.status()));
  part_.emplace(std::move(opened).value());
  transfers_ = halo_transfers(m_.parts, m_.shape, periodic);
  if (!resumed_) ::unlink(part_traces_path(*part_).c_str());  // a stopped run's, if any

  probes_ = part_share(all_probes_, info(), m_, opt_, run_, m_.step, held_steps_, nullptr);
  probes_.resolved.traces = probes_.traces.receivers > 0 ? &probes_.traces : nullptr;
  part_opt_ = engine_options(opt_, info(), m_);
  part_opt_.snapshots = {};  // (the run takes them of the whole grid, between rounds)
  step_ = m_.step;
  part_opt_.progress = after_each_pass(*part_, probes_, opt_, run_, &step_);
  mine_.part_planes = info().shape().nz;
  exchange_buffers_ = opt_.mem_budget > 0 ? opt_.mem_budget : uint64_t{256} << 20;
  return Status::Ok();
}

// When every part fits its budget in memory: the rounds with the parts held there, committed
// at checkpoints and at the end. False when the progress callback stopped them (after the
// commit); true with nothing done when the parts do not fit.
Result<bool> DistributedRun::rounds_in_memory() {
  auto last_commit = std::chrono::steady_clock::now();
  RunOptions first_round = part_opt_;
  first_round.steps = round_steps();
  DG_ASSIGN_OR_RETURN(held_, hold_in_memory(*part_, first_round, run_, step_, &mine_));
  double commit_seconds = seconds_since(last_commit);  // until the first commit: the load's
  last_commit = std::chrono::steady_clock::now();
  if (!held_) return true;
  // The exchange's buffers within what the engine leaves of the budget.
  const uint64_t engine = held_->plan().memory_bytes;
  const uint64_t buffers = opt_.mem_budget == 0       ? exchange_buffers_
                           : opt_.mem_budget > engine ? opt_.mem_budget - engine
                                                      : 1;
  DG_ASSIGN_OR_RETURN(HaloExchange exchange,
                      HaloExchange::create(planes_of(*held_, *part_), transfers_, buffers));
  bool stop = false;
  while (step_ < run_.step_to && !stop) {
    DG_ASSIGN_OR_RETURN(stop, round_in_memory(exchange));
    if (!stop && snapshot_due(opt_.snapshots, step_)) {  // (read from the parts' files)
      DG_RETURN_IF_ERROR(commit_held(*part_, *held_, step_, &mine_));
      DG_RETURN_IF_ERROR(take_snapshot_of_parts(step_));
      last_commit = std::chrono::steady_clock::now();
      continue;
    }
    if (!stop && step_ < run_.step_to &&
        any_rank(
            checkpoint_due(opt_.checkpoint_seconds, seconds_since(last_commit), commit_seconds))) {
      const auto t = std::chrono::steady_clock::now();
      DG_RETURN_IF_ERROR(commit_held(*part_, *held_, step_, &mine_));
      commit_seconds = seconds_since(t);
      last_commit = std::chrono::steady_clock::now();
    }
  }
  DG_RETURN_IF_ERROR(commit_held(*part_, *held_, step_, &mine_));
  RunReport copies;  // (the part's engine's, from its load on: its commits' included)
  held_->describe(&copies);
  mine_.device_bytes_copied = copies.device_bytes_copied;
  mine_.device_copy_seconds = copies.device_copy_seconds;
  return !stop;
}

// One round of the parts in memory: the halos exchanged, the part advanced, the receivers'
// values saved. Whether the progress callback asked any rank to stop.
Result<bool> DistributedRun::round_in_memory(HaloExchange& exchange) {
  // A part with halos computes what needs none of them while they travel: the exchange's
  // second half runs inside the round's first pass.
  const bool has_halos = info().halo != HaloExtent{};
  Result<ExchangeStats> ex = ExchangeStats{};
  LateHalos late;
  if (has_halos) {
    exchange.begin();
    late = {info().halo.below, info().halo.above, [&] { ex = exchange.finish(); }};
  } else {
    ex = exchange.run();  // (nothing to receive, nor to wait for)
    DG_RETURN_IF_ERROR(ex.status());
  }
  RunOptions round = part_opt_;
  round.steps = round_steps();
  bool asked_to_stop = false;  // the parts stop together, at the end of a round
  round.progress = [&](int64_t done, int64_t) {
    asked_to_stop = asked_to_stop ||
                    (opt_.progress &&
                     !opt_.progress(step_ + done - run_.step_from, run_.step_to - run_.step_from));
    return true;  // (a round is short: the parts stop together at its end)
  };
  const Result<RunReport> advanced =
      held_->advance(round, step_, probes_.resolved.empty() ? nullptr : &probes_.resolved, late);
  DG_RETURN_IF_ERROR(ex.status());  // (agreed: every rank returns)
  DG_RETURN_IF_ERROR(agree(advanced.status()));
  add_advance(&mine_, *advanced);
  add_exchange(&mine_, *ex);
  step_ += round.steps;
  if (!all_probes_.receivers.empty()) {
    DG_RETURN_IF_ERROR(
        write_traces_on_root(&probes_, &traces_, opt_.traces_path, step_ - round.steps, step_));
  }
  return any_rank(asked_to_stop);
}

// The rounds through the parts' files (parts held in memory are at the end already): each
// exchanges the halos, records the round in every part, and advances it. False when the
// progress callback stopped a part: the round stays unfinished, and so do the records.
Result<bool> DistributedRun::rounds_through_files() {
  for (; step_ < run_.step_to; step_ += part_opt_.steps) {
    DG_ASSIGN_OR_RETURN(const ExchangeStats ex,
                        exchange_halos(planes_of(*part_), transfers_, exchange_buffers_));
    add_exchange(&mine_, ex);
    part_opt_.steps = round_steps();
    // The halos are in place on every rank: from here each part can finish the round alone.
    Status recorded = commit_with_history(*part_, step_, "", {});
    if (recorded.ok()) recorded = record_run(*part_, part_opt_);
    DG_RETURN_IF_ERROR(agree(recorded));
    // A stop asked at the round's last pass ends nothing early: noted, the parts stop after it.
    bool asked_to_stop = false;
    RunOptions round = part_opt_;
    round.advances_again = step_ + part_opt_.steps < run_.step_to;
    round.progress = [&](int64_t done, int64_t total) {
      const bool go_on = part_opt_.progress(done, total);
      asked_to_stop = asked_to_stop || !go_on;
      return go_on;
    };
    auto advanced =
        advance_grid(*part_, round, probes_.resolved.empty() ? nullptr : &probes_.resolved);
    Status st = advanced.status();
    bool cut_short = false;
    if (st.ok()) {
      add_advance(&mine_, *advanced);
      st = commit_with_history(*part_, advanced->step_to, "", {});
      cut_short = advanced->step_to != step_ + part_opt_.steps;
    }
    DG_RETURN_IF_ERROR(agree(st));
    cut_short = any_rank(cut_short);
    if (!all_probes_.receivers.empty()) {
      DG_RETURN_IF_ERROR(write_traces_on_root(&probes_, &traces_, opt_.traces_path, step_,
                                              step_ + part_opt_.steps));
    }
    if (cut_short) return false;
    if (snapshot_due(opt_.snapshots, step_ + part_opt_.steps)) {
      DG_RETURN_IF_ERROR(take_snapshot_of_parts(step_ + part_opt_.steps));
    }
    if (any_rank(asked_to_stop) && step_ + part_opt_.steps < run_.step_to) {
      step_ += part_opt_.steps;  // (every part is there)
      return false;
    }
  }
  return true;
}

// Rounds end on the steps of the run's snapshots (none crosses one).
int64_t DistributedRun::round_steps() const {
  return steps_to_next_snapshot(opt_.snapshots, step_, std::min<int64_t>(k_, run_.step_to - step_));
}

// The snapshot of `step`, which every part's files hold: gathered on rank 0, which writes it.
Status DistributedRun::take_snapshot_of_parts(int64_t step) {
  const io::PlaneSource gathered = [&](const io::PlaneConsumer& consume) {
    return gather_planes(m_, /*verify=*/false, consume, &*part_);
  };
  return on_root_with_planes(gathered, [&](const io::PlaneSource& planes) {
    return take_snapshot(whole_, opt_.snapshots, planes, step, &snapshots_);
  });
}

// The laid-out parts through their rounds: the steps of the whole run, or nothing to commit
// when the progress callback stopped them (the records stay).
Result<Advanced> DistributedRun::advance(const RunToDo&) {
  m_.step = progress_.at;
  DG_RETURN_IF_ERROR(lay_out());
  // A run starting on a snapshot step whose file is missing (a crash after a round's commit)
  // takes it first.
  if (snapshot_due(opt_.snapshots, step_) &&
      any_rank(rank() == 0 && !has_snapshot(opt_.snapshots, step_))) {
    DG_RETURN_IF_ERROR(take_snapshot_of_parts(step_));
  }
  DG_ASSIGN_OR_RETURN(bool going_on, rounds_in_memory());
  if (going_on) {
    DG_ASSIGN_OR_RETURN(going_on, rounds_through_files());
  }
  if (!going_on) return Advanced{false};
  return Advanced{true, run_.step_from, run_.step_to};
}

// The finished run's step and history in the top-level manifest (the parts' round records are
// finished ones already).
Status DistributedRun::commit(int64_t step, const std::string& scheme, HistoryEntry entry) {
  m_.step = step;
  m_.scheme = scheme;
  m_.history.push_back(std::move(entry));
  return write_on_root(dir_, m_);
}

// Done: the records go (a stop before here leaves them; the same command again then finds the
// run done).
void DistributedRun::drop_record() {
  if (rank() == 0) drop_run_record(dir_);
  ::unlink(part_traces_path(*part_).c_str());
}

DistributedRunReport DistributedRun::report(const RunEnd& end) {
  if (!end.committed) return report_so_far();
  return report(k_, run_.step_to, part_->direct_io());
}

// The report of a run the progress callback stopped, up to the step every part reached: before
// this run's first round (stopped finishing a round cut short), where the least advanced part
// stood.
DistributedRunReport DistributedRun::report_so_far() {
  if (!part_) return report(0, progress_.from, true);
  return report(k_, step_, part_->direct_io());
}

DistributedRunReport DistributedRun::report(int k, int64_t to, bool direct_io) {
  mine_.seconds = seconds_since(t0_);
  mine_.wait_seconds = agree_wait_seconds() - wait0_;
  record_steal(stolen0_, &mine_);
  DistributedRunReport r = gather_report(mine_, m_, opt_, k, progress_.from, to, run_, direct_io);
  r.total.resumed = resumed_;
  r.total.seconds = seconds_since(t0_);
  r.total.snapshots = snapshots_.snapshots;  // (rank 0's: it writes them)
  r.total.snapshot_seconds = snapshots_.snapshot_seconds;
  return r;
}

}  // namespace

void share_machine(RunOptions* opt) {
  if (opt->threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr) opt->threads = cpu_share();
  opt->record_disk_rate = opt->record_disk_rate && ranks_on_this_machine() == 1;
  // (Every rank runs the same method, so every rank asks rank_on_this_machine or none does.)
  if (opt->method == Method::kDevice && opt->device.empty()) {
    const int place = rank_on_this_machine();
    const auto devices = device::list_devices();
    if (devices.ok() && !devices->empty()) {
      opt->device = std::to_string(place % static_cast<int>(devices->size()));
    }
  }
}

Result<DistributedRunReport> run_distributed(const std::string& dir, const RunOptions& given,
                                             const std::optional<ProcessGrid>& procs) {
  DistributedRun run(dir, procs);
  DG_ASSIGN_OR_RETURN(const RunEnd end, run_lifecycle(run, given));
  return run.report(end);
}

}  // namespace deepgrid::mpi
