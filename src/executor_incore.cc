// The in-core engine: wavefront temporal blocking over x-y tiles.
//
// One pass advances the grid L = bt steps from `src` into `dst`. Each tile (an output rectangle
// [X0, X1) x [Y0, Y1)) is widened by L * r on each side; levels k = 0..L of its planes live in
// a local frame whose (0, 0) is global (X0 - L rx, Y0 - L ry), and level k is computed on the
// frame shrunk by k * r, so level L is exactly the tile. Level 0 is read through the boundary
// rule (periodic wraps, so positions outside the grid hold the wrapped values and stay correct
// at every level by translation invariance); for dirichlet and neumann the cells outside the
// grid are re-imposed after each level. Along z the tile streams: plane i of level 0 arrives,
// then plane i - k rz of each level k is computed from the 2 rz + 1 planes of level k - 1 kept
// in a ring. Outside [0, nz) a level reads constant planes (dirichlet), its edge plane
// (neumann), or, periodic, planes computed redundantly from wrapped inputs.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "deepgrid/executor.h"
#include "internal/aligned_buffer.h"

namespace deepgrid {
namespace {

struct Tile {
  int64_t x0, x1, y0, y1;
};

// Per-thread storage: L rings of 2 rz + 1 frame-sized planes, plus one constant plane.
template <typename T>
class Workspace {
 public:
  // `outside`: the value of the constant plane (dirichlet planes beyond z's ends).
  Workspace(int levels, int rz, int64_t frame_w, int64_t frame_h, T outside)
      : slots_(2 * rz + 1),
        stride_(round_up(frame_w, 16)),
        plane_(round_up(stride_ * frame_h, 16)),
        buffer_(static_cast<size_t>(plane_ * (levels * slots_ + 1)) * sizeof(T), 64),
        levels_(levels) {
    if (ok()) std::fill(constant_plane(), constant_plane() + plane_, outside);
  }

  bool ok() const { return buffer_.ok(); }
  ptrdiff_t stride() const { return stride_; }
  T* ring(int level, int64_t z) const {
    const int64_t slot = ((z % slots_) + slots_) % slots_;
    return buffer_.data<T>() + (level * slots_ + slot) * plane_;
  }
  T* constant_plane() const { return buffer_.data<T>() + levels_ * slots_ * plane_; }

 private:
  int64_t slots_;
  ptrdiff_t stride_;
  int64_t plane_;
  internal::AlignedBuffer buffer_;
  int levels_;
};

// The pass over one tile: everything that stays fixed while its planes stream by.
template <typename T>
class TilePass {
 public:
  TilePass(const PaddedGrid<T>& src, PaddedGrid<T>& dst, const StencilKernel<T>& kernel,
           const Boundary& b, int levels, const Tile& tile, const Workspace<T>& ws)
      : src_(src),
        dst_(dst),
        k_(kernel),
        b_(b),
        L_(levels),
        ws_(ws),
        s_(src.shape()),
        rx_(kernel.rx()),
        ry_(kernel.ry()),
        rz_(kernel.rz()),
        tile_(tile),
        ox_(tile.x0 - int64_t{levels} * rx_),
        oy_(tile.y0 - int64_t{levels} * ry_),
        w_(tile.x1 - tile.x0 + 2 * int64_t{levels} * rx_),
        h_(tile.y1 - tile.y0 + 2 * int64_t{levels} * ry_),
        periodic_(b.kind == Boundary::Kind::kPeriodic) {}

  void run() {
    const int64_t lead = int64_t{L_} * rz_;
    for (int64_t i = z_begin(0); i < s_.nz + lead; ++i) {
      if (i < z_end(0)) load_level0(i);
      for (int k = 1; k <= L_; ++k) {
        const int64_t z = i - int64_t{k} * rz_;
        if (z >= z_begin(k) && z < z_end(k)) compute(k, z);
      }
    }
  }

 private:
  // Planes [z_begin(k), z_end(k)) of level k are held; periodic levels extend past the grid.
  int64_t z_begin(int k) const { return periodic_ ? -int64_t{L_ - k} * rz_ : 0; }
  int64_t z_end(int k) const { return s_.nz - z_begin(k); }

  // Level k covers the frame shrunk by k * r.
  Rect region(int k) const {
    return {int64_t{k} * rx_, w_ - int64_t{k} * rx_, int64_t{k} * ry_, h_ - int64_t{k} * ry_};
  }

