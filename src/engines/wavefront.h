// internal: the wavefront pipeline shared by the in-core and stream engines.
//
// A wavefront advances L = bt levels of one frame: an output tile [X0, X1) x [Y0, Y1) of the
// grid widened by L * r on each side. Frame-local (0, 0) is global (X0 - L rx, Y0 - L ry);
// level k (0..L) covers the frame shrunk by k * r, so level L is exactly the tile. The caller
// supplies level 0 (planes whose frame cells hold the grid's values or, outside the grid, the
// boundary rule's) and where level L goes. Levels 1..L-1 live in rings of 2 rz + 1 planes.
// A plane holds the scheme's components one after another (kernels/scheme_kernel.h): component
// c of a level-0 plane at level0(z) + c * level0_field, of an output plane at output(z) + c *
// out_field.
// A lean wavefront (a workspace with aliased components, SchemeKernel::aliasable()) keeps in
// its rings only the components that are not aliased: an aliased component c carried from f
// is, at level k - 1, component f of level k - 2 (whose ring still holds plane z when level k
// computes it: level k - 2 is 2 rz planes ahead), or level 0's c when c is a coefficient
// field (f = c; level 0 must then hold every plane a level computes, as the in-core engine's
// grid does). Level L writes every component but those the output holds already
// (`output_holds`: the in-core engine keeps its coefficient fields in both copies of the grid).
// For wave8 (u, u@1, m) the rings hold u alone.
//
// Step i computes plane i - k rz of every level k from the 2 rz + 1 planes of level k - 1, so
// it needs level-0 planes up to i and completes output plane i - L rz. Beyond z's ends a level
// reads a constant plane (dirichlet) or its edge plane (neumann); periodic levels extend past
// the ends and are computed from wrapped inputs, which stays exact by translation invariance
// (the same holds for periodic x and y, so periodic frames are computed whole, except that a
// frame as wide as the grid computes its columns and copies its x halos from them). For
// dirichlet and neumann only cells inside the grid are computed and the rest are re-imposed.
//
// A periodic wavefront whose output feeds further levels (a stage of the stream engine's
// sweep) extends its output `z_extension` planes past each end, computed the same way.
// A wavefront that resumes a sweep starts its output at `output_from`: level k then begins
// at output_from - (L - k) rz, the first plane the levels above it need.
// A trimmed wavefront (WavefrontTrim) computes only what reaches a box by a later level.
// Probes (probes.h): right after a wavefront computes plane z of level k (step
// probes.step + k), sources in that plane are added to every cell that stands for them (also
// the redundant ones in halos and periodic copies, so every tile sees the same values), and
// receivers record from the tile's own cells only, each value once.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "deepgrid/boundary.h"
#include "deepgrid/probes.h"
#include "kernels/scheme_kernel.h"

namespace deepgrid::internal {

// Components sources add to, bit c for component c (none for null): a lean wavefront's rings
// must hold them, since their values then change from level to level.
inline uint64_t sourced_components(const ResolvedProbes* probes) {
  uint64_t sourced = 0;
  if (probes != nullptr) {
    for (const ProbePoint& q : probes->sources) {
      if (q.component < 64) sourced |= uint64_t{1} << q.component;
    }
  }
  return sourced;
}

// Components a ring plane holds when `aliased` ones are left out: up to the last one kept.
inline int ring_components(int components, uint64_t aliased) {
  int n = components;
  while (n > 1 && (aliased >> (n - 1) & 1) != 0) --n;
  return n;
}

// Values from one row of a ring plane to the next for frames `frame_w` wide: whole 64-byte
// lines, with room for the lead that puts every grid column at the alignment it has in the grid
// (Wavefront::lead_), up to one line's values less one.
inline int64_t wavefront_row_stride(int64_t frame_w, size_t value_bytes) {
  return (frame_w + line_values(value_bytes) - 1 + 15) / 16 * 16;
}

// Bytes of a WavefrontWorkspace with these dimensions (whole pages: AlignedBuffer); components:
// those of a ring plane (ring_components).
inline int64_t wavefront_workspace_bytes(int levels, int rz, int64_t frame_w, int64_t frame_h,
                                         size_t value_bytes, int components = 1) {
  return static_cast<int64_t>(
      paged_bytes(static_cast<size_t>((int64_t{levels - 1} * (2 * rz + 1) + 1) *
                                      wavefront_row_stride(frame_w, value_bytes) * frame_h *
                                      static_cast<int64_t>(value_bytes) * components),
                  false));
}

// Values between the components of a ring plane of level k (k in [1, L)): the rows level k
// writes and level k + 1 reads, [k ry, frame_h - k ry) (whole rows of a multiple of 16 values).
// A component's row y is at c * field + y * stride from the plane's row 0, so the components'
// rows follow each other with nothing between them.
inline int64_t wavefront_level_field(ptrdiff_t stride, int64_t frame_h, int level, int ry) {
  return (frame_h - 2 * int64_t{level} * ry) * stride;
}

// Per-thread storage of a wavefront: rings for levels 1..L-1 and one constant plane. A ring
// plane of level k holds the components but the `aliased` ones (those after the last kept are
// left out; a lean wavefront), field_stride(k) apart; each is allocated whole (frame_h rows),
// which holds any level's. A ring's planes are reached through a table of pointers, so that a
// WavefrontCarry can trade planes with it instead of copying.
template <typename T>
class WavefrontWorkspace {
 public:
  // `outside`: the value of the constant plane (dirichlet beyond z's ends).
  WavefrontWorkspace(int levels, int rz, int ry, int64_t frame_w, int64_t frame_h, T outside,
                     int components = 1, uint64_t aliased = 0)
      : aliased_(aliased),
        components_(ring_components(components, aliased)),
        slots_(2 * rz + 1),
        ry_(ry),
        stride_(wavefront_row_stride(frame_w, sizeof(T))),
        h_(frame_h),
        plane_(stride_ * frame_h * components_),
        levels_(levels),
        buffer_(static_cast<size_t>(plane_ * ((levels - 1) * slots_ + 1)) * sizeof(T)) {
    if (!ok()) return;
    std::fill(constant_plane(), constant_plane() + plane_, outside);
    for (int64_t p = 0; p < (levels - 1) * slots_; ++p)
      table_.push_back(buffer_.data<T>() + p * plane_);
    outside_.resize(table_.size());
  }

