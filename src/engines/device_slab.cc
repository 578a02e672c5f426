#include "engines/device_slab.h"

#include <algorithm>
#include <utility>

namespace deepgrid::internal {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// The probes a slab serves: sources at every copy of their plane in its buffer (computed
// there or not: values past a step's range are never read for the planes brought back), and
// the receivers in its own planes. Indices into the slab's buffer of extents `in_slab`.
struct SlabProbes {
  std::vector<int64_t> at[2];
  std::vector<int> ids[2];
};
SlabProbes slab_probes(const Slab& slab, const ResolvedProbes& p, const Shape& in_slab,
                       int components, int64_t nz) {
  SlabProbes sp;
  for (size_t i = 0; i < p.sources.size(); ++i) {
    const ProbePoint& q = p.sources[i];
    for (int64_t g = slab.g0 + (((q.z - slab.g0) % nz) + nz) % nz; g < slab.g1; g += nz) {
      sp.ids[0].push_back(static_cast<int>(i));
      sp.at[0].push_back(value_index(in_slab, components, q.x, q.y, g - slab.g0, q.component));
    }
  }
  for (size_t i = 0; p.traces != nullptr && i < p.receivers.size(); ++i) {
    const ProbePoint& q = p.receivers[i];
    if (q.z < slab.z0 || q.z >= slab.z1) continue;
    sp.ids[1].push_back(static_cast<int>(i));
    sp.at[1].push_back(value_index(in_slab, components, q.x, q.y, q.z - slab.g0, q.component));
  }
  return sp;
}

}  // namespace

Result<SlabKernels> slab_kernels(device::Device& d, const Scheme& scheme, DType dtype,
                                 const Boundary& b, const DevicePlan& plan, const Shape& shape,
                                 const ResolvedProbes* probes) {
  SlabKernels k;
  k.copies_coefficients = sources_on_coefficients(scheme, probes);
  for (int c = 0; c < scheme.component_count(); ++c) {
    k.keeps_coefficients |= !k.copies_coefficients && scheme.is_coefficient(c);
  }
  const int64_t planes = plan.buffer_planes;
  DG_ASSIGN_OR_RETURN(k.step, StepLauncher::create(d, scheme, dtype, b, k.copies_coefficients,
                                                   plan.flush_subnormals, plan.z_points,
                                                   Shape{shape.nx, shape.ny, planes}));
  const ResolvedProbes none;
  const ResolvedProbes& p = probes != nullptr ? *probes : none;
  // Room for every copy of every source a slab's buffer may hold (periodic: several).
  const bool periodic = b.kind == Boundary::Kind::kPeriodic;
  const auto copies = static_cast<int>(periodic ? planes / shape.nz + 2 : 1);
  const auto value = static_cast<int64_t>(dtype_size(dtype));
  DG_ASSIGN_OR_RETURN(k.sources, probe_buffers(d, k.step.source(), "dg_add_sources",
                                               static_cast<int>(p.sources.size()) * copies,
                                               plan.pass_steps, value));
  DG_ASSIGN_OR_RETURN(k.receivers,
                      probe_buffers(d, k.step.source(), "dg_record",
                                    p.traces != nullptr ? static_cast<int>(p.receivers.size()) : 0,
                                    plan.pass_steps, value));
  return k;
}

Slab::Slab(int64_t z0_, int64_t z1_, int64_t halo, int64_t nz, bool periodic) : z0(z0_), z1(z1_) {
  g0 = periodic ? z0 - halo : std::max<int64_t>(0, z0 - halo);
  g1 = periodic ? z1 + halo : std::min(nz, z1 + halo);
  bottom_face = !periodic && g0 == 0;
  top_face = !periodic && g1 == nz;
}

ZPieces Slab::computed(int row, int64_t rz, int64_t a, int64_t b, int64_t nz, bool periodic) const {
  const int64_t lo = bottom_face ? 0 : (row + 1) * rz;
  const int64_t hi = top_face ? planes() : planes() - (row + 1) * rz;
  if (!periodic) return {{std::max(lo, a - g0), std::min(hi, b - g0)}};
  if (b - a >= nz) return {{lo, hi}};
  ZPieces pieces;
  for (int64_t k = floor_div(g0 + lo - b, nz); k <= floor_div(g0 + hi - a, nz) + 1; ++k) {
    const int64_t p0 = std::max(lo, a + k * nz - g0), p1 = std::min(hi, b + k * nz - g0);
    if (p0 < p1) pieces.push_back({p0, p1});
  }
  return pieces;
}

