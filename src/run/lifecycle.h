// The steps every run goes through, each written once here for the two drivers: the serial
// run (run_grid, run.cc) and the distributed one (mpi/run_distributed). A driver says where
// its grid stands (one grid, or parts agreed over the ranks) and how it advances; the rules of
// what a command is to do, what the run record holds, which traces a run keeps and what the
// history says are these:
//
//   open -> check -> what to do (start, or finish a stopped run: decide_run) -> probes and
//   traces (traces_of_run) -> plan -> record (save_run_record) -> advance -> commit with a
//   history entry (run_history) -> drop the record -> report.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "deepgrid/probes.h"
#include "deepgrid/resume.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"

namespace deepgrid {

// Where a grid stands when a command asks to run it.
struct RunStart {
  std::string dir;                    // for messages
  int64_t step = 0;                   // the step the grid holds (or a cut round is to reach)
  std::optional<RunRecord> recorded;  // the run record whose range holds `step`
  // When the grid was stopped in the middle of something only its recorded run may finish
  // (an in-place sweep; a distributed round): how it stopped, and the command that finishes
  // it, for the refusal of any other run.
  bool stopped_part_way = false;
  std::string stopped_how;     // e.g. "interrupted in the middle of a sweep"
  std::string resume_command;  // e.g. "deepgrid run DIR --resume"
};

struct RunToDo {
  RunOptions options;    // the run's: as given, or the rest of the recorded run
  RunRecord record;      // what the whole run is to reach (method: the options' own)
  bool resumed = false;  // finishing the recorded run
};

// What a command is to do on a grid of manifest `whole` standing at `at`: the run `given`
// asks for (with the grid's own scheme when it names none), or, with --resume or the same
// command as the recorded run's, the rest of that run. kInvalidArgument, with the fix, for
// --resume without a recorded run, or another run while the grid is stopped part-way.
Result<RunToDo> decide_run(const Manifest& whole, const RunStart& at, RunOptions given);

// The traces a run's `receivers` fill: one row per step of the whole run (`run`'s range),
// holding `held_steps` rows at a time from step held_from + 1 on; resumed, with what the
// stopped run saved in `path`.
Traces traces_of_run(const RunRecord& run, int64_t receivers, int64_t held_steps, int64_t held_from,
                     bool resumed, const std::string& path);

// The history entry of a run of `options` that took the grid from step_from to step_to;
// `extra` adds the driver's own fields (the method; a distributed run's ranks and exchange).
HistoryEntry run_history(const RunOptions& options, int64_t step_from, int64_t step_to,
                         bool resumed, nlohmann::json extra);

// The run record in `dir` (resume.h) when its range holds `step`.
std::optional<RunRecord> read_run_record(const std::string& dir, int64_t step);
// Writes it atomically, so that a stop at any moment leaves the old record or the new one.
Status save_run_record(const std::string& dir, const RunRecord& record);
// Removes it: the run is done (or never changed anything).
void drop_run_record(const std::string& dir);

}  // namespace deepgrid
