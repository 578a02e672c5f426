// internal: where the levels and stages of a stream sweep lie along z. The plan counts frames
// with these rules (stream_plan.cc), the sweep runs by them (stream_sweep.cc), so both agree on
// which planes exist when.
//
// Global step i of a sweep of L levels makes level-0 plane i available and computes plane
// i - k rz of each level k; stage j (levels [first(j), first(j) + count(j))) runs its own step
// i - first(j) rz, so its input level is complete when it runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "deepgrid/boundary.h"

namespace deepgrid::internal::stream {

// Level-0 planes kept for a whole sweep: periodic z reads bt * rz planes past each end, which
// are the first and last planes of the grid as they were before the sweep overwrote them.
inline int64_t pinned_planes(const Boundary& b, int bt, int rz, int64_t nz) {
  return b.kind == Boundary::Kind::kPeriodic ? std::min(nz, 2 * int64_t{bt} * rz) : 0;
}

inline bool is_pinned(const Boundary& b, int bt, int rz, int64_t nz, int64_t p) {
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

// Planes of each inner level (1 to count - 1) that a stage's chains of tiles hand on within a
// block of `block` steps (StreamPlan::chain_tiles): step i computes level k's plane i - k rz, so
// a block's planes of levels 1 to cache_bt - 1 span block + (cache_bt - 2) rz planes, from its
// first step's plane of the deepest inner level (chain_edges_first).
inline int64_t chain_edge_planes(int cache_bt, int rz, int block) {
  return block + int64_t{std::max(0, cache_bt - 2)} * rz;
}
// The first of them, for a stage of `count` levels whose block starts at its own step i0.
inline int64_t chain_edges_first(int count, int rz, int64_t i0) {
  return i0 - int64_t{count - 1} * rz;
}

// Planes of stage j's input level that stay in memory from one block to the next (the rest
// are released after each step): the 2 rz its first level reads again, or, where its levels
// read a coefficient field from the input (a lean stage: wavefront.h), down to the plane its
// last level computes next.
inline int64_t kept_input_planes(const Stages& stages, int j, int rz,
                                 bool coefficients_from_input) {
  return int64_t{coefficients_from_input ? std::max(2, stages.count(j)) : 2} * rz;
}

// One sweep's z geometry: `levels` steps from output plane `from` on (a resumed sweep's
// record.done; 0 for a new sweep) of a grid `nz` planes deep, by a stencil of z radius `rz`.
struct SweepLayout {
  int levels = 1;
  int64_t from = 0;
  int rz = 0;
  int64_t nz = 0;
  bool periodic = false;
  Stages stages{1, 1};
  bool coefficients_from_input = false;  // StreamPlan::coefficients_from_input

  int64_t kept_input_planes(int j) const {
    return stream::kept_input_planes(stages, j, rz, coefficients_from_input);
  }

  // Planes past each z end that the level after stage j covers (periodic: computed there).
  int64_t extension(int j) const {
    return periodic ? int64_t{levels - stages.first(j) - stages.count(j)} * rz : 0;
  }

  // The first plane of level k the sweep computes (level 0: reads): what the output from plane
  // `from` on needs; below 0 only for periodic levels, which extend past the ends.
  int64_t level_begin(int k) const {
    const int64_t begin = from - int64_t{levels - k} * rz;
    return periodic ? begin : std::max<int64_t>(0, begin);
  }

  // Stage j's output plane at global step i, and whether the stage computes it.
  int64_t stage_output_plane(int j, int64_t i) const {
    return i - int64_t{stages.first(j) + stages.count(j)} * rz;
  }
  bool stage_output_in_range(int j, int64_t z) const {
    return z >= level_begin(stages.first(j) + stages.count(j)) && z < nz + extension(j);
  }

  // Reads in the order planes are first needed (periodic sweeps start with the last planes
  // and end with the first ones), each plane once.
  std::vector<int64_t> read_order() const {
    std::vector<int64_t> order;
    std::vector<bool> seen(static_cast<size_t>(nz), false);
    const int64_t end = periodic ? nz + int64_t{levels} * rz : nz;
    for (int64_t i = level_begin(0); i < end; ++i) {
      const int64_t p = ((i % nz) + nz) % nz;
      if (!seen[static_cast<size_t>(p)]) order.push_back(p);
      seen[static_cast<size_t>(p)] = true;
    }
    return order;
  }
};

}  // namespace deepgrid::internal::stream
