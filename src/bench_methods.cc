#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

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
  // Each run reports its own peak: reset the process's high-water mark (Linux >= 4.0).
  std::ofstream("/proc/self/clear_refs") << "5";
  auto r = run_grid(dir, opt);
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace

Result<std::vector<MethodsBenchRow>> bench_methods(const MethodsBenchOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return invalid_argument("cannot create bench directory " + o.dir + ": " + ec.message());
  const double grid_bytes = static_cast<double>(o.shape.points() * dtype_size(o.dtype));
  std::vector<MethodsBenchRow> rows;
  std::optional<size_t> incore;  // the first in-core row: the yardstick
  for (const std::string& name : o.methods) {
    DG_ASSIGN_OR_RETURN(Method method, parse_method(name));
    const bool out_of_core = method == Method::kStream || method == Method::kNaive;
    const std::vector<double> ratios =
        out_of_core && !o.ratios.empty() ? o.ratios : std::vector<double>{o.mem_ratio};
    const std::vector<int> bts = method == Method::kStream ? o.bts : std::vector<int>{0};
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
        DG_ASSIGN_OR_RETURN(row.report, run_fresh(o, name, opt));
        row.bt = row.report.bt;
        rows.push_back(row);
        if (method == Method::kInCore && !incore) incore = rows.size() - 1;
      }
    }
  }
  if (incore) {
    const RunReport base = rows[*incore].report;
    for (MethodsBenchRow& row : rows) {
      row.ratio_to_incore = row.report.mlups() / base.mlups();
      row.compute_ratio_to_incore = row.report.mlups() / base.compute_mlups();
    }
  }
  return rows;
}

}  // namespace deepgrid
