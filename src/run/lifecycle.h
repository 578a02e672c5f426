// The run lifecycle, written once for the two drivers: the serial run (run_grid, run.cc) and
// the distributed one (mpi::run_distributed, mpi/run.cc). run_lifecycle takes every run through
//
//   open -> decide (start, or finish a stopped run) -> check -> prepare (probes, traces, plan,
//   budget) -> resume (finish what a stop cut short) -> record -> advance -> commit with a
//   history entry -> drop the record
//
// and a RunDriver supplies what differs: one grid, or parts over ranks that agree at every
// step. The rules the steps follow (decide_run, traces_of_run, run_history, the run record's
// I/O) are here too; the report is the driver's.
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

// Serial grid DIR opened read-only (its lock shared: no writer while it is read) for a copy
// of its values into the new grid NEW_DIR ('deepgrid split'). Refused with the fix, changing
// nothing, when NEW_DIR is DIR, DIR is a distributed grid or no grid, or its planes may not
// all hold its time step (an in-place sweep interrupted), or a run of it is unfinished: its
// record stays with DIR, so the copy could not finish it. (NEW_DIR itself is checked where it
// is made.)
Result<Grid> open_to_split(const std::string& dir, const std::string& new_dir);

// What the advance step did: the steps a history entry records (none when nothing is to be
// committed: a distributed run stopped part-way leaves its grid where every part stands).
struct Advanced {
  bool commit = true;
  int64_t from = 0, to = 0;
};

// What a kind of grid does at each step of run_lifecycle. Every call is made by every process
// of the run in the same order (a distributed driver's calls are collective).
class RunDriver {
 public:
  virtual ~RunDriver() = default;
  // Opens (and locks) the grid; where it stands. May set what the options leave to the
  // driver (a distributed run's threads per rank, the scheme checked before anything settles).
  virtual Result<RunStart> open(RunOptions& options) = 0;
  // The grid as a whole (its manifest), for decide_run.
  virtual const Manifest& whole() const = 0;
  // A status every process of the run holds alike (a distributed run agrees over its ranks).
  virtual Status agree(Status status) { return status; }
  // Checks and adapts what decide_run chose (the driver's own rules), with nothing changed yet.
  virtual Status check(RunToDo& todo) = 0;
  // Probes, traces, the plan and the budget: everything that can refuse the run before
  // anything changes.
  virtual Status prepare(RunToDo& todo) = 0;
  // Resuming: finishes what a stop cut short before this run goes on (a distributed round);
  // false when the progress callback stopped it again.
  virtual Result<bool> resume(const RunToDo& todo) = 0;
  // Records a new run (save_run_record) before anything changes toward it.
  virtual Status record(RunToDo& todo) = 0;
  virtual Result<Advanced> advance(const RunToDo& todo) = 0;
  // Commits the grid at the step advance reached, with `scheme` as its own (scheme_to_record)
  // and `entry` in its history.
  virtual Status commit(int64_t step, const std::string& scheme, HistoryEntry entry) = 0;
  // The run's fields in its history entry besides those every run has (run_history).
  virtual nlohmann::json history_details() const = 0;
  // The run reached its end: its record goes.
  virtual void drop_record() = 0;
  // Whether this process writes the run's traces files (a distributed run: rank 0 alone).
  virtual bool writes_traces() const { return true; }
};

// How a run ended: what it did (todo), whether the grid was committed, and whether the run
// reached the record's end (else it stopped, and the record stays for the same command).
struct RunEnd {
  RunToDo todo;
  bool committed = false;
  bool finished = false;
};

// Takes a run through the lifecycle with `driver`, as the options `given` ask. Traces going to
// a SEG-Y file are recorded in the .npy beside it (traces_npy_path) and written as SEG-Y when
// the run reaches its end; an unknown traces format, or SEG-Y options that cannot be written,
// are refused before the driver opens the grid.
Result<RunEnd> run_lifecycle(RunDriver& driver, RunOptions given);

}  // namespace deepgrid
