// deepgrid bench: the in-core engine's rate in memory against this machine's DRAM bandwidth,
// or (--methods) one problem run on disk through several methods and compared as a table,
// optionally swept over bt, the memory ratio or the plane size and drawn as a line plot.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "cli/distributed_commands.h"
#include "deepgrid/machine.h"
#include "deepgrid/run.h"
#include "plan/incore_bench.h"
#include "run/methods_bench.h"
#include "viz/line_plot.h"

namespace deepgrid::cli {
namespace {

using nlohmann::json;

struct BenchArgs {
  std::string shape = "256x256x256", stencil = "7pt", dtype = "f32", boundary = "dirichlet:0";
  std::string methods, dir = "scratch/bench", csv, sweep_bt, sweep_ratio, sweep_plane, plot;
  double mem_ratio = 16, device_ratio = 0;
  int64_t steps = 10;
  int threads = 0, repeats = 3;
  BlockingArgs blocking;
  DeviceArgs device;
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

// The options of bench --methods; the arguments are checked in this order.
MethodsBenchOptions methods_bench_options(const BenchArgs& a) {
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
  a.device.apply(&o.device, &o.device_mem, &o.device_overlap);
  if (a.device_ratio < 0) check(invalid_argument("--device-ratio must be > 0, e.g. 16"));
  o.device_ratio = a.device_ratio;
  int bt = 0;
  a.blocking.apply(&bt, &o.tile_x, &o.tile_y);
  o.cache_bt = a.blocking.cache_bt;
  o.band_rows = a.blocking.band_rows_value();
  if (bt > 0) o.bts = {bt};
  if (!a.sweep_bt.empty()) {
    o.bts.clear();
    for (double v : parse_numbers(a.sweep_bt, "--sweep-bt")) o.bts.push_back(static_cast<int>(v));
  }
  if (!a.sweep_ratio.empty()) o.ratios = parse_numbers(a.sweep_ratio, "--sweep-ratio");
  if (!a.plot.empty() && a.sweep_bt.empty() && a.sweep_ratio.empty() && a.sweep_plane.empty()) {
    check(invalid_argument("--plot draws a sweep; add --sweep-bt, --sweep-ratio or --sweep-plane"));
  }
  if (!a.sweep_plane.empty() && (!a.sweep_bt.empty() || !a.sweep_ratio.empty())) {
    check(invalid_argument("--sweep-plane sweeps alone; drop --sweep-bt and --sweep-ratio"));
  }
  return o;
}

constexpr const char* kMethodsCsvHeader =
    "method,bt,mem_ratio,mem_budget_bytes,seconds,mlups,gflops,ratio_to_incore,"
    "ratio_to_incore_compute,ratio_to_incore_warm,bytes_read,bytes_written,compute_busy,io_wait,"
    "disk_busy,peak_memory_bytes,stolen_cpu_share,device_bytes_copied,device_copy_seconds\n";

// The table's title and column heads.
void print_methods_heading(const MethodsBenchOptions& o, const std::vector<MethodsBenchRow>& rows) {
  std::printf("%s %s %s %s, %lld steps, %d threads; out-of-core budget = grid / ratio\n",
              o.scheme.name().c_str(), o.shape.to_string().c_str(),
              std::string(dtype_name(o.dtype)).c_str(), o.boundary.to_string().c_str(),
              static_cast<long long>(o.steps), rows.empty() ? 0 : rows.front().report.threads);
  std::printf("%-12s %4s %6s %9s %8s %9s %7s %8s %9s %7s %9s %7s %7s %9s %10s %7s %10s %7s\n",
              "method", "bt", "ratio", "mem", "time s", "MLUP/s", "GFlop/s", "/incore", "/incore*",
              "/warm", "read", "compute", "io wait", "disk busy", "peak mem", "stolen", "to device",
              "copy s");
}

// The share of the run's wall time that `part` seconds make.
double share_of_run(const RunReport& p, double part) {
  return p.seconds > 0 ? part / p.seconds : 0;
}

// A measured row as a line of the CSV file.
std::string csv_row(const MethodsBenchRow& r) {
  const RunReport& p = r.report;
  const double compute_busy = share_of_run(p, p.compute_seconds);
  const double io_wait = share_of_run(p, p.io_wait_seconds);
  char line[512];
  std::snprintf(line, sizeof line,
                "%s,%d,%g,%llu,%.4f,%.1f,%.3f,%.4f,%.4f,%.4f,%llu,%llu,%.4f,%.4f,%s,%llu,%.4f,%llu,"
                "%.4f\n",
                r.method.c_str(), r.bt, r.mem_ratio, static_cast<unsigned long long>(r.mem_budget),
                p.seconds, p.mlups(), p.gflops(), r.ratio_to_incore, r.compute_ratio_to_incore,
                r.ratio_to_incore_warm, static_cast<unsigned long long>(p.bytes_read),
                static_cast<unsigned long long>(p.bytes_written), compute_busy, io_wait,
                r.disk_busy >= 0 ? std::to_string(r.disk_busy).c_str() : "",
                static_cast<unsigned long long>(p.peak_memory), p.stolen_share(),
                static_cast<unsigned long long>(p.device_bytes_copied), p.device_copy_seconds);
  return line;
}

// A measured row as JSON: its run's report and the comparison.
json json_row(const MethodsBenchRow& r) {
  const RunReport& p = r.report;
  json j = json::parse(p.to_json());
  j["mem_ratio"] = r.mem_ratio;
  j["mem_budget_bytes"] = r.mem_budget;
  j["ratio_to_incore"] = r.ratio_to_incore;
  j["ratio_to_incore_compute"] = r.compute_ratio_to_incore;
  j["ratio_to_incore_warm"] = r.ratio_to_incore_warm;
  if (r.disk_busy >= 0) j["disk_busy"] = r.disk_busy;
  return j;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", s);
  return text;
}

// A measured row as a line of the table.
void print_row(const MethodsBenchRow& r) {
  const RunReport& p = r.report;
  const double compute_busy = share_of_run(p, p.compute_seconds);
  const double io_wait = share_of_run(p, p.io_wait_seconds);
  std::printf(
      "%-12s %4d %6s %9s %8.3f %9.1f %7.2f %8.3f %9.3f %7.3f %9s %6.0f%% %6.0f%% %9s %10s "
      "%6.0f%% %10s %7s\n",
      r.method.c_str(), r.bt,
      r.mem_ratio > 0 ? (std::to_string(static_cast<int>(r.mem_ratio)) + "x").c_str() : "-",
      r.mem_budget ? format_size(r.mem_budget).c_str() : "-", p.seconds, p.mlups(), p.gflops(),
      r.ratio_to_incore, r.compute_ratio_to_incore, r.ratio_to_incore_warm,
      format_size(p.bytes_read).c_str(), 100 * compute_busy, 100 * io_wait,
      r.disk_busy >= 0 ? (std::to_string(std::lround(100 * r.disk_busy)) + "%").c_str() : "-",
      format_size(p.peak_memory).c_str(), 100 * p.stolen_share(),
      p.device.empty() ? "-" : format_size(p.device_bytes_copied).c_str(),
      p.device.empty() ? "-" : seconds_text(p.device_copy_seconds).c_str());
}

// What the table's ratio columns compare with.
void print_methods_notes(double incore_warm_mlups) {
  std::printf(
      "/incore: whole-run MLUP/s over in-core's whole run (load, compute, store); "
      "/incore*: over in-core's compute phase alone;\n/warm: over the in-core engine's warm "
      "in-memory rate on this shape in this run (%.1f MLUP/s), the strictest yardstick;\nstolen: "
      "the machine's CPU time the hypervisor took during the run (virtual machines);\nto device, "
      "copy s: what went between host and device, both ways, and the seconds those copies took "
      "(beside compute)\n",
      incore_warm_mlups);
}

void write_csv(const std::string& path, const std::string& csv) {
  std::ofstream out(path);
  out << csv;
  if (!out) check(Status(ErrorCode::kIo, "cannot write " + path));
}

// deepgrid bench --methods ...: one problem through several methods, as a table.
int cmd_bench_methods(const BenchArgs& a) {
  const MethodsBenchOptions o = methods_bench_options(a);
  const MethodsBench bench = get(bench_methods(o));
  const std::vector<MethodsBenchRow>& rows = bench.rows;
  json all = json::array();
  std::string csv = kMethodsCsvHeader;
  if (!a.json) print_methods_heading(o, rows);
  for (const MethodsBenchRow& r : rows) {
    if (!r.skipped.empty()) {
      if (!a.json) {
        std::printf("%-12s %4d %5.0fx  skipped: %s\n", r.method.c_str(), r.bt, r.mem_ratio,
                    r.skipped.c_str());
      }
      all.push_back(
          {{"method", r.method}, {"bt", r.bt}, {"mem_ratio", r.mem_ratio}, {"skipped", r.skipped}});
      continue;
    }
    csv += csv_row(r);
    all.push_back(json_row(r));
    if (!a.json) print_row(r);
  }
  if (!a.json) print_methods_notes(bench.incore_warm_mlups);
  if (!a.csv.empty()) write_csv(a.csv, csv);
  if (!a.plot.empty()) plot_sweep(a, o, rows);
  if (a.json) std::printf("%s\n", all.dump().c_str());
  return 0;
}

// The plane sweep as a line plot: MLUP/s against the plane's width, one line per method (those
// without a budget over their compute phase, the out-of-core ones over their whole run: the
// ratio the targets name) and one each for the kernel in cache and the in-core warm rate.
void plot_plane_sweep(const BenchArgs& a, const MethodsBenchOptions& o,
                      const std::vector<PlaneSweepRow>& rows) {
  char title[256];
  std::snprintf(title, sizeof title, "%s %s, %lld steps, grids of %s, --mem = grid / %g",
                o.scheme.name().c_str(), std::string(dtype_name(o.dtype)).c_str(),
                static_cast<long long>(o.steps),
                format_size(static_cast<uint64_t>(o.shape.points()) * dtype_size(o.dtype) *
                            static_cast<uint64_t>(o.scheme.component_count()))
                    .c_str(),
                o.mem_ratio);
  LinePlot plot;
  plot.title = title;
  plot.x_label = "plane width P (grid P x P x nz)";
  plot.y_label = "MLUP/s";
  plot.log2_x = true;
  auto add = [&](const std::string& name, double x, double y) {
    auto it = std::find_if(plot.series.begin(), plot.series.end(),
                           [&](const PlotSeries& s) { return s.name == name; });
    if (it == plot.series.end()) it = plot.series.insert(plot.series.end(), {name, {}});
    it->points.push_back({x, y});
  };
  for (const PlaneSweepRow& p : rows) {
    const auto x = static_cast<double>(p.plane);
    add("kernel in cache", x, p.kernel_mlups);
    if (p.methods.incore_warm_mlups > 0) add("in-core warm", x, p.methods.incore_warm_mlups);
    for (const MethodsBenchRow& r : p.methods.rows) {
      if (!r.skipped.empty()) continue;
      if (r.mem_budget == 0) {
        add(r.method + " compute", x, r.report.compute_mlups());
      } else {
        add(r.method, x, r.report.mlups());
      }
    }
  }
  check(write_line_plot_png(plot, a.plot));
}

// deepgrid bench --sweep-plane: the methods on grids of growing planes, the same bytes each.
int cmd_bench_planes(const BenchArgs& a) {
  MethodsBenchOptions o = methods_bench_options(a);
  if (o.methods.empty()) o.methods = {"incore", "stream"};
  std::vector<int64_t> planes;
  for (double v : parse_numbers(a.sweep_plane, "--sweep-plane")) {
    if (v < 1 || v != std::floor(v)) {
      char got[64];
      std::snprintf(got, sizeof got, "%g", v);
      check(invalid_argument(
          std::string("--sweep-plane takes whole plane widths like 256,512,1024; got ") + got));
    }
    planes.push_back(static_cast<int64_t>(v));
  }
  const std::vector<PlaneSweepRow> rows = get(bench_plane_sweep(o, planes));
  json all = json::array();
  std::string csv =
      "plane,shape,method,bt,tile,band_rows,mem_budget_bytes,seconds,mlups,compute_mlups,gflops,"
      "ratio_to_incore_compute,ratio_to_incore_warm,incore_warm_mlups,kernel_in_cache_mlups\n";
  if (!a.json) {
    std::printf(
        "%s %s %s, %lld steps; grids P x P x nz of the bytes of %s; out-of-core budget = grid / "
        "%g\n%6s %-16s %-8s %4s %-10s %5s %9s %9s %9s %8s %7s %9s %9s\n",
        o.scheme.name().c_str(), std::string(dtype_name(o.dtype)).c_str(),
        o.boundary.to_string().c_str(), static_cast<long long>(o.steps), a.shape.c_str(),
        o.mem_ratio, "P", "shape", "method", "bt", "tiles", "bands", "mem", "MLUP/s", "compute",
        "/incore*", "/warm", "warm", "kernel");
  }
  for (const PlaneSweepRow& p : rows) {
    for (const MethodsBenchRow& r : p.methods.rows) {
      const RunReport& q = r.report;
      json j = r.skipped.empty() ? json_row(r) : json{{"method", r.method}, {"skipped", r.skipped}};
      j["plane"] = p.plane;
      j["incore_warm_mlups"] = p.methods.incore_warm_mlups;
      j["kernel_in_cache_mlups"] = p.kernel_mlups;
      all.push_back(j);
      if (!r.skipped.empty()) {
        if (!a.json)
          std::printf("%6lld %-16s %-8s skipped: %s\n", static_cast<long long>(p.plane),
                      p.shape.to_string().c_str(), r.method.c_str(), r.skipped.c_str());
        continue;
      }
      char line[512];
      std::snprintf(line, sizeof line,
                    "%lld,%s,%s,%d,%s,%lld,%llu,%.4f,%.1f,%.1f,%.3f,%.4f,%.4f,%.1f,%.1f\n",
                    static_cast<long long>(p.plane), p.shape.to_string().c_str(), r.method.c_str(),
                    r.bt, q.tile.c_str(), static_cast<long long>(q.band_rows),
                    static_cast<unsigned long long>(r.mem_budget), q.seconds, q.mlups(),
                    q.compute_mlups(), q.gflops(), r.compute_ratio_to_incore,
                    r.ratio_to_incore_warm, p.methods.incore_warm_mlups, p.kernel_mlups);
      csv += line;
      if (!a.json) {
        const std::string bands = q.band_rows > 0 ? std::to_string(q.band_rows) : "-";
        std::printf("%6lld %-16s %-8s %4d %-10s %5s %9s %9.1f %9.1f %8.3f %7.3f %9.1f %9.1f\n",
                    static_cast<long long>(p.plane), p.shape.to_string().c_str(), r.method.c_str(),
                    r.bt, q.tile.c_str(), bands.c_str(),
                    r.mem_budget ? format_size(r.mem_budget).c_str() : "-", q.mlups(),
                    q.compute_mlups(), r.compute_ratio_to_incore, r.ratio_to_incore_warm,
                    p.methods.incore_warm_mlups, p.kernel_mlups);
      }
    }
  }
  if (!a.json) {
    std::printf(
        "MLUP/s: whole run (create excluded); compute: over its compute phase; /incore*: whole "
        "run over the in-core run's compute phase;\n/warm: over the in-core engine's warm rate "
        "in memory (warm); kernel: the kernel alone on P-wide rows in cache, all threads;\nbands: "
        "the rows of the stream's bands of rows (-: whole planes)\n");
  }
  if (!a.csv.empty()) write_csv(a.csv, csv);
  if (!a.plot.empty()) plot_plane_sweep(a, o, rows);
  if (a.json) std::printf("%s\n", all.dump().c_str());
  return 0;
}

int cmd_bench(const BenchArgs& a) {
  check(refuse_under_mpi("bench"));
  if (!a.sweep_plane.empty()) return cmd_bench_planes(a);
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
  const MachineProfile tuning = get(machine_tuning(stencil, dtype, shape.nx, a.threads));
  if (tuning.cache_bytes > 0) opt.cache_bytes = tuning.cache_bytes;
  opt.tuned_bt = tuning.tuned_bt;
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

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* bench =
      app.add_subcommand("bench", "Measure the in-core engine and this machine's bandwidth");
  bench->add_option("--shape", a->shape, "Grid extents")->capture_default_str();
  bench->add_option("--stencil", a->stencil, "Preset or JSON file")->capture_default_str();
  bench->add_option("--dtype", a->dtype, "f32 or f64")->capture_default_str();
  bench->add_option("--boundary", a->boundary, "dirichlet:V | neumann | periodic")
      ->capture_default_str();
  bench->add_option("--steps", a->steps, "Steps per timed repeat")->capture_default_str();
  bench->add_option("--threads", a->threads, "Threads (0: all cores)")->capture_default_str();
  bench->add_option("--repeats", a->repeats, "Timed repeats (the best counts)")
      ->capture_default_str();
  a->blocking.add_to(bench);
  a->device.add_to(bench);
  bench->add_option(
      "--methods", a->methods,
      "Run one problem through these methods on disk and compare: e.g. "
      "incore,stream,naive,mmap,tiled,device (without it: the in-core engine in memory only)");
  bench->add_option("--mem-ratio", a->mem_ratio, "Out-of-core methods get --mem = grid size / this")
      ->capture_default_str();
  bench->add_option("--device-ratio", a->device_ratio,
                    "With the device method: run it again with --device-mem = grid size / this "
                    "and --mem = grid size / --mem-ratio (host-resident or three-tier), e.g. 16");
  bench->add_option("--sweep-bt", a->sweep_bt,
                    "Stream, tiled and device: run each bt, e.g. 1,2,4,8,16,32");
  bench->add_option("--sweep-ratio", a->sweep_ratio,
                    "Out-of-core: run each memory ratio, e.g. 1,2,4,8,16,32");
  bench->add_option("--sweep-plane", a->sweep_plane,
                    "Run the methods (default incore,stream) on grids of square planes this wide "
                    "and the bytes of --shape, e.g. 256,512,1024,2048, beside the kernel's rate "
                    "in cache");
  bench->add_option("--dir", a->dir, "Scratch directory for the grids (emptied after)")
      ->capture_default_str();
  bench->add_option("--csv", a->csv, "Also write the table as CSV");
  bench->add_option("--plot", a->plot,
                    "With a sweep: also draw MLUP/s against it as a PNG, one line per method");
  bench->add_flag("--no-bandwidth", a->no_bandwidth, "Skip the DRAM bandwidth measurement");
  bench->add_flag("--json", a->json, "Print as one JSON object");
  return {bench, [a] { return cmd_bench(*a); }};
}

}  // namespace deepgrid::cli
