// The device engine's host-resident passes (device_engine.h): the grid in host memory, each
// pass of bt steps through the device as a wavefront (device_wavefront.h), the copies on the
// transfer queue. Not periodic, a pass writes its output planes into the copy it reads: chunk
// j's output planes lie below (j + 1) C - bt rz, every plane of them went up with chunk j or
// before (whose copies up the steps, and so the copy down, waited for), and the planes still to
// go up lie at (j + 1) C and above. Periodic, the pass reads its first planes again at its end
// and writes the other copy.
#include <algorithm>
#include <vector>

#include "engines/device_engine.h"
#include "engines/device_wavefront.h"

namespace deepgrid {

Status DeviceEngine::run_host_passes(const Boundary& boundary, int64_t steps,
                                     const ProgressFn& progress, const ProbeRun& probes,
                                     int64_t* done) {
  const bool periodic = boundary.kind == Boundary::Kind::kPeriodic;
  if (periodic && plan_.host_copies < 2) {
    return invalid_argument(
        "a host-resident device plan made for a boundary bounded in z cannot run periodic "
        "passes; plan the run with its boundary");
  }
  const int64_t nz = shape_.nz, rz = scheme_.radius_z();
  DG_ASSIGN_OR_RETURN(internal::DeviceWavefrontKernels kernels,
                      internal::wavefront_kernels(device_, scheme_, dtype_, boundary, plan_, shape_,
                                                  probes.probes));
  internal::DeviceWavefrontPass pass{&device_,         &kernels,       &grids_,  &scheme_,
                                     shape_,           dtype_,         periodic, probes.probes,
                                     probes.placement, &traffic_.bytes};

  while (*done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(plan_.pass_steps, steps - *done));
    const internal::DeviceWavefront w(0, nz, nz, periodic, levels, rz, plan_.chunk_planes,
                                      internal::overlaps(plan_, levels));
    pass.first = probes.step + *done + 1;
    pass.reach = steps - *done;
    const device::HostMemory& from = host_[cur_];
    const int next = (cur_ + 1) % plan_.host_copies;  // (one copy: the pass writes in place)
    const device::HostMemory& to = host_[next];
    // In runs of planes that lie one after the other both in the ring and in the host's grid
    // (a ring's slots and, periodic, the grid's planes wrap): an H200's driver took ~130 us a
    // copy command, whether of 1 or 4 MiB (docs/performance/devices.md).
    auto runs = [&](int k, int64_t lo, int64_t hi, auto&& copy) -> Result<device::Event> {
      device::Event last;
      for (int64_t u = lo; u < hi;) {
        const int64_t p = (((w.g0 + u) % nz) + nz) % nz, slot = u % w.ring(k);
        int64_t end = u + 1;
        while (end < hi && end % w.ring(k) == slot + (end - u) && p + (end - u) < nz) ++end;
        DG_ASSIGN_OR_RETURN(last,
                            copy(slot * plane_bytes_, p * plane_bytes_, (end - u) * plane_bytes_));
        u = end;
      }
      traffic_.bytes += std::max<int64_t>(0, hi - lo) * plane_bytes_;
      return last;
    };
    internal::ChunkCopies copies;
    copies.up = [&](int64_t j, const device::Buffer& ring,
                    const device::Event& after) -> Result<device::Event> {
      const auto [lo, hi] = w.window(0, j);
      return runs(0, lo, hi, [&](int64_t slot, int64_t at, int64_t bytes) {
        return device_.write_async(ring, slot, from.data() + at, bytes, {after});
      });
    };
    copies.down = [&](int64_t j, const device::Buffer& ring,
                      const device::Event& ready) -> Result<device::Event> {
      const auto [lo, hi] = w.output(j);
      return runs(levels, lo, hi, [&](int64_t slot, int64_t at, int64_t bytes) {
        return device_.read_async(ring, slot, to.data() + at, bytes, {ready});
      });
    };
    DG_RETURN_IF_ERROR(internal::run_wavefront(pass, w, copies));
    DG_ASSIGN_OR_RETURN(const double copying, device_.take_transfer_seconds());
    traffic_.copy_seconds += copying;
    cur_ = next;
    *done += levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
