// An open grid (store.h): its files and lock, plane I/O, per-plane checksums, sweep records,
// and the atomic commits of new states (replacement files, prepared commits).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/store.h"
#include "store/grid_files.h"
#include "store/grid_lock.h"
#include "store/grid_paths.h"
#include "store/json_fields.h"

namespace deepgrid {

using internal::AlignedBuffer;
using internal::expected_file_bytes;
using internal::GridLock;
using internal::kManifestName;
using internal::kPreparedName;
using internal::replacement_name;
using nlohmann::json;

Grid::Grid(Grid&&) noexcept = default;
Grid& Grid::operator=(Grid&&) noexcept = default;
Grid::~Grid() {
  remove_kept_files();
  for (int fd : fds_) ::close(fd);
  for (int fd : replacement_fds_) ::close(fd);
  for (int fd : coef_fds_) ::close(fd);
}

std::string Grid::checksum_path(int64_t generation) const {
  return internal::join_path(dir_, checksum_file_name(generation));
}

Status Grid::load_checksums() {
  checksums_ = PlaneChecksums(manifest_.shape.nz);
  if (manifest_.checksum_generation == 0) return Status::Ok();
  const std::string path = checksum_path(manifest_.checksum_generation);
  auto text = internal::read_own_file(path);
  if (!text.ok()) {
    checksum_problem_ = text.status().message();
    return Status::Ok();
  }
  auto table = PlaneChecksums::from_json(*text, manifest_.shape.nz, manifest_.checksum_algorithm());
  if (!table.ok()) {
    checksum_problem_ = path + ": " + table.status().message();
    return Status::Ok();
  }
  checksums_ = std::move(table).value();
  return Status::Ok();
}

Status Grid::enable_verification() {
  if (!checksum_problem_.empty()) {
    return corrupt("cannot verify " + dir_ + ": " + checksum_problem_ + "; run 'deepgrid fsck " +
                   dir_ + "'");
  }
  if (!checksums_.complete()) {
    return invalid_argument("grid " + dir_ +
                            " has no checksums to verify (written before format version 2); "
                            "run once without --verify to record them");
  }
  verify_ = true;
  return Status::Ok();
}

void Grid::verify_if_recorded() {
  if (checksum_problem_.empty() && checksums_.complete()) verify_ = true;
}

void Grid::record_plane(int64_t z, const void* values) {
  record_plane_hash(z, plane_hash(values, manifest_.plane_hashing()));
}

void Grid::record_plane_hash(int64_t z, uint64_t hash) { checksums_.set(z, hash); }

Status Grid::verify_plane(int64_t z, const void* values) const {
  if (!verify_) return Status::Ok();
  return verify_plane_hash(z, plane_hash(values, manifest_.plane_hashing()));
}

Status Grid::verify_plane_hash(int64_t z, uint64_t hash) const {
  return verify_ ? check_plane_hash(z, hash) : Status::Ok();
}

Status Grid::check_plane_hash(int64_t z, uint64_t hash) const {
  if (hash == checksums_.hash(z)) return Status::Ok();
  const PlaneLocation loc = manifest_.locate(z);
  std::string where = file_path(loc.file) + " at offset " + std::to_string(loc.offset);
  if (manifest_.has_coef_files()) {
    const PlaneLocation coef = manifest_.locate_coef(z);
    where += " (its coefficients in " + coef_path(coef.file) + " at offset " +
             std::to_string(coef.offset) + ")";
  }
  return corrupt("plane " + std::to_string(z) + " in " + where +
                 " does not match its checksum: the data is damaged; run 'deepgrid fsck " + dir_ +
                 "' and restore the grid from a backup");
}

std::string Grid::file_path(int file, FileSet set) const {
  const std::string& path = manifest_.layout.files[static_cast<size_t>(file)].path;
  return internal::join_path(dir_, set == FileSet::kCurrent ? path : replacement_name(path));
}

namespace {

// Opens the files `paths` (of the sizes `files` lists, or longer: a crash while the spare slots
// grew, grow_spare, leaves a data file so), appending their descriptors to `fds`.
Status open_listed_files(const std::vector<std::string>& paths, const std::vector<DataFile>& files,
                         Grid::Mode mode, std::vector<int>* fds, bool* all_direct) {
  const int flags = mode == Grid::Mode::kReadWrite ? O_RDWR : O_RDONLY;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& path = paths[f];
    bool direct = false;
    auto fd = internal::open_data_file(path, flags, &direct);
    if (!fd.ok()) {
      if (fd.status().code() == ErrorCode::kNotFound) {
        return corrupt("data file " + path + " is missing; the grid is damaged");
      }
      if (fd.status().code() == ErrorCode::kInvalidArgument) {
        return invalid_argument("cannot open " + path +
                                (mode == Grid::Mode::kReadWrite ? " for writing" : "") +
                                ": permission denied; check the grid's file permissions");
      }
      return fd.status();
    }
    fds->push_back(*fd);
    *all_direct = *all_direct && direct;
    struct stat st {};
    if (::fstat(*fd, &st) != 0) return errno_status(errno, "stat", path);
    if (st.st_size < files[f].bytes) {
      return corrupt("data file " + path + " has " + std::to_string(st.st_size) +
                     " bytes but the manifest expects " + std::to_string(files[f].bytes) +
                     "; the grid is damaged (restore the file or re-create the grid)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status Grid::open_files(Mode mode) {
  direct_io_ = true;
  std::vector<std::string> paths;
  for (size_t f = 0; f < manifest_.layout.files.size(); ++f) {
    paths.push_back(file_path(static_cast<int>(f)));
  }
  DG_RETURN_IF_ERROR(open_listed_files(paths, manifest_.layout.files, mode, &fds_, &direct_io_));
  if (!coef_fds_.empty()) return Status::Ok();  // (open since the grid was: never replaced)
  coef_paths_.clear();
  for (const DataFile& f : manifest_.layout.coef_files) {
    coef_paths_.push_back(internal::join_path(dir_, f.path));
  }
  return open_listed_files(coef_paths_, manifest_.layout.coef_files, mode, &coef_fds_, &direct_io_);
}

Result<Grid> Grid::open(const std::string& dir, Mode mode) {
  if (!internal::is_directory(dir)) {
    return invalid_argument("grid directory " + dir +
                            " does not exist; create a grid with 'deepgrid create'");
  }
  const std::string mpath = internal::join_path(dir, kManifestName);
  if (::access(mpath.c_str(), F_OK) != 0) {
    return invalid_argument(dir + " is not a deepgrid grid (no " + kManifestName +
                            "); create one with 'deepgrid create'");
  }
  if (mode == Mode::kReadWrite && ::access(dir.c_str(), W_OK) != 0) {
    return invalid_argument("grid directory " + dir +
                            " is not writable; fix its permissions or copy the grid");
  }
  DG_ASSIGN_OR_RETURN(GridLock lock,
                      GridLock::acquire(dir, mode == Mode::kReadWrite ? GridLock::Kind::kExclusive
                                                                      : GridLock::Kind::kShared));
  DG_ASSIGN_OR_RETURN(std::string text, internal::read_own_file(mpath));
  auto m = Manifest::from_json(text);
  if (!m.ok()) return m.status().with_context(mpath);
  Grid g;
  g.lock_ = std::make_unique<GridLock>(std::move(lock));
  g.dir_ = dir;
  g.manifest_ = std::move(m).value();
  DG_RETURN_IF_ERROR(g.open_files(mode));
  DG_RETURN_IF_ERROR(g.load_checksums());
  g.load_sweep_record();
  g.load_prepared();
  if (mode == Mode::kReadWrite && !g.prepared_) g.remove_replacement_leftovers();
  return g;
}

void Grid::load_prepared() {
  auto text = internal::read_own_file(internal::join_path(dir_, kPreparedName));
  if (!text.ok()) return;
  auto m = Manifest::from_json(*text);
  if (m.ok()) prepared_ = std::move(m).value();  // (unreadable: never finished, so discarded)
}

void Grid::load_sweep_record() {
  auto text = internal::read_own_file(internal::join_path(dir_, kSweepRecordName));
  if (!text.ok()) return;  // no record: the data hold the manifest's step
  auto record = SweepRecord::from_json(*text);
  if (!record.ok()) {
    interrupted_sweep_ = "sweep whose record is unreadable (" + record.status().message() + ")";
    return;
  }
  if (record->step_from != manifest_.step) return;  // stale: the manifest committed it already
  interrupted_sweep_ = "sweep from step " + std::to_string(record->step_from) + " over " +
                       std::to_string(record->levels) + " steps started " + record->started + ", " +
                       std::to_string(record->done) + " of " + std::to_string(manifest_.shape.nz) +
                       " planes done";
  sweep_record_ = std::move(record).value();
}

Status Grid::save_sweep(const SweepRecord& record) const {
  if (record.done > 0) {
    for (size_t f = 0; f < fds_.size(); ++f) {
      if (::fdatasync(fds_[f]) != 0) {
        return errno_status(errno, "fsync", file_path(static_cast<int>(f)));
      }
    }
  }
  return internal::write_file_atomic(dir_, kSweepRecordName, record.to_json());
}

bool Grid::can_grow_spare() const {
  return manifest_.base + manifest_.shape.nz <= manifest_.slots();
}

bool Grid::can_add_planes() const {
  return can_grow_spare() && !sweep_record_ && !prepared_ && !manifest_.has_coef_files();
}

Status Grid::grow_spare(int64_t planes) {
  if (manifest_.layout.spare_planes >= planes) return Status::Ok();
  if (!can_grow_spare()) {
    return invalid_argument("grid " + dir_ + " has " +
                            std::to_string(manifest_.layout.spare_planes) +
                            " spare planes and cannot grow them now; lower --bt");
  }
  Manifest m = manifest_;
  m.layout.spare_planes = planes;
  DG_RETURN_IF_ERROR(lengthen_files(&m));
  return commit(m);
}

Status Grid::lengthen_files(Manifest* m) {
  DG_ASSIGN_OR_RETURN(const Layout grown,
                      plan_layout(m->shape, m->dtype, m->layout.files.size(), kDirectIoAlignment,
                                  m->layout.spare_planes, m->components(), m->coef_components()));
  m->layout = grown;
  m->layout.planes_per_chunk = manifest_.layout.planes_per_chunk;  // the slots stay where they are
  m->layout.coef_planes_per_chunk = manifest_.layout.coef_planes_per_chunk;  // (nz is the same)
  m->layout.coef_files = manifest_.layout.coef_files;
  for (size_t f = 0; f < m->layout.files.size(); ++f) {
    m->layout.files[f] = {manifest_.layout.files[f].path,
                          expected_file_bytes(m->shape, m->layout, f)};
    const int64_t grow = m->layout.files[f].bytes - manifest_.layout.files[f].bytes;
    const int rc = grow > 0 ? ::posix_fallocate(fds_[f], manifest_.layout.files[f].bytes, grow) : 0;
    if (rc != 0) {
      return errno_status(rc, "allocate planes in", file_path(static_cast<int>(f)),
                          manifest_.layout.files[f].bytes);
    }
  }
  return Status::Ok();
}

Status Grid::add_planes(int64_t below, int64_t above) {
  if (below < 0 || above < 0) return invalid_argument("cannot add a negative number of planes");
  if (below + above == 0) return Status::Ok();
  if (!can_add_planes()) {
    return invalid_argument("grid " + dir_ +
                            " cannot gain planes in place now (its planes wrap around its "
                            "ring, an interrupted sweep or a prepared state is pending, or its "
                            "coefficients are in coefficient files, which hold planes in place)");
  }
  Manifest m = manifest_;
  m.shape.nz += below + above;
  DG_RETURN_IF_ERROR(lengthen_files(&m));
  // The old planes keep their slots [base, base + nz), which do not wrap; the new ones take
  // the slots just before and after them, free since no sweep is pending.
  m.base = (manifest_.base - below + m.slots()) % m.slots();
  PlaneChecksums moved(m.shape.nz);
  for (int64_t z = 0; z < manifest_.shape.nz; ++z) {
    if (checksums_.known(z)) moved.set(z + below, checksums_.hash(z));
  }
  const Manifest before = manifest_;
  PlaneChecksums sums_before = std::exchange(checksums_, std::move(moved));
  manifest_ = m;  // (the zeros go through the new layout; committed below)
  const std::vector<std::byte> zeros(static_cast<size_t>(m.layout.plane_bytes));
  Status st = Status::Ok();
  auto write_zeros = [&](int64_t z0, int64_t count) {
    for (int64_t z = z0; z < z0 + count && st.ok(); ++z) st = write_planes(z, 1, zeros.data());
  };
  write_zeros(0, below);
  write_zeros(below + before.shape.nz, above);
  if (st.ok()) st = commit(m);
  if (!st.ok()) {
    manifest_ = before;
    checksums_ = std::move(sums_before);
  }
  return st;
}

PlaneLocation Grid::locate(int64_t z, FileSet set) const {
  return manifest_.locate_slot(manifest_.slot_of(z, set == FileSet::kCurrent ? manifest_.base : 0));
}

Status Grid::create_replacement() {
  if (prepared_) DG_RETURN_IF_ERROR(discard_prepared());
  for (int fd : replacement_fds_) ::close(fd);
  replacement_fds_.clear();
  if (kept_files_fit()) {
    // The files the last commit replaced: their blocks are allocated already.
    replacement_fds_ = std::move(kept_fds_);
    kept_fds_.clear();
    return Status::Ok();
  }
  remove_kept_files();
  for (size_t f = 0; f < manifest_.layout.files.size(); ++f) {
    const std::string path = file_path(static_cast<int>(f), FileSet::kReplacement);
    bool direct = false;
    DG_ASSIGN_OR_RETURN(const int fd,
                        internal::open_data_file(path, O_RDWR | O_CREAT | O_TRUNC, &direct));
    replacement_fds_.push_back(fd);
    const int64_t bytes = manifest_.layout.files[f].bytes;
    const int rc = bytes > 0 ? ::posix_fallocate(fd, 0, bytes) : 0;
    if (rc != 0) return errno_status(rc, "allocate", path, 0);
  }
  return Status::Ok();
}

Status Grid::sync_replacement() const {
  for (size_t f = 0; f < replacement_fds_.size(); ++f) {
    const std::string path = file_path(static_cast<int>(f), FileSet::kReplacement);
    if (::fdatasync(replacement_fds_[f]) != 0) return errno_status(errno, "fsync", path);
    DG_RETURN_IF_ERROR(internal::fsync_path(internal::parent_path(path)));
  }
  return Status::Ok();
}

Status Grid::commit_replacement(Manifest m, OldFiles old) {
  DG_RETURN_IF_ERROR(sync_replacement());
  std::vector<std::string> old_paths;
  for (size_t f = 0; f < m.layout.files.size(); ++f) {
    old_paths.push_back(file_path(static_cast<int>(f)));
    m.layout.files[f].path = replacement_name(m.layout.files[f].path);
  }
  m.base = 0;
  std::swap(fds_, replacement_fds_);
  DG_RETURN_IF_ERROR(commit(m));
  if (old == OldFiles::kKeep) {
    kept_fds_ = std::move(replacement_fds_);  // (their names are now the replacement's)
    replacement_fds_.clear();
    return Status::Ok();
  }
  for (int fd : replacement_fds_) ::close(fd);
  replacement_fds_.clear();
  for (const std::string& path : old_paths) ::unlink(path.c_str());  // a leftover is removed later
  return Status::Ok();
}

Status Grid::prepare_replacement(Manifest m) {
  DG_RETURN_IF_ERROR(sync_replacement());
  for (DataFile& f : m.layout.files) f.path = replacement_name(f.path);
  m.base = 0;
  DG_ASSIGN_OR_RETURN(Manifest next, manifest_to_commit(m));
  DG_RETURN_IF_ERROR(internal::write_file_atomic(dir_, kPreparedName, next.to_json()));
  prepared_ = std::move(next);
  return Status::Ok();
}

Status Grid::commit_prepared() {
  if (!prepared_) return invalid_argument(dir_ + " has no prepared replacement to commit");
  std::vector<std::string> old_paths;
  for (size_t f = 0; f < manifest_.layout.files.size(); ++f) {
    old_paths.push_back(file_path(static_cast<int>(f)));
  }
  const std::string from = internal::join_path(dir_, kPreparedName);
  if (::rename(from.c_str(), internal::join_path(dir_, kManifestName).c_str()) != 0) {
    return errno_status(errno, "commit the prepared replacement", from);
  }
  DG_RETURN_IF_ERROR(internal::fsync_path(dir_));
  for (int fd : fds_) ::close(fd);
  for (int fd : replacement_fds_) ::close(fd);
  fds_.clear();
  replacement_fds_.clear();
  Manifest next = std::move(*prepared_);
  prepared_.reset();
  DG_RETURN_IF_ERROR(committed(std::move(next)));
  for (const std::string& path : old_paths) ::unlink(path.c_str());  // a leftover is removed later
  DG_RETURN_IF_ERROR(open_files(Mode::kReadWrite));
  return load_checksums();  // (a Grid opened after the preparing one holds the old table)
}

Status Grid::discard_prepared() {
  if (::unlink(internal::join_path(dir_, kPreparedName).c_str()) == 0) {
    DG_RETURN_IF_ERROR(internal::fsync_path(dir_));
  }
  if (prepared_ && prepared_->checksum_generation > 0) {
    ::unlink(checksum_path(prepared_->checksum_generation).c_str());
  }
  prepared_.reset();
  for (int fd : replacement_fds_) ::close(fd);
  replacement_fds_.clear();
  remove_kept_files();
  remove_replacement_leftovers();
  return Status::Ok();
}

void Grid::remove_replacement_leftovers() const {
  for (size_t f = 0; f < manifest_.layout.files.size(); ++f) {
    ::unlink(file_path(static_cast<int>(f), FileSet::kReplacement).c_str());
    // (an upgrade that did not commit: upgrade.cc)
    if (!manifest_.has_coef_files()) {
      ::unlink(
          internal::join_path(dir_, internal::coef_file_path(manifest_.id, manifest_.stores, f))
              .c_str());
    }
  }
}

bool Grid::kept_files_fit() const {
  if (kept_fds_.empty() || kept_fds_.size() != manifest_.layout.files.size()) return false;
  for (size_t f = 0; f < kept_fds_.size(); ++f) {
    struct stat st {};
    if (::fstat(kept_fds_[f], &st) != 0 || st.st_size != manifest_.layout.files[f].bytes) {
      return false;
    }
  }
  return true;
}

void Grid::remove_kept_files() {
  if (kept_fds_.empty()) return;
  for (int fd : kept_fds_) ::close(fd);
  kept_fds_.clear();
  remove_replacement_leftovers();
}

namespace {

// One of a plane's parts on disk: its bytes, from `at` in the plane's memory, and where it is:
// the ring's slots or the coefficient files, `lead` bytes into each unit of `stride` bytes
// there (units: slots or planes, `per_chunk` to a chunk, `units` in all).
struct PlanePart {
  int64_t bytes = 0, at = 0, lead = 0, stride = 0, per_chunk = 0, units = 0;
  bool ring = true;
};

}  // namespace

// Moves planes [z0, z0 + count) between the files and `values` (packed planes): first every
// plane's part in the ring, then (grids with coefficient files) every plane's coefficients.
// `visit(plane, i)` sees each plane's values in `values`, after reading, before writing.
// A part goes straight between its file and `values` where `values` is aligned for direct I/O
// and the part is whole blocks: runs of planes at once where the part is the whole plane, else
// plane by plane. Otherwise through a bounce buffer of a chunk's planes at most (taking one
// costs a page fault per page: 0.14-0.18 s of a 0.71-0.87 s halo exchange of 16 MiB planes,
// measured).
template <typename Visit>
Status Grid::transfer_planes(int64_t z0, int64_t count, bool write, std::byte* values,
                             Visit visit) const {
  const Manifest& m = manifest_;
  const Layout& l = m.layout;
  if (z0 < 0 || count < 0 || z0 + count > m.shape.nz) {
    return invalid_argument("planes [" + std::to_string(z0) + ", " + std::to_string(z0 + count) +
                            ") are outside the grid's " + std::to_string(m.shape.nz) + " planes");
  }
  const int64_t pb = l.plane_bytes;
  if (write) {
    for (int64_t i = 0; i < count; ++i) visit(values + i * pb, i);
  }
  std::vector<PlanePart> parts = {
      {l.ring_bytes(), 0, 0, l.plane_stride, l.planes_per_chunk, m.slots(), true}};
  if (m.has_coef_files()) {
    parts.push_back({l.coef_bytes, l.ring_bytes(), l.coef_lead(), l.coef_stride(),
                     l.coef_planes_per_chunk, m.shape.nz, false});
  }
  const bool aligned = reinterpret_cast<uintptr_t>(values) % kDirectIoAlignment == 0;
  AlignedBuffer bounce;
  for (const PlanePart& part : parts) {
    const bool direct = aligned && part.bytes == part.stride && part.at % kDirectIoAlignment == 0 &&
                        pb % kDirectIoAlignment == 0;  // (so the lead is 0)
    const int64_t batch =
        direct && part.stride != pb ? 1 : std::min(part.per_chunk, std::max<int64_t>(count, 1));
    if (!direct && bounce.size() < static_cast<size_t>(batch * part.stride)) {
      bounce = AlignedBuffer(static_cast<size_t>(batch * part.stride));
      if (!bounce.ok()) return Status(ErrorCode::kResource, "out of memory for an I/O buffer");
    }
    for (int64_t z = z0; z < z0 + count;) {
      // A run of planes contiguous in one file: up to the end of z's chunk (or of the ring).
      const int64_t unit = part.ring ? m.slot_of(z, m.base) : z;
      const int64_t n = std::min(
          {z0 + count - z, batch, part.units - unit, part.per_chunk - unit % part.per_chunk});
      const PlaneLocation loc = part.ring ? m.locate_slot(unit) : m.locate_coef(unit);
      const int fd = (part.ring ? fds_ : coef_fds_)[static_cast<size_t>(loc.file)];
      const std::string path = part.ring ? file_path(loc.file) : coef_path(loc.file);
      const size_t bytes = static_cast<size_t>(n * part.stride);
      std::byte* at = values + (z - z0) * pb + part.at;
      std::byte* io = direct ? at : bounce.data();
      if (write) {
        for (int64_t i = 0; i < n && !direct; ++i) {
          std::byte* unit_bytes = io + i * part.stride;  // (its padding zeros: reproducible files)
          std::memset(unit_bytes, 0, static_cast<size_t>(part.lead));
          std::memcpy(unit_bytes + part.lead, at + i * pb, static_cast<size_t>(part.bytes));
          std::memset(unit_bytes + part.lead + part.bytes, 0,
                      static_cast<size_t>(part.stride - part.lead - part.bytes));
        }
        DG_RETURN_IF_ERROR(internal::pwrite_full(fd, io, bytes, loc.offset, path));
      } else {
        DG_RETURN_IF_ERROR(internal::pread_full(fd, io, bytes, loc.offset, path));
        for (int64_t i = 0; i < n && !direct; ++i) {
          std::memcpy(at + i * pb, io + i * part.stride + part.lead,
                      static_cast<size_t>(part.bytes));
        }
      }
      z += n;
    }
  }
  if (!write) {
    for (int64_t i = 0; i < count; ++i) visit(values + i * pb, i);
  }
  return Status::Ok();
}

Status Grid::read_planes(int64_t z0, int64_t count, void* dst) const {
  Status verified;
  DG_RETURN_IF_ERROR(transfer_planes(z0, count, false, static_cast<std::byte*>(dst),
                                     [&](const std::byte* plane, int64_t i) {
                                       if (verified.ok()) verified = verify_plane(z0 + i, plane);
                                     }));
  DG_RETURN_IF_ERROR(verified);
  bytes_read_ += static_cast<uint64_t>(count * manifest_.layout.plane_buffer_bytes());
  return Status::Ok();
}

Status Grid::write_planes(int64_t z0, int64_t count, const void* src) {
  // (transfer_planes only reads `values` when writing)
  auto* values = const_cast<std::byte*>(static_cast<const std::byte*>(src));
  DG_RETURN_IF_ERROR(
      transfer_planes(z0, count, true, values,
                      [&](const std::byte* plane, int64_t i) { record_plane(z0 + i, plane); }));
  bytes_written_ += static_cast<uint64_t>(count * manifest_.layout.plane_buffer_bytes());
  return Status::Ok();
}

Status Grid::commit(const Manifest& m) {
  for (size_t f = 0; f < fds_.size(); ++f) {
    if (::fdatasync(fds_[f]) != 0) {
      return errno_status(errno, "fsync", file_path(static_cast<int>(f)));
    }
  }
  for (size_t f = 0; f < coef_fds_.size(); ++f) {
    if (::fdatasync(coef_fds_[f]) != 0) return errno_status(errno, "fsync", coef_paths_[f]);
  }
  DG_ASSIGN_OR_RETURN(Manifest next, manifest_to_commit(m));
  DG_RETURN_IF_ERROR(internal::write_file_atomic(dir_, kManifestName, next.to_json()));
  return committed(std::move(next));
}

Result<Manifest> Grid::manifest_to_commit(const Manifest& m) const {
  Manifest next = m;
  // (a lead makes the record longer than its coefficients: one test finds either padding)
  const bool padded_coefs = next.layout.coef_stride() != next.layout.coef_bytes;
  next.version = padded_coefs                                 ? kManifestVersion
                 : next.has_coef_files()                      ? kAlignedCoefManifestVersion
                 : next.fields.empty() && next.scheme.empty() ? kOneFieldManifestVersion
                                                              : kFieldsManifestVersion;
  next.checksum_generation = 0;
  if (checksums_.complete()) {
    next.checksum_generation = manifest_.checksum_generation + 1;
    DG_RETURN_IF_ERROR(internal::write_file_atomic(dir_,
                                                   checksum_file_name(next.checksum_generation),
                                                   checksums_.to_json(next.checksum_algorithm())));
  }
  return next;
}

Status Grid::committed(Manifest next) {
  if (manifest_.checksum_generation > 0) {
    ::unlink(checksum_path(manifest_.checksum_generation)
                 .c_str());  // superseded; a leftover is harmless
  }
  manifest_ = std::move(next);
  checksum_problem_.clear();
  // The data now match the manifest: an in-place sweep's record goes (a leftover after a crash
  // here is stale: its step_from is no longer the manifest's step).
  if (::unlink(internal::join_path(dir_, kSweepRecordName).c_str()) == 0) {
    DG_RETURN_IF_ERROR(internal::fsync_path(dir_));
  }
  ::unlink(internal::join_path(dir_, kSideFileName).c_str());
  interrupted_sweep_.clear();
  sweep_record_.reset();
  return Status::Ok();
}

}  // namespace deepgrid
