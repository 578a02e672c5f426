// The in-core engine: wavefront temporal blocking over x-y tiles.
//
// One pass advances the grid L = bt steps from `src` into `dst`. Each tile (an output rectangle
// [X0, X1) x [Y0, Y1)) is widened by L * r on each side; levels k = 0..L of its planes live in
// a local frame whose (0, 0) is global (X0 - L rx, Y0 - L ry), and level k is computed on the
// frame shrunk by k * r, so level L is exactly the tile. Level 0 is `src` itself, whose ghost
// frame (L * r wide) holds the boundary rule's values; periodic wraps, so cells outside the
// grid hold wrapped values and stay correct at every level by translation invariance, while
// for dirichlet and neumann the cells outside the grid are re-imposed after each level. Along
// z the tile streams: at step i, plane i - k rz of each level k is computed from the 2 rz + 1
// planes of level k - 1, levels 1..L-1 kept in rings and level L written into `dst`. Beyond z's
// ends a level reads constant planes (dirichlet), its edge plane (neumann), or, periodic,
// planes computed redundantly from wrapped inputs.
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

// Per-thread storage: rings of 2 rz + 1 frame-sized planes for levels 1..L-1, and one
// constant plane.
template <typename T>
class Workspace {
 public:
  // `outside`: the value of the constant plane (dirichlet planes beyond z's ends).
  Workspace(int levels, int rz, int64_t frame_w, int64_t frame_h, T outside)
      : slots_(2 * rz + 1),
        stride_(round_up(frame_w, 16)),
        plane_(round_up(stride_ * frame_h, 16)),
        buffer_(static_cast<size_t>(plane_ * ((levels - 1) * slots_ + 1)) * sizeof(T), 64),
        levels_(levels) {
    if (ok()) std::fill(constant_plane(), constant_plane() + plane_, outside);
  }

  bool ok() const { return buffer_.ok(); }
  ptrdiff_t stride() const { return stride_; }
  T* ring(int level, int64_t z) const {  // level in [1, L)
    const int64_t slot = ((z % slots_) + slots_) % slots_;
    return buffer_.data<T>() + ((level - 1) * slots_ + slot) * plane_;
  }
  T* constant_plane() const { return buffer_.data<T>() + (levels_ - 1) * slots_ * plane_; }

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

  // Level 0 is the source grid, ghost frame included (the frame's origin within it).
  const T* level_plane(int k, int64_t z) const {
    if (k == 0) return src_.plane(z) + oy_ * src_.stride() + ox_;
    if (z >= z_begin(k) && z < z_end(k)) return ws_.ring(k, z);
    if (b_.kind == Boundary::Kind::kDirichlet) return ws_.constant_plane();
    return ws_.ring(k, z < 0 ? 0 : s_.nz - 1);  // neumann: the edge plane
  }

  // The part of [lo, hi) (frame coordinates along an axis with origin o) inside [0, n).
  static std::pair<int64_t, int64_t> inside(int64_t lo, int64_t hi, int64_t o, int64_t n) {
    return {std::clamp(-o, lo, hi), std::clamp(n - o, lo, hi)};
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
    const ptrdiff_t in_stride = k == 1 ? src_.stride() : ws_.stride();
    const Rect r = region(k);
    if (k == L_) {
      T* out = dst_.plane(z) + tile_.y0 * dst_.stride() + tile_.x0;
      k_.apply(in, in_stride, out, dst_.stride(), r);
      return;
    }
    T* out = ws_.ring(k, z);
    k_.apply(in, in_stride, out + r.y0 * ws_.stride() + r.x0, ws_.stride(), r);
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

// Advances `levels` steps from src into dst; fills src's ghost frame first.
template <typename T>
void pass(PaddedGrid<T>& src, PaddedGrid<T>& dst, const StencilKernel<T>& k, const Boundary& b,
          int levels, const WavefrontPlan& plan) {
  src.fill_ghosts(b, plan.threads);
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
#pragma omp parallel num_threads(plan.threads)
  {
    Workspace<T> ws(levels, k.rz(), frame_w, frame_h, static_cast<T>(b.value));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntiles; ++t) {
      TilePass<T>(src, dst, k, b, levels, tiles[static_cast<size_t>(t)], ws).run();
    }
  }
}

int64_t workspace_bytes(int bt, int rz, int64_t frame_w, int64_t frame_h, size_t value_bytes) {
  return (int64_t{bt - 1} * (2 * rz + 1) + 1) * round_up(frame_w, 16) * frame_h *
         static_cast<int64_t>(value_bytes);
}

// The ghost frame a pass of the plan reads around the source grid.
Halo frame_halo(const WavefrontPlan& p, int rx, int ry, int rz) {
  return {p.bt * rx, p.bt * ry, p.bt * rz};
}

}  // namespace

