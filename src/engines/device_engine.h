// The device engine: a grid advanced on an accelerator (device/device.h), in one of two
// placements.
//
// Device-resident: the grid fits the device budget. Two copies of it in its on-disk layout
// on the device; each step is one launch of the scheme's OpenCL kernel
// (kernels/device_source.h) from one copy into the other, so its bits are those of
// tests/reference.h. Coefficient fields are kept equal in both copies and not rewritten,
// unless a source adds to one. Loaded once, stored once.
//
// Host-resident: the grid fits host memory but not the device. Two copies of it in host
// memory; a pass of bt steps goes through the device as a wavefront (device_wavefront.h):
// level-0 planes go up a chunk at a time, each level computes the chunk's planes rz planes
// behind the level before into its own ring of planes on the device, and the last level's
// planes come back into the other host copy. Each pass moves the grid over once each way
// whatever bt, and computes each plane once per level (periodic z: plus bt * rz planes past
// each end).
//
// In both, sources and receivers run on the device: a pass's source values go there once,
// the receivers' values come back once per pass.
//
// Three tiers: the grid fits neither; it stays on disk and the stream engine's sweeps (reads
// ahead, writes behind, durable and resumable) feed the wavefront (device_sweep.h): a few
// planes in host memory, the rings on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/probes.h"
#include "deepgrid/progress.h"
#include "deepgrid/scheme.h"
#include "device/device.h"
#include "engines/incore_engine.h"
#include "store/plane_rect.h"

namespace deepgrid {

namespace internal {
class StepLauncher;
}

struct DeviceOptions {
  std::string device;      // device::choose_device's argument: ID, "gpu", "cpu" or "" (any)
  int64_t device_mem = 0;  // device budget in bytes; 0: device::default_device_budget
  // Steps per pass: between progress calls and receivers' reads and, host-resident, per trip
  // of the grid through the device (at most: fewer when a wavefront that deep does not fit the
  // device). 0: automatic, up to kMaxAutoBt.
  int bt = 0;
  Boundary::Kind boundary = Boundary::Kind::kDirichlet;
  bool flush_subnormals = false;
  // A wavefront's copies beside its steps (true: its first and last rings hold a chunk more),
  // in turn with them (false), or the cost model's choice (RunOptions::device_overlap).
  std::optional<bool> overlap;
  // Host memory: the budget (0: none), and what the host-resident placement needs besides
  // the grid's copies (plane transfers); a grid whose copies do not fit stays on disk
  // (three tiers), where an I/O buffer takes `io_plane_bytes` (the layout's plane stride).
  int64_t host_mem = 0;
  int64_t host_transfer_bytes = 0;
  int64_t io_plane_bytes = 0;
  // A point's copy one way between host and device, in the device's updates: its step rate
  // over its copy rate, both measured (plan/device_rates.h); taken on GPUs. 0: DeviceCosts'
  // default.
  double copy_point_updates = 0;
  // Three tiers: a sweep's read and write of a point from disk, in the device's updates
  // (measured disk and step rates); taken on GPUs. 0: DeviceCosts' default.
  double disk_point_updates = 0;
};

// What the wavefronts' cost model charges, in the device's updates (a point's update, the
// unit its kernels' time is counted in): plan_device chooses depth and chunk by them, the
// planner predicts seconds with them (docs/performance/devices.md fitted them on an H200).
struct DeviceCosts {
  double copy_point = 0;    // a point's copy one way
  double launch = 0;        // a kernel launch, on the queue its kernels run on
  double copy_command = 0;  // a copy command, on its transfer queue
  double disk_point = 0;    // three tiers: a point read and written by a sweep
  // Whether copies run beside the kernels on queues of their own (a GPU: one per direction)
  // rather than on the cores the kernels take (a CPU device); a GPU's host reads and writes
  // the disk beside both, a CPU device's host on the kernels' cores.
  bool copies_apart = false;
};

// I/O buffers a three-tier sweep needs at least: a read ahead and two writes behind.
inline constexpr int kMinThreeTierIoBuffers = 3;

enum class DevicePlacement { kDeviceResident, kHostResident, kThreeTiers };
// "device-resident", "host-resident", "three-tier"
std::string_view placement_name(DevicePlacement p);

struct DevicePlan {
  device::DeviceInfo device;
  DevicePlacement placement = DevicePlacement::kDeviceResident;
  int64_t budget = 0;        // device bytes the run may allocate
  int64_t grid_bytes = 0;    // one copy of the grid's values
  int64_t device_bytes = 0;  // what the engine allocates: grid copies or rings, and probes
  int64_t host_bytes = 0;    // host-resident: the grid's copies; three tiers: planes kept
  // Host-resident: the grid's copies in host memory. One: each pass writes its output planes
  // where it read them (a chunk's output lies below the planes still to go up); two with
  // periodic z, whose pass reads its first planes again at its end.
  int host_copies = 2;
  int pass_steps = 1;        // steps per pass
  int64_t chunk_planes = 0;  // wavefront: the planes a chunk brings up
  int64_t chunks = 0;        // wavefront: per pass
  int64_t pass_planes = 0;   // wavefront: the level-0 planes a pass brings up (periodic: more)
  int64_t ring_planes = 0;   // wavefront: the planes of its rings, every level's
  bool overlap = false;      // wavefront: copies beside the steps
  double redundancy = 1;     // wavefront: points computed per point advanced (periodic ends)
  int z_points = 1;          // consecutive points along z per work item
  bool flush_subnormals = false;
  DeviceCosts costs;  // what the wavefront's shape was chosen by
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
  // The values of `box` (every component), packed plane after plane as internal::copy_rect
  // packs a plane's rectangle, in or out: only the box's rows move, in one copy (a distributed
  // part's halos: a device's copy commands cost it tens of microseconds each). The copy runs on
  // a transfer queue, beside the caller, and this returns its event at once (host-resident:
  // copied on return, an empty event); `packed` must stay as it is until finish_box_copy(event)
  // returns. A copy out starts after the launches queued before it; launches queued after a
  // copy in wait for it. Called by a late halos' `arrive`, a copy in runs beside the launches
  // already queued (which read none of its box), goes into both copies of the grid and is the
  // pass's to wait for (an empty event: `packed` must stay as it is until advance returns).
  Result<device::Event> start_box_copy(const Block& box, std::byte* packed,
                                       internal::RectCopy direction);
  // Returns once the copy of `copy` (start_box_copy's event) is done.
  Status finish_box_copy(const device::Event& copy);

