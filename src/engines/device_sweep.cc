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

// The I/O buffers, beside a GPU in its pinned host memory: it copies them by DMA, where it
// stages every copy from pageable memory through buffers of its own. A CPU device's copies are
// memory copies: their own arena, on huge pages.
Status DeviceSweep::allocate() {
  DG_ASSIGN_OR_RETURN(device::Device d,
                      device::Device::open(device_plan_.device, device_plan_.budget));
  device_.emplace(std::move(d));
  std::byte* buffers = nullptr;  // (their own arena)
  if (device_plan_.device.gpu) {
    const size_t bytes = io_.arena_bytes(plan_.block, 2 * int64_t{plan_.block});
    DG_ASSIGN_OR_RETURN(io_memory_, device_->host_memory(static_cast<int64_t>(bytes + kPageBytes)));
    void* start = io_memory_.data();
    size_t room = bytes + kPageBytes;  // page-aligned inside, for O_DIRECT
    buffers = static_cast<std::byte*>(std::align(kPageBytes, bytes, start, room));
  }
  DG_RETURN_IF_ERROR(io_.allocate(plan_.block, 2 * int64_t{plan_.block}, buffers));
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

// Waits for the last of a group's copies on one transfer queue (they run in order there).
Status DeviceSweep::copied(const device::Event& last, int64_t planes, StreamStats& stats) {
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(device_->wait(last));
  copy_wait_seconds_ += seconds_since(t0);
  stats.device_bytes_copied += planes * plane_bytes_;
  return Status::Ok();
}

// Threads for `planes` checksums: no more than planes, so that a group of one to three does
// not wake the whole team each time (on an H200's 16-core machine a build that woke 16 for
// every group spent up to 2 s more per run on the host than one thread had; how much of that
// was the team is not measured: docs/performance/devices.md).
int DeviceSweep::team(size_t planes) const {
  return static_cast<int>(std::clamp<size_t>(planes, 1, static_cast<size_t>(plan_.threads)));
}

// Chunk j's level-0 planes into `to`, in groups of as many as there are read buffers: each
// from its read buffer, checked against its checksum when the grid verifies (the group's on
// the run's threads), or from the planes kept; periodic, those the sweep reads again at its
// other end (pinned) are kept until then. A group's copies are queued together and waited for
// once: a GPU then moves one plane while the next command is queued.
Status DeviceSweep::upload(const DeviceWavefront& w, int64_t j, const device::Buffer& to,
                           StreamStats& stats) {
  const int64_t nz = s_.nz;
  const auto [lo, hi] = w.window(0, j);
  for (int64_t g = lo; g < hi; g += plan_.block) {
    const int64_t n = std::min<int64_t>(plan_.block, hi - g);
    std::vector<const std::byte*> values(static_cast<size_t>(n));
    std::vector<int64_t> planes(static_cast<size_t>(n));
    std::vector<size_t> reads;       // the read buffers they came in
    std::vector<int64_t> unchecked;  // indices into the group read from disk
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = planes[size_t(i)] = (((w.g0 + g + i) % nz) + nz) % nz;
      if (auto kept = kept_.find(p); kept != kept_.end()) {
        values[size_t(i)] = kept->second.data();
        continue;
      }
      DG_ASSIGN_OR_RETURN(const size_t read, io_.await_read(p, stats));
      reads.push_back(read);
      unchecked.push_back(i);
      values[size_t(i)] = io_.read_buffer(read).bytes;
    }
    if (grid_.verifying()) {
      std::vector<Status> checked(unchecked.size());
      const PlaneHashing hashing = grid_.manifest().plane_hashing();
#pragma omp parallel for num_threads(team(unchecked.size())) schedule(static)
      for (size_t c = 0; c < unchecked.size(); ++c) {
        const auto i = static_cast<size_t>(unchecked[c]);
        checked[c] = grid_.verify_plane_hash(planes[i], plane_hash(values[i], hashing));
      }
      for (const Status& st : checked) DG_RETURN_IF_ERROR(st);
    }
    device::Event last;
    for (int64_t i = 0; i < n; ++i) {
      const auto* v = values[size_t(i)];
      const int64_t p = planes[size_t(i)];
      if (is_pinned(b_, w.levels, scheme_.radius_z(), nz, p) && !kept_.contains(p)) {
        kept_[p].assign(v, v + plane_bytes_);
      }
      DG_ASSIGN_OR_RETURN(
          last, device_->write_async(to, ((g + i) % w.ring(0)) * plane_bytes_, v, plane_bytes_));
    }
    DG_RETURN_IF_ERROR(copied(last, n, stats));
    DG_RETURN_IF_ERROR(io_.recycle_reads(reads));
  }
  return io_.read_ahead();
}

// Chunk j's output planes from `from` into write buffers, in groups of up to a block: their
// copies queued together and waited for once, hashed on the run's threads, written in place.
Status DeviceSweep::write_back(const DeviceWavefront& w, int64_t j, const device::Buffer& from,
                               StreamStats& stats) {
  const auto [lo, hi] = w.output(j);
  for (int64_t g = lo; g < hi; g += plan_.block) {
    const int64_t n = std::min<int64_t>(plan_.block, hi - g);
    std::vector<size_t> buffers;
    device::Event last;
    for (int64_t u = g; u < g + n; ++u) {
      DG_ASSIGN_OR_RETURN(const size_t b, io_.claim_write_buffer(stats));
      buffers.push_back(b);
      DG_ASSIGN_OR_RETURN(last, device_->read_async(from, (u % w.ring(w.levels)) * plane_bytes_,
                                                    io_.write_buffer(b).bytes, plane_bytes_));
    }
    DG_RETURN_IF_ERROR(copied(last, n, stats));
    std::vector<uint64_t> hashes(buffers.size());
    const PlaneHashing hashing = grid_.manifest().plane_hashing();
#pragma omp parallel for num_threads(team(buffers.size())) schedule(static)
    for (size_t i = 0; i < buffers.size(); ++i) {
      hashes[i] = plane_hash(io_.write_buffer(buffers[i]).bytes, hashing);
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      DG_RETURN_IF_ERROR(
          io_.write_plane(buffers[i], w.g0 + g + static_cast<int64_t>(i), hashes[i], stats));
    }
  }
  return io_.read_ahead();
}

}  // namespace deepgrid::internal::stream
