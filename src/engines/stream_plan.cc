// The stream engine's plan (stream_engine.h): what a sweep holds in memory for a depth bt and a
// block of z-steps, and the cost model that picks bt, the block and the stages' depth within
// the budget. The frames counted here are the ones stream_frames.h allocates, by the z rules of
// stream_stages.h; a plan whose memory_bytes fits the budget is one the engine can run.
#include <algorithm>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/threads.h"
#include "engines/incore_engine.h"
#include "engines/padded_grid.h"
#include "engines/stream_bands.h"
#include "engines/stream_engine.h"
#include "engines/stream_io.h"
#include "engines/stream_stages.h"
#include "engines/wavefront.h"

namespace deepgrid {
namespace {

using internal::stream::kept_input_planes;
using internal::stream::pinned_planes;
using internal::stream::Stages;

// Blocks of z-steps: at most this deep (memory permitting). Between blocks every tile trades
// its carried planes (2 rz per level) with a thread's rings, which costs no copy but a cold
// read of those planes at the block's start. Measured on a 7-point bt 48 sweep of 512x512x4096
// f32 (stages of 6): against blocks of 26, blocks of 1, 2, 3, 6 and 12 computed 1.82, 1.54,
// 1.16, 1.06 and 1.02x as long, which (1 + kRingReload / block) bounds; blocks of 64 computed
// no faster than 26 but took 0.35 s longer to fill and drain the I/O pipeline.
constexpr int kMaxBlock = 32;
constexpr double kRingReload = 1;

// A plan's compute per update against the in-core engine's, apart from halo work: carried
// planes read into the cache once per block, and stages shallower than about 2 (f32) or 4
// (f64) steps bound by memory bandwidth (measured: one step per pass runs 2.2x slower than the
// in-core engine's depth).
double relative_compute(const StreamPlan& q, DType dtype) {
  const double memory_bound =
      std::max(1.0, 2.2 * static_cast<double>(dtype_size(dtype)) / 4.0 / q.cache_bt);
  return (1 + kRingReload / q.block) * memory_bound;
}

// Computed updates / useful updates of a sweep: level k of a stage's tile covers the tile
// widened by (stage levels - k) * r wherever the grid goes on (tiles in chains: `tile_y` the
// chain's rows, which compute their halo once).
double redundancy(const Shape& s, const Scheme& st, const Boundary& b, const Stages& stages,
                  int64_t tile_x, int64_t tile_y) {
  const int64_t tx = std::min(tile_x, s.nx), ty = std::min(tile_y, s.ny);
  const bool periodic = b.kind == Boundary::Kind::kPeriodic;
  double computed = 0;
  for (int j = 0; j < stages.size(); ++j) {
    const int n = stages.count(j);
    for (int k = 1; k <= n; ++k) {
      const int64_t wx = tx < s.nx || periodic ? 2 * int64_t{n - k} * st.radius_x() : 0;
      const int64_t wy = ty < s.ny || periodic ? 2 * int64_t{n - k} * st.radius_y() : 0;
      computed += static_cast<double>((tx + wx) * (ty + wy));
    }
  }
  return computed / (static_cast<double>(stages.levels) * static_cast<double>(tx * ty));
}

// The in-core engine's tiling options for a stream's stages.
InCoreOptions stage_tiling(const StreamOptions& opt, bool shallower_to_span_x = false) {
  InCoreOptions tiling;
  tiling.threads = opt.threads;
  tiling.tile_x = opt.tile_x;
  tiling.tile_y = opt.tile_y;
  if (opt.cache_bytes > 0) tiling.cache_bytes = opt.cache_bytes;
  tiling.shallower_to_span_x = shallower_to_span_x;
  tiling.turn_time_levels = false;
  return tiling;
}

// The depth of one stage: what the in-core engine chooses for this stencil (its tiles and
// rings are sized for the cache at that depth).
int default_cache_bt(const Manifest& m, const Scheme& st, const StreamOptions& opt,
                     bool shallower_to_span_x = false) {
  return plan_wavefront(m.shape, st, dtype_size(m.dtype), 64,
                        stage_tiling(opt, shallower_to_span_x))
      .bt;
}

// The stage depths a plan may take: the one asked for, else the in-core engine's depth and,
// where its tiles would be narrower than the grid, the shallower depth whose tiles span x
// (InCoreOptions::shallower_to_span_x): fewer halo rows recomputed, more stages. The cost
// model weighs the two (redundancy()). On a Xeon VM with 768 KiB working sets (2026-11-28,
// 7pt f32 512x512x1024 at --mem 64MiB, 32 steps, three runs each, alternating) stages of 6
// with 256x32 tiles computed for 4.9-5.1 s, stages of 4 with 512x29 tiles for 4.0-4.2 s.
//
// Where the working set leaves stages of one level (radius 2 and more at a small working set),
// also the first of twice and four times it whose stages run two levels: a level per pass over
// the cache is bound by memory (relative_compute), and the larger tiles' rings spill from L2
// to L3, which cost less. wave8 f32 512x512x1024 at --mem 192MiB, 16 steps, the working set
// set by hand: on an EPYC VM (512 KiB L2) 384 KiB, stages of one level, ran 272-337 MLUP/s and
// 768 KiB 344-414 (five runs each, taking turns); on a Xeon VM (1 MiB L2) whose tuning chose
// 384 KiB, 1.5 MiB ran 1.3x as fast. With 384 KiB tuned, the plan this chooses (stages of 2
// at 768 KiB) computed 1.13x faster than the one-level plan made before, over five rounds on
// the EPYC VM (docs/performance/waves.md, "Stages of one level weigh a larger working set").
std::vector<StreamOptions> stage_depth_options(const Manifest& m, const Scheme& st,
                                               const StreamOptions& opt) {
  std::vector<StreamOptions> out{opt};
  if (opt.cache_bt > 0) return out;
  out[0].cache_bt = default_cache_bt(m, st, opt);
  StreamOptions spanning = opt;
  spanning.cache_bt = default_cache_bt(m, st, opt, true);
  if (spanning.cache_bt != out[0].cache_bt) out.push_back(spanning);
  if (out[0].cache_bt == 1 && opt.tile_x <= 0 && opt.tile_y <= 0) {
    const int64_t tuned = stage_tiling(opt).cache_bytes;
    for (const int64_t factor : {2, 4}) {
      StreamOptions wider = opt;
      wider.cache_bytes = factor * tuned;
      wider.cache_bt = default_cache_bt(m, st, wider);
      if (wider.cache_bt >= 2) {
        out.push_back(wider);
        break;
      }
    }
  }
  return out;
}

// The components a plan's stages leave out of their rings: those the scheme allows
// (SchemeKernel::aliasable()) but the ones sources add to, which a ring level must hold.
uint64_t lean_components(const Scheme& st, const StreamOptions& opt) {
  return internal::aliasable_components(st) &
         ~(opt.source_components | internal::sourced_components(opt.probes));
}

// Whether component c is a coefficient field (carried from itself: m <- m) among `aliased`.
bool aliased_coefficient(const Scheme& st, uint64_t aliased, int c) {
  return c < 64 && (aliased >> c & 1) != 0 &&
         std::ranges::any_of(st.carried(), [c](const std::pair<int, int>& t) {
           return t.first == c && t.second == c;
         });
}

// How many of the aliased coefficient fields there are, and how many of them are the last
// components (a window can hold those for every stage: StreamPlan::window_components).
struct AliasedCoefficients {
  int all = 0, last = 0;
};
AliasedCoefficients aliased_coefficients(const Scheme& st, uint64_t aliased) {
  const int n = st.component_count();
  AliasedCoefficients k;
  for (int c = 0; c < n; ++c) k.all += aliased_coefficient(st, aliased, c) ? 1 : 0;
  while (k.last < n - 1 && aliased_coefficient(st, aliased, n - 1 - k.last)) ++k.last;
  return k;
}

// Write buffers of two blocks, or of one where the sweep has stages enough
// (StreamPlan::write_buffers). One block's are taken only where the deeper block they allow
// saves at least this share of the run: their claim before the last stage waits for the
// previous block's writes now and then (7pt f32 512x512x4096 at 256 MiB, blocks of 32 instead
// of 30: the disk waited 0.29-0.36 s instead of 0.12-0.22 s of 14 s, compute the same within
// the VM's noise).
constexpr double kOneBlockOfWritesGain = 0.02;
enum class Writes { kTwoBlocks, kOneBlock };

StreamPlan plan_for(const Manifest& m, const Scheme& st, const Boundary& b, int bt, int block,
                    const StreamOptions& opt, Writes writes = Writes::kTwoBlocks) {
  const Shape& s = m.shape;
  const size_t vb = dtype_size(m.dtype);
  const int rz = st.radius_z();
  StreamPlan p;
  p.bt = bt;
  p.cache_bt = std::min(bt, opt.cache_bt > 0 ? opt.cache_bt : default_cache_bt(m, st, opt));
  const Stages stages{bt, p.cache_bt};
  p.stages = stages.size();
  p.threads = internal::resolved_threads(opt.threads);
  p.flush_subnormals = opt.flush_subnormals;
  p.block = block;
  const Halo frame{p.cache_bt * st.radius_x(), p.cache_bt * st.radius_y(), 0};
  const int n = st.component_count();
  p.aliased = lean_components(st, opt);
  // Coefficient fields in a window where they are all among the last components (not on a
  // device), else read from each stage's input.
  const AliasedCoefficients coefficients = aliased_coefficients(st, p.aliased);
  p.window_components =
      opt.device == nullptr && coefficients.last == coefficients.all ? coefficients.all : 0;
  p.coefficients_from_input = p.window_components == 0 && coefficients.all > 0;
  p.writes_without_coefficients =
      p.window_components > 0 && m.has_coef_files() && p.window_components == m.coef_components();
  const int ring_n = internal::ring_components(n, p.aliased);
  // `count` frames of `components` in one padded grid (FramePool).
  auto frames_bytes = [&](int64_t count, int components) {
    return vb == 4 ? PaddedGrid<float>::bytes_needed({s.nx, s.ny, count}, frame, components)
                   : PaddedGrid<double>::bytes_needed({s.nx, s.ny, count}, frame, components);
  };
  const int frame_n = n - p.window_components;
  p.frame_bytes = frames_bytes(1, frame_n);
  // While a stage runs: its input planes of the block, its output planes (unless it is the
  // last), and the planes every stage keeps for the next block; level 0 also keeps the pinned
  // planes. Dirichlet adds one constant frame beyond z's ends. The window: the coefficients of
  // the planes from the one the sweep's last level reads to the block's last read.
  const int64_t pinned = pinned_planes(b, bt, rz, s.nz);
  p.frames = std::min(p.stages, 2) * int64_t{block} + pinned;
  for (int j = 0; j < p.stages; ++j)
    p.frames += kept_input_planes(stages, j, rz, p.coefficients_from_input);
  p.window_frames = p.window_components > 0 ? int64_t{bt} * rz + block + pinned : 0;
  const int64_t pools_bytes =
      frames_bytes(p.frames, frame_n) +
      (p.window_components > 0 ? frames_bytes(p.window_frames, p.window_components) : 0) +
      (b.kind == Boundary::Kind::kDirichlet ? p.frame_bytes : 0);
  // Tiles like the in-core engine's at the stage depth, so that a thread's rings stay in cache
  // while it advances a tile through a block.
  InCoreOptions tiling = stage_tiling(opt);
  tiling.threads = p.threads;
  tiling.bt = p.cache_bt;
  const WavefrontPlan wp = plan_wavefront(s, st, vb, p.cache_bt, tiling);
  p.tile_x = wp.tile_x;
  p.tile_y = wp.tile_y;
  p.cache_bytes = tiling.cache_bytes;
  p.tiles = ((s.nx + p.tile_x - 1) / p.tile_x) * ((s.ny + p.tile_y - 1) / p.tile_y);
  // Per-thread rings, and what every (stage, tile) carries from one block to the next.
  p.carried_planes = int64_t{p.cache_bt - 1} * 2 * rz;
  const int64_t frame_w = p.tile_x + 2 * int64_t{frame.x},
                frame_h = p.tile_y + 2 * int64_t{frame.y};
  const int64_t carry_bytes =
      vb == 4 ? internal::WavefrontCarry<float>::bytes(p.cache_bt, rz, st.radius_y(),
                                                       internal::wavefront_row_stride(frame_w, vb),
                                                       frame_h, ring_n)
              : internal::WavefrontCarry<double>::bytes(p.cache_bt, rz, st.radius_y(),
                                                        internal::wavefront_row_stride(frame_w, vb),
                                                        frame_h, ring_n);
  const int64_t ring_bytes = p.threads * internal::wavefront_workspace_bytes(
                                             p.cache_bt, rz, frame_w, frame_h, vb, ring_n) +
                             static_cast<int64_t>(internal::paged_bytes(
                                 static_cast<size_t>(p.stages * p.tiles * carry_bytes)));
  // Chains along y on the CPU (at several threads the planner chooses a plan without them
  // first: plan.cc's choose_stream_plan).
  const int64_t tiles_y = (s.ny + p.tile_y - 1) / p.tile_y;
  const int64_t chain_tiles =
      internal::wavefront_chain_tiles((s.nx + p.tile_x - 1) / p.tile_x, tiles_y, p.threads);
  if (opt.carry_edges && opt.device == nullptr && p.cache_bt >= 2 && st.radius_y() > 0 &&
      chain_tiles > 0) {
    p.chain_tiles = chain_tiles;
    p.edges_bytes = static_cast<int64_t>(internal::paged_bytes(static_cast<size_t>(
        internal::WavefrontEdges<char>::values(
            p.cache_bt, st.radius_y(), internal::wavefront_row_stride(frame_w, vb), ring_n,
            internal::stream::chain_edge_planes(p.cache_bt, rz, block)) *
        static_cast<int64_t>(vb))));
  }
  p.redundancy =
      redundancy(s, st, b, stages, p.tile_x,
                 p.chain_tiles > 0 ? std::min(s.ny, p.chain_tiles * p.tile_y) : p.tile_y);
  // Reads of the next block and writes of the previous one overlap the current block.
  p.write_buffers = (writes == Writes::kOneBlock && p.stages >= 2 ? 1 : 2) * int64_t{block};
  p.io_buffers = block + p.write_buffers;
  const int64_t write_bytes =
      p.writes_without_coefficients ? m.layout.plane_stride : m.layout.plane_buffer_bytes();
  p.memory_bytes = pools_bytes + ring_bytes + p.threads * p.edges_bytes +
                   static_cast<int64_t>(internal::paged_bytes(static_cast<size_t>(
                       block * m.layout.plane_buffer_bytes() + p.write_buffers * write_bytes)));
  return p;
}

Status check_options(const StreamOptions& opt) {
  if (opt.mem_budget == 0) {
    return invalid_argument("the stream method needs a memory budget; give --mem, e.g. --mem 1GiB");
  }
  if (opt.block < 0) return invalid_argument("the stream block must be at least one z-step");
  if (opt.band_rows < 0) return invalid_argument("--band-rows must be >= 1 (or 0: whole planes)");
  if (opt.cache_bt < 0) return invalid_argument("--cache-bt must be >= 1 (or 0 for automatic)");
  return Status::Ok();
}

// The most levels an in-place sweep of the grid can advance: it needs more than bt rz spare
// slots (resume.h), and a grid whose planes wrap around the ring's end cannot grow them.
Result<int64_t> spare_levels(const Manifest& m, const Scheme& st) {
  const int64_t levels = m.base + m.shape.nz <= m.slots() || st.radius_z() == 0
                             ? 64
                             : (m.layout.spare_planes - 1) / st.radius_z();
  if (levels < 1) {
    return invalid_argument("grid has only " + std::to_string(m.layout.spare_planes) +
                            " spare planes, too few for an in-place sweep of this stencil; use "
                            "--method incore, or copy the grid with 'deepgrid export' and import");
  }
  return levels;
}

// The plan of depth bt with the deepest block (up to kMaxBlock z-steps) that fits: every tile
// reads its carried planes into the cache once per block, so that traffic falls as the block
// grows. A forced block stays as it is.
StreamPlan with_deepest_block(const Manifest& m, const Scheme& st, const Boundary& b, int bt,
                              const StreamOptions& opt, Writes writes = Writes::kTwoBlocks) {
  StreamPlan q = plan_for(m, st, b, bt, opt.block > 0 ? opt.block : kMaxBlock, opt, writes);
  while (opt.block == 0 && q.block > 1 && static_cast<uint64_t>(q.memory_bytes) > opt.mem_budget) {
    q = plan_for(m, st, b, bt, q.block - 1, opt, writes);
  }
  return q;
}

// A sweep's read and write of the grid, and the compute they take from the threads, in units of
// one perfectly efficient step over the grid (the in-core rate).
struct SweepIo {
  double disk = 0;
  double cpu = 0;
};

// The disk as cheapest_plan() weighs it: a measured rate with a 20% margin, the rate earlier
// sweeps sustained as it is.
SweepIo sweep_io(const Manifest& m, const StreamOptions& opt, int threads) {
  // (a plane read whole, written without its coefficients)
  const double bytes_per_point =
      static_cast<double>(m.layout.plane_buffer_bytes() + m.layout.plane_stride) /
      static_cast<double>(m.shape.plane_points());
  return {(opt.disk_rate_observed ? 1.0 : 1.2) * bytes_per_point /
              std::max(opt.disk_bytes_per_update, 1e-3),
          opt.io_cpu_updates_per_byte / threads * bytes_per_point};
}

// A sweep's disk time as plan q overlaps it: write buffers of one block leave the disk the
// compute of all stages but the last for each block's transfers, so it counts stages /
// (stages - 1) times.
double overlapped_disk(const StreamPlan& q, const SweepIo& io) {
  return q.write_buffers < 2 * int64_t{q.block} ? io.disk * q.stages / (q.stages - 1.0) : io.disk;
}

// Whether plan q may take write buffers of one block: its full sweep computes longer than the
// disk takes so overlapped. Where the disk binds, two blocks' buffers leave it the most time
// and deeper blocks would save compute that is not the sweep's limit.
bool disk_has_time_to_spare(const StreamPlan& q, DType dtype, const SweepIo& io) {
  const double compute = q.redundancy * relative_compute(q, dtype) * q.bt + io.cpu;
  return compute >= overlapped_disk(q, io);
}

// Plan q's cost over `run` steps, counted as cheapest_plan() says: per sweep, the larger of its
// compute and its disk time (overlapped_disk); with a measured (not observed) rate, the mean of
// that and of the same with the disks at half the rate.
StreamCost run_cost(const StreamPlan& q, DType dtype, int64_t run, const SweepIo& io,
                    bool observed) {
  const int bt = q.bt;
  const double per_step = q.redundancy * relative_compute(q, dtype);
  const double disk = overlapped_disk(q, io);
  StreamCost c;
  for (int64_t done = 0; done < run; done += bt) {
    const double compute =
        per_step * static_cast<double>(std::min<int64_t>(bt, run - done)) + io.cpu;
    c.steps += observed ? std::max(compute, disk)
                        : (std::max(compute, disk) + std::max(compute, 2 * disk)) / 2;
    c.compute_steps += compute;
    c.disk_steps += io.disk;
  }
  return c;
}

// The cheapest plan of depth lo..hi, of any stage depth stage_depth_options() gives, within the
// budget (`fallback` if none fits).
//
// The run's time in units of one perfectly efficient step over the grid: per sweep, the
// larger of its compute (halo work, ring reloads once per block) and one read and write
// of the grid at what the disks sustain. A short measurement is uncertain: on virtual
// disks it strayed from what sweeps sustained either way (on a Zen 3 VM, reads measured
// 1.3-1.8 GB/s in 0.2 s, while a bt 24 sweep sustained ~1.1 GB/s of reads and writes; on
// a Xeon VM reads measured 1.3-1.4 GB/s, while bt 12 sweeps of a 25 GiB grid sustained
// 2.1), so with a measured rate a plan costs the mean of its time with the disks at that
// rate (a 20% margin) and at half of it; with the rate earlier sweeps sustained, its time
// at that rate. Of plans that cost the same (the disk binds them all), the one that computes
// least wins: deeper plans that take as many sweeps move as many bytes, but fit shallower
// blocks and compute more (a 25 GiB grid in 1 GiB, 24 steps: bt 14 with blocks of 3 took
// 86 s where bt 12 with blocks of 6 took 67, both in 2 sweeps); then the deeper plan. Each
// depth is weighed with write buffers of two blocks and, where the disk has time to spare, of
// one, taken where it saves kOneBlockOfWritesGain or more.
StreamPlan cheapest_plan(const Manifest& m, const Scheme& st, const Boundary& b, int64_t steps,
                         int lo, int hi, const StreamPlan& fallback, const StreamOptions& opt) {
  const SweepIo io = sweep_io(m, opt, fallback.threads);
  const int64_t run = std::max<int64_t>(steps, 1);
  StreamPlan p = fallback;
  StreamCost best;
  bool found = false;
  for (const StreamOptions& stage_opt : stage_depth_options(m, st, opt)) {
    for (int bt = lo; bt <= hi; ++bt) {
      const auto fits = [&](const StreamPlan& q) {
        return static_cast<uint64_t>(q.memory_bytes) <= opt.mem_budget;
      };
      StreamPlan q = with_deepest_block(m, st, b, bt, stage_opt);
      StreamCost c = run_cost(q, m.dtype, run, io, opt.disk_rate_observed);
      const StreamPlan one = with_deepest_block(m, st, b, bt, stage_opt, Writes::kOneBlock);
      if (one.write_buffers < 2 * int64_t{one.block} && fits(one) &&
          disk_has_time_to_spare(one, m.dtype, io)) {
        const StreamCost one_cost = run_cost(one, m.dtype, run, io, opt.disk_rate_observed);
        if (!fits(q) || one_cost.steps < c.steps * (1 - kOneBlockOfWritesGain)) {
          q = one;
          c = one_cost;
        }
      }
      if (!fits(q)) continue;
      const bool cheaper = c.steps < best.steps * (1 - 1e-9);
      const bool as_cheap =
          c.steps <= best.steps * (1 + 1e-9) && c.compute_steps <= best.compute_steps * (1 + 1e-9);
      if (!found || cheaper || as_cheap) {
        best = c;
        p = q;
        found = true;
      }
    }
  }
  return p;
}

// Bands of rows (stream_bands.h): what a sweep of bands can run.
Status check_bands(const StreamOptions& opt) {
  if (opt.device != nullptr) {
    return invalid_argument(
        "--band-rows sweeps on the CPU, not in a device run; leave out --band-rows");
  }
  return Status::Ok();
}

// Memory a sweep of bands keeps per plane: two running checksums (read and written), an XXH3
// state per component each, with their allocations.
int64_t band_hash_bytes(const Manifest& m) { return 2 * (128 + 640 * int64_t{m.components()}); }

// The grid as a band's sweep sees it: planes of `height` rows, each read into a buffer of
// SweepIo's band mode.
Manifest band_manifest(const Manifest& m, int64_t height) {
  Manifest band = m;
  band.shape.ny = height;
  band.layout.plane_bytes =
      m.components() * m.shape.nx * height * static_cast<int64_t>(dtype_size(m.dtype));
  band.layout.plane_stride = static_cast<int64_t>(internal::stream::band_buffer_bytes(m, height));
  band.layout.coef_bytes = 0;  // (a band's buffer holds every component)
  return band;
}

// The cheapest plan of bands of opt.band_rows rows: for each depth, the band's planes hold the
// band (and the rows before it that it computes where the bands share their edge blocks) and
// bt * ry rows of halo at either side. The run's cost, in steps over the whole grid:
// every band reads its planes whole and computes, level by level, the rows that reach its own
// (the trim: on average its rows and bt * ry more), and the sweep writes the grid once. No
// spare slots bound the depth: the sweeps write out of place.
Result<StreamPlan> plan_bands(const Manifest& m, const Scheme& st, const Boundary& b, int64_t steps,
                              const StreamOptions& opt) {
  DG_RETURN_IF_ERROR(check_bands(opt));
  const int64_t ny = m.shape.ny, rows = std::min(opt.band_rows, ny);
  const int64_t bands = (ny + rows - 1) / rows;
  const bool wrap = bands_wrap(m, b, opt.placement);
  // Bands sharing their edge blocks compute up to edge_block_rows more rows, and keep the first
  // bytes of every component after the first up to a block boundary (SweepIo).
  const bool edges = internal::stream::bands_share_edge_blocks(m, rows, wrap);
  const int64_t edge_rows = edges ? internal::stream::edge_block_rows(m) : 0;
  const int64_t hashes =
      (band_hash_bytes(m) +
       (edges ? m.components() - m.coef_components() - 1 : 0) * int64_t{kDirectIoAlignment}) *
      m.shape.nz;
  StreamOptions band_opt = opt;
  band_opt.mem_budget = opt.mem_budget > static_cast<uint64_t>(hashes)
                            ? opt.mem_budget - static_cast<uint64_t>(hashes)
                            : 0;
  const int deepest = static_cast<int>(std::clamp<int64_t>(steps, 1, kMaxAutoBt));
  std::vector<int> depths;
  if (opt.bt > 0) {
    depths.push_back(std::min(opt.bt, deepest));
  } else {
    for (int bt : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64})
      if (bt < deepest) depths.push_back(bt);
    depths.push_back(deepest);
  }
  const int64_t run = std::max<int64_t>(steps, 1);
  StreamPlan best, smallest;
  double best_steps = 0, best_compute = 0;
  if (wrap && rows + 2 * int64_t{depths.front()} * st.radius_y() > ny) {
    return invalid_argument("bands of " + std::to_string(rows) + " rows with their halos (" +
                            std::to_string(2 * int64_t{depths.front()} * st.radius_y()) +
                            " rows) are taller than this periodic grid's " + std::to_string(ny) +
                            " rows; lower --band-rows, or leave it out");
  }
  for (int bt : depths) {
    const int64_t height = std::min(ny, rows + edge_rows + 2 * int64_t{bt} * st.radius_y());
    // A band's planes that wrap hold its halos at both ends, which must not meet.
    if (wrap && rows + 2 * int64_t{bt} * st.radius_y() > ny) continue;
    const Manifest band = band_manifest(m, height);
    const StreamPlan fallback = with_deepest_block(band, st, b, bt, band_opt);
    const StreamPlan q = cheapest_plan(band, st, b, steps, bt, bt, fallback, band_opt);
    if (bt == depths.front()) smallest = q;
    if (static_cast<uint64_t>(q.memory_bytes) > band_opt.mem_budget) continue;
    const double ny_d = static_cast<double>(ny);
    const auto computed =
        static_cast<double>(std::min(height, rows + edge_rows + int64_t{bt} * st.radius_y()));
    StreamPlan whole_grid = q;  // (its redundancy, counted over the whole grid)
    whole_grid.redundancy *= static_cast<double>(bands) * computed / ny_d;
    SweepIo io = sweep_io(m, band_opt, q.threads);
    const double moved = (static_cast<double>(bands * height) + ny_d) / (2 * ny_d);
    io.disk *= moved;
    io.cpu *= moved;
    const StreamCost c = run_cost(whole_grid, m.dtype, run, io, opt.disk_rate_observed);
    const bool cheaper =
        best.bands == 0 || c.steps < best_steps * (1 - 1e-9) ||
        (c.steps <= best_steps * (1 + 1e-9) && c.compute_steps <= best_compute * (1 + 1e-9));
    if (!cheaper) continue;
    best = q;
    best.bands = bands;
    best.band_rows = rows;
    best.band_height = height;
    best.band_redundancy = static_cast<double>(bands) * computed / ny_d;
    best.cost = c;
    best_steps = best.cost.steps;
    best_compute = best.cost.compute_steps;
  }
  if (best.bands == 0) {
    return invalid_argument("--mem " + format_size(opt.mem_budget) + " is below the " +
                            format_size(static_cast<uint64_t>(smallest.memory_bytes + hashes)) +
                            " the stream method needs in bands of " + std::to_string(rows) +
                            " rows with bt " + std::to_string(smallest.bt) +
                            "; raise --mem or lower --band-rows" + (opt.bt > 0 ? " or --bt" : ""));
  }
  best.memory_bytes += hashes;
  best.minimum_bytes = smallest.memory_bytes + hashes;
  best.sweeps = (std::max<int64_t>(steps, 0) + best.bt - 1) / best.bt;
  best.compute_factor = relative_compute(best, m.dtype);
  return best;
}

}  // namespace

