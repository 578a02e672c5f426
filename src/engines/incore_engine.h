// The in-core engine: the grid in memory, advanced by wavefront temporal blocking.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "deepgrid/boundary.h"
#include "deepgrid/probes.h"
#include "deepgrid/progress.h"
#include "engines/padded_grid.h"
#include "kernels/scheme_kernel.h"

namespace deepgrid {

// The deepest pass an engine chooses by itself (bt 0): a run sizes what it holds per pass
// (receivers' values) with it.
inline constexpr int kMaxAutoBt = 64;

struct InCoreOptions {
  int threads = 0;     // 0: all OpenMP threads
  int bt = 0;          // steps per pass over memory; 0: automatic
  int64_t tile_x = 0;  // x-y tile extents of the wavefront; 0: automatic
  int64_t tile_y = 0;
  int64_t cache_bytes = int64_t{3} << 19;  // per-thread working set the tiles are sized for
  bool flush_subnormals = false;           // RunOptions::flush_subnormals
  // An automatic bt may be made shallower so that tiles span the grid's x (plan_wavefront).
  // The stream engine plans its stages both ways and its cost model picks (a shallower stage
  // means another stage: 1280x1280x640 ran no faster for it with 3 MiB working sets, 512-wide
  // planes 1.2x faster with 768 KiB ones; docs/performance/large-planes.md, "Large planes").
  bool shallower_to_span_x = true;
  // Schemes whose time levels can take turns (SchemeKernel::rotation()) do so at bt 1, and with
  // radius 2 or more run at bt 1 where that is automatic, unless tuned_bt says otherwise
  // (plan_wavefront). The stream engine's stages, whose levels do not take turns, and the rates
  // measured for them plan without it.
  bool turn_time_levels = true;
  // The automatic depth of schemes whose time levels can take turns, with radius 2 or more,
  // where it was measured on this machine (tuned_bt, deepgrid/machine.h): 1 turns them, a
  // deeper one blocks in time instead. 0: bt 1, turning.
  int tuned_bt = 0;
  // Tiles of one x range run in y order as chains, each handing its edge rows to the next
  // instead of its neighbour computing them again (WavefrontEdges), where the plan's tiles
  // leave each thread two or more of them (plan_wavefront). Off: every tile computes its
  // whole frame, as the stream engine's stages do.
  bool carry_edges = true;
  // Whether passes store their output with stores that bypass the caches
  // (Wavefront::write_output_bypassing_caches). kAuto: where the grid's two copies are larger
  // than the last-level cache, so that a pass's output has left it before the next pass reads
  // it (docs/performance/incore.md, "Output stored past the caches").
  enum class CacheBypass { kAuto, kOn, kOff };
  CacheBypass output_bypass = CacheBypass::kAuto;
  // Where the two grid copies live: empty, in memory; else in MAP_SHARED mappings of scratch
  // files in this directory, paged by the OS (the mmap method).
  std::string scratch_dir;
  // create() leaves the copies' pages untouched: the caller loads every plane (which faults
  // the loaded copy's pages in) and calls touch_beside_load() beside it, so that the first
  // touch of fresh memory overlaps the disk reads rather than running before them. Otherwise
  // create() faults in both copies with all threads.
  bool touch_while_loading = false;
};

// How the in-core engine splits the work: bt steps per pass; x-y tiles streamed along z.
struct WavefrontPlan {
  int bt = 1;
  int threads = 1;
  int64_t tile_x = 1, tile_y = 1;
  int64_t workspace_bytes = 0;  // per thread (the rings)
  // Tiles run as chains along y (InCoreOptions::carry_edges) of `chain_tiles` tiles or fewer,
  // each thread with edges_bytes of edge rows; 0: each tile on its own.
  int64_t chain_tiles = 0;
  int64_t edges_bytes = 0;
  bool flush_subnormals = false;
  // bt 1 passes write u's new value over u@1 (SchemeKernel::rotation(): the time levels take
  // turns), unless a run's sources add to u@1.
  bool turns = false;
  // Passes store their output past the caches (InCoreOptions::output_bypass).
  bool output_bypasses_caches = false;
};

// Whether the in-core engine's levels of `scheme` take turns at bt 1 (SchemeKernel::rotation():
// the wave equations; not users' kernels).
bool time_levels_turn(const Scheme& scheme);

// The plan for a run of `steps` steps (pure: no allocation).
WavefrontPlan plan_wavefront(const Shape& shape, const Scheme& scheme, size_t value_bytes,
                             int64_t steps, const InCoreOptions& options);

// Points at the grid's ends whose values are not in place when advance() starts (a distributed
// part's halos, still on their way from its neighbours): `below[a]` points at the low end of
// axis a (x, y, z) and `above[a]` at the high end. The first pass computes first the output
// box that reads none of them, then calls `arrive`, which must put them in (load_plane), then
// computes the rest: the wait for them overlaps that work. `arrive` is called once, first when
// x halos are late (cutting x would make the tiles narrow, and slower than the wait saved), or
// when the box is empty or too thin along z (2 * bt * rz planes or fewer) to be worth it. With
// a periodic boundary an axis has late points at both ends or none (as a distributed part's
// halos: the wrap brings each end's next to the other's).
struct LateHalos {
  std::array<int64_t, 3> below{}, above{};
  std::function<void()> arrive;  // empty: every point is in place
};

// The in-core engine: the grid in memory, advanced by wavefront temporal blocking.
//
// Two padded copies of the grid. A pass advances bt steps from one copy into the other: the
// source's ghost frame (bt * r wide) is filled by the boundary rule, then x-y tiles widened by
// bt * r stream along z through bt time levels kept in small per-thread rings, so memory is
// read and written once per bt steps. Results are bitwise those of scheme.h's evaluation
// order, whatever bt, tiles and threads. Planes hold the scheme's components (load_plane and
// store_plane take packed planes of every component). Coefficient fields that the wavefronts
// read from the source copy (lean wavefronts, wavefront.h) are kept equal in both copies and
// not written by passes: what is written from outside (load_plane, plane()) is copied to the
// other copy before a pass reads it. At bt 1, a scheme's time levels u and u@1 take turns
// (SchemeKernel::rotation()): between the passes of one advance() u@1 lies in the other copy's
// u, and the new u goes over it; the last pass stores u@1 as usual.
template <typename T>
class InCoreEngine {
 public:
  // Plans for `steps` steps and allocates; kResource when memory is short.
  static Result<InCoreEngine> create(const Shape& shape, const Scheme& scheme, int64_t steps,
                                     const InCoreOptions& options);
  // Bytes of memory create() would allocate (without the scratch files' mappings).
  static int64_t memory_bytes(const Shape& shape, const Scheme& scheme, int64_t steps,
                              const InCoreOptions& options);
  // Bytes of scratch files create() would make (0 without options.scratch_dir).
  static int64_t scratch_bytes(const Shape& shape, const Scheme& scheme, int64_t steps,
                               const InCoreOptions& options);

