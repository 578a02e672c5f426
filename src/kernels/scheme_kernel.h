// Applies a scheme to a rectangle of one plane of every component: the kernel every engine
// calls (a plain stencil's scheme goes straight to its StencilKernel).
//
// Planes hold the scheme's components one after another: component c of the input plane at
// offset dz starts at in[rz + dz] + c * in_field, rows in_stride apart, with ghost cells as
// StencilKernel needs them; output component c starts at out + c * out_field. Results follow
// scheme.h's evaluation order exactly, whatever the rectangle. A user's kernel
// (deepgrid/kernel.h) computes the state fields' new values, given global coordinates.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "deepgrid/geometry.h"
#include "deepgrid/scheme.h"
#include "kernels/fused_update.h"
#include "kernels/point_rows.h"
#include "kernels/stencil_kernel.h"
#include "model/kernel_library.h"

namespace deepgrid {

// Where the planes lie in the grid and in time: their local (0, 0) is global (x, y) of plane
// z, in a grid of `shape`; the output is the state after step `step`. Positions past a
// periodic grid's ends wrap into it.
struct PlanePosition {
  int64_t x = 0, y = 0, z = 0;
  int64_t step = 0;
  Shape shape;
};

template <typename T>
class SchemeKernel {
 public:
  // A scheme with a user's kernel must support T (Scheme::check_dtype).
  explicit SchemeKernel(const Scheme& scheme);

  // Computes every point (x, y) of `rect` of every component, writing it to
  // out[c * out_field + (y - rect.y0) * out_stride + (x - rect.x0)]. `out` must not overlap
  // any input plane. `at` places the planes in the grid (read by users' kernels only).
  // Components in `aliased` (a subset of aliasable()) are read from their own planes;
  // components in aliased.unwritten are not written. With aliased.in_place (only where
  // rotation() names a pair), the output of rotation().second may be the plane of
  // rotation().first, point for point.
  void apply(const T* const* in, ptrdiff_t in_stride, ptrdiff_t in_field, T* out,
             ptrdiff_t out_stride, ptrdiff_t out_field, Rect rect, const PlanePosition& at,
             const internal::AliasedPlanes<T>& aliased = {}) const;

  // The components a lean wavefront may leave out of its ring levels (bit c for component c):
  // carried components (to, from) read by no stencil off the point, where `from` is the
  // component itself (a coefficient field: level 0 holds it) or a component that is stored (so
  // its value at the level below is in that level's ring). None for plain stencils and users'
  // kernels, whose planes keep every component.
  uint64_t aliasable() const { return aliasable_; }
  // The carried (to, from) pairs.
  const std::vector<std::pair<int, int>>& carried() const { return carried_; }

  int rx() const { return rx_; }
  int ry() const { return ry_; }
  int rz() const { return rz_; }
  int components() const { return components_; }
  // Whether every update runs in one pass per row (fused_update.h).
  bool fused() const { return !fused_.empty(); }
  // Time levels that can take turns in memory: (to, from) = (u@1, u) where the one update, of
  // u, reads u@1 at the point only and nothing else reads it, so that u's new value can be
  // written over u@1's old one (apply's in_place) and u@1 found where u was. {-1, -1}: none.
  std::pair<int, int> rotation() const { return rotation_; }

 private:
  struct Term {
    T c;
    bool identity;  // c == 1 and no factors: the term is its stencil's value
    std::vector<int> factors;
    int component;
    StencilKernel<T> kernel;
  };
  struct Update {
    int component;
    std::vector<Term> terms;
  };

  void apply_row(const internal::PointRows<T>& at, T* out, ptrdiff_t out_field, int64_t y,
                 int64_t x0, int64_t x1) const;
  void apply_fused(const internal::PointRows<T>& at, T* out, ptrdiff_t out_stride,
                   ptrdiff_t out_field, Rect rect) const;
  // The user's kernel on a rectangle that does not cross a periodic grid's end; local (0, 0)
  // is global (gx, gy).
  void apply_user(const T* const* in, ptrdiff_t in_stride, ptrdiff_t in_field, T* out,
                  ptrdiff_t out_stride, ptrdiff_t out_field, Rect rect, int64_t gx, int64_t gy,
                  const PlanePosition& at) const;
  // The (to, from) pairs' components of row y, [x0, x0 + width); `out` points at the row's
  // first point.
  std::pair<int, int> rotation_of() const;
  static void copy_carried(const std::vector<std::pair<int, int>>& pairs,
                           const internal::PointRows<T>& at, int64_t y, int64_t x0, T* out,
                           ptrdiff_t out_field, int64_t width);

  std::optional<StencilKernel<T>> stencil_;         // a plain stencil's scheme
  std::vector<internal::FusedUpdate<T>> fused_;     // every update, when all have the fused form
  std::vector<std::pair<int, int>> fused_carried_;  // carried pairs the fused passes leave
  std::shared_ptr<const KernelLibrary> user_;       // a user's kernel
  std::vector<int> state_components_;               // the user kernel's outputs: current levels
  std::vector<Update> updates_;
  std::vector<std::pair<int, int>> carried_;
  std::pair<int, int> rotation_{-1, -1};
  uint64_t aliasable_ = 0;
  int rx_ = 0, ry_ = 0, rz_ = 0, components_ = 1;
};

namespace internal {
// SchemeKernel::aliasable() of the scheme's kernel.
uint64_t aliasable_components(const Scheme& scheme);
}  // namespace internal

extern template class SchemeKernel<float>;
extern template class SchemeKernel<double>;

}  // namespace deepgrid
