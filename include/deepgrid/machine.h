// This machine's rates, which the planner's cost model needs: the in-core engine's compute
// rate for a stencil, dtype and thread count, and the bandwidth of the disks holding a grid;
// and the engines' tuning: the per-thread working set their wavefront tiles run fastest with.
//
// measure_machine() measures (about a second); machine_profile() measures once per
// machine and caches the rates in machine.json under $DEEPGRID_CACHE_DIR (default:
// $XDG_CACHE_HOME/deepgrid, else ~/.cache/deepgrid), one profile per machine_identity(); in
// it compute keyed by stencil, dtype, threads and the sample it ran on, disks by the device
// numbers of the grid's store directories, the tuning by threads. A measurement the memory budget
// cut short (a smaller sample, fewer reads in flight, fewer working sets tried) is cached under a
// key of its own, for runs within such a budget, never in place of a full one.
#pragma once

#include <string>

#include "deepgrid/scheme.h"
#include "deepgrid/store.h"

namespace deepgrid {

struct MachineProfile {
  // The in-core engine's rate for this stencil, dtype and thread count as the stream's stages
  // run it (their time levels never take turns).
  double compute_mlups = 0;
  // The in-core engine's own where its plan turns the time levels (the wave equations of radius
  // 2 and more: 1.1-1.6x compute_mlups for wave8 on a Xeon VM); 0 where it runs as the stages do.
  double incore_mlups = 0;
  double disk_read_bps = 0;      // O_DIRECT reads of the grid's own files, several in flight
  int disk_reads_in_flight = 0;  // how many: the engine's, or fewer where the budget holds fewer
  double disk_write_bps = 0;     // estimated equal to reads unless measured
  // Per-thread working set the wavefront's tiles are sized for (InCoreOptions::cache_bytes);
  // 0: unknown, the engines' default.
  int64_t cache_bytes = 0;
  // The in-core engine's depth for this scheme, where it is measured (tuned_bt); 0: its rules.
  int tuned_bt = 0;
  // CPU time the machine loses per byte of the grid's disk I/O while every thread computes. On
  // a virtual machine the host's disk emulation takes it from the guest's CPUs (the
  // hypervisor's steal; about 0.6 CPU-s per GiB on a Zen 3 VM); 0 on bare metal.
  double io_cpu_seconds_per_byte = 0;
  // Reads and writes together, as sweeps on these disks sustained them while the disks were
  // busy (record_sweep_bandwidth); 0: no sweep has run. The short read-only measurement above
  // strays from it either way on virtual disks (0.6-1.6x of it, measured on two VMs).
  double disk_sweep_bps = 0;
  // Seconds in-core runs of grids on these disks spent outside their steps, per byte of the
  // grid: the load (with the first touch of the engine's memory, twice the grid's), the store,
  // as the last such run took them (record_incore_load_store); 0: none recorded. On a Zen 4 VM
  // 13-28 s from run to run for a 4 GiB grid whose reads and writes alone the disk rate puts
  // at 12.4 s.
  double incore_load_store_seconds_per_byte = 0;
  // The device a device run names (--device): its step kernel's rate for the stencil and
  // dtype, and host <-> device bytes per second one way; 0: not measured (plan measures them,
  // and caches them in machine.json beside the machine's own).
  double device_mlups = 0;
  double device_copy_bps = 0;
  bool cached = false;  // came from the cache file rather than a measurement

