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
// next: Grid::OldFiles). Writes are O_DIRECT where the bands' rows are whole 4096-byte blocks,
// or, on planes whose rows do not wrap, where bands of a block or more share the blocks at their
// edges (bands_share_edge_blocks); else through the page cache.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/int_math.h"
#include "deepgrid/boundary.h"
#include "deepgrid/store.h"
#include "engines/stream_engine.h"
#include "engines/stream_io.h"
#include "io/block_io.h"

namespace deepgrid::internal::stream {

// Whether every band's rows of `band_rows` rows of each component start and end on 4096-byte
// blocks where the rows do not wrap: the rows whole blocks, and on planes of several components
// each component too (else the components after the first start off the files' blocks).
inline bool band_rows_whole_blocks(const Manifest& m, int64_t band_rows) {
  const int64_t row = row_bytes(m);
  return band_rows * row % kDirectIoAlignment == 0 &&
         (m.components() == 1 || m.shape.ny * row % kDirectIoAlignment == 0);
}

// Whether the bands of `band_rows` rows share the 4096-byte blocks at their edges, so that every
// write is whole blocks (O_DIRECT) although their rows are not: on planes whose rows do not wrap,
// where a band's rows of some component do not start or end on a block and each band's rows
// fill one at least. Such a band also computes the rows before its own back to the block
// holding its first byte (first_computed_row), writes from that block on and leaves the block
// holding its last byte to the band after it (edge_block_write).
inline bool bands_share_edge_blocks(const Manifest& m, int64_t band_rows, bool wrap) {
  return !wrap && !band_rows_whole_blocks(m, band_rows) &&
         std::min(band_rows, m.shape.ny) * row_bytes(m) >= kDirectIoAlignment;
}

// Rows at most that a band sharing its edge blocks computes before its own.
inline int64_t edge_block_rows(const Manifest& m) {
  return internal::ceil_div(kDirectIoAlignment - 1, row_bytes(m));
}

// The first row a band from row y0 computes: y0, or where the bands share their edge blocks the
// row holding the first byte of the block where its writes of some component start.
inline int64_t first_computed_row(const Manifest& m, int64_t y0, bool shares_edge_blocks) {
  if (!shares_edge_blocks || y0 == 0) return y0;
  const int64_t row = row_bytes(m);
  const int64_t component = m.shape.ny * row;
  int64_t first = y0;
  for (int64_t c = 0; c < m.components() - m.coef_components(); ++c) {
    const int64_t block =
        internal::floor_div(c * component + y0 * row, kDirectIoAlignment) * kDirectIoAlignment;
    first = std::min(first, (block - c * component) / row);
  }
  return first;
}

// The bytes [begin, end) of a new plane's component c (from the start of its slot) that a band of
// rows [y0, y1) sharing its edge blocks writes: from the block holding its first byte to the
// block holding its last, which the next band writes. The first band's writes of a component
// after the first start at its first whole block; the last band's run to the end of the block
// holding its last byte, where the next component's first bytes lie (kept from the first band:
// SweepIo) or the slot's padding.
struct ByteRange {
  int64_t begin = 0, end = 0;
};
inline ByteRange edge_block_write(const Manifest& m, int64_t y0, int64_t y1, int64_t c, bool first,
                                  bool last) {
  const int64_t row = row_bytes(m);
  const int64_t from = c * m.shape.ny * row + y0 * row, to = c * m.shape.ny * row + y1 * row;
  auto down = [](int64_t b) {
    return internal::floor_div(b, kDirectIoAlignment) * kDirectIoAlignment;
  };
  auto up = [](int64_t b) {
    return internal::ceil_div(b, kDirectIoAlignment) * kDirectIoAlignment;
  };
  return {first && c > 0 ? up(from) : down(from), last ? up(to) : down(to)};
}

// Band b of a plan of bands: the rows it writes, the first row it computes (c0: y0, or before it
// where the bands share their edge blocks), and the first row of its planes (which hold the
// rows from c0 and at least bt * ry rows beyond each end that is not the grid's). Rows that wrap
// (bands_wrap: periodic): bt * ry rows beyond both ends, taken across the grid's ends where the
// band lies at one (r0 below 0 or r0 + band_height above ny: SweepIo reads them in two parts).
struct BandRows {
  int64_t y0 = 0, y1 = 0, c0 = 0, r0 = 0;
};
inline BandRows band_rows(const StreamPlan& plan, const Manifest& m, int ry, int64_t b, bool wrap) {
  const int64_t ny = m.shape.ny;
  BandRows r;
  r.y0 = b * plan.band_rows;
  r.y1 = std::min(ny, r.y0 + plan.band_rows);
  r.c0 = first_computed_row(m, r.y0, bands_share_edge_blocks(m, plan.band_rows, wrap));
  r.r0 = r.c0 - int64_t{plan.bt} * ry;
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
