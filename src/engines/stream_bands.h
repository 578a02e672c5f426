// internal: the stream engine's sweeps in bands of rows (StreamPlan::bands), for grids whose
// budget holds few whole planes.
//
// A band is rows [y0, y1) of every plane; its sweep runs on planes of band_height rows, the band
// and bt * ry rows of halo at either side within the grid (starting at row r0), as a
// distributed part runs on its block and halos. Bands are swept one after the other, each
// through every plane, so each reads its halo rows again and recomputes them.
//
// Out of place: a band reads the grid's files and writes its rows into a replacement of them
// (Grid::create_replacement), which the sweep commits once every band has run. So a band reads
// old rows wherever the band before it wrote, a crash or an error at any moment leaves the grid
// at its last committed step (the replacement's files are removed), and the checksums of the
// planes read are compared before anything is replaced: each band hashes its own rows of every
// component of every plane into a running checksum per plane and component, which after the
// last band give the plane's checksum (integrity.h: components hashed apart; a grid of fields
// whose checksums predate that is upgraded first, upgrade_checksums). The price is disk
// space for a second copy of the data files while the run sweeps (kept from one sweep to the
// next: Grid::OldFiles).
#pragma once

#include <algorithm>
#include <cstdint>

#include "deepgrid/boundary.h"
#include "deepgrid/store.h"
#include "engines/stream_engine.h"
#include "io/block_io.h"

namespace deepgrid::internal::stream {

// Band b of a plan of bands: the rows it writes, and the first row of its planes (which hold
// the band and at least bt * ry rows beyond each end that is not the grid's). Rows that wrap
// (bands_wrap: periodic): bt * ry rows beyond both ends, taken across the grid's ends where the
// band lies at one (r0 below 0 or r0 + band_height above ny: SweepIo reads them in two parts).
struct BandRows {
  int64_t y0 = 0, y1 = 0, r0 = 0;
};
inline BandRows band_rows(const StreamPlan& plan, int64_t ny, int ry, int64_t b, bool wrap) {
  BandRows r;
  r.y0 = b * plan.band_rows;
  r.y1 = std::min(ny, r.y0 + plan.band_rows);
  r.r0 = r.y0 - int64_t{plan.bt} * ry;
  if (!wrap) r.r0 = std::clamp<int64_t>(r.r0, 0, ny - plan.band_height);
  return r;
}

// advance_stream (stream_engine.h) for a plan of bands, with the run's block I/O. The options'
// probes (null: none): every band adds the sources that fall in its planes, halo rows too, and
// records the receivers in its own rows; their placement: a distributed part's bands deliver
// its needed box, and write zeros in its halos where they compute nothing.
Status advance_in_bands(Grid& grid, const Scheme& scheme, const Boundary& boundary, int64_t steps,
                        const StreamPlan& plan, io::BlockIo& io, const StreamOptions& options,
                        const ProgressFn& progress, StreamStats& stats);

}  // namespace deepgrid::internal::stream
