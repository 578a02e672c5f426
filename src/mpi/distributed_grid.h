// The distributed grid's commands under mpirun: each rank works on its own part
// (store/distributed_manifest.h) and the ranks meet in collective phases that end in agree()
// (comm.h), so a failing rank stops them all with its message. Every function here is collective
// over MPI_COMM_WORLD. Defined by concern: create.cc, gather.cc, run.cc (with relayout.cc,
// part_traces.cc and run_progress.cc), run_report.cc, run_plan.cc; parts.cc and parts.h hold what
// they share.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "deepgrid/checksum.h"
#include "deepgrid/resume.h"
#include "deepgrid/run.h"
#include "store/distributed_manifest.h"

namespace deepgrid::mpi {

// Creates distributed grid DIR over this job's ranks: the blocks of process grid `procs` (when
// not given, the one choose_process_grid picks), each rank's part (an ordinary grid) in its
// store directories, where "%r" in options.stores stands for the rank. The
// values are those a serial create gives at the same global coordinates. On failure on any
// rank, every part made is removed (and DIR, when it made it).
Result<DistributedManifest> create_distributed(const std::string& dir, const CreateOptions& options,
                                               const std::optional<ProcessGrid>& procs = {});

// Creates distributed grid DIR from a .npy file (float32/float64, C order) that every rank can
// read (one machine, or a shared filesystem): each rank reads its block's planes.
Result<DistributedManifest> import_distributed(const std::string& npy_path, const std::string& dir,
                                               const std::vector<std::string>& stores,
                                               const std::optional<ProcessGrid>& procs = {});

// At most what a rank reads at once while it fills its part from a file or another grid (at
// least one plane of its block): memory stays bounded however large the part is.
inline constexpr int64_t kFillBatchBytes = int64_t{64} << 20;

// Creates distributed grid DIR holding the values of serial grid SERIAL_DIR, which every rank
// can read (one machine, or a shared filesystem) and which stays as it is (open_to_split,
// run/lifecycle.h, says which grids are refused): its shape, dtype, fields, scheme, time step
// and history, then a "split" entry. Each rank reads its block only, as many planes at a time
// as `read_bytes` holds (at least one; `verify`: whole planes, one at a time, checked against
// SERIAL_DIR's checksums), into its part; parts and stores as create_distributed makes them.
Result<DistributedManifest> split_distributed(const std::string& serial_dir, const std::string& dir,
                                              const std::vector<std::string>& stores,
                                              const std::optional<ProcessGrid>& procs = {},
                                              bool verify = false,
                                              int64_t read_bytes = kFillBatchBytes);

// Replaces component `component` (a coefficient field, an initial state) of distributed grid
// DIR with the values of a .npy file of the grid's shape and dtype that every rank can read:
// each rank writes its block's into its part (the halos get them at the next run's exchange).
Status import_field_distributed(const std::string& npy_path, const std::string& dir, int component);

// A rank's share of a distributed run.
struct RankFigures {
  int rank = 0;
  std::string method;           // what its part ran with (in-core or stream)
  std::string io_backend;       // its stream engine's I/O ("uring" or "threads"); in-core: none
  int threads = 0;              // its engine's computing threads
  int engine_bt = 0;            // the engine's steps per pass over the part (last sweep)
  int64_t band_rows = 0;        // rows of its stream engine's bands (stream_bands.h); 0: none
  int64_t part_planes = 0;      // planes of its part: slab and halos
  double seconds = 0;           // the rank's whole run
  double compute_seconds = 0;   // in its engine's kernels
  double io_wait_seconds = 0;   // its engine blocked on the disk
  double exchange_seconds = 0;  // halo exchanges: reads, MPI transfers, writes
  double wait_seconds = 0;      // idle at the end of a phase while slower ranks finished
  // Of io_wait_seconds, its stream engine's waits for writes (RunReport's).
  double io_wait_for_writes_seconds = 0;
  uint64_t bytes_read = 0, bytes_written = 0, bytes_sent = 0;
  uint64_t engine_memory = 0;  // the most its engine allocated for one advance (its plan's)
  // The device method: the rank's device and its part's placement there (RunReport's), and
  // what went between host and device (held parts: from their load through their last commit).
  std::string device, device_placement;
  uint64_t device_memory = 0, device_bytes_copied = 0;
  double device_copy_seconds = 0;
  // The machine it ran on, and what the hypervisor took from that machine's `cpus` CPUs while
  // the rank ran (RunReport::stolen_cpu_seconds: machine-wide, so ranks that share a machine
  // see the same).
  std::string host;
  double stolen_cpu_seconds = 0;
  int cpus = 0;

