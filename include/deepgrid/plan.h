// Planning a run: which method, how deep the temporal blocking, how much memory, and how long
// it should take on this machine. Pure data that can be printed, tested and compared.
#pragma once

#include <string>

#include "deepgrid/executor.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "deepgrid/stream.h"
#include "deepgrid/tiled.h"

namespace deepgrid {

// This machine's rates, measured quickly (see measure_machine).
struct MachineProfile {
  double compute_mlups = 0;   // in-core engine, this stencil and dtype, from cache
  double disk_read_bps = 0;   // O_DIRECT reads of the grid's own files
  double disk_write_bps = 0;  // estimated equal to reads unless measured
};

// Measures the in-core rate on a small in-memory grid (~0.2 s) and the read bandwidth of the
// grid's data files with O_DIRECT (up to 256 MiB, ~0.3 s). Writes nothing.
Result<MachineProfile> measure_machine(const Grid& grid, const Stencil& stencil, int threads);

struct RunPlan {
  Method method = Method::kInCore;
  WavefrontPlan incore;          // when method is kInCore or kMmap
  int64_t io_batch = 0;          // kInCore, kMmap: planes loaded and stored at a time
  StreamPlan stream;             // when method is kStream or kNaive
  StreamOptions stream_options;  // what `stream` was planned with, for advance_stream
  TiledPlan tiled;               // when method == kTiled
  uint64_t memory_bytes = 0;     // what the engine will allocate (mmap: besides its mappings)
  uint64_t disk_bytes = 0;       // scratch files beside the grid (mmap, tiled)
  double predicted_seconds = 0;  // the cost model's estimate
  double predicted_io_seconds = 0;
  double predicted_compute_seconds = 0;

  std::string to_text(const Manifest& m, const RunOptions& options) const;
  std::string to_json() const;
};

// The plan run_grid would follow for these options, with the cost model's prediction:
// stream time = sweeps * max(compute, disk) per sweep, reads and writes overlapping compute and
// each other;
// in-core time = load + compute + store (mmap: the same; the OS's paging is not modelled);
// tiled time = passes * (read widened blocks + compute with halo work + write), one after
// the other.
Result<RunPlan> plan_run(const Grid& grid, const RunOptions& options,
                         const MachineProfile& machine);

}  // namespace deepgrid
