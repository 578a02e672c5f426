#include "deepgrid/store.h"

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
#include "store/grid_lock.h"
#include "store/json_fields.h"

namespace deepgrid {

using internal::AlignedBuffer;
using internal::GridLock;
using internal::integer_at;
using nlohmann::json;

namespace {

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kPreparedName = "prepared.json";
constexpr const char* kFormatName = "deepgrid-grid";

// Exact size of data file f: the end of the last slot it holds.
int64_t expected_file_bytes(const Shape& s, const Layout& l, size_t f) {
  const int64_t nfiles = static_cast<int64_t>(l.files.size());
  const int64_t slots = s.nz + l.spare_planes;
  const int64_t chunks = (slots + l.planes_per_chunk - 1) / l.planes_per_chunk;
  int64_t bytes = 0;
  for (int64_t c = static_cast<int64_t>(f); c < chunks; c += nfiles) {
    int64_t planes = std::min(l.planes_per_chunk, slots - c * l.planes_per_chunk);
    bytes = (c / nfiles) * l.chunk_bytes() + planes * l.plane_stride;
  }
  return bytes;
}

// Spare slots beyond nz a grid may have (growing them for deep sweeps needs at most
// 64 levels * radius 4 + 3 blocks of 64).
constexpr int64_t kMaxSparePlanes = 1024;

// The other name of a data file: writers of a whole new state alternate between the two.
std::string replacement_name(const std::string& path) {
  constexpr std::string_view kExt = ".dgd", kAlt = ".b.dgd";
  if (path.ends_with(kAlt)) return path.substr(0, path.size() - kAlt.size()) + std::string(kExt);
  return path.substr(0, path.size() - kExt.size()) + std::string(kAlt);
}

std::string random_id() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t default_spare_planes(int64_t nz) { return std::max<int64_t>(64, (nz + 15) / 16); }

int64_t Manifest::slot_of(int64_t z, int64_t with_base) const { return (z + with_base) % slots(); }

PlaneLocation Manifest::locate_slot(int64_t slot) const {
  const int64_t nfiles = static_cast<int64_t>(layout.files.size());
  const int64_t chunk = slot / layout.planes_per_chunk;
  const int64_t within = slot % layout.planes_per_chunk;
  return {static_cast<int>(chunk % nfiles),
          (chunk / nfiles) * layout.chunk_bytes() + within * layout.plane_stride};
}

int Manifest::component_index(std::string_view name) const {
  if (fields.empty()) return name == "u" ? 0 : -1;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Manifest::to_json() const {
  json files = json::array();
  for (const auto& f : layout.files) files.push_back({{"path", f.path}, {"bytes", f.bytes}});
  json j = internal::grid_header_json(kFormatName, version, {id, shape, dtype, step});
  j["base"] = base;
  j["layout"] = {{"plane_bytes", layout.plane_bytes},
                 {"plane_stride", layout.plane_stride},
                 {"planes_per_chunk", layout.planes_per_chunk},
                 {"spare_planes", layout.spare_planes},
                 {"files", files}};
  j["history"] = internal::history_json(history);
  internal::put_fields(&j, fields, scheme);
  if (checksum_generation > 0) {
    j["checksums"] = {{"algorithm", kChecksumAlgorithm},
                      {"generation", checksum_generation},
                      {"file", checksum_file_name(checksum_generation)}};
  }
  return j.dump(2) + "\n";
}

Result<Manifest> Manifest::from_json(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return corrupt("manifest is not valid JSON (truncated or damaged); restore it from a backup");
  }
  Manifest m;
  try {
    if (j.value("format", "") != kFormatName) {
      return corrupt("manifest is not a deepgrid grid manifest (format field missing)");
    }
    m.version = static_cast<int>(std::clamp<int64_t>(integer_at(j, "version"), -1, 1 << 20));
    if (m.version > kManifestVersion) {
      return unsupported("grid was written by a newer deepgrid (format version " +
                         std::to_string(m.version) + "; this one reads up to " +
                         std::to_string(kManifestVersion) + "); upgrade deepgrid");
    }
    if (m.version < 1) return corrupt("manifest has invalid format version");
    DG_ASSIGN_OR_RETURN(const internal::GridHeader header, internal::read_grid_header(j));
    m.id = header.id;
    m.shape = header.shape;
    m.dtype = header.dtype;
    m.step = header.step;
    const json& l = j.at("layout");
    m.layout.plane_bytes = integer_at(l, "plane_bytes");
    m.layout.plane_stride = integer_at(l, "plane_stride");
    m.layout.planes_per_chunk = integer_at(l, "planes_per_chunk");
    if (m.version >= 3) {
      m.layout.spare_planes = integer_at(l, "spare_planes");
      m.base = integer_at(j, "base");
    }
    for (const auto& f : l.at("files")) {
      m.layout.files.push_back({f.at("path").get<std::string>(), integer_at(f, "bytes")});
    }
    if (const auto c = j.find("checksums"); c != j.end()) {
      if (c->at("algorithm").get<std::string>() != kChecksumAlgorithm) {
        return unsupported(
            "grid's checksums use an algorithm this deepgrid does not know; "
            "upgrade deepgrid");
      }
      m.checksum_generation = integer_at(*c, "generation");
      if (m.checksum_generation < 1) return corrupt("manifest has an invalid checksum generation");
    }
    internal::read_fields(j, &m.fields, &m.scheme);
    m.history = internal::read_history(j);
  } catch (const std::exception& e) {  // json::exception, or integer_at's
    return corrupt(std::string("manifest is missing a field or has a wrong type: ") + e.what());
  }
  Status shape_ok = validate_shape(m.shape);
  if (!shape_ok.ok()) return corrupt("manifest: " + shape_ok.message());
  // planes_per_chunk and the spare slots are bounded before anything multiplies them.
  if (m.layout.spare_planes < 0 ||
      m.layout.spare_planes > std::max<int64_t>(m.shape.nz, kMaxSparePlanes)) {
    return corrupt("manifest layout has an invalid spare_planes");
  }
  if (m.layout.planes_per_chunk < 1 || m.layout.planes_per_chunk > m.slots()) {
    return corrupt("manifest layout has an invalid planes_per_chunk");
  }
  if (m.base < 0 || m.base >= m.slots()) return corrupt("manifest has an invalid base");
  DG_ASSIGN_OR_RETURN(Layout expected,
                      plan_layout(m.shape, m.dtype, m.layout.files.size(), kDirectIoAlignment,
                                  m.layout.spare_planes, m.components()));
  if (m.step < 0 || m.layout.files.empty() || m.layout.plane_bytes != expected.plane_bytes ||
      m.layout.plane_stride != expected.plane_stride) {
    return corrupt("manifest layout is inconsistent with its shape and dtype");
  }
  for (size_t f = 0; f < m.layout.files.size(); ++f) {
    if (m.layout.files[f].bytes != expected_file_bytes(m.shape, m.layout, f)) {
      return corrupt("manifest lists a wrong size for data file " + m.layout.files[f].path);
    }
  }
  return m;
}

Result<Layout> plan_layout(const Shape& shape, DType dtype, size_t n_stores,
                           int64_t chunk_target_bytes, int64_t spare_planes, int components) {
  DG_RETURN_IF_ERROR(validate_shape(shape));
  Layout l;
  int64_t plane_bytes = 0;
  if (components < 1 ||
      !checked_mul(shape.plane_points(), static_cast<int64_t>(dtype_size(dtype)) * components,
                   &plane_bytes)) {
    return invalid_argument("shape " + shape.to_string() + " is too large");
  }
  l.plane_bytes = plane_bytes;
  l.plane_stride = round_up(plane_bytes, kDirectIoAlignment);
  int64_t ring_bytes = 0;
  if (spare_planes < 0 || spare_planes > std::max<int64_t>(shape.nz, kMaxSparePlanes) ||
      !checked_mul(shape.nz + spare_planes, l.plane_stride, &ring_bytes)) {
    return invalid_argument("shape " + shape.to_string() + " with " + std::to_string(spare_planes) +
                            " spare planes is too large");
  }
  l.spare_planes = spare_planes;
  l.planes_per_chunk = std::clamp<int64_t>(chunk_target_bytes / l.plane_stride, 1,
                                           std::max<int64_t>(1, shape.nz + spare_planes));
  const size_t files = std::max<size_t>(1, n_stores);
  l.files.resize(files);
  for (size_t f = 0; f < files; ++f) l.files[f].bytes = expected_file_bytes(shape, l, f);
  return l;
}

Grid::Grid(Grid&&) noexcept = default;
Grid& Grid::operator=(Grid&&) noexcept = default;
Grid::~Grid() {
  for (int fd : fds_) ::close(fd);
  for (int fd : replacement_fds_) ::close(fd);
}

std::string Grid::checksum_path(int64_t generation) const {
  return internal::join_path(dir_, checksum_file_name(generation));
}

Status Grid::load_checksums() {
  checksums_ = PlaneChecksums(manifest_.shape.nz);
  if (manifest_.checksum_generation == 0) return Status::Ok();
  const std::string path = checksum_path(manifest_.checksum_generation);
  auto text = internal::read_small_file(path);
  if (!text.ok()) {
    checksum_problem_ = text.status().message();
    return Status::Ok();
  }
  auto table = PlaneChecksums::from_json(*text, manifest_.shape.nz);
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
  record_plane_hash(z, plane_hash(values, static_cast<size_t>(manifest_.layout.plane_bytes)));
}

void Grid::record_plane_hash(int64_t z, uint64_t hash) { checksums_.set(z, hash); }

Status Grid::verify_plane(int64_t z, const void* values) const {
  if (!verify_) return Status::Ok();
  return verify_plane_hash(z,
                           plane_hash(values, static_cast<size_t>(manifest_.layout.plane_bytes)));
}

Status Grid::verify_plane_hash(int64_t z, uint64_t hash) const {
  if (!verify_ || hash == checksums_.hash(z)) return Status::Ok();
  const PlaneLocation loc = manifest_.locate(z);
  return corrupt("plane " + std::to_string(z) + " in " + file_path(loc.file) + " at offset " +
                 std::to_string(loc.offset) +
                 " does not match its checksum: the data is damaged; run 'deepgrid fsck " + dir_ +
                 "' and restore the grid from a backup");
}

std::string Grid::file_path(int file, FileSet set) const {
  const std::string& path = manifest_.layout.files[static_cast<size_t>(file)].path;
  return internal::join_path(dir_, set == FileSet::kCurrent ? path : replacement_name(path));
}

Status Grid::open_files(Mode mode) {
  const int flags = mode == Mode::kReadWrite ? O_RDWR : O_RDONLY;
  direct_io_ = true;
  for (size_t f = 0; f < manifest_.layout.files.size(); ++f) {
    const std::string path = file_path(static_cast<int>(f));
    bool direct = false;
    auto fd = internal::open_data_file(path, flags, &direct);
    if (!fd.ok()) {
      if (fd.status().code() == ErrorCode::kNotFound) {
        return corrupt("data file " + path + " is missing; the grid is damaged");
      }
      if (fd.status().code() == ErrorCode::kInvalidArgument) {
        return invalid_argument("cannot open " + path +
                                (mode == Mode::kReadWrite ? " for writing" : "") +
                                ": permission denied; check the grid's file permissions");
      }
      return fd.status();
    }
    fds_.push_back(*fd);
    direct_io_ = direct_io_ && direct;
    struct stat st {};
    if (::fstat(*fd, &st) != 0) return errno_status(errno, "stat", path);
    // Longer is harmless: a crash while the spare slots grew (grow_spare) leaves it so.
    if (st.st_size < manifest_.layout.files[f].bytes) {
      return corrupt("data file " + path + " has " + std::to_string(st.st_size) +
                     " bytes but the manifest expects " +
                     std::to_string(manifest_.layout.files[f].bytes) +
                     "; the grid is damaged (restore the file or re-create the grid)");
    }
  }
  return Status::Ok();
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
  DG_ASSIGN_OR_RETURN(std::string text, internal::read_small_file(mpath));
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
  auto text = internal::read_small_file(internal::join_path(dir_, kPreparedName));
  if (!text.ok()) return;
  auto m = Manifest::from_json(*text);
  if (m.ok()) prepared_ = std::move(m).value();  // (unreadable: never finished, so discarded)
}

void Grid::load_sweep_record() {
  auto text = internal::read_small_file(internal::join_path(dir_, kSweepRecordName));
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
                                  m->layout.spare_planes, m->components()));
  m->layout = grown;
  m->layout.planes_per_chunk = manifest_.layout.planes_per_chunk;  // the slots stay where they are
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
  if (!can_grow_spare() || sweep_record_ || prepared_) {
    return invalid_argument("grid " + dir_ +
                            " cannot gain planes in place now (its planes wrap around its "
                            "ring, or an interrupted sweep or a prepared state is pending)");
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

Status Grid::commit_replacement(Manifest m) {
  DG_RETURN_IF_ERROR(sync_replacement());
  std::vector<std::string> old_paths;
  for (size_t f = 0; f < m.layout.files.size(); ++f) {
    old_paths.push_back(file_path(static_cast<int>(f)));
    m.layout.files[f].path = replacement_name(m.layout.files[f].path);
  }
  m.base = 0;
  std::swap(fds_, replacement_fds_);
  DG_RETURN_IF_ERROR(commit(m));
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
  remove_replacement_leftovers();
  return Status::Ok();
}

void Grid::remove_replacement_leftovers() const {
  for (size_t f = 0; f < manifest_.layout.files.size(); ++f) {
    ::unlink(file_path(static_cast<int>(f), FileSet::kReplacement).c_str());
  }
}

Result<Manifest> manifest_for(const CreateOptions& opt) {
  Manifest m;
  DG_ASSIGN_OR_RETURN(
      m.layout,
      plan_layout(opt.shape, opt.dtype, opt.stores.size(), opt.chunk_target_bytes,
                  opt.spare_planes >= 0 ? opt.spare_planes : default_spare_planes(opt.shape.nz),
                  std::max<int>(1, static_cast<int>(opt.fields.size()))));
  m.shape = opt.shape;
  m.dtype = opt.dtype;
  for (const FieldInit& f : opt.fields) m.fields.push_back(f.name);
  m.scheme = opt.scheme;
  return m;
}

Result<Grid> Grid::create(const std::string& dir, const CreateOptions& opt) {
  DG_ASSIGN_OR_RETURN(Manifest planned, manifest_for(opt));
  Layout& layout = planned.layout;
  // Check everything before touching the disk.
  const bool dir_existed = internal::is_directory(dir);
  if (dir_existed) {
    DG_ASSIGN_OR_RETURN(bool empty, internal::directory_is_empty(dir));
    if (!empty) {
      // A grid being worked on is named as such, with its holder.
      const std::string lock_path = internal::join_path(dir, internal::kLockFileName);
      if (::access(lock_path.c_str(), F_OK) == 0) {
        DG_RETURN_IF_ERROR(GridLock::acquire(dir, GridLock::Kind::kExclusive).status());
      }
      return invalid_argument("directory " + dir +
                              " exists and is not empty; choose a new directory for the grid");
    }
  } else {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      return invalid_argument(dir + " exists and is not a directory; choose another path");
    }
    const std::string parent = internal::parent_path(dir);
    if (!internal::is_directory(parent)) {
      return invalid_argument("parent directory " + parent + " of " + dir +
                              " does not exist; create it first");
    }
  }
  const std::string writable_probe = dir_existed ? dir : internal::parent_path(dir);
  if (::access(writable_probe.c_str(), W_OK) != 0) {
    return invalid_argument("directory " + writable_probe +
                            " is not writable; choose another location or fix permissions");
  }
  std::vector<std::string> store_dirs = opt.stores;
  for (const auto& s : store_dirs) {
    if (!internal::is_directory(s)) {
      return invalid_argument("store directory " + s + " does not exist; create it first");
    }
    if (::access(s.c_str(), W_OK) != 0) {
      return invalid_argument("store directory " + s + " is not writable; fix its permissions");
    }
  }
  const std::string id = random_id();
  for (size_t f = 0; f < layout.files.size(); ++f) {
    layout.files[f].path =
        store_dirs.empty()
            ? "data.0.dgd"
            : internal::join_path(internal::absolute_path(store_dirs[f]),
                                  "deepgrid-" + id + "." + std::to_string(f) + ".dgd");
  }
  for (size_t f = 0; f < layout.files.size(); ++f) {
    const std::string where = store_dirs.empty() ? writable_probe : store_dirs[f];
    DG_ASSIGN_OR_RETURN(uint64_t avail, internal::free_bytes(where));
    const uint64_t need = static_cast<uint64_t>(layout.files[f].bytes) + (1 << 20);
    if (avail < need) {
      return Status(ErrorCode::kNoSpace,
                    "not enough free space in " + where + ": the grid needs " + format_size(need) +
                        " there but " + format_size(avail) +
                        " is free; free space, choose a smaller shape or spread it with --store");
    }
  }

  Grid g;
  g.dir_ = dir;
  g.checksums_ = PlaneChecksums(opt.shape.nz);
  g.manifest_ = planned;
  g.manifest_.id = id;
  std::vector<FieldInit> inits = opt.fields;
  if (inits.empty()) inits.push_back({"u", opt.init});
  json init_record = opt.init.to_string();
  if (!opt.fields.empty()) {
    init_record = json::object();
    for (const FieldInit& f : opt.fields) init_record[f.name] = f.init.to_string();
  }
  g.manifest_.history.push_back({utc_now(), "create",
                                 json{{"shape", opt.shape.to_string()},
                                      {"dtype", dtype_name(opt.dtype)},
                                      {"init", init_record}}
                                     .dump()});

  auto cleanup = [&](Status st) -> Status {
    for (int fd : g.fds_) ::close(fd);
    g.fds_.clear();
    for (size_t f = 0; f < layout.files.size(); ++f)
      ::unlink(g.file_path(static_cast<int>(f)).c_str());
    ::unlink(internal::join_path(dir, std::string(kManifestName) + ".tmp").c_str());
    ::unlink(g.checksum_path(1).c_str());
    ::unlink(g.checksum_path(1).append(".tmp").c_str());
    g.lock_.reset();
    ::unlink(internal::join_path(dir, internal::kLockFileName).c_str());
    if (!dir_existed) ::rmdir(dir.c_str());
    return st;
  };

  if (!dir_existed && ::mkdir(dir.c_str(), 0755) != 0) {
    return errno_status(errno, "create directory", dir);
  }
  auto lock = GridLock::acquire(dir, GridLock::Kind::kExclusive);
  if (!lock.ok()) return cleanup(lock.status());
  g.lock_ = std::make_unique<GridLock>(std::move(lock).value());
  g.direct_io_ = true;
  for (size_t f = 0; f < layout.files.size(); ++f) {
    const std::string path = g.file_path(static_cast<int>(f));
    bool direct = false;
    auto fd = internal::open_data_file(path, O_RDWR | O_CREAT | O_EXCL, &direct);
    if (!fd.ok()) return cleanup(fd.status());
    g.fds_.push_back(*fd);
    g.direct_io_ = g.direct_io_ && direct;
    if (layout.files[f].bytes > 0) {
      int rc = ::posix_fallocate(*fd, 0, layout.files[f].bytes);
      if (rc != 0) return cleanup(errno_status(rc, "allocate", path, 0));
    }
  }
  const bool all_zero = std::all_of(inits.begin(), inits.end(), [](const FieldInit& f) {
    return f.init.kind == InitSpec::Kind::kZero;
  });
  if (all_zero) {  // fallocate gave zeros
    const std::vector<std::byte> zeros(static_cast<size_t>(layout.plane_bytes));
    for (int64_t z = 0; z < opt.shape.nz; ++z) g.record_plane(z, zeros.data());
  } else {
    const int64_t batch = layout.planes_per_chunk;
    Status st = dispatch_dtype(opt.dtype, [&](auto tag) -> Status {
      using T = decltype(tag);
      const int64_t points = opt.shape.plane_points();
      const int64_t plane = points * static_cast<int64_t>(inits.size());
      std::vector<T> planes(static_cast<size_t>(batch * plane));
      for (int64_t z0 = 0; z0 < opt.shape.nz; z0 += batch) {
        const int64_t n = std::min(batch, opt.shape.nz - z0);
        for (int64_t i = 0; i < n; ++i) {
          for (size_t c = 0; c < inits.size(); ++c) {
            init_plane(inits[c].init, opt.shape, z0 + i,
                       planes.data() + i * plane + static_cast<int64_t>(c) * points);
          }
        }
        DG_RETURN_IF_ERROR(g.write_planes(z0, n, planes.data()));
      }
      return Status::Ok();
    });
    if (!st.ok()) return cleanup(st);
  }
  Status st = g.commit(g.manifest_);
  if (!st.ok()) return cleanup(st);
  return g;
}

template <typename Copy>
Status Grid::transfer_planes(int64_t z0, int64_t count, bool write, Copy copy) const {
  const Layout& l = manifest_.layout;
  if (z0 < 0 || count < 0 || z0 + count > manifest_.shape.nz) {
    return invalid_argument("planes [" + std::to_string(z0) + ", " + std::to_string(z0 + count) +
                            ") are outside the grid's " + std::to_string(manifest_.shape.nz) +
                            " planes");
  }
  const int64_t batch = std::min(l.planes_per_chunk, std::max<int64_t>(count, 1));
  AlignedBuffer bounce(static_cast<size_t>(batch * l.plane_stride));
  if (!bounce.ok()) return Status(ErrorCode::kResource, "out of memory for an I/O buffer");
  int64_t z = z0;
  while (z < z0 + count) {
    // A run of planes that are contiguous in one file: up to the end of z's chunk or ring.
    const int64_t slot = manifest_.slot_of(z, manifest_.base);
    const int64_t n = std::min({z0 + count - z, batch, manifest_.slots() - slot,
                                l.planes_per_chunk - slot % l.planes_per_chunk});
    const PlaneLocation loc = manifest_.locate_slot(slot);
    const size_t bytes = static_cast<size_t>(n * l.plane_stride);
    const std::string path = file_path(loc.file);
    if (write) {
      for (int64_t i = 0; i < n; ++i) copy(bounce.data() + i * l.plane_stride, z - z0 + i);
      DG_RETURN_IF_ERROR(internal::pwrite_full(fds_[static_cast<size_t>(loc.file)], bounce.data(),
                                               bytes, loc.offset, path));
    } else {
      DG_RETURN_IF_ERROR(internal::pread_full(fds_[static_cast<size_t>(loc.file)], bounce.data(),
                                              bytes, loc.offset, path));
      for (int64_t i = 0; i < n; ++i) copy(bounce.data() + i * l.plane_stride, z - z0 + i);
    }
    z += n;
  }
  return Status::Ok();
}

Status Grid::read_planes(int64_t z0, int64_t count, void* dst) const {
  const int64_t pb = manifest_.layout.plane_bytes;
  auto* out = static_cast<std::byte*>(dst);
  Status verified;
  DG_RETURN_IF_ERROR(transfer_planes(z0, count, false, [&](std::byte* plane, int64_t i) {
    if (verified.ok()) verified = verify_plane(z0 + i, plane);
    std::memcpy(out + i * pb, plane, static_cast<size_t>(pb));
  }));
  DG_RETURN_IF_ERROR(verified);
  bytes_read_ += static_cast<uint64_t>(count * manifest_.layout.plane_stride);
  return Status::Ok();
}

Status Grid::write_planes(int64_t z0, int64_t count, const void* src) {
  const int64_t pb = manifest_.layout.plane_bytes;
  const auto* in = static_cast<const std::byte*>(src);
  DG_RETURN_IF_ERROR(transfer_planes(z0, count, true, [&](std::byte* plane, int64_t i) {
    std::memcpy(plane, in + i * pb, static_cast<size_t>(pb));
    record_plane(z0 + i, plane);
  }));
  bytes_written_ += static_cast<uint64_t>(count * manifest_.layout.plane_stride);
  return Status::Ok();
}

Status Grid::commit(const Manifest& m) {
  for (size_t f = 0; f < fds_.size(); ++f) {
    if (::fdatasync(fds_[f]) != 0) {
      return errno_status(errno, "fsync", file_path(static_cast<int>(f)));
    }
  }
  DG_ASSIGN_OR_RETURN(Manifest next, manifest_to_commit(m));
  DG_RETURN_IF_ERROR(internal::write_file_atomic(dir_, kManifestName, next.to_json()));
  return committed(std::move(next));
}

Result<Manifest> Grid::manifest_to_commit(const Manifest& m) const {
  Manifest next = m;
  next.version =
      next.fields.empty() && next.scheme.empty() ? kOneFieldManifestVersion : kManifestVersion;
  next.checksum_generation = 0;
  if (checksums_.complete()) {
    next.checksum_generation = manifest_.checksum_generation + 1;
    DG_RETURN_IF_ERROR(internal::write_file_atomic(
        dir_, checksum_file_name(next.checksum_generation), checksums_.to_json()));
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

Status create_for_scheme(const Scheme& scheme, CreateOptions& options) {
  DG_RETURN_IF_ERROR(scheme.check_dtype(options.dtype));
  options.fields = initial_fields(scheme, options.init);
  if (!scheme.is_stencil()) options.scheme = scheme.to_json();
  return Status::Ok();
}

}  // namespace deepgrid