  bool ok() const { return buffer_.ok(); }
  // The components a ring plane has room for (ring_components).
  int components() const { return components_; }
  // The components left out of the rings, bit c for component c.
  uint64_t aliased() const { return aliased_; }
  // Whether the rings hold component c.
  bool holds(int c) const { return c < components_ && (aliased_ >> c & 1) == 0; }
  ptrdiff_t stride() const { return stride_; }
  ptrdiff_t field_stride(int level) const { return wavefront_level_field(stride_, h_, level, ry_); }
  T* ring(int level, int64_t z) const { return table_[slot(level, z)]; }  // level in [1, L)
  // The ring's pointer to plane z of `level`, for trading it (WavefrontCarry): what the slot's
  // plane held outside the grid is forgotten.
  T*& ring_entry(int level, int64_t z) {
    outside_[slot(level, z)] = {};
    return table_[slot(level, z)];
  }
  // What the cells left and right of the grid hold in the plane of a ring slot: a dirichlet
  // value filled into columns [region.x0, x0) and [x1, region.x1) of every row of `region`
  // (Wavefront::impose_outside; frame columns, `lead` values into the row), or, `filled`
  // false, nothing known.
  struct OutsideColumns {
    bool filled = false;
    int64_t region_x0 = 0, region_x1 = 0, region_y0 = 0, region_y1 = 0, x0 = 0, x1 = 0, lead = 0;
    uint64_t value_bits = 0;
    bool operator==(const OutsideColumns&) const = default;
  };
  OutsideColumns& outside(int level, int64_t z) { return outside_[slot(level, z)]; }
  T* constant_plane() const { return buffer_.data<T>() + (levels_ - 1) * slots_ * plane_; }

 private:
  size_t slot(int level, int64_t z) const {
    return static_cast<size_t>((level - 1) * slots_ + ((z % slots_) + slots_) % slots_);
  }

  uint64_t aliased_;
  int components_;
  int64_t slots_;
  int ry_;
  ptrdiff_t stride_;
  int64_t h_;
  int64_t plane_;
  int levels_;
  AlignedBuffer buffer_;
  std::vector<T*> table_;                // level-major: (level - 1) * slots_ + slot
  std::vector<OutsideColumns> outside_;  // per slot of table_
};

struct WavefrontFrame {
  int64_t x0, x1, y0, y1;  // the output tile, inside the grid
};

// The points a wavefront's levels compute, within its frame and the grid: level k only those
// within (reach - k) * r of the box [lo, hi) along each axis (r the stencil's reach there; the
// box in the grid's coordinates). Nothing else reaches the box by level `reach`, so the box
// comes out exact there while points left out hold stale values. Shrinking by r per level, a
// level never reads a point its level below left out. Default: no limit.
struct WavefrontTrim {
  std::array<int64_t, 3> lo = GridPlacement{}.needed_lo;
  std::array<int64_t, 3> hi = GridPlacement{}.needed_hi;
  int64_t reach = 0;

