#include "engines/stream_engine.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "core/stopwatch.h"
#include "deepgrid/integrity.h"
#include "engines/padded_grid.h"
#include "engines/subnormals.h"
#include "engines/sweep_committer.h"
#include "engines/wavefront.h"

namespace deepgrid {
namespace {

using Clock = std::chrono::steady_clock;

using internal::seconds_since;

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

// Level-0 planes kept for a whole sweep: periodic z reads bt * rz planes past each end, which
// are the first and last planes of the grid as they were before the sweep overwrote them.
int64_t pinned_planes(const Boundary& b, int bt, int rz, int64_t nz) {
  return b.kind == Boundary::Kind::kPeriodic ? std::min(nz, 2 * int64_t{bt} * rz) : 0;
}

bool is_pinned(const Boundary& b, int bt, int rz, int64_t nz, int64_t p) {
  const int64_t edge = int64_t{bt} * rz;
  return b.kind == Boundary::Kind::kPeriodic && (p < edge || p >= nz - edge);
}

// A sweep of `levels` steps runs as stages of at most `cache_bt` levels each: stage j
// advances levels [first(j), first(j) + count(j)).
struct Stages {
  int levels, cache_bt;
  int size() const { return (levels + cache_bt - 1) / cache_bt; }
  int first(int j) const { return j * cache_bt; }
  int count(int j) const { return std::min(cache_bt, levels - first(j)); }
};

// Computed updates / useful updates of a sweep: level k of a stage's tile covers the tile
// widened by (stage levels - k) * r wherever the grid goes on.
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
InCoreOptions stage_tiling(const StreamOptions& opt) {
  InCoreOptions tiling;
  tiling.threads = opt.threads;
  tiling.tile_x = opt.tile_x;
  tiling.tile_y = opt.tile_y;
  if (opt.cache_bytes > 0) tiling.cache_bytes = opt.cache_bytes;
  return tiling;
}

// The depth of one stage: what the in-core engine chooses for this stencil (its tiles and
// rings are sized for the cache at that depth).
int default_cache_bt(const Manifest& m, const Scheme& st, const StreamOptions& opt) {
  return plan_wavefront(m.shape, st, dtype_size(m.dtype), 64, stage_tiling(opt)).bt;
}

StreamPlan plan_for(const Manifest& m, const Scheme& st, const Boundary& b, int bt, int block,
                    const StreamOptions& opt) {
  const Shape& s = m.shape;
  const size_t vb = dtype_size(m.dtype);
  const int rz = st.radius_z();
  StreamPlan p;
  p.bt = bt;
  p.cache_bt = std::min(bt, opt.cache_bt > 0 ? opt.cache_bt : default_cache_bt(m, st, opt));
  const Stages stages{bt, p.cache_bt};
  p.stages = stages.size();
  p.threads = std::max(1, opt.threads > 0 ? opt.threads : omp_get_max_threads());
  p.flush_subnormals = opt.flush_subnormals;
  p.block = block;
  const Halo frame{p.cache_bt * st.radius_x(), p.cache_bt * st.radius_y(), 0};
  const int n = st.component_count();
  // `count` frames in one padded grid (FramePool).
  auto frames_bytes = [&](int64_t count) {
    return vb == 4 ? PaddedGrid<float>::bytes_needed({s.nx, s.ny, count}, frame, n)
                   : PaddedGrid<double>::bytes_needed({s.nx, s.ny, count}, frame, n);
  };
  p.frame_bytes = frames_bytes(1);
  // While a stage runs: its input planes of the block, its output planes (unless it is the
  // last), and the 2 rz planes every stage carries into the next block; level 0 also keeps
  // the pinned planes. Dirichlet adds one constant frame beyond z's ends.
  p.frames = std::min(p.stages, 2) * int64_t{block} + 2 * rz * int64_t{p.stages} +
             pinned_planes(b, bt, rz, s.nz);
  const int64_t pools_bytes =
      frames_bytes(p.frames) + (b.kind == Boundary::Kind::kDirichlet ? p.frame_bytes : 0);
  // Tiles like the in-core engine's at the stage depth, so that a thread's rings stay in cache
  // while it advances a tile through a block.
  InCoreOptions tiling = stage_tiling(opt);
  tiling.threads = p.threads;
  tiling.bt = p.cache_bt;
  const WavefrontPlan wp = plan_wavefront(s, st, vb, p.cache_bt, tiling);
  p.tile_x = wp.tile_x;
  p.tile_y = wp.tile_y;
  p.tiles = ((s.nx + p.tile_x - 1) / p.tile_x) * ((s.ny + p.tile_y - 1) / p.tile_y);
  // Per-thread rings, and what every (stage, tile) carries from one block to the next.
  p.carried_planes = int64_t{p.cache_bt - 1} * 2 * rz;
  const int64_t frame_w = p.tile_x + 2 * int64_t{frame.x},
                frame_h = p.tile_y + 2 * int64_t{frame.y};
  const int64_t carry_bytes =
      vb == 4 ? internal::WavefrontCarry<float>::bytes(p.cache_bt, rz, st.radius_y(),
                                                       round_up(frame_w, 16), frame_h, n)
              : internal::WavefrontCarry<double>::bytes(p.cache_bt, rz, st.radius_y(),
                                                        round_up(frame_w, 16), frame_h, n);
  const int64_t ring_bytes =
      p.threads * internal::wavefront_workspace_bytes(p.cache_bt, rz, frame_w, frame_h, vb, n) +
      static_cast<int64_t>(
          internal::paged_bytes(static_cast<size_t>(p.stages * p.tiles * carry_bytes)));
  p.redundancy = redundancy(s, st, b, stages, p.tile_x, p.tile_y);
  // Reads of the next block and writes of the previous one overlap the current block.
  p.io_buffers = 3 * int64_t{block};
  p.memory_bytes = pools_bytes + ring_bytes +
                   static_cast<int64_t>(internal::paged_bytes(
                       static_cast<size_t>(p.io_buffers * m.layout.plane_stride)));
  return p;
}

// Frames for planes of every stage's level, each a full x-y plane with a ghost frame filled by
// the boundary rule: the planes of one padded grid, one allocation (on huge pages where the
// kernel allows it: tiles read rows of several frames at every step), handed out and taken back
// by the stages' pools as their planes come and go.
template <typename T>
class FrameStore {
 public:
  // Dirichlet ghost frames hold the boundary's value whatever the plane: they are filled here,
  // once, and never written again (planes are loaded and computed inside the grid only).
  Status allocate(int64_t count, const Shape& s, Halo halo, int components, const Boundary& b) {
    DG_ASSIGN_OR_RETURN(frames_, PaddedGrid<T>::allocate({s.nx, s.ny, count}, halo, components));
    ghosts_fixed_ = b.kind == Boundary::Kind::kDirichlet;
    if (ghosts_fixed_) frames_.fill_ghosts(b, 1);
    return Status::Ok();
  }
  // Whether the frames' ghosts stay as allocate() filled them (else: fill each plane's).
  bool ghosts_fixed() const { return ghosts_fixed_; }

