// VTKHDF ImageData (docs.vtk.org, "VTKHDF format specification") through libhdf5: the group
// /VTKHDF with attributes Version, Type, WholeExtent, Origin, Spacing, Direction and one
// dataset per field in /VTKHDF/PointData, shape (nz, ny, nx), x fastest as VTK's point order.
// A series index (version 2.0) adds a leading time axis and the group /VTKHDF/Steps.
#include "deepgrid/vtkhdf.h"

#include <dirent.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/file_util.h"

namespace deepgrid {
namespace {

// An HDF5 identifier, closed by its own close function when this goes.
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*closer)(hid_t)) : id_(id), close_(closer) {}
  H5Id(H5Id&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  H5Id& operator=(H5Id&&) = delete;
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  bool ok() const { return id_ >= 0; }
  hid_t get() const { return id_; }
  // Closes now; false when HDF5 reports an error (a file's last writes happen here).
  bool close() { return close_(std::exchange(id_, -1)) >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

Status hdf5_failed(const std::string& path, const std::string& what) {
  return {ErrorCode::kIo, "HDF5 could not " + what + " in " + path +
                              " (is the disk full or the directory not writable?)"};
}

// HDF5 prints its error stack by default; deepgrid reports errors as Status instead.
void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

H5Id simple_space(std::initializer_list<hsize_t> dims) {
  const std::vector<hsize_t> d(dims);
  return {H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr), H5Sclose};
}

template <typename T>
bool put_attribute(hid_t on, const char* name, hid_t type, const std::vector<T>& values) {
  H5Id space = simple_space({values.size()});
  H5Id attr(H5Acreate2(on, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  return attr.ok() && H5Awrite(attr.get(), type, values.data()) >= 0;
}

bool put_string_attribute(hid_t on, const char* name, const std::string& value) {
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(H5Acreate2(on, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  return attr.ok() && H5Awrite(attr.get(), type.get(), value.data()) >= 0;
}

std::vector<int> components_of(const Manifest& m, const VtkhdfOptions& o) {
  if (!o.components.empty()) return o.components;
  std::vector<int> all(static_cast<size_t>(m.components()));
  for (size_t c = 0; c < all.size(); ++c) all[c] = static_cast<int>(c);
  return all;
}

// What describes the points and arrays of a file or an index of grid `m` with these options:
// the grid's id, the extent, spacing and origin, the arrays' names (sorted). An index found in
// a snapshot directory must say the same (check_series_dir).
struct IndexFacts {
  std::string grid_id;
  std::vector<int64_t> extent;
  std::vector<double> spacing, origin;
  std::vector<std::string> arrays;
  bool operator==(const IndexFacts&) const = default;
};

IndexFacts facts_of(const Manifest& m, const VtkhdfOptions& o) {
  const Shape d = vtkhdf_shape(m.shape, o.downsample);
  const double k = static_cast<double>(o.downsample);
  IndexFacts f;
  f.grid_id = m.id;
  f.extent = {0, d.nx - 1, 0, d.ny - 1, 0, d.nz - 1};
  f.spacing = {o.spacing[0] * k, o.spacing[1] * k, o.spacing[2] * k};
  f.origin.assign(o.origin.begin(), o.origin.end());
  const std::vector<std::string> names = m.field_names();
  for (int c : components_of(m, o)) f.arrays.push_back(names[static_cast<size_t>(c)]);
  std::sort(f.arrays.begin(), f.arrays.end());
  return f;
}

// The attributes of /VTKHDF that describe the points: the same in a file and in an index.
bool put_image_attributes(hid_t group, const IndexFacts& f, int64_t version_major) {
  return put_attribute<int64_t>(group, "Version", H5T_NATIVE_INT64, {version_major, 0}) &&
         put_string_attribute(group, "Type", "ImageData") &&
         put_attribute(group, "WholeExtent", H5T_NATIVE_INT64, f.extent) &&
         put_attribute(group, "Origin", H5T_NATIVE_DOUBLE, f.origin) &&
         put_attribute(group, "Spacing", H5T_NATIVE_DOUBLE, f.spacing) &&
         put_attribute<double>(group, "Direction", H5T_NATIVE_DOUBLE, {1, 0, 0, 0, 1, 0, 0, 0, 1});
}

// What tells a file of this grid and these options from another: the grid's id, beside the
// time of the data, on the file's root group (outside /VTKHDF, which readers ignore).
bool put_provenance(hid_t file, const Manifest& m) {
  return put_string_attribute(file, "deepgrid_grid_id", m.id);
}

hid_t file_type(DType t) { return t == DType::kF32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE; }
hid_t memory_type(DType t) { return t == DType::kF32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE; }

// Copies every K-th point of every K-th row of one component's plane into `out`.
void downsample_plane(const Manifest& m, const std::byte* plane, int64_t k, std::byte* out) {
  const size_t size = dtype_size(m.dtype);
  const Shape d = vtkhdf_shape(m.shape, k);
  for (int64_t y = 0; y < d.ny; ++y) {
    for (int64_t x = 0; x < d.nx; ++x) {
      std::memcpy(out + static_cast<size_t>(y * d.nx + x) * size,
                  plane + static_cast<size_t>(y * k * m.shape.nx + x * k) * size, size);
    }
  }
}

// The file's contents, into `path` (which write_vtkhdf renames when they are whole).
Status write_file(const Manifest& m, const io::PlaneSource& planes, int64_t step,
                  const std::string& path, const VtkhdfOptions& o) {
  H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return hdf5_failed(path, "create the file");
  H5Id group(H5Gcreate2(file.get(), "VTKHDF", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!group.ok() || !put_image_attributes(group.get(), facts_of(m, o), 1) ||
      !put_provenance(file.get(), m) ||
      !put_attribute<int64_t>(file.get(), "deepgrid_step", H5T_NATIVE_INT64, {step})) {
    return hdf5_failed(path, "write the attributes");
  }
  H5Id point_data(H5Gcreate2(group.get(), "PointData", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  H5Gclose);
  const Shape d = vtkhdf_shape(m.shape, o.downsample);
  H5Id space = simple_space(
      {static_cast<hsize_t>(d.nz), static_cast<hsize_t>(d.ny), static_cast<hsize_t>(d.nx)});
  const std::vector<int> comps = components_of(m, o);
  const std::vector<std::string> names = m.field_names();
  std::vector<H5Id> arrays;
  for (int c : comps) {
    arrays.emplace_back(
        H5Dcreate2(point_data.get(), names[static_cast<size_t>(c)].c_str(), file_type(m.dtype),
                   space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
        H5Dclose);
    if (!arrays.back().ok()) return hdf5_failed(path, "create the array of a field");
  }
  const size_t plane_bytes = static_cast<size_t>(m.shape.plane_points()) * dtype_size(m.dtype);
  std::vector<std::byte> row_buffer(static_cast<size_t>(d.plane_points()) * dtype_size(m.dtype));
  H5Id memory = simple_space({static_cast<hsize_t>(d.plane_points())});
  Status st = planes([&](int64_t z, const void* values) {
    if (z % o.downsample != 0) return Status::Ok();
    const hsize_t start[3] = {static_cast<hsize_t>(z / o.downsample), 0, 0};
    const hsize_t count[3] = {1, static_cast<hsize_t>(d.ny), static_cast<hsize_t>(d.nx)};
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    for (size_t i = 0; i < comps.size(); ++i) {
      const auto* plane = static_cast<const std::byte*>(values) + comps[i] * plane_bytes;
      downsample_plane(m, plane, o.downsample, row_buffer.data());
      if (H5Dwrite(arrays[i].get(), memory_type(m.dtype), memory.get(), space.get(), H5P_DEFAULT,
                   row_buffer.data()) < 0) {
        return hdf5_failed(path, "write plane " + std::to_string(z));
      }
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  for (H5Id& a : arrays) {
    if (!a.close()) return hdf5_failed(path, "finish an array");
  }
  if (!point_data.close() || !group.close() || !file.close()) {
    return hdf5_failed(path, "finish the file");
  }
  return Status::Ok();
}

// Runs `write` into path.tmp, then syncs it and renames it to `path` (and syncs the directory),
// so that `path` is either absent, its old self, or whole.
template <typename Write>
Status write_atomically(const std::string& path, Write&& write) {
  quiet_hdf5();
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  Status st = write(tmp);
  if (st.ok()) st = internal::fsync_path(tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = errno_status(errno, "rename", tmp);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return internal::fsync_path(internal::parent_path(internal::absolute_path(path)));
}

}  // namespace

Shape vtkhdf_shape(const Shape& s, int64_t k) {
  auto points = [k](int64_t n) { return (n + k - 1) / k; };
  Shape d = s;
  d.nx = points(s.nx);
  d.ny = points(s.ny);
  d.nz = points(s.nz);
  return d;
}

uint64_t vtkhdf_bytes(const Manifest& m, const VtkhdfOptions& o) {
  const Shape d = vtkhdf_shape(m.shape, o.downsample);
  return static_cast<uint64_t>(d.nz * d.plane_points()) * dtype_size(m.dtype) *
         components_of(m, o).size();
}

Status check_vtkhdf_options(const Manifest& m, const VtkhdfOptions& o) {
  if (o.downsample < 1) {
    return invalid_argument("--downsample is " + std::to_string(o.downsample) +
                            "; give a whole number >= 1 (1 keeps every point)");
  }
  for (int i = 0; i < 3; ++i) {
    if (!(o.spacing[i] > 0) || !std::isfinite(o.spacing[i]) || !std::isfinite(o.origin[i])) {
      return invalid_argument(
          "the spacing must be finite and > 0 and the origin finite along x, y and z; give "
          "e.g. --spacing 10 or --spacing 10,10,5 and --origin 0,0,-100");
    }
  }
  for (int c : o.components) {
    if (c < 0 || c >= m.components()) {
      return invalid_argument("the grid has no field " + std::to_string(c));
    }
  }
  return Status::Ok();
}

Status write_vtkhdf(const Manifest& m, const io::PlaneSource& planes, int64_t step,
                    const std::string& path, const VtkhdfOptions& o) {
  DG_RETURN_IF_ERROR(check_vtkhdf_options(m, o));
  return write_atomically(
      path, [&](const std::string& tmp) { return write_file(m, planes, step, tmp, o); });
}

Status export_vtkhdf(const Grid& grid, const std::string& path, const VtkhdfOptions& o) {
  return write_vtkhdf(grid.manifest(), io::planes_of(grid), grid.manifest().step, path, o);
}

// --- series ------------------------------------------------------------------------------

std::string series_file_name(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%010lld.vtkhdf", static_cast<long long>(step));
  return name;
}

Result<std::vector<int64_t>> series_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return steps;
    return errno_status(errno, "list", dir);
  }
  while (const dirent* e = ::readdir(d)) {
    long long step = -1;
    int used = 0;
    if (std::sscanf(e->d_name, "step-%lld.vtkhdf%n", &step, &used) == 1 &&
        e->d_name[used] == '\0' && step >= 0 && series_file_name(step) == e->d_name) {
      steps.push_back(step);
    }
  }
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

namespace {

// One field's array in the index: a virtual dataset whose i-th time slice is the field's
// array in the file of steps[i] (named relative to the index, which HDF5 resolves from the
// index's own directory).
bool put_virtual_array(hid_t point_data, const std::string& name, const Manifest& m,
                       const VtkhdfOptions& o, const std::vector<int64_t>& steps) {
  const Shape d = vtkhdf_shape(m.shape, o.downsample);
  const hsize_t n = steps.size(), nz = d.nz, ny = d.ny, nx = d.nx;
  H5Id whole = simple_space({n, nz, ny, nx});
  H5Id one = simple_space({nz, ny, nx});
  H5Id plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const std::string source = "/VTKHDF/PointData/" + name;
  for (hsize_t i = 0; i < n; ++i) {
    const hsize_t start[4] = {i, 0, 0, 0}, count[4] = {1, nz, ny, nx};
    H5Sselect_hyperslab(whole.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    if (H5Pset_virtual(plist.get(), whole.get(), series_file_name(steps[i]).c_str(), source.c_str(),
                       one.get()) < 0) {
      return false;
    }
  }
  H5Sselect_all(whole.get());
  H5Id array(H5Dcreate2(point_data, name.c_str(), file_type(m.dtype), whole.get(), H5P_DEFAULT,
                        plist.get(), H5P_DEFAULT),
             H5Dclose);
  return array.ok();
}

bool put_steps(hid_t group, const std::vector<std::string>& arrays,
               const std::vector<int64_t>& steps) {
  H5Id st(H5Gcreate2(group, "Steps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!st.ok() || !put_attribute<int64_t>(st.get(), "NSteps", H5T_NATIVE_INT64,
                                          {static_cast<int64_t>(steps.size())})) {
    return false;
  }
  const std::vector<double> values(steps.begin(), steps.end());
  std::vector<int64_t> offsets(steps.size());
  for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<int64_t>(i);
  auto put_dataset = [](hid_t on, const char* name, hid_t type, const void* data, size_t n) {
    H5Id space = simple_space({n});
    H5Id ds(H5Dcreate2(on, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
    return ds.ok() && H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
  };
  if (!put_dataset(st.get(), "Values", H5T_NATIVE_DOUBLE, values.data(), values.size())) {
    return false;
  }
  H5Id off(H5Gcreate2(st.get(), "PointDataOffsets", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
           H5Gclose);
  for (const std::string& a : arrays) {
    if (!off.ok() ||
        !put_dataset(off.get(), a.c_str(), H5T_NATIVE_INT64, offsets.data(), offsets.size())) {
      return false;
    }
  }
  return true;
}

Status write_index(const std::string& path, const Manifest& m, const VtkhdfOptions& o,
                   const std::vector<int64_t>& steps) {
  H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return hdf5_failed(path, "create the file");
  H5Id group(H5Gcreate2(file.get(), "VTKHDF", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  H5Id point_data(H5Gcreate2(group.get(), "PointData", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  H5Gclose);
  if (!point_data.ok() || !put_image_attributes(group.get(), facts_of(m, o), 2) ||
      !put_provenance(file.get(), m)) {
    return hdf5_failed(path, "write the attributes");
  }
  std::vector<std::string> arrays;
  const std::vector<std::string> names = m.field_names();
  for (int c : components_of(m, o)) arrays.push_back(names[static_cast<size_t>(c)]);
  for (const std::string& a : arrays) {
    if (!put_virtual_array(point_data.get(), a, m, o, steps)) {
      return hdf5_failed(path, "write the index of field " + a);
    }
  }
  if (!put_steps(group.get(), arrays, steps)) return hdf5_failed(path, "write the steps");
  if (!point_data.close() || !group.close() || !file.close()) {
    return hdf5_failed(path, "finish the file");
  }
  return Status::Ok();
}

template <typename T>
std::vector<T> read_attribute(hid_t on, const char* name, hid_t type, size_t n) {
  std::vector<T> v(n);
  H5Id attr(H5Aopen(on, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Aread(attr.get(), type, v.data()) < 0) return {};
  return v;
}

std::string read_string_attribute(hid_t on, const char* name) {
  H5Id attr(H5Aopen(on, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return {};
  H5Id type(H5Aget_type(attr.get()), H5Tclose);
  std::string s(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), s.data()) < 0) return {};
  return s.substr(0, s.find('\0'));
}

Result<IndexFacts> read_index(const std::string& path) {
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  H5Id group(file.ok() ? H5Gopen2(file.get(), "VTKHDF", H5P_DEFAULT) : -1, H5Gclose);
  H5Id point_data(group.ok() ? H5Gopen2(group.get(), "PointData", H5P_DEFAULT) : -1, H5Gclose);
  if (!point_data.ok()) {
    return invalid_argument(path +
                            " is not a deepgrid snapshot index; choose another --snapshots "
                            "directory");
  }
  IndexFacts f;
  f.grid_id = read_string_attribute(file.get(), "deepgrid_grid_id");
  f.extent = read_attribute<int64_t>(group.get(), "WholeExtent", H5T_NATIVE_INT64, 6);
  f.spacing = read_attribute<double>(group.get(), "Spacing", H5T_NATIVE_DOUBLE, 3);
  f.origin = read_attribute<double>(group.get(), "Origin", H5T_NATIVE_DOUBLE, 3);
  H5G_info_t info{};
  H5Gget_info(point_data.get(), &info);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[256] = {};
    H5Lget_name_by_idx(point_data.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                       H5P_DEFAULT);
    f.arrays.emplace_back(name);
  }
  std::sort(f.arrays.begin(), f.arrays.end());
  return f;
}

}  // namespace

Status check_series_dir(const std::string& dir, const Manifest& m, const VtkhdfOptions& o) {
  DG_RETURN_IF_ERROR(check_vtkhdf_options(m, o));
  if (::access(dir.c_str(), F_OK) != 0) return Status::Ok();
  if (!internal::is_directory(dir)) {
    return invalid_argument("--snapshots " + dir +
                            " is a file; name a directory (made if missing) to hold them");
  }
  const std::string index = internal::join_path(dir, kSeriesIndexName);
  if (::access(index.c_str(), F_OK) != 0) return Status::Ok();
  quiet_hdf5();
  DG_ASSIGN_OR_RETURN(const IndexFacts found, read_index(index));
  if (found == facts_of(m, o)) return Status::Ok();
  return invalid_argument(
      dir + " holds snapshots of " +
      (found.grid_id == m.id ? std::string("other fields, points or spacing")
                             : std::string("another grid")) +
      "; give --snapshots a new directory, or the options its snapshots were taken with");
}

Status add_to_series(const std::string& dir, const Manifest& m, const io::PlaneSource& planes,
                     int64_t step, const VtkhdfOptions& o) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno_status(errno, "mkdir", dir);
  DG_RETURN_IF_ERROR(
      write_vtkhdf(m, planes, step, internal::join_path(dir, series_file_name(step)), o));
  DG_ASSIGN_OR_RETURN(const std::vector<int64_t> steps, series_steps(dir));
  return write_atomically(internal::join_path(dir, kSeriesIndexName),
                          [&](const std::string& tmp) { return write_index(tmp, m, o, steps); });
}

}  // namespace deepgrid
