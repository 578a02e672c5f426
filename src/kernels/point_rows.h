// Where the scheme kernels find a component's values at the point: in the centre input plane
// with the other components, or, at a lean wavefront level, in a plane of its own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepgrid::internal {

// Components of a lean wavefront level (engines/wavefront.h) that are not stored with the
// others: each is a carried component (scheme.h) read at the point only, so its value lies in
// a plane that the wavefront holds anyway (that of the component it is carried from, one
// level down, or level 0's for a coefficient field). Component c is in `mask` (bit c); its
// plane's frame-local (0, 0) is plane[c], rows stride[c] apart. Components in `unwritten` (bit
// c) are not written: aliased ones at the levels whose rings leave them out, and at the last
// level those the output already holds (the in-core engine's coefficient fields).
template <typename T>
struct AliasedPlanes {
  uint64_t mask = 0;
  const T* const* plane = nullptr;
  const ptrdiff_t* stride = nullptr;
  uint64_t unwritten = 0;
  // The output of the update is written over the plane of an aliased component it reads at the
  // point (the in-core engine's rotated time levels): the kernel computes each point once.
  bool in_place = false;
  // Nothing reads the output before it would have left the caches: kernels that can store it
  // with non-temporal stores do (the preset stencils' specialised kernels:
  // StencilKernel::apply_bypassing_caches), the others store it as usual.
  bool bypass_caches = false;

  bool has(int c) const { return (mask >> c & 1) != 0; }
  bool writes(int c) const { return (unwritten >> c & 1) == 0; }
};

// Component c's row y at the point, from column 0: in[rz] + c * field + y * stride, or its
// own plane's row when aliased.
template <typename T>
struct PointRows {
  const T* const* in;  // in[rz + dz]: input plane dz
  int rz;
  ptrdiff_t stride, field;
  const AliasedPlanes<T>& aliased;

  const T* row(int c, int64_t y) const {
    if (aliased.has(c)) return aliased.plane[c] + y * aliased.stride[c];
    return in[rz] + c * field + y * stride;
  }
};

}  // namespace deepgrid::internal
