// Moving a grid's data files to new store directories (store.h's relocate_grid): the one way a
// grid's recorded stores change (docs/security.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/integrity.h"
#include "deepgrid/resume.h"
#include "deepgrid/store.h"
#include "store/coef_request.h"
#include "store/grid_files.h"
#include "store/grid_lock.h"
#include "store/grid_paths.h"

namespace deepgrid {

using internal::join_path;

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Copies the first `bytes` of `from` (a multiple of the direct I/O alignment, as every data
// file's size) into `to`, made anew via to.tmp, durably.
Status copy_data_file(const std::string& from, const std::string& to, int64_t bytes) {
  bool direct = false;
  internal::OwnedFd in;
  DG_ASSIGN_OR_RETURN(in.fd, internal::open_data_file(from, O_RDONLY, &direct));
  const std::string tmp = to + ".tmp";
  ::unlink(tmp.c_str());
  internal::OwnedFd out;
  DG_ASSIGN_OR_RETURN(out.fd, internal::open_data_file(tmp, O_WRONLY | O_CREAT | O_EXCL, &direct));
  internal::AlignedBuffer buf(8 << 20);
  Status st = buf.ok() ? Status::Ok() : Status(ErrorCode::kResource, "out of memory for a copy");
  for (int64_t at = 0; at < bytes && st.ok();) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(bytes - at, 8 << 20));
    st = internal::pread_full(in.fd, buf.data(), n, at, from);
    if (st.ok()) st = internal::pwrite_full(out.fd, buf.data(), n, at, tmp);
    at += static_cast<int64_t>(n);
  }
  if (st.ok() && ::fdatasync(out.fd) != 0) st = errno_status(errno, "fsync", tmp);
  if (st.ok() && ::rename(tmp.c_str(), to.c_str()) != 0) st = errno_status(errno, "rename", tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return internal::fsync_path(internal::parent_path(to));
}

// The data files `m` names have their sizes and, when the grid has a sound checksum table,
// every plane read from them matches it: what was copied, or found in place, holds the grid's
// values. Whether the planes were compared.
Result<bool> check_moved_files(const std::string& dir, const Manifest& m) {
  auto open_all = [](const std::vector<DataFile>& files,
                     std::vector<internal::OwnedFd>* fds) -> Status {
    *fds = std::vector<internal::OwnedFd>(files.size());
    for (size_t f = 0; f < files.size(); ++f) {
      const DataFile& file = files[f];
      bool direct = false;
      DG_ASSIGN_OR_RETURN((*fds)[f].fd, internal::open_data_file(file.path, O_RDONLY, &direct));
      struct stat st {};
      if (::fstat((*fds)[f].fd, &st) != 0 || st.st_size < file.bytes) {
        return corrupt("data file " + file.path + " is shorter than the grid's " +
                       std::to_string(file.bytes) + " bytes; copy it again");
      }
    }
    return Status::Ok();
  };
  std::vector<internal::OwnedFd> fds, coef_fds;
  DG_RETURN_IF_ERROR(open_all(m.layout.files, &fds));
  DG_RETURN_IF_ERROR(open_all(m.layout.coef_files, &coef_fds));
  if (m.checksum_generation == 0) return false;
  auto text = internal::read_own_file(join_path(dir, checksum_file_name(m.checksum_generation)));
  if (!text.ok()) return false;  // (fsck reports a missing table)
  auto table = PlaneChecksums::from_json(*text, m.shape.nz, m.checksum_algorithm());
  if (!table.ok()) return false;
  const PlaneChecksums& sums = *table;
  // (O_DIRECT; the ring's part of a plane, then its coefficients' record: the plane packed)
  internal::AlignedBuffer plane(static_cast<size_t>(m.layout.plane_buffer_bytes()));
  if (!plane.ok()) return Status(ErrorCode::kResource, "out of memory for a plane");
  for (int64_t z = 0; z < m.shape.nz; ++z) {
    const PlaneLocation at = m.locate(z);
    const std::string& path = m.layout.files[static_cast<size_t>(at.file)].path;
    DG_RETURN_IF_ERROR(internal::pread_full(fds[static_cast<size_t>(at.file)].fd, plane.data(),
                                            static_cast<size_t>(m.layout.plane_stride), at.offset,
                                            path));
    if (m.has_coef_files()) {
      const PlaneLocation coef = m.locate_coef(z);
      DG_RETURN_IF_ERROR(internal::pread_full(
          coef_fds[static_cast<size_t>(coef.file)].fd, plane.data() + m.layout.plane_stride,
          static_cast<size_t>(m.layout.coef_stride()), coef.offset,
          m.layout.coef_files[static_cast<size_t>(coef.file)].path));
      internal::coefficients_to_plane(m.layout, plane.data());
    }
    if (sums.known(z) && plane_hash(plane.data(), m.plane_hashing()) != sums.hash(z)) {
      return corrupt("plane " + std::to_string(z) + " in " + path + " at offset " +
                     std::to_string(at.offset) +
                     " does not match the grid's checksum; copy the data file again");
    }
  }
  return true;
}

// What relocate_grid needs of the grid before it moves anything.
Status check_relocatable(const std::string& dir, const Manifest& m, size_t stores) {
  for (const char* pending : {kSweepRecordName, internal::kPreparedName}) {
    if (exists(join_path(dir, pending))) {
      return invalid_argument("grid " + dir +
                              " has an unfinished in-place sweep or commit; finish it with "
                              "'deepgrid run " +
                              dir + " --resume' before relocating it");
    }
  }
  if (m.stores.empty()) {
    return invalid_argument("grid " + dir +
                            " keeps its data in its own directory; move the directory itself");
  }
  if (stores != m.stores.size()) {
    const size_t n = m.stores.size();
    return invalid_argument("grid " + dir + " is striped over " + std::to_string(n) + " store" +
                            (n == 1 ? "" : "s") + "; give as many store directories (--store " +
                            (n == 1 ? "DIR" : "A,B,...") + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<Relocation> relocate_grid(const std::string& dir, const std::vector<std::string>& stores) {
  const std::string mpath = join_path(dir, internal::kManifestName);
  if (!internal::is_directory(dir) || !exists(mpath)) {
    return invalid_argument(dir + " is not a deepgrid grid (no " + internal::kManifestName + ")");
  }
  DG_ASSIGN_OR_RETURN(internal::GridLock lock,
                      internal::GridLock::acquire(dir, internal::GridLock::Kind::kExclusive));
  DG_ASSIGN_OR_RETURN(const std::string text, internal::read_own_file(mpath));
  auto parsed = Manifest::from_json(text);
  if (!parsed.ok()) return parsed.status().with_context(mpath);
  const Manifest m = std::move(parsed).value();
  DG_RETURN_IF_ERROR(check_relocatable(dir, m, stores.size()));
  DG_RETURN_IF_ERROR(internal::check_store_dirs(stores));
  (void)lock;  // held until the manifest names the new stores

  Manifest next = m;
  next.stores.clear();
  for (const std::string& s : stores) next.stores.push_back(internal::normal_store_path(s));
  Relocation done;
  std::vector<std::string> made;  // copies this call made: removed if it fails
  auto undo = [&](Status st) {
    for (const std::string& path : made) ::unlink(path.c_str());
    return st;
  };
  // Each file of `from` copied or found where `to` names it; `moved` its new names.
  auto move_files = [&](const char* kind, const std::vector<DataFile>& files,
                        std::vector<DataFile>* moved, auto name) -> Status {
    for (size_t f = 0; f < files.size(); ++f) {
      const std::string& from = files[f].path;
      std::string to = name(m.id, next.stores, f);
      if (internal::is_replacement_name(from)) to = internal::replacement_name(to);
      (*moved)[f].path = to;
      if (to == from) continue;
      if (exists(to)) {
        ++done.found;
      } else if (exists(from)) {
        DG_RETURN_IF_ERROR(copy_data_file(from, to, files[f].bytes));
        made.push_back(to);
        ++done.copied;
      } else {
        return invalid_argument(kind + std::to_string(f) + " is neither at " + from + " nor at " +
                                to + "; copy it to " + to + " first");
      }
    }
    return Status::Ok();
  };
  Status moved =
      move_files("data file ", m.layout.files, &next.layout.files, internal::data_file_path);
  if (moved.ok()) {
    moved = move_files("coefficient file ", m.layout.coef_files, &next.layout.coef_files,
                       internal::coef_file_path);
  }
  if (!moved.ok()) return undo(moved);
  const auto checked = check_moved_files(dir, next);
  if (!checked.ok()) return undo(checked.status());
  done.checked = *checked;
  next.history.push_back(
      {utc_now(), "relocate", nlohmann::json{{"from", m.stores}, {"to", next.stores}}.dump()});
  const Status committed =
      internal::write_file_atomic(dir, internal::kManifestName, next.to_json());
  if (!committed.ok()) {
    if (internal::manifest_names_data_file(dir, next.layout.files[0].path)) made.clear();
    return undo(committed);
  }
  for (size_t f = 0; f < m.layout.files.size(); ++f) {  // (a leftover is harmless)
    if (m.layout.files[f].path != next.layout.files[f].path)
      ::unlink(m.layout.files[f].path.c_str());
  }
  for (size_t f = 0; f < m.layout.coef_files.size(); ++f) {
    if (m.layout.coef_files[f].path != next.layout.coef_files[f].path)
      ::unlink(m.layout.coef_files[f].path.c_str());
  }
  return done;
}

}  // namespace deepgrid
