// internal: the device engine's three-tier placement (device_engine.h): a stream sweep whose
// levels the device computes. The disk traffic, its durability and resumption are the stream
// engine's (stream_io.h: level-0 planes read ahead in the sweep's order, new planes written
// behind in place, the committer's record); between them the sweep goes through the device
// as a wavefront (device_wavefront.h), each level-0 plane uploaded from its read buffer and
// each new plane downloaded into its write buffer on the device's transfer queues: overlapped,
// the next chunk goes up and the last one comes down (and to disk) while a chunk's steps run.
// Periodic, the planes the sweep reads again at its other end stay in host memory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "deepgrid/probes.h"
#include "deepgrid/store.h"
#include "engines/device_engine.h"
#include "engines/device_wavefront.h"
#include "engines/stream_engine.h"
#include "engines/stream_io.h"
#include "engines/stream_stages.h"

namespace deepgrid::internal::stream {

class DeviceSweep {
 public:
  DeviceSweep(Grid& grid, const Scheme& scheme, const Boundary& b, const StreamPlan& plan,
              const DevicePlan& device, io::BlockIo& io, const ResolvedProbes* probes,
              const GridPlacement& placement);

  // The device, its wavefront's rings, kernels and probes' buffers; the I/O buffers.
  Status allocate();

  // One sweep in place, from the record's `done` plane on; `reach`: the steps left in the run
  // at its start (what the needed box trims by).
  Status sweep(const SweepRecord& record, int64_t reach, StreamStats& stats);

 private:
  // `first`: the step the sweep computes first.
  Status run_wavefront(const SweepLayout& layout, int64_t first, int64_t reach, StreamStats& stats);
  Status upload(const DeviceWavefront& w, int64_t j, const device::Buffer& to, StreamStats& stats);
  Status write_back(const DeviceWavefront& w, int64_t j, const device::Buffer& from,
                    StreamStats& stats);
  int team(size_t planes) const;
  // Waits for `last`, the last of `planes` copies on one transfer queue (the host's time in it
  // counted).
  Status copied(const device::Event& last, int64_t planes, StreamStats& stats);

  Grid& grid_;
  const Scheme& scheme_;
  const Boundary& b_;
  const StreamPlan& plan_;
  const DevicePlan& device_plan_;
  const ResolvedProbes* probes_;
  const GridPlacement placement_;
  const Shape s_;
  const int64_t plane_bytes_;
  device::HostMemory io_memory_;  // the I/O buffers' (declared first: freed after io_ drains)
  SweepIo io_;
  std::optional<device::Device> device_;           // opened by allocate()
  std::vector<device::Buffer> rings_;              // the wavefront's
  double copy_wait_seconds_ = 0;                   // the host's, in copied()
  std::optional<DeviceWavefrontKernels> kernels_;  // made by allocate()
  // Periodic: level-0 planes the sweep reads again at its other end, by plane.
  std::map<int64_t, std::vector<std::byte>> kept_;
};

}  // namespace deepgrid::internal::stream
