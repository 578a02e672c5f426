// The deepgrid command line: a thin front end over the library. Errors become one line on
// stderr and exit code 2 (bad input), 1 (a failure while working) or 3 (the grid is in use by
// another process); fsck exits 4 when it finds damage.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/distributed_commands.h"
#include "cli/grid_fields.h"
#include "cli/progress.h"
#include "deepgrid/checksum.h"
#include "deepgrid/fsck.h"
#include "deepgrid/image.h"
#include "deepgrid/npy.h"
#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "plan/incore_bench.h"
#include "plan/plan.h"
#include "run/methods_bench.h"
#include "store/distributed_manifest.h"
#include "viz/line_plot.h"

namespace deepgrid::cli {
namespace {

using nlohmann::json;

// A library error on its way out of the CLI.
struct Failure {
  Status status;
};

template <typename T>
T get(Result<T> r) {
  if (!r.ok()) throw Failure{r.status()};
  return std::move(r).value();
}
void check(const Status& s) {
  if (!s.ok()) throw Failure{s};
}

constexpr int kExitBusy = 3;
constexpr int kExitDamaged = 4;

int exit_code_for(ErrorCode code) {
  if (code == ErrorCode::kBusy) return kExitBusy;
  return code == ErrorCode::kIo || code == ErrorCode::kResource ? 1 : 2;
}

// Opens a grid to read, checking every plane read against its checksum when asked to.
// A grid whose in-place sweep was interrupted mixes two time steps: its values mean nothing
// until the sweep is finished.
Grid open_to_read(const std::string& dir, bool verify) {
  Grid g = get(Grid::open(dir));
  if (!g.interrupted_sweep().empty()) {
    check(invalid_argument("grid " + dir + " was interrupted in an in-place " +
                           g.interrupted_sweep() +
                           " and its planes mix two time steps; finish it with 'deepgrid run " +
                           dir + " --resume --mem SIZE'"));
  }
  if (verify) check(g.enable_verification());
  return g;
}

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Whether the data hold the manifest's step, and what is left to finish.
std::string grid_state(const Grid& g) {
  const std::optional<RunRecord> run = unfinished_run(g);
  const std::string finish = "; finish it with 'deepgrid run " + g.dir() + " --resume'";
  if (!g.interrupted_sweep().empty()) {
    if (!g.sweep_record()) return "DAMAGED: " + g.interrupted_sweep() + "; restore from a backup";
    return "INTERRUPTED in an in-place " + g.interrupted_sweep() +
           " (planes mix two time steps until it is finished)" + finish;
  }
  if (run) {
    return "consistent at this step; an unfinished run to step " + std::to_string(run->step_to) +
           " stopped here" + finish;
  }
  return "consistent (the data hold this time step)";
}

json manifest_json(const Grid& g) {
  json j = json::parse(g.manifest().to_json());
  j["directory"] = g.dir();
  j["direct_io"] = g.direct_io();
  j["bytes_on_disk"] = 0;
  int64_t total = 0;
  for (const auto& f : g.manifest().layout.files) total += f.bytes;
  j["bytes_on_disk"] = total;
  j["interrupted_sweep"] = g.interrupted_sweep();  // empty: the data hold the step shown
  j["state"] = grid_state(g);
  return j;
}

int field_index(const Manifest& m, const std::string& field) {
  return get(field_component(m, field));
}

void print_info(const Grid& g) {
  const Manifest& m = g.manifest();
  int64_t total = 0;
  for (const auto& f : m.layout.files) total += f.bytes;
  std::printf("grid        %s\n", g.dir().c_str());
  std::printf("shape       %s (numpy shape (%lld, %lld, %lld)), %s\n", m.shape.to_string().c_str(),
              static_cast<long long>(m.shape.nz), static_cast<long long>(m.shape.ny),
              static_cast<long long>(m.shape.nx), std::string(dtype_name(m.dtype)).c_str());
  std::printf(
      "values      %lld (%s)\n", static_cast<long long>(m.shape.points() * m.components()),
      format_size(static_cast<uint64_t>(m.shape.points() * m.components()) * dtype_size(m.dtype))
          .c_str());
  if (!m.fields.empty()) std::printf("fields      %s\n", fields_text(m).substr(9).c_str());
  std::printf("time step   %lld\n", static_cast<long long>(m.step));
  std::printf("state       %s\n", grid_state(g).c_str());
  std::printf(
      "layout      planes of %s padded to %s, %lld spare slots, %lld slots per chunk, %zu "
      "file%s, %s on disk\n",
      format_size(static_cast<uint64_t>(m.layout.plane_bytes)).c_str(),
      format_size(static_cast<uint64_t>(m.layout.plane_stride)).c_str(),
      static_cast<long long>(m.layout.spare_planes),
      static_cast<long long>(m.layout.planes_per_chunk), m.layout.files.size(),
      m.layout.files.size() == 1 ? "" : "s", format_size(static_cast<uint64_t>(total)).c_str());
  for (int f = 0; f < static_cast<int>(m.layout.files.size()); ++f) {
    std::printf("  file %d    %s\n", f, g.file_path(f).c_str());
  }
  std::printf("direct I/O  %s\n",
              g.direct_io() ? "yes (O_DIRECT)" : "no (filesystem refuses O_DIRECT)");
  std::printf("history\n");
  for (const auto& h : m.history) {
    std::printf("  %s  %-7s %s\n", h.date.c_str(), h.command.c_str(), h.details.c_str());
  }
}

struct CreateArgs {
  std::string dir, shape, dtype = "f32", init = "zero", stores, scheme, procs;
  int64_t spare_planes = -1;
  bool json = false;
};

int cmd_create(const CreateArgs& a) {
  CreateOptions opt;
  opt.shape = get(parse_shape(a.shape));
  opt.dtype = get(parse_dtype(a.dtype));
  opt.init = get(parse_init(a.init));
  if (!a.scheme.empty()) {  // a grid of the scheme's fields; it runs without --stencil
    check(create_for_scheme(get(Scheme::resolve(a.scheme)), opt));
  }
  opt.stores = split_csv(a.stores);
  if (a.spare_planes < -1) check(invalid_argument("--spare-planes must be >= 0"));
  opt.spare_planes = a.spare_planes;
  if (in_mpi_job()) {  // a distributed grid over the job's ranks
    check(mpi_create(a.dir, opt, a.procs, a.json));
    return 0;
  }
  check(refuse_procs_serially(a.procs));
  Grid g = get(Grid::create(a.dir, opt));
  if (a.json) {
    std::printf("%s\n", manifest_json(g).dump().c_str());
  } else {
    std::printf("created %s: %s %s%s, init %s, %zu file%s%s\n", a.dir.c_str(),
                opt.shape.to_string().c_str(), std::string(dtype_name(opt.dtype)).c_str(),
                fields_text(g.manifest()).c_str(), opt.init.to_string().c_str(),
                g.manifest().layout.files.size(), g.manifest().layout.files.size() == 1 ? "" : "s",
                g.direct_io() ? "" : " (no O_DIRECT on this filesystem: buffered I/O)");
  }
  return 0;
}

// --bt, --cache-bt and --tile, shared by run, plan and bench.
struct BlockingArgs {
  int bt = 0, cache_bt = 0;
  std::string tile;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--bt", bt,
                    "Time steps per pass over memory (temporal blocking depth); 0: automatic")
        ->capture_default_str();
    cmd->add_option("--cache-bt", cache_bt,
                    "Stream methods: steps per pass over the cache within one pass over the disk "
                    "(two-level blocking); 0: automatic")
        ->capture_default_str();
    cmd->add_option("--tile", tile,
                    "x-y tile of the wavefront, NXxNY; for --method tiled the blocks' extents "
                    "along y and z, NYxNZ (default: automatic)");
  }
  void apply(int* bt_out, int64_t* tile_x, int64_t* tile_y) const {
    if (bt < 0) check(invalid_argument("--bt must be >= 1 (or 0 for automatic)"));
    if (cache_bt < 0) check(invalid_argument("--cache-bt must be >= 1 (or 0 for automatic)"));
    *bt_out = bt;
    if (tile.empty()) return;
    const Result<Shape> t = parse_shape(tile);
    if (!t.ok() || t->nz != 1) {
      check(invalid_argument("--tile '" + tile +
                             "' is not two positive extents NXxNY; write it as e.g. 256x32"));
    }
    *tile_x = t->nx;
    *tile_y = t->ny;
  }
};

