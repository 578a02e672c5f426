// internal: one in-place sweep of the stream engine, advancing the grid bt levels in a single
// pass over the disk (defined in stream_sweep.cc for float and double).
//
// A sweep of L levels runs as stages of at most cache_bt levels (two-level blocking: the disk
// sees one read and one write per L steps, the cache one pass per cache_bt steps). Stage j
// reads its level from pool j - level 0 converted from disk reads, or the full planes stage
// j - 1 wrote - and writes its last level into pool j + 1 or, for the last stage, into write
// buffers (stream_frames.h). Global step i is stage j's step i - first(j) rz (stream_stages.h).
// Blocks of z-steps: thread 0 makes the block's planes ready, all threads advance every
// stage's tiles through the block stage by stage, thread 0 writes and reads further
// (stream_io.h). The sweep writes in place: new planes go behind the old ones within the
// window the durable prefix allows, so a crash at any moment leaves a sweep that the record
// (resume.h) lets a later call finish from its `done` plane.
//
// In band mode (stream_bands.h) the sweep runs on a band's planes, rows [r0, r0 + height) of the
// grid's, placed there in the grid (GridPlacement) with the band's own rows as the needed box,
// reads them through the SweepIo's band and writes the band's rows; it hashes the band's rows
// of every plane it reads and writes into the band's running checksums, which the caller
// compares and records once every band has run.
#pragma once

#include <cstdint>
#include <vector>

#include "deepgrid/boundary.h"
#include "deepgrid/probes.h"
#include "deepgrid/resume.h"
#include "deepgrid/status.h"
#include "deepgrid/store.h"
#include "engines/stream_engine.h"
#include "engines/stream_frames.h"
#include "engines/stream_io.h"
#include "engines/stream_stages.h"
#include "engines/wavefront.h"
#include "io/block_io.h"

namespace deepgrid::internal::stream {

// Everything one sweep needs, allocated once per run; sweeps run one after the other.
template <typename T>
class StreamSweep {
 public:
  StreamSweep(Grid& grid, const Scheme& st, const Boundary& b, const StreamPlan& plan,
              io::BlockIo& io, const ResolvedProbes* probes, const GridPlacement& placement);

  // Band mode: band `index` of the sweep's bands (`all`, in the order they run: the I/O of one
  // runs on into the next), the running checksums of the planes it reads and writes
  // (read_hashes null where the grid does not verify its reads), and the run's probes in the
  // band's coordinates (null: none).
  struct Band {
    const std::vector<SweepIo::Band>* all = nullptr;
    size_t index = 0;
    std::vector<PlaneHasher>* read_hashes = nullptr;
    std::vector<PlaneHasher>* write_hashes = nullptr;
    const ResolvedProbes* probes = nullptr;
    // Steps the run's later sweeps take: what they need of the sweep's points beyond a
    // distributed part's needed box (the sweep itself runs with the reach of its own levels,
    // which its bands' own rows need).
    int64_t later_steps = 0;
  };
  // The band the next sweep() runs (kept until then); the plan must be of bands.
  void set_band(const Band* band);

  // The plan's memory: frames, rings, carried planes and I/O buffers (kResource without it).
  Status allocate();

  // One sweep in place, from the record's `done` plane on (0: a new sweep): reads run ahead,
  // writes behind, compute between; the committer makes the progress durable behind them.
  // `reach`: the steps left in the run at the sweep's start; the points computed are trimmed
  // to what reaches the placement's needed box by the run's end (wavefront.h), and the rest
  // of the planes written holds zeros.
  Status sweep(const SweepRecord& record, int64_t reach, StreamStats& stats);

 private:
  using Tile = WavefrontFrame;
  using Wave = Wavefront<T>;

  static Shape planes_shape(const Grid& grid, const StreamPlan& plan);
  // Band mode: hash the band's own rows of a plane at `values` into `hash`.
  void hash_band_rows(const T* values, PlaneHasher& hash) const;
  int64_t component_stride() const;

  Status run_blocks(StreamStats& stats);
  std::vector<std::vector<std::vector<Wave>>> make_all_waves();
  void make_waves(int j, int thread, std::vector<Wave>& out);
  WavefrontTrim trim_from_level(int k) const;
  bool output_trimmed(int64_t z) const;
  std::vector<Tile> tiles() const;
  std::vector<int64_t> item_begins() const;
  T* output_plane(int64_t z) const;
  Status prepare_block(int64_t i0, int64_t i1, StreamStats& stats);
  Status claim_output_buffers(int64_t i0, int64_t i1, StreamStats& stats);
  Status claim_level0(int64_t p, StreamStats& stats);
  void convert_level0_planes();
  void convert_level0_rows(std::vector<PlaneHasher>* band_hashes);
  void load_level0(const SweepIo::Buffer& read, PlaneHasher& hash);
  void fill_level0_ghosts(int64_t z);
  Status recycle_read_buffers();
  void hash_block_outputs(int64_t i0, int64_t i1);
  int output_hash_parts() const;
  void hash_output(const T* out, int64_t z, int c, PlaneHasher& hash);
  Status finish_block(int64_t i0, int64_t i1, StreamStats& stats);

  const ResolvedProbes* probes_;  // (band mode: the band's, in its coordinates)
  GridPlacement placement_;       // (band mode: the band's)
  const GridPlacement run_placement_;
  const Band* band_ = nullptr;
  Grid& grid_;
  const Manifest& m_;
  const Shape s_;
  const SchemeKernel<T> kernel_;
  const Boundary& b_;
  const StreamPlan& plan_;
  const int rz_;
  StageFrames<T> frames_;
  SweepIo io_;
  // The sweep being run.
  const SweepRecord* record_ = nullptr;
  SweepLayout layout_;
  int64_t reach_ = 1;                      // steps left in the run at the sweep's start
  std::vector<size_t> conversions_;        // read buffers to convert into their level-0 frames
  std::vector<Status> conversion_status_;  // each one's checksum check
  int64_t block_z0_ = 0;                   // output plane of the block's first step
  std::vector<int> block_out_;             // write buffer of each step's output plane, or -1
  std::vector<PlaneHasher> block_hash_;    // checksum of each step's output plane
};

extern template class StreamSweep<float>;
extern template class StreamSweep<double>;

}  // namespace deepgrid::internal::stream
