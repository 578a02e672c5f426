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
// planes computed redundantly from wrapped inputs. A first pass whose y and z halos are still
// on their way (LateHalos) first computes the output box that reads none of them, then, once
// they are in, the rest: the box's two z ends (each z range starts its levels where its first
// output plane needs them, so the levels at the cuts are computed twice) and the rows below
// and above the box's (whose tiles' frames overlap the box's, as any two tiles' do).
// Where each thread gets two tiles or more of an x range, they run in y order as chains
// (wavefront.h, WavefrontEdges): after a chain's first tile, a tile's levels take the rows below
// their own from the tile before instead of computing them again.
#include "engines/incore_engine.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu_caches.h"
#include "core/threads.h"
#include "engines/subnormals.h"
#include "engines/wavefront.h"

namespace deepgrid {
namespace {

constexpr int64_t kMaxTilePoints = 32768;  // the largest automatic tile (plan_wavefront)

// Part of one pass's output: the x-y rectangle's planes [from, to).
struct OutputRegion {
  internal::WavefrontFrame rect;
  int64_t from, to;
};

// The components a run's wavefronts leave out of their rings (lean: the grid, level 0, holds
// every plane), and of those the coefficient fields its passes do not write (both copies of
// the grid hold them), bit c for component c.
struct LeanComponents {
  uint64_t aliased = 0, kept = 0;
};

// Those the kernel and the engine allow, unless a source adds to one (a ring level must then
// hold it, and passes write it).
template <typename T>
LeanComponents lean_components(const SchemeKernel<T>& k, uint64_t kept, const ProbeRun& probes) {
  const uint64_t aliased = k.aliasable() & ~internal::sourced_components(probes.probes);
  return {aliased, kept & aliased};
}

// Time levels taking turns in a run at bt 1 (SchemeKernel::rotation(): u@1 <- u): a pass
// writes u's new value but not u@1, whose new value, the old u, stays in the source's u; the
// next pass, whose output that copy is, finds u@1 in its output's u and writes the new u over
// it point by point. 16 bytes per update for wave8 (u, u@1 and m read, u written where it was
// read) instead of 28 (u and u@1 stored into lines not in the cache).
struct Rotation {
  int to = -1, from = -1;  // u@1, u; -1: the pass stores every component as usual
  bool in_output = false;  // u@1 lies in the output copy's u
  bool store = true;       // the pass stores u@1 (the last pass of a run)
};

// Planes of edges a chain's tiles hand on, per level (WavefrontEdges): every plane a level of a
// pass of `levels` levels computes, [-levels rz, nz + levels rz) when periodic.
int64_t edge_planes(const Shape& s, int levels, int rz) { return s.nz + 2 * int64_t{levels} * rz; }

// The output regions' tiles in chains (WavefrontChain) of at most `longest` tiles: each x range
// of a region cut along y by wavefront_chain_cuts.
std::vector<std::vector<OutputRegion>> tile_chains(const std::vector<OutputRegion>& regions,
                                                   const WavefrontPlan& plan, int64_t longest) {
  std::vector<std::vector<OutputRegion>> chains;
  for (const OutputRegion& r : regions) {
    const std::vector<int64_t> cuts = internal::wavefront_chain_cuts(
        (r.rect.y1 - r.rect.y0 + plan.tile_y - 1) / plan.tile_y, longest);
    for (int64_t x = r.rect.x0; x < r.rect.x1; x += plan.tile_x) {
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        std::vector<OutputRegion>& chain = chains.emplace_back();
        for (int64_t t = cuts[c]; t < cuts[c + 1]; ++t) {
          const int64_t y = r.rect.y0 + t * plan.tile_y;
          chain.push_back(
              {{x, std::min(r.rect.x1, x + plan.tile_x), y, std::min(r.rect.y1, y + plan.tile_y)},
               r.from,
               r.to});
        }
      }
    }
  }
  return chains;
}

// The output regions of one pass, each cut into the plan's tiles: level L of each tile's
// wavefront, which starts at the levels below that `from` needs and stops once plane to - 1 is
// out. Threads take whole chains of tiles (tile_chains: one tile each where the plan makes
// none).
template <typename T>
void run_tiles(const PaddedGrid<T>& src, PaddedGrid<T>& dst, const SchemeKernel<T>& k,
               const Boundary& b, int levels, const internal::WavefrontTrim& trim,
               const WavefrontPlan& plan, ProbeRun probes, const std::vector<OutputRegion>& regions,
               LeanComponents lean, Rotation turn,
               const std::vector<internal::AlignedBuffer>& edge_memory) {
  const Shape& s = src.shape();
  const bool chained = plan.chain_tiles >= 2 && levels >= 2;
  const std::vector<std::vector<OutputRegion>> chains =
      tile_chains(regions, plan, chained ? plan.chain_tiles : 1);
  const int64_t frame_w = plan.tile_x + 2 * int64_t{levels} * k.rx();
  const int64_t frame_h = plan.tile_y + 2 * int64_t{levels} * k.ry();
  const auto items = static_cast<int64_t>(chains.size());
  const uint64_t holds = lean.kept | (turn.store ? 0 : uint64_t{1} << turn.to);
#pragma omp parallel num_threads(plan.threads)
  {
    const internal::SubnormalsFlushed flushed(plan.flush_subnormals);
    internal::WavefrontWorkspace<T> ws(levels, k.rz(), k.ry(), frame_w, frame_h,
                                       static_cast<T>(b.value), k.components(), lean.aliased);
    const internal::WavefrontEdges<T> edges(
        k.ry(), ws.stride(), ws.components(), -int64_t{levels} * k.rz(),
        edge_planes(s, levels, k.rz()),
        chained ? edge_memory[static_cast<size_t>(omp_get_thread_num())].template data<T>()
                : nullptr);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const std::vector<OutputRegion>& chain = chains[static_cast<size_t>(item)];
      for (size_t t = 0; t < chain.size(); ++t) {
        const OutputRegion& region = chain[t];
        const internal::WavefrontFrame& tile = region.rect;
        const int64_t ox = tile.x0 - int64_t{levels} * k.rx();
        const int64_t oy = tile.y0 - int64_t{levels} * k.ry();
        internal::Wavefront<T> wave(
            k, b, s, levels, tile, ws,
            [&](int64_t z) -> const T* { return src.plane(z) + oy * src.stride() + ox; },
            {src.stride(), src.field_stride()},
            [&](int64_t z) { return dst.plane(z) + tile.y0 * dst.stride() + tile.x0; },
            {dst.stride(), dst.field_stride()}, 0, region.from, probes, trim, holds);
        if (turn.in_output) wave.read_level0_from_output(turn.to, turn.from);
        if (plan.output_bypasses_caches) wave.write_output_bypassing_caches();
        if (chain.size() > 1) {
          wave.chain({&edges, t > 0, t + 1 < chain.size(), chain.back().rect.y1});
        }
        const int64_t end = std::min(wave.end_step(), region.to + int64_t{levels} * k.rz());
        for (int64_t i = wave.first_step(); i < end; ++i) wave.step(i);
      }
    }
  }
}

