// internal: the memory a stream sweep's stages run in, allocated once per run.
//
// Full x-y planes of level 0 and of the levels between stages live in frames of one store
// (FrameStore), keyed by z per level (FramePool). The pools share the store: once stage j has
// run a block, its input planes but those it keeps for the next block (kept_input_planes) hold
// stage j + 2's output, so memory holds two stages' planes of a block whatever the depth
// (plan.frames counts them). Inside a stage, each thread advances tiles in its own rings
// (WavefrontWorkspace), and every (stage, tile) keeps the planes it carries from one block to
// the next (WavefrontCarry); both hold only the components the plan keeps in rings
// (StreamPlan::aliased: a lean stage reads the others where they lie). Where the plan has a
// window (StreamPlan::window_components), the coefficient fields are not in the frames: every
// stage reads them from one pool of their own, keyed by z as level 0, whose planes come with
// the reads and go once the sweep's last level has read them.
// StageFrames owns all of it and hands frames to the stages as they take turns.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/aligned_buffer.h"
#include "deepgrid/boundary.h"
#include "deepgrid/integrity.h"
#include "deepgrid/status.h"
#include "engines/padded_grid.h"
#include "engines/stream_engine.h"
#include "engines/stream_stages.h"
#include "engines/wavefront.h"

namespace deepgrid::internal::stream {

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
  // Copies packed plane values (components `component_stride` values apart) into frame z
  // (hashing them into `hash` if given, as the plane's components `first_component` on).
  void load(int64_t z, const T* packed, int64_t component_stride, PlaneHasher* hash,
            int first_component = 0) {
    store_->frames().load_plane(slot(z), packed, hash, component_stride, first_component);
  }
  // load() of rows [y0, y1) alone, unhashed: threads may load different rows at once.
  void load_rows(int64_t z, const T* packed, int64_t component_stride, int64_t y0, int64_t y1) {
    store_->frames().load_rows(slot(z), packed, y0, y1, nullptr, component_stride);
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

  typename Wavefront<T>::PlaneStrides strides() const {
    return {store_->frames().stride(), store_->frames().field_stride()};
  }

  // Hashes component c of plane z's interior (z in [0, nz)) into `hash` as the plane's
  // component `first_component + c`, row by row: what a packed plane of it would hash to.
  void hash(int64_t z, int c, PlaneHasher& hash, int first_component) const {
    const PaddedGrid<T>& frames = store_->frames();
    const T* p = origin(z, 0, 0) + c * frames.field_stride();
    const Shape& s = frames.shape();
    for (int64_t y = 0; y < s.ny; ++y) {
      hash.update_component(first_component + c, p + y * frames.stride(),
                            static_cast<size_t>(s.nx) * sizeof(T));
    }
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

// Everything the stages hold in memory: the frame store and its pools (pool j: stage j's input
// level), the dirichlet plane beyond z's ends, each thread's rings and each (stage, tile)'s
// carried planes. reset() starts a sweep; turn_to_stage() and release_stage_inputs() move the
// frames between the stages as they take turns on a block of z-steps.
template <typename T>
class StageFrames {
 public:
  StageFrames(const Shape& s, const Boundary& b) : s_(s), b_(b) {}

  // All of the plan's memory but its I/O buffers (kResource when it cannot be had).
  Status allocate(const StreamPlan& plan, const SchemeKernel<T>& kernel) {
    const Halo frame{plan.cache_bt * kernel.rx(), plan.cache_bt * kernel.ry(), 0};
    const int n = kernel.components();
    const int frame_n = n - plan.window_components;  // (the window holds the rest)
    const int rz = kernel.rz();
    tiles_ = plan.tiles;
    pools_.resize(static_cast<size_t>(plan.stages));
    DG_RETURN_IF_ERROR(store_.allocate(plan.frames, s_, frame, frame_n, b_));
    if (plan.window_components > 0) {
      DG_RETURN_IF_ERROR(
          window_store_.allocate(plan.window_frames, s_, frame, plan.window_components, b_));
    }
    if (b_.kind == Boundary::Kind::kDirichlet) {
      DG_ASSIGN_OR_RETURN(constant_, PaddedGrid<T>::allocate({s_.nx, s_.ny, 1}, frame, frame_n));
      std::vector<T> v(static_cast<size_t>(s_.plane_points() * frame_n), static_cast<T>(b_.value));
      constant_.load_plane(0, v.data());
      constant_.fill_ghosts(b_, 1);
    }
    const int64_t frame_h = plan.tile_y + 2 * int64_t{plan.cache_bt} * kernel.ry();
    for (int t = 0; t < plan.threads; ++t) {
      ws_.push_back(std::make_unique<WavefrontWorkspace<T>>(
          plan.cache_bt, rz, kernel.ry(), plan.tile_x + 2 * int64_t{plan.cache_bt} * kernel.rx(),
          frame_h, static_cast<T>(b_.value), n, plan.aliased));
    }
    const int ring_n = ring_components(n, plan.aliased);
    const int64_t carry_values = WavefrontCarry<T>::bytes(plan.cache_bt, rz, kernel.ry(),
                                                          ws_.front()->stride(), frame_h, ring_n) /
                                 static_cast<int64_t>(sizeof(T));
    carry_arena_ = AlignedBuffer::on_huge_pages(
        static_cast<size_t>(plan.stages * plan.tiles * carry_values) * sizeof(T));
    for (int64_t c = 0; c < plan.stages * plan.tiles && carry_arena_.ok(); ++c) {
      carries_.emplace_back(plan.cache_bt, rz, kernel.ry(), ws_.front()->stride(), frame_h, ring_n,
                            carry_arena_.data<T>() + c * carry_values);
    }
    if (plan.chain_tiles > 0) {
      for (int t = 0; t < plan.threads; ++t) {
        edges_memory_.emplace_back(static_cast<size_t>(plan.edges_bytes));
        edges_.emplace_back(kernel.ry(), ws_.front()->stride(), ring_n, 0,
                            chain_edge_planes(plan.cache_bt, rz, plan.block),
                            edges_memory_.back().template data<T>());
      }
    }
    bool ok = true;
    for (const auto& w : ws_) ok = ok && w->ok();
    for (const auto& e : edges_memory_) ok = ok && e.ok();
    ok = ok && carry_arena_.ok();
    if (!ok) return Status(ErrorCode::kResource, "out of memory for the stream engine's buffers");
    return Status::Ok();
  }

  // A new sweep: every frame free, each pool keyed for its level's z range.
  void reset(const SweepLayout& layout) {
    layout_ = layout;
    store_.reset();
    pools_[0].reset(&store_, s_, 0, s_.nz, layout.periodic, b_, &constant_);
    window_store_.reset();  // (keyed as level 0; its planes are read inside the grid only)
    window_.reset(&window_store_, s_, 0, s_.nz, layout.periodic, b_, nullptr);
    for (int j = 1; j < layout.stages.size(); ++j) {
      const int64_t e = layout.extension(j - 1);
      pools_[static_cast<size_t>(j)].reset(&store_, s_, -e, s_.nz + e, false, b_, &constant_);
    }
  }

  // Before stage j runs steps [i0, i1): the planes stage j - 1 has done with go back to the
  // store, and stage j's output planes get frames (from them: stages take turns in memory).
  Status turn_to_stage(int j, int64_t i0, int64_t i1) {
    if (j > 0) release_stage_inputs(j - 1, i0, i1);
    if (j + 1 == layout_.stages.size()) return Status::Ok();
    FramePool<T>& next = pools_[static_cast<size_t>(j + 1)];
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t z = layout_.stage_output_plane(j, i);
      if (layout_.stage_output_in_range(j, z)) DG_RETURN_IF_ERROR(next.acquire(z));
    }
    return Status::Ok();
  }

  // After stage j's steps [i0, i1): its input plane q is done with after its step q + the
  // planes it keeps (kept_input_planes), except level 0's pinned planes.
  void release_stage_inputs(int j, int64_t i0, int64_t i1) {
    const int rz = layout_.rz;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t q = i - layout_.kept_input_planes(j) - int64_t{layout_.stages.first(j)} * rz;
      if (j > 0 || !is_pinned(b_, layout_.levels, rz, s_.nz, q))
        pools_[static_cast<size_t>(j)].release(q);
    }
  }

  // After stage j's part of steps [i0, i1): the ghost frames of the planes it completed, for
  // the next stage to read. Called by every thread of the team (none wait for the others where
  // the ghosts are fixed).
  void fill_stage_output_ghosts(int j, int64_t i0, int64_t i1) {
    if (store_.ghosts_fixed()) return;
    FramePool<T>& next = pools_[static_cast<size_t>(j + 1)];
#pragma omp for schedule(static)
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t z = layout_.stage_output_plane(j, i);
      if (layout_.stage_output_in_range(j, z)) next.fill_ghosts(z);
    }
  }