struct RunArgs {
  std::string dir, stencil, coeffs, method = "auto", boundary = "dirichlet:0", mem, io = "uring",
                                    procs;
  std::string probes, traces;
  int64_t steps = -1;
  int threads = 0;
  double checkpoint = -1;  // automatic
  BlockingArgs blocking;
  bool json = false, remeasure = false, verify = false, resume = false, flush_subnormals = false;
};

// This machine's rates for the grid's disks and the run's stencil (cached after the first
// measurement, which stays within --mem), when the run may stream: they choose the stream's
// depth, unless --bt does. Otherwise only the tiles' working set tuned for this machine
// (likewise cached).
bool needs_machine(const RunArgs& a, const RunOptions& opt) {
  const bool may_stream = opt.method == Method::kStream || opt.method == Method::kNaive ||
                          (opt.method == Method::kAuto && opt.mem_budget > 0);
  return a.remeasure || (may_stream && opt.bt == 0);
}
MachineProfile machine_for(const RunArgs& a, const Grid& g, const RunOptions& opt) {
  if (needs_machine(a, opt)) {
    return get(machine_profile(g, opt.scheme, opt.threads, a.remeasure, opt.mem_budget));
  }
  MachineProfile tuning;
  tuning.cache_bytes = get(tuned_cache_bytes(opt.threads, false, opt.mem_budget));
  return tuning;
}