  // With InCoreOptions::touch_while_loading: faults in what loading does not write (the copy
  // the first pass writes, the loaded copy's z ghost planes) on the calling thread; may run
  // beside load_plane() (the two touch different memory), before advance().
  void touch_beside_load() {
    grids_[1 - cur_].touch_pages(1);
    grids_[cur_].touch_ghost_planes();
  }

  void load_plane(int64_t z, const T* packed) {
    grids_[cur_].load_plane(z, packed);
    written(z);
  }
  void store_plane(int64_t z, T* packed) const { grids_[cur_].store_plane(z, packed); }
  // The grid's values in place, until the next advance(): point (x, y, z) of component c at
  // plane(z)[c * field_stride() + y * stride() + x]; the non-const form is for writing them.
  T* plane(int64_t z) {
    written(z);
    return grids_[cur_].plane(z);
  }
  const T* plane(int64_t z) const { return grids_[cur_].plane(z); }
  ptrdiff_t stride() const { return grids_[cur_].stride(); }
  ptrdiff_t field_stride() const { return grids_[cur_].field_stride(); }

  // Advances up to `steps` steps (at most the steps planned for), applying `probes`. Returns
  // the steps done: fewer when `progress` asks to stop, which it is asked after each pass.
  // Points outside probes.placement's needed box (a distributed part's halos) are computed
  // only while they can still reach it within `steps` steps, and are stale after.
  int64_t advance(const Boundary& boundary, int64_t steps, const ProgressFn& progress = {},
                  ProbeRun probes = {}, const LateHalos& late = {});

  const WavefrontPlan& plan() const { return plan_; }

 private:
  InCoreEngine(const Scheme& scheme, WavefrontPlan plan);

  void written(int64_t z) {
    if (kept_ != 0) written_[static_cast<size_t>(z)] = 1;
  }
  // Copies the kept components of the planes written since the last copy (of every plane
  // while the copies may differ) from grids_[from] to the other copy.
  void copy_kept(int from);
  // Stores u@1 (`to`) of the current copy from the other copy's u (`from`), where it lies
  // after a pass that left it there.
  void store_turned(int to, int from);
  // Copies component `from` of src's planes into component `to` of dst's, but the planes z
  // where skip(z).
  template <typename Skip>
  void copy_component(const PaddedGrid<T>& src, int from, PaddedGrid<T>& dst, int to,
                      Skip skip) const;

  SchemeKernel<T> kernel_;
  WavefrontPlan plan_;
  PaddedGrid<T> grids_[2];
  int cur_ = 0;
  // Coefficient fields (carried unchanged and aliasable) that passes read from their source
  // copy only and do not write, bit c for component c; whether both copies hold them equal;
  // planes written since the last copy_kept().
  uint64_t kept_ = 0;
  bool kept_equal_ = false;
  std::vector<char> written_;
  std::vector<internal::AlignedBuffer> edges_;  // per thread (WavefrontPlan::edges_bytes)
};

extern template class InCoreEngine<float>;
extern template class InCoreEngine<double>;

}  // namespace deepgrid
