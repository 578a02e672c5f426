#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <thread>

#include "deepgrid/bench.h"
#include "deepgrid/run.h"

namespace deepgrid {
namespace {

// Creates a fresh grid, runs it with `opt`, removes it.
Result<RunReport> run_fresh(const MethodsBenchOptions& o, const std::string& name,
                            const RunOptions& opt) {
  const std::string dir = o.dir + "/" + name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  CreateOptions co;
  co.shape = o.shape;
  co.dtype = o.dtype;
  co.init = InitSpec{InitSpec::Kind::kRandom, 0, 1};
  DG_RETURN_IF_ERROR(Grid::create(dir, co).status());
  // Let the previous run's and the creation's writes drain so that runs do not slow each
  // other down (measured on a virtio disk: up to 20% when runs follow each other directly).
  ::sync();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  // Each run reports its own peak: reset the process's high-water mark (Linux >= 4.0).
  std::ofstream("/proc/self/clear_refs") << "5";
  auto r = run_grid(dir, opt);
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace

Result<MethodsBench> bench_methods(const MethodsBenchOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return invalid_argument("cannot create bench directory " + o.dir + ": " + ec.message());
  const double grid_bytes = static_cast<double>(o.shape.points() * dtype_size(o.dtype));
  std::vector<MethodsBenchRow> rows;
  std::optional<size_t> incore;  // the first in-core row: the yardstick
  for (const std::string& name : o.methods) {
    DG_ASSIGN_OR_RETURN(Method method, parse_method(name));
    // mmap's budget caps only its own buffers: its grid copies are paged by the OS, which
    // only a cgroup limit holds to the budget (bench/mmap_vs_stream.sh).
    const bool out_of_core = method == Method::kStream || method == Method::kNaive ||
                             method == Method::kTiled || method == Method::kMmap;
    const std::vector<double> ratios =
        out_of_core && !o.ratios.empty() ? o.ratios : std::vector<double>{o.mem_ratio};
    const bool blocked = method == Method::kStream || method == Method::kTiled;
    const std::vector<int> bts = blocked ? o.bts : std::vector<int>{0};
    for (double ratio : ratios) {
      for (int bt : bts) {
        RunOptions opt;
        opt.stencil = o.stencil;
        opt.steps = o.steps;
        opt.method = method;
        opt.threads = o.threads;
        opt.bt = bt;
        MethodsBenchRow row;
        row.method = name;
        if (out_of_core) {
          row.mem_ratio = ratio;
          row.mem_budget = static_cast<uint64_t>(grid_bytes / ratio);
          opt.mem_budget = row.mem_budget;
        }
        auto report = run_fresh(o, name, opt);
        if (!report.ok() && report.status().code() == ErrorCode::kInvalidArgument &&
            (bts.size() > 1 || ratios.size() > 1)) {
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
    DG_ASSIGN_OR_RETURN(InCoreBench b, bench_incore(o.shape, o.stencil, o.dtype,
                                                    std::min<int64_t>(o.steps, 24), warm, 1, 0));
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

}  // namespace deepgrid