  std::string to_json() const;
  static RankFigures from_json(const std::string& text);
};

// Sets total's stolen_cpu_seconds and cpus to the sums over the machines the ranks ran on,
// counting each machine once (its largest figure: its ranks' runs overlap).
void record_machines_steal(const std::vector<RankFigures>& per_rank, RunReport* total);

struct DistributedRunReport {
  RunReport total;  // global figures: steps, points, wall time; sums of the ranks' I/O
  int ranks = 0;
  int exchange_bt = 0;       // steps between two halo exchanges (k)
  std::string process_grid;  // "PXxPYxPZ"
  // Halo points each side along x, y, z: k * r_axis, and none along the axes not split.
  std::array<int64_t, 3> halo{};
  std::vector<RankFigures> per_rank;

  std::string to_json() const;
  std::string to_text() const;
};

// Ranks sharing a machine share its CPUs (options->threads, when neither it nor
// OMP_NUM_THREADS says how many: cpu_share()) and its disks, whose busy time then tells no
// rank's own rate (options->record_disk_rate off). With the device method and no device
// named, each rank takes one of the machine's devices: its rank on the machine modulo their
// number (options->device). run_distributed and plan_distributed do
// this themselves; a caller that measures the machine for them (threads) does it first.
// Collective.
void share_machine(RunOptions* options);

// Advances DIR by options.steps: every k steps (options.bt, or chosen so that the halos stay
// small against the blocks) the ranks exchange halos of k * r_axis points along each axis and
// advance their parts k steps with the ordinary engines (in-core when a part fits
// options.mem_budget, else stream). A grid split over another process grid than `procs` (when
// given; else when the job has another number of ranks than the grid, the one chosen) is split
// again first. Parts whose halos are too narrow for k (or reach past a non-periodic end) are
// rewritten with the halos needed first. Results are bitwise those of a serial run.
Result<DistributedRunReport> run_distributed(const std::string& dir, const RunOptions& options,
                                             const std::optional<ProcessGrid>& procs = {});

// What run_distributed would do with these options, planned by every rank for its part
// without changing anything: the process grid, the exchange depth and halos, and each part's
// engine for one round.
struct DistributedPlan {
  std::string grid;  // "256x256x512 f32"
  std::string stencil;
  int ranks = 0;
  std::string process_grid;
  int exchange_bt = 0;
  std::array<int64_t, 3> halo{};  // as DistributedRunReport::halo
  int64_t steps = 0;
  int64_t rounds = 0;
  // Every part held between rounds (held_between_rounds): loaded once, written at the end.
  bool parts_in_memory = false;
  struct Part {
    int rank = 0;
    std::string shape;  // the part: its block and its halos
    std::string plan;   // its engine's RunPlan::to_json() for a round of exchange_bt steps
    double predicted_seconds = 0;  // its engine over the whole run (a part in memory: one load)
  };
  std::vector<Part> per_rank;

  std::string to_json() const;
  std::string to_text() const;
};
Result<DistributedPlan> plan_distributed(const std::string& dir, const RunOptions& options,
                                         const std::optional<ProcessGrid>& procs = {});

// The run DIR/run.json records when its range holds the grid's step: a run under way, or one
// stopped part-way (rank 0 reads it, every rank gets it). Collective.
std::optional<RunRecord> recorded_run(const DistributedManifest& m);

// The manifest, read by rank 0 and shared.
Result<DistributedManifest> load_distributed(const std::string& dir);

// Every global plane in order on rank 0 (each rank reads its part and sends its slab there;
// with a different number of ranks than parts, rank 0 reads all parts itself). `consume` is
// called on rank 0 only. `held`: this rank's part when the caller holds it open (a run's, as
// many as ranks), read through it rather than opened again.
Status gather_planes(const DistributedManifest& m, bool verify, const io::PlaneConsumer& consume,
                     const Grid* held = nullptr);
// Rank 0's `work` reading the planes `gathered` (gather_planes) hands it, while the other ranks
// feed them; when `work` ends without reading them (it failed first), they are read and
// dropped, since the other ranks would otherwise wait for ever to send them. Every rank gets
// the outcome. Collective.
Status on_root_with_planes(const io::PlaneSource& gathered,
                           const std::function<Status(const io::PlaneSource&)>& work);

// describe_part of every part in rank order, on rank 0: each rank describes its own (or, with
// a different number of ranks than parts, rank 0 describes them all).
std::vector<std::string> describe_parts(const DistributedManifest& m);

}  // namespace deepgrid::mpi
