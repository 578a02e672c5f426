#include "deepgrid/decomposition.h"

#include <algorithm>
#include <string>

namespace deepgrid {

Result<std::vector<Slab>> decompose_z(int64_t nz, int ranks) {
  if (ranks < 1 || ranks > nz) {
    return invalid_argument("cannot split " + std::to_string(nz) + " z-planes over " +
                            std::to_string(ranks) +
                            " ranks: every rank needs at least one plane; use at most " +
                            std::to_string(nz) + " ranks (mpirun -n) or a grid with more planes");
  }
  std::vector<Slab> slabs(static_cast<size_t>(ranks));
  const int64_t base = nz / ranks, extra = nz % ranks;
  int64_t z = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t n = base + (r < extra ? 1 : 0);
    slabs[static_cast<size_t>(r)] = {z, z + n};
    z += n;
  }
  return slabs;
}

HaloExtent needed_halo(const Slab& slab, int64_t nz, int64_t halo, bool periodic) {
  if (periodic) return {halo, halo};
  return {std::min(halo, slab.z0), std::min(halo, nz - slab.z1)};
}

bool halo_suffices(const HaloExtent& held, const HaloExtent& needed, const Slab& slab, int64_t nz,
                   bool periodic) {
  if (held.below < needed.below || held.above < needed.above) return false;
  return periodic || (held.below <= slab.z0 && held.above <= nz - slab.z1);
}

int64_t wrap_plane(int64_t z, int64_t nz, bool periodic) {
  return periodic ? ((z % nz) + nz) % nz : z;
}

int owner_of(const std::vector<Slab>& slabs, int64_t z) {
  const auto it = std::upper_bound(slabs.begin(), slabs.end(), z,
                                   [](int64_t v, const Slab& s) { return v < s.z1; });
  return static_cast<int>(it - slabs.begin());
}

}  // namespace deepgrid
