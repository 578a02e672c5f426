// Running a stored grid: open, check, advance, write back, record in the manifest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/executor.h"
#include "deepgrid/io/block_io.h"
#include "deepgrid/machine.h"
#include "deepgrid/probes.h"
#include "deepgrid/report.h"
#include "deepgrid/resume.h"
#include "deepgrid/scheme.h"
#include "deepgrid/store.h"

namespace deepgrid {

// auto: in-core when the grid fits the memory budget (or no budget is given), else stream.
// naive: stream with bt = 1, what out-of-core costs without temporal blocking.
// mmap: the in-core engine on grid copies in memory-mapped scratch files, paged by the OS.
// tiled: the published method (tiled.h): blocks with halos, two copies of the grid on disk.
enum class Method { kAuto, kInCore, kStream, kNaive, kMmap, kTiled };
Result<Method> parse_method(std::string_view text);
std::string_view method_name(Method m);  // the name parse_method accepts

struct RunOptions {
  // What to run: a stencil (a Scheme converts from one) or a scheme of several fields. Left
  // empty (no components), the grid's own scheme (Manifest::scheme) runs.
  Scheme scheme;
  int64_t steps = 0;
  Boundary boundary;
  Method method = Method::kAuto;
  int threads = 0;     // 0: all cores
  int bt = 0;          // steps per pass over memory (temporal blocking); 0: automatic
  int cache_bt = 0;    // stream methods: steps per pass over the cache within a sweep; 0: auto
  int64_t tile_x = 0;  // x-y tile of the wavefront (tiled: block extents along y, z); 0: automatic
  int64_t tile_y = 0;
  uint64_t mem_budget = 0;               // bytes; 0: no limit (the stream methods need one)
  io::Backend io = io::Backend::kUring;  // stream methods: io_uring or a thread pool
  bool verify = false;                   // check every plane read against its recorded hash
  // Compute with subnormal numbers flushed to zero (inputs and results; x86's DAZ and FTZ):
  // full speed where a field decays into zero, where x86 computes subnormals far slower.
  // Every engine gives the same bits either way; off, the arithmetic is IEEE's.
  bool flush_subnormals = false;
  // Finish the grid's unfinished run (its scheme, boundary and target step replace these);
  // the same command as that run's does so too.
  bool resume = false;
  // Point sources and receivers (probes.h); receivers' values go to `traces_path` (.npy,
  // float64, one row per step of the run, one column per receiver), saved after every pass
  // (the rows that changed) so that a stopped run keeps what it recorded; a resumed run fills
  // in the rest. The values stay in memory and count against mem_budget.
  Probes probes;
  std::string traces_path;
  // A distributed run's part: where it lies in the whole grid, whose coordinates users'
  // kernels see (geometry.h). Default: the grid is the whole grid.
  GridPlacement placement;
  // A distributed run whose parts stay in memory commits them (a checkpoint) at the end of the
  // first round this many seconds after the last commit; 0: every round; negative: when the
  // time since is at least a minute and 10 times what the last commit (at first, the load)
  // took, so that checkpoints cost about a tenth of the run at most.
  double checkpoint_seconds = -1;
  MachineProfile machine;  // rates for the cost model; unknown: the planner's defaults
  // Whether a stream run records the disk bandwidth its sweeps sustained in the machine
  // profile (record_sweep_bandwidth): not when other processes of the run share the disks (a
  // distributed run's ranks on one machine), as the disks' busy time counts their I/O too.
  bool record_disk_rate = true;
  ProgressFn progress;  // may be empty
};

// Checks that the scheme (its components, its reach) and the step count suit the grid
// (nothing is read or written).
Status check_run(const Manifest& m, const RunOptions& options);

// The scheme a run of the grid uses: `given` unless it is empty, else the grid's own
// (Manifest::scheme); kInvalidArgument when there is neither.
Result<Scheme> scheme_for(const Manifest& m, const Scheme& given);

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
