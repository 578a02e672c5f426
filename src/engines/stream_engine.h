// The out-of-core stream engine: advances a grid stored on disk, many times larger than memory,
// by wavefront temporal blocking with asynchronous direct I/O.
//
// One sweep reads the grid plane by plane along z and writes it back in place, advanced bt
// steps: as level-0 plane i arrives, plane i - k rz of each level k = 1..bt is computed from
// the 2 rz + 1 planes of level k - 1 kept in memory, and finished level-bt planes are written
// behind. Two-level blocking: the bt levels run as stages of cache_bt levels whose x-y tiles
// keep their rings in cache (like the in-core engine's passes), with full planes of the level
// between two stages in memory; the disk sees one pass per bt steps, the cache one per
// cache_bt. Reads run ahead of compute and writes behind it through io_uring (or a thread pool),
// so disk and CPU work at the same time. Memory is a hard cap: the plan proves the working set
// fits the budget before anything is read.
#pragma once

#include <cstdint>
#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/probes.h"
#include "deepgrid/scheme.h"
#include "deepgrid/store.h"
#include "engines/incore_engine.h"
#include "io/block_io.h"

namespace deepgrid {

struct DevicePlan;  // device_engine.h

struct StreamOptions {
  int threads = 0;          // compute threads; 0: all
  int bt = 0;               // steps per sweep; 0: chosen by the cost model (<= 64)
  int cache_bt = 0;         // steps per stage (pass over the cache); 0: the in-core engine's
  uint64_t mem_budget = 0;  // bytes; must be > 0
  io::Backend io = io::Backend::kUring;
  int block = 0;       // z-steps each tile advances between I/O turns; 0: up to 32, as fits
  int64_t tile_x = 0;  // x-y tiles; 0: sized for the cache like the in-core engine's
  int64_t tile_y = 0;
  int64_t cache_bytes = 0;  // per-thread working set tiles are sized for; 0: the in-core default
  // Sweep the grid in bands of this many rows (y) instead of whole planes; 0: whole planes.
  // Out of place (stream_bands.cc), not a device run.
  int64_t band_rows = 0;
  bool flush_subnormals = false;  // RunOptions::flush_subnormals
  // Tiles of one x range run in y order as chains, each handing its edge rows to the next
  // (WavefrontEdges) instead of the next computing them again, on the CPU (plan_for: as many
  // chains a range as the threads need). Off: every tile computes its whole frame.
  bool carry_edges = true;
  // Bytes per lattice update the disks sustain while compute runs at full speed (disk
  // bandwidth / compute rate). The planner deepens bt until the disk traffic, 2 * sizeof(value)
  // * components / bt per update, fits under it, weighed against the tiles' redundant halo work.
  double disk_bytes_per_update = 0.6;
  // Whether that figure is what earlier sweeps sustained (MachineProfile::disk_sweep_bps),
  // which the planner takes as it is, rather than a short measurement it allows a wide margin.
  bool disk_rate_observed = false;
  // CPU time lost per byte of disk I/O, counted in lattice updates at the compute rate of all
  // threads (MachineProfile's io_cpu_seconds_per_byte times that rate); the plan spreads it
  // over its threads. On a virtual machine the host's disk emulation runs on the guest's CPUs,
  // so every sweep's I/O also costs compute.
  double io_cpu_updates_per_byte = 0;
  io::FaultHook fault_hook;                // tests: inject I/O errors and short transfers
  const ResolvedProbes* probes = nullptr;  // sources and receivers (probes.h); null: none
  // Components sources add to, bit c for component c, where the plan is made before `probes`
  // are resolved (the plan keeps them in the stages' rings, as it does those of `probes`).
  uint64_t source_components = 0;
  // Where the grid lies in a larger one, and which of its points the run must deliver
  // (geometry.h).
  GridPlacement placement;
  // Three tiers: the device that computes the sweeps' levels, and its wavefront (device_engine.h);
  // null: the CPU.
  const DevicePlan* device = nullptr;
  // RunOptions::advances_again: sweeps in bands leave the files their last commit replaced for
  // the next advance's first sweep to write into (Grid::OldFiles::kKeep).
  bool keep_replaced_files = false;
};

// A plan's run as the planner weighs it, in steps over the grid at the in-core rate (the
// planner knows the disks and the I/O's CPU time relative to that rate; plan_run turns steps
// into seconds).
struct StreamCost {
  double steps = 0;          // per sweep the larger of compute and disk (hedged: plan_stream)
  double compute_steps = 0;  // halo work, blocks, stages, and the CPU time of the I/O
  double disk_steps = 0;     // reads and writes at the disk rate assumed
};

struct StreamPlan {
  int bt = 1;
  int cache_bt = 1;  // levels per stage
  int stages = 1;    // stages of a full sweep
  int threads = 1;
  int64_t tile_x = 0, tile_y = 0;  // x-y tiles of every stage
  int64_t tiles = 0;
  // Per-thread working set the tiles were sized for: StreamOptions::cache_bytes, or a multiple of
  // it where that one leaves stages of a single level (stream_plan.cc, stage_depth_options).
  int64_t cache_bytes = 0;
  int block = 1;            // z-steps per block
  int64_t frame_bytes = 0;  // one frame plane
  // Frames holding level 0 and the levels between stages, one store for all stages: a stage's
  // input and output planes of a block, and the planes each stage carries into the next block.
  int64_t frames = 0;
  // Planes of a stage's inner levels each (stage, tile) carries from one block to the next; the
  // rings they run in are per thread.
  int64_t carried_planes = 0;
  // Components the stages' rings and carries leave out, bit c for component c (lean
  // wavefronts, wavefront.h: wave8's rings hold u alone), and whether a coefficient field is
  // among them that no window holds: every level of a stage then reads it from the stage's
  // input level, whose planes stay until the last level has computed them (stream_stages.h,
  // kept_input_planes).
  uint64_t aliased = 0;
  bool coefficients_from_input = false;
  // Coefficient fields the stages share instead (the last `window_components` components, all
  // of the aliased coefficient fields): read from one window of planes that every stage's levels
  // read at the point (stream_frames.h, StageFrames::window), filled from the reads and released
  // after the sweep's last level read them; the frames then hold the other components only, and
  // no stage but the last writes the coefficients into its output. 0: none.
  int window_components = 0;
  int64_t window_frames = 0;  // planes the window holds: bt rz + block, and the pinned ones
  // Where the grid keeps the window's fields in its coefficient files (never written): the
  // write buffers hold the ring's components alone, the last stage leaves the coefficients out
  // of its output as the others do, and a written plane's checksum takes them from the window.
  bool writes_without_coefficients = false;
  // Aligned plane buffers for reads (block) and writes. Write buffers: two blocks' (a block's
  // outputs while the previous block's are still being written), or, where the disk has time
  // to spare, one block's, claimed just before the sweep's last stage: the previous block's
  // writes then have the other stages' compute to complete (stages >= 2), and the memory they
  // free deepens the block.
  int64_t io_buffers = 0;
  int64_t write_buffers = 0;
  int64_t memory_bytes = 0;   // all of the above: what the engine allocates
  int64_t minimum_bytes = 0;  // the working set with bt = 1
  int64_t sweeps = 0;
  double redundancy = 1;  // computed updates / useful updates (tile halos)
  // A stage's tiles of one x range run in y order as chains of chain_tiles tiles or fewer, each
  // handing its edge rows to the next (StreamOptions::carry_edges), with edges_bytes of edge
  // rows per thread: a block's planes of every inner level of a stage. 0: each tile on its own.
  int64_t chain_tiles = 0;
  int64_t edges_bytes = 0;
  // Compute per update against the in-core engine's rate, apart from halo work (which the
  // in-core engine does too): blocks' cold reads of carried planes, shallow stages.
  double compute_factor = 1;
  StreamCost cost;  // of the planned steps
  bool flush_subnormals = false;
  // Bands of rows (StreamOptions::band_rows; 0: whole planes): `bands` of band_rows rows each
  // (the last may be shorter), each swept as planes of band_height rows (the band, the rows
  // before it that it computes where bands share their edge blocks, and bt * ry rows of halo at
  // either side, within the grid); every figure above is of those planes but
  // memory_bytes, which adds the per-plane checksum states, and cost, which is of the whole run.
  int64_t band_rows = 0, band_height = 0, bands = 0;
  // Rows the bands compute / the grid's rows, on average over their levels (each level computes
  // the rows that reach its band's own: about band_rows + bt * ry of its planes), apart from
  // the tiles' halos: the bands' halo work (1: whole planes).
  double band_redundancy = 1;
};

// Whether a sweep in bands reads rows across the grid's ends: periodic, and the grid holds every
// row of y (a distributed part split along y has its neighbours' rows as halos instead).
inline bool bands_wrap(const Manifest& m, const Boundary& b, const GridPlacement& at) {
  return b.kind == Boundary::Kind::kPeriodic && (at.is_whole() || at.whole.ny == m.shape.ny);
}

// The plan for `steps` steps within the budget; kInvalidArgument naming the minimum budget
// when even bt = 1 does not fit.
Result<StreamPlan> plan_stream(const Manifest& m, const Scheme& scheme, const Boundary& boundary,
                               int64_t steps, const StreamOptions& options);

struct StreamStats {
  int64_t steps = 0;           // steps done (fewer when progress asked to stop)
  double compute_seconds = 0;  // in the kernel, summed over the run's wall time
  double io_wait_seconds = 0;  // blocked waiting for the disk
  // Of io_wait_seconds, waiting for writes: for write buffers to come free, for written planes
  // to become durable, for the last writes (the rest waited for reads).
  double io_wait_for_writes_seconds = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  io::Backend backend = io::Backend::kUring;
  // Three tiers (StreamOptions::device): between host and device, both ways, and the time the
  // copies took.
  int64_t device_bytes_copied = 0;
  double device_copy_seconds = 0;
};

// Spare slots (store.h) a sweep of this plan wants: more than bt rz are needed, the rest lets
// writes run ahead of the durable prefix without waiting.
int64_t spare_planes_needed(const StreamPlan& plan, const Scheme& scheme);

// Advances the grid (opened read-write) by `steps` steps in place. Each sweep keeps a record on
// disk (resume.h) that a background thread advances as new planes become durable, and is
// committed after it (the manifest's step and base, the planes' checksums), so a crash at any
// moment leaves a grid that the next call finishes: a grid with an interrupted sweep
// (Grid::sweep_record) first completes that sweep, whose scheme and boundary must be the same
// and whose levels at most plan.bt; its steps count towards `steps`. The spare slots grow to
// spare_planes_needed while the ring allows. After each sweep, before its commit, `progress` is
// asked whether to go on (so what it saves of the sweep is on disk once the grid holds it). On an
// I/O error the run stops with a Status naming the file and offset.
// A plan of bands (StreamPlan::bands) sweeps out of place instead: each sweep writes every band
// into a replacement of the data files and commits it whole (Grid::commit_replacement), so a
// crash or an error leaves the grid at its last committed step, a damaged plane is found before
// anything is replaced, and a grid with an interrupted in-place sweep is refused.
Result<StreamStats> advance_stream(Grid& grid, const Scheme& scheme, const Boundary& boundary,
                                   int64_t steps, const StreamPlan& plan,
                                   const StreamOptions& options, const ProgressFn& progress = {});

}  // namespace deepgrid
