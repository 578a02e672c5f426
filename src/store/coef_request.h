// internal: the transfer of a plane's coefficients on a grid with coefficient files
// (Manifest::has_coef_files), shared by the stream's sweeps (engines/stream_io.cc) and the
// store's plane transfers (plane_transfer.cc): a plane buffer holds its ring part and then,
// from byte plane_stride on, its coefficients (Layout::plane_buffer_bytes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepgrid/store.h"
#include "io/block_io.h"

namespace deepgrid::internal {

// Plane z's coefficients where they lie in its coefficients' file, to or from `plane_buffer`'s
// coefficient part; the op and tag are the caller's to set.
inline io::Request coef_request(const Grid& grid, int64_t z, std::byte* plane_buffer) {
  const Manifest& m = grid.manifest();
  const PlaneLocation coef = m.locate_coef(z);
  io::Request r;
  r.fd = grid.coef_fd(coef.file);
  r.path = grid.coef_path(coef.file);
  r.offset = coef.offset;
  r.length = static_cast<size_t>(m.layout.coef_bytes);
  r.buffer = plane_buffer + m.layout.plane_stride;
  return r;
}

}  // namespace deepgrid::internal