RunOptions run_options(const RunArgs& a) {
  RunOptions opt;
  if (!a.stencil.empty()) opt.scheme = get(Scheme::resolve(a.stencil));  // else the grid's own
  if (!a.coeffs.empty()) {
    if (!opt.scheme.is_stencil()) {
      check(
          invalid_argument("--coeffs changes a stencil's coefficients; a scheme's are written "
                           "in its JSON file"));
    }
    opt.scheme = get(opt.scheme.stencil().with_coefficients(a.coeffs));
  }
  opt.steps = a.steps;
  opt.boundary = get(parse_boundary(a.boundary));
  opt.method = get(parse_method(a.method));
  if (a.threads < 0) check(invalid_argument("--threads must be >= 1 (or 0 for all cores)"));
  opt.threads = a.threads;
  a.blocking.apply(&opt.bt, &opt.tile_x, &opt.tile_y);
  opt.cache_bt = a.blocking.cache_bt;
  if (!a.mem.empty()) opt.mem_budget = get(parse_size(a.mem));
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
  opt.checkpoint_seconds = a.checkpoint;
  return opt;
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

int cmd_run(RunArgs a) {
  if (!a.resume && a.steps < 0) {
    check(
        invalid_argument("give the number of steps with --steps N, or --resume to finish an "
                         "interrupted run"));
  }
  RunOptions opt = run_options(a);
  join_alone_if_distributed(a.dir, "run");
  if (in_mpi_job()) {
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
      planned.scheme = get(Scheme::from_record(r->stencil));
    }
    if (planned.scheme.component_count() > 0) opt.machine = machine_for(a, g, planned);
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
                 "remaining %lld steps with 'deepgrid run %s --resume'\n",
                 static_cast<long long>(r.step_to),
                 static_cast<long long>(r.step_target - r.step_to), a.dir.c_str());
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
  const MachineProfile machine =
      get(machine_profile(g, opt.scheme, opt.threads, a.remeasure, opt.mem_budget));
  const RunPlan plan = get(plan_run(g, opt, machine));
  if (a.json) {
    json j = json::parse(plan.to_json());
    j["machine"] = {{"cached", machine.cached},
                    {"compute_mlups", machine.compute_mlups},
                    {"disk_read_bytes_per_second", machine.disk_read_bps},
                    {"disk_sweep_bytes_per_second", machine.disk_sweep_bps},
                    {"disk_write_bytes_per_second", machine.disk_write_bps},
                    {"cache_bytes_per_thread", machine.cache_bytes},
                    {"io_cpu_seconds_per_byte", machine.io_cpu_seconds_per_byte}};
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
    std::printf(
        "machine     in-core %.0f MLUP/s on a sample of this stencil; disk %.0f MB/s "
        "(O_DIRECT reads of this grid, 8 in flight)%s%s; tiles sized for %s per thread; %s\n",
        machine.compute_mlups, machine.disk_read_bps / 1e6, sweeps, io_cost,
        machine.cache_bytes > 0 ? format_size(static_cast<uint64_t>(machine.cache_bytes)).c_str()
                                : "the default working set",
        machine.cached ? ("cached in " + machine_cache_path() + ", --remeasure to refresh").c_str()
                       : "measured now");
  }
  return 0;
}

int cmd_info(const std::string& dir, bool as_json) {
  if (in_mpi_job() || is_distributed_grid(dir)) {
    check(distributed_info(dir, as_json));
    return 0;
  }
  Grid g = get(Grid::open(dir));
  if (as_json)
    std::printf("%s\n", manifest_json(g).dump().c_str());
  else
    print_info(g);
  return 0;
}

int cmd_checksum(const std::string& dir, bool as_json, bool verify, const std::string& field) {
  GridSummary s;
  int64_t step = 0;
  if (in_mpi_job() || is_distributed_grid(dir)) {
    s = get(distributed_summary(dir, verify, field, &step));
    if (!prints()) return 0;
  } else {
    Grid g = open_to_read(dir, verify);
    s = get(summarize(g, field.empty() ? -1 : field_index(g.manifest(), field)));
    step = g.manifest().step;
  }
  if (as_json) {
    json j = {{"sha256", s.sha256}, {"min", s.min}, {"max", s.max},
              {"mean", s.mean},     {"l2", s.l2},   {"nan_count", s.nan_count},
              {"step", step}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("sha256  %s\nmin     %.17g\nmax     %.17g\nmean    %.17g\nl2      %.17g\n",
                s.sha256.c_str(), s.min, s.max, s.mean, s.l2);
    if (s.nan_count > 0) std::printf("nan     %lld\n", static_cast<long long>(s.nan_count));
  }
  return 0;
}

int cmd_fsck(const std::string& dir, bool as_json) {
  check(refuse_distributed(dir, "fsck"));
  const Grid g = get(Grid::open(dir));
  const FsckReport r = get(fsck_grid(g));
  if (as_json) {
    json damaged = json::array();
    for (const DamagedPlane& d : r.damaged) {
      damaged.push_back({{"plane", d.z}, {"file", d.file}, {"offset", d.offset}});
    }
    std::printf("%s\n", json{{"damage_found", r.damage_found()},
                             {"has_checksums", r.has_checksums},
                             {"problem", r.problem},
                             {"interrupted_sweep", r.interrupted_sweep},
                             {"resumable", r.resumable},
                             {"planes_checked", r.planes_checked},
                             {"damaged", damaged}}
                            .dump()
                            .c_str());
  } else {
    if (!r.interrupted_sweep.empty() && r.resumable) {
      std::printf(
          "interrupted: a crash cut short an in-place %s; the old planes it needs were checked "
          "below; finish it with 'deepgrid run %s --resume --mem SIZE'\n",
          r.interrupted_sweep.c_str(), dir.c_str());
    } else if (!r.interrupted_sweep.empty()) {
      std::printf("damaged: a crash interrupted an in-place %s; its planes mix two time steps\n",
                  r.interrupted_sweep.c_str());
    }
    for (const DamagedPlane& d : r.damaged) {
      std::printf("damaged: plane %lld in %s at offset %lld does not match its checksum\n",
                  static_cast<long long>(d.z), d.file.c_str(), static_cast<long long>(d.offset));
    }
    if (!r.problem.empty()) {
      std::printf("damaged: %s; planes not checked\n", r.problem.c_str());
    } else if (!r.has_checksums) {
      std::printf(
          "%s: structure ok; planes not checked: no checksums (written before format "
          "version 2), the next run records them\n",
          dir.c_str());
    } else {
      std::printf("%s: %lld planes checked, %zu damaged%s\n", dir.c_str(),
                  static_cast<long long>(r.planes_checked), r.damaged.size(),
                  r.damaged.empty() ? "" : "; restore the grid from a backup");
    }
  }
  return r.damage_found() ? kExitDamaged : 0;
}

int cmd_plot(const std::string& dir, const std::string& slice, const std::string& out,
             const std::string& field) {
  SliceSpec spec = get(parse_slice(slice));
  SliceImageInfo info;
  if (in_mpi_job() || is_distributed_grid(dir)) {
    info = get(distributed_plot(dir, spec, out, field));
    if (!prints()) return 0;
  } else {
    Grid g = get(Grid::open(dir));
    spec.component = field_index(g.manifest(), field);
    info = get(write_slice_png(g, spec, out));
  }
  std::printf("wrote %s: slice %s, %lldx%lld pixels, colours from %.6g (dark) to %.6g (bright)\n",
              out.c_str(), slice.c_str(), static_cast<long long>(info.width),
              static_cast<long long>(info.height), info.min, info.max);
  return 0;
}

struct BenchArgs {
  std::string shape = "256x256x256", stencil = "7pt", dtype = "f32", boundary = "dirichlet:0";
  std::string methods, dir = "scratch/bench", csv, sweep_bt, sweep_ratio, plot;
  double mem_ratio = 16;
  int64_t steps = 10;
  int threads = 0, repeats = 3;
  BlockingArgs blocking;
  bool json = false, no_bandwidth = false;
};

std::vector<double> parse_numbers(const std::string& csv, const char* option) {
  std::vector<double> out;
  for (const std::string& item : split_csv(csv)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end != item.c_str() + item.size() || !(v >= 0)) {
      check(invalid_argument(std::string(option) + " takes numbers like 1,2,4,8; got '" + item +
                             "'"));
    }
    out.push_back(v);
  }
  return out;
}

