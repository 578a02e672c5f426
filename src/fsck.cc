#include "deepgrid/fsck.h"

#include <algorithm>
#include <vector>

namespace deepgrid {
namespace {

// Calls visit(z, plane values) for every plane, one chunk of planes read at a time.
template <typename Visit>
Status for_each_plane(const Grid& grid, Visit visit) {
  const Layout& l = grid.manifest().layout;
  const int64_t nz = grid.shape().nz;
  std::vector<std::byte> buf(static_cast<size_t>(l.planes_per_chunk * l.plane_bytes));
  for (int64_t z0 = 0; z0 < nz; z0 += l.planes_per_chunk) {
    const int64_t n = std::min(l.planes_per_chunk, nz - z0);
    DG_RETURN_IF_ERROR(grid.read_planes(z0, n, buf.data()));
    for (int64_t i = 0; i < n; ++i) visit(z0 + i, buf.data() + i * l.plane_bytes);
  }
  return Status::Ok();
}

}  // namespace

Result<FsckReport> fsck_grid(const Grid& grid) {
  FsckReport r;
  const PlaneChecksums& sums = grid.checksums();
  r.problem = grid.checksum_problem();
  r.has_checksums = r.problem.empty() && sums.complete();
  if (!r.has_checksums) return r;
  const size_t plane_bytes = static_cast<size_t>(grid.manifest().layout.plane_bytes);
  DG_RETURN_IF_ERROR(for_each_plane(grid, [&](int64_t z, const std::byte* values) {
    ++r.planes_checked;
    if (plane_hash(values, plane_bytes) == sums.hash(z)) return;
    const PlaneLocation loc = grid.manifest().locate(z);
    r.damaged.push_back({z, grid.file_path(loc.file), loc.offset});
  }));
  return r;
}

Status read_every_plane(const Grid& grid) {
  return for_each_plane(grid, [](int64_t, const std::byte*) {});
}

}  // namespace deepgrid
