#include "engines/device_wavefront.h"

#include <algorithm>
#include <utility>

#include "core/int_math.h"

namespace deepgrid::internal {
namespace {

// The local planes of global plane z in [lo, hi): every copy when periodic.
template <typename F>
void each_copy(const DeviceWavefront& w, int64_t z, int64_t nz, bool periodic, int64_t lo,
               int64_t hi, F&& f) {
  if (!periodic) {
    if (z - w.g0 >= lo && z - w.g0 < hi) f(z - w.g0);
    return;
  }
  for (int64_t u = lo + (((z - w.g0 - lo) % nz) + nz) % nz; u < hi; u += nz) f(u);
}

// The pass's probe entries, launch by launch (chunk j's level k is launch j * levels + k - 1):
// sources at every copy of their plane that the level's window holds, receivers in its output
// planes. Indices into the level's ring.
void wavefront_probes(const DeviceWavefrontPass& pass, const DeviceWavefront& w, ProbeList* sources,
                      ProbeList* receivers) {
  const ResolvedProbes none;
  const ResolvedProbes& p = pass.probes != nullptr ? *pass.probes : none;
  const int n = pass.scheme->component_count();
  const int64_t nz = pass.shape.nz;
  for (int64_t j = 0; j < w.chunks(); ++j) {
    for (int k = 1; k <= w.levels; ++k) {
      const auto [lo, hi] = w.window(k, j);
      const Shape ring{pass.shape.nx, pass.shape.ny, w.ring(k)};
      auto index = [&](const ProbePoint& q, int64_t u) {
        return value_index(ring, n, q.x, q.y, u % w.ring(k), q.component);
      };
      for (size_t i = 0; i < p.sources.size(); ++i) {
        each_copy(w, p.sources[i].z, nz, pass.periodic, lo, hi, [&](int64_t u) {
          sources->add(index(p.sources[i], u), static_cast<int>(i), k - 1);
        });
      }
      for (size_t i = 0; p.traces != nullptr && i < p.receivers.size(); ++i) {
        const int64_t u = p.receivers[i].z - w.g0;
        if (u >= std::max(lo, w.z0 - w.g0) && u < std::min(hi, w.z1 - w.g0)) {
          receivers->add(index(p.receivers[i], u), static_cast<int>(i), k - 1);
        }
      }
      sources->end_launch();
      receivers->end_launch();
    }
  }
}

// Chunk j's levels [from, to] on the rings.
Status chunk_steps(const DeviceWavefrontPass& pass, const DeviceWavefront& w, int64_t j, int from,
                   int to) {
  device::Device& d = *pass.device;
  DeviceWavefrontKernels& k = *pass.kernels;
  const std::vector<device::Buffer>& rings = *pass.rings;
  const int64_t rz = pass.scheme->radius_z();
  for (int level = from; level <= to; ++level) {
    const int64_t remaining = pass.reach - level;
    const device::Range xy = computed_xy(pass.shape, *pass.scheme, pass.placement, remaining);
    const ZPieces z =
        w.computed(level, j, pass.placement.needed_lo[2] - remaining * rz,
                   pass.placement.needed_hi[2] + remaining * rz, pass.shape.nz, pass.periodic);
    const Ring in{&rings[static_cast<size_t>(level - 1)], w.ring(level - 1)};
    const Ring out{&rings[static_cast<size_t>(level)], w.ring(level)};
    DG_RETURN_IF_ERROR(k.step.launch(d, in, out, xy, z));
    DG_RETURN_IF_ERROR(apply_probes(d, *out.buffer, static_cast<size_t>(j * w.levels + level - 1),
                                    {&k.sources, &k.receivers}));
  }
  return Status::Ok();
}

}  // namespace

DeviceWavefront::DeviceWavefront(int64_t z0_, int64_t z1_, int64_t nz, bool periodic, int levels_,
                                 int64_t rz_, int64_t chunk_, bool overlap_)
    : z0(z0_), z1(z1_), levels(levels_), rz(rz_), chunk(chunk_), overlap(overlap_) {
  const int64_t halo = levels * rz;
  g0 = periodic ? z0 - halo : std::max<int64_t>(0, z0 - halo);
  g1 = periodic ? z1 + halo : std::min(nz, z1 + halo);
  bottom_face = !periodic && g0 == 0;
  top_face = !periodic && g1 == nz;
}

int64_t DeviceWavefront::ring(int k) const {
  const int64_t extra = overlap && (k == 0 || k == levels) ? chunk : 0;
  return (k == levels ? chunk : chunk + 2 * rz) + extra;
}

int64_t DeviceWavefront::ring_planes(int levels, int64_t rz, int64_t chunk, bool overlap) {
  return levels * (chunk + 2 * rz) + chunk + (overlap ? 2 * chunk : 0);
}

std::pair<int64_t, int64_t> DeviceWavefront::window(int k, int64_t j) const {
  const int64_t lo = bottom_face ? 0 : k * rz, hi = top_face ? planes() : planes() - k * rz;
  return {std::max(lo, j * chunk - k * rz), std::min(hi, (j + 1) * chunk - k * rz)};
}

std::pair<int64_t, int64_t> DeviceWavefront::output(int64_t j) const {
  const auto [lo, hi] = window(levels, j);
  return {std::max(lo, z0 - g0), std::min(hi, z1 - g0)};
}

ZPieces DeviceWavefront::computed(int k, int64_t j, int64_t a, int64_t b, int64_t nz,
                                  bool periodic) const {
  const auto [lo, hi] = window(k, j);
  if (lo >= hi) return {};
  if (!periodic) return {{std::max(lo, a - g0), std::min(hi, b - g0)}};
  if (b - a >= nz) return {{lo, hi}};
  ZPieces pieces;
  for (int64_t m = floor_div(g0 + lo - b, nz); m <= floor_div(g0 + hi - a, nz) + 1; ++m) {
    const int64_t p0 = std::max(lo, a + m * nz - g0), p1 = std::min(hi, b + m * nz - g0);
    if (p0 < p1) pieces.push_back({p0, p1});
  }
  return pieces;
}

Result<DeviceWavefrontKernels> wavefront_kernels(device::Device& d, const Scheme& scheme,
                                                 DType dtype, const Boundary& b,
                                                 const DevicePlan& plan, const Shape& shape,
                                                 const ResolvedProbes* probes) {
  DeviceWavefrontKernels k;
  bool coefficients = false;
  for (int c = 0; c < scheme.component_count(); ++c) coefficients |= scheme.is_coefficient(c);
  const int64_t rz = scheme.radius_z();
  const bool periodic = b.kind == Boundary::Kind::kPeriodic;
  // A pass's planes, halos included: what the kernel's indices reach.
  const int64_t planes = shape.nz + 2 * int64_t{plan.pass_steps} * rz;
  DG_ASSIGN_OR_RETURN(k.step,
                      StepLauncher::create(d, scheme, dtype, b, coefficients, plan.flush_subnormals,
                                           plan.z_points, Shape{shape.nx, shape.ny, planes}));
  const ResolvedProbes none;
  const ResolvedProbes& p = probes != nullptr ? *probes : none;
  // Room for every copy of every source a pass holds (periodic: several).
  const int64_t copies = periodic ? planes / shape.nz + 2 : 1;
  const auto value = static_cast<int64_t>(dtype_size(dtype));
  const int64_t per_point = plan.pass_steps;
  DG_ASSIGN_OR_RETURN(
      k.sources, probe_buffers(d, k.step.source(), "dg_add_sources",
                               static_cast<int64_t>(p.sources.size()) * copies * per_point, value));
  const int64_t receivers = p.traces != nullptr ? static_cast<int64_t>(p.receivers.size()) : 0;
  DG_ASSIGN_OR_RETURN(k.receivers,
                      probe_buffers(d, k.step.source(), "dg_record", receivers * per_point, value));
  return k;
}

Result<std::vector<device::Buffer>> wavefront_rings(device::Device& d, const DevicePlan& plan,
                                                    int rz, int64_t plane_bytes) {
  // (The rings of a pass of every level: later passes of fewer levels fit in them.)
  const DeviceWavefront w(0, 1, 1, false, plan.pass_steps, rz, plan.chunk_planes, plan.overlap);
  std::vector<device::Buffer> rings(static_cast<size_t>(plan.pass_steps) + 1);
  for (size_t k = 0; k < rings.size(); ++k) {
    DG_ASSIGN_OR_RETURN(rings[k], d.allocate(w.ring(static_cast<int>(k)) * plane_bytes,
                                             "a wavefront level's ring"));
  }
  return rings;
}

// Ordering, with lag 1 (copies and steps in turn) or 2 (overlapped: the first and last rings
// hold a chunk more). Chunk j's levels wait for its planes' copy up; its last level waits
// also for the copy down of chunk j - lag, whose slots in the last ring it overwrites. Chunk
// j + 1 goes up once the level-1 step that read the slots it overwrites in ring 0 is done
// (chunk j + 1 - lag's). Chunk j - 1 comes down once its steps are done, queued after chunk
// j's first levels so that the device has work while the host waits for it (three tiers:
// the host copies each plane and waits for it).
Status run_wavefront(const DeviceWavefrontPass& pass, const DeviceWavefront& w,
                     const ChunkCopies& copies) {
  device::Device& d = *pass.device;
  DeviceWavefrontKernels& k = *pass.kernels;
  const ResolvedProbes none;
  const ResolvedProbes& p = pass.probes != nullptr ? *pass.probes : none;
  {
    ProbeList sources, receivers;
    wavefront_probes(pass, w, &sources, &receivers);
    DG_RETURN_IF_ERROR(k.sources.use(d, std::move(sources)));
    DG_RETURN_IF_ERROR(k.receivers.use(d, std::move(receivers)));
  }
  DG_RETURN_IF_ERROR(upload_source_values(d, k.sources, p, pass.first, pass.dtype, pass.bytes));
  DG_RETURN_IF_ERROR(k.step.set_planes(w.planes()));
  const std::vector<device::Buffer>& rings = *pass.rings;
  const device::Buffer& first_ring = rings.front();
  const device::Buffer& last_ring = rings[static_cast<size_t>(w.levels)];
  const int64_t n = w.chunks(), lag = w.overlap ? 2 : 1;
  // Per chunk: its first level done, all its levels done, its copy down.
  std::vector<device::Event> read(static_cast<size_t>(n)), done(read.size()), down(read.size());
  auto at = [](int64_t j) { return static_cast<size_t>(j); };
  DG_ASSIGN_OR_RETURN(device::Event up, copies.up(0, first_ring, {}));
  for (int64_t j = 0; j < n; ++j) {
    const int last = w.levels;
    DG_RETURN_IF_ERROR(d.compute_after(up));
    if (last > 1) {
      DG_RETURN_IF_ERROR(chunk_steps(pass, w, j, 1, 1));
      DG_ASSIGN_OR_RETURN(read[at(j)], d.compute_done());
      DG_RETURN_IF_ERROR(chunk_steps(pass, w, j, 2, last - 1));
    }
    if (j >= 1) {
      DG_ASSIGN_OR_RETURN(down[at(j - 1)], copies.down(j - 1, last_ring, done[at(j - 1)]));
    }
    if (j >= lag) DG_RETURN_IF_ERROR(d.compute_after(down[at(j - lag)]));
    DG_RETURN_IF_ERROR(chunk_steps(pass, w, j, last, last));
    DG_ASSIGN_OR_RETURN(done[at(j)], d.compute_done());
    if (last == 1) read[at(j)] = done[at(j)];
    if (j + 1 < n) {
      const int64_t reader = j + 1 - lag;  // the chunk whose level 1 read the slots going
      DG_ASSIGN_OR_RETURN(
          up, copies.up(j + 1, first_ring, reader >= 0 ? read[at(reader)] : device::Event{}));
    }
  }
  if (n > 0) DG_RETURN_IF_ERROR(copies.down(n - 1, last_ring, done[at(n - 1)]).status());
  DG_RETURN_IF_ERROR(collect_receivers(d, k.receivers, p, pass.first, pass.dtype, pass.bytes));
  return d.finish();
}

}  // namespace deepgrid::internal