// The sweep as a line plot: MLUP/s against bt (or the memory ratio), one line per method.
void plot_sweep(const BenchArgs& a, const MethodsBenchOptions& o,
                const std::vector<MethodsBenchRow>& rows) {
  const bool by_bt = !a.sweep_bt.empty();
  LinePlot plot;
  char ratio[64];
  std::snprintf(ratio, sizeof ratio, ", --mem = grid / %g", o.mem_ratio);
  plot.title = o.scheme.name() + " " + o.shape.to_string() + " " +
               std::string(dtype_name(o.dtype)) + ", " + std::to_string(o.steps) + " steps" +
               (by_bt ? ratio : "");
  plot.x_label = by_bt ? "bt (time steps per pass)" : "memory ratio (grid / --mem)";
  plot.y_label = "MLUP/s (whole run)";
  plot.log2_x = true;
  for (const MethodsBenchRow& r : rows) {
    if (!r.skipped.empty() || (!by_bt && r.mem_ratio <= 0)) continue;
    auto it = std::find_if(plot.series.begin(), plot.series.end(),
                           [&](const PlotSeries& s) { return s.name == r.method; });
    if (it == plot.series.end()) it = plot.series.insert(plot.series.end(), {r.method, {}});
    it->points.push_back({by_bt ? std::max(1, r.bt) : r.mem_ratio, r.report.mlups()});
  }
  check(write_line_plot_png(plot, a.plot));
}