  // Every frame free.
  void reset() {
    free_.clear();
    for (int64_t f = 0; f < frames_.shape().nz; ++f) free_.push_back(f);
  }

  Result<int64_t> acquire() {
    if (free_.empty()) {
      return Status(ErrorCode::kResource, "stream engine: no free frame (planning error)");
    }
    const int64_t f = free_.back();
    free_.pop_back();
    return f;
  }
  void release(int64_t f) { free_.push_back(f); }

  PaddedGrid<T>& frames() { return frames_; }
  const PaddedGrid<T>& frames() const { return frames_; }

 private:
  PaddedGrid<T> frames_;  // frame f is plane f
  std::vector<int64_t> free_;
  bool ghosts_fixed_ = false;
};

// The planes of one time level, keyed by z, in frames of the shared store: level 0 as read
// from disk, or the level between two stages.
template <typename T>
class FramePool {
 public:
  // Level 0 of a periodic sweep wraps z (its planes are the grid's own); otherwise planes are
  // keyed by z in [zlo, zhi), and reads of z outside [0, nz) go to `constant` (dirichlet) or
  // the edge plane (neumann); periodic levels past level 0 are computed past the ends and
  // keyed there.
  void reset(FrameStore<T>* store, const Shape& s, int64_t zlo, int64_t zhi, bool wraps,
             const Boundary& b, const PaddedGrid<T>* constant) {
    store_ = store;
    nz_ = s.nz;
    zlo_ = zlo;
    wraps_ = wraps;
    b_ = b;
    constant_ = constant;
    slot_.assign(static_cast<size_t>(zhi - zlo), -1);
  }

  bool has(int64_t z) const { return slot(z) >= 0; }
  // Frame z: its plane, and filling its ghost frame by the boundary rule.
  T* plane(int64_t z) { return store_->frames().plane(slot(z)); }
  void fill_ghosts(int64_t z) {
    if (!store_->ghosts_fixed()) store_->frames().fill_plane_ghosts(slot(z), b_);
  }
  // Copies packed plane values into frame z (hashing them into `hash` if given).
  void load(int64_t z, const T* packed, PlaneHasher* hash) {
    store_->frames().load_plane(slot(z), packed, hash);
  }

  Status acquire(int64_t z) {
    DG_ASSIGN_OR_RETURN(slot(z), store_->acquire());
    return Status::Ok();
  }

  void release(int64_t z) {
    if (z < zlo_ || z >= zlo_ + static_cast<int64_t>(slot_.size()) || slot(z) < 0) return;
    store_->release(slot(z));
    slot(z) = -1;
  }

  // Level plane z at global (gx, gy), the boundary rule applied beyond z's ends.
  const T* origin(int64_t z, int64_t gx, int64_t gy) const {
    const PaddedGrid<T>& frames = store_->frames();
    const T* p = constant_ != nullptr ? constant_->plane(0) : nullptr;
    if (wraps_) {
      p = frames.plane(slot(((z % nz_) + nz_) % nz_));
    } else if ((z >= 0 && z < nz_) || b_.kind == Boundary::Kind::kPeriodic) {
      p = frames.plane(slot(z));
    } else if (b_.kind == Boundary::Kind::kNeumann) {
      p = frames.plane(slot(z < 0 ? 0 : nz_ - 1));
    }
    return p + gy * frames.stride() + gx;
  }

  typename internal::Wavefront<T>::PlaneStrides strides() const {
    return {store_->frames().stride(), store_->frames().field_stride()};
  }

 private:
  int64_t& slot(int64_t z) { return slot_[static_cast<size_t>(z - zlo_)]; }
  int64_t slot(int64_t z) const { return slot_[static_cast<size_t>(z - zlo_)]; }

  FrameStore<T>* store_ = nullptr;
  std::vector<int64_t> slot_;
  int64_t nz_ = 0, zlo_ = 0;
  bool wraps_ = false;
  Boundary b_;
  const PaddedGrid<T>* constant_ = nullptr;
};

// Everything one sweep needs, allocated once per run.
//
// A sweep of L levels runs as stages of at most cache_bt levels (two-level blocking: the disk
// sees one read and one write per L steps, the cache one pass per cache_bt steps). Stage j
// reads its level from pool j - level 0 converted from disk reads, or the full planes stage
// j - 1 wrote - and writes its last level into pool j + 1 or, for the last stage, into write
// buffers. Global step i is stage j's step i - first(j) rz, so each stage's input plane is
// complete when it runs. Blocks of z-steps: thread 0 makes the block's planes ready, all
// threads advance every stage's tiles through the block stage by stage, thread 0 writes and
// reads further. The pools share one frame store: once stage j has run a block, its input
// planes but the 2 rz it carries into the next block hold stage j + 2's output, so memory
// holds two stages' planes of a block whatever the depth.
template <typename T>
class StreamRun {
  // An aligned plane buffer (a slice of io_arena_) for one read or write at a time.
  struct IoBuffer {
    std::byte* bytes = nullptr;
    int64_t plane = -1;  // the plane it holds or is transferring
    bool busy = false;   // a request is in flight
    bool ready = false;  // read: data arrived
    T* data() const { return reinterpret_cast<T*>(bytes); }
  };

