#include "engines/device_sweep.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/stopwatch.h"
#include "deepgrid/integrity.h"

namespace deepgrid::internal::stream {

DeviceSweep::DeviceSweep(Grid& grid, const Scheme& scheme, const Boundary& b,
                         const StreamPlan& plan, const DevicePlan& device, io::BlockIo& io,
                         const ResolvedProbes* probes, const GridPlacement& placement)
    : grid_(grid),
      scheme_(scheme),
      b_(b),
      plan_(plan),
      device_plan_(device),
      probes_(probes),
      placement_(placement),
      s_(grid.shape()),
      plane_bytes_(grid.manifest().layout.plane_bytes),
      io_(grid, io, scheme.radius_z()) {}

Status DeviceSweep::allocate() {
  DG_RETURN_IF_ERROR(io_.allocate(plan_.io_buffers, plan_.block));
  DG_ASSIGN_OR_RETURN(device::Device d,
                      device::Device::open(device_plan_.device, device_plan_.budget));
  device_.emplace(std::move(d));
  const int64_t planes = device_plan_.buffer_planes;
  grids_.resize(static_cast<size_t>(device_plan_.slab_buffers));
  for (device::Buffer& g : grids_) {
    DG_ASSIGN_OR_RETURN(g, device_->allocate(planes * plane_bytes_, "a slab's buffer"));
  }
  DG_ASSIGN_OR_RETURN(
      SlabKernels k, slab_kernels(*device_, scheme_, grid_.dtype(), b_, device_plan_, s_, probes_));
  kernels_.emplace(std::move(k));
  return Status::Ok();
}

Status DeviceSweep::sweep(const SweepRecord& record, int64_t reach, StreamStats& stats) {
  const SweepLayout layout{record.levels,
                           record.done,
                           scheme_.radius_z(),
                           s_.nz,
                           b_.kind == Boundary::Kind::kPeriodic,
                           Stages{record.levels, record.levels}};
  DG_RETURN_IF_ERROR(io_.begin(record, layout.read_order()));
  kept_.clear();
  // (A reach larger than the run's is only less trimmed.)
  return io_.finish(
      run_slabs(layout, record.step_from + 1, std::max<int64_t>(reach, record.levels), stats));
}

// Slab by slab from the sweep's first output plane (run_slab_pipeline): level-0 planes up,
// the pass's steps, the slab's own planes back and written. Compute time: the slabs' wall
// time less the host's waits for the disk and for copies.
Status DeviceSweep::run_slabs(const SweepLayout& layout, int64_t first, int64_t reach,
                              StreamStats& stats) {
  const int64_t nz = s_.nz, halo = int64_t{layout.levels} * layout.rz;
  const int64_t per_slab = device_plan_.slab_planes;
  SlabPass pass{&*device_,     &*kernels_,      nullptr, &scheme_,   s_,
                grid_.dtype(), layout.periodic, probes_, placement_, &stats.device_bytes_copied};
  pass.levels = layout.levels;
  pass.first = first;
  pass.reach = reach;
  auto slab = [&](int64_t i) {
    const int64_t z0 = layout.from + i * per_slab;
    return Slab(z0, std::min(nz, z0 + per_slab), halo, nz, layout.periodic);
  };
  SlabCopies copies;
  copies.up = [&](int64_t i, const device::Buffer& to,
                  const device::Event& after) -> Result<device::Event> {
    DG_RETURN_IF_ERROR(device_->wait(after));
    const Slab s = slab(i);
    // Planes from the next slab's first on are read again by it.
    const int64_t keep_from = s.z1 < nz ? Slab(s.z1, s.z1 + 1, halo, nz, layout.periodic).g0 : s.g1;
    DG_RETURN_IF_ERROR(upload(s, keep_from, layout.levels, to, stats));
    return device::Event{};
  };
  copies.down = [&](int64_t i, const device::Buffer& from,
                    const device::Event& ready) -> Result<device::Event> {
    DG_RETURN_IF_ERROR(device_->wait(ready));
    DG_RETURN_IF_ERROR(write_back(slab(i), from, stats));
    return device::Event{};
  };
  auto steps_of = [&](int64_t i, const device::Buffer* grids) {
    pass.grids = grids;
    return advance_slab(pass, slab(i));
  };
  const auto t0 = std::chrono::steady_clock::now();
  const double io_wait = stats.io_wait_seconds, copy_wait = copy_wait_seconds_;
  DG_RETURN_IF_ERROR(run_slab_pipeline(
      *device_, grids_, (nz - layout.from + per_slab - 1) / per_slab, copies, steps_of));
  stats.compute_seconds += std::max(0.0, seconds_since(t0) - (stats.io_wait_seconds - io_wait) -
                                             (copy_wait_seconds_ - copy_wait));
  DG_ASSIGN_OR_RETURN(const double copying, device_->take_transfer_seconds());
  stats.device_copy_seconds += copying;
  return io_.complete_writes(stats);
}

Status DeviceSweep::copied(Result<device::Event> copy, StreamStats& stats) {
  if (!copy.ok()) return copy.status();
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(device_->wait(*copy));
  copy_wait_seconds_ += seconds_since(t0);
  stats.device_bytes_copied += plane_bytes_;
  return Status::Ok();
}

// The slab's level-0 planes into `to`: each from its read buffer, checked against its checksum
// when the grid verifies, or from the planes kept; those a later slab reads again (from
// `keep_from` on, or pinned) are kept.
Status DeviceSweep::upload(const Slab& slab, int64_t keep_from, int levels,
                           const device::Buffer& to, StreamStats& stats) {
  const int64_t nz = s_.nz;
  for (int64_t g = slab.g0; g < slab.g1; ++g) {
    const int64_t p = ((g % nz) + nz) % nz;
    const bool pinned = is_pinned(b_, levels, scheme_.radius_z(), nz, p);
    const std::byte* values = nullptr;
    std::optional<size_t> read;  // the read buffer it came in
    auto kept = kept_.find(p);
    if (kept != kept_.end()) {
      values = kept->second.data();
    } else {
      DG_ASSIGN_OR_RETURN(read, io_.await_read(p, stats));
      values = io_.read_buffer(*read).bytes;
      if (grid_.verifying()) {
        DG_RETURN_IF_ERROR(
            grid_.verify_plane_hash(p, plane_hash(values, static_cast<size_t>(plane_bytes_))));
      }
      if (g >= keep_from || pinned) kept_[p].assign(values, values + plane_bytes_);
    }
    DG_RETURN_IF_ERROR(copied(
        device_->write_async(to, (g - slab.g0) * plane_bytes_, values, plane_bytes_), stats));
    if (read) DG_RETURN_IF_ERROR(io_.recycle_reads({*read}));
    // Kept planes go at their last use: at most the next slab's halo and the pinned planes
    // are held at a time (plan_device's count).
    if (kept != kept_.end() && !pinned && g < keep_from) kept_.erase(kept);
  }
  return io_.read_ahead();
}

// The slab's own planes from `from` into write buffers, hashed and written in place.
Status DeviceSweep::write_back(const Slab& slab, const device::Buffer& from, StreamStats& stats) {
  for (int64_t z = slab.z0; z < slab.z1; ++z) {
    DG_ASSIGN_OR_RETURN(const size_t b, io_.claim_write_buffer(stats));
    std::byte* out = io_.write_buffer(b).bytes;
    DG_RETURN_IF_ERROR(
        copied(device_->read_async(from, (z - slab.g0) * plane_bytes_, out, plane_bytes_), stats));
    DG_RETURN_IF_ERROR(
        io_.write_plane(b, z, plane_hash(out, static_cast<size_t>(plane_bytes_)), stats));
  }
  return io_.read_ahead();
}

}  // namespace deepgrid::internal::stream
