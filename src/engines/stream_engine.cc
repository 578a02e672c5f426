// advance_stream (stream_engine.h): runs a plan as sweeps, each recorded on disk before it
// starts and committed after it, finishing an interrupted sweep first. The sweep itself is
// stream_sweep.cc; the plan, stream_plan.cc; sweeps in bands of rows, stream_bands.cc.
#include "engines/stream_engine.h"

#include <algorithm>
#include <memory>
#include <string>

#include "deepgrid/resume.h"
#include "engines/device_sweep.h"
#include "engines/stream_bands.h"
#include "engines/stream_sweep.h"

namespace deepgrid {
namespace {

SweepRecord new_sweep_record(const Grid& grid, const Scheme& stencil, const Boundary& boundary,
                             int levels, bool flush_subnormals) {
  const Manifest& m = grid.manifest();
  SweepRecord r;
  r.step_from = m.step;
  r.levels = levels;
  r.base_from = m.base;
  r.spare = m.layout.spare_planes;
  r.stencil = stencil.to_json();
  r.boundary = boundary.to_string();
  r.flush_subnormals = flush_subnormals;
  if (boundary.kind == Boundary::Kind::kPeriodic) r.side_file = kSideFileName;
  r.started = utc_now();
  return r;
}

// The record of the next sweep of at most `levels` levels: the grid's interrupted sweep, which
// must be one this run can finish, or a new one, saved before it starts.
Result<SweepRecord> next_sweep_record(Grid& grid, const Scheme& stencil, const Boundary& boundary,
                                      const StreamPlan& plan, int64_t levels) {
  if (grid.sweep_record()) {
    SweepRecord record = *grid.sweep_record();  // finish the interrupted sweep first
    if (record.levels > plan.bt || !json_equal(record.stencil, stencil.to_json()) ||
        record.boundary != boundary.to_string() ||
        record.flush_subnormals != plan.flush_subnormals ||
        record.spare != grid.manifest().layout.spare_planes) {
      return invalid_argument("the interrupted sweep of " + grid.dir() +
                              " needs its own stencil, boundary, subnormal mode and bt " +
                              std::to_string(record.levels) +
                              " to finish; resume it with "
                              "'deepgrid run " +
                              grid.dir() + " --resume'");
    }
    return record;
  }
  SweepRecord record =
      new_sweep_record(grid, stencil, boundary,
                       static_cast<int>(std::min<int64_t>(plan.bt, levels)), plan.flush_subnormals);
  DG_RETURN_IF_ERROR(grid.save_sweep(record));
  return record;
}

// The block I/O the options ask for, with queues for the plan's buffers; io_uring falls back to
// the thread pool where the kernel lacks it (`backend` says which one is used).
Result<std::unique_ptr<io::BlockIo>> open_block_io(const StreamPlan& plan, const Manifest& m,
                                                   const StreamOptions& options,
                                                   io::Backend* backend) {
  io::BlockIoOptions io_opt;
  io_opt.backend = options.io;
  // (A band's transfer is a request per component, and its read across the grid's ends up to
  // three: two more per read buffer. A whole plane's read takes two where the coefficients
  // are in their own files.)
  io_opt.queue_depth = static_cast<unsigned>(
      plan.bands > 0 ? (plan.io_buffers + 2 * plan.block) * m.components()
                     : plan.io_buffers + (m.has_coef_files() ? plan.block : 0));
  io_opt.fault_hook = options.fault_hook;
  auto io = io::make_block_io(io_opt);
  if (!io.ok() && io.status().code() == ErrorCode::kUnsupported &&
      options.io == io::Backend::kUring) {
    io_opt.backend = io::Backend::kThreads;  // reported: stats.backend says which one ran
    io = io::make_block_io(io_opt);
  }
  *backend = io_opt.backend;
  return io;
}

}  // namespace

Result<StreamStats> advance_stream(Grid& grid, const Scheme& stencil, const Boundary& boundary,
                                   int64_t steps, const StreamPlan& plan,
                                   const StreamOptions& options, const ProgressFn& progress) {
  DG_RETURN_IF_ERROR(stencil.check_dtype(grid.dtype()));
  if (plan.bands > 0) {
    if (options.device != nullptr) {
      return invalid_argument(
          "--band-rows sweeps on the CPU, not in a device run; leave out --band-rows");
    }
    StreamStats stats;
    DG_ASSIGN_OR_RETURN(const std::unique_ptr<io::BlockIo> io,
                        open_block_io(plan, grid.manifest(), options, &stats.backend));
    DG_RETURN_IF_ERROR(internal::stream::advance_in_bands(grid, stencil, boundary, steps, plan, *io,
                                                          options, progress, stats));
    return stats;
  }
  if (grid.can_grow_spare() && !grid.sweep_record()) {
    DG_RETURN_IF_ERROR(grid.grow_spare(spare_planes_needed(plan, stencil)));
  }
  StreamStats stats;
  DG_ASSIGN_OR_RETURN(const std::unique_ptr<io::BlockIo> io,
                      open_block_io(plan, grid.manifest(), options, &stats.backend));
  // The sweeps, computed by the CPU's wavefronts or by a device.
  auto sweeps = [&](auto& run) -> Status {
    DG_RETURN_IF_ERROR(run.allocate());
    while (stats.steps < steps) {
      DG_ASSIGN_OR_RETURN(const SweepRecord record,
                          next_sweep_record(grid, stencil, boundary, plan, steps - stats.steps));
      DG_RETURN_IF_ERROR(run.sweep(record, steps - stats.steps, stats));
      stats.steps += record.levels;
      // Asked before the commit, so that what the caller saves of the sweep (receivers'
      // values) is on disk whenever the grid holds the sweep's step.
      const bool go_on = !progress || progress(stats.steps, steps);
      Manifest swept = grid.manifest();
      swept.step += record.levels;
      swept.base = record.base_to(swept.slots());
      DG_RETURN_IF_ERROR(grid.commit(swept));
      if (!go_on) break;
    }
    return Status::Ok();
  };
  Status st;
  if (options.device != nullptr) {
    internal::stream::DeviceSweep run(grid, stencil, boundary, plan, *options.device, *io,
                                      options.probes, options.placement);
    st = sweeps(run);
  } else {
    st = dispatch_dtype(grid.dtype(), [&](auto tag) -> Status {
      internal::stream::StreamSweep<decltype(tag)> run(grid, stencil, boundary, plan, *io,
                                                       options.probes, options.placement);
      return sweeps(run);
    });
  }
  if (!st.ok()) return st;
  return stats;
}

}  // namespace deepgrid
