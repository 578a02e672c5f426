// How a grid is split over ranks: z-slabs, and the halo planes each rank's part holds around
// its slab so that it can advance k steps on its own between two halo exchanges.
#pragma once

#include <cstdint>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid {

// Planes [z0, z1) of the global grid: the planes a rank owns.
struct Slab {
  int64_t z0 = 0, z1 = 0;
  int64_t planes() const { return z1 - z0; }
  bool operator==(const Slab&) const = default;
};

// nz planes over `ranks` balanced slabs (sizes differ by at most one, the larger ones first).
// kInvalidArgument when there are more ranks than planes: every slab must hold a plane.
Result<std::vector<Slab>> decompose_z(int64_t nz, int ranks);

// Halo planes a part holds below and above its slab.
struct HaloExtent {
  int64_t below = 0, above = 0;
  bool operator==(const HaloExtent&) const = default;
};

// The halo a rank needs to advance k steps alone when k * r_z = `halo` planes: `halo` planes
// on each side, clipped at the grid's ends unless z is periodic (there the boundary rule
// applies at the part's end, as in the global grid).
HaloExtent needed_halo(const Slab& slab, int64_t nz, int64_t halo, bool periodic);

// Whether a part holding `held` can run with `needed`: a wider halo is as good (the values
// its outer planes get wrong never reach the slab), but it must not reach past a grid end
// that is not periodic, where the part's end must be the grid's.
bool halo_suffices(const HaloExtent& held, const HaloExtent& needed, const Slab& slab, int64_t nz,
                   bool periodic);

// Global plane z (any integer for periodic z) taken modulo nz; for other boundaries z itself.
int64_t wrap_plane(int64_t z, int64_t nz, bool periodic);

// The rank whose slab holds global plane z (0 <= z < nz).
int owner_of(const std::vector<Slab>& slabs, int64_t z);

}  // namespace deepgrid