  // [first, end) of level k along axis a, whose reach is r.
  int64_t first(int a, int k, int r) const { return lo[static_cast<size_t>(a)] - (reach - k) * r; }
  int64_t end(int a, int k, int r) const { return hi[static_cast<size_t>(a)] + (reach - k) * r; }
};

// What a wavefront carries from one run of steps to its next when it shares its workspace with
// others in between: for each level k in [1, L), the last 2 rz planes it computed. The carry
// owns 2 rz planes per level and trades them with the workspace's ring (Wavefront::save and
// restore swap pointers, copying nothing): after a run of steps it takes the ring's planes of
// those steps and leaves its own in their place, which the next wavefront in the workspace
// overwrites. Copying the planes out and back in instead made a 512x512x4096 stream run (7pt,
// bt 48, 256 MiB) 5% slower: 3809 against 4016 MLUP/s over four alternating runs. So every
// plane of a level must serve as a ring plane: a carried plane of level k holds rows
// [k ry, frame_h - k ry) of each component (all that level k + 1 reads and level k writes),
// field_stride(k) apart as in the ring, and is addressed like a ring plane, from row 0, which
// lies before its memory. The carry lives in bytes() of the caller's memory, which starts with
// room for those rows before the first plane, 64-byte aligned (carries of many wavefronts in
// one allocation: huge pages pay).
template <typename T>
class WavefrontCarry {
 public:
  static int64_t bytes(int levels, int rz, int ry, ptrdiff_t stride, int64_t frame_h,
                       int components) {
    const Layout l{rz, ry, stride, frame_h, components};
    return (l.lead(levels) + l.offset(levels)) * static_cast<int64_t>(sizeof(T));
  }

  WavefrontCarry(int levels, int rz, int ry, ptrdiff_t stride, int64_t frame_h, int components,
                 T* memory)
      : rz_(rz) {
    const Layout l{rz, ry, stride, frame_h, components};
    for (int k = 1; k < levels; ++k) {
      for (int q = 0; q < 2 * rz; ++q) {
        const int64_t start = l.lead(levels) + l.offset(k) + q * l.plane(k);
        table_.push_back(memory + start - int64_t{k} * ry * stride);
      }
    }
  }

  // The carry's pointer to level k's plane z (kept: the last 2 rz planes; their slots repeat).
  T*& entry(int k, int64_t z) {
    const int64_t slot = ((z % (2 * rz_)) + 2 * rz_) % (2 * rz_);  // periodic z may be < 0
    return table_[static_cast<size_t>((k - 1) * 2 * rz_ + slot)];
  }

 private:
  struct Layout {
    int rz, ry;
    ptrdiff_t stride;
    int64_t h;
    int components;
    // Values of a carried plane of level k, from its row k ry on.
    int64_t plane(int k) const { return components * wavefront_level_field(stride, h, k, ry); }
    // Values before level k's planes, after the lead.
    int64_t offset(int k) const {
      int64_t values = 0;
      for (int m = 1; m < k; ++m) values += 2 * int64_t{rz} * plane(m);
      return values;
    }
    // Values before the first plane: room for the rows that any plane's row 0 lies before it.
    int64_t lead(int levels) const {
      int64_t lead = 0;
      for (int k = 1; k < levels; ++k) lead = std::max(lead, int64_t{k} * ry * stride - offset(k));
      return lead;
    }
  };

  int rz_;
  std::vector<T*> table_;  // level-major: (k - 1) * 2 rz + slot
};

// What a tile hands to the next tile of its chain (WavefrontChain): for each level k in [1, L)
// and each plane z, level k's 2 ry rows just below the rows the next tile's level k computes,
// which its level k + 1 reads (and level k + 2 at its points, for a component carried from
// them). A chain's tiles are skewed: level k of a tile after the first computes the rows of its
// output tile moved (L - k) ry up, [Y0 + (L - k) ry, Y1 + (L - k) ry), so the rows below them
// are exactly what the tile before it computed last, and no row is computed twice. Whole ring
// rows (frame columns, the lead too) of every component a ring plane has room for, 2 ry rows
// of each, component after component; planes [z_first, z_first + planes).
template <typename T>
class WavefrontEdges {
 public:
  static int64_t values(int levels, int ry, ptrdiff_t stride, int components, int64_t planes) {
    return int64_t{std::max(0, levels - 1)} * planes * components * 2 * ry * stride;
  }
  WavefrontEdges(int ry, ptrdiff_t stride, int components, int64_t z_first, int64_t planes,
                 T* memory)
      : field_(2 * int64_t{ry} * stride),
        plane_(field_ * components),
        z_first_(z_first),
        planes_(planes),
        memory_(memory) {}

  // Level k's rows of plane z; component c's at c * field().
  T* rows(int k, int64_t z) const { return memory_ + ((k - 1) * planes_ + z - z_first_) * plane_; }
  // The planes held from now on: [z_first, z_first + planes) (a stream stage's block of them,
  // stream_sweep.cc; the tiles of a chain hand their edges on within the block).
  void start_at(int64_t z_first) { z_first_ = z_first; }
  int64_t field() const { return field_; }

