// What a run is asked to do: the options the planner interprets once into a plan (plan/plan.h)
// and the run lifecycle (run.h) carries out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "deepgrid/boundary.h"
#include "deepgrid/direct_io.h"
#include "deepgrid/geometry.h"
#include "deepgrid/machine.h"
#include "deepgrid/probes.h"
#include "deepgrid/progress.h"
#include "deepgrid/scheme.h"
#include "deepgrid/status.h"
#include "deepgrid/traces_file.h"
#include "deepgrid/vtkhdf.h"

namespace deepgrid {

// auto: in-core when the grid fits the memory budget (or no budget is given), else stream.
// naive: stream with bt = 1, what out-of-core costs without temporal blocking.
// mmap: the in-core engine on grid copies in memory-mapped scratch files, paged by the OS.
// tiled: the published method (engines/tiled_engine.h): blocks with halos, two copies of the grid
// on disk.
// device: an accelerator through OpenCL (docs/devices.md): the grid held in device memory.
enum class Method { kAuto, kInCore, kStream, kNaive, kMmap, kTiled, kDevice };
Result<Method> parse_method(std::string_view text);
std::string_view method_name(Method m);  // the name parse_method accepts

// The device method's slabs (host-resident, three tiers): the next slab's planes go up and the
// last one's come down while a slab's steps run (on: three slab buffers on the device, so
// smaller slabs; off: two, copies and steps in turn; auto: what the cost model prefers, which
// on CPU devices, whose copies take the cores the kernels use, is off).
enum class DeviceOverlap { kAuto, kOn, kOff };
Result<DeviceOverlap> parse_device_overlap(std::string_view text);  // auto, on, off

// Snapshots during a run: the grid (or the fields `format` names) at every `every`-th step,
// steps counted from the grid's creation, added to the series in `dir` (vtkhdf.h) as the run
// reaches them; a run that starts on such a step and finds no file of it takes that one too.
struct Snapshots {
  std::string dir;
  int64_t every = 0;  // 0: none
  VtkhdfOptions format;
  bool wanted() const { return every > 0; }
};

// RunOptions::band_rows left to the planner: bands of rows where the cost model finds them
// cheaper than whole planes and the grid's disks have room for their second copy.
inline constexpr int64_t kAutoBandRows = -1;

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
  // Stream method: sweep in bands of this many rows instead of whole planes (out of place: a
  // second copy of the data files during each sweep); 0: whole planes; kAutoBandRows: the
  // planner's choice (docs/cli.md, "--band-rows").
  int64_t band_rows = kAutoBandRows;
  uint64_t mem_budget = 0;  // bytes; 0: no limit (the stream methods need one)
  // The device method: which device (an index of 'deepgrid devices', "gpu", "cpu"; empty: the
  // first GPU, else the first device) and its memory budget in bytes (0: its memory less 1/16).
  // A device named with method auto runs the device method.
  std::string device;
  uint64_t device_mem = 0;
  DeviceOverlap device_overlap = DeviceOverlap::kAuto;
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
  // A traces_path named .sgy or .segy (traces_format) is a SEG-Y file: the run records into
  // traces_npy_path(traces_path) as above and writes the SEG-Y file from it, with `segy`'s
  // sample interval and spacing, when the run finishes (a stopped run, once resumed to its end).
  Probes probes;
  std::string traces_path;
  Snapshots snapshots;
  SegyOptions segy;
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
  // The caller advances the same open grid again right after this run (advance_grid in
  // rounds, a run's parts between snapshots): a run that sweeps in bands of rows (writing a
  // replacement of the data files) leaves the files it replaced for the next run's first sweep
  // to write into instead of freeing them (Grid::OldFiles::kKeep), as it does between its own
  // sweeps. Freeing a grid's worth of blocks and allocating them again costs each call that
  // much disk work (freeing one took 0.13-0.31 s per GiB on a filesystem mounted with discard). The
  // second copy then stays on the disk between the calls, as it does during each sweep, until the
  // Grid closes or writes a replacement it does not fit; planning and preflight count its space as
  // free for the next copy.
  bool advances_again = false;
  ProgressFn progress;  // may be empty
};

}  // namespace deepgrid