  // Advances up to `steps` steps, applying `probes` (as InCoreEngine::advance: the steps done,
  // fewer when `progress`, asked after each pass of plan().pass_steps, says to stop; points
  // too far from probes.placement's needed box are not computed). Late halos arrive before
  // the first step, but for a device-resident grid that applies no probes in this run: its
  // first pass computes first what reads none of them (see compute_around_late_halos).
  Result<int64_t> advance(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                          ProbeRun probes, const LateHalos& late);

  const DevicePlan& plan() const { return plan_; }
  // Host memory pinned where the device can (device::Device::host_memory).
  Result<device::HostMemory> host_memory(int64_t bytes) { return device_.host_memory(bytes); }
  int64_t plane_bytes() const { return plane_bytes_; }

  // What went between host and device so far (planes loaded and stored, chunks, probes'
  // values), and the time those copies took.
  struct Traffic {
    int64_t bytes = 0;
    double copy_seconds = 0;
  };
  const Traffic& traffic() const { return traffic_; }

 private:
  DeviceEngine(const Shape& shape, const Scheme& scheme, DType dtype, DevicePlan plan,
               device::Device device);
  // One placement's passes (host-resident: device_host_passes.cc).
  Status run_on_device(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                       const ProbeRun& probes, const LateHalos* late, int64_t* done);
  Status run_host_passes(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                         const ProbeRun& probes, int64_t* done);
  bool computes_around(const LateHalos& late, const ProbeRun& probes, int64_t steps) const;
  Status compute_around_late_halos(internal::StepLauncher& step, int levels, int64_t steps_left,
                                   const GridPlacement& placement, const LateHalos& late);
  bool host_resident() const { return plan_.placement == DevicePlacement::kHostResident; }

  Shape shape_;
  Scheme scheme_;
  DType dtype_;
  DevicePlan plan_;
  device::Device device_;
  // Device-resident: the grid's two copies; host-resident: a wavefront's rings.
  std::vector<device::Buffer> grids_;
  // Host-resident: the grid's plan_.host_copies copies, pinned where the device can.
  device::HostMemory host_[2];
  int cur_ = 0;
  int64_t plane_bytes_ = 0;
  bool coefficients_equal_ = true;  // coefficient fields equal in both copies
  // While late halos arrive (compute_around_late_halos): start_box_copy copies them up beside the
  // launches already queued, and into the other copy too, which keeps the coefficient fields
  // equal where the first pass already runs.
  bool mirror_loads_ = false;
  int64_t box_copies_ = 0;  // started and not yet finished
  Traffic traffic_;
};

}  // namespace deepgrid