 private:
  int64_t field_, plane_, z_first_, planes_;
  T* memory_;
};

// A tile's place in a chain of tiles (one x range, consecutive in y, run in order by one
// thread, sharing `edges`): `after` when a tile before it handed its edges, `before` when one
// after it takes them; `end` is the chain's last row + 1. Receivers are recorded at level k by
// the tile that computes them there: rows [Y0 + (L - k) ry, Y1 + (L - k) ry) clipped to `end`,
// from Y0 for the chain's first tile and up to Y1 for its last. Default: a tile on its own.
template <typename T>
struct WavefrontChain {
  const WavefrontEdges<T>* edges = nullptr;
  bool after = false, before = false;
  int64_t end = 0;
};

// The most tiles a chain holds when `threads` threads take whole chains of a grid's tiles_x x
// ranges of tiles_y tiles: each range cut along y into as many chains as the threads need (one
// chain each where there are fewer ranges than threads), of as equal lengths as fit; 0 where
// that leaves chains of one tile.
inline int64_t wavefront_chain_tiles(int64_t tiles_x, int64_t tiles_y, int threads) {
  const int64_t per_range = std::max<int64_t>(1, threads / tiles_x);
  return tiles_y / per_range >= 2 ? (tiles_y + per_range - 1) / per_range : 0;
}

// Where the chains of at most `longest` tiles begin in an x range of tiles_y tiles, and its end
// (tiles_y): as few chains as hold them, of as equal lengths as fit.
inline std::vector<int64_t> wavefront_chain_cuts(int64_t tiles_y, int64_t longest) {
  const int64_t count = (tiles_y + longest - 1) / longest;
  std::vector<int64_t> out;
  for (int64_t c = 0; c <= count; ++c) out.push_back(c * tiles_y / count);
  return out;
}

template <typename T>
class Wavefront {
 public:
  // Level-0 plane z: pointer to frame-local (0, 0), rows `stride` apart, components `field`.
  using Level0Fn = std::function<const T*(int64_t z)>;
  // Where output plane z goes: pointer to the tile's (X0, Y0), rows `stride` apart, components
  // `field` apart.
  using OutputFn = std::function<T*(int64_t z)>;
  struct PlaneStrides {
    ptrdiff_t stride = 0, field = 0;
  };

  Wavefront(const SchemeKernel<T>& kernel, const Boundary& b, const Shape& shape, int levels,
            const WavefrontFrame& tile, WavefrontWorkspace<T>& ws, Level0Fn level0,
            PlaneStrides level0_strides, OutputFn output, PlaneStrides out_strides,
            int64_t z_extension = 0, int64_t output_from = kFromStart, ProbeRun probes = {},
            WavefrontTrim trim = {}, uint64_t output_holds = 0)
      : k_(kernel),
        b_(b),
        s_(shape),
        L_(levels),
        ext_(b.kind == Boundary::Kind::kPeriodic ? z_extension : 0),
        from_(output_from),
        tile_(tile),
        ws_(ws),
        level0_fn_(std::move(level0)),
        level0_(level0_strides),
        output_(std::move(output)),
        out_(out_strides),
        rx_(kernel.rx()),
        ry_(kernel.ry()),
        rz_(kernel.rz()),
        ox_(tile.x0 - int64_t{levels} * rx_),
        lead_(((ox_ % kLine) + kLine) % kLine),
        oy_(tile.y0 - int64_t{levels} * ry_),
        w_(tile.x1 - tile.x0 + 2 * int64_t{levels} * rx_),
        h_(tile.y1 - tile.y0 + 2 * int64_t{levels} * ry_),
        periodic_(b.kind == Boundary::Kind::kPeriodic),
        wrap_x_(periodic_ && tile.x0 == 0 && tile.x1 == shape.nx &&
                int64_t{levels} * rx_ <= shape.nx && trim.lo[0] <= 0 && trim.hi[0] >= shape.nx),
        probes_(probes),
        trim_(trim),
        whole_(probes.placement.is_whole() ? shape : probes.placement.whole),
        output_holds_(output_holds & ws.aliased()) {
    for (const auto& [to, from] : kernel.carried()) {
      if (to < 64 && (ws.aliased() >> to & 1) != 0) carried_from_[static_cast<size_t>(to)] = from;
    }
  }

  // Rotated time levels (a wavefront of one level, the in-core engine at bt 1): level 0's
  // aliased component c lies in the output's component `at`, which the level writes point by
  // point over it (the kernel then computes each point once).
  void read_level0_from_output(int c, int at) {
    rotated_ = c;
    rotated_at_ = at;
  }

  // Coefficient components c >= `first` (aliased, carried from themselves) read from planes of
  // their own instead of level 0's: coefficients(z) points at frame-local (0, 0) of component
  // `first` of plane z, rows and components `strides` apart (the stream's window of them shared
  // by its stages).
  void read_coefficients_from(Level0Fn coefficients, PlaneStrides strides, int first) {
    coef_fn_ = std::move(coefficients);
    coef_ = strides;
    coef_first_ = first;
  }