// Where a first pass cuts its output when `late` points are still on their way: the output box
// of rows [y0, y1) of planes [z0, z1) (every x) reads none of them when no x halo is late.
struct LateCut {
  int64_t y0, y1, z0, z1;
};

LateCut late_cut(const Shape& s, int ry, int rz, int levels, const LateHalos& late) {
  auto lo = [&](int a, int r) { return late.below[a] > 0 ? late.below[a] + levels * r : 0; };
  auto hi = [&](int a, int r, int64_t n) {
    return late.above[a] > 0 ? n - late.above[a] - levels * r : n;
  };
  return {lo(1, ry), hi(1, ry, s.ny), lo(2, rz), hi(2, rz, s.nz)};
}

// The rest of a pass's output once the box `cut` is done: the box's planes below and above it
// (the same tiles' wavefronts, run at the same time: only when they compute disjoint planes),
// and the rows below and above the box's, in every plane.
std::vector<OutputRegion> around(const LateCut& cut, const Shape& s) {
  const internal::WavefrontFrame box{0, s.nx, cut.y0, cut.y1};
  std::vector<OutputRegion> rest{{box, 0, cut.z0},
                                 {box, cut.z1, s.nz},
                                 {{0, s.nx, 0, cut.y0}, 0, s.nz},
                                 {{0, s.nx, cut.y1, s.ny}, 0, s.nz}};
  std::erase_if(rest,
                [](const OutputRegion& r) { return r.from >= r.to || r.rect.y0 >= r.rect.y1; });
  return rest;
}