  const T* level_plane(int k, int64_t z) const {
    if (z >= z_begin(k) && z < z_end(k)) return ws_.ring(k, z);
    if (b_.kind == Boundary::Kind::kDirichlet) return ws_.constant_plane();
    return ws_.ring(k, z < 0 ? 0 : s_.nz - 1);  // neumann: the edge plane
  }

  // The part of [lo, hi) (frame coordinates along an axis with origin o) inside [0, n).
  static std::pair<int64_t, int64_t> inside(int64_t lo, int64_t hi, int64_t o, int64_t n) {
    return {std::clamp(-o, lo, hi), std::clamp(n - o, lo, hi)};
  }

  void load_level0(int64_t z) {
    T* out = ws_.ring(0, z);
    const ptrdiff_t S = ws_.stride();
    const int64_t sz = boundary_source_index(b_, z, s_.nz);
    const auto [xa, xb] = inside(0, w_, ox_, s_.nx);
    for (int64_t j = 0; j < h_; ++j) {
      T* row = out + j * S;
      const int64_t sy = boundary_source_index(b_, oy_ + j, s_.ny);
      if (sz < 0 || sy < 0) {
        std::fill(row, row + w_, static_cast<T>(b_.value));
        continue;
      }
      const T* src = src_.plane(sz) + sy * src_.stride();
      std::memcpy(row + xa, src + ox_ + xa, sizeof(T) * static_cast<size_t>(xb - xa));
      for (int64_t i = 0; i < w_; ++i) {
        if (i >= xa && i < xb) {
          i = xb - 1;
          continue;
        }
        const int64_t sx = boundary_source_index(b_, ox_ + i, s_.nx);
        row[i] = sx < 0 ? static_cast<T>(b_.value) : src[sx];
      }
    }
  }

  // Re-imposes dirichlet/neumann on the cells of level k's region that lie outside the grid.
  void impose_boundary(T* plane, const Rect& r) const {
    const ptrdiff_t S = ws_.stride();
    const auto [xa, xb] = inside(r.x0, r.x1, ox_, s_.nx);
    const auto [ya, yb] = inside(r.y0, r.y1, oy_, s_.ny);
    const bool dirichlet = b_.kind == Boundary::Kind::kDirichlet;
    const T v = static_cast<T>(b_.value);
    for (int64_t j = ya; j < yb; ++j) {
      T* row = plane + j * S;
      for (int64_t i = r.x0; i < xa; ++i) row[i] = dirichlet ? v : row[xa];
      for (int64_t i = xb; i < r.x1; ++i) row[i] = dirichlet ? v : row[xb - 1];
    }
    for (int64_t j = r.y0; j < r.y1; ++j) {
      if (j >= ya && j < yb) continue;
      T* row = plane + j * S;
      const T* from = plane + (j < ya ? ya : yb - 1) * S;
      for (int64_t i = r.x0; i < r.x1; ++i) row[i] = dirichlet ? v : from[i];
    }
  }

  void compute(int k, int64_t z) {
    const T* in[2 * kMaxStencilRadius + 1];
    for (int dz = -rz_; dz <= rz_; ++dz) in[rz_ + dz] = level_plane(k - 1, z + dz);
    const Rect r = region(k);
    if (k == L_) {
      T* out = dst_.plane(z) + tile_.y0 * dst_.stride() + tile_.x0;
      k_.apply(in, ws_.stride(), out, dst_.stride(), r);
      return;
    }
    T* out = ws_.ring(k, z);
    k_.apply(in, ws_.stride(), out + r.y0 * ws_.stride() + r.x0, ws_.stride(), r);
    const bool outside = r.x0 < -ox_ || r.x1 > s_.nx - ox_ || r.y0 < -oy_ || r.y1 > s_.ny - oy_;
    if (!periodic_ && outside) impose_boundary(out, r);
  }