  // Stage j's input level (0: the level read from disk).
  FramePool<T>& pool(int j) { return pools_[static_cast<size_t>(j)]; }
  // The coefficients' window (StreamPlan::window_components), keyed by z as level 0.
  FramePool<T>& window() { return window_; }
  // After global steps [i0, i1): the coefficients of the planes the sweep's last level has
  // read for the last time go, but the pinned ones.
  void release_window(int64_t i0, int64_t i1) {
    const int64_t reach = int64_t{layout_.levels} * layout_.rz;
    for (int64_t q = i0 - reach; q < i1 - reach; ++q) {
      if (!is_pinned(b_, layout_.levels, layout_.rz, s_.nz, q)) window_.release(q);
    }
  }
  // Thread t's rings.
  WavefrontWorkspace<T>& workspace(int t) { return *ws_[static_cast<size_t>(t)]; }
  // Thread t's edge rows, which its chains of tiles hand on (StreamPlan::chain_tiles).
  WavefrontEdges<T>& edges(int t) { return edges_[static_cast<size_t>(t)]; }
  // What (stage j, tile t) carries from one block to the next.
  WavefrontCarry<T>& carry(int j, int64_t t) {
    return carries_[static_cast<size_t>(j * tiles_ + t)];
  }

 private:
  const Shape s_;
  const Boundary b_;
  SweepLayout layout_;
  int64_t tiles_ = 0;
  FrameStore<T> store_;                                     // the frames of all pools
  std::vector<FramePool<T>> pools_;                         // stage j's input level
  FrameStore<T> window_store_;                              // the window's frames, if any
  FramePool<T> window_;                                     // the coefficients' window
  PaddedGrid<T> constant_;                                  // dirichlet: the plane beyond z's ends
  std::vector<std::unique_ptr<WavefrontWorkspace<T>>> ws_;  // per thread
  std::vector<WavefrontCarry<T>> carries_;                  // stage-major, per tile
  AlignedBuffer carry_arena_;                               // the carries' memory, on huge pages
  std::vector<AlignedBuffer> edges_memory_;                 // per thread, where chained
  std::vector<WavefrontEdges<T>> edges_;                    // per thread, in edges_memory_
};

}  // namespace deepgrid::internal::stream
