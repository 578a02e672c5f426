// Bringing a grid made by an earlier deepgrid to the format this one writes (Grid::upgrade):
// coefficient fields out of the ring into coefficient files, checksums by component.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/fsck.h"
#include "deepgrid/plane_transfer.h"
#include "deepgrid/store.h"
#include "store/grid_files.h"
#include "store/grid_paths.h"

namespace deepgrid {

namespace {

// The copy's memory: a batch of planes between its reads and its writes, and each side's
// planes in flight, about 64 MiB apiece (a plane where one is larger).
constexpr int64_t kCopyBytes = int64_t{64} << 20;
int64_t batch_planes(const Manifest& m) {
  return std::clamp<int64_t>(kCopyBytes / m.layout.plane_bytes, 1, m.shape.nz);
}
unsigned planes_in_flight(const Layout& l) {
  return static_cast<unsigned>(
      std::clamp<int64_t>(kCopyBytes / l.plane_buffer_bytes(), 1, io::kPlanesInFlight));
}

}  // namespace

Result<Upgrade> Grid::upgrade() {
  Upgrade done;
  done.from_version = done.to_version = manifest_.version;
  const int coefficients = manifest_.has_coef_files() ? 0 : manifest_.scheme_coef_components();
  const bool rehash = !manifest_.plane_hashing().by_component && manifest_.components() > 1;
  if (coefficients == 0 && !rehash) return done;
  if (sweep_record_ || prepared_) {
    return invalid_argument("grid " + dir_ +
                            " has an unfinished sweep or commit; finish it with 'deepgrid run " +
                            dir_ + " --resume' before upgrading it");
  }
  // New checksums are made from what is read: damage must not pass into them.
  if (!checksum_problem_.empty()) {
    return corrupt("cannot upgrade " + dir_ + ": " + checksum_problem_ + "; run 'deepgrid fsck " +
                   dir_ + "'");
  }
  if (coefficients == 0) {  // only the table: every plane read and hashed again, none written
    DG_RETURN_IF_ERROR(upgrade_checksums(*this));
    done.to_version = manifest_.version;
    done.checksums_by_component = true;
    return done;
  }
  verify_if_recorded();
  remove_kept_files();

  // The new layout: the ring's slots without the coefficients, the same chunks' bytes and
  // spare slots, base 0; its data files under the other names (replacement_name), so the old
  // ones stay whole until the manifest names the new ones.
  Manifest next = manifest_;
  DG_ASSIGN_OR_RETURN(next.layout,
                      plan_layout(next.shape, next.dtype, manifest_.layout.files.size(),
                                  manifest_.layout.chunk_bytes(), manifest_.layout.spare_planes,
                                  next.components(), coefficients));
  next.base = 0;
  next.checksums_by_component = true;
  for (size_t f = 0; f < next.layout.files.size(); ++f) {
    next.layout.files[f].path = internal::replacement_name(manifest_.layout.files[f].path);
  }
  for (size_t f = 0; f < next.layout.coef_files.size(); ++f) {
    next.layout.coef_files[f].path = internal::coef_file_path(next.id, next.stores, f);
  }
  Grid out;
  out.dir_ = dir_;
  out.manifest_ = next;
  out.manifest_.checksum_generation = manifest_.checksum_generation;  // (its commit's successor)
  out.checksums_ = PlaneChecksums(next.shape.nz);
  out.direct_io_ = true;
  std::vector<internal::SpaceNeed> needs;
  std::vector<std::string> made;
  for (size_t f = 0; f < next.layout.files.size(); ++f) {
    out.coef_paths_.push_back(internal::join_path(dir_, next.layout.coef_files[f].path));
    needs.push_back(
        {internal::parent_path(out.file_path(static_cast<int>(f))),
         static_cast<uint64_t>(next.layout.files[f].bytes + next.layout.coef_files[f].bytes)});
  }
  DG_RETURN_IF_ERROR(internal::check_free_space(
      needs, "the upgraded copy of " + dir_,
      "free space, or relocate the grid to stores with room ('deepgrid relocate')"));

  // Whatever fails before the commit leaves the grid as it was: the new files go.
  auto undo = [&](Status st) {
    for (int fd : out.fds_) ::close(fd);
    for (int fd : out.coef_fds_) ::close(fd);
    out.fds_.clear();
    out.coef_fds_.clear();
    for (const std::string& path : made) ::unlink(path.c_str());
    return st;
  };
  auto make_file = [&](const std::string& path, int64_t bytes, std::vector<int>* fds) -> Status {
    bool direct = false;
    // (a leftover of a crashed upgrade is written over; a link in its place is refused)
    DG_ASSIGN_OR_RETURN(const int fd,
                        internal::open_data_file(path, O_RDWR | O_CREAT | O_TRUNC, &direct));
    fds->push_back(fd);
    made.push_back(path);
    out.direct_io_ = out.direct_io_ && direct;
    const int rc = bytes > 0 ? ::posix_fallocate(fd, 0, bytes) : 0;
    return rc == 0 ? Status::Ok() : errno_status(rc, "allocate", path, 0);
  };
  for (size_t f = 0; f < next.layout.files.size(); ++f) {
    Status st =
        make_file(out.file_path(static_cast<int>(f)), next.layout.files[f].bytes, &out.fds_);
    if (st.ok())
      st = make_file(out.coef_paths_[f], next.layout.coef_files[f].bytes, &out.coef_fds_);
    if (!st.ok()) return undo(st);
  }

  // Every plane, a batch at a time: read (and checked) from the old files, written into the
  // new ones, which hash it again component by component.
  const int64_t batch = batch_planes(manifest_);
  const auto plane = static_cast<size_t>(manifest_.layout.plane_bytes);
  internal::AlignedBuffer buffer(static_cast<size_t>(batch) * plane);
  if (!buffer.ok()) return undo(Status(ErrorCode::kResource, "out of memory for the upgrade"));
  for (int64_t z0 = 0; z0 < next.shape.nz; z0 += batch) {
    const int64_t z1 = std::min(next.shape.nz, z0 + batch);
    auto at = [&](int64_t z) { return buffer.data() + static_cast<size_t>(z - z0) * plane; };
    Status st = io::read_plane_range(
        *this, z0, z1,
        [&](int64_t z, const void* values) {
          std::memcpy(at(z), values, plane);
          return Status::Ok();
        },
        planes_in_flight(manifest_.layout));
    if (st.ok()) {
      st = io::write_plane_range(
          out, z0, z1,
          [&](int64_t z, void* values) {
            std::memcpy(values, at(z), plane);
            return Status::Ok();
          },
          planes_in_flight(next.layout));
    }
    if (!st.ok()) return undo(st);
  }
  for (const std::string& path : made) {
    const Status st = internal::fsync_path(internal::parent_path(path));
    if (!st.ok()) return undo(st);
  }
  std::vector<std::string> names;
  for (int c = next.components() - coefficients; c < next.components(); ++c) {
    names.push_back(next.field_names()[static_cast<size_t>(c)]);
  }
  next.history.push_back({utc_now(), "upgrade",
                          nlohmann::json{{"from_version", manifest_.version},
                                         {"coefficient_files", names},
                                         {"checksums_by_component", rehash}}
                              .dump()});
  const Status committed = out.commit(next);
  if (!committed.ok()) {
    if (!internal::manifest_names_data_file(dir_, next.layout.files[0].path)) {
      return undo(committed);
    }
    made.clear();  // (the grid's files now: an error after the rename removes nothing)
    return undo(committed);
  }

  // The manifest names the new files: the old ones go (a leftover is harmless).
  for (size_t f = 0; f < fds_.size(); ++f) {
    ::close(fds_[f]);
    ::unlink(file_path(static_cast<int>(f)).c_str());
  }
  fds_.clear();
  out.lock_ = std::move(lock_);
  out.verify_ = verify_;
  *this = std::move(out);
  done.to_version = manifest_.version;
  done.coefficient_files = names;
  done.checksums_by_component = rehash;
  return done;
}

}  // namespace deepgrid
