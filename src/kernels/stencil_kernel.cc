#include "kernels/stencil_kernel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "kernels/fixed_shape.h"

namespace deepgrid {
namespace {

using internal::FixedShape;
using internal::Offset;

// One row of a fixed-shape stencil (fixed_shape.h): long chains in blocks whose sums
// interleave, the rest a vector at a time (for_each_row_point); kBypass, stored past the caches
// (for_each_row_point_bypassing_caches).
template <typename T, typename Shape, bool kBypass, size_t... K>
inline void fixed_row(const T* const* in, const T* c, T* __restrict out, ptrdiff_t row_start,
                      ptrdiff_t stride, int64_t width, std::index_sequence<K...> points) {
  // row_start: offset of the row's first output point in every input plane; out: that point.
  const T* rows[Shape::kRows];
  Shape::set_rows(in, row_start, stride, rows);
  const T coef[] = {c[K]...};
  if constexpr (kBypass) {
    internal::for_each_row_point_bypassing_caches<T, Shape>(
        out, width,
        [&](int64_t i, T * acc) __attribute__((always_inline)) {
          Shape::template sum_block<T, internal::kBlockPoints<T>>(rows, coef, i, acc, points);
        },
        [&](int64_t i)
            __attribute__((always_inline)) { return Shape::sum(rows, coef, i, points); });
    return;
  }
  internal::for_each_row_point<T, Shape>(
      rows[Shape::kCentreRow], width,
      [&](int64_t i) __attribute__((always_inline)) {
        Shape::template sum_block<T, internal::kBlockPoints<T>>(rows, coef, i, out + i, points);
      },
      [&](int64_t i)
          __attribute__((always_inline)) { out[i] = Shape::sum(rows, coef, i, points); });
}

template <typename T, int R, bool ThreeD, int MaxNonzero, bool kBypass>
void apply_fixed(const StencilKernel<T>& k, const T* const* in, ptrdiff_t stride, T* out,
                 ptrdiff_t out_stride, Rect rc) {
  using Shape = FixedShape<R, ThreeD, MaxNonzero>;
  constexpr size_t kN = Shape::size();
  T c[kN];
  for (size_t i = 0; i < kN; ++i) c[i] = k.terms()[i].c;
  for (int64_t y = rc.y0; y < rc.y1; ++y) {
    fixed_row<T, Shape, kBypass>(in, c, out + (y - rc.y0) * out_stride, y * stride + rc.x0, stride,
                                 rc.x1 - rc.x0, std::make_index_sequence<kN>{});
  }
  if constexpr (kBypass) internal::fence_bypassing_stores();
}

// Any point list: accumulate term by term into the output row, in blocks that stay in L1.
template <typename T>
void apply_generic(const StencilKernel<T>& k, const T* const* in, ptrdiff_t stride, T* out,
                   ptrdiff_t out_stride, Rect rc) {
  constexpr int64_t kBlock = 1024;
  const auto& terms = k.terms();
  const int rz = k.rz();
  const int64_t width = rc.x1 - rc.x0;
  for (int64_t y = rc.y0; y < rc.y1; ++y) {
    T* __restrict o = out + (y - rc.y0) * out_stride;  // o[i] is point x0 + i
    auto source = [&](const auto& t) { return in[rz + t.dz] + (y + t.dy) * stride + rc.x0 + t.dx; };
    for (int64_t b0 = 0; b0 < width; b0 += kBlock) {
      const int64_t b1 = std::min(width, b0 + kBlock);
      {
        const T* __restrict s = source(terms[0]);
        const T c = terms[0].c;
#pragma omp simd
        for (int64_t i = b0; i < b1; ++i) o[i] = c * s[i];
      }
      for (size_t t = 1; t < terms.size(); ++t) {
        const T* __restrict s = source(terms[t]);
        const T c = terms[t].c;
#pragma omp simd
        for (int64_t i = b0; i < b1; ++i) o[i] = std::fma(c, s[i], o[i]);
      }
    }
  }
}

template <typename T>
struct ShapeKernel {
  using Fn = void (*)(const StencilKernel<T>&, const T* const*, ptrdiff_t, T*, ptrdiff_t, Rect);
  std::vector<Offset> offsets;
  Fn fn, bypassing_fn;
};

template <typename T, int R, bool ThreeD, int MaxNonzero>
ShapeKernel<T> fixed_shape() {
  constexpr auto p = FixedShape<R, ThreeD, MaxNonzero>::offsets();
  return {std::vector<Offset>(p.begin(), p.end()), &apply_fixed<T, R, ThreeD, MaxNonzero, false>,
          &apply_fixed<T, R, ThreeD, MaxNonzero, true>};
}

// The shapes of the presets (7pt, 13pt, 25pt, 19pt, 27pt, 5pt, 9pt).
template <typename T>
const std::vector<ShapeKernel<T>>& fixed_shapes() {
  static const std::vector<ShapeKernel<T>> shapes = {
      fixed_shape<T, 1, true, 1>(),  fixed_shape<T, 2, true, 1>(), fixed_shape<T, 4, true, 1>(),
      fixed_shape<T, 1, true, 2>(),  fixed_shape<T, 1, true, 3>(), fixed_shape<T, 1, false, 1>(),
      fixed_shape<T, 1, false, 2>(),
  };
  return shapes;
}

}  // namespace

template <typename T>
StencilKernel<T>::StencilKernel(const Stencil& stencil)
    : rx_(stencil.radius_x()), ry_(stencil.radius_y()), rz_(stencil.radius_z()) {
  for (const auto& p : stencil.points()) terms_.push_back({p.dx, p.dy, p.dz, static_cast<T>(p.c)});
  fn_ = &apply_generic<T>;
  bypassing_fn_ = &apply_generic<T>;
  for (const auto& shape : fixed_shapes<T>()) {
    bool same = shape.offsets.size() == terms_.size() &&
                std::equal(terms_.begin(), terms_.end(), shape.offsets.begin(),
                           [](const Term& t, const Offset& o) {
                             return t.dx == o.dx && t.dy == o.dy && t.dz == o.dz;
                           });
    if (same) {
      fn_ = shape.fn;
      bypassing_fn_ = shape.bypassing_fn;
      specialised_ = true;
    }
  }
}

template class StencilKernel<float>;
template class StencilKernel<double>;

}  // namespace deepgrid
