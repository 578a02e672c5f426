// internal: the transfer of a plane's coefficients on a grid with coefficient files
// (Manifest::has_coef_files), shared by the stream's sweeps (engines/stream_io.cc) and the
// store's plane transfers (plane_transfer.cc): a plane buffer holds its ring part and then,
// from byte plane_stride on, its coefficients' record (Layout::plane_buffer_bytes), whose
// coefficients start at byte coef_at(). Where that is not right after the ring's part (version
// 6 records, store.h), the two functions below move them between there and the packed plane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "deepgrid/store.h"
#include "io/block_io.h"

namespace deepgrid::internal {

// Plane z's coefficients' record where it lies in its coefficients' file, to or from
// `plane_buffer`'s record part; the op and tag are the caller's to set.
inline io::Request coef_request(const Grid& grid, int64_t z, std::byte* plane_buffer) {
  const Manifest& m = grid.manifest();
  const PlaneLocation coef = m.locate_coef(z);
  io::Request r;
  r.fd = grid.coef_fd(coef.file);
  r.path = grid.coef_path(coef.file);
  r.offset = coef.offset;
  r.length = static_cast<size_t>(m.layout.coef_stride());
  r.buffer = plane_buffer + m.layout.plane_stride;
  return r;
}

// After a read of both parts: the packed plane (every component one after another) from the
// buffer's start.
inline void coefficients_to_plane(const Layout& l, std::byte* plane_buffer) {
  if (l.coef_at() == l.ring_bytes()) return;
  std::memmove(plane_buffer + l.ring_bytes(), plane_buffer + l.coef_at(),
               static_cast<size_t>(l.coef_bytes));
}

// Before a write of both parts, from a packed plane: the coefficients where their record
// holds them, its padding zeros.
inline void coefficients_to_record(const Layout& l, std::byte* plane_buffer) {
  if (l.coef_at() == l.ring_bytes()) return;
  std::memmove(plane_buffer + l.coef_at(), plane_buffer + l.ring_bytes(),
               static_cast<size_t>(l.coef_bytes));
  std::memset(plane_buffer + l.ring_bytes(), 0, static_cast<size_t>(l.coef_at() - l.ring_bytes()));
  const int64_t end = l.coef_at() + l.coef_bytes;
  std::memset(plane_buffer + end, 0, static_cast<size_t>(l.plane_buffer_bytes() - end));
}

}  // namespace deepgrid::internal