 public:
  StreamRun(Grid& grid, const Scheme& st, const Boundary& b, const StreamPlan& plan,
            io::BlockIo& io, const ResolvedProbes* probes, const GridPlacement& placement)
      : probes_(probes),
        placement_(placement),
        grid_(grid),
        m_(grid.manifest()),
        s_(m_.shape),
        kernel_(st),
        b_(b),
        plan_(plan),
        io_(io),
        rz_(kernel_.rz()),
        pools_(static_cast<size_t>(plan.stages)) {
    for (size_t f = 0; f < m_.layout.files.size(); ++f) {
      paths_.push_back(grid.file_path(static_cast<int>(f)));
    }
  }

  Status allocate() {
    const Halo frame{plan_.cache_bt * kernel_.rx(), plan_.cache_bt * kernel_.ry(), 0};
    const int n = kernel_.components();
    DG_RETURN_IF_ERROR(store_.allocate(plan_.frames, s_, frame, n, b_));
    if (b_.kind == Boundary::Kind::kDirichlet) {
      DG_ASSIGN_OR_RETURN(constant_, PaddedGrid<T>::allocate({s_.nx, s_.ny, 1}, frame, n));
      std::vector<T> v(static_cast<size_t>(s_.plane_points() * n), static_cast<T>(b_.value));
      constant_.load_plane(0, v.data());
      constant_.fill_ghosts(b_, 1);
    }
    const int64_t frame_h = plan_.tile_y + 2 * int64_t{plan_.cache_bt} * kernel_.ry();
    for (int t = 0; t < plan_.threads; ++t) {
      ws_.push_back(std::make_unique<internal::WavefrontWorkspace<T>>(
          plan_.cache_bt, rz_, kernel_.ry(),
          plan_.tile_x + 2 * int64_t{plan_.cache_bt} * kernel_.rx(), frame_h,
          static_cast<T>(b_.value), n));
    }
    const int64_t carry_values =
        internal::WavefrontCarry<T>::bytes(plan_.cache_bt, rz_, kernel_.ry(), ws_.front()->stride(),
                                           frame_h, n) /
        static_cast<int64_t>(sizeof(T));
    carry_arena_ = internal::AlignedBuffer::on_huge_pages(
        static_cast<size_t>(plan_.stages * plan_.tiles * carry_values) * sizeof(T));
    for (int64_t c = 0; c < plan_.stages * plan_.tiles && carry_arena_.ok(); ++c) {
      carries_.emplace_back(plan_.cache_bt, rz_, kernel_.ry(), ws_.front()->stride(), frame_h, n,
                            carry_arena_.data<T>() + c * carry_values);
    }
    io_arena_ = internal::AlignedBuffer::on_huge_pages(bytes() * plan_.io_buffers);
    std::byte* next = io_arena_.data();
    for (int i = 0; i < plan_.block; ++i, next += bytes()) reads_.push_back({next});
    for (int i = 0; i < 2 * plan_.block; ++i, next += bytes()) writes_.push_back({next});
    bool ok = true;
    for (const auto& w : ws_) ok = ok && w->ok();
    ok = ok && carry_arena_.ok();
    ok = ok && io_arena_.ok();
    if (!ok) return Status(ErrorCode::kResource, "out of memory for the stream engine's buffers");
    new_hash_.assign(static_cast<size_t>(s_.nz), 0);
    written_.assign(static_cast<size_t>(s_.nz), false);
    committer_ = std::make_unique<internal::SweepCommitter>(grid_, new_hash_);
    return Status::Ok();
  }

  // One sweep in place, from the record's `done` plane on (0: a new sweep): reads run ahead,
  // writes behind, compute between; the committer makes the progress durable behind them.
  // `reach`: the steps left in the run at the sweep's start; the points computed are trimmed
  // to what reaches the placement's needed box by the run's end (wavefront.h), and the rest
  // of the planes written holds zeros.
  Status sweep(const SweepRecord& record, int64_t reach, StreamStats& stats) {
    record_ = &record;
    reach_ = std::max<int64_t>(reach, record.levels);  // (a larger reach is only less trimmed)
    Status st = open_side_file(record);
    if (st.ok()) {
      committer_->begin(record);
      st = sweep_unchecked(record.levels, stats);
      if (!st.ok()) drain();  // the kernel must not write into buffers about to be freed
      const Status committed = committer_->finish();
      if (st.ok()) st = committed;
    }
    if (side_fd_ >= 0) ::close(side_fd_);
    side_fd_ = -1;
    return st;
  }

 private:
  using Tile = internal::WavefrontFrame;
  using Wave = internal::Wavefront<T>;

