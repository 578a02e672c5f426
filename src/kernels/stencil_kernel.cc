#include "kernels/stencil_kernel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace deepgrid {
namespace {

struct Offset {
  int dx, dy, dz;
};

// Offsets of a preset's shape, in canonical (dz, dy, dx) order: the box of radius R (flat
// when !ThreeD) keeping points with at most MaxNonzero non-zero offsets.
template <int R, bool ThreeD, int MaxNonzero>
constexpr auto shape_offsets() {
  constexpr int kRz = ThreeD ? R : 0;
  constexpr auto count = [] {
    int n = 0;
    for (int dz = -kRz; dz <= kRz; ++dz)
      for (int dy = -R; dy <= R; ++dy)
        for (int dx = -R; dx <= R; ++dx)
          if ((dx != 0) + (dy != 0) + (dz != 0) <= MaxNonzero) ++n;
    return n;
  }();
  std::array<Offset, count> out{};
  int i = 0;
  for (int dz = -kRz; dz <= kRz; ++dz)
    for (int dy = -R; dy <= R; ++dy)
      for (int dx = -R; dx <= R; ++dx)
        if ((dx != 0) + (dy != 0) + (dz != 0) <= MaxNonzero) out[i++] = {dx, dy, dz};
  return out;
}

// One row of a fixed-shape stencil. Every offset is a compile-time constant: one base pointer
// per (dz, dy) row, dx as an address displacement. Points go in blocks of kUnroll vectors so
// that that many independent FMA chains interleave (each output still follows the evaluation
// order exactly); the tail runs one vector at a time.
template <typename T, int R, bool ThreeD, int MaxNonzero, size_t... K>
inline void fixed_row(const T* const* in, const T* c, T* __restrict out, ptrdiff_t row_start,
                      ptrdiff_t stride, int64_t width, std::index_sequence<K...>) {
  // row_start: offset of the row's first output point in every input plane; out: that point.
  static constexpr auto P = shape_offsets<R, ThreeD, MaxNonzero>();
  constexpr int kRz = ThreeD ? R : 0;
  constexpr int kSide = 2 * R + 1;
  constexpr auto row_of = [](size_t k) { return (P[k].dz + kRz) * kSide + P[k].dy + R; };
  const T* __restrict rows[(2 * kRz + 1) * kSide];
  for (int dz = -kRz; dz <= kRz; ++dz) {
    for (int dy = -R; dy <= R; ++dy) {
      rows[(dz + kRz) * kSide + dy + R] = in[kRz + dz] + row_start + dy * stride;
    }
  }
  const T coef[] = {c[K]...};
  auto point = [&](int64_t i) __attribute__((always_inline)) {
    T acc = coef[0] * rows[row_of(0)][i + P[0].dx];
    ((acc = K == 0 ? acc : std::fma(coef[K], rows[row_of(K)][i + P[K].dx], acc)), ...);
    out[i] = acc;
  };
  constexpr int64_t kUnroll = 4 * 64 / sizeof(T);  // four 512-bit vectors
  constexpr int64_t kVector = 32 / sizeof(T);      // one 256-bit vector
  int64_t i = 0;
  for (; i + kUnroll <= width; i += kUnroll) {
#pragma omp simd
    for (int64_t j = i; j < i + kUnroll; ++j) point(j);
  }
  if (width < kVector) {
#pragma omp simd
    for (int64_t j = i; j < width; ++j) point(j);
    return;
  }
  // The tail in whole vectors, the last one ending at the row's end: the points it computes
  // again get the same values (out aliases no input), and no scalar remainder runs.
  for (; i < width; i += kVector) {
    const int64_t at = std::min(i, width - kVector);
#pragma omp simd
    for (int64_t j = at; j < at + kVector; ++j) point(j);
  }
}

template <typename T, int R, bool ThreeD, int MaxNonzero>
void apply_fixed(const StencilKernel<T>& k, const T* const* in, ptrdiff_t stride, T* out,
                 ptrdiff_t out_stride, Rect rc) {
  constexpr size_t kN = shape_offsets<R, ThreeD, MaxNonzero>().size();
  T c[kN];
  for (size_t i = 0; i < kN; ++i) c[i] = k.terms()[i].c;
  for (int64_t y = rc.y0; y < rc.y1; ++y) {
    fixed_row<T, R, ThreeD, MaxNonzero>(in, c, out + (y - rc.y0) * out_stride, y * stride + rc.x0,
                                        stride, rc.x1 - rc.x0, std::make_index_sequence<kN>{});
  }
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
struct FixedShape {
  std::vector<Offset> offsets;
  void (*fn)(const StencilKernel<T>&, const T* const*, ptrdiff_t, T*, ptrdiff_t, Rect);
};

template <typename T, int R, bool ThreeD, int MaxNonzero>
FixedShape<T> fixed_shape() {
  constexpr auto p = shape_offsets<R, ThreeD, MaxNonzero>();
  return {std::vector<Offset>(p.begin(), p.end()), &apply_fixed<T, R, ThreeD, MaxNonzero>};
}

// The shapes of the presets (7pt, 13pt, 25pt, 19pt, 27pt, 5pt, 9pt).
template <typename T>
const std::vector<FixedShape<T>>& fixed_shapes() {
  static const std::vector<FixedShape<T>> shapes = {
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
  for (const auto& shape : fixed_shapes<T>()) {
    bool same = shape.offsets.size() == terms_.size() &&
                std::equal(terms_.begin(), terms_.end(), shape.offsets.begin(),
                           [](const Term& t, const Offset& o) {
                             return t.dx == o.dx && t.dy == o.dy && t.dz == o.dz;
                           });
    if (same) {
      fn_ = shape.fn;
      specialised_ = true;
    }
  }
}

template class StencilKernel<float>;
template class StencilKernel<double>;

}  // namespace deepgrid
