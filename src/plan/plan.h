// Planning a run: which method, how deep the temporal blocking, how much memory, and how long
// it should take on this machine. Pure data that can be printed, tested and compared.
#pragma once

#include <string>

#include "deepgrid/machine.h"
#include "deepgrid/run_options.h"
#include "deepgrid/store.h"
#include "engines/device_engine.h"
#include "engines/incore_engine.h"
#include "engines/stream_engine.h"
#include "engines/tiled_engine.h"

namespace deepgrid {

struct RunPlan {
  Method method = Method::kInCore;
  WavefrontPlan incore;          // when method is kInCore or kMmap
  StreamPlan stream;             // when method is kStream or kNaive
  StreamOptions stream_options;  // what `stream` was planned with, for advance_stream
  TiledPlan tiled;               // when method == kTiled
  DevicePlan device;             // when method == kDevice
  uint64_t memory_bytes = 0;     // what the engine will allocate (mmap: besides its mappings)
  uint64_t disk_bytes = 0;       // scratch files beside the grid (mmap, tiled; stream in bands)
  double predicted_seconds = 0;  // the cost model's estimate
  double predicted_io_seconds = 0;
  double predicted_compute_seconds = 0;  // device method: its kernels
  double predicted_copy_seconds = 0;     // device method: between host and device
  // Left to choose (--method auto) where weighs_stream(): the in-core method's prediction the
  // stream beat (the stream taken), or the stream's that did not beat it (in-core kept); else 0.
  double incore_predicted_seconds = 0;
  double stream_predicted_seconds = 0;

  std::string to_text(const Manifest& m, const RunOptions& options) const;
  std::string to_json() const;
};

// The plan run_grid would follow for these options, with the cost model's prediction (rates
// from `machine`; unknown rates leave the planner's defaults and predict nothing):
// stream time = sweeps * max(compute, disk) per sweep, reads and writes overlapping compute and
// each other;
// in-core time = load + compute + store (mmap: the same; the OS's paging is not modelled);
// tiled time = passes * (read widened blocks + compute with halo work + write), one after
// the other. (The first touch of the memory each allocates is not modelled.)
// Left to choose (--method auto), a run takes the device where one is named, the in-core method
// where the grid fits the budget (or there is none), and the stream where it does not; where
// weighs_stream(), the stream is taken instead of the in-core method when predicted well
// faster (a short run of a large grid: the stream overlaps its disk traffic with computing,
// the in-core method loads, computes and stores in turn, in twice the grid's memory), within
// the smallest budget, up to the in-core method's memory, predicted nearly as fast as any.
Result<RunPlan> plan_run(const Grid& grid, const RunOptions& options,
                         const MachineProfile& machine);
// The same for a grid of manifest `m` in `dir` (which need not exist yet: manifest_for()).
Result<RunPlan> plan_run(const Manifest& m, const std::string& dir, const RunOptions& options,
                         const MachineProfile& machine);

// Whether a run left to choose weighs the stream against the in-core method (plan_run): a whole
// grid (a distributed part is kept in memory from round to round instead) of 1 GiB or more, on
// the CPU. The choice takes the machine's rates: callers measure them (machine_profile) for
// such runs.
bool weighs_stream(const Manifest& m, const RunOptions& options);

// The most memory a run left to choose gives the stream where no budget is given: what the
// in-core method would take for the grid (options.machine's tiles). A sweep such a run left
// unfinished is finished within it.
uint64_t auto_stream_budget(const Manifest& m, const RunOptions& options);

// What every run does before it changes anything: the checks, the plan (with
// options.machine), the space it needs beside the grid, the preflight, and with
// options.verify a look at every plane. For callers that drive an engine themselves
// (ResidentGrid).
Result<RunPlan> prepare_run(Grid& grid, const RunOptions& options);

}  // namespace deepgrid