  Status sweep_unchecked(int levels, StreamStats& stats) {
    levels_ = levels;
    from_ = record_->done;
    stages_ = Stages{levels, plan_.cache_bt};
    reset_pools();
    build_read_order();
    next_read_ = 0;
    std::fill(new_hash_.begin(), new_hash_.end(), 0);
    std::copy(record_->hashes.begin(), record_->hashes.end(), new_hash_.begin());
    for (int64_t z = 0; z < from_; ++z)
      grid_.record_plane_hash(z, new_hash_[static_cast<size_t>(z)]);
    std::fill(written_.begin(), written_.end(), false);
    written_prefix_ = requested_ = from_;
    // waves[thread][stage][tile]: each thread's in its own workspace.
    std::vector<std::vector<std::vector<Wave>>> waves(static_cast<size_t>(plan_.threads));
    for (size_t t = 0; t < waves.size(); ++t) {
      waves[t].resize(static_cast<size_t>(stages_.size()));
      for (int j = 0; j < stages_.size(); ++j) {
        make_waves(j, *ws_[t], waves[t][static_cast<size_t>(j)]);
      }
    }
    const int64_t first = level_begin(0);
    const int64_t end = s_.nz + int64_t{levels} * rz_;
    const int64_t ntiles = plan_.tiles;
    Status shared;
#pragma omp parallel num_threads(plan_.threads)
    {
      const internal::SubnormalsFlushed flushed(plan_.flush_subnormals);
      auto t0 = Clock::now();
      for (int64_t i0 = first; i0 < end; i0 += plan_.block) {
        const int64_t i1 = std::min(end, i0 + plan_.block);
#pragma omp master
        {
          if (shared.ok()) shared = prepare_block(i0, i1, stats);
          t0 = Clock::now();
        }
#pragma omp barrier
        if (!shared.ok()) break;
        convert_level0_planes();
#pragma omp master
        shared = recycle_read_buffers();  // ok before: the barrier above broke out otherwise
        for (int j = 0; j < stages_.size(); ++j) {
#pragma omp master
          {
            if (shared.ok()) shared = turn_to_stage(j, i0, i1);
          }
#pragma omp barrier
          if (!shared.ok()) break;
          const int64_t lag = int64_t{stages_.first(j)} * rz_;
          const std::vector<Wave>& stage =
              waves[static_cast<size_t>(omp_get_thread_num())][static_cast<size_t>(j)];
#pragma omp for schedule(dynamic, 1)
          for (int64_t t = 0; t < ntiles; ++t) {
            const Wave& wave = stage[static_cast<size_t>(t)];
            internal::WavefrontCarry<T>& carry = carries_[static_cast<size_t>(j * ntiles + t)];
            wave.restore(carry, i0 - lag);
            for (int64_t i = i0; i < i1; ++i) wave.step(i - lag);
            wave.save(carry, i1 - lag);
          }
          if (j + 1 < stages_.size()) fill_stage_output_ghosts(j, i0, i1);
        }
        if (!shared.ok()) break;  // the same for all: written before the stage's barriers
        hash_block_outputs(i0, i1);
#pragma omp master
        {
          stats.compute_seconds += seconds_since(t0);
          if (shared.ok()) shared = finish_block(i0, i1, stats);
        }
      }
    }
    DG_RETURN_IF_ERROR(shared);
    while (std::any_of(writes_.begin(), writes_.end(), [](const IoBuffer& w) { return w.busy; })) {
      DG_RETURN_IF_ERROR(complete_one(stats));
    }
    return Status::Ok();
  }

  // Planes past each z end that the level after stage j covers (periodic: computed there).
  int64_t extension(int j) const {
    return b_.kind == Boundary::Kind::kPeriodic
               ? int64_t{levels_ - stages_.first(j) - stages_.count(j)} * rz_
               : 0;
  }

  // The first plane of level k the sweep computes (level 0: reads): what the output from plane
  // from_ on needs; below 0 only for periodic levels, which extend past the ends.
  int64_t level_begin(int k) const {
    const int64_t begin = from_ - int64_t{levels_ - k} * rz_;
    return b_.kind == Boundary::Kind::kPeriodic ? begin : std::max<int64_t>(0, begin);
  }

  // The z range of stage j's output plane at global step i; empty for planes outside it.
  int64_t stage_output_plane(int j, int64_t i) const {
    return i - int64_t{stages_.first(j) + stages_.count(j)} * rz_;
  }
  bool stage_output_in_range(int j, int64_t z) const {
    return z >= level_begin(stages_.first(j) + stages_.count(j)) && z < s_.nz + extension(j);
  }

  void reset_pools() {
    const bool periodic = b_.kind == Boundary::Kind::kPeriodic;
    store_.reset();
    pools_[0].reset(&store_, s_, 0, s_.nz, periodic, b_, &constant_);
    for (int j = 1; j < stages_.size(); ++j) {
      const int64_t e = extension(j - 1);
      pools_[static_cast<size_t>(j)].reset(&store_, s_, -e, s_.nz + e, false, b_, &constant_);
    }
  }

  // Before stage j runs steps [i0, i1): the planes stage j - 1 has done with go back to the
  // store, and stage j's output planes get frames (from them: stages take turns in memory).
  Status turn_to_stage(int j, int64_t i0, int64_t i1) {
    if (j > 0) release_stage_inputs(j - 1, i0, i1);
    if (j + 1 == stages_.size()) return Status::Ok();
    FramePool<T>& next = pools_[static_cast<size_t>(j + 1)];
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t z = stage_output_plane(j, i);
      if (stage_output_in_range(j, z)) DG_RETURN_IF_ERROR(next.acquire(z));
    }
    return Status::Ok();
  }

  // After stage j's steps [i0, i1): its input plane q is done with after its step q + 2 rz,
  // except level 0's pinned planes.
  void release_stage_inputs(int j, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t q = i - 2 * rz_ - int64_t{stages_.first(j)} * rz_;
      if (j > 0 || !is_pinned(b_, levels_, rz_, s_.nz, q))
        pools_[static_cast<size_t>(j)].release(q);
    }
  }

  void make_waves(int j, internal::WavefrontWorkspace<T>& ws, std::vector<Wave>& out) {
    const std::vector<Tile> all = tiles();
    const int n = stages_.count(j);
    const bool last = j + 1 == stages_.size();
    const int64_t from = from_ - int64_t{levels_ - stages_.first(j) - n} * rz_;
    const ProbeRun probes{probes_, record_->step_from + stages_.first(j), placement_};
    const internal::WavefrontTrim trim = trim_from_level(stages_.first(j));
    FramePool<T>& in = pools_[static_cast<size_t>(j)];
    for (size_t t = 0; t < all.size(); ++t) {
      const Tile tile = all[t];
      const int64_t gx = tile.x0 - int64_t{n} * kernel_.rx();
      const int64_t gy = tile.y0 - int64_t{n} * kernel_.ry();
      auto level0 = [&in, gx, gy](int64_t z) -> const T* { return in.origin(z, gx, gy); };
      if (last) {
        out.emplace_back(
            kernel_, b_, s_, n, tile, ws, level0, in.strides(),
            [this, tile](int64_t z) { return output_plane(z) + tile.y0 * s_.nx + tile.x0; },
            typename Wave::PlaneStrides{s_.nx, s_.plane_points()}, 0, from, probes, trim);
      } else {
        FramePool<T>& next = pools_[static_cast<size_t>(j + 1)];
        out.emplace_back(
            kernel_, b_, s_, n, tile, ws, level0, in.strides(),
            [&next, tile](int64_t z) {
              return next.plane(z) + tile.y0 * next.strides().stride + tile.x0;
            },
            next.strides(), extension(j), from, probes, trim);
      }
    }
  }

