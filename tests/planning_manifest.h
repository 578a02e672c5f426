// A manifest for planning only, with no files behind it: what the plan tests give the planners.
#pragma once

#include "deepgrid/machine.h"
#include "deepgrid/store.h"

namespace deepgrid::testing {

// A manifest for planning only (no files): f32, one stripe, 8 MiB chunks.
inline Manifest planning_manifest(const Shape& shape) {
  Manifest m;
  m.shape = shape;
  m.layout = plan_layout(shape, DType::kF32, 1, 8 << 20, default_spare_planes(shape.nz)).value();
  return m;
}

// A machine profile with these rates measured: the in-core compute rate, the disks' read (and
// write) bandwidth, and what sweeps sustained on them.
inline MachineProfile measured_machine(double compute_mlups, double disk_bps, double sweep_bps) {
  MachineProfile machine;
  machine.compute_mlups = compute_mlups;
  machine.disk_read_bps = machine.disk_write_bps = disk_bps;
  machine.disk_sweep_bps = sweep_bps;
  return machine;
}

}  // namespace deepgrid::testing