Result<StreamPlan> plan_stream(const Manifest& m, const Scheme& st, const Boundary& b,
                               int64_t steps, const StreamOptions& opt) {
  DG_RETURN_IF_ERROR(check_options(opt));
  if (opt.band_rows > 0) return plan_bands(m, st, b, steps, opt);
  DG_ASSIGN_OR_RETURN(const int64_t spare, spare_levels(m, st));
  const StreamPlan minimum = plan_for(m, st, b, 1, 1, opt);
  const int deepest =
      static_cast<int>(std::clamp<int64_t>(steps, 1, std::min<int64_t>(kMaxAutoBt, spare)));
  // A forced bt still gets the cheaper stage depth; if none fits, the error names its memory.
  const int forced = static_cast<int>(std::min<int64_t>(opt.bt, deepest));
  StreamPlan p = opt.bt > 0 ? cheapest_plan(m, st, b, steps, forced, forced,
                                            with_deepest_block(m, st, b, forced, opt), opt)
                            : cheapest_plan(m, st, b, steps, 1, deepest, minimum, opt);
  if (static_cast<uint64_t>(p.memory_bytes) > opt.mem_budget) {
    const std::string below = "--mem " + format_size(opt.mem_budget) + " is below the ";
    if (p.bt == 1) {
      return invalid_argument(below + format_size(p.memory_bytes) +
                              " the stream method needs at its minimum, bt 1; raise --mem");
    }
    return invalid_argument(below + format_size(p.memory_bytes) +
                            " the stream method needs with bt " + std::to_string(p.bt) +
                            " (the minimum, bt 1, is " + format_size(minimum.memory_bytes) +
                            "); raise --mem" + (opt.bt > 0 ? " or lower --bt" : ""));
  }
  p.minimum_bytes = minimum.memory_bytes;
  p.sweeps = (std::max<int64_t>(steps, 0) + p.bt - 1) / p.bt;
  p.compute_factor = relative_compute(p, m.dtype);
  p.cost = run_cost(p, m.dtype, std::max<int64_t>(steps, 0), sweep_io(m, opt, p.threads),
                    opt.disk_rate_observed);
  return p;
}

int64_t spare_planes_needed(const StreamPlan& plan, const Scheme& stencil) {
  // The levels' reach, and room for the writes in flight (two blocks) and one more block
  // ahead of the durable prefix, so that checkpoints rarely hold the sweep up.
  return int64_t{plan.bt} * stencil.radius_z() + 3 * int64_t{plan.block} + 1;
}

}  // namespace deepgrid