  // The trim of a wavefront whose level 0 is the sweep's level k.
  internal::WavefrontTrim trim_from_level(int k) const {
    return {placement_.needed_lo, placement_.needed_hi, reach_ - k};
  }

  // Whether the trim leaves points of output plane z uncomputed.
  bool output_trimmed(int64_t z) const {
    const internal::WavefrontTrim trim = trim_from_level(0);
    const int L = levels_, rx = kernel_.rx(), ry = kernel_.ry();
    const bool x_cut = trim.first(0, L, rx) > 0 || trim.end(0, L, rx) < s_.nx;
    const bool y_cut = trim.first(1, L, ry) > 0 || trim.end(1, L, ry) < s_.ny;
    return x_cut || y_cut || z < trim.first(2, L, rz_) || z >= trim.end(2, L, rz_);
  }

  // After stage j's part of steps [i0, i1): the ghost frames of the planes it completed, for
  // the next stage to read. Called by every thread of the team (none wait for the others where
  // the ghosts are fixed).
  void fill_stage_output_ghosts(int j, int64_t i0, int64_t i1) {
    if (store_.ghosts_fixed()) return;
    FramePool<T>& next = pools_[static_cast<size_t>(j + 1)];
#pragma omp for schedule(static)
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t z = stage_output_plane(j, i);
      if (stage_output_in_range(j, z)) next.fill_ghosts(z);
    }
  }

  // The checksums of the planes the block completes, for finish_block to record. Called by
  // every thread of the team.
  void hash_block_outputs(int64_t i0, int64_t i1) {
    const size_t bytes = static_cast<size_t>(m_.layout.plane_bytes);
#pragma omp for schedule(static)
    for (int64_t i = i0; i < i1; ++i) {
      const int b = block_out_[static_cast<size_t>(i - i0)];
      if (b >= 0) block_hash_[static_cast<size_t>(i - i0)] = plane_hash(writes_[b].data(), bytes);
    }
  }

  std::vector<Tile> tiles() const {
    std::vector<Tile> out;
    for (int64_t y = 0; y < s_.ny; y += plan_.tile_y) {
      for (int64_t x = 0; x < s_.nx; x += plan_.tile_x) {
        out.push_back({x, std::min(s_.nx, x + plan_.tile_x), y, std::min(s_.ny, y + plan_.tile_y)});
      }
    }
    return out;
  }

  // The buffer output plane z goes to (assigned by prepare_block).
  T* output_plane(int64_t z) const {
    return writes_[static_cast<size_t>(block_out_[static_cast<size_t>(z - block_z0_)])].data();
  }

  // Before steps [i0, i1): a frame for each of their level-0 planes (converted by all threads
  // next), a write buffer per output plane.
  Status prepare_block(int64_t i0, int64_t i1, StreamStats& stats) {
    const int64_t nz = s_.nz;
    conversions_.clear();
    for (int64_t i = i0; i < i1; ++i) {
      if (b_.kind == Boundary::Kind::kPeriodic || i < nz) {
        DG_RETURN_IF_ERROR(claim_level0(((i % nz) + nz) % nz, stats));
      }
    }
    conversion_status_.assign(conversions_.size(), Status::Ok());
    const int last = stages_.size() - 1;
    block_z0_ = stage_output_plane(last, i0);
    block_out_.assign(static_cast<size_t>(i1 - i0), -1);
    block_hash_.assign(static_cast<size_t>(i1 - i0), 0);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t z = stage_output_plane(last, i);
      if (z < from_ || z >= nz) continue;
      DG_ASSIGN_OR_RETURN(const size_t b, idle_write_buffer(stats));
      writes_[b].busy = true;  // claimed until finish_block submits it
      // What the trim leaves out is written as zeros, not as what the buffer held before
      // (which depends on the order writes complete in): the files' bytes stay reproducible.
      if (output_trimmed(z)) std::memset(writes_[b].bytes, 0, bytes());
      block_out_[static_cast<size_t>(i - i0)] = static_cast<int>(b);
    }
    return Status::Ok();
  }

  // Level-0 planes from the disk layout into their frames, ghost frames filled by the
  // boundary rule, each checked against its checksum as it is copied (verified reads). Called
  // by every thread of the team; recycle_read_buffers() reports a mismatch.
  void convert_level0_planes() {
    const bool verify = grid_.verifying();
    FramePool<T>& level0 = pools_[0];
#pragma omp for schedule(static)
    for (size_t c = 0; c < conversions_.size(); ++c) {
      const IoBuffer& read = reads_[conversions_[c]];
      if (verify) {
        PlaneHasher hash;
        level0.load(read.plane, read.data(), &hash);
        conversion_status_[c] = grid_.verify_plane_hash(read.plane, hash.digest());
      } else {
        level0.load(read.plane, read.data(), nullptr);
      }
      level0.fill_ghosts(read.plane);
    }
  }

  // After the conversions: their read buffers take the next reads.
  Status recycle_read_buffers() {
    for (const Status& st : conversion_status_) DG_RETURN_IF_ERROR(st);
    for (size_t b : conversions_) reads_[b] = IoBuffer{reads_[b].bytes};
    DG_RETURN_IF_ERROR(pump_reads());
    io_.flush();
    return Status::Ok();
  }

  // After steps [i0, i1): write the finished planes, free the last stage's input planes it has
  // done with, read further ahead.
  Status finish_block(int64_t i0, int64_t i1, StreamStats& stats) {
    const int last = stages_.size() - 1;
    for (int64_t i = i0; i < i1; ++i) {
      const int b = block_out_[static_cast<size_t>(i - i0)];
      if (b >= 0) {
        const int64_t z = stage_output_plane(last, i);
        const uint64_t hash = block_hash_[static_cast<size_t>(i - i0)];
        grid_.record_plane_hash(z, hash);
        new_hash_[static_cast<size_t>(z)] = hash;
        DG_RETURN_IF_ERROR(wait_until_writable(z, stats));
        DG_RETURN_IF_ERROR(submit(writes_[static_cast<size_t>(b)], io::Op::kWrite, z, b));
      }
    }
    release_stage_inputs(stages_.size() - 1, i0, i1);
    DG_RETURN_IF_ERROR(pump_reads());
    io_.flush();  // the block's writes and the next reads in one system call
    return Status::Ok();
  }

  // Claims a frame for level-0 plane p unless it has one, once its read has arrived; the
  // conversion into the frame is left to convert_level0_planes().
  Status claim_level0(int64_t p, StreamStats& stats) {
    FramePool<T>& level0 = pools_[0];
    if (level0.has(p)) return Status::Ok();
    while (true) {
      DG_RETURN_IF_ERROR(pump_reads());
      for (size_t b = 0; b < reads_.size(); ++b) {
        if (reads_[b].plane == p && reads_[b].ready) {
          DG_RETURN_IF_ERROR(level0.acquire(p));
          conversions_.push_back(b);
          return Status::Ok();
        }
      }
      DG_RETURN_IF_ERROR(complete_one(stats));
    }
  }

  // Starts reads of the next planes in order while read buffers are free.
  Status pump_reads() {
    for (size_t b = 0; b < reads_.size() && next_read_ < order_.size(); ++b) {
      if (reads_[b].busy || reads_[b].plane >= 0) continue;
      DG_RETURN_IF_ERROR(submit(reads_[b], io::Op::kRead, order_[next_read_++], b));
    }
    return Status::Ok();
  }

  Result<size_t> idle_write_buffer(StreamStats& stats) {
    while (true) {
      for (size_t b = 0; b < writes_.size(); ++b) {
        if (!writes_[b].busy) return b;
      }
      DG_RETURN_IF_ERROR(complete_one(stats));
    }
  }

  // Old plane p is read from its slot (or, resuming a periodic sweep, the side file); new
  // plane z goes to the slot `spare` places behind old plane z's.
  Status submit(IoBuffer& buf, io::Op op, int64_t plane, size_t index) {
    buf.plane = plane;
    buf.busy = true;
    buf.ready = false;
    io::Request r;
    r.op = op;
    const bool write = op == io::Op::kWrite;
    if (!write && from_side_file(plane)) {
      r.fd = side_fd_;
      r.path = side_path_;
      r.offset = plane * m_.layout.plane_stride;
    } else {
      const PlaneLocation loc = m_.locate_slot(
          m_.slot_of(plane, write ? record_->base_to(m_.slots()) : record_->base_from));
      r.fd = grid_.fd(loc.file);
      r.path = paths_[static_cast<size_t>(loc.file)];
      r.offset = loc.offset;
    }
    r.length = bytes();
    r.buffer = buf.bytes;
    r.tag = (op == io::Op::kWrite ? kWriteTag : 0) | index;
    return io_.submit(r);
  }

  Status complete_one(StreamStats& stats) {
    const auto t0 = Clock::now();
    auto c = io_.wait();
    stats.io_wait_seconds += seconds_since(t0);
    if (!c.ok()) return c.status();
    const bool write = (c->tag & kWriteTag) != 0;
    IoBuffer& buf = (write ? writes_ : reads_)[static_cast<size_t>(c->tag & ~kWriteTag)];
    buf.busy = false;
    if (!c->status.ok()) return c->status;
    if (write) {
      stats.bytes_written += bytes();
      note_written(buf.plane);
      buf.plane = -1;
    } else {
      stats.bytes_read += bytes();
      buf.ready = true;  // verified as it is converted
    }
    return Status::Ok();
  }

  void drain() {
    while (io_.in_flight() > 0) (void)io_.wait();
  }

  // Writes of new planes complete in any order: the prefix [0, written_prefix_) is done, and
  // the committer is asked to make it durable every half window.
  void note_written(int64_t z) {
    written_[static_cast<size_t>(z)] = true;
    while (written_prefix_ < s_.nz && written_[static_cast<size_t>(written_prefix_)]) {
      ++written_prefix_;
    }
    if (written_prefix_ >= requested_ + std::max<int64_t>(1, window() / 2) ||
        written_prefix_ == s_.nz) {
      requested_ = written_prefix_;
      committer_->request(requested_);
    }
  }

  // How far writes may run ahead of the durable prefix: spare slots not needed by the levels.
  int64_t window() const { return record_->spare - int64_t{levels_} * rz_; }

  // Writing new plane z destroys old plane z - spare, which a resume from the durable prefix
  // d needs while z - spare >= d - levels rz: wait until the prefix is far enough.
  Status wait_until_writable(int64_t z, StreamStats& stats) {
    const int64_t need = z - window() + 1;
    if (need <= 0 || committer_->durable() >= need) return Status::Ok();
    while (written_prefix_ < need) DG_RETURN_IF_ERROR(complete_one(stats));
    requested_ = std::max(requested_, written_prefix_);
    committer_->request(requested_);
    const auto t0 = Clock::now();
    Status st = committer_->wait_durable(need);
    stats.io_wait_seconds += seconds_since(t0);
    return st;
  }

  bool from_side_file(int64_t p) const { return side_fd_ >= 0 && p < side_planes_; }

  // Periodic sweeps end with the old planes [0, levels rz), which they overwrite early: a new
  // sweep first copies them into the side file (durable before anything is overwritten), and
  // every sweep reads them from there.
  Status open_side_file(const SweepRecord& record) {
    if (record.side_file.empty()) return Status::Ok();
    side_path_ = internal::join_path(grid_.dir(), record.side_file);
    side_planes_ = std::min(s_.nz, int64_t{record.levels} * rz_);
    const bool resumed = record.done > 0;
    bool direct = false;
    DG_ASSIGN_OR_RETURN(
        side_fd_, internal::open_data_file(side_path_,
                                           resumed ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, &direct));
    if (resumed) return Status::Ok();
    const int64_t stride = m_.layout.plane_stride;
    void* buf = writes_.front().bytes;  // idle between sweeps
    for (int64_t p = 0; p < side_planes_; ++p) {
      const PlaneLocation loc = m_.locate_slot(m_.slot_of(p, record.base_from));
      DG_RETURN_IF_ERROR(internal::pread_full(grid_.fd(loc.file), buf, bytes(), loc.offset,
                                              paths_[static_cast<size_t>(loc.file)]));
      DG_RETURN_IF_ERROR(internal::pwrite_full(side_fd_, buf, bytes(), p * stride, side_path_));
    }
    if (::fdatasync(side_fd_) != 0) return errno_status(errno, "fsync", side_path_);
    return internal::fsync_path(grid_.dir());
  }

  size_t bytes() const { return static_cast<size_t>(m_.layout.plane_stride); }

  // Reads in the order planes are first needed (periodic sweeps start with the last planes
  // and end with the first ones), each plane once.
  void build_read_order() {
    order_.clear();
    const int64_t nz = s_.nz;
    std::vector<bool> seen(static_cast<size_t>(nz), false);
    const bool periodic = b_.kind == Boundary::Kind::kPeriodic;
    const int64_t end = periodic ? nz + int64_t{levels_} * rz_ : nz;
    for (int64_t i = level_begin(0); i < end; ++i) {
      const int64_t p = ((i % nz) + nz) % nz;
      if (!seen[static_cast<size_t>(p)]) order_.push_back(p);
      seen[static_cast<size_t>(p)] = true;
    }
  }

  const ResolvedProbes* probes_;
  const GridPlacement placement_;
  Grid& grid_;
  const Manifest& m_;
  const Shape s_;
  const SchemeKernel<T> kernel_;
  const Boundary& b_;
  const StreamPlan& plan_;
  io::BlockIo& io_;
  const int rz_;
  FrameStore<T> store_;              // the frames of all pools
  std::vector<FramePool<T>> pools_;  // stage j's input level
  PaddedGrid<T> constant_;           // dirichlet: the plane beyond z's ends
  std::vector<std::unique_ptr<internal::WavefrontWorkspace<T>>> ws_;  // per thread
  std::vector<internal::WavefrontCarry<T>> carries_;                  // stage-major, per tile
  internal::AlignedBuffer carry_arena_;  // the carries' memory, on huge pages
  internal::AlignedBuffer io_arena_;     // the I/O buffers
  std::vector<IoBuffer> reads_, writes_;
  std::vector<size_t> conversions_;        // read buffers to convert into their level-0 frames
  std::vector<Status> conversion_status_;  // each one's checksum check
  std::vector<int64_t> order_;
  size_t next_read_ = 0;
  int levels_ = 1;
  int64_t reach_ = 1;  // steps left in the run at the sweep's start (sweep())
  Stages stages_{1, 1};
  int64_t block_z0_ = 0;              // output plane of the block's first step
  std::vector<int> block_out_;        // write buffer of each step's output plane, or -1
  std::vector<uint64_t> block_hash_;  // checksum of each step's output plane
  std::vector<std::string> paths_;
  // The sweep being run, and its durability (resume.h).
  const SweepRecord* record_ = nullptr;
  int64_t from_ = 0;                // first output plane (a resumed sweep's record.done)
  std::vector<uint64_t> new_hash_;  // checksums of the new planes
  std::vector<bool> written_;       // new planes whose write completed
  int64_t written_prefix_ = 0, requested_ = 0;
  std::unique_ptr<internal::SweepCommitter> committer_;
  int side_fd_ = -1;
  int64_t side_planes_ = 0;
  std::string side_path_;
  static constexpr uint64_t kWriteTag = uint64_t{1} << 63;
};

}  // namespace

