// Applies a stencil to a rectangle of one plane: the compute kernel every engine calls.
//
// Input planes are padded: element (x, y) of a plane lives at origin[y * stride + x], and the
// kernel reads x in [x0 - rx, x1 + rx) and y in [y0 - ry, y1 + ry) of every input plane, so
// callers provide that many ghost cells (boundary values or neighbouring data). Input plane
// in[rz + dz] is the plane at offset dz, for dz in [-rz, rz].
//
// Results follow the evaluation order stated in stencil.h exactly, whatever the code path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "deepgrid/stencil.h"

namespace deepgrid {

// A half-open rectangle of a plane: x in [x0, x1), y in [y0, y1).
struct Rect {
  int64_t x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  int64_t points() const { return (x1 - x0) * (y1 - y0); }
  bool empty() const { return x1 <= x0 || y1 <= y0; }
};

template <typename T>
class StencilKernel {
 public:
  // Picks code specialised for the stencil's offsets when they match a preset's (whatever the
  // coefficients), else the generic point-list code.
  explicit StencilKernel(const Stencil& stencil);

  // Computes every point (x, y) of `rect`, reading in[rz + dz][(y + dy) * in_stride + x + dx],
  // and writes it to out[(y - rect.y0) * out_stride + (x - rect.x0)]. `out` must not overlap
  // any input plane.
  void apply(const T* const* in, ptrdiff_t in_stride, T* out, ptrdiff_t out_stride,
             Rect rect) const {
    fn_(*this, in, in_stride, out, out_stride, rect);
  }

  // The same values, stored with non-temporal stores where the kernel is specialised (the
  // lines written whole are then neither read from memory first nor kept in the caches), else
  // as apply() stores them; the stores are fenced before it returns, so that a thread that
  // synchronises with this one afterwards sees them.
  void apply_bypassing_caches(const T* const* in, ptrdiff_t in_stride, T* out, ptrdiff_t out_stride,
                              Rect rect) const {
    bypassing_fn_(*this, in, in_stride, out, out_stride, rect);
  }

  bool specialised() const { return specialised_; }
  int rx() const { return rx_; }
  int ry() const { return ry_; }
  int rz() const { return rz_; }

  // Implementation detail, public for the kernel functions.
  struct Term {
    int dx, dy, dz;
    T c;
  };
  const std::vector<Term>& terms() const { return terms_; }

 private:
  using Fn = void (*)(const StencilKernel&, const T* const*, ptrdiff_t, T*, ptrdiff_t, Rect);
  Fn fn_ = nullptr;
  Fn bypassing_fn_ = nullptr;
  bool specialised_ = false;
  int rx_ = 0, ry_ = 0, rz_ = 0;
  std::vector<Term> terms_;
};

extern template class StencilKernel<float>;
extern template class StencilKernel<double>;

}  // namespace deepgrid