  bool known() const { return compute_mlups > 0 && disk_read_bps > 0; }
  // The rate of an in-core run.
  double incore_rate() const { return incore_mlups > 0 ? incore_mlups : compute_mlups; }
};

// Measures the tiles' working set for the grid's planes (tuned_cache_bytes, ~1.5 s by arithmetic),
// the in-core rate on a small in-memory grid with it (~0.2 s; twice where the in-core engine turns
// the time levels), the read bandwidth of the grid's data files: O_DIRECT reads through io_uring,
// several planes in flight, up to 256 MiB (~0.3 s), and what those reads cost the CPUs (the same
// reads beside an in-core load on every thread, ~0.8 s). Writes nothing. With a memory budget
// (bytes, 0: none) every measurement stays within half of it, so that a run's first measurement
// keeps the run's memory promise.
Result<MachineProfile> measure_machine(const Grid& grid, const Scheme& scheme, int threads,
                                       uint64_t mem_budget = 0);

// The cached profile for this grid's disks and this scheme, dtype and thread count; measures
// and caches what is missing (everything, with `remeasure`). A cache that cannot be read or
// written is ignored. A compute rate cached for the full sample (up to 256x256x64 points of the
// grid's x-y extent) serves any budget; a budget too small for it measures a 16-plane sample,
// and one too small for any takes the rate cached for the largest sample of the grid's width.
Result<MachineProfile> machine_profile(const Grid& grid, const Scheme& scheme, int threads,
                                       bool remeasure = false, uint64_t mem_budget = 0);

// The per-thread working set (bytes) the wavefront's tiles run fastest with on this machine,
// for planes `width` wide and `threads` threads (0: all): caches differ (a 2 MiB L2 per core on
// one machine class, a 512 KiB L2 and a large shared L3 on another), and what a guest sees of
// them does not say how much is its own; on wide planes, whether tiles that span x beat narrower
// ones within a smaller working set differs too. Measured once per thread count and plane width
// (512 for planes up to 512 wide or unknown (0); 1024 or 2048 for wider ones) (a second or two:
// the in-core engine on a 7pt f32 sample of about 8 Mi points in 64 planes of that width with
// five candidate budgets, 384 KiB to 6 MiB, best of three runs each) and cached in
// machine.json; `remeasure` measures again. Candidates that do not fit half of `mem_budget`
// (bytes, 0: no limit) are skipped, and then the best of the rest is cached under a key naming
// them, for runs within such a budget (a tuning of all, once cached, serves every budget). When
// none fits: 0 (the engines' default), whatever the cache holds for other widths.
Result<int64_t> tuned_cache_bytes(int64_t width, int threads, bool remeasure = false,
                                  uint64_t mem_budget = 0);

// The depth (bt) the in-core engine runs `scheme` fastest at on this machine, for schemes whose
// time levels take turns at bt 1 with radius 2 or more (the wave equations wave4 and wave8):
// turning moves 16 bytes per update, which beat temporal blocking on a Xeon VM and lost to it
// on a Zen 4 VM (wave4 1.6x faster at bt 6-8 there, wave8 1.2x at bt 4). Measured once per scheme,
// dtype, plane width (up to 2048), thread count and working set (a few seconds: the in-core
// engine on a sample of about 8 Mi points of that width at bt 1, turning, and at bt 2, 3, 4, 6,
// 8 where the halo's reach r bt is 24 planes or less, best of three rounds taking turns) and
// cached in machine.json; `remeasure` measures again. Candidates that do not fit half of
// `mem_budget` (0: no limit) are skipped, and then the best of the rest is cached under a key
// naming them, as tuned_cache_bytes() does. 0 for other schemes (the engine's own rules).
Result<int> tuned_bt(const Scheme& scheme, DType dtype, int64_t width, int threads,
                     int64_t cache_bytes, bool remeasure = false, uint64_t mem_budget = 0);

// What an in-core run of `scheme` on planes `width` wide takes from the profile: the tiles'
// working set and the depth tuned for this machine (tuned_cache_bytes, tuned_bt), measured
// where not cached; the rates are left unknown.
Result<MachineProfile> machine_tuning(const Scheme& scheme, DType dtype, int64_t width, int threads,
                                      bool remeasure = false, uint64_t mem_budget = 0);

// Milliseconds the block device holding `path` has spent with requests in flight since boot
// (io_ticks, the 10th field of /sys/dev/block/MAJ:MIN/stat; anyone's I/O counts), or -1 where
// its filesystem is not on a block device (tmpfs, overlay, network filesystems).
int64_t device_busy_ms(const std::string& path);
// The most any disk holding the grid's data files has spent so (-1 as above, for any of them).
int64_t grid_disks_busy_ms(const Grid& grid);
// Caches what a sweep moved on the grid's disks: `bytes` read and written while the busiest of
// them was busy `busy_seconds`, as this machine's sweep bandwidth for those disks, which later
// plans use (MachineProfile::disk_sweep_bps) until a --remeasure: the mean of this sweep's and
// the bandwidth cached before. Sweeps of under a second of disk time say too little and are not
// recorded.
void record_sweep_bandwidth(const Grid& grid, double bytes, double busy_seconds);

// Records the `seconds` an in-core run of `grid` spent outside its steps (loading and storing
// it) for the plans of later runs on its disks (incore_load_store_seconds_per_byte; the mean
// of this run's and the figure cached before). Grids
// under 256 MiB are not recorded: their memory is mostly pages freed a moment before, which
// the kernel hands over many times faster than a large grid's fresh ones.
void record_incore_load_store(const Grid& grid, double seconds);

// Where machine_profile() keeps its cache; empty when no directory can be found.
std::string machine_cache_path();

// The machine a cached profile belongs to: host name, CPU model and number of CPUs. The cache
// file keeps one profile under each, so that machines sharing a home directory (a cluster's
// nodes, where device numbers name different disks) or a virtual machine moved to other
// hardware under its old name measure their own.
std::string machine_identity();

}  // namespace deepgrid