WavefrontPlan plan_wavefront(const Shape& s, const Stencil& stencil, size_t value_bytes,
                             int64_t steps, const InCoreOptions& opt) {
  WavefrontPlan p;
  const int rx = stencil.radius_x(), ry = stencil.radius_y(), rz = stencil.radius_z();
  // Deeper blocking cuts memory traffic but adds halo work and ring size. Measured on this
  // class of machine (docs/performance.md): star stencils do best around 6 / r levels, the
  // compute-heavier box stencils around 3 / r.
  const int r = std::max(1, stencil.radius());
  const bool star = stencil.size() <= 6 * r + 1;
  const int auto_bt = std::max(1, (star ? 6 : 3) / r);
  p.bt = static_cast<int>(
      std::clamp<int64_t>(opt.bt > 0 ? opt.bt : auto_bt, 1, std::max<int64_t>(1, steps)));
  p.threads = std::max(1, opt.threads > 0 ? opt.threads : omp_get_max_threads());
  const int64_t planes = int64_t{p.bt - 1} * (2 * rz + 1) + 1;
  const int64_t hx = int64_t{p.bt} * rx, hy = int64_t{p.bt} * ry;
  const int64_t row_budget = opt.cache_bytes / (planes * static_cast<int64_t>(value_bytes));
  int64_t tx = opt.tile_x > 0 ? opt.tile_x : s.nx;
  if (opt.tile_x <= 0) {
    while (tx > 64 && (round_up(tx + 2 * hx, 16)) * (16 + 2 * hy) > row_budget) tx = (tx + 1) / 2;
  }
  int64_t ty = opt.tile_y;
  if (ty <= 0) {
    // As tall as the budget allows, then evened out so that every thread gets the same
    // number of equal tiles.
    // Taller than 64 rows measured slower even when the budget allows it.
    const int64_t ty_max =
        std::clamp<int64_t>(row_budget / round_up(tx + 2 * hx, 16) - 2 * hy, 8, 64);
    const int64_t tiles_x = (s.nx + tx - 1) / tx;
    int64_t tiles_y = (s.ny + ty_max - 1) / ty_max;
    while ((tiles_x * tiles_y) % p.threads != 0 && tiles_y < s.ny) ++tiles_y;
    ty = (s.ny + tiles_y - 1) / tiles_y;
  }
  p.tile_x = std::clamp<int64_t>(tx, 1, s.nx);
  p.tile_y = std::clamp<int64_t>(ty, 1, s.ny);
  p.workspace_bytes = workspace_bytes(p.bt, rz, p.tile_x + 2 * hx, p.tile_y + 2 * hy, value_bytes);
  return p;
}

template <typename T>
int64_t InCoreEngine<T>::memory_bytes(const Shape& shape, const Stencil& stencil, int64_t steps,
                                      const InCoreOptions& options) {
  const StencilKernel<T> k(stencil);
  const WavefrontPlan p = plan_wavefront(shape, stencil, sizeof(T), steps, options);
  return 2 * PaddedGrid<T>::bytes_needed(shape, frame_halo(p, k.rx(), k.ry(), k.rz())) +
         p.threads * p.workspace_bytes;
}

template <typename T>
Result<InCoreEngine<T>> InCoreEngine<T>::create(const Shape& shape, const Stencil& stencil,
                                                int64_t steps, const InCoreOptions& options) {
  const StencilKernel<T> k(stencil);
  InCoreEngine e(stencil, plan_wavefront(shape, stencil, sizeof(T), steps, options));
  const Halo halo = frame_halo(e.plan_, k.rx(), k.ry(), k.rz());
  for (PaddedGrid<T>& g : e.grids_) {
    DG_ASSIGN_OR_RETURN(g, PaddedGrid<T>::allocate(shape, halo));
  }
  return e;
}

template <typename T>
int64_t InCoreEngine<T>::advance(const Boundary& boundary, int64_t steps,
                                 const ProgressFn& progress) {
  int64_t done = 0;
  while (done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(plan_.bt, steps - done));
    pass(grids_[cur_], grids_[1 - cur_], kernel_, boundary, levels, plan_);
    cur_ = 1 - cur_;
    done += levels;
    if (progress && !progress(done, steps)) break;
  }
  return done;
}

template class InCoreEngine<float>;
template class InCoreEngine<double>;

}  // namespace deepgrid
