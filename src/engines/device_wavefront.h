// internal: a pass of the device engine's host-resident and three-tier placements
// (engines/device_engine.h) as a wavefront through the device: level-0 planes go up a chunk
// at a time, each of the pass's levels computes the chunk's planes shifted back by rz planes
// per level, and the last level's planes come down. Each level keeps its planes in a ring on
// the device holding only what the next level still reads, so no plane is computed twice
// (but for periodic z, where each end computes the bt * rz planes past it).
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

// A pass's planes, chunks and rings. The pass brings back output planes [z0, z1) (global)
// from level-0 planes [g0, g1) (past the grid's ends only when periodic: wrapped); local
// plane u is global plane g0 + u. A face of [g0, g1) at a face of the grid (not periodic)
// reads through the boundary rule; a cut face is never read: each level computes rz planes
// fewer there than the level before. Chunk j brings up local planes [jC, (j + 1)C), level k
// then computes its planes in [jC - k rz, (j + 1)C - k rz), and the last level's output
// planes there come down. Level k keeps its planes in a ring of ring(k) slots (plane u at
// slot u % ring(k)): the chunk and the 2 rz planes below it that level k + 1 still reads;
// with `overlap`, level 0 and the last level hold a chunk more, for the next chunk going up
// and the last one coming down while a chunk's steps run.
struct DeviceWavefront {
  int64_t z0 = 0, z1 = 0, g0 = 0, g1 = 0;
  bool bottom_face = false, top_face = false;
  int levels = 1;
  int64_t rz = 0, chunk = 1;
  bool overlap = false;

  DeviceWavefront(int64_t z0, int64_t z1, int64_t nz, bool periodic, int levels, int64_t rz,
                  int64_t chunk, bool overlap);
  int64_t planes() const { return g1 - g0; }
  int64_t chunks() const { return (z1 - g0 + levels * rz + chunk - 1) / chunk; }
  int64_t ring(int k) const;
  // The rings' planes in all, for any pass of up to `levels` levels.
  static int64_t ring_planes(int levels, int64_t rz, int64_t chunk, bool overlap);
  // Level k's local planes in chunk j (k = 0: those going up), within what the level computes.
  std::pair<int64_t, int64_t> window(int k, int64_t j) const;
  // The output planes chunk j brings down (local).
  std::pair<int64_t, int64_t> output(int64_t j) const;
  // The planes of window(k, j) that can reach the needed planes [a, b) (global, unclipped) in
  // time: several pieces when periodic copies of them lie in the pass.
  ZPieces computed(int k, int64_t j, int64_t a, int64_t b, int64_t nz, bool periodic) const;
};

// The step's kernel and the probes' kernels and buffers of wavefront passes on a grid of
// `shape` (plan.pass_steps levels, rings of plan.chunk_planes). Each level has its own
// buffer, so the step writes coefficient fields too.
struct DeviceWavefrontKernels {
  StepLauncher step;
  ProbeBuffers sources, receivers;
};
Result<DeviceWavefrontKernels> wavefront_kernels(device::Device& d, const Scheme& scheme,
                                                 DType dtype, const Boundary& b,
                                                 const DevicePlan& plan, const Shape& shape,
                                                 const ResolvedProbes* probes);

// Whether a pass of `levels` levels overlaps its copies: when the plan says so and the pass
// has its depth (a shallower last pass has its copies and steps in turn, for which the rings
// are large enough).
inline bool overlaps(const DevicePlan& plan, int levels) {
  return plan.overlap && levels == plan.pass_steps;
}

// The rings of wavefront passes: one buffer per level, plan.pass_steps + 1.
Result<std::vector<device::Buffer>> wavefront_rings(device::Device& d, const DevicePlan& plan,
                                                    int rz, int64_t plane_bytes);

// How a placement moves a pass's chunk j (0-based) between the host and the rings: up, level-0
// planes window(0, j) into `to` on the transfer queue up, not before `after`; down, the output
// planes output(j) from `from` to the host once `ready` is done. Each returns its last copy's
// event (empty: done on return).
struct ChunkCopies {
  std::function<Result<device::Event>(int64_t j, const device::Buffer& to,
                                      const device::Event& after)>
      up;
  std::function<Result<device::Event>(int64_t j, const device::Buffer& from,
                                      const device::Event& ready)>
      down;
};

// A pass through the device and what it needs besides its planes: the run's grid, scheme and
// probes, the device's kernels and rings.
struct DeviceWavefrontPass {
  device::Device* device = nullptr;
  DeviceWavefrontKernels* kernels = nullptr;
  const std::vector<device::Buffer>* rings = nullptr;
  const Scheme* scheme = nullptr;
  Shape shape;
  DType dtype = DType::kF32;
  bool periodic = false;
  const ResolvedProbes* probes = nullptr;
  GridPlacement placement;
  int64_t* bytes = nullptr;  // host <-> device bytes, counted

  int64_t first = 0;  // the step the pass computes first
  int64_t reach = 0;  // steps left in the run at the pass's start
};

// Runs the pass `w` chunk by chunk: each chunk up, its levels' steps (sources added at every
// copy of their plane, receivers in the output planes recorded into the traces), its output
// planes down. With `w.overlap` the next chunk goes up and the one before comes down while a
// chunk's steps run; else copies and steps take turns. Everything is done on return.
Status run_wavefront(const DeviceWavefrontPass& pass, const DeviceWavefront& w,
                     const ChunkCopies& copies);

}  // namespace deepgrid::internal
