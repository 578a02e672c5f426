// Creating a grid (Grid::create): the checks made before anything is written, the data files
// laid out over the store directories, and the initial condition written plane by plane.
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

using internal::GridLock;
using internal::kManifestName;
using nlohmann::json;

namespace {

std::string random_id() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Result<Manifest> manifest_for(const CreateOptions& opt) {
  Manifest m;
  DG_ASSIGN_OR_RETURN(
      m.layout,
      plan_layout(opt.shape, opt.dtype, opt.stores.size(), opt.chunk_target_bytes,
                  opt.spare_planes >= 0 ? opt.spare_planes : default_spare_planes(opt.shape.nz),
                  std::max<int>(1, static_cast<int>(opt.fields.size())),
                  opt.coefficient_components));
  m.shape = opt.shape;
  m.dtype = opt.dtype;
  for (const FieldInit& f : opt.fields) m.fields.push_back(f.name);
  m.scheme = opt.scheme;
  return m;
}

Result<bool> internal::check_new_grid_dir(const std::string& dir) {
  const bool existed = internal::is_directory(dir);
  if (existed) {
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
  const std::string writable_probe = existed ? dir : internal::parent_path(dir);
  if (::access(writable_probe.c_str(), W_OK) != 0) {
    return invalid_argument("directory " + writable_probe +
                            " is not writable; choose another location or fix permissions");
  }
  return existed;
}

namespace {

// Records the stores (absolute, normal) and names the data files in them (grid_paths.h).
void name_data_files(Manifest* m, const std::vector<std::string>& stores) {
  m->stores.clear();
  for (const std::string& s : stores) m->stores.push_back(internal::normal_store_path(s));
  for (size_t f = 0; f < m->layout.files.size(); ++f) {
    m->layout.files[f].path = internal::data_file_path(m->id, m->stores, f);
  }
  for (size_t f = 0; f < m->layout.coef_files.size(); ++f) {
    m->layout.coef_files[f].path = internal::coef_file_path(m->id, m->stores, f);
  }
}

// kNoSpace, with the fix, when a data file's directory (`home` without stores) lacks room.
Status check_free_space(const Layout& layout, const std::vector<std::string>& stores,
                        const std::string& home) {
  for (size_t f = 0; f < layout.files.size(); ++f) {
    const std::string where = stores.empty() ? home : stores[f];
    DG_ASSIGN_OR_RETURN(uint64_t avail, internal::free_bytes(where));
    const int64_t coef = f < layout.coef_files.size() ? layout.coef_files[f].bytes : 0;
    const uint64_t need = static_cast<uint64_t>(layout.files[f].bytes + coef) + (1 << 20);
    if (avail < need) {
      return Status(ErrorCode::kNoSpace,
                    "not enough free space in " + where + ": the grid needs " + format_size(need) +
                        " there but " + format_size(avail) +
                        " is free; free space, choose a smaller shape or spread it with --store");
    }
  }
  return Status::Ok();
}

// The history entry of the creation: shape, dtype and each field's initial condition.
HistoryEntry creation_record(const CreateOptions& opt) {
  json init_record = opt.init.to_string();
  if (!opt.fields.empty()) {
    init_record = json::object();
    for (const FieldInit& f : opt.fields) init_record[f.name] = f.init.to_string();
  }
  return {
      utc_now(), "create",
      json{
          {"shape", opt.shape.to_string()}, {"dtype", dtype_name(opt.dtype)}, {"init", init_record}}
          .dump()};
}

// Writes each field's initial condition, a chunk of planes at a time (all-zero fields were
// zeroed by fallocate: only their checksums are recorded).
Status write_initial_planes(Grid& g, const CreateOptions& opt) {
  std::vector<FieldInit> inits = opt.fields;
  if (inits.empty()) inits.push_back({"u", opt.init});
  const Layout& layout = g.manifest().layout;
  const bool all_zero = std::all_of(inits.begin(), inits.end(), [](const FieldInit& f) {
    return f.init.kind == InitSpec::Kind::kZero;
  });
  if (all_zero) {
    const std::vector<std::byte> zeros(static_cast<size_t>(layout.plane_bytes));
    for (int64_t z = 0; z < opt.shape.nz; ++z) g.record_plane(z, zeros.data());
    return Status::Ok();
  }
  const int64_t batch = layout.planes_per_chunk;
  return dispatch_dtype(opt.dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    const int64_t points = opt.shape.plane_points();
    const int64_t plane = points * static_cast<int64_t>(inits.size());
    // Aligned, so that write_planes sends it to the files without a bounce buffer.
    internal::AlignedBuffer buffer(static_cast<size_t>(batch * plane) * sizeof(T));
    if (!buffer.ok()) return Status(ErrorCode::kResource, "out of memory for the initial planes");
    T* const planes = buffer.data<T>();
    for (int64_t z0 = 0; z0 < opt.shape.nz; z0 += batch) {
      const int64_t n = std::min(batch, opt.shape.nz - z0);
      for (int64_t i = 0; i < n; ++i) {
        for (size_t c = 0; c < inits.size(); ++c) {
          init_plane(inits[c].init, opt.shape, z0 + i,
                     planes + i * plane + static_cast<int64_t>(c) * points);
        }
      }
      DG_RETURN_IF_ERROR(g.write_planes(z0, n, planes));
    }
    return Status::Ok();
  });
}

}  // namespace

Result<Grid> Grid::create(const std::string& dir, const CreateOptions& opt) {
  DG_ASSIGN_OR_RETURN(Manifest planned, manifest_for(opt));
  Layout& layout = planned.layout;
  // Check everything before touching the disk.
  DG_ASSIGN_OR_RETURN(const bool dir_existed, internal::check_new_grid_dir(dir));
  DG_RETURN_IF_ERROR(internal::check_store_dirs(opt.stores));
  planned.id = random_id();
  name_data_files(&planned, opt.stores);
  DG_RETURN_IF_ERROR(
      check_free_space(layout, opt.stores, dir_existed ? dir : internal::parent_path(dir)));

  Grid g;
  g.dir_ = dir;
  g.checksums_ = PlaneChecksums(opt.shape.nz);
  g.manifest_ = planned;
  g.manifest_.history.push_back(creation_record(opt));

  auto cleanup = [&](Status st) -> Status {
    for (int fd : g.fds_) ::close(fd);
    g.fds_.clear();
    for (int fd : g.coef_fds_) ::close(fd);
    g.coef_fds_.clear();
    for (size_t f = 0; f < layout.files.size(); ++f)
      ::unlink(g.file_path(static_cast<int>(f)).c_str());
    for (const std::string& path : g.coef_paths_) ::unlink(path.c_str());
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
  // Each file made and allocated; on failure, what was made is removed.
  auto make_files = [&](const std::vector<DataFile>& files, std::vector<int>* fds,
                        std::vector<std::string>* paths) -> Status {
    for (const DataFile& file : files) {
      const std::string path = internal::join_path(dir, file.path);
      bool direct = false;
      auto fd = internal::open_data_file(path, O_RDWR | O_CREAT | O_EXCL, &direct);
      if (!fd.ok()) return fd.status();
      fds->push_back(*fd);
      paths->push_back(path);
      g.direct_io_ = g.direct_io_ && direct;
      const int rc = file.bytes > 0 ? ::posix_fallocate(*fd, 0, file.bytes) : 0;
      if (rc != 0) return errno_status(rc, "allocate", path, 0);
    }
    return Status::Ok();
  };
  std::vector<std::string> ring_paths;
  Status made = make_files(layout.files, &g.fds_, &ring_paths);
  if (made.ok()) made = make_files(layout.coef_files, &g.coef_fds_, &g.coef_paths_);
  if (!made.ok()) return cleanup(made);
  Status st = write_initial_planes(g, opt);
  if (st.ok()) st = g.commit(g.manifest_);
  if (!st.ok()) return cleanup(st);
  return g;
}

int coefficient_components(const Scheme& scheme) {
  int n = 0;
  for (int c = scheme.component_count() - 1; c > 0 && scheme.is_coefficient(c); --c) ++n;
  return n;
}

int Manifest::scheme_coef_components() const {
  if (scheme.empty()) return 0;
  const auto recorded = Scheme::from_grid_record(scheme);
  return recorded.ok() ? coefficient_components(*recorded) : 0;
}

Status create_for_scheme(const Scheme& scheme, CreateOptions& options) {
  DG_RETURN_IF_ERROR(scheme.check_dtype(options.dtype));
  options.fields = initial_fields(scheme, options.init);
  options.coefficient_components = coefficient_components(scheme);
  options.scheme = scheme.to_json();  // (a plain stencil too: the grid runs it without --stencil)
  return Status::Ok();
}

}  // namespace deepgrid
