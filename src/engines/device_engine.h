// The device engine, device-resident placement: the whole grid in an accelerator's memory
// (device/device.h), advanced there step by step and read back once.
//
// Two copies of the grid in its on-disk layout; each step is one launch of the scheme's
// OpenCL kernel (kernels/device_source.h) from one copy into the other, so its bits are those
// of tests/reference.h. Coefficient fields are kept equal in both copies and not rewritten,
// unless a source adds to one. Sources and receivers run on the device too: a pass's source
// values go there once, the receivers' values come back once per pass.
//
// Placements for grids larger than the device budget (host-resident: planes through a device
// wavefront; three tiers: the stream engine feeding it) are not built yet: plan_device
// refuses them with the sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/probes.h"
#include "deepgrid/progress.h"
#include "deepgrid/scheme.h"
#include "device/device.h"
#include "engines/incore_engine.h"

namespace deepgrid {

struct DeviceOptions {
  std::string device;      // device::choose_device's argument: ID, "gpu", "cpu" or "" (any)
  int64_t device_mem = 0;  // device budget in bytes; 0: device::default_device_budget
  int bt = 0;              // steps between progress calls and receivers' reads; 0: kMaxAutoBt
  bool flush_subnormals = false;
};

struct DevicePlan {
  device::DeviceInfo device;
  int64_t budget = 0;        // device bytes the run may allocate
  int64_t grid_bytes = 0;    // one copy of the grid's values
  int64_t device_bytes = 0;  // what the engine allocates: two copies, the probes' buffers
  int pass_steps = 1;        // steps between progress calls and receivers' reads
  int z_points = 1;          // consecutive points along z per work item
  bool flush_subnormals = false;
};

// The plan of a run of `steps` steps of `scheme` on a grid of `shape` and `dtype` with
// `probes`: the device chosen, its budget proven. Errors (invalid argument) say what does not
// fit or cannot run there and what to do.
Result<DevicePlan> plan_device(const Shape& shape, const Scheme& scheme, DType dtype,
                               const Probes& probes, int64_t steps, const DeviceOptions& options);

class DeviceEngine {
 public:
  static Result<DeviceEngine> create(const Shape& shape, const Scheme& scheme, DType dtype,
                                     const DevicePlan& plan);

  // A packed plane of every component (as Grid::read_planes gives it), in and out.
  Status load_plane(int64_t z, const std::byte* packed);
  Status store_plane(int64_t z, std::byte* packed);

  // Advances up to `steps` steps, applying `probes` (as InCoreEngine::advance: the steps done,
  // fewer when `progress`, asked after each pass of plan().pass_steps, says to stop; points
  // too far from probes.placement's needed box are not computed). Late halos arrive before
  // the first step.
  Result<int64_t> advance(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                          ProbeRun probes, const LateHalos& late);

  const DevicePlan& plan() const { return plan_; }
  int64_t plane_bytes() const { return plane_bytes_; }

  // What went between host and device so far (planes loaded and stored, probes' values), and
  // the time those copies took.
  struct Traffic {
    int64_t bytes = 0;
    double copy_seconds = 0;
  };
  const Traffic& traffic() const { return traffic_; }

 private:
  DeviceEngine(const Shape& shape, const Scheme& scheme, DType dtype, DevicePlan plan,
               device::Device device);
  Status run_steps(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                   const ProbeRun& probes, int64_t* done);

  Shape shape_;
  Scheme scheme_;
  DType dtype_;
  DevicePlan plan_;
  device::Device device_;
  device::Buffer grids_[2];
  int cur_ = 0;
  int64_t plane_bytes_ = 0;
  bool coefficients_equal_ = true;  // coefficient fields equal in both copies
  Traffic traffic_;
};

}  // namespace deepgrid
