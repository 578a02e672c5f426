// Sweeps in bands of rows, out of place (stream_bands.h).
#include "engines/stream_bands.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "deepgrid/fsck.h"
#include "deepgrid/integrity.h"
#include "engines/stream_sweep.h"

namespace deepgrid::internal::stream {
namespace {

// Whether band `r`'s own rows of every component start and end on 4096-byte blocks both in
// the files and in its buffers, as O_DIRECT writes need: band_rows_whole_blocks, and a
// band whose rows wrap across the grid's ends on planes not of whole blocks has its buffers
// aligned for the larger of the two parts (band_layout), which must be its own rows'.
bool writes_whole_blocks(const Manifest& m, const StreamPlan& plan, const BandRows& r) {
  if (!band_rows_whole_blocks(m, plan.band_rows)) return false;
  if (m.shape.ny * row_bytes(m) % kDirectIoAlignment == 0) return true;
  const BandLayout l = band_layout(m, plan.band_height, r.r0);
  const bool own_rows_after_the_wrap = r.r0 < 0;
  return l.after_start == 0 || own_rows_after_the_wrap == l.aligned_after;
}

// The descriptors a sweep's bands use beyond the grid's own. Writes: the replacement's own
// (O_DIRECT where the files allow it) for bands whose writes are whole blocks
// (writes_whole_blocks or bands_share_edge_blocks) or when the files are not O_DIRECT, else
// buffered ones. Reads: where
// rows wrap across the grid's ends on planes whose components are not whole blocks (`wrap`),
// buffered ones of the grid's data and coefficient files for the parts that cannot be aligned.
// Those opened here are closed with it.
class BandFiles {
 public:
  static Result<BandFiles> open(const Grid& grid, const StreamPlan& plan, int ry, bool wrap) {
    BandFiles w;
    const Manifest& m = grid.manifest();
    bool buffered_writes = false;
    w.edge_blocks_ = bands_share_edge_blocks(m, plan.band_rows, wrap);
    for (int64_t b = 0; b < plan.bands; ++b) {
      const BandRows r = band_rows(plan, m, ry, b, wrap);
      w.rows_.push_back(r);
      w.whole_blocks_.push_back(writes_whole_blocks(m, plan, r));
      buffered_writes =
          buffered_writes || (!w.whole_blocks_.back() && !w.edge_blocks_ && grid.direct_io());
    }
    const bool unaligned_reads =
        wrap && grid.direct_io() && m.shape.ny * row_bytes(m) % kDirectIoAlignment != 0;
    for (size_t f = 0; f < m.layout.files.size(); ++f) {
      const std::string path = grid.file_path(static_cast<int>(f), FileSet::kReplacement);
      w.paths_.push_back(path);
      w.fds_.push_back(grid.fd(static_cast<int>(f), FileSet::kReplacement));
      if (unaligned_reads) {
        DG_ASSIGN_OR_RETURN(const int fd,
                            w.open_owned(grid.file_path(static_cast<int>(f)), O_RDONLY));
        w.read_fds_.push_back(fd);
      }
      if (unaligned_reads && m.has_coef_files()) {
        DG_ASSIGN_OR_RETURN(const int fd,
                            w.open_owned(grid.coef_path(static_cast<int>(f)), O_RDONLY));
        w.coef_read_fds_.push_back(fd);
      }
      if (buffered_writes) {
        DG_ASSIGN_OR_RETURN(const int fd, w.open_owned(path, O_WRONLY));
        w.buffered_fds_.push_back(fd);
      }
    }
    return w;
  }
  BandFiles() = default;
  BandFiles(BandFiles&& o) noexcept
      : rows_(std::move(o.rows_)),
        whole_blocks_(std::move(o.whole_blocks_)),
        edge_blocks_(o.edge_blocks_),
        fds_(std::move(o.fds_)),
        buffered_fds_(std::move(o.buffered_fds_)),
        read_fds_(std::move(o.read_fds_)),
        coef_read_fds_(std::move(o.coef_read_fds_)),
        owned_(std::move(o.owned_)),
        paths_(std::move(o.paths_)) {
    o.owned_.clear();
  }
  BandFiles& operator=(BandFiles&&) = delete;
  ~BandFiles() {
    for (int fd : owned_) ::close(fd);
  }

  // The sweep's bands, in order.
  std::vector<SweepIo::Band> bands() const {
    std::vector<SweepIo::Band> out;
    for (size_t b = 0; b < rows_.size(); ++b) {
      const BandRows& r = rows_[b];
      const bool whole = whole_blocks_[b];
      out.push_back({r.y0, r.y1, r.r0, whole || buffered_fds_.empty() ? fds_ : buffered_fds_,
                     paths_, whole, read_fds_, coef_read_fds_, r.c0, edge_blocks_});
    }
    return out;
  }

 private:
  Result<int> open_owned(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) return errno_status(errno, "open", path);
    owned_.push_back(fd);
    return fd;
  }

