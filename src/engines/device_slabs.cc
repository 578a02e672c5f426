// The device engine's host-resident passes (device_engine.h): the grid in two host copies,
// each pass of bt steps through the device slab by slab.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/stopwatch.h"
#include "engines/device_engine.h"
#include "engines/device_launch.h"

namespace deepgrid {
namespace {

using ZPieces = std::vector<std::pair<int64_t, int64_t>>;

int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// A slab's planes at the device: global planes [g0, g1) (past the grid's ends only when
// periodic: wrapped) in its buffer's planes [0, g1 - g0); it brings back [z0, z1). A face of
// the buffer at a face of the grid (not periodic) reads through the boundary rule; a cut face
// is never read: each step computes rz planes fewer there than the step before.
struct Slab {
  int64_t z0 = 0, z1 = 0, g0 = 0, g1 = 0;
  bool bottom_face = false, top_face = false;
  int64_t planes() const { return g1 - g0; }

  Slab(int64_t z0_, int64_t z1_, int64_t halo, int64_t nz, bool periodic)
      : z0(z0_), z1(z1_) {
    g0 = periodic ? z0 - halo : std::max<int64_t>(0, z0 - halo);
    g1 = periodic ? z1 + halo : std::min(nz, z1 + halo);
    bottom_face = !periodic && g0 == 0;
    top_face = !periodic && g1 == nz;
  }

  // The buffer's planes step `row` of the pass computes (0-based) that can reach the needed
  // planes [a, b) (global, unclipped) in time: several pieces when periodic copies of them lie
  // in the buffer.
  ZPieces computed(int row, int64_t rz, int64_t a, int64_t b, int64_t nz, bool periodic) const {
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
};

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
      sp.at[0].push_back(
          internal::value_index(in_slab, components, q.x, q.y, g - slab.g0, q.component));
    }
  }
  for (size_t i = 0; p.traces != nullptr && i < p.receivers.size(); ++i) {
    const ProbePoint& q = p.receivers[i];
    if (q.z < slab.z0 || q.z >= slab.z1) continue;
    sp.ids[1].push_back(static_cast<int>(i));
    sp.at[1].push_back(
        internal::value_index(in_slab, components, q.x, q.y, q.z - slab.g0, q.component));
  }
  return sp;
}

}  // namespace

Status DeviceEngine::run_in_slabs(const Boundary& boundary, int64_t steps,
                                  const ProgressFn& progress, const ProbeRun& probes,
                                  int64_t* done) {
  using internal::seconds_since;
  const bool periodic = boundary.kind == Boundary::Kind::kPeriodic;
  const int64_t nz = shape_.nz, rz = scheme_.radius_z();
  const int pass = plan_.pass_steps;
  const int n = scheme_.component_count();
  const auto value = static_cast<int64_t>(dtype_size(dtype_));
  const bool copies = internal::sources_on_coefficients(scheme_, probes.probes);
  const Shape largest{shape_.nx, shape_.ny, grids_[0].bytes() / plane_bytes_};
  DG_ASSIGN_OR_RETURN(internal::StepLauncher step,
                      internal::StepLauncher::create(device_, scheme_, dtype_, boundary, copies,
                                                     plan_.flush_subnormals, plan_.z_points,
                                                     largest));
  const ResolvedProbes none;
  const ResolvedProbes& p = probes.probes != nullptr ? *probes.probes : none;
  // Room for every copy of every source a slab may hold, and every receiver.
  const auto copies_held = static_cast<int>(periodic ? largest.nz / nz + 2 : 1);
  DG_ASSIGN_OR_RETURN(
      internal::ProbeBuffers sources,
      internal::probe_buffers(device_, step.source(), "dg_add_sources",
                              static_cast<int>(p.sources.size()) * copies_held, pass, value));
  DG_ASSIGN_OR_RETURN(
      internal::ProbeBuffers receivers,
      internal::probe_buffers(device_, step.source(), "dg_record",
                              p.traces != nullptr ? static_cast<int>(p.receivers.size()) : 0,
                              pass, value));

  while (*done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(pass, steps - *done));
    const int64_t first = probes.step + *done + 1;  // the step the pass computes first
    const std::vector<std::byte>& from = host_[cur_];
    std::vector<std::byte>& to = host_[1 - cur_];
    for (int64_t z0 = 0; z0 < nz; z0 += plan_.slab_planes) {
      const Slab slab(z0, std::min(nz, z0 + plan_.slab_planes), int64_t{levels} * rz, nz, periodic);
      const Shape in_slab{shape_.nx, shape_.ny, slab.planes()};
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t g = slab.g0; g < slab.g1;) {  // in runs of planes contiguous in `from`
        const int64_t h = ((g % nz) + nz) % nz, run = std::min(slab.g1 - g, nz - h);
        DG_RETURN_IF_ERROR(device_.write(grids_[0], (g - slab.g0) * plane_bytes_,
                                         from.data() + h * plane_bytes_, run * plane_bytes_));
        g += run;
      }
      traffic_.bytes += slab.planes() * plane_bytes_;
      traffic_.copy_seconds += seconds_since(t0);
      // Coefficient fields, which the step does not write, into the other buffer.
      if (!copies) DG_RETURN_IF_ERROR(device_.copy(grids_[0], grids_[1], slab.planes() * plane_bytes_));

      const SlabProbes sp = slab_probes(slab, p, in_slab, n, nz);
      DG_RETURN_IF_ERROR(sources.point_at(device_, sp.at[0]));
      DG_RETURN_IF_ERROR(receivers.point_at(device_, sp.at[1]));
      DG_RETURN_IF_ERROR(internal::upload_source_values(device_, sources, p, sp.ids[0], first,
                                                        levels, dtype_, &traffic_.bytes));
      DG_RETURN_IF_ERROR(step.set_planes(slab.planes()));
      int at = 0;  // the buffer holding the slab's latest level
      for (int row = 0; row < levels; ++row) {
        const int64_t remaining = steps - (*done + row + 1);
        const device::Range xy = internal::computed_xy(shape_, scheme_, probes.placement, remaining);
        const ZPieces z = slab.computed(row, rz, probes.placement.needed_lo[2] - remaining * rz,
                                        probes.placement.needed_hi[2] + remaining * rz, nz,
                                        periodic);
        DG_RETURN_IF_ERROR(step.launch(device_, grids_[at], grids_[1 - at], xy, z));
        at = 1 - at;
        DG_RETURN_IF_ERROR(internal::apply_probes(device_, grids_[at], row, {&sources, &receivers}));
      }
      DG_RETURN_IF_ERROR(internal::collect_receivers(device_, receivers, p, sp.ids[1], first,
                                                     levels, dtype_, &traffic_.bytes));
      DG_RETURN_IF_ERROR(device_.finish());
      t0 = std::chrono::steady_clock::now();
      DG_RETURN_IF_ERROR(device_.read(grids_[at], (slab.z0 - slab.g0) * plane_bytes_,
                                      to.data() + slab.z0 * plane_bytes_,
                                      (slab.z1 - slab.z0) * plane_bytes_));
      traffic_.bytes += (slab.z1 - slab.z0) * plane_bytes_;
      traffic_.copy_seconds += seconds_since(t0);
    }
    cur_ = 1 - cur_;
    *done += levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