  // Runs the tile as a part of a chain (WavefrontChain): its levels skewed after the chain's
  // first tile, its edges handed on before its last. Needs 2 or more levels.
  void chain(const WavefrontChain<T>& chain) { chain_ = chain; }

  // Level L stores its output with stores that bypass the caches where its kernel can
  // (AliasedPlanes::bypass_caches): for output that has left them before anything reads it (the
  // in-core engine's other copy of a grid larger than the last-level cache), whose lines are
  // then neither read from memory before being written nor kept in place of the rings'. Not
  // with time levels read from the output (read_level0_from_output), which the kernel reads
  // where it writes.
  void write_output_bypassing_caches() { bypass_caches_ = true; }

  // The frame's extents (what level-0 planes must cover).
  int64_t frame_w() const { return w_; }
  int64_t frame_h() const { return h_; }
  static constexpr int64_t kFromStart = std::numeric_limits<int64_t>::min() / 4;

  // Level-0 planes the pass reads: [z_begin(0), z_end(0)); steps: [first_step, end_step).
  int64_t z_begin(int k) const {
    const int64_t from = from_ - int64_t{L_ - k} * rz_;
    return std::max(from, periodic_ ? -(ext_ + int64_t{L_ - k} * rz_) : 0);
  }
  int64_t z_end(int k) const { return s_.nz + (periodic_ ? ext_ + int64_t{L_ - k} * rz_ : 0); }
  int64_t first_step() const { return z_begin(0); }
  int64_t end_step() const { return z_end(L_) + int64_t{L_} * rz_; }
  // The output plane step i completes, if it is in [z_begin(L), z_end(L)).
  int64_t output_plane(int64_t i) const { return i - int64_t{L_} * rz_; }

  // Runs step i.
  void step(int64_t i) const {
    for (int k = 1; k <= L_; ++k) {
      const int64_t z = i - int64_t{k} * rz_;
      if (z < z_begin(k) || z >= z_end(k)) continue;
      if (z < trim_.first(2, k, rz_) || z >= trim_.end(2, k, rz_)) continue;
      compute(k, z);
    }
  }

  // Trades the workspace's ring planes that steps from `next_step` on read (the last 2 rz each
  // level computed before it) for the carry's (WavefrontCarry): save() after a run of steps
  // hands them to the carry, restore() before the next run from the same step takes them
  // back, so that wavefronts can take turns in one workspace. Planes outside a level's range
  // are traded too; their contents are never read.
  void save(WavefrontCarry<T>& carry, int64_t next_step) const { trade(carry, next_step); }
  void restore(WavefrontCarry<T>& carry, int64_t next_step) const { trade(carry, next_step); }

 private:
  void trade(WavefrontCarry<T>& carry, int64_t next_step) const {
    for (int k = 1; k < L_; ++k) {
      const int64_t next = next_step - int64_t{k} * rz_;  // the next plane level k computes
      for (int64_t z = next - 2 * rz_; z < next; ++z)
        std::swap(ws_.ring_entry(k, z), carry.entry(k, z));
    }
  }

  // Level k's cells in the frame: shrunk by k r, or, after a chain's first tile, its output
  // tile's rows moved (L - k) ry up (WavefrontEdges).
  Rect region(int k) const {
    const int64_t y0 = int64_t{chain_.after ? 2 * L_ - k : k} * ry_;
    return {int64_t{k} * rx_, w_ - int64_t{k} * rx_, y0, h_ - int64_t{k} * ry_};
  }

  // The rows whose receivers level k records (WavefrontChain), global.
  std::pair<int64_t, int64_t> own_rows(int k) const {
    if (chain_.edges == nullptr) return {tile_.y0, tile_.y1};
    const int64_t skew = int64_t{L_ - k} * ry_;
    return {chain_.after ? std::min(tile_.y0 + skew, chain_.end) : tile_.y0,
            chain_.before ? std::min(tile_.y1 + skew, chain_.end) : tile_.y1};
  }

  // Once level k computed plane z: the rows below its own, from the chain's tile before
  // (take_edges), then, once the plane is whole, the rows the tile after needs below its own
  // (hand_edges_on; they may include those just taken).
  void take_edges(int k, int64_t z) const { move_edges(k, z, int64_t{2 * L_ - k - 2} * ry_, true); }
  void hand_edges_on(int k, int64_t z) const { move_edges(k, z, h_ - int64_t{k + 2} * ry_, false); }
  void move_edges(int k, int64_t z, int64_t row, bool take) const {
    const int64_t n = chain_.edges->field();
    T* edge = chain_.edges->rows(k, z);
    for (int f = 0; f < ws_.components(); ++f) {
      if (!ws_.holds(f)) continue;
      T* rows = ws_.ring(k, z) + f * ws_.field_stride(k) + row * ws_.stride();
      if (take) {
        std::copy_n(edge + f * n, n, rows);
      } else {
        std::copy_n(rows, n, edge + f * n);
      }
    }
  }

