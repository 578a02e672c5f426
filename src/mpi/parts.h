// internal: what the files of the distributed grid's commands (distributed_grid.h) share: the
// parts as the commands make, lay out and record them, and the steps of a run that several of
// them take. Each group says which file defines it. As in distributed_grid.h, a function
// marked collective must be called by every rank, in the same order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deepgrid/probes.h"
#include "deepgrid/resume.h"
#include "deepgrid/run.h"
#include "mpi/distributed_grid.h"
#include "mpi/halo_exchange.h"
#include "plan/plan.h"
#include "run/lifecycle.h"
#include "store/distributed_manifest.h"
#include "store/grid_lock.h"
#include "store/plane_rect.h"

namespace deepgrid::mpi::detail {

// --- parts.cc: the parts, their options and the manifest that names them

// A new grid's id (rank 0 draws it; the callers broadcast it).
std::string new_id();

Status commit_with_history(Grid& grid, int64_t step, const std::string& command,
                           const nlohmann::json& details);

// What a part of the grid `global` describes is created with: its held points, the grid's
// fields (zeros: the part's values are written afterwards) and scheme, its stores.
CreateOptions part_options(const CreateOptions& global, const PartInfo& info);

// The options a grid like `m` (a distributed grid's as_grid(), or a serial grid's) was created
// with: shape, dtype, fields without their initial values, scheme; no stores.
CreateOptions grid_options(const Manifest& m);

// Every rank's view of its own part, shared: the parts' directories and halos.
void share_parts(DistributedManifest* m, const PartInfo& mine);

// How the grid's global planes (and its blocks' packed rectangles) hold their values.
internal::PlaneFormat global_format(const DistributedManifest& m);

Status write_on_root(const std::string& dir, const DistributedManifest& m);

// The process grid given (checked against the shape and this job), or the one chosen.
Result<ProcessGrid> process_grid_for(const Shape& shape, const std::optional<ProcessGrid>& given);

// Holds DIR's lock on rank 0 while a command changes the grid (the parts have their own): a
// second writer is refused before anything changes. Collective.
Result<std::optional<internal::GridLock>> lock_on_root(const std::string& dir);

// A run whose parts stay in memory (ResidentGrid) prepares every part's new state beside its
// files (Grid::prepare_replacement), agrees, and only then commits them. So a run stopped
// between the two leaves every part prepared for, or committed at, its last step t, and one
// stopped earlier leaves at least one part with nothing prepared, none committed. Collective:
// in the first case the prepared parts commit, in the second they discard what they prepared.
// With another number of ranks than parts nothing is done: open_part then refuses parts that
// do not hold the grid's step, with the hint to finish the run.
Status settle_prepared(const DistributedManifest& m);

// --- create.cc: new parts

// Where a new grid's values come from, filling one block of a part at a time, and what the
// grid's history says about it.
struct BlockSource {
  std::function<Status(Grid& part, const Block& block)> fill;
  std::string command;  // "create", "import", "redistribute", "split"
  nlohmann::json details;
  int64_t step = 0;  // the time step of the values
  // The values' history before the new grid (a split serial grid's): the new grid's history
  // starts with it.
  std::vector<HistoryEntry> history;
};

// Fills a new part (the block, no halos) plane by plane: produce(z, values) writes the block's
// x-y rectangle of global plane z, packed (which is the part's plane).
Status write_block(Grid& part, const Block& block,
                   const std::function<Status(int64_t, std::byte*)>& produce);

// This rank's part of a new grid, with its block's values.
Result<PartInfo> create_part(const std::string& dir, const std::string& id,
                             const CreateOptions& global, const BlockSource& source,
                             const Block& block);

// --- relayout.cc: the halos a run needs, and the parts laid out again for them

// Steps between halo exchanges when --bt is not given: the halo (k * r points each side) stays
// within an eighth of the thinnest block along every split axis the stencil reaches (every
// such axis when none is split), as redundant work on the halos grows with it, and at most 64
// (as the stream engine's sweeps).
int exchange_depth(const DistributedManifest& m, const RunOptions& opt);

// The halo, `halo` points each side along each axis, of k steps of the run's scheme.
std::array<int64_t, 3> halo_of_depth(const Scheme& scheme, int k);

// The halo points each side along each axis that exchanges of depth k bring to the parts of
// process grid `procs`, for reports: k * r along the axes it splits, none along the others.
std::array<int64_t, 3> exchanged_halo(const Scheme& scheme, int k, const ProcessGrid& procs);

// The halo the part `p` has in a run whose exchanges bring `halo` points (fit_halos lays it
// out again when it changes): its own when that suffices; else its own with z halos widened to
// what is needed, when that suffices (the part can gain those planes in place); else what it
// needs.
HaloExtent fitted_halo(const PartInfo& p, const Shape& shape, const std::array<int64_t, 3>& halo,
                       bool periodic);

// Makes every part's halo fit k steps (`verify`: relayout_part's), sharing the result in the
// manifest on disk. When some
// rank fails, the parts laid out again on the others are recorded all the same, so that the
// manifest keeps describing every part.
Status fit_halos(const std::string& dir, DistributedManifest* m, const std::array<int64_t, 3>& halo,
                 bool periodic, bool verify);

// `m` split over the process grid `procs`: itself when it is split so already, else new parts
// (blocks only, no halos nor directories yet: redistribute() makes them).
DistributedManifest split_as(const DistributedManifest& m, const ProcessGrid& procs);

// The process grid a run uses: the one given, else the grid's own when the job has as many
// ranks, else the one chosen for this job.
Result<ProcessGrid> run_process_grid(const DistributedManifest& m,
                                     const std::optional<ProcessGrid>& given);

// A grid split over another process grid than this run's is split again: new parts (under a
// new id, beside the old ones) are filled from the old parts, which every rank must be able to
// read (one machine, or a shared filesystem); then the manifest naming the new parts is
// committed and the old parts are removed. New rank r keeps its part in the stores of old rank
// r mod (old ranks).
Status redistribute(const std::string& dir, DistributedManifest* m, const ProcessGrid& procs,
                    bool verify);

// --- part_traces.cc: the receivers' values of a run, each part's and rank 0's

// This rank's share of a run's probes, and what its receivers record.
struct PartProbes {
  ResolvedProbes resolved;         // in the part's coordinates
  Traces traces;                   // its receivers' values, one round's held
  std::vector<int64_t> receivers;  // each one's index among the run's receivers
};

// Where a streamed part keeps its receivers' values while a round is under way (saved after
// every pass of its engine), so that a run resumed after a stop in the middle of a round has
// the values of the steps the part does not redo. (Parts in memory redo a stopped round
// whole: rank 0's traces file has every round before.)
std::string part_traces_path(const Grid& part);

// The part's share of the probes of `run` (its receivers record steps step_from + 1 ..
// step_to), holding `rows` steps from `from` + 1 on, with the values its traces file saved
// when `resumed`. The caller points resolved.traces at the result's traces (they move with
// it).
PartProbes part_share(const ResolvedProbes& all, const PartInfo& info, const DistributedManifest& m,
                      const RunOptions& opt, const RunRecord& run, int64_t from, int64_t rows,
                      const Grid* resumed);

// Rank 0 gathers what every part's receivers recorded at steps (from, to] (each receiver's
// index, then its values) into `whole` (NaN where a part has none) and writes it to `path`, as
// a serial run does after every pass; then every rank holds the steps from `to` + 1 on.
// Only those steps travel: gathering every step after every round made a 4000-step run with
// 2048 receivers take minutes. Both windows must hold steps (from, to]. Collective.
Status write_traces_on_root(PartProbes* mine, Traces* whole, const std::string& path, int64_t from,
                            int64_t to);

// The receivers' values of one round (at most `rows` steps) stay in memory, within --mem:
// each rank holds its part's, and rank 0 the whole grid's as well. Takes them from `opt`'s
// budget, which the parts' engines and the halo exchange then share; a budget they fill on any
// rank is refused. Checked before anything is laid out again (for the grid `m` as the run
// splits it, `next`, and, resuming, as it is, whose parts finish their round first), so that
// a refusal changes nothing. Collective.
Status leave_room_for_traces(const DistributedManifest& m, const DistributedManifest& next,
                             const ResolvedProbes& all, int64_t rows, bool resumed,
                             RunOptions* opt);

// --- run_progress.cc: where a stopped run stands, and what the next run does

// The step every part holds (`at`), or, when a round was cut short, the step it is to reach;
// where the parts' last rounds began (`round_from`: the receivers' values of the steps after
// it may be in the streamed parts' files only).
struct GridProgress {
  int64_t at = 0;
  bool mid_round = false;
  int64_t from = 0;  // the least advanced part's step
  int64_t round_from = 0;
};

// Collective. With another number of ranks than parts nothing is read here: open_part then
// refuses parts that do not hold the grid's step.
Result<GridProgress> grid_progress(const DistributedManifest& m);

// Where the grid stands for decide_run (run/lifecycle.h): the step the parts hold (or the one a
// round cut short is to reach), the recorded run, whether a round was cut short.
RunStart run_start(const DistributedManifest& m, const GridProgress& g,
                   std::optional<RunRecord> recorded);

// For a run decide_run did not find to resume: parts that stand apart, or away from the grid's
// step, with no record saying why are damage.
Status check_parts_stand(const DistributedManifest& m, const GridProgress& g, const RunStart& at,
                         const RunToDo& todo);

// --- run_report.cc: the ranks' figures

// Adds one advance of the part to the rank's figures.
void add_advance(RankFigures* f, const RunReport& r);
void add_exchange(RankFigures* f, const ExchangeStats& e);

// The run's report: every rank's figures, the global ones, `from` .. `to` the steps every part
// advanced through (to < run.step_to: stopped early). Collective.
DistributedRunReport gather_report(const RankFigures& mine, const DistributedManifest& m,
                                   const RunOptions& opt, int k, int64_t from, int64_t to,
                                   const RunRecord& run, bool direct_io);

// The rank's machine, and what the hypervisor took from it since stolen_cpu_seconds() returned
// `at_start`.
void record_steal(double at_start, RankFigures* f);

// --- run.cc and run_plan.cc: a part's engine

// The options of a part's engine for the run `opt` on the part `info` of grid `m`.
RunOptions engine_options(const RunOptions& opt, const PartInfo& info,
                          const DistributedManifest& m);

// This rank's part as a run with exchange depth k lays it out (split as `next`), and the plan
// of its engine for a round of `steps` steps (not collective). (run_plan.cc)
Result<RunPlan> plan_part(const DistributedManifest& next, const RunOptions& opt, int k,
                          int64_t steps, PartInfo* laid_out);

}  // namespace deepgrid::mpi::detail
