// The device engine's host-resident passes (device_engine.h): the grid in two host copies,
// each pass of bt steps through the device slab by slab (device_slab.h), the copies on the
// transfer queue.
#include <algorithm>
#include <vector>

#include "engines/device_engine.h"
#include "engines/device_slab.h"

namespace deepgrid {

Status DeviceEngine::run_in_slabs(const Boundary& boundary, int64_t steps,
                                  const ProgressFn& progress, const ProbeRun& probes,
                                  int64_t* done) {
  const bool periodic = boundary.kind == Boundary::Kind::kPeriodic;
  const int64_t nz = shape_.nz, rz = scheme_.radius_z();
  DG_ASSIGN_OR_RETURN(
      internal::SlabKernels kernels,
      internal::slab_kernels(device_, scheme_, dtype_, boundary, plan_, shape_, probes.probes));
  internal::SlabPass pass{&device_, &kernels, nullptr,       &scheme_,         shape_,
                          dtype_,   periodic, probes.probes, probes.placement, &traffic_.bytes};
  auto slab = [&](int64_t i) {
    const int64_t z0 = i * plan_.slab_planes;
    return internal::Slab(z0, std::min(nz, z0 + plan_.slab_planes), pass.levels * rz, nz, periodic);
  };

  while (*done < steps) {
    pass.levels = static_cast<int>(std::min<int64_t>(plan_.pass_steps, steps - *done));
    pass.first = probes.step + *done + 1;
    pass.reach = steps - *done;
    const std::vector<std::byte>& from = host_[cur_];
    std::vector<std::byte>& to = host_[1 - cur_];
    internal::SlabCopies copies;
    // The slab's planes in runs contiguous in `from` (wrapped around, periodic).
    copies.up = [&](int64_t i, const device::Buffer& buffer,
                    const device::Event& after) -> Result<device::Event> {
      const internal::Slab s = slab(i);
      device::Event last;
      for (int64_t g = s.g0; g < s.g1;) {
        const int64_t h = ((g % nz) + nz) % nz, run = std::min(s.g1 - g, nz - h);
        DG_ASSIGN_OR_RETURN(
            last, device_.write_async(buffer, (g - s.g0) * plane_bytes_,
                                      from.data() + h * plane_bytes_, run * plane_bytes_, {after}));
        g += run;
      }
      traffic_.bytes += s.planes() * plane_bytes_;
      return last;
    };
    copies.down = [&](int64_t i, const device::Buffer& buffer,
                      const device::Event& ready) -> Result<device::Event> {
      const internal::Slab s = slab(i);
      traffic_.bytes += (s.z1 - s.z0) * plane_bytes_;
      return device_.read_async(buffer, (s.z0 - s.g0) * plane_bytes_,
                                to.data() + s.z0 * plane_bytes_, (s.z1 - s.z0) * plane_bytes_,
                                {ready});
    };
    auto steps_of = [&](int64_t i, const device::Buffer* grids) {
      pass.grids = grids;
      return internal::advance_slab(pass, slab(i));
    };
    DG_RETURN_IF_ERROR(internal::run_slab_pipeline(device_, grids_, plan_.slabs, copies, steps_of));
    DG_ASSIGN_OR_RETURN(const double copying, device_.take_transfer_seconds());
    traffic_.copy_seconds += copying;
    cur_ = 1 - cur_;
    *done += pass.levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