// Advances `levels` steps from src into dst, `reach` steps before the run's end (the points
// computed are trimmed to what reaches probes.placement's needed box by then); fills src's
// ghost frame first. With `late` halos, the output box that reads none of them comes first.
// Wavefronts are lean as `lean` says; its kept components are not written (dst holds them).
// Time levels turn as `turn` says.
template <typename T>
void pass(PaddedGrid<T>& src, PaddedGrid<T>& dst, const SchemeKernel<T>& k, const Boundary& b,
          int levels, int64_t reach, const WavefrontPlan& plan, ProbeRun probes,
          const LateHalos* late, LeanComponents lean, Rotation turn,
          const std::vector<internal::AlignedBuffer>& edges) {
  src.fill_ghosts(b, plan.threads);
  const internal::WavefrontTrim trim{probes.placement.needed_lo, probes.placement.needed_hi, reach};
  const Shape& s = src.shape();
  const std::vector<OutputRegion> all{{{0, s.nx, 0, s.ny}, 0, s.nz}};
  if (late == nullptr) {
    run_tiles(src, dst, k, b, levels, trim, plan, probes, all, lean, turn, edges);
    return;
  }
  // Split off only when the box's two z ends (computed at once, after) then cover disjoint
  // planes, so that no two threads record one receiver's value; and not when x halos are late:
  // cutting x makes tiles narrower than the plan's, which run slower per point (a 160-wide
  // part cut at x = 96 or 120: its round took about 1.2 times as long, measured on a Zen 3
  // VM), while cuts along y and z cost nothing measurable.
  const LateCut cut = late_cut(s, k.ry(), k.rz(), levels, *late);
  const bool split = late->below[0] + late->above[0] == 0 && cut.y1 > cut.y0 &&
                     cut.z1 - cut.z0 > 2 * int64_t{levels} * k.rz();
  if (split) {
    run_tiles(src, dst, k, b, levels, trim, plan, probes,
              {{{0, s.nx, cut.y0, cut.y1}, cut.z0, cut.z1}}, lean, turn, edges);
  }
  late->arrive();
  src.fill_ghosts(b, plan.threads);  // of the points that arrived, and made of them
  run_tiles(src, dst, k, b, levels, trim, plan, probes, split ? around(cut, s) : all, lean, turn,
            edges);
}

// The ghost frame a pass of the plan reads around the source grid.
Halo frame_halo(const WavefrontPlan& p, int rx, int ry, int rz) {
  return {p.bt * rx, p.bt * ry, p.bt * rz};
}

// The two padded copies of the grid.
template <typename T>
int64_t grid_copies_bytes(const Shape& shape, const Scheme& scheme, const WavefrontPlan& p) {
  return 2 * PaddedGrid<T>::bytes_needed(
                 shape, frame_halo(p, scheme.radius_x(), scheme.radius_y(), scheme.radius_z()),
                 scheme.component_count());
}

}  // namespace

bool time_levels_turn(const Scheme& scheme) {
  return !scheme.is_stencil() && !scheme.kernel() &&
         SchemeKernel<float>(scheme).rotation().first >= 0;
}