  // Level k's plane z (k in [1, L)), from frame-local (0, 0).
  T* ring(int k, int64_t z) const { return ws_.ring(k, z) + lead_; }

  const T* level_plane(int k, int64_t z) const {
    if (k == 0) return level0_fn_(z);
    if (z >= z_begin(k) && z < z_end(k)) return ring(k, z);
    if (b_.kind == Boundary::Kind::kDirichlet) return ws_.constant_plane() + lead_;
    return ring(k, z < 0 ? 0 : s_.nz - 1);  // neumann: the edge plane
  }

  void compute(int k, int64_t z) const {
    const T* in[2 * kMaxStencilRadius + 1];
    for (int dz = -rz_; dz <= rz_; ++dz) in[rz_ + dz] = level_plane(k - 1, z + dz);
    const PlaneStrides in_s =
        k == 1 ? level0_ : PlaneStrides{ws_.stride(), ws_.field_stride(k - 1)};
    const Rect r = region(k);
    // Cells computed: all of the region when periodic, else its part inside the grid; and of
    // those, the ones the trim keeps. A periodic frame as wide as the grid computes only the
    // grid's columns and copies the rest from them (wrap_x_).
    Rect inside = r;
    if (!periodic_) {
      inside = {std::clamp(-ox_, r.x0, r.x1), std::clamp(s_.nx - ox_, r.x0, r.x1),
                std::clamp(-oy_, r.y0, r.y1), std::clamp(s_.ny - oy_, r.y0, r.y1)};
    } else if (wrap_x_) {
      inside.x0 = std::clamp(-ox_, r.x0, r.x1);
      inside.x1 = std::clamp(s_.nx - ox_, r.x0, r.x1);
    }
    Rect c{std::clamp(trim_.first(0, k, rx_) - ox_, inside.x0, inside.x1),
           std::clamp(trim_.end(0, k, rx_) - ox_, inside.x0, inside.x1),
           std::clamp(trim_.first(1, k, ry_) - oy_, inside.y0, inside.y1),
           std::clamp(trim_.end(1, k, ry_) - oy_, inside.y0, inside.y1)};
    // A level without cells to compute is never read, with one exception: a chain's skewed
    // level may lie wholly past the grid's end (in its last tile, when that is shorter than
    // the skew), and its ghost rows (copies of the edge rows above it) and edges are still
    // read. A level the trim leaves out must return: filling its ghost rows would copy a row
    // outside its region (c clamped to an end of it), beyond a carried plane's rows, which is
    // another plane's memory, maybe another thread's.
    if (c.empty() && (chain_.edges == nullptr || !inside.empty())) return;
    if (!c.empty()) apply_level(k, z, in, in_s, r, c);
    if (k == L_) return;
    if (chain_.after) take_edges(k, z);  // (neumann ghost rows may copy the last of them)
    impose_outside(k, z, r, c, inside);
    if (chain_.before) hand_edges_on(k, z);
  }

  // Level k's cells c of plane z (in its region r) from the planes `in` of level k - 1, with the
  // probes' sources and receivers.
  void apply_level(int k, int64_t z, const T* const* in, const PlaneStrides& in_s, const Rect& r,
                   const Rect& c) const {
    // A lean wavefront's aliased components at level k - 1 (a lean level-1 kernel reads them
    // from level 0 like the rest): where they lie, and whether level k writes them.
    const T* aliased_plane[64];
    ptrdiff_t aliased_stride[64];
    const internal::AliasedPlanes<T> aliased{
        ws_.aliased(),  aliased_plane,
        aliased_stride, k == L_ ? output_holds_ : ws_.aliased(),
        rotated_ >= 0,  k == L_ && bypass_caches_ && rotated_ < 0};
    for (int a = 0; a < k_.components() && a < 64; ++a) {
      if (aliased.has(a)) locate_aliased(a, k - 1, z, aliased_plane[a], aliased_stride[a]);
    }
    T* out;
    PlaneStrides out_s;
    if (k == L_) {
      out_s = out_;
      out = output_(z) + (c.y0 - r.y0) * out_s.stride + (c.x0 - r.x0);
    } else {
      out_s = {ws_.stride(), ws_.field_stride(k)};
      out = ring(k, z) + c.y0 * out_s.stride + c.x0;
    }
    k_.apply(in, in_s.stride, in_s.field, out, out_s.stride, out_s.field, c,
             {ox_ + probes_.placement.x, oy_ + probes_.placement.y, z + probes_.placement.z,
              probes_.step + k, whole_},
             aliased);
    if (probes_.probes != nullptr) apply_probes(k, z, out, out_s, c, aliased);
  }