// deepgrid bench --methods ...: one problem through several methods, as a table.
int cmd_bench_methods(const BenchArgs& a) {
  MethodsBenchOptions o;
  o.dir = a.dir;
  o.shape = get(parse_shape(a.shape));
  o.dtype = get(parse_dtype(a.dtype));
  o.scheme = get(Scheme::resolve(a.stencil));
  o.boundary = get(parse_boundary(a.boundary));
  o.steps = a.steps;
  if (o.steps < 1) check(invalid_argument("--steps must be >= 1"));
  if (!(a.mem_ratio > 0)) check(invalid_argument("--mem-ratio must be > 0, e.g. 16"));
  o.mem_ratio = a.mem_ratio;
  o.threads = a.threads;
  o.methods = split_csv(a.methods);
  int bt = 0;
  a.blocking.apply(&bt, &o.tile_x, &o.tile_y);
  o.cache_bt = a.blocking.cache_bt;
  if (bt > 0) o.bts = {bt};
  if (!a.sweep_bt.empty()) {
    o.bts.clear();
    for (double v : parse_numbers(a.sweep_bt, "--sweep-bt")) o.bts.push_back(static_cast<int>(v));
  }
  if (!a.sweep_ratio.empty()) o.ratios = parse_numbers(a.sweep_ratio, "--sweep-ratio");
  if (!a.plot.empty() && a.sweep_bt.empty() && a.sweep_ratio.empty()) {
    check(invalid_argument("--plot draws a sweep; add --sweep-bt or --sweep-ratio"));
  }
  const MethodsBench bench = get(bench_methods(o));
  const std::vector<MethodsBenchRow>& rows = bench.rows;
  json all = json::array();
  std::string csv =
      "method,bt,mem_ratio,mem_budget_bytes,seconds,mlups,gflops,ratio_to_incore,"
      "ratio_to_incore_compute,ratio_to_incore_warm,bytes_read,bytes_written,compute_busy,io_wait,"
      "disk_busy,peak_memory_bytes,stolen_cpu_share\n";
  if (!a.json) {
    std::printf("%s %s %s %s, %lld steps, %d threads; out-of-core budget = grid / ratio\n",
                o.scheme.name().c_str(), o.shape.to_string().c_str(),
                std::string(dtype_name(o.dtype)).c_str(), o.boundary.to_string().c_str(),
                static_cast<long long>(o.steps), rows.empty() ? 0 : rows.front().report.threads);
    std::printf("%-7s %4s %6s %9s %8s %9s %7s %8s %9s %7s %9s %7s %7s %9s %10s %7s\n", "method",
                "bt", "ratio", "mem", "time s", "MLUP/s", "GFlop/s", "/incore", "/incore*", "/warm",
                "read", "compute", "io wait", "disk busy", "peak mem", "stolen");
  }
  for (const MethodsBenchRow& r : rows) {
    if (!r.skipped.empty()) {
      if (!a.json) {
        std::printf("%-7s %4d %5.0fx  skipped: %s\n", r.method.c_str(), r.bt, r.mem_ratio,
                    r.skipped.c_str());
      }
      all.push_back(
          {{"method", r.method}, {"bt", r.bt}, {"mem_ratio", r.mem_ratio}, {"skipped", r.skipped}});
      continue;
    }
    const RunReport& p = r.report;
    const double compute_busy = p.seconds > 0 ? p.compute_seconds / p.seconds : 0;
    const double io_wait = p.seconds > 0 ? p.io_wait_seconds / p.seconds : 0;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s,%d,%g,%llu,%.4f,%.1f,%.3f,%.4f,%.4f,%.4f,%llu,%llu,%.4f,%.4f,%s,%llu,%.4f\n",
                  r.method.c_str(), r.bt, r.mem_ratio,
                  static_cast<unsigned long long>(r.mem_budget), p.seconds, p.mlups(), p.gflops(),
                  r.ratio_to_incore, r.compute_ratio_to_incore, r.ratio_to_incore_warm,
                  static_cast<unsigned long long>(p.bytes_read),
                  static_cast<unsigned long long>(p.bytes_written), compute_busy, io_wait,
                  r.disk_busy >= 0 ? std::to_string(r.disk_busy).c_str() : "",
                  static_cast<unsigned long long>(p.peak_memory), p.stolen_share());
    csv += line;
    json j = json::parse(p.to_json());
    j["mem_ratio"] = r.mem_ratio;
    j["mem_budget_bytes"] = r.mem_budget;
    j["ratio_to_incore"] = r.ratio_to_incore;
    j["ratio_to_incore_compute"] = r.compute_ratio_to_incore;
    j["ratio_to_incore_warm"] = r.ratio_to_incore_warm;
    if (r.disk_busy >= 0) j["disk_busy"] = r.disk_busy;
    all.push_back(j);
    if (!a.json) {
      std::printf(
          "%-7s %4d %6s %9s %8.3f %9.1f %7.2f %8.3f %9.3f %7.3f %9s %6.0f%% %6.0f%% %9s %10s "
          "%6.0f%%\n",
          r.method.c_str(), r.bt,
          r.mem_ratio > 0 ? (std::to_string(static_cast<int>(r.mem_ratio)) + "x").c_str() : "-",
          r.mem_budget ? format_size(r.mem_budget).c_str() : "-", p.seconds, p.mlups(), p.gflops(),
          r.ratio_to_incore, r.compute_ratio_to_incore, r.ratio_to_incore_warm,
          format_size(p.bytes_read).c_str(), 100 * compute_busy, 100 * io_wait,
          r.disk_busy >= 0 ? (std::to_string(std::lround(100 * r.disk_busy)) + "%").c_str() : "-",
          format_size(p.peak_memory).c_str(), 100 * p.stolen_share());
    }
  }
  if (!a.json) {
    std::printf(
        "/incore: whole-run MLUP/s over in-core's whole run (load, compute, store); "
        "/incore*: over in-core's compute phase alone;\n/warm: over the in-core engine's warm "
        "in-memory rate on this shape in this run (%.1f MLUP/s), the strictest yardstick;\nstolen: "
        "the machine's CPU time the hypervisor took during the run (virtual machines)\n",
        bench.incore_warm_mlups);
  }
  if (!a.csv.empty()) {
    std::ofstream out(a.csv);
    out << csv;
    if (!out) check(Status(ErrorCode::kIo, "cannot write " + a.csv));
  }
  if (!a.plot.empty()) plot_sweep(a, o, rows);
  if (a.json) std::printf("%s\n", all.dump().c_str());
  return 0;
}

int cmd_bench(const BenchArgs& a) {
  if (!a.methods.empty()) return cmd_bench_methods(a);
  const Shape shape = get(parse_shape(a.shape));
  const Scheme stencil = get(Scheme::resolve(a.stencil));
  const DType dtype = get(parse_dtype(a.dtype));
  const Boundary boundary = get(parse_boundary(a.boundary));
  if (a.steps < 1) check(invalid_argument("--steps must be >= 1"));
  if (a.threads < 0) check(invalid_argument("--threads must be >= 1 (or 0 for all cores)"));
  InCoreOptions opt;
  opt.threads = a.threads;
  a.blocking.apply(&opt.bt, &opt.tile_x, &opt.tile_y);
  if (const int64_t tuned = get(tuned_cache_bytes(a.threads)); tuned > 0) opt.cache_bytes = tuned;
  Bandwidth bw;
  if (!a.no_bandwidth) bw = measure_bandwidth();
  InCoreBench r =
      get(bench_incore(shape, stencil, dtype, a.steps, opt, a.repeats, bw.copy_gbs, boundary));
  if (a.json) {
    json j = {{"method", "incore"},
              {"stencil", r.stencil},
              {"shape", r.shape},
              {"bt", r.plan.bt},
              {"tile_x", r.plan.tile_x},
              {"tile_y", r.plan.tile_y},
              {"dtype", r.dtype},
              {"boundary", r.boundary},
              {"threads", r.threads},
              {"steps", r.steps},
              {"seconds", r.seconds},
              {"mlups", r.mlups},
              {"gflops", r.gflops},
              {"copy_bandwidth_gbs", bw.copy_gbs},
              {"triad_bandwidth_gbs", bw.triad_gbs},
              {"bandwidth_bound_mlups", r.bandwidth_bound_mlups}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "in-core %s %s %s %s, %d threads, bt %d, tiles %lldx%lld, %lld steps: %.1f MLUP/s, "
        "%.2f GFlop/s\n",
        r.stencil.c_str(), r.shape.c_str(), r.dtype.c_str(), r.boundary.c_str(), r.threads,
        r.plan.bt, static_cast<long long>(r.plan.tile_x), static_cast<long long>(r.plan.tile_y),
        static_cast<long long>(r.steps), r.mlups, r.gflops);
    if (!a.no_bandwidth) {
      std::printf(
          "DRAM bandwidth %.1f GB/s (copy), %.1f GB/s (triad): bound without cache reuse "
          "%.1f MLUP/s (%.2fx of it reached)\n",
          bw.copy_gbs, bw.triad_gbs, r.bandwidth_bound_mlups, r.mlups / r.bandwidth_bound_mlups);
    }
  }
  return 0;
}