  const PaddedGrid<T>& src_;
  PaddedGrid<T>& dst_;
  const StencilKernel<T>& k_;
  const Boundary& b_;
  const int L_;
  const Workspace<T>& ws_;
  const Shape s_;
  const int rx_, ry_, rz_;
  const Tile tile_;
  const int64_t ox_, oy_, w_, h_;
  const bool periodic_;
};

template <typename T>
void pass(const PaddedGrid<T>& src, PaddedGrid<T>& dst, const StencilKernel<T>& k,
          const Boundary& b, int levels, const WavefrontPlan& plan, int threads) {
  const Shape& s = src.shape();
  std::vector<Tile> tiles;
  for (int64_t y = 0; y < s.ny; y += plan.tile_y) {
    for (int64_t x = 0; x < s.nx; x += plan.tile_x) {
      tiles.push_back({x, std::min(s.nx, x + plan.tile_x), y, std::min(s.ny, y + plan.tile_y)});
    }
  }
  const int64_t frame_w = plan.tile_x + 2 * int64_t{levels} * k.rx();
  const int64_t frame_h = plan.tile_y + 2 * int64_t{levels} * k.ry();
  const int64_t ntiles = static_cast<int64_t>(tiles.size());
#pragma omp parallel num_threads(threads)
  {
    Workspace<T> ws(levels, k.rz(), frame_w, frame_h, static_cast<T>(b.value));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntiles; ++t) {
      TilePass<T>(src, dst, k, b, levels, tiles[static_cast<size_t>(t)], ws).run();
    }
  }
}

int64_t workspace_bytes(int bt, int rz, int64_t frame_w, int64_t frame_h, size_t value_bytes) {
  return (int64_t{bt} * (2 * rz + 1) + 1) * round_up(frame_w, 16) * frame_h *
         static_cast<int64_t>(value_bytes);
}

}  // namespace

WavefrontPlan plan_wavefront(const Shape& s, int rx, int ry, int rz, size_t value_bytes,
                             int64_t steps, const InCoreOptions& opt) {
  WavefrontPlan p;
  // Deeper blocking cuts memory traffic but adds halo work and ring size; 4 levels make a
  // 7-point sweep compute-bound on this class of machine (see docs/performance.md).
  const int r = std::max({rx, ry, rz, 1});
  const int auto_bt = std::max(1, 4 / r + (r == 1 ? 0 : 1));
  p.bt = static_cast<int>(
      std::clamp<int64_t>(opt.bt > 0 ? opt.bt : auto_bt, 1, std::max<int64_t>(1, steps)));
  // Full rows when they fit (long unit-stride loops); otherwise the widest tile whose frame
  // rows leave room for at least 16 output rows in the cache budget.
  const int64_t planes = int64_t{p.bt} * (2 * rz + 1) + 1;
  const int64_t hx = int64_t{p.bt} * rx, hy = int64_t{p.bt} * ry;
  const int64_t row_budget = opt.cache_bytes / (planes * static_cast<int64_t>(value_bytes));
  int64_t tx = opt.tile_x > 0 ? opt.tile_x : s.nx;
  if (opt.tile_x <= 0) {
    while (tx > 64 && (round_up(tx + 2 * hx, 16)) * (16 + 2 * hy) > row_budget) tx = (tx + 1) / 2;
  }
  int64_t ty = opt.tile_y;
  if (ty <= 0) {
    ty = std::max<int64_t>(8, row_budget / round_up(tx + 2 * hx, 16) - 2 * hy);
  }
  p.tile_x = std::clamp<int64_t>(tx, 1, s.nx);
  p.tile_y = std::clamp<int64_t>(ty, 1, s.ny);
  p.workspace_bytes = workspace_bytes(p.bt, rz, p.tile_x + 2 * hx, p.tile_y + 2 * hy, value_bytes);
  return p;
}

template <typename T>
int64_t advance_incore(PaddedGrid<T>& grid, PaddedGrid<T>& scratch, const StencilKernel<T>& kernel,
                       const Boundary& boundary, int64_t steps, const InCoreOptions& options) {
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  const WavefrontPlan plan = plan_wavefront(grid.shape(), kernel.rx(), kernel.ry(), kernel.rz(),
                                            sizeof(T), steps, options);
  PaddedGrid<T>* cur = &grid;
  PaddedGrid<T>* next = &scratch;
  int64_t done = 0;
  while (done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(plan.bt, steps - done));
    pass(*cur, *next, kernel, boundary, levels, plan, threads);
    std::swap(cur, next);
    done += levels;
    if (options.progress && !options.progress(done, steps)) break;
  }
  if (cur != &grid) std::swap(grid, scratch);
  return done;
}

template int64_t advance_incore<float>(PaddedGrid<float>&, PaddedGrid<float>&,
                                       const StencilKernel<float>&, const Boundary&, int64_t,
                                       const InCoreOptions&);
template int64_t advance_incore<double>(PaddedGrid<double>&, PaddedGrid<double>&,
                                        const StencilKernel<double>&, const Boundary&, int64_t,
                                        const InCoreOptions&);

}  // namespace deepgrid