  // The cells of level k's plane z in region r outside the computed ones c, by the boundary
  // rule where r reaches past the grid (`inside`; cells the trim leaves out are never read).
  // Dirichlet columns left and right of the grid keep the value from the last time this ring
  // slot was filled for the same region and columns (no kernel writes them): only the rows
  // above and below the grid are filled again, instead of a few cells at each end of every
  // row.
  void impose_outside(int k, int64_t z, const Rect& r, const Rect& c, const Rect& inside) const {
    typename WavefrontWorkspace<T>::OutsideColumns& known = ws_.outside(k, z);
    const bool outside =
        inside.x0 != r.x0 || inside.x1 != r.x1 || inside.y0 != r.y0 || inside.y1 != r.y1;
    const bool dirichlet = b_.kind == Boundary::Kind::kDirichlet;
    const typename WavefrontWorkspace<T>::OutsideColumns now{outside && dirichlet,
                                                             r.x0,
                                                             r.x1,
                                                             r.y0,
                                                             r.y1,
                                                             c.x0,
                                                             c.x1,
                                                             lead_,
                                                             std::bit_cast<uint64_t>(b_.value)};
    const bool columns_hold = now.filled && known == now;
    known = now;
    if (!outside) return;
    for (int f = 0; f < k_.components(); ++f) {
      if (!ws_.holds(f)) continue;
      T* plane = ring(k, z) + f * ws_.field_stride(k);
      if (periodic_) {
        wrap_columns(plane, r, c);
      } else {
        impose_boundary(plane, r, c, columns_hold);
      }
    }
  }

  // Where component a of level k's plane z lies, a aliased (from level 1 on): at level 0
  // itself, as component a of level 0 (a coefficient field), or as the component it is
  // carried from at level k - 1.
  void locate_aliased(int a, int k, int64_t z, const T*& plane, ptrdiff_t& stride) const {
    if (k == 0 && a == rotated_) {  // frame-local (0, 0) is the output's (-rx, -ry)
      plane = output_(z) + rotated_at_ * out_.field - ry_ * out_.stride - rx_;
      stride = out_.stride;
      return;
    }
    const int from = carried_from_[static_cast<size_t>(a)];
    const int at_level = k == 0 ? 0 : from == a ? 0 : k - 1;
    const int c = k == 0 ? a : from;
    if (at_level == 0 && from == a && coef_fn_ && a >= coef_first_) {
      plane = coef_fn_(z) + (a - coef_first_) * coef_.field;
      stride = coef_.stride;
    } else if (at_level == 0) {
      plane = level0_fn_(z) + c * level0_.field;
      stride = level0_.stride;
    } else {
      plane = level_plane(at_level, z) + c * ws_.field_stride(at_level);
      stride = ws_.stride();
    }
  }

  // Periodic frames as wide as the grid (wrap_x_): the columns of region r left and right of
  // the computed ones c, in c's rows, are copies of the computed columns one grid width away
  // (what computing them from wrapped inputs would give, bit for bit).
  void wrap_columns(T* plane, const Rect& r, const Rect& c) const {
    const ptrdiff_t S = ws_.stride();
    for (int64_t j = c.y0; j < c.y1; ++j) {
      T* row = plane + j * S;
      std::copy_n(row + r.x0 + s_.nx, c.x0 - r.x0, row + r.x0);
      std::copy_n(row + c.x1 - s_.nx, r.x1 - c.x1, row + c.x1);
    }
  }

  // Cells of `cells` (frame coordinates) standing for grid point (x, y): with periodic wrap,
  // every copy.
  template <typename F>
  void for_each_copy(const ProbePoint& q, const Rect& cells, F&& f) const {
    if (!periodic_) {
      const int64_t fx = q.x - ox_, fy = q.y - oy_;
      if (fx >= cells.x0 && fx < cells.x1 && fy >= cells.y0 && fy < cells.y1) f(fx, fy);
      return;
    }
    auto first = [](int64_t p, int64_t origin, int64_t lo, int64_t n) {
      return ((p - origin - lo) % n + n) % n + lo;
    };
    for (int64_t fy = first(q.y, oy_, cells.y0, s_.ny); fy < cells.y1; fy += s_.ny) {
      for (int64_t fx = first(q.x, ox_, cells.x0, s_.nx); fx < cells.x1; fx += s_.nx) f(fx, fy);
    }
  }

