// internal: what both placements of the device engine (engines/device_engine.h) launch: the
// step kernel over a grid or a wavefront's rings in the on-disk layout, and the probes' kernels
// with a pass's values.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/decomposition.h"
#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/probes.h"
#include "deepgrid/scheme.h"
#include "device/device.h"
#include "kernels/device_source.h"

namespace deepgrid::internal {

// The values' offset of component c of point (x, y, z) in the packed layout of `s`.
inline int64_t value_index(const Shape& s, int components, int64_t x, int64_t y, int64_t z, int c) {
  return ((z * components + c) * s.ny + y) * s.nx + x;
}

// Components that a source changes and that the step would otherwise not write (coefficient
// fields): the step then copies them, as for any carried component.
bool sources_on_coefficients(const Scheme& scheme, const ResolvedProbes* probes);

// The points that step `remaining` steps before the run's end computes: those within
// `remaining` times the reach of the needed box (every point by default); computed_xy: their
// x-y range in work-groups (xy_range: a box's, in rows of 64 along x, 4 rows per group).
Block computed_box(const Shape& s, const Scheme& scheme, const GridPlacement& at,
                   int64_t remaining);
device::Range xy_range(const Block& box);
device::Range computed_xy(const Shape& s, const Scheme& scheme, const GridPlacement& at,
                          int64_t remaining);

// A pass's entries of some probes, in launch order: entries [begin[l], begin[l + 1]) are
// applied after launch l of the step kernel (a step; a level of a chunk, in a wavefront).
struct ProbeList {
  std::vector<int64_t> at;    // the value's index in the buffer the launch writes
  std::vector<int> id, row;   // the probe, and the pass's step (0-based) it serves
  std::vector<int> begin{0};  // per launch, and the end
  void add(int64_t index, int probe, int step_row) {
    at.push_back(index);
    id.push_back(probe);
    row.push_back(step_row);
  }
  void end_launch() { begin.push_back(static_cast<int>(at.size())); }
};

// A probe kernel (dg_add_sources or dg_record) with room for `capacity` entries: their
// indices and values.
struct ProbeBuffers {
  device::Kernel kernel;
  device::Buffer at, values;
  int64_t capacity = 0;
  ProbeList list;
  // `l`'s entries to the device (the values: upload_source_values, collect_receivers).
  Status use(device::Device& d, ProbeList l);
};
Result<ProbeBuffers> probe_buffers(device::Device& d, const DeviceSource& src, const char* kernel,
                                   int64_t capacity, int64_t value_bytes);

// The device bytes probe_buffers() allocates for `points` points and passes of `pass` steps
// (an entry per point and step).
inline int64_t probe_buffer_bytes(int64_t points, int pass, int64_t value_bytes) {
  return points * pass * (8 + value_bytes);
}

// A buffer of planes in a ring: plane z at slot z % planes (a whole grid: nz slots).
struct Ring {
  const device::Buffer* buffer = nullptr;
  int64_t planes = 0;
};

// One step of a grid (or a wavefront's level) of extents `s` in two buffers: the step's arguments,
// and launches from `in` to `out` over the points of each range along z. An index argument of the
// kernels: `long` when the grid needs 64-bit indices, else `int`.
Status set_index(device::Kernel& k, int i, int64_t v, bool wide);

class StepLauncher {
 public:
  static Result<StepLauncher> create(device::Device& d, const Scheme& scheme, DType dtype,
                                     const Boundary& boundary, bool copies_coefficients,
                                     bool flush_subnormals, int z_points, const Shape& s);
  const DeviceSource& source() const { return src_; }
  // The planes of the grid or the wavefront's pass the next launches see (the z faces its boundary
  // rule applies at), at most those create() was given.
  Status set_planes(int64_t nz) { return set_index(step_, 4, nz, wide_); }
  // `x`, `y`: the points' offsets and extents along x and y; `z`: [begin, end) pieces, each
  // at most a ring of planes.
  Status launch(device::Device& d, const Ring& in, const Ring& out, const device::Range& xy,
                const std::vector<std::pair<int64_t, int64_t>>& z);

 private:
  DeviceSource src_;
  device::Kernel step_;
  bool wide_ = false;
  int z_points_ = 1;
};

// A pass's probes at the device: the sources' values of their entries' steps (from step
// `first`) go to `b`, and the receivers' values come back to `p.traces`.
Status upload_source_values(device::Device& d, ProbeBuffers& b, const ResolvedProbes& p,
                            int64_t first, DType dtype, int64_t* bytes);
Status collect_receivers(device::Device& d, ProbeBuffers& b, const ResolvedProbes& p, int64_t first,
                         DType dtype, int64_t* bytes);
// After launch `l` of a pass, into `grid`: its sources added, its receivers recorded.
Status apply_probes(device::Device& d, const device::Buffer& grid, size_t l,
                    std::initializer_list<ProbeBuffers*> probes);

}  // namespace deepgrid::internal