WavefrontPlan plan_wavefront(const Shape& s, const Scheme& scheme, size_t value_bytes,
                             int64_t steps, const InCoreOptions& opt) {
  WavefrontPlan p;
  const int rx = scheme.radius_x(), ry = scheme.radius_y(), rz = scheme.radius_z();
  // A ring plane's bytes: lean rings (wavefront.h) hold the components that are not aliased.
  // (A run whose sources add to an aliased component keeps them all: its tiles are sized for
  // the lean rings, and workspace_bytes counts them all.)
  const int components = scheme.component_count();
  const int64_t value_bytes_all =
      static_cast<int64_t>(value_bytes) *
      internal::ring_components(components, internal::aliasable_components(scheme));
  // Tiles span x unless a 16-row tile would not fit the budget; then they halve down to 64.
  // Rows: what the budget leaves for one tile's rings at depth bt (may be < 1). A ring row's
  // footprint in the cache is its frame's width in whole lines: the room for the lead
  // (wavefront_row_stride) is allocated but never touched. (Counting it moved 2048-wide 7pt
  // planes from 256x33 tiles at bt 6 to 128x39 at bt 8, 0.90 of the rate.)
  auto row_budget = [&](int bt) {
    return opt.cache_bytes / ((int64_t{bt - 1} * (2 * rz + 1) + 1) * value_bytes_all);
  };
  auto tile_width = [&](int bt) {
    int64_t tx = opt.tile_x > 0 ? opt.tile_x : s.nx;
    const int64_t hx = int64_t{bt} * rx, hy = int64_t{bt} * ry;
    if (opt.tile_x <= 0) {
      while (tx > 64 && round_up(tx + 2 * hx, 16) * (16 + 2 * hy) > row_budget(bt)) {
        tx = (tx + 1) / 2;
      }
    }
    return tx;
  };
  // Rows of a tile `tx` wide at depth bt.
  auto rows_of = [&](int bt, int64_t tx) {
    return row_budget(bt) / round_up(tx + 2 * int64_t{bt} * rx, 16) - 2 * int64_t{bt} * ry;
  };
  auto tile_rows = [&](int bt) { return rows_of(bt, tile_width(bt)); };
  // Where the depth chosen below would cut the grid's planes into tiles narrower than the grid,
  // which run slower per point (docs/performance/incore.md, "Row tails and tiles narrower than the
  // grid"): a shallower depth, at least `lowest`, whose tiles span x with at least 16 rows, the
  // one of least modelled cost per useful update: the halo rows recomputed, ry (bt - 1) / rows
  // on average over the levels, times the extra cost of the two levels that read and write the
  // grid, about 0.8 of an inner level's per pass (measured per level, ibid.). The deepest within
  // 2% of the least wins. Measured (7pt, 3 MiB per thread, 2026-11-27): f32 1280-, 2048- and
  // 4096-wide planes ran 31%, 23% and 14% faster, f64 1280- and 2048-wide ones 19% and 17%;
  // below `lowest` (bt 1 or 2 for 7pt) the memory traffic costs more than narrow tiles do
  // (docs/performance/large-planes.md, "Large planes"). Without such a depth: `deepest`.
  auto spanning_depth = [&](int deepest, int lowest) {
    std::vector<std::pair<double, int>> costs;  // (cost, bt), deepest first
    for (int bt = deepest - 1; bt >= lowest; --bt) {
      const int64_t rows = rows_of(bt, s.nx);
      if (rows < 16) continue;
      costs.emplace_back(
          (1 + static_cast<double>(ry) * (bt - 1) / static_cast<double>(rows)) * (1 + 0.8 / bt),
          bt);
    }
    if (costs.empty()) return deepest;
    const double least = std::min_element(costs.begin(), costs.end())->first;
    return std::find_if(costs.begin(), costs.end(),
                        [&](const auto& c) { return c.first <= 1.02 * least; })
        ->second;
  };
  // Deeper blocking cuts memory traffic but adds halo work and ring size. Measured on this
  // class of machine (docs/performance/incore.md): star stencils do best around 6 / r levels with a
  // 1.5 MiB working set per thread (a 2 MiB L2), around 8 / r where the working set can be
  // 3-6 MiB (a large L3) and tiles stay at least 32 rows tall; the compute-heavier box
  // stencils around 3 / r. With a 1 MiB L2 and a slow L3 (a Skylake-class Xeon) the tuning
  // picks 768 KiB, where spanning_depth() leaves 512- and 1024-wide planes at bt 4 and 3. Schemes
  // count their stencils' points per updated field.
  const int r = std::max(1, scheme.radius());
  const bool star = scheme.points() <= (6 * r + 1) * static_cast<int>(scheme.updates().size()) +
                                           2 * (scheme.component_count() - 1);
  // Where the shallow depth is 1 (r >= 4), which blocks nothing, the deep one is kept while
  // its tiles span x with 16 rows: wave8 on 512x512x256 at 768 KiB ran 511-528 MLUP/s at bt 2
  // (512x20 tiles) against 478-497 at bt 1 (a Xeon VM, 2026-11-28).
  const int deep = std::max(1, 8 / r), shallow = std::max(1, 6 / r);
  const bool deep_spans = tile_width(deep) >= s.nx && tile_rows(deep) >= 16;
  int auto_bt = !star                                                   ? std::max(1, 3 / r)
                : tile_rows(deep) >= 32 || (shallow == 1 && deep_spans) ? deep
                                                                        : shallow;
  if (opt.shallower_to_span_x && opt.tile_x <= 0 && tile_width(auto_bt) < s.nx) {
    auto_bt = spanning_depth(auto_bt, std::max(2, shallow / 2));
  }
  // Schemes whose time levels take turns at bt 1 (the wave equations) move 16 bytes per update
  // there (u, u@1 and m read, u written where u@1 was), which beats temporal blocking's halos
  // from radius 2 on some machines and not on others, so their depth is measured
  // (InCoreOptions::tuned_bt). At 256^3 (f32, 2 threads): on a Xeon VM (2026-11-28) wave4 ran
  // 1381 MLUP/s at bt 1 against 1197 at bt 3, wave8 1090 against 612 at bt 2 (865 with its
  // best tiles); on a Zen 4 VM (2026-12-01) wave4 1720 at bt 1 against 2720 at bt 6, wave8 1223
  // against 1486-1509 at bt 4. wave2 (radius 1) ran 1325 at bt 1 against 1936 at bt 6 on the
  // Xeon and keeps the rules above.
  const bool rotates = opt.turn_time_levels && time_levels_turn(scheme);
  if (rotates && r >= 2) auto_bt = opt.tuned_bt > 0 ? opt.tuned_bt : 1;
  p.bt = static_cast<int>(
      std::clamp<int64_t>(opt.bt > 0 ? opt.bt : auto_bt, 1, std::max<int64_t>(1, steps)));
  p.threads = internal::resolved_threads(opt.threads);
  p.flush_subnormals = opt.flush_subnormals;
  const int64_t hx = int64_t{p.bt} * rx, hy = int64_t{p.bt} * ry;
  // Those turning passes span x (no halo is computed twice at bt 1; narrower tiles only read
  // their x halos again) in tiles of about 1/24 of the budget's bytes, at least 8 rows: 8192
  // f32 points at 768 KiB. Measured (wave8, f32, 2 threads, a Xeon VM with a 1 MiB L2,
  // 2026-11-28): 256-wide tiles 1029-1104 MLUP/s at 32 rows, 956 at 48, 923 at 64; 512-wide
  // 994-1005 at 16-24 rows, 783 at 48; 1024-wide 938-953 at 8 and 16 rows, against 735 for
  // 512x16 tiles; wave4 at 256^3 1135-1144 at 32 rows, 1027-1070 at 64.
  p.turns = rotates && p.bt == 1;
  const bool turning = p.turns && opt.tile_x <= 0;
  const int64_t tx = turning ? s.nx : tile_width(p.bt);
  const int64_t turning_rows =
      std::max<int64_t>(8, opt.cache_bytes / (24 * static_cast<int64_t>(value_bytes)) / tx);
  int64_t ty = opt.tile_y;
  if (ty <= 0) {
    // As tall as the budget allows, then evened out so that every thread gets the same
    // number of equal tiles. But at most 32768 points (64 rows of 512, 128 of 256) or 64 rows,
    // whichever is taller: measured on a Zen 3 VM (f32 7pt, 6 MiB budget), 512x128 tiles ran
    // no faster than 512x64 and 512x96 ~8% slower, while 256x128 ran ~5% faster than 256x64.
    const int64_t ty_max =
        turning
            ? turning_rows
            : std::clamp<int64_t>(tile_rows(p.bt), 8, std::max<int64_t>(64, kMaxTilePoints / tx));
    const int64_t tiles_x = (s.nx + tx - 1) / tx;
    int64_t tiles_y = (s.ny + ty_max - 1) / ty_max;
    while ((tiles_x * tiles_y) % p.threads != 0 && tiles_y < s.ny) ++tiles_y;
    ty = (s.ny + tiles_y - 1) / tiles_y;
  }
  p.tile_x = std::clamp<int64_t>(tx, 1, s.nx);
  p.tile_y = std::clamp<int64_t>(ty, 1, s.ny);
  p.workspace_bytes = internal::wavefront_workspace_bytes(
      p.bt, rz, p.tile_x + 2 * hx, p.tile_y + 2 * hy, value_bytes, components);
  // Chains along y where each thread gets two tiles or more of an x range (a chain's first
  // tile still computes its whole frame).
  const int64_t chain_tiles = internal::wavefront_chain_tiles(
      (s.nx + p.tile_x - 1) / p.tile_x, (s.ny + p.tile_y - 1) / p.tile_y, p.threads);
  if (opt.carry_edges && p.bt >= 2 && ry > 0 && chain_tiles > 0) {
    p.chain_tiles = chain_tiles;
    p.edges_bytes = static_cast<int64_t>(internal::paged_bytes(static_cast<size_t>(
        internal::WavefrontEdges<char>::values(
            p.bt, ry, internal::wavefront_row_stride(p.tile_x + 2 * hx, value_bytes), components,
            edge_planes(s, p.bt, rz)) *
        static_cast<int64_t>(value_bytes))));
  }
  const int64_t copies_bytes = 2 * s.points() * components * static_cast<int64_t>(value_bytes);
  p.output_bypasses_caches = opt.output_bypass == InCoreOptions::CacheBypass::kOn ||
                             (opt.output_bypass == InCoreOptions::CacheBypass::kAuto &&
                              copies_bytes > internal::last_level_cache_bytes());
  return p;
}

