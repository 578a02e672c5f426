// internal: a scheme's step as OpenCL C, for the device engine (engines/device_engine.h).
//
// The program holds three kernels over a grid in its on-disk layout, (z, component, y, x)
// packed, one work item per point:
//   dg_step(in, out, nx, ny, nz, outside, x_end, y_end, z_end, z_begin, in_planes, out_planes,
//     in_slot0, out_slot0, boundary, copies): one step of every state field at its points
//     (work item (x, y, j): planes z_begin + j * z_points + k, k < z_points), in scheme.h's
//     evaluation order with explicit fma() and FP_CONTRACT OFF, so that its bits are those of
//     tests/reference.h; outside the grid's nz planes it reads through the boundary rule of
//     code `boundary` (device_boundary_code; `outside` is dirichlet's value in the dtype).
//     Each buffer holds planes in a ring (`in_planes`, `out_planes` slots; plane z_begin at
//     slot `in_slot0`, `out_slot0`): a whole grid is a ring of nz planes with plane z at slot
//     z; a wavefront's level keeps only the planes the next level still reads. Older levels
//     shift; coefficient fields are copied only when `copies` is not 0 (a source adds to one,
//     or each level has its own buffer); else the engine keeps them equal in both copies of
//     its grid. With `flush_subnormals` the arithmetic is x86's with DAZ and FTZ, emulated
//     (device_source.cc).
//     The boundary rule and the copies are arguments rather than variants of the program, so
//     that one program (compiled once per scheme, dtype and arithmetic) serves every
//     boundary and placement: a device compiles it on first use, PoCL in seconds.
//   dg_add_sources(u, at, a, begin, end): u[at[i]] += a[i] for i in [begin, end), in order;
//   dg_record(u, at, values, begin, end): values[i] = u[at[i]].
// The range of a launch may be part of the grid (points that cannot reach a distributed
// part's needed box are not computed); dg_step skips the points at or past its ends (x_end,
// y_end, z_end: a launch in whole work-groups).
#pragma once

#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"
#include "deepgrid/scheme.h"

namespace deepgrid::internal {

struct DeviceSource {
  std::string text;
  std::string options;  // build options
};

// The value of dg_step's `boundary` argument for a boundary rule.
int device_boundary_code(Boundary::Kind kind);

// For a scheme of terms (not a user's kernel). `wide_indices`: indices need 64 bits (the
// grid holds 2^31 values or more).
// `z_points`: consecutive points along z that one work item computes.
DeviceSource device_step_source(const Scheme& scheme, DType dtype, bool flush_subnormals,
                                bool wide_indices, int z_points);

}  // namespace deepgrid::internal