Result<int> advance_slab(const SlabPass& pass, const Slab& slab) {
  device::Device& d = *pass.device;
  const ResolvedProbes none;
  const ResolvedProbes& p = pass.probes != nullptr ? *pass.probes : none;
  const Shape in_slab{pass.shape.nx, pass.shape.ny, slab.planes()};
  const int64_t nz = pass.shape.nz, rz = pass.scheme->radius_z();
  const SlabProbes sp = slab_probes(slab, p, in_slab, pass.scheme->component_count(), nz);
  SlabKernels& k = *pass.kernels;
  DG_RETURN_IF_ERROR(k.sources.point_at(d, sp.at[0]));
  DG_RETURN_IF_ERROR(k.receivers.point_at(d, sp.at[1]));
  DG_RETURN_IF_ERROR(upload_source_values(d, k.sources, p, sp.ids[0], pass.first, pass.levels,
                                          pass.dtype, pass.bytes));
  if (k.keeps_coefficients) {  // the step does not write them: into the other buffer too
    DG_RETURN_IF_ERROR(
        d.copy(pass.grids[0], pass.grids[1],
               slab.planes() * in_slab.nx * in_slab.ny * pass.scheme->component_count() *
                   static_cast<int64_t>(dtype_size(pass.dtype))));
  }
  DG_RETURN_IF_ERROR(k.step.set_planes(slab.planes()));
  int at = 0;  // the buffer holding the slab's latest level
  for (int row = 0; row < pass.levels; ++row) {
    const int64_t remaining = pass.reach - row - 1;
    const device::Range xy = computed_xy(pass.shape, *pass.scheme, pass.placement, remaining);
    const ZPieces z =
        slab.computed(row, rz, pass.placement.needed_lo[2] - remaining * rz,
                      pass.placement.needed_hi[2] + remaining * rz, nz, pass.periodic);
    DG_RETURN_IF_ERROR(k.step.launch(d, pass.grids[at], pass.grids[1 - at], xy, z));
    at = 1 - at;
    DG_RETURN_IF_ERROR(apply_probes(d, pass.grids[at], row, {&k.sources, &k.receivers}));
  }
  DG_RETURN_IF_ERROR(collect_receivers(d, k.receivers, p, sp.ids[1], pass.first, pass.levels,
                                       pass.dtype, pass.bytes));
  return at;
}

// Buffer roles rotate. Three buffers: slab i computes on {input, scratch} and ends in one
// (result); the spare, which held slab i-2's result, takes slab i+1 once slab i-1's result
// has come down (the transfer queue keeps that order); then the spare is the next input, the
// buffer slab i did not end in the next scratch, and slab i's result the next spare. Two
// buffers: slab i's result comes down, then slab i+1 goes up into the other buffer, and its
// steps wait for that (so for the result's copy too, earlier in the same queue).
Status run_slab_pipeline(device::Device& d, const std::vector<device::Buffer>& buffers,
                         int64_t slabs, const SlabCopies& copies,
                         const std::function<Result<int>(int64_t, const device::Buffer*)>& steps) {
  const bool overlap = buffers.size() >= 3;
  int input = 0, scratch = 1, spare = 2;
  int last_result = -1;
  device::Event last_done;
  DG_ASSIGN_OR_RETURN(device::Event up, copies.up(0, buffers[input], {}));
  for (int64_t i = 0; i < slabs; ++i) {
    DG_RETURN_IF_ERROR(d.compute_after(up));
    const device::Buffer grids[2] = {buffers[input], buffers[scratch]};
    DG_ASSIGN_OR_RETURN(const int at, steps(i, grids));
    DG_ASSIGN_OR_RETURN(const device::Event done, d.compute_done());
    const int result = at == 0 ? input : scratch, other = at == 0 ? scratch : input;
    if (overlap) {
      if (i > 0) DG_RETURN_IF_ERROR(copies.down(i - 1, buffers[last_result], last_done).status());
      if (i + 1 < slabs) {
        DG_ASSIGN_OR_RETURN(up, copies.up(i + 1, buffers[spare], {}));
      }
      input = spare;
      spare = result;
      scratch = other;
    } else {
      DG_RETURN_IF_ERROR(copies.down(i, buffers[result], done).status());
      if (i + 1 < slabs) {
        DG_ASSIGN_OR_RETURN(up, copies.up(i + 1, buffers[other], done));
      }
      input = other;
      scratch = result;
    }
    last_result = result;
    last_done = done;
  }
  if (overlap && slabs > 0) {
    DG_RETURN_IF_ERROR(copies.down(slabs - 1, buffers[last_result], last_done).status());
  }
  return d.finish();
}

}  // namespace deepgrid::internal