template <typename T>
int64_t InCoreEngine<T>::memory_bytes(const Shape& shape, const Scheme& scheme, int64_t steps,
                                      const InCoreOptions& options) {
  const WavefrontPlan p = plan_wavefront(shape, scheme, sizeof(T), steps, options);
  const int64_t grids = options.scratch_dir.empty() ? grid_copies_bytes<T>(shape, scheme, p) : 0;
  return grids + p.threads * (p.workspace_bytes + p.edges_bytes);
}

template <typename T>
int64_t InCoreEngine<T>::scratch_bytes(const Shape& shape, const Scheme& scheme, int64_t steps,
                                       const InCoreOptions& options) {
  if (options.scratch_dir.empty()) return 0;
  return grid_copies_bytes<T>(shape, scheme,
                              plan_wavefront(shape, scheme, sizeof(T), steps, options));
}

// Coefficient fields: carried unchanged (m <- m) and aliasable.
template <typename T>
InCoreEngine<T>::InCoreEngine(const Scheme& scheme, WavefrontPlan plan)
    : kernel_(scheme), plan_(plan) {
  for (const auto& [to, from] : kernel_.carried()) {
    if (to == from && (kernel_.aliasable() >> to & 1) != 0) kept_ |= uint64_t{1} << to;
  }
}

