// Running a stored grid: open, check, advance, write back, record in the manifest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "deepgrid/probes.h"
#include "deepgrid/report.h"
#include "deepgrid/resume.h"
#include "deepgrid/run_options.h"
#include "deepgrid/scheme.h"
#include "deepgrid/store.h"

namespace deepgrid {

// Checks that the scheme (its components, its reach) and the step count suit the grid
// (nothing is read or written).
Status check_run(const Manifest& m, const RunOptions& options);

// The scheme a run of the grid uses: `given` unless it is empty, else the grid's own
// (Manifest::scheme, loaded as Scheme::from_grid_record: a kernel library only with the hash
// recorded); kInvalidArgument when there is neither.
Result<Scheme> scheme_for(const Manifest& m, const Scheme& given);
// The scheme record a grid keeps after a run with `ran`: a grid whose own scheme names a kernel
// library records the one the run used (given with --kernel, the build the user accepted, with
// its hash); any other keeps `recorded`.
std::string scheme_to_record(const std::string& recorded, const Scheme& ran);

// Advances the grid in DIR by options.steps steps. On success the data files hold the new
// state and the manifest's step and history are updated atomically. A run stopped by the
// progress callback writes the steps done and reports them. While it runs, DIR/run.json
// records its target (resume.h): after a crash or a stop, the same call again, or one with
// options.resume, finishes it, bitwise as if it had never stopped.
Result<RunReport> run_grid(const std::string& dir, const RunOptions& options);

// The run the grid's run record describes when its range holds the manifest's step, finished
// (the manifest's step is its end) or not.
std::optional<RunRecord> current_run(const Grid& grid);
// The same when it is unfinished.
std::optional<RunRecord> unfinished_run(const Grid& grid);

// Fills the report's description of the problem: stencil, shape, dtype, boundary, points.
void describe_problem(RunReport* report, const Shape& shape, DType dtype,
                      const RunOptions& options);

// The record of a run of options.steps steps from `step` with `method`.
RunRecord record_of(const RunOptions& options, int64_t step, Method method);
// Whether `options` repeat the recorded run's command (steps, scheme, boundary): the same
// command again finishes that run rather than starting another.
bool repeats(const RunRecord& run, const RunOptions& options);
// The options that take a grid at `step` to the recorded run's end: its scheme, boundary,
// method (unless `base` names one) and remaining steps, the rest from `base`.
Result<RunOptions> rest_of(const RunRecord& run, int64_t step, RunOptions base);

// The options that finish the grid's unfinished run (its run record, or a sweep interrupted in
// its middle): that run's scheme, boundary, method and remaining steps, the rest from `base`.
// kInvalidArgument when the grid has none.
Result<RunOptions> options_to_finish(const Grid& grid, RunOptions base);

// Records in the grid's directory that a run of options.steps steps from its current step is
// under way (DIR/run.json, resume.h), so that options_to_finish can finish it after a crash;
// for callers of advance_grid (a distributed run records each round of its parts).
Status record_run(const Grid& grid, const RunOptions& options);

// run_grid's work on a grid the caller holds open read-write, for callers that run one grid
// many times (the distributed run advances each rank's part once per halo exchange): checks,
// plans, preflights, advances and commits the new step, without a history entry or a run
// record (the caller keeps its own, and does not resume). report.seconds is not filled in.
// The engine applies `probes` (resolved by the caller, in the grid's coordinates; null: none)
// rather than options.probes, and writes no traces file.
Result<RunReport> advance_grid(Grid& grid, const RunOptions& options,
                               const ResolvedProbes* probes = nullptr);

}  // namespace deepgrid