  std::vector<BandRows> rows_;
  std::vector<bool> whole_blocks_;
  bool edge_blocks_ = false;
  std::vector<int> fds_, buffered_fds_, read_fds_, coef_read_fds_, owned_;
  std::vector<std::string> paths_;
};

SweepRecord band_sweep_record(const Manifest& m, int levels) {
  SweepRecord r;
  r.step_from = m.step;
  r.levels = levels;
  r.base_from = m.base;
  r.spare = m.layout.spare_planes;
  return r;
}

// The run's probes as a band's sweep applies them, in the coordinates of its planes (rows from
// r0): the sources in its planes (a periodic wavefront would wrap the others into them at the
// planes' own height; where the rows wrap, a source's row is taken across the grid's ends), and
// the receivers in the band's own rows; the other receivers lie outside its planes (row -1),
// each recorded by the band it belongs to. (The receivers' indices stay the run's: their
// columns in the traces.) Made as each band starts: one copy of the probes at a time, whatever
// the number of bands.
ResolvedProbes band_probes(const ResolvedProbes& all, const SweepIo::Band& rows, int64_t ny,
                           int64_t height, bool wrap) {
  constexpr int64_t kOutsideThePlanes = -1;
  ResolvedProbes p = all;
  p.sources.clear();
  p.source_specs.clear();
  for (size_t i = 0; i < all.sources.size(); ++i) {
    ProbePoint q = all.sources[i];
    q.y = wrap ? ((q.y - rows.r0) % ny + ny) % ny : q.y - rows.r0;
    if (q.y < 0 || q.y >= height) continue;
    p.sources.push_back(q);
    p.source_specs.push_back(all.source_specs[i]);
  }
  for (ProbePoint& q : p.receivers) {
    q.y = q.y >= rows.y0 && q.y < rows.y1 ? q.y - rows.r0 : kOutsideThePlanes;
  }
  index_by_plane(&p);
  return p;
}

// One sweep of `levels` levels, every band, into the replacement; on success the replacement
// holds the new planes and the grid their checksums, ready to commit. `probes`: the run's, or
// null.
template <typename T>
Status sweep_bands(Grid& grid, StreamSweep<T>& run, const StreamPlan& plan, int ry, bool wrap,
                   int levels, int64_t later_steps, const ResolvedProbes* probes,
                   StreamStats& stats) {
  const Manifest& m = grid.manifest();
  const auto nz = static_cast<size_t>(m.shape.nz);
  std::vector<PlaneHasher> read_hashes, write_hashes;
  for (size_t z = 0; z < nz; ++z) {
    if (grid.verifying()) read_hashes.emplace_back(m.plane_hashing());
    write_hashes.emplace_back(m.plane_hashing());
  }
  DG_ASSIGN_OR_RETURN(const BandFiles files, BandFiles::open(grid, plan, ry, wrap));
  const std::vector<SweepIo::Band> bands = files.bands();
  const SweepRecord record = band_sweep_record(m, levels);
  for (size_t b = 0; b < bands.size(); ++b) {
    std::optional<ResolvedProbes> band_probed;
    if (probes != nullptr) {
      band_probed = band_probes(*probes, bands[b], m.shape.ny, plan.band_height, wrap);
    }
    const typename StreamSweep<T>::Band band{&bands,
                                             b,
                                             grid.verifying() ? &read_hashes : nullptr,
                                             &write_hashes,
                                             band_probed ? &*band_probed : nullptr,
                                             later_steps};
    run.set_band(&band);
    DG_RETURN_IF_ERROR(run.sweep(record, levels, stats));
  }
  for (size_t p = 0; p < read_hashes.size(); ++p) {
    DG_RETURN_IF_ERROR(grid.verify_plane_hash(static_cast<int64_t>(p), read_hashes[p].digest()));
  }
  for (size_t z = 0; z < nz; ++z) {
    grid.record_plane_hash(static_cast<int64_t>(z), write_hashes[z].digest());
  }
  return Status::Ok();
}

template <typename T>
Status run_bands(Grid& grid, const Scheme& scheme, const Boundary& boundary, int64_t steps,
                 const StreamPlan& plan, io::BlockIo& io, const StreamOptions& options,
                 const ProgressFn& progress, StreamStats& stats) {
  const ResolvedProbes* probes = options.probes;
  StreamSweep<T> run(grid, scheme, boundary, plan, io, probes, options.placement);
  DG_RETURN_IF_ERROR(run.allocate());
  while (stats.steps < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(plan.bt, steps - stats.steps));
    DG_RETURN_IF_ERROR(grid.create_replacement());
    const Status swept = sweep_bands(grid, run, plan, scheme.radius_y(),
                                     bands_wrap(grid.manifest(), boundary, options.placement),
                                     levels, steps - stats.steps - levels, probes, stats);
    if (!swept.ok()) {
      (void)grid.discard_prepared();  // (removes the replacement's files)
      return swept;
    }
    stats.steps += levels;
    const bool go_on = !progress || progress(stats.steps, steps);
    Manifest next = grid.manifest();
    next.step += levels;
    // The files replaced take the next sweep's writes, or the next advance's
    // (Grid::OldFiles, StreamOptions::keep_replaced_files).
    const bool more = go_on && (stats.steps < steps || options.keep_replaced_files);
    DG_RETURN_IF_ERROR(
        grid.commit_replacement(next, more ? Grid::OldFiles::kKeep : Grid::OldFiles::kRemove));
    if (!go_on) break;
  }
  return Status::Ok();
}

}  // namespace

Status advance_in_bands(Grid& grid, const Scheme& scheme, const Boundary& boundary, int64_t steps,
                        const StreamPlan& plan, io::BlockIo& io, const StreamOptions& options,
                        const ProgressFn& progress, StreamStats& stats) {
  if (grid.sweep_record()) {
    return invalid_argument(grid.dir() +
                            " holds an interrupted in-place sweep; finish it with 'deepgrid run " +
                            grid.dir() + " --resume' before sweeping in bands (--band-rows)");
  }
  DG_RETURN_IF_ERROR(upgrade_checksums(grid));  // (bands hash each component apart)
  return dispatch_dtype(grid.dtype(), [&](auto tag) {
    return run_bands<decltype(tag)>(grid, scheme, boundary, steps, plan, io, options, progress,
                                    stats);
  });
}

}  // namespace deepgrid::internal::stream