std::string presets_help() {
  std::string s;
  for (const auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string schemes_help() {
  std::string s;
  for (const auto& n : scheme_preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

int run_cli(int argc, char** argv) {
  CLI::App app{
      "deepgrid: advance stencil computations (heat diffusion, waves, ...) on 3D grids stored on "
      "SSDs.\nExample:\n  deepgrid create g --shape 256x256x256 --init gaussian\n"
      "  deepgrid run g --stencil 7pt --steps 100\n  deepgrid plot g --slice z=mid -o g.png"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepgrid 0.1.0");

  CreateArgs ca;
  auto* create = app.add_subcommand("create", "Create a grid directory with an initial condition");
  create->add_option("DIR", ca.dir, "New grid directory (must not exist or be empty)")->required();
  create->add_option("--shape", ca.shape, "Extents NXxNYxNZ (x fastest), or NXxNY for 2D")
      ->required();
  create->add_option("--dtype", ca.dtype, "f32 or f64")->capture_default_str();
  create
      ->add_option("--init", ca.init,
                   "zero | const:V | random:SEED | gaussian | sine (with --scheme: of every "
                   "state field; coefficient fields get the scheme's value)")
      ->capture_default_str();
  create->add_option("--scheme,--kernel", ca.scheme,
                     "Make a grid of a scheme's fields (" + schemes_help() +
                         ", a JSON file, docs/schemes.md, or a user's kernel library LIB.so, "
                         "docs/kernels.md); 'deepgrid run' then runs it without "
                         "--stencil. Fill a field with 'deepgrid import IN.npy DIR --field NAME'");
  create->add_option("--store", ca.stores,
                     "Comma-separated data directories (e.g. one per SSD); chunks of planes are "
                     "striped round-robin over them. Default: the grid directory");
  create->add_option("--spare-planes", ca.spare_planes,
                     "Extra plane slots that let in-place sweeps be resumed after a crash "
                     "(a sweep of bt steps needs more than bt * stencil z-radius; default "
                     "max(64, nz/16))");
  create->add_option(
      "--procs", ca.procs,
      "Process grid PXxPYxPZ (product: the number of ranks) to split the grid over under "
      "mpirun, e.g. 2x2x1 (default: chosen from the grid's shape)");
  create->add_flag("--json", ca.json, "Print the manifest as JSON");

  std::string info_dir;
  bool info_json = false;
  auto* info = app.add_subcommand("info", "Show a grid's shape, layout, time step and history");
  info->add_option("DIR", info_dir, "Grid directory")->required();
  info->add_flag("--json", info_json, "Print as one JSON object");

  RunArgs ra;
  auto* run = app.add_subcommand("run", "Advance a grid by N time steps");
  run->add_option("DIR", ra.dir, "Grid directory")->required();
  run->add_option("--stencil,--scheme,--kernel", ra.stencil,
                  "Stencil preset (" + presets_help() + "), scheme preset (" + schemes_help() +
                      "), a JSON file (a stencil {\"points\": [[dx, dy, dz, c], ...]} or a "
                      "scheme, docs/schemes.md) or a user's kernel library LIB.so "
                      "(docs/kernels.md); default: the grid's own scheme");
  run->add_option("--coeffs", ra.coeffs,
                  "Override coefficients: one per point in (dz, dy, dx) order, or one per "
                  "distance shell, centre first (7pt: --coeffs 0.4,0.1)");
  run->add_option("--steps", ra.steps, "Number of time steps (>= 0)");
  run->add_flag("--resume", ra.resume,
                "Finish the grid's interrupted or stopped run (its stencil, boundary and target "
                "step); the same command as that run's does the same");
  run->add_option("--method", ra.method,
                  "auto: in-core when the grid fits --mem, else stream | incore: load, advance in "
                  "memory, write back | stream: out-of-core, temporal blocking, async direct I/O | "
                  "naive: stream with bt 1 | mmap: in-core engine on memory-mapped scratch files, "
                  "paged by the OS | tiled: 3D blocks with halos, two copies on disk (seed paper "
                  "001)")
      ->capture_default_str();
  run->add_option("--io", ra.io,
                  "Stream I/O backend: uring (io_uring) | threads (pread/pwrite pool)")
      ->capture_default_str();
  run->add_option("--boundary", ra.boundary, "dirichlet:V | neumann | periodic")
      ->capture_default_str();
  run->add_option("--threads", ra.threads, "Compute threads (0: all cores)")->capture_default_str();
  run->add_option("--mem", ra.mem,
                  "Memory budget, e.g. 2GiB: a hard cap on what the engine allocates (default: no "
                  "limit; the stream methods need one)");
  ra.blocking.add_to(run);
  run->add_flag("--remeasure", ra.remeasure,
                "Measure this machine's compute rate and disk bandwidth again instead of using "
                "the cached figures the stream methods plan with");
  run->add_option("--procs", ra.procs,
                  "Under mpirun: the process grid PXxPYxPZ to run with; a grid split otherwise is "
                  "split again first (default: the grid's own, or chosen for another number of "
                  "ranks)");
  run->add_option("--checkpoint", ra.checkpoint,
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
  run->add_flag("--json", ra.json, "Print the report as one JSON object on stdout");
  run->add_flag("--verify", ra.verify,
                "Check every plane read against its checksum; refuse damaged data");
  run->add_flag("--flush-subnormals", ra.flush_subnormals,
                "Compute with subnormal numbers (below 1.2e-38 in f32, 2.2e-308 in f64) taken "
                "as zero: x86 computes them far slower, so a field decaying into zero (e.g. a "
                "diffusing Gaussian) can run several times faster (3.7-5x measured, "
                "docs/performance.md). Every method gives the same bits; "
                "without it the arithmetic is IEEE's. A resumed run keeps its run's choice");
  run->add_option("--probes", ra.probes,
                  "JSON file of point sources (a Ricker wavelet or a series added at a point) and "
                  "receivers (points recorded every step); see docs/schemes.md");
  run->add_option("--traces", ra.traces,
                  "Where the receivers' values go: a .npy of float64, one row per step, one "
                  "column per receiver (saved after every pass: the steps it recorded)");

  RunArgs pa;
  auto* plan = app.add_subcommand(
      "plan",
      "Show how a run would go: method, bt, buffers, memory and predicted time (under "
      "mpirun, or for a distributed grid: the process grid, the halo exchanges and each "
      "rank's part)");
  plan->add_option("DIR", pa.dir, "Grid directory")->required();
  plan->add_option("--stencil,--scheme,--kernel", pa.stencil,
                   "Preset or JSON file, as for run (default: the grid's own scheme)");
  plan->add_option("--coeffs", pa.coeffs, "Coefficient override, as for run");
  plan->add_option("--steps", pa.steps, "Number of time steps")->required();
  plan->add_option("--method", pa.method, "auto | incore | stream | naive | mmap | tiled")
      ->capture_default_str();
  plan->add_option("--boundary", pa.boundary, "dirichlet:V | neumann | periodic")
      ->capture_default_str();
  plan->add_option("--threads", pa.threads, "Compute threads (0: all cores)");
  plan->add_option("--mem", pa.mem, "Memory budget, e.g. 2GiB");
  plan->add_option("--io", pa.io, "uring | threads")->capture_default_str();
  pa.blocking.add_to(plan);
  plan->add_flag("--remeasure", pa.remeasure,
                 "Measure this machine's rates again (they are cached after the first time)");
  plan->add_option("--procs", pa.procs,
                   "Under mpirun: the process grid PXxPYxPZ the run would use (as for run)");
  plan->add_flag("--json", pa.json, "Print the plan as one JSON object");

  std::string ck_dir;
  bool ck_json = false;
  auto* checksum = app.add_subcommand(
      "checksum", "SHA-256 of the values (little-endian, (z, y, x) order) and min/max/mean/L2");
  checksum->add_option("DIR", ck_dir, "Grid directory")->required();
  checksum->add_flag("--json", ck_json, "Print as one JSON object");
  bool ck_verify = false;
  checksum->add_flag("--verify", ck_verify, "Check every plane against its recorded checksum");
  std::string ck_field;
  checksum->add_option("--field", ck_field,
                       "Only this field of a grid of several (default: all of them, each "
                       "plane's fields in order)");

  std::string fsck_dir;
  bool fsck_json = false;
  auto* fsck = app.add_subcommand(
      "fsck", "Check every plane against its recorded checksum; list damaged planes (exit 4)");
  fsck->add_option("DIR", fsck_dir, "Grid directory")->required();
  fsck->add_flag("--json", fsck_json, "Print as one JSON object");

  std::string im_in, im_dir, im_stores, im_field, im_procs;
  auto* import = app.add_subcommand(
      "import", "Create a grid from a .npy file, or fill one field of a grid (streamed)");
  import->add_option("IN", im_in, "Input .npy: float32/float64, shape (nz, ny, nx) or (ny, nx)")
      ->required();
  import->add_option("DIR", im_dir, "New grid directory")->required();
  import->add_option("--store", im_stores, "Comma-separated data directories");
  import->add_option(
      "--procs", im_procs,
      "Process grid PXxPYxPZ (product: the number of ranks) to split the grid over under "
      "mpirun, e.g. 2x2x1 (default: chosen from the grid's shape)");
  import->add_option("--field", im_field,
                     "Fill this field of the existing grid DIR (e.g. a velocity model made with "
                     "'create --scheme'); the array must have the grid's shape and dtype");

  std::string ex_dir, ex_out;
  auto* exp = app.add_subcommand("export", "Write a grid to a .npy file (streamed)");
  exp->add_option("DIR", ex_dir, "Grid directory")->required();
  exp->add_option("OUT", ex_out, "Output .npy, shape (nz, ny, nx)")->required();
  bool ex_verify = false;
  exp->add_flag("--verify", ex_verify, "Check every plane against its recorded checksum");
  std::string ex_field;
  exp->add_option("--field", ex_field,
                  "The field to write, of a grid of several (default: the first, the state)");

  std::string pl_dir, pl_slice = "z=mid", pl_out;
  auto* plot = app.add_subcommand("plot", "Draw a slice of a grid as a PNG with a colour bar");
  plot->add_option("DIR", pl_dir, "Grid directory")->required();
  plot->add_option("--slice", pl_slice, "AXIS=INDEX held fixed: z=mid, z=10, y=0, x=mid")
      ->capture_default_str();
  plot->add_option("-o,--output", pl_out, "Output PNG file")->required();
  std::string pl_field;
  plot->add_option("--field", pl_field, "The field to draw (default: the first, the state)");

  BenchArgs ba;
  auto* bench =
      app.add_subcommand("bench", "Measure the in-core engine and this machine's bandwidth");
  bench->add_option("--shape", ba.shape, "Grid extents")->capture_default_str();
  bench->add_option("--stencil", ba.stencil, "Preset or JSON file")->capture_default_str();
  bench->add_option("--dtype", ba.dtype, "f32 or f64")->capture_default_str();
  bench->add_option("--boundary", ba.boundary, "dirichlet:V | neumann | periodic")
      ->capture_default_str();
  bench->add_option("--steps", ba.steps, "Steps per timed repeat")->capture_default_str();
  bench->add_option("--threads", ba.threads, "Threads (0: all cores)")->capture_default_str();
  bench->add_option("--repeats", ba.repeats, "Timed repeats (the best counts)")
      ->capture_default_str();
  ba.blocking.add_to(bench);
  bench->add_option(
      "--methods", ba.methods,
      "Run one problem through these methods on disk and compare: e.g. "
      "incore,stream,naive,mmap,tiled (without it: the in-core engine in memory only)");
  bench->add_option("--mem-ratio", ba.mem_ratio, "Out-of-core methods get --mem = grid size / this")
      ->capture_default_str();
  bench->add_option("--sweep-bt", ba.sweep_bt, "Stream and tiled: run each bt, e.g. 1,2,4,8,16,32");
  bench->add_option("--sweep-ratio", ba.sweep_ratio,
                    "Out-of-core: run each memory ratio, e.g. 1,2,4,8,16,32");
  bench->add_option("--dir", ba.dir, "Scratch directory for the grids (emptied after)")
      ->capture_default_str();
  bench->add_option("--csv", ba.csv, "Also write the table as CSV");
  bench->add_option("--plot", ba.plot,
                    "With --sweep-bt or --sweep-ratio: also draw MLUP/s against it as a PNG, one "
                    "line per method");
  bench->add_flag("--no-bandwidth", ba.no_bandwidth, "Skip the DRAM bandwidth measurement");
  bench->add_flag("--json", ba.json, "Print as one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return prints() ? app.exit(e) : 0;
  } catch (const CLI::CallForAllHelp& e) {
    return prints() ? app.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return prints() ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    if (!prints()) return 2;  // every rank parses the same arguments; rank 0 says it
    std::fprintf(stderr, "deepgrid: error: %s; see 'deepgrid %s--help'\n", e.what(),
                 app.get_subcommands().empty()
                     ? ""
                     : (app.get_subcommands().front()->get_name() + " ").c_str());
    return 2;
  }
  for (const auto* cmd : {fsck, bench}) {
    if (*cmd) check(refuse_under_mpi(cmd->get_name()));
  }
  if (*create) return cmd_create(ca);
  if (*info) return cmd_info(info_dir, info_json);
  if (*run) return cmd_run(ra);
  if (*plan) return cmd_plan(pa);
  if (*checksum) return cmd_checksum(ck_dir, ck_json, ck_verify, ck_field);
  if (*fsck) return cmd_fsck(fsck_dir, fsck_json);
  if (*import) {
    if (!im_field.empty()) {
      if (in_mpi_job()) {
        check(mpi_import_field(im_in, im_dir, im_field));
        return 0;
      }
      check(refuse_distributed(im_dir, "import --field"));
      Grid g = get(Grid::open(im_dir, Grid::Mode::kReadWrite));
      const int c = field_index(g.manifest(), im_field);
      check(import_npy_field(im_in, g, c));
      std::printf("imported %s into field %s of %s\n", im_in.c_str(), im_field.c_str(),
                  im_dir.c_str());
      return 0;
    }
    if (in_mpi_job()) {
      check(mpi_import(im_in, im_dir, split_csv(im_stores), im_procs));
      return 0;
    }
    check(refuse_procs_serially(im_procs));
    Grid g = get(import_npy(im_in, im_dir, split_csv(im_stores)));
    std::printf("imported %s into %s: %s %s\n", im_in.c_str(), im_dir.c_str(),
                g.shape().to_string().c_str(), std::string(dtype_name(g.dtype())).c_str());
    return 0;
  }
  if (*exp) {
    if (in_mpi_job() || is_distributed_grid(ex_dir)) {
      check(distributed_export(ex_dir, ex_out, ex_verify, ex_field));
      if (!prints()) return 0;
    } else {
      const Grid g = open_to_read(ex_dir, ex_verify);
      check(export_npy(g, ex_out, field_index(g.manifest(), ex_field)));
    }
    std::printf("exported %s to %s\n", ex_dir.c_str(), ex_out.c_str());
    return 0;
  }
  if (*plot) return cmd_plot(pl_dir, pl_slice, pl_out, pl_field);
  if (*bench) return cmd_bench(ba);
  return 2;
}

}  // namespace
}  // namespace deepgrid::cli

int main(int argc, char** argv) {
  try {
    // Under mpirun every rank runs the same command; errors are agreed between the ranks
    // (src/mpi/comm.h), so rank 0 alone prints them and every rank exits with the same code.
    deepgrid::cli::check(deepgrid::cli::start_mpi_if_launched(&argc, &argv));
    return deepgrid::cli::run_cli(argc, argv);
  } catch (const deepgrid::cli::Failure& f) {
    if (deepgrid::cli::prints()) {
      std::fprintf(stderr, "deepgrid: error: %s\n", f.status.message().c_str());
    }
    return deepgrid::cli::exit_code_for(f.status.code());
  }
}