template <typename T>
void InCoreEngine<T>::copy_kept(int from) {
  for (int c = 0; c < grids_[from].components(); ++c) {
    if ((kept_ >> c & 1) == 0) continue;
    copy_component(grids_[from], c, grids_[1 - from], c,
                   [&](int64_t z) { return kept_equal_ && written_[static_cast<size_t>(z)] == 0; });
  }
  std::fill(written_.begin(), written_.end(), 0);
  kept_equal_ = true;
}

template <typename T>
void InCoreEngine<T>::store_turned(int to, int from) {
  copy_component(grids_[1 - cur_], from, grids_[cur_], to, [](int64_t) { return false; });
}

template <typename T>
template <typename Skip>
void InCoreEngine<T>::copy_component(const PaddedGrid<T>& src, int from, PaddedGrid<T>& dst, int to,
                                     Skip skip) const {
  const Shape& s = src.shape();
  const auto row_bytes = static_cast<size_t>(s.nx) * sizeof(T);
#pragma omp parallel for num_threads(plan_.threads) schedule(static)
  for (int64_t z = 0; z < s.nz; ++z) {
    if (skip(z)) continue;
    for (int64_t y = 0; y < s.ny; ++y) {
      std::memcpy(dst.plane(z) + to * dst.field_stride() + y * dst.stride(),
                  src.plane(z) + from * src.field_stride() + y * src.stride(), row_bytes);
    }
  }
}