Result<StreamPlan> plan_stream(const Manifest& m, const Scheme& st, const Boundary& b,
                               int64_t steps, const StreamOptions& opt) {
  if (opt.mem_budget == 0) {
    return invalid_argument("the stream method needs a memory budget; give --mem, e.g. --mem 1GiB");
  }
  if (opt.block < 0) return invalid_argument("the stream block must be at least one z-step");
  if (opt.cache_bt < 0) return invalid_argument("--cache-bt must be >= 1 (or 0 for automatic)");
  // An in-place sweep of bt levels needs more than bt rz spare slots (resume.h); a grid whose
  // planes wrap around the ring's end cannot grow them.
  const int64_t spare_levels = m.base + m.shape.nz <= m.slots() || st.radius_z() == 0
                                   ? 64
                                   : (m.layout.spare_planes - 1) / st.radius_z();
  if (spare_levels < 1) {
    return invalid_argument("grid has only " + std::to_string(m.layout.spare_planes) +
                            " spare planes, too few for an in-place sweep of this stencil; use "
                            "--method incore, or copy the grid with 'deepgrid export' and import");
  }
  const StreamPlan minimum = plan_for(m, st, b, 1, 1, opt);
  const int deepest =
      static_cast<int>(std::clamp<int64_t>(steps, 1, std::min<int64_t>(kMaxAutoBt, spare_levels)));
  // The deepest block (up to kMaxBlock z-steps) that fits: every tile reads its carried planes
  // into the cache once per block, so that traffic falls as the block grows.
  auto with_block = [&](int bt) {
    StreamPlan q = plan_for(m, st, b, bt, opt.block > 0 ? opt.block : kMaxBlock, opt);
    while (opt.block == 0 && q.block > 1 &&
           static_cast<uint64_t>(q.memory_bytes) > opt.mem_budget) {
      q = plan_for(m, st, b, bt, q.block - 1, opt);
    }
    return q;
  };
  StreamPlan p = minimum;
  if (opt.bt > 0) {
    p = with_block(static_cast<int>(std::min<int64_t>(opt.bt, deepest)));
  } else {
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
    // 86 s where bt 12 with blocks of 6 took 67, both in 2 sweeps); then the deeper plan.
    const double disk =
        (opt.disk_rate_observed ? 1.0 : 1.2) * 2.0 * static_cast<double>(m.layout.plane_bytes) /
        static_cast<double>(m.shape.plane_points()) / std::max(opt.disk_bytes_per_update, 1e-3);
    const int64_t run = std::max<int64_t>(steps, 1);
    // The compute a sweep's reads and writes take from the threads, in the same units.
    const double io_cpu = opt.io_cpu_updates_per_byte / minimum.threads * 2.0 *
                          static_cast<double>(m.layout.plane_stride) /
                          static_cast<double>(m.shape.plane_points());
    double best = 0, best_compute = 0;
    for (int bt = 1; bt <= deepest; ++bt) {
      const StreamPlan q = with_block(bt);
      if (static_cast<uint64_t>(q.memory_bytes) > opt.mem_budget) continue;
      const double per_step = q.redundancy * relative_compute(q, m.dtype);
      double cost = 0, computed = 0;
      for (int64_t done = 0; done < run; done += bt) {
        const double compute =
            per_step * static_cast<double>(std::min<int64_t>(bt, run - done)) + io_cpu;
        cost += opt.disk_rate_observed
                    ? std::max(compute, disk)
                    : (std::max(compute, disk) + std::max(compute, 2 * disk)) / 2;
        computed += compute;
      }
      const bool cheaper = cost < best * (1 - 1e-9);
      const bool as_cheap = cost <= best * (1 + 1e-9) && computed <= best_compute * (1 + 1e-9);
      if (bt == 1 || cheaper || as_cheap) {
        best = cost;
        best_compute = computed;
        p = q;
      }
    }
  }
  if (static_cast<uint64_t>(p.memory_bytes) > opt.mem_budget) {
    return invalid_argument("--mem " + format_size(opt.mem_budget) + " is below the " +
                            format_size(p.memory_bytes) + " the stream method needs with bt " +
                            std::to_string(p.bt) + " (the minimum, bt 1, is " +
                            format_size(minimum.memory_bytes) + "); raise --mem" +
                            (opt.bt > 0 ? " or lower --bt" : ""));
  }
  p.minimum_bytes = minimum.memory_bytes;
  p.sweeps = (std::max<int64_t>(steps, 0) + p.bt - 1) / p.bt;
  p.compute_factor = relative_compute(p, m.dtype);
  return p;
}

