// One sweep of the stream engine (stream_sweep.h): blocks of z-steps through the stages, with
// the level-0 planes converted from the reads and the last level's planes hashed and written.
#include "engines/stream_sweep.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/stopwatch.h"
#include "deepgrid/integrity.h"
#include "engines/subnormals.h"

namespace deepgrid::internal::stream {

using Clock = std::chrono::steady_clock;

template <typename T>
StreamSweep<T>::StreamSweep(Grid& grid, const Scheme& st, const Boundary& b, const StreamPlan& plan,
                            io::BlockIo& io, const ResolvedProbes* probes,
                            const GridPlacement& placement)
    : probes_(probes),
      placement_(placement),
      run_placement_(placement),
      grid_(grid),
      m_(grid.manifest()),
      s_(planes_shape(grid, plan)),
      kernel_(st),
      b_(b),
      plan_(plan),
      rz_(kernel_.rz()),
      frames_(s_, b),
      io_(grid, io, rz_, plan.bands > 0 ? s_.ny : 0, plan.writes_without_coefficients) {}

// The planes a sweep runs on: the grid's, or a band's rows of them.
template <typename T>
Shape StreamSweep<T>::planes_shape(const Grid& grid, const StreamPlan& plan) {
  Shape s = grid.shape();
  if (plan.bands > 0) s.ny = plan.band_height;
  return s;
}

// The band's planes lie at row r0 of the grid (placed where the run's placement puts the grid:
// a distributed part's); their points the sweep must deliver are the band's rows (from the first
// it computes, BandRows::c0) of what the
// run's needed box needs of the sweep: the box widened by the reach of the later sweeps (the
// rest is halo, trimmed as a distributed part's is).
template <typename T>
void StreamSweep<T>::set_band(const Band* band) {
  band_ = band;
  probes_ = band->probes;
  io_.set_band(band->all, band->index);
  const SweepIo::Band& rows = io_.band();
  placement_ = run_placement_;
  if (placement_.is_whole()) placement_.whole = m_.shape;
  const int r[3] = {kernel_.rx(), kernel_.ry(), rz_};
  for (size_t a = 0; a < 3; ++a) {  // (unbounded sides stay far beyond any grid)
    placement_.needed_lo[a] -= band->later_steps * r[a];
    placement_.needed_hi[a] += band->later_steps * r[a];
  }
  placement_.y += rows.r0;
  const int64_t lo = std::max(rows.c0, placement_.needed_lo[1]);
  const int64_t hi = std::min(rows.y1, placement_.needed_hi[1]);
  placement_.needed_lo[1] = lo - rows.r0;
  placement_.needed_hi[1] = std::max(lo, hi) - rows.r0;  // (a band of halo rows needs none)
}

template <typename T>
void StreamSweep<T>::hash_band_rows(const T* values, PlaneHasher& hash) const {
  const SweepIo::Band& rows = io_.band();
  for (int c = 0; c < m_.components(); ++c) {
    hash.update_component(c, values + c * component_stride() + (rows.y0 - rows.r0) * s_.nx,
                          static_cast<size_t>((rows.y1 - rows.y0) * s_.nx) * sizeof(T));
  }
}

// Values from one component of a plane in an I/O buffer to the next.
template <typename T>
int64_t StreamSweep<T>::component_stride() const {
  return static_cast<int64_t>(io_.component_stride() / sizeof(T));
}

template <typename T>
Status StreamSweep<T>::allocate() {
  // A source adds to its component in ring levels, which must then hold it: a plan made
  // without knowing the sources is not one this sweep can run within its memory.
  if ((plan_.aliased & sourced_components(probes_)) != 0) {
    return Status(ErrorCode::kInvalidArgument,
                  "stream engine: the plan leaves a source's component out of its rings "
                  "(planned without the sources: StreamOptions::source_components)");
  }
  DG_RETURN_IF_ERROR(frames_.allocate(plan_, kernel_));
  return io_.allocate(plan_.block, plan_.write_buffers);
}

template <typename T>
Status StreamSweep<T>::sweep(const SweepRecord& record, int64_t reach, StreamStats& stats) {
  record_ = &record;
  reach_ = std::max<int64_t>(reach, record.levels);  // (a larger reach is only less trimmed)
  layout_ = SweepLayout{record.levels,
                        record.done,
                        rz_,
                        s_.nz,
                        b_.kind == Boundary::Kind::kPeriodic,
                        Stages{record.levels, plan_.cache_bt},
                        plan_.coefficients_from_input};
  DG_RETURN_IF_ERROR(io_.begin(record, layout_.read_order()));
  return io_.finish(run_blocks(stats));
}

// The sweep's blocks of z-steps, by the whole team: thread 0 prepares each block (reads in,
// write buffers out), all convert its level-0 planes and run every stage's tiles through it,
// thread 0 writes it. Long: one parallel region, whose barriers pair up across the loop.
template <typename T>
Status StreamSweep<T>::run_blocks(StreamStats& stats) {
  const Stages& stages = layout_.stages;
  frames_.reset(layout_);
  // waves[thread][stage][tile]: each thread's in its own workspace.
  const std::vector<std::vector<std::vector<Wave>>> waves = make_all_waves();
  const int64_t first = layout_.level_begin(0);
  const int64_t end = s_.nz + int64_t{layout_.levels} * rz_;
  // Threads take a stage's tiles one at a time, or whole chains of them (tiles() orders them).
  const std::vector<int64_t> begins = item_begins();
  const auto items = static_cast<int64_t>(begins.size()) - 1;
  Status shared;
#pragma omp parallel num_threads(plan_.threads)
  {
    const SubnormalsFlushed flushed(plan_.flush_subnormals);
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
      for (int j = 0; j < stages.size(); ++j) {
#pragma omp master
        {
          if (shared.ok()) shared = frames_.turn_to_stage(j, i0, i1);
          if (shared.ok() && j + 1 == stages.size()) {
            const double waited = stats.io_wait_seconds;  // (not computing)
            shared = claim_output_buffers(i0, i1, stats);
            t0 += std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(stats.io_wait_seconds - waited));
          }
        }
#pragma omp barrier
        if (!shared.ok()) break;
        const int64_t lag = int64_t{stages.first(j)} * rz_;
        const std::vector<Wave>& stage =
            waves[static_cast<size_t>(omp_get_thread_num())][static_cast<size_t>(j)];
        if (plan_.chain_tiles > 0) {
          frames_.edges(omp_get_thread_num())
              .start_at(chain_edges_first(stages.count(j), rz_, i0 - lag));
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < items; ++item) {
          for (int64_t t = begins[item]; t < begins[item + 1]; ++t) {
            const Wave& wave = stage[static_cast<size_t>(t)];
            WavefrontCarry<T>& carry = frames_.carry(j, t);
            wave.restore(carry, i0 - lag);
            for (int64_t i = i0; i < i1; ++i) wave.step(i - lag);
            wave.save(carry, i1 - lag);
          }
        }
        if (j + 1 < stages.size()) frames_.fill_stage_output_ghosts(j, i0, i1);
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
  // (A band's last writes complete while the next band computes.)
  if (band_ != nullptr && !io_.last_band()) return Status::Ok();
  return io_.complete_writes(stats);
}

// Every thread's wavefronts of every stage's tiles, each in the thread's own workspace.
template <typename T>
std::vector<std::vector<std::vector<Wavefront<T>>>> StreamSweep<T>::make_all_waves() {
  std::vector<std::vector<std::vector<Wave>>> waves(static_cast<size_t>(plan_.threads));
  for (size_t t = 0; t < waves.size(); ++t) {
    waves[t].resize(static_cast<size_t>(layout_.stages.size()));
    for (int j = 0; j < layout_.stages.size(); ++j) {
      make_waves(j, static_cast<int>(t), waves[t][static_cast<size_t>(j)]);
    }
  }
  return waves;
}

template <typename T>
void StreamSweep<T>::make_waves(int j, int thread, std::vector<Wave>& out) {
  WavefrontWorkspace<T>& ws = frames_.workspace(thread);
  const Stages& stages = layout_.stages;
  const std::vector<Tile> all = tiles();
  const std::vector<int64_t> begins = item_begins();
  const int n = stages.count(j);
  const bool last = j + 1 == stages.size();
  const int64_t from = layout_.from - int64_t{layout_.levels - stages.first(j) - n} * rz_;
  const ProbeRun probes{probes_, record_->step_from + stages.first(j), placement_};
  const WavefrontTrim trim = trim_from_level(stages.first(j));
  FramePool<T>& in = frames_.pool(j);
  FramePool<T>& window = frames_.window();
  const int first_coefficient = m_.components() - plan_.window_components;
  // Stages but the last leave the window's coefficients out of their output (the next stage's
  // frames have no room for them), the last too where the write buffers have none.
  const uint64_t windowed =
      plan_.window_components > 0 ? ~uint64_t{0} << std::min(first_coefficient, 63) : uint64_t{0};
  for (size_t t = 0; t < all.size(); ++t) {
    const Tile tile = all[t];
    const int64_t gx = tile.x0 - int64_t{n} * kernel_.rx();
    const int64_t gy = tile.y0 - int64_t{n} * kernel_.ry();
    auto level0 = [&in, gx, gy](int64_t z) -> const T* { return in.origin(z, gx, gy); };
    if (last) {
      out.emplace_back(
          kernel_, b_, s_, n, tile, ws, level0, in.strides(),
          [this, tile](int64_t z) { return output_plane(z) + tile.y0 * s_.nx + tile.x0; },
          typename Wave::PlaneStrides{s_.nx, component_stride()}, 0, from, probes, trim,
          plan_.writes_without_coefficients ? windowed : 0);
    } else {
      FramePool<T>& next = frames_.pool(j + 1);
      out.emplace_back(
          kernel_, b_, s_, n, tile, ws, level0, in.strides(),
          [&next, tile](int64_t z) {
            return next.plane(z) + tile.y0 * next.strides().stride + tile.x0;
          },
          next.strides(), layout_.extension(j), from, probes, trim, windowed);
    }
    if (plan_.chain_tiles > 0 && n >= 2) {
      const auto at = static_cast<int64_t>(t);
      const auto next = std::upper_bound(begins.begin(), begins.end(), at);  // (t's chain's end)
      const int64_t first = *(next - 1), end = *next;
      out.back().chain(
          {&frames_.edges(thread), at > first, at + 1 < end, all[static_cast<size_t>(end - 1)].y1});
    }
    if (plan_.window_components > 0) {
      out.back().read_coefficients_from(
          [&window, gx, gy](int64_t z) -> const T* { return window.origin(z, gx, gy); },
          window.strides(), first_coefficient);
    }
  }
}

// The trim of a wavefront whose level 0 is the sweep's level k.
template <typename T>
WavefrontTrim StreamSweep<T>::trim_from_level(int k) const {
  return {placement_.needed_lo, placement_.needed_hi, reach_ - k};
}

// Whether the trim leaves points of output plane z that the sweep writes uncomputed.
template <typename T>
bool StreamSweep<T>::output_trimmed(int64_t z) const {
  const WavefrontTrim trim = trim_from_level(0);
  const int L = layout_.levels, rx = kernel_.rx(), ry = kernel_.ry();
  int64_t y0 = 0, y1 = s_.ny;  // the rows written: a band's own, from the first it computes
  if (band_ != nullptr) {
    y0 = io_.band().c0 - io_.band().r0;
    y1 = io_.band().y1 - io_.band().r0;
  }
  const bool x_cut = trim.first(0, L, rx) > 0 || trim.end(0, L, rx) < s_.nx;
  const bool y_cut = trim.first(1, L, ry) > y0 || trim.end(1, L, ry) < y1;
  return x_cut || y_cut || z < trim.first(2, L, rz_) || z >= trim.end(2, L, rz_);
}

template <typename T>
std::vector<WavefrontFrame> StreamSweep<T>::tiles() const {
  std::vector<Tile> out;
  for (int64_t y = 0; y < s_.ny; y += plan_.tile_y) {
    for (int64_t x = 0; x < s_.nx; x += plan_.tile_x) {
      out.push_back({x, std::min(s_.nx, x + plan_.tile_x), y, std::min(s_.ny, y + plan_.tile_y)});
    }
  }
  // Chains (StreamPlan::chain_tiles): each x range's tiles in y order, one range after the
  // other (item_begins() cuts them into chains).
  if (plan_.chain_tiles > 0) {
    std::stable_sort(out.begin(), out.end(), [](const Tile& a, const Tile& b) {
      return a.x0 != b.x0 ? a.x0 < b.x0 : a.y0 < b.y0;
    });
    return out;
  }
  // Else the order the threads take them in (dynamic, one at a time): the larger first, and of
  // equal ones those away from the planes' y ends, whose halo levels are trimmed, first, so
  // that the tiles left when a stage ends are its smallest and the threads finish together.
  const auto at_end = [&](const Tile& t) { return t.y0 == 0 || t.y1 == s_.ny; };
  std::stable_sort(out.begin(), out.end(), [&](const Tile& a, const Tile& b) {
    const int64_t pa = (a.x1 - a.x0) * (a.y1 - a.y0), pb = (b.x1 - b.x0) * (b.y1 - b.y0);
    return pa != pb ? pa > pb : at_end(a) < at_end(b);
  });
  return out;
}

// Where each of the items the threads take begins in tiles()'s order, and the end: every tile,
// or where the plan chains them, each x range's tiles cut into chains of at most chain_tiles
// (wavefront_chain_cuts, as the in-core engine's).
template <typename T>
std::vector<int64_t> StreamSweep<T>::item_begins() const {
  std::vector<int64_t> out;
  if (plan_.chain_tiles <= 0) {
    for (int64_t t = 0; t <= plan_.tiles; ++t) out.push_back(t);
    return out;
  }
  const int64_t tiles_y = (s_.ny + plan_.tile_y - 1) / plan_.tile_y;
  const std::vector<int64_t> cuts = wavefront_chain_cuts(tiles_y, plan_.chain_tiles);
  for (int64_t x = 0; x < plan_.tiles / tiles_y; ++x) {
    for (size_t c = 0; c + 1 < cuts.size(); ++c) out.push_back(x * tiles_y + cuts[c]);
  }
  out.push_back(plan_.tiles);
  return out;
}

// The buffer output plane z goes to (assigned by claim_output_buffers).
template <typename T>
T* StreamSweep<T>::output_plane(int64_t z) const {
  const int b = block_out_[static_cast<size_t>(z - block_z0_)];
  return io_.write_buffer(static_cast<size_t>(b)).template data<T>();
}

// Before steps [i0, i1): a frame for each of their level-0 planes (converted by all threads
// next); their output planes' write buffers come before the last stage (claim_output_buffers).
template <typename T>
Status StreamSweep<T>::prepare_block(int64_t i0, int64_t i1, StreamStats& stats) {
  const int64_t nz = s_.nz;
  conversions_.clear();
  for (int64_t i = i0; i < i1; ++i) {
    if (b_.kind == Boundary::Kind::kPeriodic || i < nz) {
      DG_RETURN_IF_ERROR(claim_level0(((i % nz) + nz) % nz, stats));
    }
  }
  conversion_status_.assign(conversions_.size(), Status::Ok());
  block_z0_ = layout_.stage_output_plane(layout_.stages.size() - 1, i0);
  block_out_.assign(static_cast<size_t>(i1 - i0), -1);
  block_hash_.clear();  // (a band's planes are hashed into the band's checksums)
  for (int64_t i = i0; i < i1 && band_ == nullptr; ++i)
    block_hash_.emplace_back(m_.plane_hashing());
  return Status::Ok();
}

// Before the last stage of steps [i0, i1): a write buffer per output plane, waiting for the
// previous block's writes where they still hold them (with write buffers of one block, they had
// the other stages' compute to complete).
template <typename T>
Status StreamSweep<T>::claim_output_buffers(int64_t i0, int64_t i1, StreamStats& stats) {
  const int last = layout_.stages.size() - 1;
  const int64_t nz = s_.nz;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t z = layout_.stage_output_plane(last, i);
    if (z < layout_.from || z >= nz) continue;
    DG_ASSIGN_OR_RETURN(const size_t b, io_.claim_write_buffer(stats));  // until finish_block
    // What the trim leaves out is written as zeros, not as what the buffer held before
    // (which depends on the order writes complete in): the files' bytes stay reproducible.
    if (output_trimmed(z)) std::memset(io_.write_buffer(b).bytes, 0, io_.write_buffer_bytes());
    block_out_[static_cast<size_t>(i - i0)] = static_cast<int>(b);
  }
  return Status::Ok();
}

// Claims a frame for level-0 plane p unless it has one, once its read has arrived; the
// conversion into the frame is left to convert_level0_planes().
template <typename T>
Status StreamSweep<T>::claim_level0(int64_t p, StreamStats& stats) {
  FramePool<T>& level0 = frames_.pool(0);
  if (level0.has(p)) return Status::Ok();
  DG_ASSIGN_OR_RETURN(const size_t b, io_.await_read(p, stats));
  DG_RETURN_IF_ERROR(level0.acquire(p));
  if (plan_.window_components > 0) DG_RETURN_IF_ERROR(frames_.window().acquire(p));
  conversions_.push_back(b);
  return Status::Ok();
}

// Level-0 planes from the disk layout into their frames, ghost frames filled by the
// boundary rule, each checked against its checksum as it is copied (verified reads of whole
// planes) or, in band mode, its band's rows hashed beside the copies. Called by every thread
// of the team; recycle_read_buffers() reports a mismatch.
template <typename T>
void StreamSweep<T>::convert_level0_planes() {
  if (band_ != nullptr || !grid_.verifying()) {
    convert_level0_rows(band_ != nullptr ? band_->read_hashes : nullptr);
    return;
  }
#pragma omp for schedule(static)
  for (size_t c = 0; c < conversions_.size(); ++c) {
    const SweepIo::Buffer& read = io_.read_buffer(conversions_[c]);
    PlaneHasher hash(m_.plane_hashing());
    load_level0(read, hash);
    conversion_status_[c] = grid_.verify_plane_hash(read.plane, hash.digest());
  }
}

// convert_level0_planes in parts of rows, which the threads share evenly (whole planes did
// not: blocks of 3 split 2 to 1 between two threads, and the copies stream memory, 5% of a
// wave8 run's CPU time at 512x512 planes), then the ghost frames. A band's rows are hashed
// into `band_hashes` (where given) plane by plane, one thread each, first: the threads take
// the copies as they come free, so those even out what the hashes leave uneven.
template <typename T>
void StreamSweep<T>::convert_level0_rows(std::vector<PlaneHasher>* band_hashes) {
  const int64_t parts = std::min<int64_t>(s_.ny, 4 * int64_t{plan_.threads});
  const auto planes = static_cast<int64_t>(conversions_.size());
  const int64_t hashes = band_hashes != nullptr ? planes : 0;
  FramePool<T>& level0 = frames_.pool(0);
  FramePool<T>& window = frames_.window();
  const int first = m_.components() - plan_.window_components;
#pragma omp for schedule(dynamic)
  for (int64_t u = 0; u < hashes + planes * parts; ++u) {
    if (u < hashes) {
      const SweepIo::Buffer& read = io_.read_buffer(conversions_[static_cast<size_t>(u)]);
      hash_band_rows(read.data<T>(), (*band_hashes)[static_cast<size_t>(read.plane)]);
      continue;
    }
    const int64_t copy = u - hashes;
    const SweepIo::Buffer& read = io_.read_buffer(conversions_[static_cast<size_t>(copy / parts)]);
    const int64_t part = copy % parts;
    const int64_t y0 = s_.ny * part / parts, y1 = s_.ny * (part + 1) / parts;
    level0.load_rows(read.plane, read.data<T>(), component_stride(), y0, y1);
    if (plan_.window_components > 0) {
      window.load_rows(read.plane, read.data<T>() + io_.component_at(first) / sizeof(T),
                       component_stride(), y0, y1);
    }
  }
  if (b_.kind == Boundary::Kind::kDirichlet) return;  // (their ghosts are fixed)
#pragma omp for schedule(static)
  for (size_t c = 0; c < conversions_.size(); ++c) {
    fill_level0_ghosts(io_.read_buffer(conversions_[c]).plane);
  }
}

// The ghost frames of level-0 plane z and of its coefficients in the window.
template <typename T>
void StreamSweep<T>::fill_level0_ghosts(int64_t z) {
  frames_.pool(0).fill_ghosts(z);
  if (plan_.window_components > 0) frames_.window().fill_ghosts(z);
}

// A read plane into its level-0 frame and, where the plan has a window, its coefficients into
// the window (hashed in the plane's order: the frame's components, then the window's), with
// their ghost frames filled.
template <typename T>
void StreamSweep<T>::load_level0(const SweepIo::Buffer& read, PlaneHasher& hash) {
  FramePool<T>& level0 = frames_.pool(0);
  level0.load(read.plane, read.data<T>(), component_stride(), &hash);
  if (plan_.window_components > 0) {
    const int first = m_.components() - plan_.window_components;
    frames_.window().load(read.plane, read.data<T>() + io_.component_at(first) / sizeof(T),
                          component_stride(), &hash, first);
  }
  fill_level0_ghosts(read.plane);
}

// After the conversions: their read buffers take the next reads.
template <typename T>
Status StreamSweep<T>::recycle_read_buffers() {
  for (const Status& st : conversion_status_) DG_RETURN_IF_ERROR(st);
  return io_.recycle_reads(conversions_);
}

// The checksums of the planes the block completes, for finish_block to record, in parts the
// threads share: each plane's components apart where the grid hashes them apart (whole planes
// split 2 to 1 between two threads in blocks of 3). Called by every thread of the team.
template <typename T>
void StreamSweep<T>::hash_block_outputs(int64_t i0, int64_t i1) {
  const int parts = output_hash_parts();
  const int64_t units = (i1 - i0) * parts;
#pragma omp for schedule(static)
  for (int64_t u = 0; u < units; ++u) {
    const size_t k = static_cast<size_t>(u / parts);
    const int b = block_out_[k];
    if (b < 0) continue;
    const T* out = io_.write_buffer(static_cast<size_t>(b)).template data<T>();
    const int64_t z = block_z0_ + static_cast<int64_t>(k);
    if (band_ != nullptr) {
      hash_band_rows(out, (*band_->write_hashes)[static_cast<size_t>(z)]);
    } else {
      hash_output(out, z, parts == 1 ? -1 : static_cast<int>(u % parts), block_hash_[k]);
    }
  }
}

// The parts hash_block_outputs hashes each plane in: its components where the grid hashes
// them apart (PlaneHasher's states, one per component, take them on different threads at
// once), else the whole plane (a band's rows: one running hash per plane).
template <typename T>
int StreamSweep<T>::output_hash_parts() const {
  const PlaneHashing h = m_.plane_hashing();
  return band_ == nullptr && h.by_component && h.components > 1 ? h.components : 1;
}

// Component c (-1: every component, in order) of output plane z in write buffer `out` into its
// checksum: the buffer's components and, where the write buffers leave the coefficients out,
// the window's plane z of them after those.
template <typename T>
void StreamSweep<T>::hash_output(const T* out, int64_t z, int c, PlaneHasher& hash) {
  const int n = m_.components();
  const int first = plan_.writes_without_coefficients ? n - plan_.window_components : n;
  const size_t bytes = static_cast<size_t>(s_.plane_points()) * sizeof(T);
  const int from = c < 0 ? 0 : c, to = c < 0 ? n : c + 1;
  for (int k = from; k < to; ++k) {
    if (k < first) {
      hash.update_component(k, out + k * component_stride(), bytes);
    } else {
      frames_.window().hash(z, k - first, hash, first);
    }
  }
}

// After steps [i0, i1): write the finished planes, free the last stage's input planes it has
// done with, read further ahead.
template <typename T>
Status StreamSweep<T>::finish_block(int64_t i0, int64_t i1, StreamStats& stats) {
  const int last = layout_.stages.size() - 1;
  for (int64_t i = i0; i < i1; ++i) {
    const int b = block_out_[static_cast<size_t>(i - i0)];
    if (b >= 0) {
      DG_RETURN_IF_ERROR(io_.write_plane(
          static_cast<size_t>(b), layout_.stage_output_plane(last, i),
          band_ != nullptr ? 0 : block_hash_[static_cast<size_t>(i - i0)].digest(), stats));
    }
  }
  frames_.release_stage_inputs(last, i0, i1);
  if (plan_.window_components > 0) frames_.release_window(i0, i1);
  return io_.read_ahead();  // the block's writes and the next reads in one system call
}

template class StreamSweep<float>;
template class StreamSweep<double>;

}  // namespace deepgrid::internal::stream
