// internal: a z-slab of a grid on the device, what the host-resident and three-tier
// placements (engines/device_engine.h) advance a pass at a time: its planes, which of them
// each step computes, its probes, and the pass's steps on it.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "deepgrid/geometry.h"
#include "deepgrid/probes.h"
#include "deepgrid/scheme.h"
#include "engines/device_engine.h"
#include "engines/device_launch.h"

namespace deepgrid::internal {

using ZPieces = std::vector<std::pair<int64_t, int64_t>>;

// A slab's planes at the device: global planes [g0, g1) (past the grid's ends only when
// periodic: wrapped) in its buffer's planes [0, g1 - g0); it brings back [z0, z1). A face of
// the buffer at a face of the grid (not periodic) reads through the boundary rule; a cut face
// is never read: each step computes rz planes fewer there than the step before.
struct Slab {
  int64_t z0 = 0, z1 = 0, g0 = 0, g1 = 0;
  bool bottom_face = false, top_face = false;

  Slab(int64_t z0, int64_t z1, int64_t halo, int64_t nz, bool periodic);
  int64_t planes() const { return g1 - g0; }
  // The buffer's planes step `row` of the pass computes (0-based) that can reach the needed
  // planes [a, b) (global, unclipped) in time: several pieces when periodic copies of them lie
  // in the buffer.
  ZPieces computed(int row, int64_t rz, int64_t a, int64_t b, int64_t nz, bool periodic) const;
};

// The step's kernel and the probes' kernels and buffers of passes over slabs: buffers of
// plan.buffer_planes planes of a grid of `shape`.
struct SlabKernels {
  StepLauncher step;
  ProbeBuffers sources, receivers;
  bool copies_coefficients = false;  // the step copies coefficient fields (a source adds to one)
  // The step leaves coefficient fields where they are: a slab's level-0 planes go into both
  // buffers. (Without coefficient fields the second buffer's old values are never read: each
  // step reads only what the step before it computed.)
  bool keeps_coefficients = false;
};
Result<SlabKernels> slab_kernels(device::Device& d, const Scheme& scheme, DType dtype,
                                 const Boundary& b, const DevicePlan& plan, const Shape& shape,
                                 const ResolvedProbes* probes);

// What a pass's steps on slabs need besides the slab: the run's grid, scheme and probes, the
// device's kernels and buffers; then the pass's own steps.
struct SlabPass {
  device::Device* device = nullptr;
  SlabKernels* kernels = nullptr;
  const device::Buffer* grids = nullptr;  // two slab buffers
  const Scheme* scheme = nullptr;
  Shape shape;
  DType dtype = DType::kF32;
  bool periodic = false;
  const ResolvedProbes* probes = nullptr;
  GridPlacement placement;
  int64_t* bytes = nullptr;  // host <-> device bytes, counted

  int levels = 1;     // steps of this pass
  int64_t first = 0;  // the step the pass computes first
  int64_t reach = 0;  // steps left in the run at the pass's start
};

// Queues the pass's steps on `slab`, whose level-0 planes are in grids[0] (copied into grids[1]
// first when the kernels keep coefficient fields): sources added at every copy of their plane,
// receivers in the slab's own planes recorded into the traces. The index of the buffer that
// will hold the last level.
Result<int> advance_slab(const SlabPass& pass, const Slab& slab);

// How a placement moves the planes of a pass's slab i (0-based) between the host and the
// device buffers run_slab_pipeline lends it.
struct SlabCopies {
  // Slab i's level-0 planes into `to`, on the transfer queue, not before `after`; the last
  // copy's event (empty: done on return).
  std::function<Result<device::Event>(int64_t i, const device::Buffer& to,
                                      const device::Event& after)>
      up;
  // Slab i's own planes from `from` (its last level, computed once `ready` is done) to the
  // host; the last copy's event (empty: done on return).
  std::function<Result<device::Event>(int64_t i, const device::Buffer& from,
                                      const device::Event& ready)>
      down;
};

// A pass's `slabs` slabs through the device: each slab up, `steps(i, grids)` queuing its steps
// on grids {input, scratch} (advance_slab), its planes down. With three buffers
// (DevicePlan::slab_buffers) the next slab goes up and the one before comes down while a
// slab's steps run; with two, copies and steps take turns. Everything is done on return.
Status run_slab_pipeline(device::Device& d, const std::vector<device::Buffer>& buffers,
                         int64_t slabs, const SlabCopies& copies,
                         const std::function<Result<int>(int64_t, const device::Buffer*)>& steps);

}  // namespace deepgrid::internal
