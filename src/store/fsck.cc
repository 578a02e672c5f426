#include "deepgrid/fsck.h"

#include <algorithm>

#include "deepgrid/plane_transfer.h"
#include "deepgrid/stencil.h"

namespace deepgrid {

Result<FsckReport> fsck_grid(const Grid& grid) {
  FsckReport r;
  r.interrupted_sweep = grid.interrupted_sweep();
  r.resumable = grid.sweep_record().has_value();
  const PlaneChecksums& sums = grid.checksums();
  r.problem = grid.checksum_problem();
  r.has_checksums = r.problem.empty() && sums.complete();
  if (!r.has_checksums) return r;
  // An interrupted sweep has overwritten the old planes below those it still needs; the rest
  // are where the manifest says, with the table's hashes (resume.h).
  int64_t first = 0;
  if (const auto& sweep = grid.sweep_record()) {
    const auto stencil = Stencil::from_json(sweep->stencil);
    const int64_t reach = stencil.ok() ? int64_t{sweep->levels} * stencil->radius_z() : 0;
    first = stencil.ok() ? std::clamp<int64_t>(sweep->done - reach, 0, grid.shape().nz)
                         : grid.shape().nz;
  }
  const PlaneHashing hashing = grid.manifest().plane_hashing();
  DG_RETURN_IF_ERROR(io::read_plane_range(
      grid, first, grid.shape().nz,
      [&](int64_t z, const void* values) {
        ++r.planes_checked;
        if (plane_hash(values, hashing) != sums.hash(z)) {
          const Manifest& m = grid.manifest();
          const PlaneLocation loc = m.locate(z);
          DamagedPlane& d =
              r.damaged.emplace_back(DamagedPlane{z, grid.file_path(loc.file), loc.offset, "", 0});
          if (m.has_coef_files()) {
            const PlaneLocation coef = m.locate_coef(z);
            d.coef_file = grid.coef_path(coef.file);
            d.coef_offset = coef.offset;
          }
        }
        return Status::Ok();
      },
      io::kPlanesInFlight, /*verify=*/false));
  return r;
}

Status upgrade_checksums(Grid& grid) {
  const Manifest& m = grid.manifest();
  if (m.plane_hashing().by_component || m.components() == 1) return Status::Ok();
  Manifest next = m;
  next.checksums_by_component = true;
  if (!grid.checksums().complete()) return grid.commit(next);  // (nothing recorded to compare)
  const PlaneHashing old_way = m.plane_hashing(), new_way = next.plane_hashing();
  std::vector<uint64_t> hashes(static_cast<size_t>(m.shape.nz));
  DG_RETURN_IF_ERROR(io::read_plane_range(
      grid, 0, m.shape.nz,
      [&](int64_t z, const void* values) {
        hashes[static_cast<size_t>(z)] = plane_hash(values, new_way);
        return grid.check_plane_hash(z, plane_hash(values, old_way));
      },
      io::kPlanesInFlight, /*verify=*/false));
  for (int64_t z = 0; z < m.shape.nz; ++z)
    grid.record_plane_hash(z, hashes[static_cast<size_t>(z)]);
  return grid.commit(next);
}

Status read_every_plane(const Grid& grid) {
  return io::read_plane_range(grid, 0, grid.shape().nz,
                              [](int64_t, const void*) { return Status::Ok(); });
}

}  // namespace deepgrid