namespace {

SweepRecord new_sweep_record(const Grid& grid, const Scheme& stencil, const Boundary& boundary,
                             int levels, bool flush_subnormals) {
  const Manifest& m = grid.manifest();
  SweepRecord r;
  r.step_from = m.step;
  r.levels = levels;
  r.base_from = m.base;
  r.spare = m.layout.spare_planes;
  r.stencil = stencil.to_json();
  r.boundary = boundary.to_string();
  r.flush_subnormals = flush_subnormals;
  if (boundary.kind == Boundary::Kind::kPeriodic) r.side_file = kSideFileName;
  r.started = utc_now();
  return r;
}

}  // namespace

int64_t spare_planes_needed(const StreamPlan& plan, const Scheme& stencil) {
  // The levels' reach, and room for the writes in flight (two blocks) and one more block
  // ahead of the durable prefix, so that checkpoints rarely hold the sweep up.
  return int64_t{plan.bt} * stencil.radius_z() + 3 * int64_t{plan.block} + 1;
}

Result<StreamStats> advance_stream(Grid& grid, const Scheme& stencil, const Boundary& boundary,
                                   int64_t steps, const StreamPlan& plan,
                                   const StreamOptions& options, const ProgressFn& progress) {
  DG_RETURN_IF_ERROR(stencil.check_dtype(grid.dtype()));
  if (grid.can_grow_spare() && !grid.sweep_record()) {
    DG_RETURN_IF_ERROR(grid.grow_spare(spare_planes_needed(plan, stencil)));
  }
  io::BlockIoOptions io_opt;
  io_opt.backend = options.io;
  io_opt.queue_depth = static_cast<unsigned>(plan.io_buffers);
  io_opt.fault_hook = options.fault_hook;
  auto io = io::make_block_io(io_opt);
  if (!io.ok() && io.status().code() == ErrorCode::kUnsupported &&
      options.io == io::Backend::kUring) {
    io_opt.backend = io::Backend::kThreads;  // reported: stats.backend says which one ran
    io = io::make_block_io(io_opt);
  }
  if (!io.ok()) return io.status();
  StreamStats stats;
  stats.backend = io_opt.backend;
  Status st = dispatch_dtype(grid.dtype(), [&](auto tag) -> Status {
    StreamRun<decltype(tag)> run(grid, stencil, boundary, plan, **io, options.probes,
                                 options.placement);
    DG_RETURN_IF_ERROR(run.allocate());
    while (stats.steps < steps) {
      SweepRecord record;
      if (grid.sweep_record()) {
        record = *grid.sweep_record();  // finish the interrupted sweep first
        if (record.levels > plan.bt || !json_equal(record.stencil, stencil.to_json()) ||
            record.boundary != boundary.to_string() ||
            record.flush_subnormals != plan.flush_subnormals ||
            record.spare != grid.manifest().layout.spare_planes) {
          return invalid_argument("the interrupted sweep of " + grid.dir() +
                                  " needs its own stencil, boundary, subnormal mode and bt " +
                                  std::to_string(record.levels) +
                                  " to finish; resume it with "
                                  "'deepgrid run " +
                                  grid.dir() + " --resume'");
        }
      } else {
        record = new_sweep_record(grid, stencil, boundary,
                                  static_cast<int>(std::min<int64_t>(plan.bt, steps - stats.steps)),
                                  plan.flush_subnormals);
        DG_RETURN_IF_ERROR(grid.save_sweep(record));
      }
      DG_RETURN_IF_ERROR(run.sweep(record, steps - stats.steps, stats));
      stats.steps += record.levels;
      // Asked before the commit, so that what the caller saves of the sweep (receivers'
      // values) is on disk whenever the grid holds the sweep's step.
      const bool go_on = !progress || progress(stats.steps, steps);
      Manifest swept = grid.manifest();
      swept.step += record.levels;
      swept.base = record.base_to(swept.slots());
      DG_RETURN_IF_ERROR(grid.commit(swept));
      if (!go_on) break;
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return stats;
}

}  // namespace deepgrid
