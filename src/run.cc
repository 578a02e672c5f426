#include "deepgrid/run.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "deepgrid/fsck.h"
#include "deepgrid/io/plane_transfer.h"
#include "deepgrid/plan.h"
#include "deepgrid/preflight.h"
#include "deepgrid/stream.h"

namespace deepgrid {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename T>
Result<RunReport> run_incore(Grid& grid, const RunOptions& opt, const RunPlan& plan) {
  const auto t0 = std::chrono::steady_clock::now();
  const Shape& s = grid.shape();
  InCoreOptions io;
  io.threads = plan.incore.threads;
  io.bt = plan.incore.bt;
  io.tile_x = plan.incore.tile_x;
  io.tile_y = plan.incore.tile_y;
  DG_ASSIGN_OR_RETURN(InCoreEngine<T> engine,
                      InCoreEngine<T>::create(s, opt.stencil, opt.steps, io));

  DG_RETURN_IF_ERROR(io::read_plane_range(grid, 0, s.nz, [&](int64_t z, const void* values) {
    engine.load_plane(z, static_cast<const T*>(values));
    return Status::Ok();
  }));

  const auto tc = std::chrono::steady_clock::now();
  const int64_t done = engine.advance(opt.boundary, opt.steps, opt.progress);
  const double compute = seconds_since(tc);

  DG_RETURN_IF_ERROR(io::write_plane_range(grid, 0, s.nz, [&](int64_t z, void* values) {
    engine.store_plane(z, static_cast<T*>(values));
    return Status::Ok();
  }));
  const uint64_t grid_bytes = static_cast<uint64_t>(s.nz * grid.manifest().layout.plane_stride);

  RunReport r;
  r.method = std::string(method_name(plan.method));
  r.threads = engine.plan().threads;
  r.bt = engine.plan().bt;
  r.tile = std::to_string(engine.plan().tile_x) + "x" + std::to_string(engine.plan().tile_y);
  r.steps = done;
  r.compute_seconds = compute;
  r.engine_memory = plan.memory_bytes;
  r.bytes_read = grid_bytes;
  r.bytes_written = grid_bytes;
  r.seconds = seconds_since(t0);
  return r;
}

Result<RunReport> run_stream(Grid& grid, const RunOptions& opt, const RunPlan& plan) {
  DG_ASSIGN_OR_RETURN(StreamStats stats,
                      advance_stream(grid, opt.stencil, opt.boundary, opt.steps, plan.stream,
                                     plan.stream_options, opt.progress));
  RunReport r;
  r.method = std::string(method_name(plan.method));
  r.threads = plan.stream.threads;
  r.bt = plan.stream.bt;
  r.tile = std::to_string(plan.stream.tile_x) + "x" + std::to_string(plan.stream.tile_y);
  r.steps = stats.steps;
  r.compute_seconds = stats.compute_seconds;
  r.io_wait_seconds = stats.io_wait_seconds;
  r.io_backend = std::string(io::backend_name(stats.backend));
  r.bytes_read = stats.bytes_read;
  r.bytes_written = stats.bytes_written;
  r.engine_memory = plan.memory_bytes;
  return r;
}

}  // namespace

std::string_view method_name(Method m) {
  switch (m) {
    case Method::kAuto:
      return "auto";
    case Method::kInCore:
      return "incore";
    case Method::kStream:
      return "stream";
    case Method::kNaive:
      return "naive";
  }
  return "?";
}

Result<Method> parse_method(std::string_view text) {
  if (text == "auto") return Method::kAuto;
  if (text == "incore") return Method::kInCore;
  if (text == "stream") return Method::kStream;
  if (text == "naive") return Method::kNaive;
  return invalid_argument("unknown method '" + std::string(text) +
                          "'; use auto, incore, stream or naive");
}

Status check_run(const Manifest& m, const RunOptions& opt) {
  if (opt.steps < 0) {
    return invalid_argument("--steps is " + std::to_string(opt.steps) +
                            "; give a number of steps >= 0");
  }
  const Stencil& st = opt.stencil;
  const Shape& s = m.shape;
  struct Axis {
    const char* name;
    int r;
    int64_t n;
  } axes[] = {{"x", st.radius_x(), s.nx}, {"y", st.radius_y(), s.ny}, {"z", st.radius_z(), s.nz}};
  for (const Axis& a : axes) {
    if (a.r > a.n) {
      return invalid_argument("stencil " + st.name() + " reaches " + std::to_string(a.r) +
                              " points along " + a.name + " but the grid has only " +
                              std::to_string(a.n) + "; use a smaller stencil or a larger grid");
    }
  }
  return Status::Ok();
}

Result<RunReport> run_grid(const std::string& dir, const RunOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  DG_ASSIGN_OR_RETURN(Grid grid, Grid::open(dir, Grid::Mode::kReadWrite));
  DG_RETURN_IF_ERROR(check_run(grid.manifest(), opt));
  DG_ASSIGN_OR_RETURN(RunPlan plan, plan_run(grid, opt, opt.machine));
  DG_ASSIGN_OR_RETURN(const PreflightFacts facts, measure_preflight(grid));
  DG_RETURN_IF_ERROR(check_preflight(grid.manifest(), plan, facts));
  if (opt.verify) {
    DG_RETURN_IF_ERROR(grid.enable_verification());
    // In place, a sweep overwrites planes before it reads the last ones: find damage first.
    if (plan.method != Method::kInCore) DG_RETURN_IF_ERROR(read_every_plane(grid));
  }
  auto result =
      plan.method == Method::kInCore
          ? dispatch_dtype(grid.dtype(),
                           [&](auto tag) { return run_incore<decltype(tag)>(grid, opt, plan); })
          : run_stream(grid, opt, plan);
  if (!result.ok()) return result.status();
  RunReport r = std::move(result).value();
  const Manifest& before = grid.manifest();
  r.direct_io = grid.direct_io();
  r.stencil = opt.stencil.name();
  r.stencil_points = opt.stencil.size();
  r.flops_per_update = opt.stencil.flops_per_update();
  r.shape = before.shape.to_string();
  r.dtype = std::string(dtype_name(before.dtype));
  r.boundary = opt.boundary.to_string();
  r.points = before.shape.points();
  r.step_from = before.step;
  r.step_to = before.step + r.steps;

  Manifest after = before;
  after.step = r.step_to;
  nlohmann::json details = {{"stencil", nlohmann::json::parse(opt.stencil.to_json())},
                            {"boundary", r.boundary},
                            {"method", r.method},
                            {"steps", r.steps},
                            {"step_from", r.step_from},
                            {"step_to", r.step_to}};
  after.history.push_back({utc_now(), "run", details.dump()});
  DG_RETURN_IF_ERROR(grid.commit(after));
  r.seconds = seconds_since(t0);
  r.peak_memory = peak_resident_bytes();
  return r;
}

}  // namespace deepgrid
