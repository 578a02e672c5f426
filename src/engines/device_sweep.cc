#include "engines/device_sweep.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "core/aligned_buffer.h"
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

// The I/O buffers in the device's pinned host memory where it has some: a GPU then copies
// them by DMA, where it stages every copy from pageable memory through buffers of its own.
Status DeviceSweep::allocate() {
  DG_ASSIGN_OR_RETURN(device::Device d,
                      device::Device::open(device_plan_.device, device_plan_.budget));
  device_.emplace(std::move(d));
  const auto bytes = static_cast<size_t>(plan_.io_buffers) * io_.buffer_bytes();
  DG_ASSIGN_OR_RETURN(io_memory_, device_->host_memory(static_cast<int64_t>(bytes + kPageBytes)));
  void* start = io_memory_.data();
  size_t room = bytes + kPageBytes;  // page-aligned inside, for O_DIRECT
  DG_RETURN_IF_ERROR(
      io_.allocate(plan_.io_buffers, plan_.block,
                   static_cast<std::byte*>(std::align(kPageBytes, bytes, start, room))));
  DG_ASSIGN_OR_RETURN(rings_,
                      wavefront_rings(*device_, device_plan_, scheme_.radius_z(), plane_bytes_));
  DG_ASSIGN_OR_RETURN(DeviceWavefrontKernels k, wavefront_kernels(*device_, scheme_, grid_.dtype(),
                                                                  b_, device_plan_, s_, probes_));
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
      run_wavefront(layout, record.step_from + 1, std::max<int64_t>(reach, record.levels), stats));
}

// The sweep's output planes from its first on as a wavefront (run_wavefront): level-0 planes
// up, the levels' steps, the new planes back and written. Compute time: the wavefront's wall
// time less the host's waits for the disk and for copies.
Status DeviceSweep::run_wavefront(const SweepLayout& layout, int64_t first, int64_t reach,
                                  StreamStats& stats) {
  const DeviceWavefront w(layout.from, s_.nz, s_.nz, layout.periodic, layout.levels, layout.rz,
                          device_plan_.chunk_planes, overlaps(device_plan_, layout.levels));
  DeviceWavefrontPass pass{
      &*device_,     &*kernels_,      &rings_, &scheme_,   s_,
      grid_.dtype(), layout.periodic, probes_, placement_, &stats.device_bytes_copied};
  pass.first = first;
  pass.reach = reach;
  ChunkCopies copies;
  copies.up = [&](int64_t j, const device::Buffer& to,
                  const device::Event& after) -> Result<device::Event> {
    DG_RETURN_IF_ERROR(device_->wait(after));
    DG_RETURN_IF_ERROR(upload(w, j, to, stats));
    return device::Event{};
  };
  copies.down = [&](int64_t j, const device::Buffer& from,
                    const device::Event& ready) -> Result<device::Event> {
    DG_RETURN_IF_ERROR(device_->wait(ready));
    DG_RETURN_IF_ERROR(write_back(w, j, from, stats));
    return device::Event{};
  };
  const auto t0 = std::chrono::steady_clock::now();
  const double io_wait = stats.io_wait_seconds, copy_wait = copy_wait_seconds_;
  DG_RETURN_IF_ERROR(internal::run_wavefront(pass, w, copies));
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

// Chunk j's level-0 planes into `to`: each from its read buffer, checked against its checksum
// when the grid verifies, or from the planes kept; periodic, those the sweep reads again at
// its other end (pinned) are kept until then.
Status DeviceSweep::upload(const DeviceWavefront& w, int64_t j, const device::Buffer& to,
                           StreamStats& stats) {
  const int64_t nz = s_.nz;
  const auto [lo, hi] = w.window(0, j);
  for (int64_t u = lo; u < hi; ++u) {
    const int64_t p = (((w.g0 + u) % nz) + nz) % nz;
    const bool pinned = is_pinned(b_, w.levels, scheme_.radius_z(), nz, p);
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
            grid_.verify_plane_hash(p, plane_hash(values, grid_.manifest().plane_hashing())));
      }
      if (pinned) kept_[p].assign(values, values + plane_bytes_);
    }
    DG_RETURN_IF_ERROR(copied(
        device_->write_async(to, (u % w.ring(0)) * plane_bytes_, values, plane_bytes_), stats));
    if (read) DG_RETURN_IF_ERROR(io_.recycle_reads({*read}));
  }
  return io_.read_ahead();
}

// Chunk j's output planes from `from` into write buffers, hashed and written in place.
Status DeviceSweep::write_back(const DeviceWavefront& w, int64_t j, const device::Buffer& from,
                               StreamStats& stats) {
  const auto [lo, hi] = w.output(j);
  for (int64_t u = lo; u < hi; ++u) {
    DG_ASSIGN_OR_RETURN(const size_t b, io_.claim_write_buffer(stats));
    std::byte* out = io_.write_buffer(b).bytes;
    DG_RETURN_IF_ERROR(
        copied(device_->read_async(from, (u % w.ring(w.levels)) * plane_bytes_, out, plane_bytes_),
               stats));
    DG_RETURN_IF_ERROR(
        io_.write_plane(b, w.g0 + u, plane_hash(out, grid_.manifest().plane_hashing()), stats));
  }
  return io_.read_ahead();
}

}  // namespace deepgrid::internal::stream
