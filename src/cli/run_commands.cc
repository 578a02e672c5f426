// deepgrid run and plan: advancing a grid by N time steps, and how such a run would go. Both
// take the same options; a distributed grid, or a run under mpirun, goes to
// distributed_commands.h.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"
#include "cli/progress.h"
#include "deepgrid/machine.h"
#include "deepgrid/probes.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "plan/device_rates.h"
#include "plan/plan.h"
#include "store/distributed_manifest.h"

namespace deepgrid::cli {
namespace {

using nlohmann::json;

// --steps when the command line has none (a negative number given is refused as such).
constexpr int64_t kStepsNotGiven = std::numeric_limits<int64_t>::min();

struct RunArgs {
  std::string dir, stencil, coeffs, method = "auto", boundary = "dirichlet:0", mem, io = "uring",
                                    procs;
  std::string probes, traces, snapshots;
  SegyArgs segy;  // (its --spacing serves the snapshots too)
  int64_t steps = kStepsNotGiven, every = 0;
  VtkhdfArgs snapshot_format;  // (its fields: --fields; no --spacing of its own)
  int threads = 0;
  double checkpoint = -1;  // automatic
  BlockingArgs blocking;
  DeviceArgs device;
  bool json = false, remeasure = false, verify = false, resume = false, flush_subnormals = false;
};

// This machine's rates for the grid's disks and the run's stencil (cached after the first
// measurement, which stays within --mem), when the run may stream: they choose the stream's
// depth, unless --bt does. Otherwise only the tiles' working set tuned for this machine
// (likewise cached). A run left to choose between the in-core method and the stream
// (weighs_stream) takes the rates too.
bool needs_machine(const RunArgs& a, const RunOptions& opt) {
  const bool may_stream = opt.method == Method::kStream || opt.method == Method::kNaive ||
                          (opt.method == Method::kAuto && opt.mem_budget > 0);
  return a.remeasure || (may_stream && opt.bt == 0);
}

MachineProfile machine_for(const RunArgs& a, const Grid& g, const RunOptions& opt) {
  if (needs_machine(a, opt) || weighs_stream(g.manifest(), opt)) {
    return get(machine_profile(g, opt.scheme, opt.threads, a.remeasure, opt.mem_budget));
  }
  return get(
      machine_tuning(opt.scheme, g.dtype(), g.shape().nx, opt.threads, false, opt.mem_budget));
}

RunOptions run_options(const RunArgs& a) {
  RunOptions opt;
  if (!a.stencil.empty()) opt.scheme = get(Scheme::resolve(a.stencil));  // else the grid's own
  if (!a.coeffs.empty()) {
    if (a.stencil.empty()) {
      check(invalid_argument(
          "--coeffs changes the coefficients of the stencil --stencil names; give --stencil "
          "too (e.g. --stencil 7pt --coeffs " +
          a.coeffs + ")"));
    }
    if (!opt.scheme.is_stencil()) {
      check(
          invalid_argument("--coeffs changes a stencil's coefficients; a scheme's are written "
                           "in its JSON file"));
    }
    opt.scheme = get(opt.scheme.stencil().with_coefficients(a.coeffs));
  }
  opt.steps = a.steps == kStepsNotGiven ? -1 : a.steps;  // (negative: refused by check_run)
  opt.boundary = get(parse_boundary(a.boundary));
  opt.method = get(parse_method(a.method));
  if (a.threads < 0) check(invalid_argument("--threads must be >= 1 (or 0 for all cores)"));
  opt.threads = a.threads;
  a.blocking.apply(&opt.bt, &opt.tile_x, &opt.tile_y);
  opt.cache_bt = a.blocking.cache_bt;
  opt.band_rows = a.blocking.band_rows_value();
  if (!a.mem.empty()) opt.mem_budget = get(parse_size(a.mem));
  a.device.apply(&opt.device, &opt.device_mem, &opt.device_overlap);
  opt.io = get(io::parse_backend(a.io));
  opt.verify = a.verify;
  opt.flush_subnormals = a.flush_subnormals;
  opt.resume = a.resume;
  if (!a.probes.empty()) opt.probes = get(read_probes(a.probes));
  if (!a.traces.empty() && a.probes.empty()) {
    check(invalid_argument("--traces " + a.traces +
                           " has nothing to record: give --probes FILE with receivers (see "
                           "docs/schemes.md)"));
  }
  opt.traces_path = a.traces;
  const bool segy = !a.traces.empty() && get(traces_format(a.traces)) == TracesFormat::kSegy;
  if ((!a.segy.dt.empty() && !segy) || (!a.segy.spacing.empty() && !segy && a.snapshots.empty())) {
    check(invalid_argument(
        "--dt and --spacing describe SEG-Y traces (and --spacing snapshots): name them --traces "
        "OUT.sgy (or give --snapshots DIR), or leave --dt and --spacing out"));
  }
  opt.segy = a.segy.options();
  if (segy && !a.resume) check(check_segy(opt.segy, a.steps, opt.probes, "--dt"));
  opt.snapshots.dir = a.snapshots;
  opt.snapshots.every = a.every;
  if (a.snapshots.empty() && (a.snapshot_format.given() || !a.snapshot_format.fields.empty())) {
    check(
        invalid_argument("--fields, --origin and --downsample describe snapshots; give "
                         "--snapshots DIR --every K with them"));
  }
  opt.checkpoint_seconds = a.checkpoint;
  return opt;
}

// The VTKHDF form of the run's snapshots of a grid `m` describes (run's --spacing serves them
// and SEG-Y traces alike).
VtkhdfOptions snapshot_format(const RunArgs& a, const Manifest& m) {
  VtkhdfArgs format = a.snapshot_format;
  format.spacing = a.segy.spacing;
  return get(format.options(m));
}

// needs_machine for a distributed run's parts: --bt is the exchange depth there, and the
// parts' engines plan their own.
bool parts_need_machine(const RunArgs& a, RunOptions opt) {
  opt.bt = 0;
  return needs_machine(a, opt);
}

// Serially, a distributed grid runs (and plans) as a job of one rank: split over other ranks,
// its parts are first gathered into one, as under 'mpirun -n 1'.
void join_alone_if_distributed(const std::string& dir, const std::string& command) {
  if (in_mpi_job() || !is_distributed_grid(dir)) return;
  const int ranks = get(read_distributed_manifest(dir)).ranks();
  if (ranks > 1) {
    const std::string n = std::to_string(ranks);
    const std::string what = command == "run"
                                 ? "run serially, as one rank, its parts are gathered into one "
                                   "first ('mpirun -n " +
                                       n + " deepgrid run' keeps them)"
                                 : "planned as a serial run would go, as one rank ('mpirun -n " +
                                       n + " deepgrid plan' plans " + n + " ranks)";
    std::fprintf(stderr, "deepgrid: %s is distributed over %d ranks; %s\n", dir.c_str(), ranks,
                 what.c_str());
  }
  check(start_mpi_alone());
}

// The options a resumed run needs to go on recording the receivers, as given to this one.
std::string traces_args(const RunArgs& a) {
  if (a.traces.empty()) return "";
  std::string s = " --probes " + a.probes + " --traces " + a.traces;
  if (!a.segy.dt.empty()) s += " --dt " + a.segy.dt;
  if (!a.segy.spacing.empty()) s += " --spacing " + a.segy.spacing;
  return s;
}

int cmd_run(RunArgs a) {
  if (!a.resume && a.steps == kStepsNotGiven) {
    check(
        invalid_argument("give the number of steps with --steps N, or --resume to finish an "
                         "interrupted run"));
  }
  RunOptions opt = run_options(a);
  join_alone_if_distributed(a.dir, "run");
  if (in_mpi_job()) {
    if (!a.snapshots.empty()) {
      const Manifest whole = get(read_distributed_manifest(a.dir)).as_grid();
      opt.snapshots.format = snapshot_format(a, whole);
    }
    return get(mpi_run(a.dir, opt, a.procs, parts_need_machine(a, opt), a.remeasure, a.json));
  }
  check(refuse_procs_serially(a.procs));
  {  // checked and measured before anything runs; released for run_grid, which writes
    const Grid g = get(Grid::open(a.dir));
    RunOptions planned = opt;  // resuming: the unfinished run's scheme
    if (!a.resume) {
      check(check_run(g.manifest(), opt));
      opt.scheme = planned.scheme = get(scheme_for(g.manifest(), opt.scheme));
    } else if (const auto r = unfinished_run(g)) {
      planned.scheme = get(Scheme::from_grid_record(r->stencil));
    }
    if (planned.scheme.component_count() > 0) opt.machine = machine_for(a, g, planned);
    if (!a.snapshots.empty()) opt.snapshots.format = snapshot_format(a, g.manifest());
  }
  install_interrupt_handler();
  opt.progress = terminal_progress("run");
  RunReport r = get(run_grid(a.dir, opt));
  if (a.json) {
    std::printf("%s\n", r.to_json().c_str());
  } else {
    std::printf("%s", r.to_text().c_str());
  }
  if (r.step_to < r.step_target) {
    std::fprintf(stderr,
                 "stopped early: the grid holds time step %lld (consistent); finish the "
                 "remaining %lld steps with 'deepgrid run %s --resume%s'\n",
                 static_cast<long long>(r.step_to),
                 static_cast<long long>(r.step_target - r.step_to), a.dir.c_str(),
                 traces_args(a).c_str());
    return kExitStopped;
  }
  return 0;
}

int cmd_plan(const RunArgs& a) {
  RunOptions opt = run_options(a);
  join_alone_if_distributed(a.dir, "plan");
  if (in_mpi_job()) {
    check(mpi_plan(a.dir, opt, a.procs, parts_need_machine(a, opt), a.remeasure, a.json));
    return 0;
  }
  check(refuse_procs_serially(a.procs));
  Grid g = get(Grid::open(a.dir));
  check(check_run(g.manifest(), opt));
  opt.scheme = get(scheme_for(g.manifest(), opt.scheme));
  MachineProfile machine =
      get(machine_profile(g, opt.scheme, opt.threads, a.remeasure, opt.mem_budget));
  RunPlan plan = get(plan_run(g, opt, machine));
  if (plan.method == Method::kDevice) {  // the device's rates too, then the plan again
    const internal::DeviceRates rates =
        get(internal::device_rates(std::to_string(plan.device.device.index), opt.scheme, g.dtype(),
                                   plan.device.budget, a.remeasure));
    machine.device_mlups = rates.step_mlups;
    machine.device_copy_bps = rates.copy_bps;
    plan = get(plan_run(g, opt, machine));
  }
  if (a.json) {
    json j = json::parse(plan.to_json());
    j["machine"] = {{"cached", machine.cached},
                    {"compute_mlups", machine.compute_mlups},
                    {"incore_mlups", machine.incore_rate()},
                    {"disk_read_bytes_per_second", machine.disk_read_bps},
                    {"disk_reads_in_flight", machine.disk_reads_in_flight},
                    {"disk_sweep_bytes_per_second", machine.disk_sweep_bps},
                    {"disk_write_bytes_per_second", machine.disk_write_bps},
                    {"cache_bytes_per_thread", machine.cache_bytes},
                    {"io_cpu_seconds_per_byte", machine.io_cpu_seconds_per_byte}};
    if (plan.method == Method::kDevice) {
      j["machine"]["device_mlups"] = machine.device_mlups;
      j["machine"]["device_copy_bytes_per_second"] = machine.device_copy_bps;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", plan.to_text(g.manifest(), opt).c_str());
    char io_cost[128] = "";
    if (machine.io_cpu_seconds_per_byte > 0) {
      std::snprintf(io_cost, sizeof io_cost,
                    ", which take %.2f CPU-s per GiB from computing threads (the hypervisor's)",
                    machine.io_cpu_seconds_per_byte * (1 << 30));
    }
    char sweeps[96] = "";
    if (machine.disk_sweep_bps > 0) {
      std::snprintf(sweeps, sizeof sweeps, ", %.0f MB/s of reads and writes in earlier sweeps",
                    machine.disk_sweep_bps / 1e6);
    }
    char load_store[80] = "";
    if (machine.incore_load_store_seconds_per_byte > 0) {
      std::snprintf(load_store, sizeof load_store,
                    "; in-core load and store %.1f s per GiB in an earlier run",
                    machine.incore_load_store_seconds_per_byte * (1 << 30));
    }
    char compute[192] =
        "in-core rate not measured (--mem leaves too little for a meaningful "
        "sample): the planner used its default balance of disk and compute, "
        "and predicts no time";
    if (machine.incore_mlups > 0) {
      const std::string how = machine.tuned_bt > 1 ? "at bt " + std::to_string(machine.tuned_bt) +
                                                         ", the depth tuned for this machine"
                                                   : "its time levels taking turns";
      std::snprintf(compute, sizeof compute,
                    "in-core %.0f MLUP/s on a sample of this stencil (%s), %.0f as the stream's "
                    "stages run it",
                    machine.incore_mlups, how.c_str(), machine.compute_mlups);
    } else if (machine.compute_mlups > 0) {
      std::snprintf(compute, sizeof compute, "in-core %.0f MLUP/s on a sample of this stencil",
                    machine.compute_mlups);
    }
    std::printf(
        "machine     %s; disk %.0f MB/s "
        "(O_DIRECT reads of this grid, %d in flight)%s%s%s; tiles sized for %s per thread; %s\n",
        compute, machine.disk_read_bps / 1e6, machine.disk_reads_in_flight, sweeps, io_cost,
        load_store,
        machine.cache_bytes > 0 ? format_size(static_cast<uint64_t>(machine.cache_bytes)).c_str()
                                : "the default working set",
        machine.cached ? ("cached in " + machine_cache_path() + ", --remeasure to refresh").c_str()
                       : "measured now");
    if (plan.method == Method::kDevice) {
      std::printf("device      %s\n",
                  machine.device_mlups > 0
                      ? ("steps at " + std::to_string(std::lround(machine.device_mlups)) +
                         " MLUP/s, copies at " +
                         std::to_string(std::lround(machine.device_copy_bps / 1e6)) +
                         " MB/s (a sample of this stencil on the device)")
                            .c_str()
                      : "not measured (--device-mem leaves too little for a sample): the "
                        "prediction counts the disk alone");
    }
  }
  return 0;
}

std::string presets_help() {
  std::string s;
  for (const auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "Advance a grid by N time steps");
  run->add_option("DIR", a->dir, "Grid directory")->required();
  run->add_option("--stencil,--scheme,--kernel", a->stencil,
                  "Stencil preset (" + presets_help() + "), scheme preset (" + schemes_help() +
                      "), a JSON file (a stencil {\"points\": [[dx, dy, dz, c], ...]} or a "
                      "scheme, docs/schemes.md) or a user's kernel library LIB.so "
                      "(docs/kernels.md); default: the grid's own scheme");
  run->add_option("--coeffs", a->coeffs,
                  "Override coefficients: one per point in (dz, dy, dx) order, or one per "
                  "distance shell, centre first (7pt: --coeffs 0.4,0.1)");
  run->add_option("--steps", a->steps, "Number of time steps (>= 0)");
  run->add_flag("--resume", a->resume,
                "Finish the grid's interrupted or stopped run (its stencil, boundary and target "
                "step); the same command as that run's does the same");
  run->add_option("--method", a->method,
                  "auto: in-core when the grid fits --mem, else stream | incore: load, advance in "
                  "memory, write back | stream: out-of-core, temporal blocking, async direct I/O | "
                  "naive: stream with bt 1 | mmap: in-core engine on memory-mapped scratch files, "
                  "paged by the OS | tiled: 3D blocks with halos, two copies on disk (seed paper "
                  "001) | device: on an accelerator through OpenCL (--device)")
      ->capture_default_str();
  run->add_option("--io", a->io,
                  "Stream I/O backend: uring (io_uring) | threads (pread/pwrite pool)")
      ->capture_default_str();
  run->add_option("--boundary", a->boundary, "dirichlet:V | neumann | periodic")
      ->capture_default_str();
  run->add_option("--threads", a->threads, "Compute threads (0: all cores)")->capture_default_str();
  run->add_option("--mem", a->mem,
                  "Memory budget, e.g. 2GiB: a hard cap on what the engine allocates (default: no "
                  "limit; the stream methods need one)");
  a->blocking.add_to(run);
  a->device.add_to(run);
  run->add_flag("--remeasure", a->remeasure,
                "Measure this machine's compute rate and disk bandwidth again instead of using "
                "the cached figures the stream methods plan with");
  run->add_option("--procs", a->procs,
                  "Under mpirun: the process grid PXxPYxPZ to run with; a grid split otherwise is "
                  "split again first (default: the grid's own, or chosen for another number of "
                  "ranks)");
  run->add_option("--checkpoint", a->checkpoint,
                  "Under mpirun, with every rank's part in memory: commit the parts (a point the "
                  "run can resume from after a crash) at the end of the first round this many "
                  "seconds after the last commit; 0: every round (default: when the time since "
                  "is at least a minute and 10 times what the last commit took, a tenth of the "
                  "run at most)")
      ->check(CLI::Validator(
          [](const std::string& v) {
            return std::strtod(v.c_str(), nullptr) < 0 ? std::string("give seconds >= 0") : "";
          },
          "SECONDS"));
  run->add_flag("--json", a->json, "Print the report as one JSON object on stdout");
  run->add_flag("--verify", a->verify,
                "Check every plane read against its checksum; refuse damaged data");
  run->add_flag("--flush-subnormals", a->flush_subnormals,
                "Compute with subnormal numbers (below 1.2e-38 in f32, 2.2e-308 in f64) taken "
                "as zero: x86 computes them far slower, so a field decaying into zero (e.g. a "
                "diffusing Gaussian) can run several times faster (3.7-5x measured, "
                "docs/performance/stream.md). Every method gives the same bits; "
                "without it the arithmetic is IEEE's. A resumed run keeps its run's choice");
  run->add_option("--probes", a->probes,
                  "JSON file of point sources (a Ricker wavelet or a series added at a point) and "
                  "receivers (points recorded every step); see docs/schemes.md");
  run->add_option("--traces", a->traces,
                  "Where the receivers' values go: a .npy of float64, one row per step, one "
                  "column per receiver (saved after every pass: the steps it recorded); or "
                  "OUT.sgy / OUT.segy, SEG-Y rev 1 written when the run finishes from OUT.sgy.npy, "
                  "recorded beside it as a .npy is (needs --dt)");
  run->add_option("--snapshots", a->snapshots,
                  "Directory for snapshots of the grid taken during the run (made if missing): a "
                  "VTKHDF file per snapshot and series.vtkhdf, which ParaView opens as one "
                  "animation (docs/visualisation.md)");
  run->add_option("--every", a->every,
                  "With --snapshots: take one at every K-th step (steps counted from the grid's "
                  "creation: --every 10 takes steps 10, 20, ...)");
  a->snapshot_format.add_to(run, "--fields",
                            "With --snapshots: the fields they hold, comma-separated (default: "
                            "every field)",
                            /*spacing=*/false);
  a->segy.add_to(run);
  return {run, [a] { return cmd_run(*a); }};
}

Command add_plan_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* plan = app.add_subcommand(
      "plan",
      "Show how a run would go: method, bt, buffers, memory and predicted time (under "
      "mpirun, or for a distributed grid: the process grid, the halo exchanges and each "
      "rank's part)");
  plan->add_option("DIR", a->dir, "Grid directory")->required();
  plan->add_option("--stencil,--scheme,--kernel", a->stencil,
                   "Preset or JSON file, as for run (default: the grid's own scheme)");
  plan->add_option("--coeffs", a->coeffs, "Coefficient override, as for run");
  plan->add_option("--steps", a->steps, "Number of time steps")->required();
  plan->add_option("--method", a->method, "auto | incore | stream | naive | mmap | tiled | device")
      ->capture_default_str();
  plan->add_option("--boundary", a->boundary, "dirichlet:V | neumann | periodic")
      ->capture_default_str();
  plan->add_option("--threads", a->threads, "Compute threads (0: all cores)");
  plan->add_option("--mem", a->mem, "Memory budget, e.g. 2GiB");
  plan->add_option("--io", a->io, "uring | threads")->capture_default_str();
  a->blocking.add_to(plan);
  a->device.add_to(plan);
  plan->add_flag("--remeasure", a->remeasure,
                 "Measure this machine's rates again (they are cached after the first time)");
  plan->add_option("--procs", a->procs,
                   "Under mpirun: the process grid PXxPYxPZ the run would use (as for run)");
  plan->add_flag("--json", a->json, "Print the plan as one JSON object");
  return {plan, [a] { return cmd_plan(*a); }};
}

}  // namespace deepgrid::cli
