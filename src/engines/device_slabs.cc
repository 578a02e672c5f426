// The device engine's host-resident passes (device_engine.h): the grid in two host copies,
// each pass of bt steps through the device slab by slab (device_slab.h).
#include <algorithm>
#include <vector>

#include "core/stopwatch.h"
#include "engines/device_engine.h"
#include "engines/device_slab.h"

namespace deepgrid {

Status DeviceEngine::run_in_slabs(const Boundary& boundary, int64_t steps,
                                  const ProgressFn& progress, const ProbeRun& probes,
                                  int64_t* done) {
  using internal::seconds_since;
  const bool periodic = boundary.kind == Boundary::Kind::kPeriodic;
  const int64_t nz = shape_.nz, rz = scheme_.radius_z();
  DG_ASSIGN_OR_RETURN(
      internal::SlabKernels kernels,
      internal::slab_kernels(device_, scheme_, dtype_, boundary, plan_, shape_, probes.probes));
  internal::SlabPass pass{&device_, &kernels, grids_,        &scheme_,         shape_,
                          dtype_,   periodic, probes.probes, probes.placement, &traffic_.bytes};

  while (*done < steps) {
    pass.levels = static_cast<int>(std::min<int64_t>(plan_.pass_steps, steps - *done));
    pass.first = probes.step + *done + 1;
    pass.reach = steps - *done;
    const std::vector<std::byte>& from = host_[cur_];
    std::vector<std::byte>& to = host_[1 - cur_];
    for (int64_t z0 = 0; z0 < nz; z0 += plan_.slab_planes) {
      const internal::Slab slab(z0, std::min(nz, z0 + plan_.slab_planes), pass.levels * rz, nz,
                                periodic);
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t g = slab.g0; g < slab.g1;) {  // in runs of planes contiguous in `from`
        const int64_t h = ((g % nz) + nz) % nz, run = std::min(slab.g1 - g, nz - h);
        DG_RETURN_IF_ERROR(device_.write(grids_[0], (g - slab.g0) * plane_bytes_,
                                         from.data() + h * plane_bytes_, run * plane_bytes_));
        g += run;
      }
      traffic_.bytes += slab.planes() * plane_bytes_;
      traffic_.copy_seconds += seconds_since(t0);
      // Coefficient fields, which the step does not write, into the other buffer too.
      if (kernels.keeps_coefficients) {
        DG_RETURN_IF_ERROR(device_.copy(grids_[0], grids_[1], slab.planes() * plane_bytes_));
      }
      DG_ASSIGN_OR_RETURN(const int at, internal::advance_slab(pass, slab));
      t0 = std::chrono::steady_clock::now();
      DG_RETURN_IF_ERROR(device_.read(grids_[at], (slab.z0 - slab.g0) * plane_bytes_,
                                      to.data() + slab.z0 * plane_bytes_,
                                      (slab.z1 - slab.z0) * plane_bytes_));
      traffic_.bytes += (slab.z1 - slab.z0) * plane_bytes_;
      traffic_.copy_seconds += seconds_since(t0);
    }
    cur_ = 1 - cur_;
    *done += pass.levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
