// Whole planes of a stored grid in order, through asynchronous direct I/O with several
// requests in flight: what loading, storing, exporting and checksumming a grid use. Each plane
// is handed over packed (plane_bytes: nx * ny values, no padding), in increasing z. Reads are
// checked against the grid's checksums when it verifies (Grid::enable_verification); writes
// record them (committed by the next Grid::commit).
#pragma once

#include <cstdint>
#include <functional>

#include "deepgrid/store.h"

namespace deepgrid::io {

inline constexpr unsigned kPlanesInFlight = 8;

// Reads planes [z0, z1) and calls consume(z, values) for each, in order. A consumer error
// stops the transfer and is returned. `verify` false skips the checksum comparison (for a
// caller about to record new checksums).
using PlaneConsumer = std::function<Status(int64_t z, const void* values)>;
Status read_plane_range(const Grid& grid, int64_t z0, int64_t z1, const PlaneConsumer& consume,
                        unsigned depth = kPlanesInFlight, bool verify = true);

// Calls produce(z, values) for each plane of [z0, z1) in order and writes what it filled into
// the grid's files or its replacement (Grid::create_replacement). A producer error stops the
// transfer and is returned.
using PlaneProducer = std::function<Status(int64_t z, void* values)>;
Status write_plane_range(Grid& grid, int64_t z0, int64_t z1, const PlaneProducer& produce,
                         unsigned depth = kPlanesInFlight, FileSet set = FileSet::kCurrent);

// Something that hands every plane of a grid, in increasing z, to a consumer: one stored grid,
// or the parts of a distributed grid (store/distributed_manifest.h).
using PlaneSource = std::function<Status(const PlaneConsumer& consume)>;
inline PlaneSource planes_of(const Grid& grid) {
  return [&grid](const PlaneConsumer& consume) {
    return read_plane_range(grid, 0, grid.shape().nz, consume);
  };
}

// The planes of one component of a grid of several fields: `source`'s planes from the
// component's first value on (component c starts c * nx * ny values into a plane).
inline PlaneSource component_of(PlaneSource source, const Manifest& m, int component) {
  const int64_t offset =
      component * m.shape.plane_points() * static_cast<int64_t>(dtype_size(m.dtype));
  return [source = std::move(source), offset](const PlaneConsumer& consume) {
    return source([&](int64_t z, const void* values) {
      return consume(z, static_cast<const std::byte*>(values) + offset);
    });
  };
}

// Bytes of buffers the transfers above hold.
inline int64_t plane_transfer_bytes(const Manifest& m, unsigned depth = kPlanesInFlight) {
  return static_cast<int64_t>(depth) * m.layout.plane_buffer_bytes();
}

}  // namespace deepgrid::io
