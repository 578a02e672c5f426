#include "run/snapshots.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "core/file_util.h"
#include "core/stopwatch.h"

namespace deepgrid {

int64_t steps_to_next_snapshot(const Snapshots& s, int64_t step, int64_t left) {
  if (!s.wanted()) return left;
  return std::min(left, s.every - step % s.every);
}

namespace {

// Snapshot steps in [from, to]: the multiples of `every`.
int64_t snapshots_between(int64_t every, int64_t from, int64_t to) {
  return to / every - (from + every - 1) / every + 1;
}

// The directory whose filesystem will hold the snapshots: DIR, or the nearest existing
// ancestor of a DIR still to be made.
std::string existing_dir_of(std::string dir) {
  while (!dir.empty() && ::access(dir.c_str(), F_OK) != 0) {
    const std::string parent = internal::parent_path(dir);
    if (parent == dir) break;
    dir = parent;
  }
  return dir.empty() ? std::string(".") : dir;
}

}  // namespace

Status check_snapshots(const Manifest& m, const Snapshots& s, Method method, int64_t from,
                       int64_t to) {
  if (s.every < 0 || (s.every == 0 && !s.dir.empty())) {
    return invalid_argument("--every is " + std::to_string(s.every) +
                            "; give the steps between snapshots, >= 1 (--every 10)");
  }
  if (!s.wanted()) return Status::Ok();
  if (s.dir.empty()) {
    return invalid_argument("--every needs --snapshots DIR, the directory to write them into");
  }
  if (method == Method::kTiled) {
    return invalid_argument(
        "the tiled method cannot stop on its way for snapshots; run with "
        "--method auto, incore or stream");
  }
  DG_RETURN_IF_ERROR(check_series_dir(s.dir, m, s.format));
  const int64_t count = from <= to ? snapshots_between(s.every, from, to) : 0;
  // Each file, and the index rewritten beside the last one (a few KiB per snapshot).
  const uint64_t bytes =
      static_cast<uint64_t>(count) * (vtkhdf_bytes(m, s.format) + (64 << 10)) + (1 << 20);
  const std::string dir = internal::absolute_path(s.dir);
  return internal::check_free_space({{existing_dir_of(dir), bytes}},
                                    std::to_string(count) + " snapshots in " + s.dir);
}

bool has_snapshot(const Snapshots& s, int64_t step) {
  return ::access(internal::join_path(s.dir, series_file_name(step)).c_str(), F_OK) == 0;
}

uint64_t snapshot_memory(const Manifest& m) {
  return static_cast<uint64_t>(io::plane_transfer_bytes(m)) +
         static_cast<uint64_t>(m.shape.plane_points()) * dtype_size(m.dtype);
}

Result<RunOptions> leave_room_for_snapshots(RunOptions opt, const Manifest& m) {
  if (!opt.snapshots.wanted() || opt.mem_budget == 0) return opt;
  const uint64_t need = snapshot_memory(m);
  if (need >= opt.mem_budget) {
    return Status(ErrorCode::kResource, "--mem " + format_size(opt.mem_budget) +
                                            " leaves no room beside a snapshot's " +
                                            format_size(need) + " of planes; give more --mem");
  }
  opt.mem_budget -= need;
  return opt;
}

Status take_snapshot(const Manifest& m, const Snapshots& s, const io::PlaneSource& planes,
                     int64_t step, RunReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(add_to_series(s.dir, m, planes, step, s.format));
  report->snapshots += 1;
  report->snapshot_seconds += internal::seconds_since(t0);
  return Status::Ok();
}

Status take_missing_snapshot(const Grid& grid, const Snapshots& s, RunReport* report) {
  const int64_t step = grid.manifest().step;
  // (A grid in the middle of a sweep mixes two steps: its sweep is finished first.)
  if (!snapshot_due(s, step) || grid.sweep_record()) return Status::Ok();
  if (has_snapshot(s, step)) return Status::Ok();
  return take_snapshot(grid.manifest(), s, io::planes_of(grid), step, report);
}

}  // namespace deepgrid
