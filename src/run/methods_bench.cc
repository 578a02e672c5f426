#include "run/methods_bench.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <thread>

#include "deepgrid/machine.h"
#include "deepgrid/run.h"
#include "plan/incore_bench.h"

namespace deepgrid {
namespace {

// Creates a fresh grid, runs it with `opt`, removes it. *disk_busy: the share of the run's
// wall time the grid's disk was busy (anyone's I/O counts), or -1 when unknown.
Result<RunReport> run_fresh(const MethodsBenchOptions& o, const std::string& name,
                            const RunOptions& opt, double* disk_busy) {
  const std::string dir = o.dir + "/" + name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  CreateOptions co;
  co.shape = o.shape;
  co.dtype = o.dtype;
  co.init = InitSpec{InitSpec::Kind::kRandom, 0, 1};
  co.fields = initial_fields(o.scheme, co.init);
  co.scheme = o.scheme.is_stencil() ? "" : o.scheme.to_json();
  DG_RETURN_IF_ERROR(Grid::create(dir, co).status());
  RunOptions planned = opt;  // out-of-core methods plan with this machine's rates, as run does
  if (opt.mem_budget > 0) {
    DG_ASSIGN_OR_RETURN(const Grid g, Grid::open(dir));
    DG_ASSIGN_OR_RETURN(planned.machine, machine_profile(g, opt.scheme, opt.threads));
  } else {
    DG_ASSIGN_OR_RETURN(planned.machine,
                        machine_tuning(opt.scheme, o.dtype, o.shape.nx, opt.threads));
  }
  // Let the previous run's and the creation's writes drain so that runs do not slow each
  // other down (measured on a virtio disk: up to 20% when runs follow each other directly).
  ::sync();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  // Each run reports its own peak: reset the process's high-water mark (Linux >= 4.0).
  std::ofstream("/proc/self/clear_refs") << "5";
  const int64_t busy0 = device_busy_ms(dir);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_grid(dir, planned);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t busy1 = device_busy_ms(dir);
  *disk_busy = busy0 >= 0 && busy1 >= 0 && ms > 0
                   ? std::min(1.0, static_cast<double>(busy1 - busy0) / ms)
                   : -1;
  std::filesystem::remove_all(dir, ec);
  return r;
}

// A device row's name: the method and, out of the device's memory, the placement.
std::string device_row_name(const std::string& placement) {
  if (placement == "host-resident") return "device-host";
  if (placement == "three-tier") return "device-3tier";
  return "device";
}

}  // namespace

Result<MethodsBench> bench_methods(const MethodsBenchOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return invalid_argument("cannot create bench directory " + o.dir + ": " + ec.message());
  const double grid_bytes =
      static_cast<double>(o.shape.points() * dtype_size(o.dtype)) * o.scheme.component_count();
  std::vector<MethodsBenchRow> rows;
  std::optional<size_t> incore;  // the first in-core row: the yardstick
  for (const std::string& name : o.methods) {
    DG_ASSIGN_OR_RETURN(Method method, parse_method(name));
    // mmap runs without a budget here, like in-core: a budget would cap only its own
    // buffers, while the OS pages its grid copies as it likes; only a cgroup memory limit holds
    // it to a budget (bench/mmap_vs_stream.sh).
    const bool out_of_core =
        method == Method::kStream || method == Method::kNaive || method == Method::kTiled;
    const std::vector<double> ratios =
        out_of_core && !o.ratios.empty() ? o.ratios : std::vector<double>{o.mem_ratio};
    const bool blocked =
        method == Method::kStream || method == Method::kTiled || method == Method::kDevice;
    const std::vector<int> bts = blocked ? o.bts : std::vector<int>{0};
    for (double ratio : ratios) {
      for (int bt : bts) {
        RunOptions opt;
        opt.scheme = o.scheme;
        opt.boundary = o.boundary;
        opt.steps = o.steps;
        opt.method = method;
        opt.threads = o.threads;
        opt.bt = bt;
        opt.cache_bt = o.cache_bt;
        if (method == Method::kStream) opt.band_rows = o.band_rows;
        opt.tile_x = o.tile_x;
        opt.tile_y = o.tile_y;
        if (method == Method::kDevice) {
          opt.device = o.device;
          opt.device_mem = o.device_mem;
          opt.device_overlap = o.device_overlap;
        }
        MethodsBenchRow row;
        row.method = name;
        if (out_of_core) {
          row.mem_ratio = ratio;
          row.mem_budget = static_cast<uint64_t>(grid_bytes / ratio);
          opt.mem_budget = row.mem_budget;
        }
        auto report = run_fresh(o, name, opt, &row.disk_busy);
        if (method == Method::kDevice && report.ok() && o.device_ratio > 0) {
          row.method = device_row_name(report->device_placement);
          row.report = std::move(report).value();
          row.bt = row.report.bt;
          rows.push_back(row);
          row = MethodsBenchRow{};
          row.mem_ratio = o.mem_ratio;
          row.mem_budget = static_cast<uint64_t>(grid_bytes / o.mem_ratio);
          opt.mem_budget = row.mem_budget;
          opt.device_mem = static_cast<uint64_t>(grid_bytes / o.device_ratio);
          report = run_fresh(o, name, opt, &row.disk_busy);
          if (report.ok()) row.method = device_row_name(report->device_placement);
        }
        if (!report.ok() && report.status().code() == ErrorCode::kInvalidArgument &&
            (o.sweep || bts.size() > 1 || ratios.size() > 1)) {
          row.bt = bt;
          row.skipped = report.status().message();  // a sweep point that does not fit
          rows.push_back(row);
          continue;
        }
        if (!report.ok()) return report.status();
        row.report = std::move(report).value();
        row.bt = row.report.bt;
        rows.push_back(row);
        if (method == Method::kInCore && !incore) incore = rows.size() - 1;
      }
    }
  }
  MethodsBench out;
  if (incore) {
    InCoreOptions warm;
    warm.threads = o.threads;
    DG_ASSIGN_OR_RETURN(const MachineProfile tuning,
                        machine_tuning(o.scheme, o.dtype, o.shape.nx, o.threads));
    if (tuning.cache_bytes > 0) warm.cache_bytes = tuning.cache_bytes;
    warm.tuned_bt = tuning.tuned_bt;
    DG_ASSIGN_OR_RETURN(InCoreBench b,
                        bench_incore(o.shape, o.scheme, o.dtype, std::min<int64_t>(o.steps, 24),
                                     warm, 1, 0, o.boundary));
    out.incore_warm_mlups = b.mlups;
    const RunReport base = rows[*incore].report;
    for (MethodsBenchRow& row : rows) {
      row.ratio_to_incore = row.report.mlups() / base.mlups();
      row.compute_ratio_to_incore = row.report.mlups() / base.compute_mlups();
      row.ratio_to_incore_warm = row.report.mlups() / b.mlups;
    }
  }
  out.rows = std::move(rows);
  return out;
}

Result<std::vector<PlaneSweepRow>> bench_plane_sweep(const MethodsBenchOptions& options,
                                                     const std::vector<int64_t>& planes) {
  std::vector<PlaneSweepRow> out;
  for (const int64_t p : planes) {
    if (p < 1) return invalid_argument("a swept plane must be at least 1 point wide");
    PlaneSweepRow row;
    row.plane = p;
    row.shape = {p, p, std::max<int64_t>(1, options.shape.points() / (p * p))};
    DG_ASSIGN_OR_RETURN(row.kernel_mlups,
                        kernel_in_cache_mlups(options.scheme, options.dtype, p, options.threads));
    MethodsBenchOptions o = options;
    o.shape = row.shape;
    o.sweep = true;
    DG_ASSIGN_OR_RETURN(row.methods, bench_methods(o));
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace deepgrid