  void apply_probes(int k, int64_t z, T* out, const PlaneStrides& s, const Rect& cells,
                    const internal::AliasedPlanes<T>& aliased) const {
    const ResolvedProbes& p = *probes_.probes;
    const int64_t step = probes_.step + k;
    const int64_t plane = periodic_ ? ((z % s_.nz) + s_.nz) % s_.nz : z;
    auto cell = [&](int c, int64_t fx, int64_t fy) -> T& {
      return out[c * s.field + (fy - cells.y0) * s.stride + (fx - cells.x0)];
    };
    for (const uint32_t i : p.sources_on(plane)) {
      const ProbePoint& q = p.sources[i];
      const T a = static_cast<T>(p.source_specs[i]->value(step));
      for_each_copy(q, cells, [&](int64_t fx, int64_t fy) {
        T& v = cell(q.component, fx, fy);
        v = v + a;
      });
    }
    if (p.traces == nullptr) return;
    const auto [own_y0, own_y1] = own_rows(k);
    for (const uint32_t r : p.receivers_on(z)) {
      const ProbePoint& q = p.receivers[r];
      const bool own = q.x >= tile_.x0 && q.x < tile_.x1 && q.y >= own_y0 && q.y < own_y1;
      const int64_t fx = q.x - ox_, fy = q.y - oy_;
      if (own && p.traces->holds(step) && fx >= cells.x0 && fx < cells.x1 && fy >= cells.y0 &&
          fy < cells.y1) {
        // An aliased component that level k does not write: level k's value is its source's.
        const int c = q.component;
        const bool elsewhere = !aliased.writes(c);
        const T v = elsewhere ? aliased_value(c, k, z, fx, fy) : cell(c, fx, fy);
        *p.traces->at(step, static_cast<int64_t>(r)) = static_cast<double>(v);
      }
    }
  }

  // Aliased component c of level k's plane z at frame cell (fx, fy).
  T aliased_value(int c, int k, int64_t z, int64_t fx, int64_t fy) const {
    const T* plane = nullptr;
    ptrdiff_t stride = 0;
    locate_aliased(c, k, z, plane, stride);
    return plane[fy * stride + fx];
  }

  // Fills the cells of region r outside the computed part c: x ghosts of c's rows (unless
  // `columns_hold` the dirichlet value already), then the ghost rows above and below from the
  // nearest computed row.
  void impose_boundary(T* plane, const Rect& r, const Rect& c, bool columns_hold) const {
    const ptrdiff_t S = ws_.stride();
    const bool dirichlet = b_.kind == Boundary::Kind::kDirichlet;
    const T v = static_cast<T>(b_.value);
    for (int64_t j = c.y0; j < c.y1 && !columns_hold; ++j) {
      T* row = plane + j * S;
      for (int64_t i = r.x0; i < c.x0; ++i) row[i] = dirichlet ? v : row[c.x0];
      for (int64_t i = c.x1; i < r.x1; ++i) row[i] = dirichlet ? v : row[c.x1 - 1];
    }
    auto fill_rows = [&](int64_t j0, int64_t j1, int64_t from) {
      for (int64_t j = j0; j < j1; ++j) {
        T* row = plane + j * S;
        for (int64_t i = r.x0; i < r.x1; ++i) row[i] = dirichlet ? v : plane[from * S + i];
      }
    };
    fill_rows(r.y0, c.y0, c.y0);
    fill_rows(c.y1, r.y1, c.y1 - 1);
  }

  const SchemeKernel<T>& k_;
  const Boundary& b_;
  const Shape s_;
  const int L_;
  const int64_t ext_;
  const int64_t from_;
  const WavefrontFrame tile_;
  WavefrontWorkspace<T>& ws_;
  const Level0Fn level0_fn_;
  const PlaneStrides level0_;
  const OutputFn output_;
  const PlaneStrides out_;
  const int rx_, ry_, rz_;
  // Values per 64-byte line; ring rows start `lead_` values into their row, so that frame
  // column f lies at the alignment of grid column ox_ + f in the grid (whose x = 0 starts a
  // line, padded_grid.h): loads of the same columns are aligned alike on every level, and a
  // tile whose x0 starts a line reads and writes its own columns in whole lines. (Misaligned
  // ring rows made wave8's kernel about 1.5x slower: every vector load split two lines.)
  static constexpr int64_t kLine = line_values(sizeof(T));
  const int64_t ox_, lead_, oy_, w_, h_;
  const bool periodic_;
  // Periodic, the tile spans x, its frame's x halos are at most the grid's width and the trim
  // keeps every column: levels below L compute the grid's columns only (aligned, as for the
  // other rules) and copy their x halos (wrap_columns) instead of computing them again.
  const bool wrap_x_;
  const ProbeRun probes_;
  const WavefrontTrim trim_;
  const Shape whole_;                   // the shape of the grid the kernel's positions are in
  const uint64_t output_holds_;         // aliased components level L does not write
  std::array<int, 64> carried_from_{};  // an aliased component's source (lean wavefronts)
  int rotated_ = -1, rotated_at_ = -1;  // read_level0_from_output()
  Level0Fn coef_fn_;                    // read_coefficients_from()
  PlaneStrides coef_;
  int coef_first_ = std::numeric_limits<int>::max();
  WavefrontChain<T> chain_;
  bool bypass_caches_ = false;  // write_output_bypassing_caches()
};

}  // namespace deepgrid::internal
