// The preset stencil shapes as compile-time point lists, and the sum over one of them at one
// point: what the specialised stencil and scheme kernels are made of.
//
// A shape is the box of radius R (flat when !ThreeD) keeping the points with at most
// MaxNonzero non-zero offsets, in canonical (dz, dy, dx) order (stencil.h's). Every offset is
// a compile-time constant, so a sum over a shape reads one base pointer per (dz, dy) row with
// dx as an address displacement, and its loop over points vectorises.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "core/aligned_buffer.h"

namespace deepgrid::internal {

struct Offset {
  int dx, dy, dz;
};

template <int R, bool ThreeD, int MaxNonzero>
struct FixedShape {
  static constexpr int kRz = ThreeD ? R : 0;
  static constexpr int kSide = 2 * R + 1;
  static constexpr int kRows = (2 * kRz + 1) * kSide;  // (dz, dy) rows, some unused
  static constexpr int kCentreRow = kRz * kSide + R;   // the row of (dy, dz) = (0, 0)

  static constexpr auto offsets() {
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
  static constexpr auto kPoints = offsets();
  static constexpr size_t size() { return kPoints.size(); }
  static constexpr int row_of(size_t k) {
    return (kPoints[k].dz + kRz) * kSide + kPoints[k].dy + R;
  }

  // rows[row_of(k)] = the row of point k's (dz, dy) for a row whose first point is at offset
  // `row_start` of every plane in[kRz + dz].
  template <typename T>
  static void set_rows(const T* const* in, ptrdiff_t row_start, ptrdiff_t stride, const T** rows) {
    for (int dz = -kRz; dz <= kRz; ++dz) {
      for (int dy = -R; dy <= R; ++dy) {
        rows[(dz + kRz) * kSide + dy + R] = in[kRz + dz] + row_start + dy * stride;
      }
    }
  }

  // The stencil's value at point i of the row, in stencil.h's order: acc = c_0 v_0, then
  // acc = fma(c_k, v_k, acc).
  template <typename T, size_t... K>
  __attribute__((always_inline)) static T sum(const T* const* rows, const T* coef, ptrdiff_t i,
                                              std::index_sequence<K...>) {
    T acc = coef[0] * rows[row_of(0)][i + kPoints[0].dx];
    ((acc = K == 0 ? acc : std::fma(coef[K], rows[row_of(K)][i + kPoints[K].dx], acc)), ...);
    return acc;
  }

  // The stencil's values at points [i, i + B) of the row into acc, point by point in the
  // order of sum(); the points' chains go term by term side by side, so that B / (values per
  // vector) independent fma chains interleave instead of each waiting on its own latency.
  template <typename T, int64_t B, size_t... K>
  __attribute__((always_inline)) static void sum_block(const T* const* rows, const T* coef,
                                                       ptrdiff_t i, T* __restrict acc,
                                                       std::index_sequence<K...>) {
    {
      const T* __restrict r = rows[row_of(0)] + i + kPoints[0].dx;
      const T c = coef[0];
#pragma omp simd
      for (int64_t j = 0; j < B; ++j) acc[j] = c * r[j];
    }
    (
        [&] {
          if constexpr (K > 0) {
            const T* __restrict r = rows[row_of(K)] + i + kPoints[K].dx;
            const T c = coef[K];
#pragma omp simd
            for (int64_t j = 0; j < B; ++j) acc[j] = std::fma(c, r[j], acc[j]);
          }
        }(),
        ...);
  }
};

// Whether a shape's sums go in blocks (sum_block): measured in core at 256^3 f32 on an AVX2
// EPYC VM, blocks made 13pt-25pt shapes faster (19pt +20%, 25pt +37%, wave8 +20%), left 7pt
// and wave2 as they were and made 27pt 10% slower, so the shapes of 13 to 25 points use them.
template <typename Shape>
inline constexpr bool kSumsInBlocks = Shape::size() >= 13 && Shape::size() <= 25;

// Points per block of sum_block: four vectors of the widest width the build targets.
template <typename T>
inline constexpr int64_t kBlockPoints =
#if defined(__AVX512F__)
    4 * 64 / sizeof(T);
#else
    4 * 32 / sizeof(T);
#endif

// Runs point(j) for every j in [0, width): blocks of four 512-bit vectors first, which GCC
// unrolls but computes one vector's chain after another (they overlap only in the CPU's
// out-of-order window: enough for short chains, sum_block interleaves long ones); the tail in
// whole 256-bit vectors, the last one ending at the row's end (points computed again get the
// same values: outputs alias no input), so no scalar remainder runs unless the row is
// narrower than a vector. kOnce: every point exactly once (the tail's last vector as a
// remainder loop), for outputs written over a point's own input, which a second computation
// would read changed.
template <typename T, bool kOnce, typename Point>
__attribute__((always_inline)) inline void for_each_point_vectorised(int64_t width, Point&& point) {
  constexpr int64_t kUnroll = 4 * 64 / sizeof(T);
  constexpr int64_t kVector = 32 / sizeof(T);
  int64_t i = 0;
  for (; i + kUnroll <= width; i += kUnroll) {
#pragma omp simd
    for (int64_t j = i; j < i + kUnroll; ++j) point(j);
  }
  if (kOnce || width < kVector) {
#pragma omp simd
    for (int64_t j = i; j < width; ++j) point(j);
    return;
  }
  for (; i < width; i += kVector) {
    const int64_t at = std::min(i, width - kVector);
#pragma omp simd
    for (int64_t j = at; j < at + kVector; ++j) point(j);
  }
}

// Computes the `width` points of a row of a shape's sums: block(i) points [i, i +
// kBlockPoints<T>) for shapes whose sums go in blocks, point(j) point j alone, vectorised. The
// blocks and vectors start at the first point whose value in `centre` (the row of the point
// itself) starts a 64-byte line, so that the loads of every row at dx = 0 and the stores are
// whole lines wherever rows are aligned alike (vectors across two lines made wave8's kernel
// about 1.5x slower). The points before it are computed as the line's worth of vectors (those
// past it twice, with the same values: outputs alias no input) or, kOnce, each once.
template <typename T, typename Shape, bool kOnce = false, typename Block, typename Point>
__attribute__((always_inline)) inline void for_each_row_point(const T* centre, int64_t width,
                                                              Block&& block, Point&& point) {
  constexpr int64_t kLine = line_values(sizeof(T)), kB = kBlockPoints<T>;
  const auto address = reinterpret_cast<uintptr_t>(centre) / sizeof(T);
  int64_t i = static_cast<int64_t>((kLine - address % kLine) % kLine);
  if (width < 4 * kLine) i = 0;
  if (i > 0) for_each_point_vectorised<T, kOnce>(kOnce ? i : kLine, point);
  for (; kSumsInBlocks<Shape> && i + kB <= width; i += kB) block(i);
  for_each_point_vectorised<T, kOnce>(
      width - i, [&](int64_t j) __attribute__((always_inline)) { point(i + j); });
}

// Stores the 32 bytes at `from` to `to`, 32-byte aligned, with a non-temporal store (an
// ordinary copy where the build targets no AVX).
template <typename T>
__attribute__((always_inline)) inline void store_bypassing_caches(T* to, const T* from) {
#if defined(__AVX__)
  if constexpr (sizeof(T) == 4) {
    _mm256_stream_ps(reinterpret_cast<float*>(to),
                     _mm256_load_ps(reinterpret_cast<const float*>(from)));
  } else {
    _mm256_stream_pd(reinterpret_cast<double*>(to),
                     _mm256_load_pd(reinterpret_cast<const double*>(from)));
  }
#else
  std::copy_n(from, 32 / sizeof(T), to);
#endif
}

// Orders the non-temporal stores made so far before every later store of this thread.
inline void fence_bypassing_stores() {
#if defined(__SSE__)
  _mm_sfence();
#endif
}

// for_each_row_point's counterpart for output stored past the caches: out[i] = value(i) for
// every i in [0, width), the whole 32-byte units of `out` with non-temporal stores. Those are
// computed a block at a time into registers, vectorised (block(i, acc): kBlockPoints<T> values
// into acc, for shapes whose sums go in blocks; else two vectors' worth of value(j)), then
// stored; the points before the first unit and after the last with ordinary stores. The caller
// fences the stores (fence_bypassing_stores) before anything else reads them.
template <typename T, typename Shape, typename Block, typename Value>
__attribute__((always_inline)) inline void for_each_row_point_bypassing_caches(T* out,
                                                                               int64_t width,
                                                                               Block&& block,
                                                                               Value&& value) {
  constexpr int64_t kVector = 32 / sizeof(T);
  constexpr int64_t kB = kSumsInBlocks<Shape> ? kBlockPoints<T> : 2 * kVector;
  int64_t i = 0;
  for (; i < width && reinterpret_cast<uintptr_t>(out + i) % 32 != 0; ++i) out[i] = value(i);
  for (; i + kB <= width; i += kB) {
    alignas(64) T acc[kB];
    if constexpr (kSumsInBlocks<Shape>) {
      block(i, acc);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < kB; ++j) acc[j] = value(i + j);
    }
    for (int64_t v = 0; v < kB; v += kVector) store_bypassing_caches(out + i + v, acc + v);
  }
  for (; i < width; ++i) out[i] = value(i);
}

}  // namespace deepgrid::internal