template <typename T>
Result<InCoreEngine<T>> InCoreEngine<T>::create(const Shape& shape, const Scheme& scheme,
                                                int64_t steps, const InCoreOptions& options) {
  DG_RETURN_IF_ERROR(scheme.check_dtype(dtype_of<T>()));
  InCoreEngine e(scheme, plan_wavefront(shape, scheme, sizeof(T), steps, options));
  const Halo halo = frame_halo(e.plan_, scheme.radius_x(), scheme.radius_y(), scheme.radius_z());
  const int n = scheme.component_count();
  for (PaddedGrid<T>& g : e.grids_) {
    const bool touched = !options.touch_while_loading;
    DG_ASSIGN_OR_RETURN(g,
                        options.scratch_dir.empty()
                            ? PaddedGrid<T>::allocate(shape, halo, n, touched)
                            : PaddedGrid<T>::map_scratch_file(shape, halo, options.scratch_dir, n));
  }
  e.written_.assign(static_cast<size_t>(shape.nz), 0);
  if (e.plan_.edges_bytes > 0) {
    for (int t = 0; t < e.plan_.threads; ++t) {
      internal::AlignedBuffer& b = e.edges_.emplace_back(
          internal::AlignedBuffer::on_huge_pages(static_cast<size_t>(e.plan_.edges_bytes)));
      if (!b.ok()) return Status(ErrorCode::kResource, "out of memory for the tiles' edges");
    }
  }
  return e;
}

template <typename T>
int64_t InCoreEngine<T>::advance(const Boundary& boundary, int64_t steps,
                                 const ProgressFn& progress, ProbeRun probes,
                                 const LateHalos& late) {
  if (steps <= 0 && late.arrive) late.arrive();
  int64_t done = 0;
  const LeanComponents lean = lean_components(kernel_, kept_, probes);
  if (lean.kept != 0) copy_kept(cur_);  // what was written since the last pass
  const auto [to, from] = kernel_.rotation();
  const bool turns = plan_.turns && (lean.aliased >> to & 1) != 0;
  bool turned = false;  // u@1 lies in the other copy's u
  while (done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(plan_.bt, steps - done));
    const bool last = done + levels >= steps;
    pass(grids_[cur_], grids_[1 - cur_], kernel_, boundary, levels, steps - done, plan_,
         {probes.probes, probes.step + done, probes.placement},
         done == 0 && late.arrive ? &late : nullptr, lean,
         turns ? Rotation{to, from, turned, last} : Rotation{}, edges_);
    turned = turns && !last;
    if (lean.kept != 0) {
      copy_kept(cur_);  // the late halos' planes
    } else {
      kept_equal_ = false;  // the pass wrote them into one copy
    }
    cur_ = 1 - cur_;
    done += levels;
    if (progress && !progress(done, steps)) break;
  }
  if (turned) store_turned(to, from);  // a run stopped early
  return done;
}

template class InCoreEngine<float>;
template class InCoreEngine<double>;

}  // namespace deepgrid
