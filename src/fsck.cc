#include "deepgrid/fsck.h"

#include "deepgrid/io/plane_transfer.h"

namespace deepgrid {

Result<FsckReport> fsck_grid(const Grid& grid) {
  FsckReport r;
  r.interrupted_sweep = grid.interrupted_sweep();
  const PlaneChecksums& sums = grid.checksums();
  r.problem = grid.checksum_problem();
  r.has_checksums = r.problem.empty() && sums.complete();
  if (!r.has_checksums) return r;
  const size_t plane_bytes = static_cast<size_t>(grid.manifest().layout.plane_bytes);
  DG_RETURN_IF_ERROR(io::read_plane_range(
      grid, 0, grid.shape().nz,
      [&](int64_t z, const void* values) {
        ++r.planes_checked;
        if (plane_hash(values, plane_bytes) != sums.hash(z)) {
          const PlaneLocation loc = grid.manifest().locate(z);
          r.damaged.push_back({z, grid.file_path(loc.file), loc.offset});
        }
        return Status::Ok();
      },
      io::kPlanesInFlight, /*verify=*/false));
  return r;
}

Status read_every_plane(const Grid& grid) {
  return io::read_plane_range(grid, 0, grid.shape().nz,
                              [](int64_t, const void*) { return Status::Ok(); });
}

}  // namespace deepgrid
